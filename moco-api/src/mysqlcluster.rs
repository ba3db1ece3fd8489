//! The `MySQLCluster` custom resource (`moco.cybozu.com/v1beta2`), field for field as MOCO has it.
// kube's derives (`CustomResource`, `KubeSchema`) expand to code in which the lint reports the
// spec's `pub` as unreachable, though the type is exported: a false positive, allowed here only.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimSpec, PodSpec, ResourceRequirements, SecurityContext, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::backuppolicy::JobConfig;

/// Desired state of a MySQL cluster.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "moco.cybozu.com",
    version = "v1beta2",
    kind = "MySQLCluster",
    plural = "mysqlclusters",
    singular = "mysqlcluster",
    namespaced,
    status = "MySQLClusterStatus",
    derive = "PartialEq",
    doc = "MySQLCluster is a MySQL cluster managed by MOCO: a StatefulSet of mysqld instances with one primary and semi-synchronous replicas.",
    printcolumn = r#"{"name": "Available", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Available')].status"}"#,
    printcolumn = r#"{"name": "Healthy", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Healthy')].status"}"#,
    printcolumn = r#"{"name": "Primary", "type": "integer", "jsonPath": ".status.currentPrimaryIndex"}"#,
    printcolumn = r#"{"name": "Synced replicas", "type": "integer", "jsonPath": ".status.syncedReplicas"}"#,
    printcolumn = r#"{"name": "Errant replicas", "type": "integer", "jsonPath": ".status.errantReplicas"}"#,
    printcolumn = r#"{"name": "Clustering Active", "type": "string", "jsonPath": ".status.conditions[?(@.type=='ClusteringActive')].status"}"#,
    printcolumn = r#"{"name": "Reconcile Active", "type": "string", "jsonPath": ".status.conditions[?(@.type=='ReconciliationActive')].status"}"#,
    printcolumn = r#"{"name": "Last backup", "type": "string", "jsonPath": ".status.backup.time"}"#
)]
#[x_kube(
    validation = Rule::new("self.replicas % 2 == 1").message("replicas must be a positive odd number").field_path(".replicas"),
    validation = Rule::new("has(self.restore) == has(oldSelf.restore)").message("restore is not editable: it cannot be added to or removed from an existing cluster").field_path(".restore"),
    validation = Rule::new("!has(self.replicationSourceSecretName) || (has(oldSelf.replicationSourceSecretName) && self.replicationSourceSecretName == oldSelf.replicationSourceSecretName)").message("replicationSourceSecretName can only be removed on an existing cluster: replication can be initiated only with new clusters and the secret name cannot be changed").field_path(".replicationSourceSecretName")
)]
#[serde(rename_all = "camelCase")]
pub struct MySQLClusterSpec {
    /// Number of mysqld instances: a positive odd number. 1 means no replication; 3 or more
    /// enables semi-synchronous replication.
    #[serde(default = "default_replicas")]
    pub replicas: i32,

    /// Pod template for the mysqld Pods. It must contain a container named `mysqld`.
    pub pod_template: PodTemplateSpec,

    /// PersistentVolumeClaim templates of the StatefulSet. One must be named `mysql-data`, and
    /// every template must request storage.
    #[schemars(length(min = 1))]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,

    /// Template merged into the `moco-<name>-primary` Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_service_template: Option<ServiceTemplate>,

    /// Template merged into the `moco-<name>-replica` Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_service_template: Option<ServiceTemplate>,

