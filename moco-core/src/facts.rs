//! What the adapters observed about one cluster: the input of [`crate::decide`].
//!
//! Everything is plain data that serialises to the JSON `moco plan --facts` reads. Nothing here
//! is derived: the engine computes roles, errant replicas and the state from these fields.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gtid::{GtidSet, ServerIdentity, parse_server_uuid};
use crate::status::ClusterStatus;
use crate::time::Timestamp;

/// Everything observed about one MySQLCluster in one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterFacts {
    /// The spec fields that steer clustering.
    pub spec: SpecFacts,
    /// The status recorded by the previous round (or the defaults for a new cluster).
    #[serde(default)]
    pub status: ClusterStatus,
    /// The instant of this observation; used only for condition transition times.
    pub now: Timestamp,
    /// One entry per instance ordinal `0..spec.replicas` (empty when offline).
    #[serde(default)]
    pub instances: Vec<InstanceFacts>,
    /// A requested switchover target (`moco local switchover --to N`). Kubernetes has no
    /// such request: the demote annotation picks the lowest-ordinal candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switchover_to: Option<u32>,
}

/// The server family, which decides which rules of the engine differ (semi-sync ACK counts,
/// errant detection identities) and how adapters spell the SQL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Flavor {
    /// MySQL 8.0 / 8.4, as MOCO runs it.
    #[default]
    Mysql,
    /// MariaDB 10.11 or later.
    Mariadb,
}

/// The spec fields of a MySQLCluster that clustering depends on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct SpecFacts {
    /// `spec.replicas`: number of instances.
    pub replicas: u32,
    /// `spec.replicationSourceSecretName` is set: the primary replicates from an external
    /// source and stays read-only (an "intermediate primary").
    #[serde(default)]
    pub external_source: Option<ExternalSource>,
    /// `spec.restore` is set.
    #[serde(default)]
    pub restore: bool,
    /// `spec.offline`.
    #[serde(default)]
    pub offline: bool,
    /// `spec.serverIDBase`: instance `i` has `server_id = base + i`.
    pub server_id_base: u32,
    /// `spec.maxDelaySecondsForPodDeletion` (0 disables the check).
    #[serde(default)]
    pub max_delay_seconds_for_pod_deletion: u64,
    /// The server family the cluster runs.
    #[serde(default)]
    pub flavor: Flavor,
    /// Opt-in: re-clone an errant replica from a healthy donor instead of only excluding it.
    /// Its errant transactions are discarded (they were never on the primary). MOCO leaves the
    /// replica excluded until an operator deletes its volume (MOCO #797).
    #[serde(default)]
    pub reclone_errant: bool,
    /// Seconds the external clone may take to boot (`spec.startupWaitSeconds`).
    #[serde(default = "default_startup_wait")]
    pub startup_wait_seconds: u32,
}

fn default_startup_wait() -> u32 {
    3600
}

/// Where an intermediate primary replicates from. Credentials stay with the adapter (they come
/// from the Secret named by `replicationSourceSecretName`) and never pass through the engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ExternalSource {
    /// The Secret's `HOST`.
    pub host: String,
    /// The Secret's `PORT`.
    pub port: u16,
}

/// One instance (one Pod and its mysqld).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceFacts {
    /// The ordinal.
    pub index: u32,
    /// The address other instances replicate from: the Pod FQDN
    /// (`moco-<name>-<i>.moco-<name>.<ns>.svc`) on Kubernetes, `127.0.0.1` locally.
    pub host: String,
    /// The MySQL port on `host`.
    pub port: u16,
    /// The Pod (or local process slot).
    pub pod: PodFacts,
    /// mysqld as probed this round; `null` when the probes failed (after the adapter's
    /// retries) or the Pod has no address.
    #[serde(default)]
    pub mysqld: Option<MysqldStatus>,
}

/// What is known of the Pod hosting an instance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct PodFacts {
    /// The Pod exists.
    #[serde(default = "yes")]
    pub exists: bool,
    /// The Pod is Ready.
    #[serde(default)]
    pub ready: bool,
    /// The Pod has a deletionTimestamp.
    #[serde(default)]
    pub deleting: bool,
    /// The Pod carries `moco.cybozu.com/demote: "true"`.
    #[serde(default)]
    pub demote: bool,
    /// The Pod carries `moco.cybozu.com/prevent-delete: "true"`.
    #[serde(default)]
    pub prevent_delete: bool,
    /// The value of the Pod's `moco.cybozu.com/role` label, if any.
    #[serde(default)]
    pub role_label: Option<Role>,
}

fn yes() -> bool {
    true
}

/// The role label values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Role {
    /// `moco.cybozu.com/role=primary`.
    Primary,
    /// `moco.cybozu.com/role=replica`.
    Replica,
}

impl Role {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        }
    }
}

/// What mysqld reported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MysqldStatus {
    /// Server family.
    #[serde(default)]
    pub flavor: Flavor,
    /// `@@version`, for events and docs.
    #[serde(default)]
    pub version: String,
    /// `@@server_id`.
    pub server_id: u32,
    /// `@@server_uuid` (MySQL only).
    #[serde(default)]
    pub server_uuid: Option<String>,
    /// `@@gtid_executed` (MySQL) or `@@gtid_binlog_state` (MariaDB).
    #[serde(default)]
    pub gtid_executed: GtidSet,
    /// `@@gtid_purged` (MySQL); for MariaDB the state before the oldest binlog, if known.
    #[serde(default)]
    pub gtid_purged: GtidSet,
    /// `@@read_only`.
    pub read_only: bool,
    /// `@@super_read_only` (MySQL); for MariaDB, `read_only` while no account holds
    /// `READ_ONLY ADMIN`, which the adapter guarantees.
    pub super_read_only: bool,
    /// Semi-synchronous replication settings and counters.
    #[serde(default)]
    pub semi_sync: SemiSyncFacts,
    /// `SHOW REPLICA STATUS`; `None` when replication was never configured.
    #[serde(default)]
    pub replica_status: Option<ReplicaStatus>,
    /// `SHOW REPLICAS` / `SHOW SLAVE HOSTS`: the replicas connected to this server.
    #[serde(default)]
    pub replica_hosts: Vec<ReplicaHost>,
    /// Clone progress on this instance, if a clone ever ran.
    #[serde(default)]
    pub clone_state: Option<CloneState>,
}

