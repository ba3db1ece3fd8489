//! The cluster states, in MOCO's vocabulary.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The state of a cluster, decided in this order (first match wins): Offline, Cloning,
/// Restoring, Healthy, Degraded, Failed, Lost, Incomplete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ClusterState {
    /// `spec.offline`: no instances run.
    Offline,
    /// The primary is being cloned from the external source.
    Cloning,
    /// A restore Job has not finished.
    Restoring,
    /// Every instance replicates from a writable primary.
    Healthy,
    /// The primary serves writes with enough replicas, but not all of them.
    Degraded,
    /// The primary is gone or lost its data, and a majority of replicas can replace it.
    Failed,
    /// The primary is gone and too few replicas remain: manual recovery.
    Lost,
    /// None of the above; usually while instances start.
    Incomplete,
}

impl ClusterState {
    /// MOCO's name of the state (also the condition reason).
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::Offline => "Offline",
            ClusterState::Cloning => "Cloning",
            ClusterState::Restoring => "Restoring",
            ClusterState::Healthy => "Healthy",
            ClusterState::Degraded => "Degraded",
            ClusterState::Failed => "Failed",
            ClusterState::Lost => "Lost",
            ClusterState::Incomplete => "Incomplete",
        }
    }
}

impl std::fmt::Display for ClusterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
