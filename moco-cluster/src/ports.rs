//! The ports the cluster manager drives. Adapters implement them for real servers and local
//! processes (`moco-adapters`: `mysql`, `local`), Kubernetes (`moco-operator`'s
//! `clustering`), and the in-memory simulator (the `moco-sim` crate). The manager depends on
//! these traits only.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use moco_core::Decision;
use moco_core::facts::{ClusterFacts, MysqldStatus, PodFacts, Role, SpecFacts};
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, ReplicationSource};
use moco_core::rotation::RotationPhase;
use moco_core::status::{ClusterStatus, ClusteringStatus};
use moco_core::time::Timestamp;
use thiserror::Error;

/// A failed port call. Every variant names the instance or object it concerns.
#[derive(Debug, Error)]
pub enum PortError {
    /// The server or API could not be reached.
    #[error("{target}: unreachable: {message}")]
    Unreachable {
        /// Instance (`instance 2 (127.0.0.1:3307)`) or object name.
        target: String,
        /// The underlying error.
        message: String,
    },
    /// An operation did not finish in time.
    #[error("{target}: {what} timed out after {seconds} s")]
    Timeout {
        /// Instance or object.
        target: String,
        /// The operation.
        what: String,
        /// The limit.
        seconds: u64,
    },
    /// The server rejected a statement.
    #[error("{target}: {what} failed with MySQL error {code}: {message}")]
    Sql {
        /// Instance.
        target: String,
        /// The statement or operation.
        what: String,
        /// Server error code.
        code: u16,
        /// Server message.
        message: String,
    },
    /// A local file or process operation failed.
    #[error("{target}: {what}: {source}")]
    Io {
        /// Instance or path.
        target: String,
        /// The operation.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Anything else, with context.
    #[error("{target}: {message}")]
    Failed {
        /// Instance or object.
        target: String,
        /// What went wrong.
        message: String,
    },
}

moco_core::error_category! {
    /// What kind of failure a [`PortError`] is: a stable, low-cardinality name for metric labels
    /// and log fields (the message itself varies).
    pub enum ErrorCategory {
        /// The server or API did not answer.
        Unreachable => "unreachable",
        /// An operation ran out of time.
        Timeout => "timeout",
        /// The server refused a statement.
        Sql => "sql",
        /// A local file or process operation failed.
        Io => "io",
        /// The platform refused or could not do something (missing object, bad state).
        Platform => "platform",
        /// The facts contradicted themselves (an adapter bug).
        Facts => "facts",
    }
}

/// Server errors that mean an account itself was refused, not a statement: bad password
/// (1045, 1698), no access to a database (1044) or table (1142), missing privilege (1227),
/// locked (MySQL 3118, MariaDB 4151), expired password (1820, 1862), connection limit (1226).
const ACCOUNT_REFUSED: [u16; 10] = [1044, 1045, 1142, 1226, 1227, 1698, 1820, 1862, 3118, 4151];

impl PortError {
    /// True when the server refused the account the port uses: it was dropped, locked,
    /// re-keyed or stripped of privileges behind the operator's back. Retrying does not help;
    /// a person must restore it.
    pub fn is_account_refused(&self) -> bool {
        matches!(self, PortError::Sql { code, .. } if ACCOUNT_REFUSED.contains(code))
    }

    /// The error's category (a metric label).
    pub fn category(&self) -> ErrorCategory {
        match self {
            PortError::Unreachable { .. } => ErrorCategory::Unreachable,
            PortError::Timeout { .. } => ErrorCategory::Timeout,
            PortError::Sql { .. } => ErrorCategory::Sql,
            PortError::Io { .. } => ErrorCategory::Io,
            PortError::Failed { .. } => ErrorCategory::Platform,
        }
    }
}

/// User name and password of a MOCO account.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Account name, e.g. `moco-repl`.
    pub user: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// One account's two passwords during a rotation of MOCO's passwords.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordPair {
    /// The account name, e.g. `moco-repl`.
    pub account: String,
    /// The password before the rotation.
    pub old: String,
    /// The password after it.
    pub new: String,
}

impl std::fmt::Debug for PasswordPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordPair")
            .field("account", &self.account)
            .finish_non_exhaustive()
    }
}

/// A rotation of MOCO's passwords in progress, as the platform stores it (so that one
/// interrupted by a restart resumes where it stood; see [`moco_core::rotation`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationRecord {
    /// The phase.
    pub phase: RotationPhase,
    /// Replicas whose channel was re-pointed with the new replication password.
    pub channels_moved: BTreeSet<u32>,
    /// Every account's old and new password.
    pub pairs: Vec<PasswordPair>,
}

fn unsupported(what: &str) -> PortError {
    PortError::Failed {
        target: "platform".to_owned(),
        message: format!("{what}: not supported here"),
    }
}

