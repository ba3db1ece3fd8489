//! Switchover: move the primary away from a live instance whose Pod is being deleted or
//! carries the demote annotation.

use crate::assessment::View;
use crate::operation::{Event, Operation, PrimaryChange, Step, switchover_refusal_message};

use super::{Action, CATCH_UP_TIMEOUT_SECONDS, Planned, READ_ONLY_TIMEOUT_SECONDS};

/// What this round does about moving the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    /// Nobody asked, or nobody can take over now.
    Stay,
    /// Move the primary to this candidate.
    To(u32),
    /// A request names the primary: it is done (or was never needed) and is withdrawn.
    Done(u32),
    /// A request names an instance that cannot take over: it is withdrawn and the reason
    /// reported, so that it cannot fire later, by surprise, once the instance recovers.
    Refuse {
        /// The requested instance.
        target: u32,
        /// Why it is not a candidate.
        reason: &'static str,
    },
}

/// The switchover target when one is needed: the requested target if it is a candidate
/// (a request that names a non-candidate is refused, never redirected), otherwise the
/// lowest-ordinal candidate (MOCO's rule, which keeps rolling upgrades safe). A primary past
/// `spec.replicas` (the cluster shrinks) is moved too, and never to another leaving instance.
pub(super) fn need_switch(v: &View<'_>) -> Need {
    let Some(primary) = v.primary() else {
        return Need::Stay;
    };
    if v.facts.switchover_to == Some(primary.index) {
        // A deleting or demoted primary still moves, to the lowest candidate; the request
        // for it is withdrawn once that move is done.
        if !(primary.pod.deleting || primary.pod.demote || v.is_leaving(primary.index)) {
            return Need::Done(primary.index);
        }
    }
    let requested = v.facts.switchover_to.filter(|&t| t != primary.index);
    if let Some(target) = requested {
        return match v.instance(target).map(|i| v.replica_flaw(i)) {
            Some(None) if lag(v, target) > MAX_TARGET_LAG_SECONDS => Need::Refuse {
                target,
                reason: LAGGING,
            },
            Some(None) => Need::To(target),
            Some(Some(reason)) => Need::Refuse { target, reason },
            None => Need::Refuse {
                target,
                reason: "it is not an instance of the cluster",
            },
        };
    }
    let asked = primary.pod.deleting || primary.pod.demote || v.is_leaving(primary.index);
    if !asked {
        return Need::Stay;
    }
    v.assessment
        .candidates
        .iter()
        .copied()
        .find(|&c| !v.is_leaving(c))
        .map_or(Need::Stay, Need::To)
}

/// The most a requested target may lag behind the primary (`Seconds_Behind_Source`): the old
/// primary refuses writes while the target catches up, so a target further behind would hold
/// writes longer than MOCO lets a primary take to turn read-only. The engine's own choice (a
/// demoted or deleted primary) is not bound by it: MOCO holds those while any replica lags
/// more than `maxDelaySecondsForPodDeletion`.
pub const MAX_TARGET_LAG_SECONDS: u64 = READ_ONLY_TIMEOUT_SECONDS as u64;

/// Why a lagging target is refused (the bound is [`MAX_TARGET_LAG_SECONDS`]).
const LAGGING: &str = "it lags more than 10 s behind the primary (Seconds_Behind_Source)";

/// A replica's `Seconds_Behind_Source` (0 when unknown: a replica is a candidate only with
/// both threads running, when the server reports it).
fn lag(v: &View<'_>, index: u32) -> u64 {
    v.mysqld(index)
        .and_then(|s| s.replica_status.as_ref()?.seconds_behind_source)
        .unwrap_or(0)
}

/// Withdraws a request, beside whatever else the round does: one that is done silently, one
/// for a non-candidate with a warning that says why.
pub(super) fn withdraw(p: &mut Planned, need: Need) {
    let step = match need {
        Need::Stay | Need::To(_) => return,
        Need::Done(index) => Step::new(Operation::ClearSwitchoverRequest {
            index,
            refusal: None,
        }),
        Need::Refuse { target, reason } => Step::new(Operation::ClearSwitchoverRequest {
            index: target,
            refusal: Some(reason.to_owned()),
        })
        .succeeding_with(Event::warning(
            "SwitchOverRefused",
            switchover_refusal_message(target, reason),
        )),
    };
    p.steps.push(step);
    if p.action == Action::None {
        p.action = Action::Configure;
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
