//! Spec validation rules shared by the admission webhook, `moco validate` and the CRD.
//!
//! The rules mirror MOCO's admission webhooks for `moco.cybozu.com/v1beta2`:
//!
//! * [`validate_cluster_create`] / [`validate_cluster_update`]: the `MySQLCluster` validating
//!   webhook (the create rule set is re-run on update, plus the update-only rules);
//! * [`mutate_cluster_create`]: the `MySQLCluster` mutating webhook (finalizer, `serverIDBase`);
//! * [`validate_backup_policy`] / [`validate_backup_policy_delete`]: the `BackupPolicy` webhook.
//!
//! Inputs are plain-data views ([`ClusterView`], [`BackupPolicyView`], [`StorageFacts`]) that the
//! caller builds from whatever representation it has; randomness for `serverIDBase` is an input
//! too, so every function here is deterministic.

mod backup_policy;
mod cluster;
pub mod cron;
pub mod duration;
mod mutate;
pub use crate::resources::quantity;

use std::fmt;

pub use backup_policy::{
    BackupPolicyView, ClusterReference, validate_backup_policy, validate_backup_policy_delete,
};
pub use cluster::{
    ClaimTemplateView, ClusterView, ContainerPortView, ContainerView, StorageClassFacts,
    StorageFacts, StorageGrowth, storage_growth, validate_cluster_create, validate_cluster_update,
};
pub use mutate::{
    FINALIZER, MAX_SERVER_ID_BASE, Mutation, MutationInput, mutate_cluster_create,
    mutate_cluster_update, server_id_base_from_random,
};

/// A path to a field, printed like Kubernetes field paths: `spec.podTemplate.spec.containers[1].name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(String);

impl FieldPath {
    /// A path of one top-level field, e.g. `spec`.
    pub fn root(name: &str) -> Self {
        FieldPath(name.to_owned())
    }

    /// Appends `.name`.
    #[must_use]
    pub fn child(&self, name: &str) -> Self {
        FieldPath(format!("{}.{name}", self.0))
    }

    /// Appends `[index]`.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        FieldPath(format!("{}[{index}]", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which rule a [`Violation`] breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `metadata.name` longer than [`MAX_CLUSTER_NAME_LENGTH`] on create.
    NameTooLong,
    /// No volume claim template named `mysql-data`.
    MissingDataClaim,
    /// A volume claim template without `spec.resources.requests.storage`.
    MissingStorageRequest,
    /// A storage request that is not a valid quantity.
    InvalidStorageRequest,
    /// `serverIDBase` not positive.
    ServerIdBase,
    /// `logRotationSchedule` does not parse.
    LogRotationSchedule,
    /// `logRotationSize` negative.
    LogRotationSize,
    /// `replicas` not positive.
    ReplicasNotPositive,
    /// `replicas` even.
    ReplicasEven,
    /// `replicas` above [`crate::MAX_REPLICAS`], more than the clustering engine plans for.
    ReplicasTooMany,
    /// A container or init container without a name.
    ContainerNameMissing,
    /// No container named `mysqld`.
    MysqldContainerMissing,
    /// A container name reserved for a system container.
    ReservedContainerName,
    /// An init container name reserved for a system init container.
    ReservedInitContainerName,
    /// A `mysqld` container port number reserved by MOCO.
    ReservedPort,
    /// A `mysqld` container port name reserved by MOCO.
    ReservedPortName,
    /// A volume name reserved for a system volume.
    ReservedVolumeName,
    /// `replicas` decreased on update. No longer produced: clusters shrink
    /// (docs/clustering.md, "Shrinking"). Kept so that callers matching on it still build.
    ReplicasDecreased,
    /// `replicationSourceSecretName` set on an existing cluster that had none.
    ReplicationSourceAdded,
    /// `replicationSourceSecretName` changed to another name.
    ReplicationSourceChanged,
    /// `restore` changed on update.
    RestoreChanged,
    /// A storage request grew but the StorageClass does not allow volume expansion.
    VolumeExpansionNotAllowed,
    /// The StorageClass needed to judge a storage growth cannot be found.
    StorageClassUnknown,
    /// `BackupPolicy.spec.schedule` does not parse.
    BackupSchedule,
    /// A `BackupPolicy` still referenced by a `MySQLCluster` is being deleted.
    BackupPolicyInUse,
}

/// One broken rule: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// The offending field.
    pub field: FieldPath,
    /// A sentence naming the field and the rule.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(rule: Rule, field: FieldPath, message: impl Into<String>) -> Self {
        Violation {
            rule,
            field,
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Longest `MySQLCluster` name accepted on create (StatefulSet/CronJob name limits minus MOCO's prefixes).
pub const MAX_CLUSTER_NAME_LENGTH: usize = 40;

/// Name of the required volume claim template holding the data directory.
pub const DATA_CLAIM_NAME: &str = "mysql-data";

/// Name of the user container that runs mysqld.
pub const MYSQLD_CONTAINER_NAME: &str = "mysqld";

/// Port numbers of the `mysqld` container that MOCO declares itself
/// (mysql 3306, mysqlx 33060, admin 33062, health 9081).
pub const RESERVED_MYSQLD_PORTS: [i32; 4] = [3306, 33060, 33062, 9081];

/// Port names of the `mysqld` container that MOCO declares itself.
pub const RESERVED_MYSQLD_PORT_NAMES: [&str; 4] = ["mysql", "mysqlx", "mysql-admin", "health"];

/// Volume names MOCO adds to every Pod and that users may not reuse. As in MOCO, `grpc-cert`,
/// `shared` and `mysql-data` are not in this list.
pub const RESERVED_VOLUME_NAMES: [&str; 7] = [
    "tmp",
    "run",
    "var-log",
    "mysql-conf",
    "mysql-conf-d",
    "my-cnf-secret",
    "slow-fluent-bit-config",
];

/// The init container name reserved by MOCO. As in MOCO, `copy-moco-init` is not checked.
pub const RESERVED_INIT_CONTAINER_NAME: &str = "moco-init";
