//! What the Jobs read from and record on their MySQLCluster: the cluster and its Pods,
//! `status.backup` and `status.restoredTime`, and MOCO's Events (core `v1` Events named
//! `<cluster>.<hex unix nanoseconds>`, which the Jobs' Roles allow; the controller's
//! recorder is not used here).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use moco_api::labels::{APP_MYSQL, CREATED_BY, LABEL_CREATED_BY, LABEL_INSTANCE, LABEL_NAME};
use moco_api::mysqlcluster::{BackupStatus, MySQLCluster};

use super::JobError;

/// How many times a status write that lost a race (409) is tried again on a fresh read.
const CONFLICT_RETRIES: usize = 10;

/// An Event's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// One of MOCO's Events about backups and restores: reason, type and message as MOCO's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobEvent {
    /// `reason`.
    pub reason: &'static str,
    /// `type`.
    pub kind: EventType,
    /// `message`.
    pub message: &'static str,
}

/// A backup was stored.
pub const BACKUP_CREATED: JobEvent = JobEvent {
    reason: "BackupCreated",
    kind: EventType::Normal,
    message: "Backup created",
};
/// A backup was stored without the binlogs since the previous one.
pub const BACKUP_NO_BINLOG: JobEvent = JobEvent {
    reason: "BackupNoBinlog",
    kind: EventType::Warning,
    message: "Backup created w/o binlog files",
};
/// A restore finished.
pub const RESTORED: JobEvent = JobEvent {
    reason: "Restored",
    kind: EventType::Normal,
    message: "Successfully restored data from backup",
};

/// The MySQLCluster `namespace/name` through the API.
#[derive(Clone)]
pub struct ClusterAccess {
    client: Client,
    namespace: String,
    name: String,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MySQLCluster {}/{}", self.namespace, self.name)
    }
}

impl ClusterAccess {
    /// The cluster `namespace/name`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        ClusterAccess {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    fn clusters(&self) -> Api<MySQLCluster> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// An error about this cluster.
    pub fn refuse(&self, message: impl Into<String>) -> JobError {
        JobError::Cluster {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            message: message.into(),
        }
    }

    /// The cluster now.
    pub async fn get(&self) -> Result<MySQLCluster, JobError> {
        self.clusters()
            .get(&self.name)
            .await
            .map_err(JobError::kube(format!("get {self:?}")))
    }

    /// The cluster's mysqld Pods (MOCO's labels).
    pub async fn pods(&self) -> Result<Vec<Pod>, JobError> {
        let selector = format!(
            "{LABEL_NAME}={APP_MYSQL},{LABEL_INSTANCE}={},{LABEL_CREATED_BY}={CREATED_BY}",
            self.name
        );
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        Ok(pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(JobError::kube(format!("list the Pods of {self:?}")))?
            .items)
    }

    /// Writes what `change` makes of the status, on a fresh read each time another writer
    /// (the controller records conditions every few seconds) got there first.
    pub async fn update_status(
        &self,
        change: impl Fn(&mut MySQLCluster),
    ) -> Result<MySQLCluster, JobError> {
        let api = self.clusters();
        let mut attempt = 0;
        loop {
            let mut cluster = self.get().await?;
            change(&mut cluster);
            match api
                .replace_status(&self.name, &PostParams::default(), &cluster)
                .await
            {
                Ok(written) => return Ok(written),
                Err(kube::Error::Api(e)) if e.code == 409 && attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                }
                Err(e) => return Err(JobError::kube(format!("update the status of {self:?}"))(e)),
            }
        }
    }

    /// Records `status.backup`.
    pub async fn record_backup(&self, backup: BackupStatus) -> Result<(), JobError> {
        self.update_status(|c| {
            c.status.get_or_insert_with(Default::default).backup = backup.clone();
        })
        .await
        .map(|_| ())
    }

    /// Deletes Pod `name` of the cluster (its StatefulSet creates it again).
    pub async fn delete_pod(&self, name: &str) -> Result<(), JobError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        pods.delete(name, &DeleteParams::default())
            .await
            .map_err(JobError::kube(format!(
                "delete Pod {}/{name}",
                self.namespace
            )))?;
        Ok(())
    }

    /// Creates `event` about `cluster`, as MOCO's Jobs do.
    pub async fn event(&self, cluster: &MySQLCluster, event: JobEvent) -> Result<(), JobError> {
        self.event_with_message(cluster, event, event.message).await
    }

    /// Creates `event` with `message` in place of its own, single-quoted values redacted and
    /// cut to size ([`crate::guard::tool_output::for_status`]): whoever reads the cluster's Events
    /// reads it.
    pub async fn event_with_message(
        &self,
        cluster: &MySQLCluster,
        event: JobEvent,
        message: &str,
    ) -> Result<(), JobError> {
        let message = crate::guard::tool_output::for_status(message);
        let now = k8s_openapi::jiff::Timestamp::now();
        let object = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", self.name, now.as_nanosecond())),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("moco.cybozu.com/v1beta2".into()),
                kind: Some("MySQLCluster".into()),
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                uid: cluster.metadata.uid.clone(),
                resource_version: cluster.metadata.resource_version.clone(),
                ..ObjectReference::default()
            },
            reason: Some(event.reason.into()),
            message: Some(message),
            type_: Some(
                match event.kind {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            source: Some(EventSource {
                component: Some("moco-backup".into()),
                ..EventSource::default()
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            ..Event::default()
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        events
            .create(&PostParams::default(), &object)
            .await
            .map_err(JobError::kube(format!(
                "create the {} Event of {self:?}",
                event.reason
            )))?;
        Ok(())
    }
}

/// The ordinals of the Pods of cluster `name` whose `Ready` condition is true.
pub fn ready_ordinals(name: &str, pods: &[Pod]) -> BTreeSet<u32> {
    let prefix = format!("moco-{name}-");
    pods.iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| {
            p.metadata
                .name
                .as_deref()?
                .strip_prefix(&prefix)?
                .parse()
                .ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}
        }))
        .unwrap()
    }

    #[test]
    fn only_ready_pods_of_the_cluster_count() {
        let pods = [
            pod("moco-db-0", "True"),
            pod("moco-db-1", "False"),
            pod("moco-db-2", "True"),
            pod("moco-dbx-3", "True"),
            pod("moco-db-x", "True"),
        ];
        assert_eq!(ready_ordinals("db", &pods), BTreeSet::from([0, 2]));
    }
}
