//! When to observe again after a round.
//!
//! [`Decision::redo`] asks for the next round at once, so that the effect of the steps is seen
//! quickly (MOCO's redo). A plan whose steps all succeed without changing what the next round
//! observes is then planned again at once, and again: a replica's SQL thread that stops on a
//! persistent error as soon as it is started was restarted about thirty times a second, each
//! time with a status probe of every instance. [`Pacing`] keeps the redo for a plan that
//! differs from the last one and pauses before a repeated one, doubling the pause each time up
//! to the check interval; a plan that waits paces itself and is never held back.

use std::time::Duration;

use crate::decide::Decision;
use crate::operation::{Operation, Step};
use crate::state::ClusterState;

/// The pause before the first repetition of a plan; each further one doubles it.
pub const FIRST_REPEAT_PAUSE: Duration = Duration::from_millis(100);

/// What is compared to tell a repeated plan: the state and the operations, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PlanKey {
    state: ClusterState,
    operations: Vec<Operation>,
}

/// The pacing of one cluster's rounds: the last plan and how many times in a row it was
/// decided again. Held by the loop between rounds; losing it (a restart) only restarts the
/// pauses from zero.
#[derive(Clone, Debug, Default)]
pub struct Pacing {
    last: Option<PlanKey>,
    repeats: u32,
}

impl Pacing {
    /// No round seen yet.
    pub fn new() -> Self {
        Pacing::default()
    }

    /// The pause before the next round after a round that decided `decision`; `interval` is
    /// the pause when there is nothing to do (MOCO's check interval) and the longest one.
    pub fn after(&mut self, decision: &Decision, interval: Duration) -> Duration {
        self.after_plan(decision.state, &decision.steps, decision.redo, interval)
    }

    fn after_plan(
        &mut self,
        state: ClusterState,
        steps: &[Step],
        redo: bool,
        interval: Duration,
    ) -> Duration {
        if !redo {
            self.forget();
            return interval;
        }
        if steps.iter().any(|s| waits(&s.operation)) {
            // The round already waited (up to a slice of its limit) for what it asked for.
            self.forget();
            return Duration::ZERO;
        }
        let key = PlanKey {
            state,
            operations: steps.iter().map(|s| s.operation.clone()).collect(),
        };
        if self.last.as_ref() == Some(&key) {
            self.repeats = self.repeats.saturating_add(1);
        } else {
            self.last = Some(key);
            self.repeats = 0;
        }
        repeat_pause(self.repeats, interval)
    }

    /// The pause after a round that failed: the check interval (a failure's cause is seen
    /// again by the next round; nothing is learned by retrying at once).
    pub fn after_failure(&mut self, interval: Duration) -> Duration {
        self.forget();
        interval
    }

    fn forget(&mut self) {
        self.last = None;
        self.repeats = 0;
    }
}

/// True for an operation whose execution waits for the cluster to change.
fn waits(op: &Operation) -> bool {
    matches!(op, Operation::WaitForGtid { .. })
}