/// One mysqld, reached over SQL. Each method is one step of an operation the core planned.
#[async_trait]
pub trait MysqlPort: Send + Sync + std::fmt::Debug {
    /// Probes the server once (the caller applies timeouts and retries).
    async fn status(&self) -> Result<MysqldStatus, PortError>;
    /// Whether the server answers at all, as cheaply as it allows (`COM_PING`): the health
    /// watch calls it several times a second. The caller bounds it.
    async fn ping(&self) -> Result<(), PortError> {
        self.status().await.map(|_| ())
    }
    /// Drops every pooled connection, so that the next call logs in again. A server computes
    /// an account's global privileges at login: after its accounts were (re)created or
    /// re-granted, a connection opened before keeps the old ones. No-op by default.
    async fn forget_connections(&self) {}
    /// The executed GTID set right now.
    async fn executed_gtid(&self) -> Result<GtidSet, PortError>;
    /// Makes the server read-only for everyone but replication; kills client connections if
    /// that has not finished after `kill_after`, then keeps waiting.
    async fn set_super_read_only(&self, kill_after: Duration) -> Result<(), PortError>;
    /// Kills client connections (not system users or replication threads).
    async fn kill_connections(&self) -> Result<(), PortError>;
    /// Waits until `gtid` is executed; `None` waits without limit.
    async fn wait_for_gtid(
        &self,
        gtid: &GtidSet,
        timeout: Option<Duration>,
    ) -> Result<(), PortError>;
    /// `STOP REPLICA IO_THREAD`.
    async fn stop_replica_io(&self) -> Result<(), PortError>;
    /// `START REPLICA` (both threads), or only the SQL thread when `sql_thread_only`.
    async fn start_replica(&self, sql_thread_only: bool) -> Result<(), PortError>;
    /// Sets `rpl_semi_sync_slave_enabled` and turns the primary side off (takes effect at the
    /// next IO thread start).
    async fn set_replica_semi_sync(&self, enabled: bool) -> Result<(), PortError>;
    /// Replicates from `source` with auto-positioning and starts the threads.
    async fn configure_replication(
        &self,
        source: &ReplicationSource,
        credentials: &Credentials,
        semi_sync: bool,
    ) -> Result<(), PortError>;
    /// Turns on semi-sync as the primary.
    async fn configure_primary_semi_sync(
        &self,
        wait_for_replica_count: u32,
        timeout_ms: u64,
    ) -> Result<(), PortError>;
    /// `STOP REPLICA; RESET REPLICA ALL; SET GLOBAL read_only=0` (ALL: a promoted primary keeps
    /// no stale source settings, MOCO #926).
    async fn set_writable(&self) -> Result<(), PortError>;
    /// Whether the server accepts a login as `user` with `password` (`Ok(false)` only for a
    /// refusal of the credentials).
    async fn accepts(&self, _user: &str, _password: &str) -> Result<bool, PortError> {
        Err(unsupported("a test login"))
    }
    /// Makes each account accept both its old and its new password (binlogged).
    async fn add_new_passwords(&self, _pairs: &[PasswordPair]) -> Result<(), PortError> {
        Err(unsupported("adding passwords"))
    }
    /// Makes each account accept only its new password (binlogged).
    async fn drop_old_passwords(&self, _pairs: &[PasswordPair]) -> Result<(), PortError> {
        Err(unsupported("dropping passwords"))
    }
}

/// An instance slot as the platform sees it: where it is and how its Pod looks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSlot {
    /// Ordinal.
    pub index: u32,
    /// Address other instances use.
    pub host: String,
    /// MySQL port.
    pub port: u16,
    /// Pod facts.
    pub pod: PodFacts,
}

/// What the platform shows of the cluster this round (the manager adds what each mysqld
/// reports to make the engine's facts).
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Spec facts.
    pub spec: SpecFacts,
    /// Recorded status.
    pub status: ClusterStatus,
    /// Instance slots `0..replicas`.
    pub instances: Vec<InstanceSlot>,
    /// A requested switchover target, where the platform supports one (`moco local
    /// switchover --to N`); `None` on Kubernetes.
    pub switchover_to: Option<u32>,
}

/// Where the manager's timestamps come from (`lastTransitionTime`, the engine's `now`): the
/// system clock in production, simulated time in the simulator, so that a run's facts can be
/// replayed.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Timestamp(secs)
    }
}

/// How long a round took, against the limit it had (`Manager::round_limit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundTiming {
    /// From the start of the observation to the end of the last step.
    pub took: Duration,
    /// The limit of this round: what its plan allowed.
    pub limit: Duration,
    /// False when the round failed (its error is reported separately).
    pub ok: bool,
}

