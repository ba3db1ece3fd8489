//! Operations: the engine's output, as data an adapter can execute without deciding anything.
//!
//! A plan is an ordered list of [`Step`]s. The executor runs them in order and stops at the first
//! failure; each step says which event to record when it succeeds or fails. Steps refer to
//! instances by ordinal; addresses are included wherever an instance must connect to another.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::facts::Role;
use crate::gtid::GtidSet;

/// How a refused switchover request is told, to the cluster's events and to whoever waits for
/// it (`kubectl moco switchover --to`, `moco local switchover --to`), from the `refusal` of
/// [`Operation::ClearSwitchoverRequest`].
pub fn switchover_refusal_message(target: u32, reason: &str) -> String {
    format!("switchover to instance {target} refused: {reason}; the request was withdrawn")
}

/// One thing to do to one instance (or to the status / Pod of one instance).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Operation {
    /// Add (`enabled`) or remove the Pod annotation `moco.cybozu.com/prevent-delete`.
    SetPreventDelete {
        /// Target ordinal.
        index: u32,
        /// Add when true, remove when false.
        enabled: bool,
    },
    /// Make the instance read-only for every client but replication: MySQL
    /// `SET GLOBAL super_read_only=1`; MariaDB `SET GLOBAL read_only=1` (no account holds
    /// `READ_ONLY ADMIN`). If it does not return within `timeout_seconds` (a long global read
    /// lock), kill client connections and keep waiting.
    SetSuperReadOnly {
        /// Target ordinal.
        index: u32,
        /// Seconds before client connections are killed to unblock it.
        timeout_seconds: u32,
    },
    /// Kill every client connection except system users and replication threads
    /// (`KILL CONNECTION`, ignoring "unknown thread").
    KillConnections {
        /// Target ordinal.
        index: u32,
    },
    /// Read `source`'s executed GTID set now, then wait until `index` has executed all of it
    /// (`WAIT_FOR_EXECUTED_GTID_SET` / `MASTER_GTID_WAIT`); fail after `timeout_seconds`.
    WaitForCatchUp {
        /// The instance that must catch up.
        index: u32,
        /// The instance whose executed set is the goal.
        source: u32,
        /// Seconds before failing.
        timeout_seconds: u32,
    },
    /// Wait until `index` has executed `gtid`; fail after `timeout_seconds` (`None` waits as
    /// long as it takes, as MOCO does when the primary applies its own relay log).
    WaitForGtid {
        /// Target ordinal.
        index: u32,
        /// The set to reach.
        gtid: GtidSet,
        /// Seconds before failing; `None` = no limit.
        timeout_seconds: Option<u32>,
    },
    /// Persist `status.currentPrimaryIndex = index` (the switchover/failover commit point),
    /// together with `errantReplicaList` re-based on the new primary: a verdict computed
    /// against the old primary must not outlive the promotion, or a later failover may exclude
    /// an instance that holds nothing the new primary lacks (found by the simulator's
    /// hung-primary schedules).
    SetPrimaryIndex {
        /// New primary ordinal.
        index: u32,
        /// The ordinal it replaces.
        previous: u32,
        /// Why the primary moves.
        reason: PrimaryChange,
        /// `status.errantReplicaList` relative to the new primary, written with the index.
        #[serde(default)]
        errant_replica_list: Vec<u32>,
    },
    /// Remove the Pod annotation `moco.cybozu.com/demote`.
    RemoveDemoteAnnotation {
        /// Target ordinal.
        index: u32,
    },
    /// Withdraw a switchover request for instance `index` (on Kubernetes the cluster's
    /// `moco-rs/switchover-to` annotation): done, or naming an instance unable to take over.
    ClearSwitchoverRequest {
        /// The requested ordinal.
        index: u32,
        /// Why the target was refused, recorded in the same write as the withdrawal (on
        /// Kubernetes the `moco-rs/switchover-refused` annotation): whoever waits for the
        /// request reads both at once, in whatever order it sees the refusal's event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refusal: Option<String>,
    },
    /// `STOP REPLICA IO_THREAD`.
    StopReplicaIoThread {
        /// Target ordinal.
        index: u32,
    },
    /// `START REPLICA`: restart a channel that already points at the right source, keeping its
    /// relay log (`CHANGE REPLICATION SOURCE` would delete it, and with it transactions the
    /// replica may already have acknowledged).
    StartReplica {
        /// Target ordinal.
        index: u32,
    },
    /// Set the semi-sync replica flag (`rpl_semi_sync_slave_enabled`) and turn the primary side
    /// off, without touching the channel; it takes effect when the IO thread next starts.
    SetReplicaSemiSync {
        /// Target ordinal.
        index: u32,
        /// `rpl_semi_sync_slave_enabled`.
        enabled: bool,
    },
    /// `START REPLICA SQL_THREAD`: apply the relay log without fetching more (a failover
    /// candidate whose applier was left stopped, e.g. by `skip_replica_start` after a restart).
    StartReplicaSqlThread {
        /// Target ordinal.
        index: u32,
    },
    /// Set (`Some`) or remove (`None`) the Pod label `moco.cybozu.com/role`.
    SetRoleLabel {
        /// Target ordinal.
        index: u32,
        /// The role, or `None` to remove the label.
        role: Option<Role>,
    },
    /// Point the instance at `source` with GTID auto-positioning and start replication:
    /// `STOP REPLICA`, `CHANGE REPLICATION SOURCE`/`CHANGE MASTER` (MariaDB: first
    /// `gtid_slave_pos = @@gtid_binlog_pos`, `MASTER_USE_GTID=slave_pos`), semi-sync replica
    /// side as given, semi-sync primary side off, `START REPLICA`.
    ConfigureReplication {
        /// Target ordinal.
        index: u32,
        /// Where to replicate from.
        source: ReplicationSource,
        /// `rpl_semi_sync_slave_enabled`.
        semi_sync: bool,
    },
    /// Enable semi-sync on the primary: replica side off, primary side on with
    /// `wait_for_replica_count` ACKs (MariaDB always waits for one), `AFTER_SYNC`, and a
    /// `timeout_ms` long enough never to fall back to asynchronous replication.
    ConfigurePrimarySemiSync {
        /// Target ordinal.
        index: u32,
        /// `rpl_semi_sync_master_wait_for_slave_count`.
        wait_for_replica_count: u32,
        /// `rpl_semi_sync_master_timeout`.
        timeout_ms: u64,
    },
    /// Open the primary for writes: `STOP REPLICA; RESET REPLICA ALL; SET GLOBAL read_only=0`.
    /// MOCO keeps the old source settings (`RESET REPLICA`); forgetting them (MOCO #926) leaves
    /// external tools no stale replication metadata on the primary.
    SetWritable {
        /// Target ordinal.
        index: u32,
    },
    /// Replace the (empty) instance's data with a copy of `donor` (MySQL `CLONE INSTANCE`,
    /// MariaDB `mariadb-backup` streaming), restart it and re-create the MOCO users.
    Clone {
        /// Target ordinal.
        index: u32,
        /// Where the data comes from.
        donor: ReplicationSource,
        /// Seconds the cloned server may take to come back.
        boot_timeout_seconds: u32,
    },
}

