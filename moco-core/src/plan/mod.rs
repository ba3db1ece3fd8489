//! Plans: for each state, the ordered operations of MOCO's clustering (`clustering/operations`).
//! One module per action; each is a pure function of the [`View`].

mod annotations;
mod channel;
mod clone;
mod configure;
mod failover;
mod switchover;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::assessment::View;
use crate::operation::{Event, Step};
use crate::state::ClusterState;
pub use switchover::MAX_TARGET_LAG_SECONDS;
use switchover::Need;

/// Seconds a switchover waits for `super_read_only` before killing connections (MOCO: half of
/// the mysqld container's 20 s preStop sleep).
pub const READ_ONLY_TIMEOUT_SECONDS: u32 = 10;
/// Seconds a switchover or failover candidate may take to apply what it received.
pub const CATCH_UP_TIMEOUT_SECONDS: u32 = 50;
/// `rpl_semi_sync_master_timeout`: one day, so the primary never silently falls back to
/// asynchronous replication.
pub const SEMI_SYNC_TIMEOUT_MS: u64 = 86_400_000;

/// The kind of plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Nothing to do.
    None,
    /// Waiting for something outside the engine (a clone in progress, a restore Job).
    Wait,
    /// Clone the primary from the external source.
    InitClone,
    /// Planned move of the primary.
    Switchover,
    /// Replacement of a failed primary.
    Failover,
    /// Bring roles, replication, semi-sync and read-only flags in line.
    Configure,
}

impl Action {
    /// The serialized name (`none`, `configure`, `initClone`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::Wait => "wait",
            Action::InitClone => "initClone",
            Action::Switchover => "switchover",
            Action::Failover => "failover",
            Action::Configure => "configure",
        }
    }
}

/// A plan under construction.
#[derive(Debug)]
pub(crate) struct Planned {
    pub action: Action,
    pub steps: Vec<Step>,
    pub events: Vec<Event>,
}

impl Planned {
    fn new(action: Action) -> Self {
        Planned {
            action,
            steps: Vec::new(),
            events: Vec::new(),
        }
    }
}

/// Plans the round for `state`.
pub(crate) fn plan(v: &View<'_>, state: ClusterState) -> Planned {
    // A missing Pod is one the StatefulSet is about to re-create (with the same volume): MOCO
    // skips the whole round ("too few pods"), so a primary whose Pod is being replaced is not
    // failed over in the gap. Once the Pod exists again, its readiness decides. A leaving
    // instance's Pod is not re-created: its absence is its removal.
    if state != ClusterState::Offline {
        let missing: Vec<String> = v
            .instances()
            .filter(|i| !i.pod.exists && !v.is_leaving(i.index))
            .map(|i| i.index.to_string())
            .collect();
        if !missing.is_empty() {
            let mut p = Planned::new(Action::Wait);
            p.events.push(Event::warning(
                "PodsMissing",
                format!(
                    "waiting for the Pods of instance(s) {} to exist again; nothing is changed until then",
                    missing.join(", ")
                ),
            ));
            return p;
        }
    }
    // The prevent-delete annotation is kept in line whatever the state (MOCO does it before
    // dispatching on the state).
    let guard = annotations::prevent_delete(v);
    let mut planned = match state {
        ClusterState::Offline | ClusterState::Lost => Planned::new(Action::None),
        ClusterState::Restoring => Planned::new(Action::Wait),
        ClusterState::Cloning => clone::init_clone(v),
        ClusterState::Healthy | ClusterState::Degraded => {
            let need = switchover::need_switch(v);
            match need {
                // MOCO holds every switchover while a replica lags past the deletion limit.
                Need::To(target) if !v.assessment.prevent_pod_deletion => {
                    switchover::switchover(v, target)
                }
                _ => {
                    let mut p = if state == ClusterState::Degraded {
                        configure::configure(v)
                    } else {
                        configure::fix_labels(v)
                    };
                    switchover::withdraw(&mut p, need);
                    p
                }
            }
        }
        ClusterState::Failed => failover::failover(v),
        ClusterState::Incomplete => configure::configure(v),
    };
    if !guard.is_empty() {
        planned.steps.splice(0..0, guard);
        if planned.action == Action::None {
            planned.action = Action::Configure;
        }
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::Action;

    #[test]
    fn action_names_are_the_serialized_ones() {
        for a in [
            Action::None,
            Action::Wait,
            Action::InitClone,
            Action::Switchover,
            Action::Failover,
            Action::Configure,
        ] {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
    }
}