/// What hosts the instances (Kubernetes, local processes, the simulator).
#[async_trait]
pub trait Platform: Send + Sync + std::fmt::Debug {
    /// Reads spec, recorded status and instance slots.
    async fn observe(&self) -> Result<Observation, PortError>;
    /// The SQL port of an instance. The manager calls it once per instance address and reuses
    /// the port (and its connection pool) while the address stays the same; it fails when
    /// the port cannot be built (e.g. the admin Secret cannot be read).
    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError>;
    /// Credentials of a MOCO account (on Kubernetes, read from the cluster's Secret).
    async fn credentials(&self, account: Account) -> Result<Credentials, PortError>;
    /// Credentials for the external source of an intermediate primary.
    async fn external_credentials(&self) -> Result<Credentials, PortError>;
    /// Sets or removes the role label.
    async fn set_role_label(&self, index: u32, role: Option<Role>) -> Result<(), PortError>;
    /// Sets or removes the prevent-delete annotation.
    async fn set_prevent_delete(&self, index: u32, enabled: bool) -> Result<(), PortError>;
    /// Removes the demote annotation.
    async fn remove_demote(&self, index: u32) -> Result<(), PortError>;
    /// Withdraws the request to switch over to instance `index` (done, or refused: then
    /// `refusal` says why, and is recorded in the same write so that whoever waits for the
    /// request learns both at once), leaving a request for another instance, made meanwhile,
    /// in place.
    async fn clear_switchover_request(
        &self,
        index: u32,
        refusal: Option<&str>,
    ) -> Result<(), PortError>;
    /// Persists the fields of the status the clustering loop owns (`currentPrimaryIndex`, its
    /// conditions, the errant list and count, `syncedReplicas`, `cloned`), leaving every
    /// other field as it is: the reconciler writes those, and neither may overwrite the
    /// other's (on Kubernetes: a patch holding only these fields).
    async fn write_status(&self, status: &ClusteringStatus) -> Result<(), PortError>;
    /// Records an event.
    async fn record_event(&self, event: &Event) -> Result<(), PortError>;
    /// Replaces instance `index`'s data with a copy of `donor` and brings it back up.
    async fn clone_instance(
        &self,
        index: u32,
        donor: &ReplicationSource,
        boot_timeout: Duration,
    ) -> Result<(), PortError>;
    /// The rotation of MOCO's passwords in progress, if any.
    async fn rotation(&self) -> Result<Option<RotationRecord>, PortError> {
        Ok(None)
    }
    /// Gives every reader the new passwords of `record` (from then on [`Platform::credentials`]
    /// returns them) and stores the phase as published.
    async fn publish_rotation(&self, _record: &RotationRecord) -> Result<(), PortError> {
        Err(unsupported("publishing passwords"))
    }
    /// Records that replica `index`'s channel now uses the new replication password.
    async fn record_channel_moved(&self, _index: u32) -> Result<(), PortError> {
        Err(unsupported("recording a rotation"))
    }
    /// Asks the readers that still hold the old passwords of a published rotation to take
    /// the new ones (an agent is given its Secret's new values) and returns those that still
    /// hold them, for a person ("the agent of Pod db-1", "the Job backup-1 (running since
    /// before the rotation)"); empty once none does.
    async fn move_readers(&self, _record: &RotationRecord) -> Result<Vec<String>, PortError> {
        Ok(Vec::new())
    }
    /// Forgets the old passwords: the rotation is over.
    async fn finish_rotation(&self) -> Result<(), PortError> {
        Err(unsupported("finishing a rotation"))
    }
    /// Called after each decision, before its steps run (status snapshots, metrics).
    async fn observed(&self, _facts: &ClusterFacts, _decision: &Decision) {}
    /// Called when a round fails, with the failure's category (metrics).
    async fn round_failed(&self, _category: ErrorCategory) {}
    /// Called at the end of every round, failed or not, with its duration (metrics, the
    /// local status): a manager whose rounds stop is seen by the age of the last one.
    async fn round_finished(&self, _timing: &RoundTiming) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metric labels must stay distinct and stable: dashboards and alerts key on them.
    #[test]
    fn error_categories_are_distinct_labels() {
        let err = |e: PortError| e.category().as_str();
        let labels = [
            err(PortError::Unreachable {
                target: "t".into(),
                message: "m".into(),
            }),
            err(PortError::Timeout {
                target: "t".into(),
                what: "w".into(),
                seconds: 1,
            }),
            err(PortError::Sql {
                target: "t".into(),
                what: "w".into(),
                code: 1045,
                message: "m".into(),
            }),
            err(PortError::Io {
                target: "t".into(),
                what: "w".into(),
                source: std::io::Error::other("x"),
            }),
            err(PortError::Failed {
                target: "t".into(),
                message: "m".into(),
            }),
        ];
        assert_eq!(labels, ["unreachable", "timeout", "sql", "io", "platform"]);
        assert_eq!(ErrorCategory::Facts.to_string(), "facts");
    }
}