impl MysqldStatus {
    /// How this server names itself in GTIDs, if its identity is known.
    pub fn identity(&self) -> Option<ServerIdentity> {
        match self.flavor {
            Flavor::Mysql => self
                .server_uuid
                .as_deref()
                .and_then(parse_server_uuid)
                .map(ServerIdentity::Uuid),
            Flavor::Mariadb => Some(ServerIdentity::ServerId(self.server_id)),
        }
    }

    /// True when the replication IO thread is running (or connecting).
    pub fn io_running(&self) -> bool {
        self.replica_status
            .as_ref()
            .is_some_and(|r| r.io_running != ThreadState::No)
    }
}

/// Semi-sync variables (`rpl_semi_sync_*`) and status counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct SemiSyncFacts {
    /// `rpl_semi_sync_master_enabled`.
    #[serde(default)]
    pub master_enabled: bool,
    /// `rpl_semi_sync_slave_enabled`.
    #[serde(default)]
    pub slave_enabled: bool,
    /// `rpl_semi_sync_master_wait_for_slave_count`; `None` on MariaDB, which always waits
    /// for exactly one acknowledgement.
    #[serde(default)]
    pub wait_for_slave_count: Option<u32>,
    /// `rpl_semi_sync_master_timeout` in milliseconds.
    #[serde(default)]
    pub master_timeout_ms: Option<u64>,
    /// Status `Rpl_semi_sync_master_wait_sessions`: sessions waiting for an ACK.
    #[serde(default)]
    pub wait_sessions: u64,
    /// Status `Rpl_semi_sync_master_clients`: semi-sync replicas connected.
    #[serde(default)]
    pub master_clients: Option<u32>,
}

/// Replication IO thread state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ThreadState {
    /// `Yes`.
    Yes,
    /// `Connecting`.
    Connecting,
    /// `No`.
    No,
}

/// `SHOW REPLICA STATUS`, with MySQL's column names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaStatus {
    /// `Source_Host` / `Master_Host`.
    pub source_host: String,
    /// `Source_Port` / `Master_Port`.
    pub source_port: u16,
    /// `Replica_IO_Running` / `Slave_IO_Running`.
    pub io_running: ThreadState,
    /// `Replica_SQL_Running` / `Slave_SQL_Running` is `Yes`.
    pub sql_running: bool,
    /// `Last_IO_Errno`.
    #[serde(default)]
    pub last_io_errno: u32,
    /// `Last_IO_Error`.
    #[serde(default)]
    pub last_io_error: String,
    /// `Last_SQL_Errno`.
    #[serde(default)]
    pub last_sql_errno: u32,
    /// `Last_SQL_Error`.
    #[serde(default)]
    pub last_sql_error: String,
    /// `Retrieved_Gtid_Set` (MySQL) or `Gtid_IO_Pos` (MariaDB).
    #[serde(default)]
    pub retrieved_gtid_set: GtidSet,
    /// `Seconds_Behind_Source`; `None` when NULL.
    #[serde(default)]
    pub seconds_behind_source: Option<u64>,
}

/// One row of `SHOW REPLICAS`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ReplicaHost {
    /// `Server_Id`.
    pub server_id: u32,
    /// `Host` (the replica's `report_host`).
    #[serde(default)]
    pub host: String,
    /// `Port`.
    #[serde(default)]
    pub port: u16,
}

/// `performance_schema.clone_status.state`, or the MariaDB adapter's equivalent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum CloneState {
    /// `Not Started`.
    NotStarted,
    /// `In Progress`.
    InProgress,
    /// `Completed`.
    Completed,
    /// `Failed`.
    Failed,
}

#[cfg(feature = "arbitrary")]
mod arbitrary_impls {
    use super::*;
    use arbitrary::{Arbitrary, Result, Unstructured};

    impl<'a> Arbitrary<'a> for ReplicaStatus {
        fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
            Ok(ReplicaStatus {
                source_host: format!("h{}", u.int_in_range(0u8..=5)?),
                source_port: 3306,
                io_running: u.arbitrary()?,
                sql_running: u.arbitrary()?,
                last_io_errno: 0,
                last_io_error: String::new(),
                last_sql_errno: 0,
                last_sql_error: String::new(),
                retrieved_gtid_set: u.arbitrary()?,
                seconds_behind_source: u.arbitrary()?,
            })
        }
    }

    impl<'a> Arbitrary<'a> for MysqldStatus {
        fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
            let flavor: Flavor = u.arbitrary()?;
            let server_id = u.int_in_range(1u32..=6)?;
            Ok(MysqldStatus {
                flavor,
                version: String::new(),
                server_id,
                server_uuid: Some(format!("00000000-0000-0000-0000-00000000000{server_id}")),
                gtid_executed: u.arbitrary()?,
                gtid_purged: u.arbitrary()?,
                read_only: u.arbitrary()?,
                super_read_only: u.arbitrary()?,
                semi_sync: u.arbitrary()?,
                replica_status: u.arbitrary()?,
                replica_hosts: u.arbitrary()?,
                clone_state: u.arbitrary()?,
            })
        }
    }
}
