//! Failover, in two rounds so that the choice is made on stable GTID sets: first stop every
//! replica's IO thread (which also fences the old primary: nobody acknowledges its commits any
//! more), then, once the facts show every IO thread stopped, promote the replica whose
//! received set contains every other eligible replica's.

use crate::assessment::{View, received_set};
use crate::facts::ThreadState;
use crate::gtid::GtidSet;
use crate::operation::{Event, Operation, PrimaryChange, Step};

use super::{Action, CATCH_UP_TIMEOUT_SECONDS, Planned};

/// The instances errant against the new primary once it holds `set`: reachable ones by their
/// executed sets (as the assessment judges against a primary); an unreachable one keeps the
/// verdict it had, since nothing new is known of it.
fn errant_against(v: &View<'_>, target: u32, set: &GtidSet) -> Vec<u32> {
    let identity = v.mysqld(target).and_then(|s| s.identity());
    v.instances()
        .filter(|i| i.index != target)
        .filter(|i| match v.mysqld(i.index) {
            Some(s) => {
                let extra = s.gtid_executed.subtract(set);
                let foreign = match &identity {
                    Some(id) => extra.without_server(id),
                    None => extra,
                };
                !foreign.is_empty()
            }
            None => v.assessment.is_errant(i.index),
        })
        .map(|i| i.index)
        .collect()
}

pub(super) fn failover(v: &View<'_>) -> Planned {
    let mut p = Planned::new(Action::Failover);
    let from = v.assessment.primary;
    let failed = Event::warning(
        "FailOverFailed",
        format!("failover from instance {from} failed"),
    );

    let running: Vec<u32> = v
        .non_primaries()
        .filter(|i| v.mysqld(i.index).is_some_and(|s| s.io_running()))
        .map(|i| i.index)
        .collect();
    if !running.is_empty() {
        for index in running {
            p.steps.push(
                Step::new(Operation::StopReplicaIoThread { index }).failing_with(failed.clone()),
            );
        }
        return p;
    }

    let eligible: Vec<(u32, GtidSet, u128)> = v
        .non_primaries()
        .filter(|i| !v.assessment.is_errant(i.index))
        .filter_map(|i| v.mysqld(i.index).map(|s| (i.index, s)))
        .filter(|(_, s)| s.replica_status.is_some())
        .map(|(i, s)| (i, received_set(s), s.gtid_executed.transaction_count()))
        .collect();
    // A superset of every other set holds the most transactions, so only the largest set needs
    // the full check: one pass instead of comparing every pair. Among equal sets the one that
    // already executed the most wins (less relay log to apply; its applier may be stopped),
    // then the lowest ordinal.
    let top = eligible
        .iter()
        .max_by(|(i, a, ea), (j, b, eb)| {
            a.transaction_count()
                .cmp(&b.transaction_count())
                .then(ea.cmp(eb))
                .then(j.cmp(i))
        })
        .filter(|(_, set, _)| eligible.iter().all(|(_, other, _)| other.is_subset(set)));
    let Some((target, set, _)) = top else {
        let sets: Vec<String> = eligible
            .iter()
            .map(|(i, s, _)| format!("instance {i}: {s}"))
            .collect();
        p.events.push(Event::warning(
            "FailOverFailed",
            format!(
                "no replica holds every transaction the others received (errant transactions?); refusing to fail over: {}",
                sets.join("; ")
            ),
        ));
        return p;
    };
    // The candidate applies its relay log only if its SQL thread runs.
    if v.mysqld(*target)
        .and_then(|s| s.replica_status.as_ref())
        .is_some_and(|r| r.sql_running != ThreadState::Yes)
    {
        p.steps.push(
            Step::new(Operation::StartReplicaSqlThread { index: *target })
                .failing_with(failed.clone()),
        );
    }
    p.steps.push(
        Step::new(Operation::WaitForGtid {
            index: *target,
            gtid: set.clone(),
            timeout_seconds: Some(CATCH_UP_TIMEOUT_SECONDS),
        })
        .failing_with(failed.clone()),
    );
    p.steps.push(
        Step::new(Operation::SetPrimaryIndex {
            index: *target,
            previous: from,
            reason: PrimaryChange::Failover,
            errant_replica_list: errant_against(v, *target, set),
        })
        .failing_with(failed)
        .succeeding_with(Event::normal(
            "FailOver",
            format!("primary instance was changed from {from} to {target} due to a failover"),
        )),
    );
    p
}