/// The pause before the `repeats`-th repetition in a row of a plan (0: a new plan).
fn repeat_pause(repeats: u32, interval: Duration) -> Duration {
    if repeats == 0 {
        return Duration::ZERO;
    }
    let factor = 1u32.checked_shl(repeats - 1).unwrap_or(u32::MAX);
    FIRST_REPEAT_PAUSE.saturating_mul(factor).min(interval)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_secs(60);

    /// A decided plan as the pacing sees it (the engine redoes exactly when there are steps).
    struct Plan(ClusterState, Vec<Step>);

    fn decision(state: ClusterState, ops: &[Operation]) -> Plan {
        Plan(state, ops.iter().cloned().map(Step::new).collect())
    }

    impl Pacing {
        fn paced(&mut self, plan: &Plan, interval: Duration) -> Duration {
            self.after_plan(plan.0, &plan.1, !plan.1.is_empty(), interval)
        }
    }

    fn start_sql(index: u32) -> Plan {
        decision(
            ClusterState::Degraded,
            &[Operation::StartReplicaSqlThread { index }],
        )
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_new_plan_runs_at_once_and_a_repeated_one_after_a_doubling_pause() {
        let mut p = Pacing::new();
        let pauses: Vec<Duration> = (0..6).map(|_| p.paced(&start_sql(1), INTERVAL)).collect();
        assert_eq!(
            pauses,
            [ms(0), ms(100), ms(200), ms(400), ms(800), ms(1600)]
        );
    }

    #[test]
    fn the_pause_stops_growing_at_the_check_interval() {
        let mut p = Pacing::new();
        let interval = Duration::from_secs(1);
        let pauses: Vec<Duration> = (0..8).map(|_| p.paced(&start_sql(1), interval)).collect();
        assert_eq!(pauses[4], ms(800));
        assert_eq!(&pauses[5..], [interval, interval, interval]);
        // Thousands of repeats neither overflow nor exceed it.
        let mut q = Pacing::new();
        let pauses: Vec<Duration> = (0..5000)
            .map(|_| q.paced(&start_sql(1), INTERVAL))
            .collect();
        assert!(pauses.iter().all(|p| *p <= INTERVAL));
        assert_eq!(pauses[10], Duration::from_millis(51_200));
        assert_eq!(pauses[11], INTERVAL);
        assert_eq!(pauses[4999], INTERVAL);
    }

    #[test]
    fn another_plan_a_quiet_round_or_a_failure_starts_over() {
        let mut p = Pacing::new();
        p.paced(&start_sql(1), INTERVAL);
        assert_eq!(p.paced(&start_sql(1), INTERVAL), ms(100));
        // Another instance, another plan.
        assert_eq!(p.paced(&start_sql(2), INTERVAL), ms(0));
        assert_eq!(p.paced(&start_sql(2), INTERVAL), ms(100));
        // The same operations in another state are another plan.
        let healthy = decision(
            ClusterState::Healthy,
            &[Operation::StartReplicaSqlThread { index: 2 }],
        );
        assert_eq!(p.paced(&healthy, INTERVAL), ms(0));
        // Nothing to do: the check interval, and the next plan runs at once.
        assert_eq!(
            p.paced(&decision(ClusterState::Healthy, &[]), INTERVAL),
            INTERVAL
        );
        assert_eq!(p.paced(&start_sql(2), INTERVAL), ms(0));
        assert_eq!(p.paced(&start_sql(2), INTERVAL), ms(100));
        assert_eq!(p.after_failure(INTERVAL), INTERVAL);
        assert_eq!(p.paced(&start_sql(2), INTERVAL), ms(0));
    }

    #[test]
    fn a_plan_that_waits_is_never_held_back() {
        let mut p = Pacing::new();
        let wait = decision(
            ClusterState::Failed,
            &[Operation::WaitForGtid {
                index: 1,
                gtid: crate::gtid::GtidSet::default(),
                timeout_seconds: None,
            }],
        );
        for _ in 0..5 {
            assert_eq!(p.paced(&wait, INTERVAL), ms(0));
        }
        // And it breaks a run of repeats.
        p.paced(&start_sql(1), INTERVAL);
        p.paced(&start_sql(1), INTERVAL);
        p.paced(&wait, INTERVAL);
        assert_eq!(p.paced(&start_sql(1), INTERVAL), ms(0));
    }

    #[test]
    fn a_decision_is_paced_by_its_state_steps_and_redo() {
        let mut facts: crate::facts::ClusterFacts =
            serde_json::from_str(include_str!("../../docs/examples/facts/healthy.json"))
                .expect("example facts");
        let mut p = Pacing::new();
        let healthy = crate::decide(&facts).expect("decision");
        assert!(!healthy.redo);
        assert_eq!(p.after(&healthy, INTERVAL), INTERVAL);
        facts.instances[0].mysqld = None;
        let failed = crate::decide(&facts).expect("decision");
        assert!(failed.redo);
        assert_eq!(p.after(&failed, INTERVAL), ms(0));
        assert_eq!(p.after(&failed, INTERVAL), ms(100));
        assert_eq!(p.after(&healthy, INTERVAL), INTERVAL);
    }
}
