//! Switchover: move the primary away from a live instance whose Pod is being deleted or
//! carries the demote annotation.

use crate::assessment::View;
use crate::operation::{Event, Operation, PrimaryChange, Step};

use super::{Action, CATCH_UP_TIMEOUT_SECONDS, Planned, READ_ONLY_TIMEOUT_SECONDS};

/// The switchover target when one is needed: the requested target if it is a candidate,
/// otherwise the lowest-ordinal candidate (MOCO's rule, which keeps rolling upgrades safe).
/// A primary past `spec.replicas` (the cluster shrinks) is moved too, and never to another
/// leaving instance.
pub(super) fn need_switch(v: &View<'_>) -> Option<u32> {
    let primary = v.primary()?;
    let requested = v.facts.switchover_to.filter(|&t| t != primary.index);
    let asked = primary.pod.deleting
        || primary.pod.demote
        || requested.is_some()
        || v.is_leaving(primary.index);
    if !asked {
        return None;
    }
    let candidates = &v.assessment.candidates;
    match requested {
        Some(t) => candidates.contains(&t).then_some(t),
        None => candidates.iter().copied().find(|&c| !v.is_leaving(c)),
    }
}

pub(super) fn switchover(v: &View<'_>, target: u32) -> Planned {
    let mut p = Planned::new(Action::Switchover);
    let from = v.assessment.primary;
    let failed = Event::warning(
        "SwitchOverFailed",
        format!("switchover from instance {from} to instance {target} failed"),
    );
    let step = |op| Step::new(op).failing_with(failed.clone());
    p.steps.push(step(Operation::SetSuperReadOnly {
        index: from,
        timeout_seconds: READ_ONLY_TIMEOUT_SECONDS,
    }));
    p.steps
        .push(step(Operation::KillConnections { index: from }));
    p.steps.push(step(Operation::WaitForCatchUp {
        index: target,
        source: from,
        timeout_seconds: CATCH_UP_TIMEOUT_SECONDS,
    }));
    p.steps.push(
        step(Operation::SetPrimaryIndex {
            index: target,
            previous: from,
            reason: PrimaryChange::Switchover,
            // The target caught up with the old primary and holds nothing else (it is a
            // candidate), so what was errant against the old primary still is.
            errant_replica_list: v.assessment.errant.clone(),
        })
        .succeeding_with(Event::normal(
            "SwitchOver",
            format!("primary instance was changed from {from} to {target} due to a switchover"),
        )),
    );
    if v.primary().is_some_and(|i| i.pod.demote) {
        p.steps
            .push(Step::new(Operation::RemoveDemoteAnnotation { index: from }));
    }
    p
}
