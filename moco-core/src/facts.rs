//! What the adapters observed about one cluster: the input of [`crate::decide`].
//!
//! Everything is plain data that serialises to the JSON `moco plan --facts` reads. Nothing here
//! is derived: the engine computes roles, errant replicas and the state from these fields.
//!
//! The JSON is a public API: other operators build it themselves. Its rules (see
//! `docs/facts.md`):
//! - `schemaVersion` names the layout; [`FACTS_SCHEMA_VERSION`] is the only one accepted.
//! - Every field that can change a decision is required. A value that may be unknown (a
//!   `SHOW REPLICA STATUS` with no row, MariaDB's missing `server_uuid`) is a required field
//!   that may be `null`. Only fields whose absence means "not there" are optional:
//!   `switchoverTo`, `spec.externalSource`, `pod.roleLabel`, `mysqld.version` and the
//!   `last*Error` columns of a replica status.
//! - One vocabulary: source and replica (never master/slave), camelCase names, and enum values
//!   in lower camelCase (`mysql`, `primary`, `yes`, `inProgress`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::gtid::{GtidSet, ServerIdentity, parse_server_uuid};
use crate::status::ClusterStatus;
use crate::time::Timestamp;

/// The facts layout this engine reads (`schemaVersion`). It changes only with a changelog
/// entry (`CHANGELOG.md`); an adapter built for another layout gets an error, never a
/// silently different reading.
pub const FACTS_SCHEMA_VERSION: u32 = 1;

/// Everything observed about one MySQLCluster in one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterFacts {
    /// The layout of this document: [`FACTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The spec fields that steer clustering.
    pub spec: SpecFacts,
    /// The status recorded by the previous round (`{}` for a new cluster: the Kubernetes
    /// defaults of an empty status).
    pub status: ClusterStatus,
    /// The instant of this observation; used only for condition transition times.
    pub now: Timestamp,
    /// One entry per instance ordinal `0..spec.replicas` (empty when offline), in any order.
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

impl Flavor {
    /// The JSON value (`mysql`, `mariadb`), for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::Mysql => "mysql",
            Flavor::Mariadb => "mariadb",
        }
    }
}

impl std::fmt::Display for Flavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The spec fields of a MySQLCluster that clustering depends on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct SpecFacts {
    /// `spec.replicas`: number of instances.
    pub replicas: u32,
    /// `spec.replicationSourceSecretName` is set: the primary replicates from an external
    /// source and stays read-only (an "intermediate primary"). Omitted when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_source: Option<ExternalSource>,
    /// `spec.restore` is set.
    pub restore: bool,
    /// `spec.offline`.
    pub offline: bool,
    /// The MySQLCluster's `spec.serverIDBase`: instance `i` has `server_id = base + i`.
    pub server_id_base: u32,
    /// `spec.maxDelaySecondsForPodDeletion` (0 disables the check).
    pub max_delay_seconds_for_pod_deletion: u64,
    /// The server family the cluster runs.
    pub flavor: Flavor,
    /// Opt-in: re-clone an errant replica from a healthy donor instead of only excluding it.
    /// Its errant transactions are discarded (they were never on the primary). MOCO leaves the
    /// replica excluded until an operator deletes its volume (MOCO #797).
    pub reclone_errant: bool,
    /// Seconds a cloned instance may take to boot (`spec.startupWaitSeconds`, 3600 in MOCO's
    /// CRD defaults).
    pub startup_wait_seconds: u32,
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
#[schemars(transform = require_instance_fields)]
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
    #[serde(deserialize_with = "required")]
    pub mysqld: Option<MysqldStatus>,
}

/// What is known of the Pod hosting an instance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct PodFacts {
    /// The Pod exists. While any Pod of a cluster is missing (a StatefulSet re-creating it),
    /// the engine plans nothing, as MOCO does.
    pub exists: bool,
    /// The Pod is Ready.
    pub ready: bool,
    /// The Pod has a deletionTimestamp.
    pub deleting: bool,
    /// The Pod carries `moco.cybozu.com/demote: "true"`.
    pub demote: bool,
    /// The Pod carries `moco.cybozu.com/prevent-delete: "true"`.
    pub prevent_delete: bool,
    /// The value of the Pod's `moco.cybozu.com/role` label; omitted when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_label: Option<Role>,
}

/// Adds `fields` to a schema's `required` list: schemars leaves `Option` fields out of it
/// (and drops their `null` when told they are required), while these must be present and may
/// be `null`, as [`required`] reads them.
fn require(schema: &mut schemars::Schema, fields: &[&str]) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let list = obj
        .entry("required")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = list.as_array_mut() {
        for field in fields {
            if !list.iter().any(|v| v == field) {
                list.push(serde_json::Value::from(*field));
            }
        }
    }
}
/// Marks the nullable-but-required fields of [`InstanceFacts`] as required in the JSON Schema.
fn require_instance_fields(schema: &mut schemars::Schema) {
    require(schema, &["mysqld"]);
}

/// Marks the nullable-but-required fields of [`MysqldStatus`] as required in the JSON Schema.
fn require_mysqld_fields(schema: &mut schemars::Schema) {
    require(schema, &["serverUuid", "replicaStatus", "cloneState"]);
}