    /// ConfigMap (same namespace) whose key/value pairs become `[mysqld]` options of my.cnf.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "mysqlConfigMapName"
    )]
    pub mysql_config_map_name: Option<String>,

    /// Secret with `HOST`, `PORT`, `USER`, `PASSWORD`, `INIT_USER` and `INIT_PASSWORD` of an
    /// external mysqld. When set, the cluster clones that server and replicates from it as an
    /// intermediate primary. It can be set only at creation; removing it stops the replication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_source_secret_name: Option<String>,

    /// Collector flag names of mysqld_exporter. When not empty, a `mysqld-exporter` sidecar runs
    /// with `--collect.<name>` for each entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectors: Vec<String>,

    /// Base of the `server_id` of the instances (instance i gets base + i). 0 or unset lets the
    /// admission webhook pick a random value in [1, 2^30].
    #[serde(default, rename = "serverIDBase", skip_serializing_if = "is_zero_i32")]
    pub server_id_base: i32,

    /// A replica whose apply lag reaches this many seconds is not ready. 0 disables the check.
    #[serde(
        default = "default_max_delay_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0))]
    pub max_delay_seconds: Option<i32>,

    /// When greater than 0 and some replica lags more than this many seconds, deletion of the
    /// primary Pod is refused (annotation `moco.cybozu.com/prevent-delete`). 0 disables it.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_delay_seconds_for_pod_deletion: i64,

    /// Longest time, in seconds, to wait for mysqld to start (startup probe and external clone).
    #[serde(default = "default_startup_wait_seconds")]
    #[schemars(range(min = 0))]
    pub startup_wait_seconds: i32,

    /// Cron schedule (robfig/cron standard syntax, `@every`, `@daily`…) of slow query log
    /// rotation. Empty means every 5 minutes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub log_rotation_schedule: String,

    /// Rotate the slow query log when it grows beyond this many bytes. 0 disables size-based rotation.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub log_rotation_size: i64,

    /// BackupPolicy (same namespace) that schedules backups of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_policy_name: Option<String>,

    /// Create the cluster by point-in-time recovery from a backup. Not editable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("restore is not editable"))]
    pub restore: Option<RestoreSpec>,

    /// Do not run the `slow-log` sidecar that prints the slow query log.
    #[serde(default, skip_serializing_if = "is_false")]
    pub disable_slow_query_log_container: bool,

    /// Go text/template of the fluent-bit configuration of the `slow-log` sidecar;
    /// `{{ .Path }}` expands to the slow log path. Unset uses the built-in configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_query_log_config_tmpl: Option<String>,

    /// Bind the mysqld admin interface to localhost and let the agent connect over localhost.
    #[serde(default, skip_serializing_if = "is_false")]
    pub agent_use_localhost: bool,

    /// Load the time zone tables when the data directory is first initialized.
    #[serde(default)]
    pub initialize_timezone_data: bool,

    /// Stop all instances (StatefulSet scaled to 0) while keeping the data volumes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub offline: bool,
}

fn default_replicas() -> i32 {
    1
}

fn default_max_delay_seconds() -> Option<i32> {
    Some(60)
}

fn default_startup_wait_seconds() -> i32 {
    3600
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// Labels and annotations of a template; `name` is accepted but ignored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Name of the object (ignored in Pod and Service templates).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Pod template of the mysqld Pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateSpec {
    /// Labels and annotations added to the Pods.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Pod specification; the MySQL server container must be named `mysqld`.
    pub spec: PodSpec,
    /// Replace `resources` and/or `securityContext` of system containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overwrite_containers: Vec<OverwriteContainer>,
}

/// System containers whose resources and security context can be overwritten.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum OverwriteableContainerName {
    /// The `agent` sidecar.
    #[serde(rename = "agent")]
    Agent,
    /// The `copy-moco-init` init container.
    #[serde(rename = "copy-moco-init")]
    CopyMocoInit,
    /// The `moco-init` init container.
    #[serde(rename = "moco-init")]
    MocoInit,
    /// The `slow-log` sidecar.
    #[serde(rename = "slow-log")]
    SlowLog,
    /// The `mysqld-exporter` sidecar.
    #[serde(rename = "mysqld-exporter")]
    MysqldExporter,
}

/// Settings that replace those of a system container.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverwriteContainer {
    /// Which system container.
    pub name: OverwriteableContainerName,
    /// Replaces the container's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Replaces the container's security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
}

/// A PersistentVolumeClaim template of the StatefulSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaim {
    /// Name (the volume name in the Pod), labels and annotations.
    pub metadata: ObjectMeta,
    /// Claim specification; `resources.requests.storage` is required.
    pub spec: PersistentVolumeClaimSpec,
}

