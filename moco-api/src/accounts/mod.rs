//! Accounts and databases as code: the `MySQLUser` and `MySQLDatabase` kinds of moco-rs's own
//! API group (`moco-rs.io/v1alpha1`), their admission rules and the vocabulary their controller
//! shares with them.
//!
//! The group is not MOCO's (`moco.cybozu.com`): MOCO has no such kinds, and a kind added to its
//! group could collide with one MOCO adds later. `v1alpha1` says the shape may still change.
//!
//! * [`user`]: [`MySQLUser`](user::MySQLUser), one account `'name'@'host'` with its password
//!   Secret and grants;
//! * [`database`]: [`MySQLDatabase`](database::MySQLDatabase), one database;
//! * [`privileges`]: the privileges of MySQL 8 and MariaDB 10.x/11 that admission knows, with
//!   the level they are granted at and what they let an account do;
//! * [`target`]: the `on` of a grant (`*.*`, `db.*`, `db.table`) and MySQL's identifier rules;
//! * [`validate`]: the admission rules as pure functions, each error naming its field;
//! * [`admission`]: the validating webhooks, `AdmissionReview` in and out;
//! * [`declared`]: what they declare in the words of moco-core's planner.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod admission;
pub mod database;
pub mod declared;
pub mod privileges;
pub mod target;
pub mod user;
pub mod validate;

pub use database::{MySQLDatabase, MySQLDatabaseSpec, MySQLDatabaseStatus};
pub use user::{Grant, MySQLUser, MySQLUserSpec, MySQLUserStatus};
pub use validate::{FieldError, Problem};

/// The API group of moco-rs's own kinds.
pub const GROUP: &str = "moco-rs.io";
/// The only version of the group.
pub const VERSION: &str = "v1alpha1";

/// Path of the validating webhook of MySQLUser (CREATE, UPDATE).
pub const PATH_VALIDATE_MYSQLUSER: &str = "/validate-moco-rs-io-v1alpha1-mysqluser";
/// Path of the validating webhook of MySQLDatabase (CREATE, UPDATE).
pub const PATH_VALIDATE_MYSQLDATABASE: &str = "/validate-moco-rs-io-v1alpha1-mysqldatabase";

/// MOCO's own accounts on every instance. No MySQLUser may name one: the operator creates
/// them, holds their passwords, and loses its way into the cluster if one changes.
pub const MOCO_ACCOUNTS: [&str; 8] = [
    "moco-admin",
    "moco-agent",
    "moco-repl",
    "moco-clone-donor",
    "moco-exporter",
    "moco-backup",
    "moco-readonly",
    "moco-writable",
];

/// The servers' built-in accounts and roles: `root` (MOCO drops it; whoever declared it
/// would hold the name every tool takes for the superuser), the locked definers of the system
/// views and routines (`mysql.sys`, `mysql.session`, `mysql.infoschema`, `mariadb.sys`: taking
/// one over runs the system's routines with that account's rights), and MariaDB's `PUBLIC`
/// role.
pub const SYSTEM_ACCOUNTS: [&str; 6] = [
    "root",
    "mysql.sys",
    "mysql.session",
    "mysql.infoschema",
    "mariadb.sys",
    "PUBLIC",
];

/// The one condition type of both kinds: whether the server holds what the object declares.
pub const CONDITION_READY: &str = "Ready";

/// The `reason` of the `Ready` condition. The controller sets exactly these, so that an alert
/// or a script can match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReadyReason {
    /// `True`: the account (its password, grants and limits) or the database is on the
    /// primary as declared.
    Applied,
    /// `False`: no MySQLCluster of that name in the object's namespace.
    ClusterNotFound,
    /// `False`: the cluster has no writable primary (not `Available`); applied when it has.
    ClusterNotAvailable,
    /// `False` (MySQLUser): the password Secret, or its key, does not exist.
    SecretMissing,
    /// `False` (MySQLUser): the server does not know a privilege of the grants (a name of the
    /// other flavour, or of a newer version); the message names it.
    UnknownPrivilege,
    /// `False` (MySQLDatabase): the server does not know the character set or collation.
    UnknownCharacterSet,
    /// `False`: another object of the namespace declares the same account or database in the
    /// same cluster; the older object keeps it, the message names it.
    Conflict,
    /// `False`: the account or database exists on the server, and this object neither created
    /// it nor asks to take it over (`spec.adopt`); nothing is changed.
    Exists,
    /// `False`: the server refused a statement for another reason; the message has its error.
    ApplyFailed,
    /// `False`: the object breaks an admission rule (admitted while the webhook was away, or
    /// by an older version's rules); nothing is applied, the message names the fields.
    Invalid,
}

impl ReadyReason {
    /// Every reason.
    pub const ALL: [ReadyReason; 10] = [
        ReadyReason::Applied,
        ReadyReason::ClusterNotFound,
        ReadyReason::ClusterNotAvailable,
        ReadyReason::SecretMissing,
        ReadyReason::UnknownPrivilege,
        ReadyReason::UnknownCharacterSet,
        ReadyReason::Conflict,
        ReadyReason::Exists,
        ReadyReason::ApplyFailed,
        ReadyReason::Invalid,
    ];

    /// The reason as written in the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadyReason::Applied => "Applied",
            ReadyReason::ClusterNotFound => "ClusterNotFound",
            ReadyReason::ClusterNotAvailable => "ClusterNotAvailable",
            ReadyReason::SecretMissing => "SecretMissing",
            ReadyReason::UnknownPrivilege => "UnknownPrivilege",
            ReadyReason::UnknownCharacterSet => "UnknownCharacterSet",
            ReadyReason::Conflict => "Conflict",
            ReadyReason::Exists => "Exists",
            ReadyReason::ApplyFailed => "ApplyFailed",
            ReadyReason::Invalid => "Invalid",
        }
    }

    /// The status of the `Ready` condition this reason goes with.
    pub fn ready(self) -> bool {
        self == ReadyReason::Applied
    }
}

impl std::fmt::Display for ReadyReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens on the server when the object is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// The account or database stays on the server (the default: deleting a Kubernetes object
    /// by mistake must not drop data or lock out an application).
    #[default]
    Retain,
    /// The account is dropped (`DROP USER`), or the database with its tables (`DROP DATABASE`).
    Delete,
}

/// A key of a Secret in the object's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key in the Secret's `data`.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

#[cfg(test)]
mod crd_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_distinct_and_only_applied_is_ready() {
        let names: std::collections::BTreeSet<&str> =
            ReadyReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), ReadyReason::ALL.len());
        let ready: Vec<ReadyReason> = ReadyReason::ALL.into_iter().filter(|r| r.ready()).collect();
        assert_eq!(ready, vec![ReadyReason::Applied]);
        assert_eq!(ReadyReason::SecretMissing.to_string(), "SecretMissing");
    }

    #[test]
    fn deletion_policy_defaults_to_retain() {
        assert_eq!(DeletionPolicy::default(), DeletionPolicy::Retain);
        assert_eq!(
            serde_json::to_value(DeletionPolicy::Delete).ok(),
            Some(serde_json::json!("Delete"))
        );
    }
}