/// Marks the nullable-but-required fields of [`SemiSyncFacts`] as required in the JSON Schema.
fn require_semi_sync_fields(schema: &mut schemars::Schema) {
    require(
        schema,
        &["waitForReplicaCount", "sourceTimeoutMs", "sourceClients"],
    );
}

/// Marks the nullable-but-required fields of [`ReplicaStatus`] as required in the JSON Schema.
fn require_replica_status_fields(schema: &mut schemars::Schema) {
    require(schema, &["secondsBehindSource"]);
}

/// Deserializes an `Option` field that must be present (it may be `null`): serde treats a
/// missing `Option` as `None` unless told otherwise, and a missing fact must not silently
/// read as "none".
fn required<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
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
#[schemars(transform = require_mysqld_fields)]
pub struct MysqldStatus {
    /// Server family; must equal `spec.flavor`.
    pub flavor: Flavor,
    /// `@@version`, for events and docs.
    #[serde(default)]
    pub version: String,
    /// `@@server_id`; must equal `spec.serverIdBase + index`.
    pub server_id: u32,
    /// `@@server_uuid`: required for MySQL (errant detection tells the primary's own
    /// transactions by it), `null` for MariaDB, which names transactions by server_id.
    #[serde(deserialize_with = "required")]
    pub server_uuid: Option<String>,
    /// `@@gtid_executed` (MySQL) or `@@gtid_binlog_state` (MariaDB).
    pub gtid_executed: GtidSet,
    /// `@@gtid_purged` (MySQL); for MariaDB the state before the oldest binlog, if known.
    pub gtid_purged: GtidSet,
    /// `@@read_only`.
    pub read_only: bool,
    /// `@@super_read_only` (MySQL); for MariaDB, `read_only` while no account holds
    /// `READ_ONLY ADMIN`, which the adapter guarantees.
    pub super_read_only: bool,
    /// Semi-synchronous replication settings and counters.
    pub semi_sync: SemiSyncFacts,
    /// `SHOW REPLICA STATUS`; `null` when it returns no row (replication never configured,
    /// or reset).
    #[serde(deserialize_with = "required")]
    pub replica_status: Option<ReplicaStatus>,
    /// `SHOW REPLICAS` / `SHOW SLAVE HOSTS`: the replicas connected to this server.
    pub replica_hosts: Vec<ReplicaHost>,
    /// Clone progress on this instance; `null` when no clone ever ran.
    #[serde(deserialize_with = "required")]
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

/// Semi-sync settings and status counters: the source (primary) side and the replica side.
/// MySQL 8.0 and MariaDB name them `rpl_semi_sync_master_*` / `rpl_semi_sync_slave_*`, MySQL
/// 8.4 `rpl_semi_sync_source_*` / `rpl_semi_sync_replica_*`; the facts use the new names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[schemars(transform = require_semi_sync_fields)]
pub struct SemiSyncFacts {
    /// `rpl_semi_sync_source_enabled` (`…_master_enabled`).
    pub source_enabled: bool,
    /// `rpl_semi_sync_replica_enabled` (`…_slave_enabled`).
    pub replica_enabled: bool,
    /// `rpl_semi_sync_source_wait_for_replica_count`; `null` on MariaDB, which always waits
    /// for exactly one acknowledgement.
    #[serde(deserialize_with = "required")]
    pub wait_for_replica_count: Option<u32>,
    /// `rpl_semi_sync_source_timeout` in milliseconds; `null` when not read.
    #[serde(deserialize_with = "required")]
    pub source_timeout_ms: Option<u64>,
    /// Status `Rpl_semi_sync_source_wait_sessions`: sessions waiting for an acknowledgement.
    /// On a non-primary it marks a hung former primary.
    pub wait_sessions: u64,
    /// Status `Rpl_semi_sync_source_clients`: semi-sync replicas connected; `null` when not
    /// read.
    #[serde(deserialize_with = "required")]
    pub source_clients: Option<u32>,
}

/// A replication thread's state (`Replica_IO_Running`, `Replica_SQL_Running`). The SQL thread
/// is never `connecting`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
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
#[schemars(transform = require_replica_status_fields)]
pub struct ReplicaStatus {
    /// `Source_Host` / `Master_Host`.
    pub source_host: String,
    /// `Source_Port` / `Master_Port`.
    pub source_port: u16,
    /// `Replica_IO_Running` / `Slave_IO_Running`.
    pub io_running: ThreadState,
    /// `Replica_SQL_Running` / `Slave_SQL_Running`.
    pub sql_running: ThreadState,
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
    pub retrieved_gtid_set: GtidSet,
    /// `Seconds_Behind_Source`; `null` when NULL.
    #[serde(deserialize_with = "required")]
    pub seconds_behind_source: Option<u64>,
}

/// One row of `SHOW REPLICAS`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ReplicaHost {
    /// `Server_Id`.
    pub server_id: u32,
    /// `Host` (the replica's `report_host`; empty when it reports none).
    pub host: String,
    /// `Port`.
    pub port: u16,
}

/// `performance_schema.clone_status.state`, or the MariaDB adapter's equivalent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
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
                sql_running: if u.arbitrary()? {
                    ThreadState::Yes
                } else {
                    ThreadState::No
                },
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
                server_uuid: (flavor == Flavor::Mysql)
                    .then(|| format!("00000000-0000-0000-0000-00000000000{server_id}")),
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
