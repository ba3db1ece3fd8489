//! The `BackupPolicy` custom resource and the Job parameters shared with restores.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{Affinity, EnvFromSource, EnvVar, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How often and how to back up the MySQLClusters that reference this policy.
///
/// `schedule`, `timeZone`, `startingDeadlineSeconds`, `concurrencyPolicy`,
/// `successfulJobsHistoryLimit` and `failedJobsHistoryLimit` are copied to the backup CronJob;
/// `activeDeadlineSeconds` and `backoffLimit` to its Job template.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "moco.cybozu.com",
    version = "v1beta2",
    kind = "BackupPolicy",
    plural = "backuppolicies",
    singular = "backuppolicy",
    namespaced,
    derive = "PartialEq",
    doc = "BackupPolicy describes when and how MySQLClusters that reference it are backed up to object storage."
)]
#[serde(rename_all = "camelCase")]
pub struct BackupPolicySpec {
    /// Cron schedule of the backup CronJob.
    pub schedule: String,

    /// Time zone of the schedule (IANA name), copied to the CronJob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,

    /// Parameters of the backup Job Pod.
    pub job_config: JobConfig,

    /// Deadline in seconds for starting a Job that missed its scheduled time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,

    /// What to do when a backup is still running at the next scheduled time.
    #[serde(default = "default_concurrency_policy")]
    pub concurrency_policy: ConcurrencyPolicy,

    /// Seconds a backup Job may run before it is terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,

    /// Retries before a backup Job is marked failed (Kubernetes default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub backoff_limit: Option<i32>,

    /// Successful Jobs to keep (Kubernetes default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_jobs_history_limit: Option<i32>,

    /// Failed Jobs to keep (Kubernetes default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_jobs_history_limit: Option<i32>,
}

fn default_concurrency_policy() -> ConcurrencyPolicy {
    ConcurrencyPolicy::Allow
}

/// CronJob concurrency policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Let backups run concurrently.
    #[default]
    Allow,
    /// Skip a run while the previous one is still running.
    Forbid,
    /// Cancel the running backup and start a new one.
    Replace,
}

/// Parameters of a backup or restore Job Pod.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobConfig {
    /// ServiceAccount of the Pod (typically the one holding object storage credentials).
    #[schemars(length(min = 1))]
    pub service_account_name: String,

    /// Where backups are stored.
    pub bucket_config: BucketConfig,

    /// Volume mounted at `/work` as scratch space (a generic ephemeral volume is recommended).
    pub work_volume: VolumeSource,

    /// Parallelism of mysqlsh and zstd.
    #[serde(default = "default_threads")]
    #[schemars(range(min = 1))]
    pub threads: i32,

    /// CPU request of the container.
    #[serde(default = "default_cpu", skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,

    /// CPU limit of the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cpu: Option<Quantity>,

    /// Memory request of the container.
    #[serde(default = "default_memory", skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,

    /// Memory limit of the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory: Option<Quantity>,

    /// Environment variables from ConfigMaps or Secrets (e.g. object storage credentials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,

    /// Environment variables (e.g. `AWS_REGION`); `bucketName` may refer to them as `$(VAR)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,

    /// Scheduling constraints of the backup Pod (unset: prefer spreading backup Pods across
    /// nodes). Restore Jobs ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Extra volumes of the Pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,

    /// Extra mounts of the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
}

fn default_threads() -> i32 {
    4
}

fn default_cpu() -> Option<Quantity> {
    Some(Quantity("4".to_owned()))
}

fn default_memory() -> Option<Quantity> {
    Some(Quantity("4Gi".to_owned()))
}

/// Object storage bucket of the backups.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketConfig {
    /// Bucket name; may use `$(VAR)` to refer to an environment variable of the Job.
    #[schemars(length(min = 1))]
    pub bucket_name: String,

    /// Region of the bucket (or set `AWS_REGION`); required for S3 in practice.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,

    /// Endpoint URL of an S3-compatible (or Azure) service.
    #[serde(
        default,
        rename = "endpointURL",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(regex(pattern = r"^https?://.*"))]
    pub endpoint_url: String,

    /// Use path-style S3 URLs (needed by MinIO and other S3-compatible services).
    #[serde(default, skip_serializing_if = "is_false")]
    pub use_path_style: bool,

    /// Object storage API.
    #[serde(default = "default_backend_type")]
    pub backend_type: BackendType,

    /// Path of an extra CA certificate file inside the Job Pod (S3 only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_cert: String,
}

fn default_backend_type() -> BackendType {
    BackendType::S3
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// Object storage APIs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendType {
    /// Amazon S3 and compatible services.
    #[default]
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// Azure Blob Storage.
    Azure,
}

impl BackendType {
    /// The name the API spells it with (`s3`, `gcs`, `azure`), as the backup Jobs take it in
    /// `--backend-type`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendType::S3 => "s3",
            BackendType::Gcs => "gcs",
            BackendType::Azure => "azure",
        }
    }
}

/// A volume source: any field of a core/v1 `Volume` except `name` (`emptyDir`, `ephemeral`,
/// `persistentVolumeClaim`, …). Kept as JSON so that every volume type is accepted as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct VolumeSource(pub Map<String, Value>);

impl VolumeSource {
    /// The core/v1 `Volume` of this source under `name`.
    pub fn to_volume(&self, name: &str) -> Result<Volume, serde_json::Error> {
        let mut object = self.0.clone();
        object.insert("name".to_owned(), Value::String(name.to_owned()));
        serde_json::from_value(Value::Object(object))
    }
}

impl JsonSchema for VolumeSource {
    fn schema_name() -> Cow<'static, str> {
        "VolumeSource".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = <Volume as JsonSchema>::json_schema(generator);
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.remove("name");
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r != "name");
        }
        if schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            schema.remove("required");
        }
        schema.insert(
            "description".to_owned(),
            Value::String(
                "A volume source: the fields of a core/v1 Volume except name.".to_owned(),
            ),
        );
        schema
    }
}
