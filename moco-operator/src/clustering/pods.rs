//! The one watch of the clusters' Pods. It fills the store the managers' rounds read their
//! Pods from (`moco_kube::pods::PodCache`), and it wakes a cluster's manager when one of its
//! Pods is being deleted or carries the demote annotation, so a switchover away from a deleted
//! primary happens within the mysqld container's 20-second `preStop` delay instead of at the
//! next check.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use moco_api::annotations::is_true;
use moco_api::labels::{ANNOTATION_DEMOTE, LABEL_INSTANCE};
use moco_kube::api::Scope;
use moco_kube::pods::{SELECTED, trim};

use super::Managers;

/// The cluster whose manager `pod` should wake, as `(namespace, name)`: a MOCO mysqld Pod
/// that is terminating or asked to step down.
pub fn wakes(pod: &Pod) -> Option<(String, String)> {
    let labels = pod.metadata.labels.as_ref()?;
    let demote = is_true(&pod.metadata, ANNOTATION_DEMOTE);
    if !(demote || pod.metadata.deletion_timestamp.is_some()) {
        return None;
    }
    Some((
        pod.metadata.namespace.clone()?,
        labels.get(LABEL_INSTANCE)?.clone(),
    ))
}

/// Watches the Pods of every cluster of `scope` into `cache` (the writer of a
/// `PodCache::new` for the same scope) until the stream ends, waking the managers that
/// must act now.
pub async fn watch_pods(
    client: Client,
    scope: &Scope,
    managers: Arc<Managers>,
    cache: Writer<Pod>,
) {
    let api: Api<Pod> = scope.api(client);
    let selector = SELECTED
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let config = watcher::Config::default().labels(&selector);
    let events = watcher::watcher(api, config)
        .default_backoff()
        .modify(trim)
        .reflect(cache);
    let mut events = std::pin::pin!(events);
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
