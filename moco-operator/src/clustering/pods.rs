//! Wakes a cluster's manager when one of its Pods is being deleted or carries the demote
//! annotation, so a switchover away from a deleted primary happens within the mysqld
//! container's 20-second `preStop` delay instead of at the next check.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use moco_api::labels::{
    ANNOTATION_DEMOTE, APP_MYSQL, CREATED_BY, LABEL_CREATED_BY, LABEL_INSTANCE, LABEL_NAME,
};

use super::Managers;
use crate::controller::Scope;

/// The cluster whose manager `pod` should wake, as `(namespace, name)`: a MOCO mysqld Pod
/// that is terminating or asked to step down.
pub fn wakes(pod: &Pod) -> Option<(String, String)> {
    let labels = pod.metadata.labels.as_ref()?;
    let demote = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DEMOTE))
        .is_some_and(|v| v == "true");
    if !(demote || pod.metadata.deletion_timestamp.is_some()) {
        return None;
    }
    Some((
        pod.metadata.namespace.clone()?,
        labels.get(LABEL_INSTANCE)?.clone(),
    ))
}

/// Watches the Pods of every cluster of `scope` until the stream ends.
pub async fn watch_pods(client: Client, scope: &Scope, managers: Arc<Managers>) {
    let api: Api<Pod> = scope.api(client);
    let config = watcher::Config::default().labels(&format!(
        "{LABEL_NAME}={APP_MYSQL},{LABEL_CREATED_BY}={CREATED_BY}"
    ));
    let mut events = std::pin::pin!(watcher::watcher(api, config));
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                if let Some((ns, name)) = wakes(&pod) {
                    tracing::debug!(namespace = %ns, cluster = %name, pod = ?pod.metadata.name, "waking clustering");
                    managers.wake(&ns, &name);
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "Pod watch"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_terminating_or_demoted_pods_wake_their_cluster() {
        let base = json!({"metadata": {"name": "moco-db-0", "namespace": "ns",
            "labels": {"app.kubernetes.io/instance": "db"}}});
        assert_eq!(wakes(&pod(base.clone())), None);
        let mut demoted = base.clone();
        demoted["metadata"]["annotations"] = json!({"moco.cybozu.com/demote": "true"});
        assert_eq!(wakes(&pod(demoted)), Some(("ns".into(), "db".into())));
        let mut deleting = base;
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-23T00:00:00Z");
        assert_eq!(wakes(&pod(deleting)), Some(("ns".into(), "db".into())));
    }
}