impl Operation {
    /// The ordinal the operation acts on.
    pub fn index(&self) -> u32 {
        match self {
            Operation::SetPreventDelete { index, .. }
            | Operation::SetSuperReadOnly { index, .. }
            | Operation::KillConnections { index }
            | Operation::WaitForCatchUp { index, .. }
            | Operation::WaitForGtid { index, .. }
            | Operation::SetPrimaryIndex { index, .. }
            | Operation::RemoveDemoteAnnotation { index }
            | Operation::ClearSwitchoverRequest { index, .. }
            | Operation::StopReplicaIoThread { index }
            | Operation::StartReplica { index }
            | Operation::SetReplicaSemiSync { index, .. }
            | Operation::StartReplicaSqlThread { index }
            | Operation::SetRoleLabel { index, .. }
            | Operation::ConfigureReplication { index, .. }
            | Operation::ConfigurePrimarySemiSync { index, .. }
            | Operation::SetWritable { index }
            | Operation::Clone { index, .. } => *index,
        }
    }

    /// The operation's name as serialized in the `op` field (`setSuperReadOnly`, …): one
    /// spelling for logs, errors, metric labels and tests.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::SetPreventDelete { .. } => "setPreventDelete",
            Operation::SetSuperReadOnly { .. } => "setSuperReadOnly",
            Operation::KillConnections { .. } => "killConnections",
            Operation::WaitForCatchUp { .. } => "waitForCatchUp",
            Operation::WaitForGtid { .. } => "waitForGtid",
            Operation::SetPrimaryIndex { .. } => "setPrimaryIndex",
            Operation::RemoveDemoteAnnotation { .. } => "removeDemoteAnnotation",
            Operation::ClearSwitchoverRequest { .. } => "clearSwitchoverRequest",
            Operation::StopReplicaIoThread { .. } => "stopReplicaIoThread",
            Operation::StartReplica { .. } => "startReplica",
            Operation::SetReplicaSemiSync { .. } => "setReplicaSemiSync",
            Operation::StartReplicaSqlThread { .. } => "startReplicaSqlThread",
            Operation::SetRoleLabel { .. } => "setRoleLabel",
            Operation::ConfigureReplication { .. } => "configureReplication",
            Operation::ConfigurePrimarySemiSync { .. } => "configurePrimarySemiSync",
            Operation::SetWritable { .. } => "setWritable",
            Operation::Clone { .. } => "clone",
        }
    }

    /// `name:index`, the short form logs and step errors use (`setWritable:2`).
    pub fn label(&self) -> String {
        format!("{}:{}", self.name(), self.index())
    }
}

