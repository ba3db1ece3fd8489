//! `DIR/state.json`: what the running manager saw in its last round, for `moco local status`
//! and for tools and tests that wait on the cluster.

use moco_core::Action;
use moco_core::state::ClusterState;
use moco_core::status::Condition;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::LocalError;
use super::files;
use super::layout::Layout;

/// The two endpoint addresses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointAddrs {
    /// `127.0.0.1:PORT` of the primary endpoint.
    pub primary: String,
    /// `127.0.0.1:PORT` of the replica endpoint.
    pub replica: String,
}

/// One instance as the last round saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSnapshot {
    /// Ordinal.
    pub index: u32,
    /// The role label (`primary`, `replica`) or `none`.
    pub role: String,
    /// MySQL port.
    pub port: u16,
    /// mysqld's pid, when it runs.
    pub pid: Option<u32>,
    /// The manager could query it this round.
    pub reachable: bool,
    /// The process answers (the Pod's readiness).
    pub ready: bool,
    /// Executed GTID set (MariaDB: `@@gtid_binlog_state`).
    pub executed_gtids: String,
    /// Seconds behind its source; `None` for the primary or while replication is stopped.
    pub lag: Option<u64>,
    /// Has errant transactions.
    pub errant: bool,
    /// `read_only`.
    pub read_only: Option<bool>,
    /// `host:port` it replicates from.
    pub source: Option<String>,
    /// The replication IO/SQL error, if any.
    pub replication_error: Option<String>,
    /// Kept down by `moco local kill` (until `start` or the hold ends).
    pub held_down: bool,
}

/// The whole snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSnapshot {
    /// When the round ran (RFC 3339).
    pub updated_at: String,
    /// Unix milliseconds of `updated_at`, for staleness checks.
    pub updated_at_ms: u64,
    /// The manager's pid.
    pub manager_pid: u32,
    /// The decided state; `None` (written `Unknown`) when the round failed before deciding.
    #[serde(with = "state_or_unknown")]
    pub state: Option<ClusterState>,
    /// The planned action (`none` when the round failed before deciding).
    pub action: Action,
    /// `status.currentPrimaryIndex`.
    pub current_primary_index: u32,
    /// Switchover candidates, lowest ordinal first.
    pub candidates: Vec<u32>,
    /// Endpoint addresses.
    pub endpoints: EndpointAddrs,
    /// Status conditions.
    pub conditions: Vec<Condition>,
    /// Server family.
    pub flavor: String,
    /// Per instance.
    pub instances: Vec<InstanceSnapshot>,
    /// The last round's error, if it failed.
    pub last_error: Option<String>,
    /// When the manager last finished a round and how long it took; absent from snapshots of
    /// older releases.
    #[serde(default)]
    pub last_round: Option<RoundSnapshot>,
}

/// One finished round, as `moco local status` shows it: a manager whose rounds stop shows an
/// ever older `endedAtMs` (issue 35).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundSnapshot {
    /// Unix milliseconds when it ended.
    pub ended_at_ms: u64,
    /// How long it took.
    pub took_ms: u64,
    /// The limit its plan allowed.
    pub limit_ms: u64,
}

/// `state` as MOCO's name, or `Unknown`: the file format tools and older readers expect.
mod state_or_unknown {
    use super::*;

    const UNKNOWN: &str = "Unknown";

    pub(super) fn serialize<S: Serializer>(
        v: &Option<ClusterState>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.map_or(UNKNOWN, ClusterState::as_str))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<ClusterState>, D::Error> {
        let text = String::deserialize(d)?;
        if text == UNKNOWN {
            return Ok(None);
        }
        serde_json::from_value(serde_json::Value::String(text)).map_err(serde::de::Error::custom)
    }
}

impl ClusterSnapshot {
    /// True when the last round decided `state`.
    pub fn is(&self, state: ClusterState) -> bool {
        self.state == Some(state)
    }

    /// The state's name, `Unknown` before a decision.
    pub fn state_name(&self) -> &'static str {
        self.state.map_or("Unknown", ClusterState::as_str)
    }

    /// Writes `state.json` atomically.
    pub fn save(&self, layout: &Layout) -> Result<(), LocalError> {
        files::write_json(&layout.snapshot(), self, 0o644)
    }

    /// Reads `state.json`, `None` before the first round.
    pub fn load(layout: &Layout) -> Result<Option<ClusterSnapshot>, LocalError> {
        files::read_json_opt(&layout.snapshot())
    }

    /// The condition of a type, if present.
    pub fn condition_true(&self, type_: &str) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == moco_core::status::ConditionStatus::True)
    }
}
