//! The `MySQLUser` custom resource: one account `'name'@'host'` of a MySQLCluster, its
//! password from a Secret, its grants and limits.
// kube's derives (`CustomResource`, `KubeSchema`) expand to code in which the lint reports the
// spec's `pub` as unreachable, though the type is exported: a false positive, allowed here only.
#![allow(unreachable_pub)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::privileges::{self, PrivilegeSyntaxError};
use super::target::{GrantTarget, TargetError, parse_target};
use super::{DeletionPolicy, SecretKeyRef};

/// An account of a MySQLCluster, kept as declared on its primary.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "moco-rs.io",
    version = "v1alpha1",
    kind = "MySQLUser",
    plural = "mysqlusers",
    singular = "mysqluser",
    namespaced,
    status = "MySQLUserStatus",
    derive = "PartialEq",
    doc = "MySQLUser is an account of a MySQLCluster in the same namespace: its password from a Secret, its grants and limits, kept as declared on the primary by moco-rs.",
    printcolumn = r#"{"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"}"#,
    printcolumn = r#"{"name": "User", "type": "string", "description": "The account name; empty means metadata.name.", "jsonPath": ".spec.name"}"#,
    printcolumn = r#"{"name": "Host", "type": "string", "jsonPath": ".spec.host"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].reason"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    validation = Rule::new("(has(self.spec.name) ? self.spec.name : self.metadata.name) == (has(oldSelf.spec.name) ? oldSelf.spec.name : oldSelf.metadata.name)").message("name is immutable: it names the account on the server (default metadata.name); declare another MySQLUser instead").field_path(".spec.name")
)]
#[serde(rename_all = "camelCase")]
pub struct MySQLUserSpec {
    /// The MySQLCluster (same namespace) the account is on. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("clusterName is immutable: declare the account again for the other cluster"))]
    #[schemars(length(min = 1, max = 253))]
    pub cluster_name: String,

    /// The account's user name; `metadata.name` when unset. At most 32 characters (MySQL's
    /// limit; MariaDB takes more); not one of MOCO's own accounts. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub name: Option<String>,

    /// The host part of the account: a host name, an IP address, a pattern with `%` and `_`,
    /// or `address/netmask`. Immutable: another host is another account.
    #[serde(default = "default_host")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("host is immutable: 'name'@'host' is another account; declare another MySQLUser instead"))]
    #[schemars(length(min = 1, max = 255))]
    pub host: String,

    /// The key of a Secret (same namespace) holding the password. A change of the value is
    /// applied to the account.
    pub password_secret_key_ref: SecretKeyRef,

    /// The privileges of the account: each entry grants its privileges on one `on`. A grant
    /// removed from the list is revoked. At most 256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub grants: Vec<Grant>,

    /// Refuse connections without TLS (`REQUIRE SSL`).
    #[serde(default, rename = "requireTLS")]
    pub require_tls: bool,

    /// Most simultaneous connections of the account; 0 means no limit of its own (the
    /// server's `max_user_connections` applies).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_user_connections: i32,

    /// Let the grants hold what admission otherwise refuses: privileges that manage accounts,
    /// the server or replication, or bypass read-only, on `*.*` (`ALL PRIVILEGES`, `GRANT
    /// OPTION`, `CREATE USER`, `SUPER`, `SYSTEM_USER`, `READ_ONLY ADMIN`, …), privileges
    /// unknown to moco-rs on `*.*`, and writes on `*.*` or the `mysql` schema. Such an account
    /// can lock the operator out of the cluster.
    #[serde(default)]
    pub allow_privileged_grants: bool,

    /// `Retain` (default) leaves the account on the server when this object is deleted;
    /// `Delete` drops it (only an account this object created or took over).
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Take over the account when it already exists on the server: its password is set, what
    /// it holds beyond `grants` (roles, proxies, routine and column privileges included) is
    /// revoked, and `deletionPolicy: Delete` drops it. Without it, an existing account that
    /// this object did not create is left alone (`Ready` False, reason `Exists`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt: bool,
}