/// Labels, annotations and spec merged into a Service MOCO creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTemplate {
    /// Labels and annotations (the name is ignored).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Service specification. The selector is always set by MOCO and ports named `mysql` and
    /// `mysqlx` are forced to MOCO's values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ServiceSpec>,
}

/// Point-in-time recovery parameters.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreSpec {
    /// Name of the MySQLCluster whose backups are restored.
    #[schemars(length(min = 1))]
    pub source_name: String,
    /// Namespace of that MySQLCluster.
    #[schemars(length(min = 1))]
    pub source_namespace: String,
    /// Point in time to restore to (RFC 3339, e.g. `2021-05-01T12:34:56Z`).
    pub restore_point: Time,
    /// Parameters of the restore Job Pod.
    pub job_config: JobConfig,
    /// Restore only this schema (`mysqlsh --includeSchemas`, `mysqlbinlog --database`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub schema: String,
    /// Restore only these users, comma separated `user@host` (`mysqlsh --includeUsers`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub users: String,
}

/// Observed state of a MySQL cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLClusterStatus {
    /// `Initialized`, `Available`, `Healthy`, `ClusteringActive`, `StatefulSetReady`,
    /// `ReconcileSuccess` and `ReconciliationActive`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Ordinal of the primary instance (0 initially).
    #[serde(default)]
    pub current_primary_index: i32,
    /// Number of ready instances, primary included.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub synced_replicas: i32,
    /// Number of instances with errant transactions.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub errant_replicas: i32,
    /// Ordinals of instances with errant transactions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errant_replica_list: Vec<i32>,
    /// The last successful backup.
    #[serde(default)]
    pub backup: BackupStatus,
    /// When the restore finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_time: Option<Time>,
    /// The initial clone from the external replication source completed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cloned: bool,
    /// moco-rs extension: instances `0..semiSyncMembers` acknowledge semi-sync commits; new
    /// instances of a growing cluster replicate asynchronously until they have caught up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync_members: Option<i32>,
    /// moco-rs extension: the fewest replica acknowledgements an acknowledged commit may have
    /// had, while below what the members need; a failover is judged by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync_min_acks: Option<i32>,
    /// Which generation was last reconciled, by which reconciler version.
    #[serde(default)]
    pub reconcile_info: ReconcileInfo,
}

/// The last successful backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Time of the backup; also names the object keys of its files in the bucket.
    #[serde(default)]
    pub time: Option<Time>,
    /// How long the backup took (Go duration, e.g. `1m2.5s`).
    #[serde(default)]
    pub elapsed: String,
    /// Ordinal of the instance the backup was taken from.
    #[serde(default)]
    pub source_index: i32,
    /// `server_uuid` of that instance.
    #[serde(default, rename = "sourceUUID")]
    pub source_uuid: String,
    /// `server_uuid` of every candidate instance, keyed by ordinal.
    #[serde(
        default,
        rename = "uuidSet",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub uuid_set: BTreeMap<String, String>,
    /// Binary log file the source was writing at the backup.
    #[serde(default)]
    pub binlog_filename: String,
    /// GTID set of the full dump.
    #[serde(default)]
    pub gtid_set: String,
    /// Size in bytes of the dump in the bucket.
    #[serde(default)]
    pub dump_size: i64,
    /// Size in bytes of the binary log tarball in the bucket.
    #[serde(default)]
    pub binlog_size: i64,
    /// Peak usage in bytes of the working directory.
    #[serde(default)]
    pub work_dir_usage: i64,
    /// Warnings of the backup.
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// Reconciler bookkeeping.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileInfo {
    /// `metadata.generation` of the last reconciliation.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub generation: i64,
    /// Version of the reconciler that did it.
    #[serde(default)]
    pub reconcile_version: i32,
}

impl MySQLCluster {
    /// `moco-<name>`: name of the StatefulSet, headless Service and ServiceAccount.
    pub fn prefixed_name(&self) -> String {
        format!("moco-{}", self.metadata.name.as_deref().unwrap_or_default())
    }
}