/// Why `currentPrimaryIndex` moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PrimaryChange {
    /// Planned move away from a live primary.
    Switchover,
    /// Replacement of a failed primary.
    Failover,
}

/// A server to replicate or clone from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ReplicationSource {
    /// Another instance of the cluster (credentials: `moco-repl` / `moco-clone-donor`).
    Instance {
        /// Its ordinal.
        index: u32,
        /// Its address.
        host: String,
        /// Its MySQL port.
        port: u16,
    },
    /// The external source of an intermediate primary (credentials from its Secret).
    External {
        /// `HOST`.
        host: String,
        /// `PORT`.
        port: u16,
    },
}

impl ReplicationSource {
    /// Host and port.
    pub fn address(&self) -> (&str, u16) {
        match self {
            ReplicationSource::Instance { host, port, .. }
            | ReplicationSource::External { host, port } => (host, *port),
        }
    }
}

/// Kubernetes event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// An event to record on the MySQLCluster (MOCO's reasons: `SwitchOver`, `FailOver`, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// CamelCase reason.
    pub reason: String,
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub type_: EventType,
    /// Message.
    pub message: String,
}

impl Event {
    /// A `Normal` event.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Event {
            reason: reason.to_owned(),
            type_: EventType::Normal,
            message: message.into(),
        }
    }

    /// A `Warning` event.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Event {
            reason: reason.to_owned(),
            type_: EventType::Warning,
            message: message.into(),
        }
    }
}

/// An operation with the events that report its outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// What to do.
    #[serde(flatten)]
    pub operation: Operation,
    /// Recorded when the operation succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<Event>,
    /// Recorded when it fails (the executor then stops the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<Event>,
}

impl Step {
    /// A step with no events.
    pub fn new(operation: Operation) -> Self {
        Step {
            operation,
            on_success: None,
            on_failure: None,
        }
    }

    /// Sets the failure event.
    pub fn failing_with(mut self, event: Event) -> Self {
        self.on_failure = Some(event);
        self
    }

    /// Sets the success event.
    pub fn succeeding_with(mut self, event: Event) -> Self {
        self.on_success = Some(event);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name()` is the serialized tag for every variant, so logs, metrics and JSON agree.
    #[test]
    fn names_are_the_serialized_tags() {
        let source = ReplicationSource::Instance {
            index: 0,
            host: "h".into(),
            port: 1,
        };
        let all = [
            Operation::SetPreventDelete {
                index: 1,
                enabled: true,
            },
            Operation::SetSuperReadOnly {
                index: 1,
                timeout_seconds: 1,
            },
            Operation::KillConnections { index: 1 },
            Operation::WaitForCatchUp {
                index: 1,
                source: 0,
                timeout_seconds: 1,
            },
            Operation::WaitForGtid {
                index: 1,
                gtid: GtidSet::new(),
                timeout_seconds: None,
            },
            Operation::SetPrimaryIndex {
                index: 1,
                previous: 0,
                reason: PrimaryChange::Failover,
                errant_replica_list: vec![2],
            },
            Operation::RemoveDemoteAnnotation { index: 1 },
            Operation::ClearSwitchoverRequest {
                index: 1,
                refusal: None,
            },
            Operation::StopReplicaIoThread { index: 1 },
            Operation::StartReplica { index: 1 },
            Operation::SetReplicaSemiSync {
                index: 1,
                enabled: true,
            },
            Operation::StartReplicaSqlThread { index: 1 },
            Operation::SetRoleLabel {
                index: 1,
                role: None,
            },
            Operation::ConfigureReplication {
                index: 1,
                source: source.clone(),
                semi_sync: true,
            },
            Operation::ConfigurePrimarySemiSync {
                index: 1,
                wait_for_replica_count: 1,
                timeout_ms: 1,
            },
            Operation::SetWritable { index: 1 },
            Operation::Clone {
                index: 1,
                donor: source,
                boot_timeout_seconds: 1,
            },
        ];
        let mut names = std::collections::BTreeSet::new();
        for op in &all {
            let json = serde_json::to_value(op).unwrap();
            assert_eq!(json["op"], op.name(), "{op:?}");
            assert_eq!(op.label(), format!("{}:1", op.name()));
            names.insert(op.name());
        }
        assert_eq!(names.len(), all.len(), "two variants share a name");
    }
}
