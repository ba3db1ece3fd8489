//! Cloning: the initial clone of an intermediate primary from its external source, and the
//! choice of donor for an empty replica.

use crate::assessment::View;
use crate::facts::{CloneState, InstanceFacts};
use crate::operation::{Event, Operation, ReplicationSource, Step};

use super::{Action, Planned};

/// Cloning state: clone the primary from the external source unless a clone runs already.
pub(super) fn init_clone(v: &View<'_>) -> Planned {
    let primary = v.assessment.primary;
    let (Some(source), Some(status)) = (&v.facts.spec.external_source, v.primary_status()) else {
        return Planned::new(Action::Wait);
    };
    if matches!(
        status.clone_state,
        Some(CloneState::InProgress | CloneState::NotStarted)
    ) {
        return Planned::new(Action::Wait);
    }
    let mut p = Planned::new(Action::InitClone);
    p.steps.push(
        Step::new(Operation::Clone {
            index: primary,
            donor: ReplicationSource::External {
                host: source.host.clone(),
                port: source.port,
            },
            boot_timeout_seconds: v.facts.spec.startup_wait_seconds,
        })
        .succeeding_with(Event::normal(
            "InitCloned",
            format!(
                "cloned instance {primary} from the external source {}:{}",
                source.host, source.port
            ),
        ))
        .failing_with(Event::warning(
            "InitCloneFailed",
            format!(
                "failed to clone instance {primary} from the external source {}:{}",
                source.host, source.port
            ),
        )),
    );
    p
}

/// A clone of replica `index` from [`donor`]'s choice, with `Cloned` / `CloneFailed` events
/// worded after `what` (e.g. "clone instance", "re-clone errant instance").
pub(super) fn replica_clone(v: &View<'_>, index: u32, what: &str) -> Step {
    let donor = donor(v, index);
    let (host, port) = donor.address();
    let from = format!("{host}:{port}");
    let done = what.replacen("clone", "cloned", 1);
    Step::new(Operation::Clone {
        index,
        donor,
        boot_timeout_seconds: v.facts.spec.startup_wait_seconds,
    })
    .succeeding_with(Event::normal(
        "Cloned",
        format!("{done} {index} from {from}"),
    ))
    .failing_with(Event::warning(
        "CloneFailed",
        format!("failed to {what} {index} from {from}"),
    ))
}

/// The donor for an empty replica: the healthy replica with the least lag (lowest ordinal on
/// ties), which spares the primary the copy's I/O and, on MariaDB, its ~1 s commit block;
/// the primary when no replica is healthy.
pub(super) fn donor(v: &View<'_>, target: u32) -> ReplicationSource {
    let best = v
        .non_primaries()
        .filter(|i| i.index != target && v.is_ok_replica(i))
        .filter(|i| {
            v.mysqld(i.index)
                .is_some_and(|s| !s.gtid_executed.is_empty())
        })
        .min_by_key(|i| {
            let lag = v
                .mysqld(i.index)
                .and_then(|s| s.replica_status.as_ref()?.seconds_behind_source)
                .unwrap_or(u64::MAX);
            (lag, i.index)
        });
    let src: Option<&InstanceFacts> = best.or_else(|| v.primary());
    match src {
        Some(i) => ReplicationSource::Instance {
            index: i.index,
            host: i.host.clone(),
            port: i.port,
        },
        None => ReplicationSource::Instance {
            index: v.assessment.primary,
            host: String::new(),
            port: 0,
        },
    }
}
