//! The `MySQLDatabase` custom resource: one database of a MySQLCluster with its default
//! character set and collation.
// kube's derives (`CustomResource`, `KubeSchema`) expand to code in which the lint reports the
// spec's `pub` as unreachable, though the type is exported: a false positive, allowed here only.
#![allow(unreachable_pub)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::DeletionPolicy;

/// A database of a MySQLCluster, created on its primary.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "moco-rs.io",
    version = "v1alpha1",
    kind = "MySQLDatabase",
    plural = "mysqldatabases",
    singular = "mysqldatabase",
    namespaced,
    status = "MySQLDatabaseStatus",
    derive = "PartialEq",
    doc = "MySQLDatabase is a database of a MySQLCluster in the same namespace, created on the primary by moco-rs with its default character set and collation.",
    printcolumn = r#"{"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"}"#,
    printcolumn = r#"{"name": "Database", "type": "string", "description": "The database name; empty means metadata.name.", "jsonPath": ".spec.name"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].reason"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    validation = Rule::new("(has(self.spec.name) ? self.spec.name : self.metadata.name) == (has(oldSelf.spec.name) ? oldSelf.spec.name : oldSelf.metadata.name)").message("name is immutable: it names the database on the server (default metadata.name); declare another MySQLDatabase instead").field_path(".spec.name")
)]
#[serde(rename_all = "camelCase")]
pub struct MySQLDatabaseSpec {
    /// The MySQLCluster (same namespace) the database is on. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("clusterName is immutable: declare the database again for the other cluster"))]
    #[schemars(length(min = 1, max = 253))]
    pub cluster_name: String,

    /// The database name; `metadata.name` when unset. At most 64 characters, not a system
    /// schema (`mysql`, `sys`, `information_schema`, `performance_schema`). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub name: Option<String>,

    /// Default character set of the database. `utf8mb4` when unset, on both flavours
    /// (MariaDB's server default is `latin1` before 11.6).
    #[serde(default = "default_character_set")]
    #[schemars(length(min = 1, max = 64))]
    pub character_set: String,

    /// Default collation of the database; unset means the character set's default collation
    /// on the server. It must belong to the character set (`utf8mb4_bin` to `utf8mb4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub collation: Option<String>,

    /// `Retain` (default) leaves the database and its tables on the server when this object
    /// is deleted; `Delete` drops them (only a database this object created or took over).
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Take over the database when it already exists on the server: its character set and
    /// collation are altered as declared, and `deletionPolicy: Delete` drops it with its
    /// tables. Without it, an existing database that this object did not create is left alone
    /// (`Ready` False, reason `Exists`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt: bool,
}

fn default_character_set() -> String {
    "utf8mb4".to_owned()
}

/// What the controller observed and applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLDatabaseStatus {
    /// `Ready`: whether the database is on the primary with the declared character set and
    /// collation, and why not (reasons `Applied`, `ClusterNotFound`, `ClusterNotAvailable`,
    /// `UnknownCharacterSet`, `Conflict`, `Exists`, `ApplyFailed`, `Invalid`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the conditions describe: a spec newer than it is not applied
    /// yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Whether this object created the database (`Created`) or took it over (`Adopted`),
    /// recorded before the server is changed; unset while it holds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<moco_core::accounts::Ownership>,
}

impl MySQLDatabase {
    /// The database's name on the server: `spec.name`, else `metadata.name`.
    pub fn database_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