fn default_host() -> String {
    "%".to_owned()
}

/// Privileges on one database, table or `*.*`.
///
/// On the wire a grant's `on` may also come as `"true"`: YAML 1.1 parsers (kubectl's, Helm's)
/// read a bare `on:` key as the boolean `true`, so the issue's manifest (`on: "appdb.*"`)
/// arrives with the key `"true"`. Both are read as `on`; one of them, not both, must be
/// given; `on` is what is written back.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(from = "GrantWire")]
pub struct Grant {
    /// Privilege names, as in GRANT (`SELECT`, `CREATE TEMPORARY TABLES`, `BINLOG_ADMIN`);
    /// any case.
    pub privileges: Vec<String>,
    /// `*.*`, `db.*` or `db.table`; names other than letters, digits, `_` and `$` in
    /// backticks. Names are literal: `_` and `%` are not patterns. Empty when the object
    /// gave neither `on` nor `"true"` (admission refuses it).
    pub on: String,
}

/// Privileges on one database, table or `*.*`. A bare `on:` key arrives as `"true"` (YAML 1.1)
/// and is read the same.
#[derive(Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.on) != has(self.__true__)").message("give the grant's on once: write the key as \"on\" (quoted), or bare (read as \"true\" by YAML 1.1), not both"))]
struct GrantWire {
    /// Privilege names, as in GRANT (`SELECT`, `CREATE TEMPORARY TABLES`, `BINLOG_ADMIN`);
    /// any case. At most 128, each at most 64 characters.
    #[schemars(length(min = 1, max = 128), inner(length(min = 1, max = 64)))]
    privileges: Vec<String>,
    /// `*.*`, `db.*` or `db.table`; names other than letters, digits, `_` and `$` in
    /// backticks. Names are literal: `_` and `%` are not patterns.
    #[serde(default)]
    #[schemars(length(min = 1, max = 261))]
    on: Option<String>,
    /// The grant's `on` when written as a bare `on:` key, which YAML 1.1 parsers (kubectl,
    /// Helm) read as `true`. Do not write it yourself.
    #[serde(default, rename = "true")]
    #[schemars(length(min = 1, max = 261))]
    yaml11_on: Option<String>,
}

impl From<GrantWire> for Grant {
    fn from(wire: GrantWire) -> Self {
        Grant {
            privileges: wire.privileges,
            on: wire.on.or(wire.yaml11_on).unwrap_or_default(),
        }
    }
}

impl JsonSchema for Grant {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Grant".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        GrantWire::json_schema(generator)
    }
}

impl Grant {
    /// What the grant applies to.
    pub fn target(&self) -> Result<GrantTarget, TargetError> {
        parse_target(&self.on)
    }

    /// The privileges in canonical form (upper case, aliases resolved), in order.
    pub fn canonical_privileges(&self) -> Result<Vec<String>, PrivilegeSyntaxError> {
        self.privileges
            .iter()
            .map(|p| privileges::canonical(p))
            .collect()
    }
}

/// What the controller observed and applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLUserStatus {
    /// `Ready`: whether the account is on the primary as declared, and why not (reasons
    /// `Applied`, `ClusterNotFound`, `ClusterNotAvailable`, `SecretMissing`,
    /// `UnknownPrivilege`, `Conflict`, `Exists`, `ApplyFailed`, `Invalid`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the conditions describe: a spec newer than it is not applied
    /// yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The `resourceVersion` of the password Secret whose password the account has: the
    /// controller sets the password again when the Secret's differs (or the generation
    /// changed), and never has to read the password back or keep a hash of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_resource_version: Option<String>,
    /// Whether this object created the account (`Created`) or took it over (`Adopted`),
    /// recorded before the server is changed; unset while it holds none. Only an account it
    /// holds is changed, and dropped by `deletionPolicy: Delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<moco_core::accounts::Ownership>,
}

impl MySQLUser {
    /// The account's user name: `spec.name`, else `metadata.name`.
    pub fn account_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}
