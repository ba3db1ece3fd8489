//! Property tests: the invariants the decision engine promises, checked against a truth that
//! does not come from the engine.
//!
//! - `properties/generate.rs` builds cases per situation (healthy, degraded, incomplete, both
//!   failover rounds, errant replicas, switchover requests, empty replicas, anything) and keeps
//!   a ledger of what it did (`properties/ledger.rs`).
//! - `properties/truth.rs` computes from that ledger, with its own simple code, what the engine
//!   must decide: errant replicas, candidates, the state, the switchover target, the failover
//!   round and the most advanced replica, the clone donor.
//! - `properties/harness.rs` runs each property with a fixed seed and fails when the cases
//!   that matter become rare (a property that never sees a promotion proves nothing).
//!
//! `PROPTEST_RNG_SEED=<n>` and `PROPTEST_CASES=<n>` explore other cases.

mod generate;
mod harness;
mod ledger;
mod rollout;
mod truth;

use moco_core::facts::{Flavor, Role};
use moco_core::gtid::{GtidSet, SourceId};
use moco_core::operation::{EventType, Operation, PrimaryChange, ReplicationSource, Step};
use moco_core::state::ClusterState;
use moco_core::time::Timestamp;
use moco_core::{Action, CATCH_UP_TIMEOUT_SECONDS, Decision, READ_ONLY_TIMEOUT_SECONDS, decide};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestCaseResult};

use generate::{ALL, SIZED, cases};
use harness::{Counts, check};
use ledger::{Case, Kind, Ledger, host};
use truth::Expect;

/// Decides, turning refused facts into a test failure (generated facts must be valid).
fn decide_case(c: &Case) -> Result<Decision, TestCaseError> {
    decide(&c.facts).map_err(|e| TestCaseError::fail(format!("facts refused: {e}")))
}

fn ops(d: &Decision) -> Vec<&Operation> {
    d.steps.iter().map(|s| &s.operation).collect()
}

/// The steps without the prevent-delete annotation repairs every state plans first.
fn core_ops(d: &Decision) -> Vec<Operation> {
    d.steps
        .iter()
        .map(|s| s.operation.clone())
        .filter(|o| !matches!(o, Operation::SetPreventDelete { .. }))
        .collect()
}

/// Counters every property keeps: flavour and size of the cases it saw.
fn count_shape(l: &Ledger, c: &Counts, interesting: bool) {
    if interesting {
        c.hit(match l.flavor {
            Flavor::Mysql => "mysql",
            Flavor::Mariadb => "mariadb",
        });
        c.hit_if(l.n == 5, "five instances");
    }
}

fn position(steps: &[&Operation], pred: impl Fn(&Operation) -> bool) -> Option<usize> {
    steps.iter().position(|o| pred(o))
}

// ---------------------------------------------------------------------------------------------
// The state and the assessment.

/// The state, errant and hung lists, candidates, lost data and the prevent-deletion flag
/// follow the rules of `docs/clustering.md`, and the plan is of the kind the state calls for.
fn state_follows_the_rules(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let want = truth::state(l);
    prop_assert_eq!(d.state, want, "state");
    prop_assert_eq!(&d.assessment.errant, &truth::errant(l), "errant");
    prop_assert_eq!(&d.assessment.hung, &truth::hung_list(l), "hung");
    prop_assert_eq!(
        &d.assessment.candidates,
        &truth::candidates(l),
        "candidates"
    );
    prop_assert_eq!(d.assessment.lost_data, truth::lost_data(l), "lost data");
    prop_assert_eq!(
        (d.status.semi_sync_members, d.status.semi_sync_min_acks),
        truth::recorded(l),
        "semiSyncMembers and semiSyncMinAcks"
    );
    prop_assert_eq!(
        d.assessment.prevent_pod_deletion,
        truth::prevent_deletion(l),
        "prevent deletion"
    );
    let expect = truth::expect(l);
    let action_ok = match &expect {
        Expect::Quiet | Expect::Configure => matches!(d.action, Action::None | Action::Configure),
        Expect::Wait => matches!(d.action, Action::Wait | Action::InitClone),
        Expect::Switchover { .. } => d.action == Action::Switchover,
        Expect::StopIo { .. } | Expect::Promote { .. } | Expect::Refuse => {
            d.action == Action::Failover
        }
    };
    prop_assert!(action_ok, "action {:?} for {:?}", d.action, expect);
    let guard = expected_annotations(l, want);
    let first: Vec<Operation> = d
        .steps
        .iter()
        .take(guard.len())
        .map(|s| s.operation.clone())
        .collect();
    prop_assert_eq!(&first, &guard, "prevent-delete annotations first");
    let annotations = d
        .steps
        .iter()
        .filter(|s| matches!(s.operation, Operation::SetPreventDelete { .. }))
        .count();
    prop_assert_eq!(annotations, guard.len(), "prevent-delete annotations");
    c.hit_if(guard.len() > 1, "several annotation repairs");
    // The generator's own check: what it made errant is errant while the primary can tell.
    let p = l.inst(l.primary);
    if p.reachable && !p.executed.is_empty() {
        for &i in &l.made_errant {
            if l.inst(i).reachable {
                prop_assert!(truth::errant(l).contains(&i), "made {} errant", i);
            }
        }
    }
    c.hit(want.as_str());
    c.hit_if(!truth::errant(l).is_empty(), "errant");
    c.hit_if(!truth::hung_list(l).is_empty(), "hung");
    c.hit_if(truth::lost_data(l), "lost data");
    c.hit_if(truth::prevent_deletion(l), "prevent deletion");
    count_shape(l, c, true);
    Ok(())
}

/// The `prevent-delete` repairs a round starts with: on the primary while a replica lags
/// beyond the limit, nowhere else, in ordinal order; none while a Pod is missing (the round
/// waits) unless the cluster is offline.
fn expected_annotations(l: &Ledger, state: ClusterState) -> Vec<Operation> {
    let missing = (0..l.spec).any(|i| !l.inst(i).pod.exists);
    if missing && state != ClusterState::Offline {
        return Vec::new();
    }
    let prevent = truth::prevent_deletion(l);
    (0..l.n)
        .filter(|&i| l.inst(i).pod.exists)
        .filter_map(|i| {
            let want = prevent && i == l.primary;
            (l.inst(i).pod.prevent_delete != want).then_some(Operation::SetPreventDelete {
                index: i,
                enabled: want,
            })
        })
        .collect()
}

#[test]
fn states_follow_the_rules() {
    check(
        "states_follow_the_rules",
        20_000,
        cases(ALL, None),
        state_follows_the_rules,
    )
    .require(&[
        ("Healthy", 2400),
        ("Degraded", 2900),
        ("Incomplete", 1800),
        ("Failed", 2300),
        ("Lost", 350),
        ("errant", 2300),
        ("hung", 450),
        ("lost data", 200),
        ("prevent deletion", 200),
        ("several annotation repairs", 700),
        ("mysql", 4500),
        ("mariadb", 4500),
        ("five instances", 4000),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Never two writable instances.

/// At every `setWritable` step no other reachable instance is still writable at that point of
/// the plan (counting the `setSuperReadOnly` steps before it); only the recorded primary is
/// ever opened, last, after it stopped replicating and applied what it received; it is opened
/// exactly when configure finds it read-only; and configure fences every reachable
/// non-primary, so none stays writable next to a primary that already serves.
fn never_two_writable_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let steps = ops(&d);
    let mut writable: Vec<u32> = (0..l.n)
        .filter(|&i| l.inst(i).reachable && !l.inst(i).read_only)
        .collect();
    let mut fenced_before_open = false;
    let mut opened = None;
    for (pos, op) in steps.iter().enumerate() {
        match op {
            Operation::SetSuperReadOnly { index, .. } => {
                fenced_before_open |= writable.contains(index) && *index != l.primary;
                writable.retain(|i| i != index);
            }
            Operation::SetWritable { index } => {
                prop_assert_eq!(*index, l.primary, "opened a non-primary");
                let others: Vec<u32> = writable.iter().copied().filter(|i| i != index).collect();
                prop_assert!(
                    others.is_empty(),
                    "{:?} still writable when {} opens",
                    others,
                    index
                );
                prop_assert_eq!(pos, steps.len() - 1, "setWritable is not the last step");
                opened = Some(pos);
            }
            _ => {}
        }
    }
    prop_assert_eq!(
        opened.is_some(),
        truth::opens_primary(l),
        "opening the primary"
    );
    let configure = truth::expect(l) == Expect::Configure && l.inst(l.primary).reachable;
    if configure {
        // Configure fences every reachable non-primary, errant and hung ones included.
        for i in l.others() {
            let inst = l.inst(i);
            if inst.reachable && !inst.super_read_only {
                let fenced = steps
                    .iter()
                    .any(|o| matches!(o, Operation::SetSuperReadOnly { index, .. } if *index == i));
                prop_assert!(fenced, "configure leaves {} without super_read_only", i);
            }
        }
        c.hit_if(
            opened.is_none() && fenced_before_open,
            "writable replica fenced while the primary serves",
        );
    }
    if configure && !l.external {
        primary_applies_before_opening(l, &steps, opened)?;
    }
    c.hit_if(opened.is_some(), "opened");
    // The flavours' rules differ here: MariaDB's single acknowledgement needs every replica
    // of five to answer, MySQL's two need three (a rule computed for the wrong flavour opens
    // one round early).
    let p = l.inst(l.primary);
    let one_short = configure
        && p.executed.is_empty()
        && l.spec == 5
        && truth::answering(l) + 1 == truth::quorum(l);
    c.hit_if(
        one_short && l.flavor == Flavor::Mariadb,
        "mariadb 5: empty primary, one replica short",
    );
    c.hit_if(
        one_short && l.flavor == Flavor::Mysql,
        "mysql 5: empty primary, one replica short",
    );
    c.hit_if(
        opened.is_some() && fenced_before_open,
        "opened after fencing another",
    );
    count_shape(l, c, opened.is_some());
    Ok(())
}

/// The primary's own channel is stopped and its relay log applied (waiting without limit)
/// before it opens.
fn primary_applies_before_opening(
    l: &Ledger,
    steps: &[&Operation],
    opened: Option<usize>,
) -> TestCaseResult {
    let p = l.primary;
    let inst = l.inst(p);
    let end = opened.unwrap_or(steps.len());
    let stop = position(
        steps,
        |o| matches!(o, Operation::StopReplicaIoThread { index } if *index == p),
    );
    let wait = position(
        steps,
        |o| matches!(o, Operation::WaitForGtid { index, .. } if *index == p),
    );
    let running = inst.io_running();
    prop_assert_eq!(stop.is_some(), running, "stop the primary's IO thread");
    let unapplied = inst
        .channel
        .as_ref()
        .filter(|ch| !inst.executed.contains(&ch.retrieved));
    prop_assert_eq!(
        wait.is_some(),
        unapplied.is_some(),
        "wait for the primary's relay log"
    );
    if let (Some(w), Some(ch)) = (wait, unapplied) {
        prop_assert!(w < end);
        let want = Operation::WaitForGtid {
            index: p,
            gtid: l.gtid(&ch.retrieved),
            timeout_seconds: None,
        };
        prop_assert_eq!(steps[w], &want);
    }
    if let Some(s) = stop {
        prop_assert!(
            s < end && wait.is_none_or(|w| s < w),
            "stop, then wait, then open"
        );
    }
    Ok(())
}

/// Every kind, with more of those where the primary opens.
const OPEN_MIX: &[(u32, Kind)] = &[
    (35, Kind::Incomplete),
    (10, Kind::Degraded),
    (10, Kind::Errant),
    (10, Kind::Switchover),
    (10, Kind::Clone),
    (10, Kind::Misc),
    (5, Kind::Healthy),
    (5, Kind::FailedFirstRound),
    (5, Kind::FailedSecondRound),
];

#[test]
fn never_two_writable() {
    check(
        "never_two_writable",
        20_000,
        cases(OPEN_MIX, None),
        never_two_writable_case,
    )
    .require(&[
        ("opened", 3500),
        ("mariadb 5: empty primary, one replica short", 40),
        ("mysql 5: empty primary, one replica short", 40),
        ("opened after fencing another", 1200),
        ("writable replica fenced while the primary serves", 280),
        ("mysql", 1700),
        ("mariadb", 1700),
        ("five instances", 1500),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Switchover.

const SWITCHOVER_MIX: &[(u32, Kind)] = &[
    (75, Kind::Switchover),
    (10, Kind::Degraded),
    (15, Kind::Errant),
];

/// A switchover happens exactly when the primary is demoted or deleting or a target is
/// requested, in a Healthy or Degraded cluster with no replica lagging beyond the deletion
/// limit; it goes to the requested target when that is a candidate, else (no request) to the
/// lowest-ordinal candidate; it fences the old primary and waits for the target to catch up
/// before the index moves, and keeps the errant list.
fn switchover_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let p = l.primary;
    let got = core_ops(&d);
    let moved = got.iter().any(|o| {
        matches!(
            o,
            Operation::SetPrimaryIndex {
                reason: PrimaryChange::Switchover,
                ..
            }
        )
    });
    let pod = &l.inst(p).pod;
    let requested = l.switchover_to.filter(|&t| t != p);
    let asked = pod.demote || pod.deleting || requested.is_some();
    // A request is withdrawn in service when it names the primary (done; silently, unless
    // the primary must still move) or a non-candidate (refused, with a warning).
    let in_service = matches!(
        truth::state(l),
        ClusterState::Healthy | ClusterState::Degraded
    );
    let cands = truth::candidates(l);
    let moving_anyway = pod.demote || pod.deleting || truth::leaving(l, p);
    let withdrawn = match l.switchover_to {
        Some(t) if in_service && t == p && !moving_anyway => Some((t, false)),
        Some(t) if in_service && t != p && !cands.contains(&t) => Some((t, true)),
        Some(t) if in_service && t != p && truth::lags_as_target(l, t) => Some((t, true)),
        _ => None,
    };
    let clears: Vec<&Step> = d
        .steps
        .iter()
        .filter(|s| matches!(s.operation, Operation::ClearSwitchoverRequest { .. }))
        .collect();
    match withdrawn {
        None => prop_assert!(clears.is_empty(), "withdrawn for nothing: {:?}", clears),
        Some((t, refused)) => {
            prop_assert_eq!(clears.len(), 1, "{:?}", d.steps);
            let Operation::ClearSwitchoverRequest { index, refusal } = &clears[0].operation else {
                unreachable!("filtered above")
            };
            prop_assert_eq!(*index, t);
            let event = clears[0].on_success.as_ref();
            prop_assert_eq!(
                event.map(|e| e.reason.as_str()),
                refused.then_some("SwitchOverRefused")
            );
            // The refusal travels with the withdrawal, and the event tells the same reason.
            prop_assert_eq!(refusal.is_some(), refused);
            if let (Some(refusal), Some(event)) = (refusal, event) {
                prop_assert!(
                    event.message.contains(&format!("refused: {refusal};")),
                    "{:?} vs {:?}",
                    refusal,
                    event.message
                );
            }
            c.hit(if refused {
                "requested non-candidate refused"
            } else {
                "request for the primary withdrawn"
            });
            c.hit_if(
                refused && truth::errant(l).contains(&t),
                "requested errant refused",
            );
            c.hit_if(
                refused && cands.contains(&t),
                "requested candidate refused for its lag",
            );
        }
    }
    let Expect::Switchover { target } = truth::expect(l) else {
        prop_assert!(!moved, "unexpected switchover: {:?}", got);
        prop_assert!(d.action != Action::Switchover);
        if asked && in_service {
            c.hit_if(
                truth::prevent_deletion(l) && truth::switch_target(l).is_some(),
                "held by lag",
            );
        }
        return Ok(());
    };
    prop_assert!(asked, "switchover nobody asked for");
    prop_assert!(!truth::errant(l).contains(&target));
    let mut want = vec![
        Operation::SetSuperReadOnly {
            index: p,
            timeout_seconds: READ_ONLY_TIMEOUT_SECONDS,
        },
        Operation::KillConnections { index: p },
        Operation::WaitForCatchUp {
            index: target,
            source: p,
            timeout_seconds: CATCH_UP_TIMEOUT_SECONDS,
        },
        Operation::SetPrimaryIndex {
            index: target,
            previous: p,
            reason: PrimaryChange::Switchover,
            errant_replica_list: truth::errant(l),
        },
    ];
    if pod.demote {
        want.push(Operation::RemoveDemoteAnnotation { index: p });
    }
    prop_assert_eq!(&got, &want);
    let lowest_other = l.others().into_iter().min().unwrap_or(p);
    match requested {
        Some(_) => c.hit("to the requested target"),
        None => c.hit("to the lowest candidate"),
    }
    c.hit_if(
        requested.is_none() && target != lowest_other,
        "lowest candidate is not the lowest replica",
    );
    c.hit_if(l.switchover_to == Some(p), "request for the primary itself");
    c.hit_if(
        !truth::errant(l).is_empty(),
        "switchover with errant replicas",
    );
    count_shape(l, c, true);
    Ok(())
}

#[test]
fn switchover_is_safe() {
    check(
        "switchover_is_safe",
        12_000,
        cases(SWITCHOVER_MIX, None),
        switchover_case,
    )
    .require(&[
        ("to the requested target", 750),
        ("to the lowest candidate", 1800),
        ("lowest candidate is not the lowest replica", 300),
        ("request for the primary itself", 170),
        ("held by lag", 300),
        ("requested non-candidate refused", 400),
        ("requested errant refused", 160),
        ("request for the primary withdrawn", 100),
        ("requested candidate refused for its lag", 30),
        ("switchover with errant replicas", 550),
        ("mysql", 1200),
        ("mariadb", 1200),
        ("five instances", 1200),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Failover.

const FAILOVER_MIX: &[(u32, Kind)] = &[(35, Kind::FailedFirstRound), (65, Kind::FailedSecondRound)];

/// The first round stops every reachable, non-hung replica's running IO thread and promotes
/// nobody; the second promotes exactly the most advanced eligible replica (or refuses when
/// nobody holds every other's received set), after starting its SQL thread when stopped and
/// after waiting for exactly its received set, and persists the errant list re-based on it.
fn failover_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let p = l.primary;
    let got = core_ops(&d);
    let refused = d
        .events
        .iter()
        .any(|e| e.reason == "FailOverFailed" && e.type_ == EventType::Warning);
    match truth::expect(l) {
        Expect::StopIo { replicas } => {
            let want: Vec<Operation> = replicas
                .iter()
                .map(|&index| Operation::StopReplicaIoThread { index })
                .collect();
            prop_assert_eq!(&got, &want, "first round");
            c.hit("first round");
        }
        Expect::Promote {
            target,
            start_sql,
            set,
            errant,
        } => {
            let mut want = Vec::new();
            if start_sql {
                want.push(Operation::StartReplicaSqlThread { index: target });
            }
            want.push(Operation::WaitForGtid {
                index: target,
                gtid: l.gtid(&set),
                timeout_seconds: Some(CATCH_UP_TIMEOUT_SECONDS),
            });
            want.push(Operation::SetPrimaryIndex {
                index: target,
                previous: p,
                reason: PrimaryChange::Failover,
                errant_replica_list: errant.clone(),
            });
            prop_assert_eq!(&got, &want, "second round");
            prop_assert!(!refused);
            count_promotion(l, target, start_sql, &errant, c);
        }
        Expect::Refuse => {
            prop_assert!(got.is_empty(), "refused failover planned {:?}", got);
            prop_assert!(refused, "no FailOverFailed event");
            c.hit("refused");
        }
        _ => {
            let promoted = got
                .iter()
                .any(|o| matches!(o, Operation::SetPrimaryIndex { .. }));
            prop_assert!(!promoted, "promotion outside a failover: {:?}", got);
            prop_assert!(d.action != Action::Failover);
            c.hit_if(truth::state(l) == ClusterState::Lost, "lost");
        }
    }
    Ok(())
}

/// Counts what a promotion exercised.
fn count_promotion(l: &Ledger, target: u32, start_sql: bool, errant: &[u32], c: &Counts) {
    let eligible = truth::eligible(l);
    let target_set = l.inst(target).received();
    c.hit("promoted");
    c.hit_if(
        eligible.first() != Some(&target),
        "promoted not the lowest eligible",
    );
    let tied: Vec<u32> = eligible
        .iter()
        .copied()
        .filter(|&i| l.inst(i).received() == target_set)
        .collect();
    c.hit_if(tied.len() > 1, "tie");
    c.hit_if(tied.first() != Some(&target), "tie broken by executed");
    c.hit_if(start_sql, "sql thread started");
    c.hit_if(!errant.is_empty(), "errant list persisted");
    let ahead_excluded = (0..l.n).any(|i| {
        i != target
            && i != l.primary
            && l.inst(i).reachable
            && !target_set.contains(&l.inst(i).received())
    });
    c.hit_if(ahead_excluded, "an excluded instance holds more");
    c.hit_if(l.inst(l.primary).reachable, "lost data failover");
    count_shape(l, c, true);
}

#[test]
fn failover_promotes_the_most_advanced() {
    check(
        "failover_promotes_the_most_advanced",
        16_000,
        cases(FAILOVER_MIX, None),
        failover_case,
    )
    .require(&[
        ("first round", 2500),
        ("promoted", 3500),
        ("promoted not the lowest eligible", 1700),
        ("tie", 1600),
        ("tie broken by executed", 500),
        ("refused", 1100),
        ("sql thread started", 900),
        ("errant list persisted", 220),
        ("an excluded instance holds more", 400),
        ("lost data failover", 250),
        ("lost", 700),
        ("mysql", 1800),
        ("mariadb", 1700),
        ("five instances", 1800),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Errant replicas.

const ERRANT_MIX: &[(u32, Kind)] = &[
    (35, Kind::Errant),
    (15, Kind::FailedSecondRound),
    (10, Kind::FailedFirstRound),
    (10, Kind::Degraded),
    (10, Kind::Switchover),
    (10, Kind::Incomplete),
    (10, Kind::Clone),
];

/// Errant instances (by the ledger) are never promoted, waited for, labelled with a role,
/// pointed at the primary, used as a replication source or a clone donor; configure stops
/// their running IO threads (or re-clones them when asked) and removes their labels.
fn errant_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let errant = truth::errant(l);
    let is_errant = |i: &u32| errant.contains(i);
    for op in ops(&d) {
        let bad = match op {
            Operation::SetPrimaryIndex { index, .. }
            | Operation::WaitForCatchUp { index, .. }
            | Operation::SetWritable { index }
            | Operation::StartReplica { index }
            | Operation::SetRoleLabel {
                index,
                role: Some(_),
            } => is_errant(index),
            Operation::ConfigureReplication { index, source, .. } => {
                is_errant(index)
                    || matches!(source, ReplicationSource::Instance { index: s, .. } if is_errant(s))
            }
            Operation::Clone { donor, .. } => {
                matches!(donor, ReplicationSource::Instance { index: s, .. } if is_errant(s))
            }
            _ => false,
        };
        prop_assert!(!bad, "{:?} involves errant {:?}", op, errant);
    }
    if truth::expect(l) == Expect::Configure && l.inst(l.primary).reachable {
        configure_fences_errant(l, &d, &errant, c)?;
    }
    if truth::state(l) == ClusterState::Failed && !errant.is_empty() {
        c.hit("errant during failover");
    }
    count_shape(l, c, !errant.is_empty());
    Ok(())
}

fn configure_fences_errant(l: &Ledger, d: &Decision, errant: &[u32], c: &Counts) -> TestCaseResult {
    let steps = ops(d);
    let primary_has_data = !l.inst(l.primary).executed.is_empty();
    for &e in errant {
        let Some(inst) = truth::usable_mysqld(l, e) else {
            continue;
        };
        let has = |want: &Operation| steps.contains(&want);
        if l.reclone_errant && primary_has_data {
            let cloned = steps
                .iter()
                .any(|o| matches!(o, Operation::Clone { index, .. } if *index == e));
            prop_assert!(cloned, "errant {} not re-cloned", e);
            c.hit("errant re-cloned");
        } else if inst.io_running() {
            prop_assert!(
                has(&Operation::StopReplicaIoThread { index: e }),
                "errant {} keeps replicating",
                e
            );
            c.hit("errant channel stopped");
        }
        if inst.pod.role_label.is_some() {
            prop_assert!(
                has(&Operation::SetRoleLabel {
                    index: e,
                    role: None
                }),
                "errant {} keeps its label",
                e
            );
            c.hit("errant label removed");
        }
    }
    Ok(())
}

#[test]
fn errant_replicas_are_fenced() {
    check(
        "errant_replicas_are_fenced",
        15_000,
        cases(ERRANT_MIX, None),
        errant_case,
    )
    .require(&[
        ("errant channel stopped", 3200),
        ("errant re-cloned", 1200),
        ("errant label removed", 4500),
        ("errant during failover", 170),
        ("mysql", 1800),
        ("mariadb", 1600),
        ("five instances", 1600),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Clones.

const CLONE_MIX: &[(u32, Kind)] = &[(70, Kind::Clone), (15, Kind::Errant), (15, Kind::Degraded)];

/// Configure clones exactly the replicas that need it, each from the healthy non-empty
/// replica with the least lag (lowest ordinal on ties), or from the primary when there is
/// none.
fn clone_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let clones: Vec<(u32, &ReplicationSource)> = ops(&d)
        .into_iter()
        .filter_map(|o| match o {
            Operation::Clone { index, donor, .. } if *index != l.primary => Some((*index, donor)),
            _ => None,
        })
        .collect();
    if truth::expect(l) == Expect::Configure {
        let targets: Vec<u32> = clones.iter().map(|(i, _)| *i).collect();
        prop_assert_eq!(targets, truth::clones(l), "clone targets");
    }
    let errant = truth::errant(l);
    for (target, donor) in clones {
        let want = truth::donor(l, target);
        let expected = ReplicationSource::Instance {
            index: want,
            host: host(want),
            port: ledger::PORT,
        };
        prop_assert_eq!(donor, &expected, "donor for {}", target);
        c.hit("clone");
        if want == l.primary {
            c.hit("from the primary");
        } else {
            c.hit("from a replica");
            let lowest_ok = (0..l.n).find(|&i| truth::ok_replica(l, &errant, i) && i != target);
            c.hit_if(
                lowest_ok != Some(want),
                "donor is not the lowest healthy replica",
            );
        }
        c.hit_if(errant.contains(&target), "errant re-cloned");
        count_shape(l, c, true);
    }
    Ok(())
}

#[test]
fn clone_donor_is_the_least_lagging_healthy_replica() {
    check(
        "clone_donor_is_the_least_lagging_healthy_replica",
        10_000,
        cases(CLONE_MIX, None),
        clone_case,
    )
    .require(&[
        ("clone", 2900),
        ("from the primary", 350),
        ("from a replica", 2500),
        ("donor is not the lowest healthy replica", 700),
        ("errant re-cloned", 600),
        ("mysql", 1600),
        ("mariadb", 1300),
        ("five instances", 1500),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Role labels.

/// The label instance `i` should carry: primary, replica, or none for an errant one.
fn wanted_role(l: &Ledger, errant: &[u32], i: u32) -> Option<Role> {
    if i == l.primary {
        Some(Role::Primary)
    } else if errant.contains(&i) || truth::leaving(l, i) {
        None
    } else {
        Some(Role::Replica)
    }
}

/// Role labels go only to live (reachable, not hung), non-errant instances, the primary label
/// only to the recorded primary (never to a dead one: MOCO #801); a plan that manages labels
/// removes every wrong label and adds every missing one a live instance needs, and configure
/// kills the connections of an instance before its label changes.
fn labels_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let steps = ops(&d);
    let errant = truth::errant(l);
    for op in &steps {
        if let Operation::SetRoleLabel {
            index,
            role: Some(role),
        } = op
        {
            prop_assert!(
                truth::usable_mysqld(l, *index).is_some(),
                "labelled dead {}",
                index
            );
            prop_assert_eq!(
                Some(*role),
                wanted_role(l, &errant, *index),
                "label of {}",
                index
            );
        }
    }
    let expect = truth::expect(l);
    let manages = matches!(
        truth::state(l),
        ClusterState::Healthy | ClusterState::Degraded | ClusterState::Incomplete
    ) && matches!(expect, Expect::Quiet | Expect::Configure);
    if !manages {
        return Ok(());
    }
    for i in 0..l.n {
        let have = l.inst(i).pod.role_label;
        let want = wanted_role(l, &errant, i);
        if have == want {
            continue;
        }
        let at = |role| position(&steps, |o| *o == Operation::SetRoleLabel { index: i, role });
        if have.is_some() {
            prop_assert!(at(None).is_some(), "wrong label of {} kept", i);
        }
        let live = truth::usable_mysqld(l, i).is_some();
        match (want, live) {
            (Some(role), true) => {
                let added = at(Some(role));
                prop_assert!(added.is_some(), "label of {} not added", i);
                if expect == Expect::Configure {
                    let kill = position(&steps, |o| *o == Operation::KillConnections { index: i });
                    prop_assert!(
                        kill.is_some() && kill < added,
                        "connections of {} not killed first",
                        i
                    );
                }
                c.hit_if(role == Role::Primary, "primary label moved");
            }
            (Some(_), false) => c.hit("dead instance left unlabelled"),
            (None, _) => c.hit("errant label removed"),
        }
    }
    Ok(())
}

#[test]
fn labels_follow_roles() {
    check("labels_follow_roles", 8000, cases(ALL, None), labels_case).require(&[
        ("primary label moved", 450),
        ("dead instance left unlabelled", 100),
        ("errant label removed", 1000),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Order of instances, determinism, serialisation.

/// A permutation of `0..n` from a number (Fisher–Yates on a simple LCG).
fn permutation(n: u32, mut seed: u64) -> Vec<u32> {
    let mut xs: Vec<u32> = (0..n).collect();
    for k in (1..xs.len()).rev() {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = ((seed >> 33) % (k as u64 + 1)) as usize;
        xs.swap(k, j);
    }
    xs
}

/// Adapters list instances in any order (Pods by name put `-10` before `-2`): the decision
/// must not depend on it.
fn order_case((case, seed): &(Case, u64), c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let first = decide_case(case)?;
    let order = permutation(l.n, *seed);
    let shuffled = decide(&l.facts_in(&order)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(
        &shuffled,
        &first,
        "instances in order {:?} (first: {:?})",
        order,
        l.order
    );
    let touched: std::collections::BTreeSet<u32> =
        first.steps.iter().map(|s| s.operation.index()).collect();
    c.hit_if(
        touched.len() > 1 && order != l.order,
        "multi-instance plan reordered",
    );
    c.hit_if(
        first
            .steps
            .iter()
            .filter(|s| matches!(s.operation, Operation::SetPreventDelete { .. }))
            .count()
            > 1,
        "several annotation repairs",
    );
    Ok(())
}

#[test]
fn decisions_ignore_instance_order() {
    check(
        "decisions_ignore_instance_order",
        8000,
        (cases(ALL, None), any::<u64>()),
        order_case,
    )
    .require(&[
        ("multi-instance plan reordered", 1700),
        ("several annotation repairs", 280),
    ]);
}

/// The same facts always give the same decision.
#[test]
fn decisions_are_deterministic() {
    check(
        "decisions_are_deterministic",
        500,
        cases(ALL, None),
        |case, _| {
            prop_assert_eq!(decide_case(case)?, decide_case(case)?);
            Ok(())
        },
    );
}

/// Decisions and facts survive a JSON round trip (what `moco plan` prints is what the engine
/// meant, and generated facts are valid JSON facts).
#[test]
fn decisions_round_trip_through_json() {
    check(
        "decisions_round_trip_through_json",
        500,
        cases(ALL, None),
        |case, _| {
            let d = decide_case(case)?;
            let back: Decision = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
            prop_assert_eq!(back, d);
            let text = serde_json::to_string(&case.facts).unwrap();
            let facts: moco_core::facts::ClusterFacts = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&facts, &case.facts);
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Healthy and single-instance clusters, conditions.

/// A healthy cluster with correct labels and no requests plans nothing.
#[test]
fn healthy_cluster_plans_nothing() {
    check(
        "healthy_cluster_plans_nothing",
        500,
        cases(&[(1, Kind::Healthy)], None),
        |case, c| {
            let d = decide_case(case)?;
            prop_assert_eq!(d.state, ClusterState::Healthy);
            prop_assert!(d.steps.is_empty(), "{:?}", d.steps);
            prop_assert!(d.events.is_empty(), "{:?}", d.events);
            prop_assert!(!d.redo);
            count_shape(&case.ledger, c, true);
            Ok(())
        },
    )
    .require(&[("mysql", 110), ("mariadb", 120), ("five instances", 70)]);
}

// ---------------------------------------------------------------------------------------------
// Growing (docs/clustering.md, "Growing without a write stall").

/// The wait count the primary runs with once the plan has run: the last semi-sync step on it,
/// or what it runs now.
fn count_after(l: &Ledger, d: &Decision) -> u32 {
    let mut count = truth::running_count(l.inst(l.primary));
    for op in ops(d) {
        match op {
            Operation::ConfigurePrimarySemiSync {
                index,
                wait_for_replica_count,
                ..
            } if *index == l.primary => count = *wait_for_replica_count,
            Operation::SetReplicaSemiSync { index, .. } if *index == l.primary => count = 0,
            _ => {}
        }
    }
    count
}

fn growth_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    // Every growth case had two instances fewer before the change.
    let old = l.n - 2;
    let members = truth::members(l);
    let errant = truth::errant(l);
    // Learners never acknowledge: every channel step on a non-member leaves the semi-sync
    // flag off, and every one on a member turns it on.
    for op in ops(&d) {
        let (index, enabled) = match op {
            Operation::ConfigureReplication {
                index, semi_sync, ..
            } => (*index, *semi_sync),
            Operation::SetReplicaSemiSync { index, enabled } if *index != l.primary => {
                (*index, *enabled)
            }
            _ => continue,
        };
        prop_assert_eq!(
            enabled,
            index < members,
            "semi-sync flag of {}: {:?}",
            index,
            op
        );
        c.hit_if(index >= members, "learner kept asynchronous");
    }
    let p = l.inst(l.primary);
    let old_ok = (0..old)
        .filter(|&i| i != l.primary)
        .all(|i| truth::ok_replica(l, &errant, i));
    if !(p.reachable && !p.read_only && old_ok) {
        return Ok(());
    }
    // The rule: with the old replicas fine, the count after the plan leaves as many
    // spare acknowledgers as the old cluster had (an old cluster of one had no replica to lose).
    let tolerated_before = (old - 1) - truth::acks_for(l, old);
    let ackers = (0..members)
        .filter(|&i| i != l.primary)
        .filter(|&i| truth::ok_replica(l, &errant, i) || truth::joins(l, &errant, i))
        .count() as u32;
    let count = count_after(l, &d);
    prop_assert!(
        count + tolerated_before <= ackers,
        "count {} with {} acknowledgers, {} failures tolerated before",
        count,
        ackers,
        tolerated_before
    );
    // Never raised beyond what the members acknowledging now (flag on, IO running from the
    // primary) can give: a member that joins this round counts from the next one.
    let acknowledging = (0..members)
        .filter(|&i| i != l.primary && !errant.contains(&i))
        .filter_map(|i| truth::usable_mysqld(l, i))
        .filter(|inst| {
            inst.semi.replica_enabled
                && inst.channel.as_ref().is_some_and(|ch| {
                    ch.source == ledger::Source::Instance(l.primary)
                        && ch.port == ledger::PORT
                        && ch.io == moco_core::facts::ThreadState::Yes
                })
        })
        .count() as u32;
    let running = truth::running_count(p);
    prop_assert!(
        count <= running.max(truth::acks_for(l, acknowledging + 1)),
        "count {} raised past {} acknowledging members",
        count,
        acknowledging
    );
    // And MOCO's count as soon as every instance is a member that acknowledges.
    if members == l.n && acknowledging == l.n - 1 {
        prop_assert_eq!(
            count,
            truth::acks_for(l, l.n),
            "full count once all acknowledge"
        );
        c.hit("all joined");
    }
    c.hit_if(members > old, "a learner joined");
    c.hit_if(members == old, "nobody joined yet");
    c.hit_if(count > truth::running_count(p), "count raised");
    c.hit(if old == 1 { "1 to 3" } else { "3 to 5" });
    c.hit_if(l.primary >= old, "a promoted learner is the primary");
    count_shape(l, c, true);
    Ok(())
}

/// While a cluster grows, commits never wait for an instance still being built: learners
/// replicate asynchronously, and the wait count never exceeds the acknowledgers minus the
/// failures the cluster tolerated before the change; it is MOCO's once all joined.
#[test]
fn growing_keeps_its_failure_tolerance() {
    check(
        "growing_keeps_its_failure_tolerance",
        3000,
        cases(&[(1, Kind::Grow)], None),
        growth_case,
    )
    .require(&[
        ("learner kept asynchronous", 300),
        ("all joined", 100),
        ("a learner joined", 300),
        ("nobody joined yet", 300),
        ("count raised", 150),
        ("1 to 3", 300),
        ("3 to 5", 300),
        ("a promoted learner is the primary", 100),
        ("mariadb", 300),
        ("mysql", 300),
    ]);
}

// ---------------------------------------------------------------------------------------------
// Shrinking (docs/clustering.md, "Shrinking").

fn shrink_case(case: &Case, c: &Counts) -> TestCaseResult {
    let l = &case.ledger;
    let d = decide_case(case)?;
    let steps = ops(&d);
    // A leaving instance is never given the semi-sync flag, a channel, a clone or a label.
    for op in &steps {
        let touched = match op {
            Operation::ConfigureReplication { index, .. }
            | Operation::Clone { index, .. }
            | Operation::StartReplica { index }
            | Operation::SetReplicaSemiSync {
                index,
                enabled: true,
            } => Some(*index),
            Operation::SetRoleLabel {
                index,
                role: Some(_),
            } if *index != l.primary => Some(*index),
            _ => None,
        };
        if let Some(i) = touched {
            prop_assert!(!truth::leaving(l, i), "leaving instance {} got {:?}", i, op);
        }
    }
    // A switchover never goes to a leaving instance, and a leaving primary is always moved
    // when a remaining candidate exists.
    if let Some(Operation::SetPrimaryIndex { index, reason, .. }) = steps
        .iter()
        .find(|op| matches!(op, Operation::SetPrimaryIndex { .. }))
        && *reason == moco_core::operation::PrimaryChange::Switchover
    {
        prop_assert!(
            !truth::leaving(l, *index),
            "switched over to leaving {}",
            index
        );
        c.hit_if(
            truth::leaving(l, l.primary),
            "leaving primary switched over",
        );
    }
    let leaving_candidate_only = truth::leaving(l, l.primary)
        && !truth::candidates(l).is_empty()
        && truth::candidates(l).iter().all(|&i| truth::leaving(l, i));
    c.hit_if(leaving_candidate_only, "only leaving candidates");
    // Members drop to the new size exactly when the leaving instances are released, and the
    // floor never claims more acknowledgements than the primary will wait for.
    let recorded = l.members.unwrap_or(l.n);
    let members = d.status.semi_sync_members.unwrap_or(recorded);
    if recorded > l.spec && members == l.spec {
        prop_assert!(truth::released(l), "members dropped before the release");
        c.hit("members dropped");
    }
    if recorded > l.spec && members > l.spec && truth::usable_mysqld(l, l.primary).is_some() {
        let p = l.inst(l.primary);
        let unreachable = (l.spec..l.n).any(|i| l.inst(i).pod.exists && !l.inst(i).reachable);
        let behind = (0..l.spec)
            .filter(|&i| i != l.primary)
            .any(|i| !l.inst(i).received().contains(&p.executed));
        c.hit_if(unreachable, "held by an unreachable leaving instance");
        c.hit_if(behind, "held by a replica behind");
        c.hit_if(truth::leaving(l, l.primary), "held by a leaving primary");
    }
    let p = l.inst(l.primary);
    if truth::expect(l) == Expect::Configure && p.reachable && !p.read_only {
        let floor = d
            .status
            .semi_sync_min_acks
            .unwrap_or_else(|| truth::acks_for(l, members));
        let count = count_after(l, &d);
        prop_assert!(
            floor <= count,
            "the floor {} claims more than the count {} the primary runs",
            floor,
            count
        );
        // The count goes down to the new size's, before the leaving IO threads stop.
        prop_assert!(
            count <= truth::acks_for(l, l.spec),
            "count {} above the new size's",
            count
        );
        c.hit_if(
            truth::running_count(p) > truth::acks_for(l, l.spec),
            "count lowered",
        );
        let lowered = position(&steps, |op| {
            matches!(op, Operation::ConfigurePrimarySemiSync { index, .. }
                | Operation::SetReplicaSemiSync { index, enabled: false } if *index == l.primary)
        });
        let first_stop = position(
            &steps,
            |op| matches!(op, Operation::StopReplicaIoThread { index } if truth::leaving(l, *index)),
        );
        if let (Some(lowered), Some(stop)) = (lowered, first_stop) {
            prop_assert!(
                lowered < stop,
                "the count is lowered before the leaving stop"
            );
            c.hit("count lowered, then leaving stopped");
        }
        // Every answering leaving instance with a running IO thread is stopped.
        for i in l.spec..l.n {
            if let Some(inst) = truth::usable_mysqld(l, i)
                && i != l.primary
                && inst.io_running()
            {
                prop_assert!(
                    steps.iter().any(
                        |op| matches!(op, Operation::StopReplicaIoThread { index } if *index == i)
                    ),
                    "leaving {} keeps its IO thread",
                    i
                );
                c.hit("leaving IO stopped");
            }
        }
    }
    c.hit(if l.spec == 1 { "3 to 1" } else { "5 to 3" });
    count_shape(l, c, true);
    Ok(())
}

/// While a cluster shrinks, the leaving instances are never given anything that makes them
/// acknowledge, lead or serve; the wait count drops to the new size's before they stop, the
/// remembered floor never exceeds what the primary waits for, and they stop counting only
/// when the truth says no acknowledged commit needs them.
#[test]
fn shrinking_keeps_acknowledged_commits() {
    check(
        "shrinking_keeps_acknowledged_commits",
        3000,
        cases(&[(1, Kind::Shrink)], None),
        shrink_case,
    )
    .require(&[
        ("leaving primary switched over", 100),
        ("members dropped", 150),
        ("held by an unreachable leaving instance", 100),
        ("held by a replica behind", 100),
        ("held by a leaving primary", 100),
        ("count lowered, then leaving stopped", 100),
        ("count lowered", 150),
        ("only leaving candidates", 20),
        ("leaving IO stopped", 300),
        ("3 to 1", 300),
        ("5 to 3", 300),
        ("mariadb", 300),
        ("mysql", 300),
    ]);
}

/// A single instance never replicates from another instance or waits for ACKs; it only
/// stops a channel left over from before (it is the primary).
#[test]
fn single_instance_plans_no_replication() {
    check(
        "single_instance_plans_no_replication",
        800,
        cases(SIZED, Some(&[1])),
        |case, c| {
            let d = decide_case(case)?;
            for op in ops(&d) {
                let replication = match op {
                    Operation::ConfigureReplication { .. }
                    | Operation::ConfigurePrimarySemiSync { .. }
                    | Operation::SetPrimaryIndex { .. }
                    | Operation::Clone { .. } => true,
                    Operation::StopReplicaIoThread { .. } => !case.ledger.inst(0).io_running(),
                    _ => false,
                };
                prop_assert!(!replication || case.ledger.external, "{:?}", op);
            }
            c.hit_if(!d.steps.is_empty(), "planned something");
            Ok(())
        },
    )
    .require(&[("planned something", 100)]);
}

/// A condition's lastTransitionTime moves only when its status value changes.
#[test]
fn transition_times_move_only_on_change() {
    check(
        "transition_times_move_only_on_change",
        800,
        (cases(ALL, None), cases(ALL, None)),
        |(f, g), c| {
            let first = decide_case(f)?;
            let mut next = g.facts.clone();
            next.status = first.status.clone();
            next.status.current_primary_index = g.facts.status.current_primary_index;
            next.status
                .errant_replica_list
                .retain(|&i| i < g.facts.spec.replicas);
            next.now = Timestamp(f.facts.now.0 + 60);
            let second = decide(&next).unwrap();
            for cond in &second.status.conditions {
                if let Some(old) = first.status.condition(&cond.type_) {
                    if old.status == cond.status {
                        prop_assert_eq!(old.last_transition_time, cond.last_transition_time);
                    } else {
                        prop_assert_eq!(cond.last_transition_time, next.now);
                        c.hit("changed");
                    }
                }
            }
            Ok(())
        },
    )
    .require(&[("changed", 300)]);
}

// ---------------------------------------------------------------------------------------------
// GTID algebra.

fn gtid_set() -> impl Strategy<Value = GtidSet> {
    prop::collection::vec((0u32..4, any::<bool>(), 1u64..40, 0u64..10), 0..8).prop_map(|parts| {
        let mut s = GtidSet::new();
        for (src, maria, a, len) in parts {
            let source = if maria {
                SourceId::MariaDb {
                    domain: src % 2,
                    server_id: src,
                }
            } else {
                SourceId::Uuid {
                    uuid: u128::from(src) << 64 | 7,
                    tag: if src == 3 {
                        "tag_a".into()
                    } else {
                        String::new()
                    },
                }
            };
            s.insert_interval(source, a, a + len);
        }
        s
    })
}

#[test]
fn gtid_text_round_trips() {
    check("gtid_text_round_trips", 1000, gtid_set(), |a, _| {
        prop_assert_eq!(&GtidSet::parse(&a.to_string()).unwrap(), a);
        Ok(())
    });
}

#[test]
fn gtid_algebra_laws() {
    check(
        "gtid_algebra_laws",
        1000,
        (gtid_set(), gtid_set(), gtid_set()),
        |(a, b, c), _| {
            prop_assert_eq!(a.union(b), b.union(a));
            prop_assert_eq!(a.union(b).union(c), a.union(&b.union(c)));
            prop_assert!(a.is_subset(&a.union(b)));
            prop_assert!(a.subtract(b).is_subset(a));
            prop_assert!(a.subtract(b).intersection(b).is_empty());
            prop_assert_eq!(&a.subtract(b).union(&a.intersection(b)), a);
            prop_assert_eq!(a.is_subset(b), a.subtract(b).is_empty());
            prop_assert_eq!(a.union(b).subtract(b), a.subtract(b));
            prop_assert!(a.subtract(a).is_empty());
            prop_assert_eq!(
                a.union(b).transaction_count(),
                a.transaction_count() + b.transaction_count()
                    - a.intersection(b).transaction_count()
            );
            if a.is_subset(b) && b.is_subset(a) {
                prop_assert_eq!(a, b);
            }
            Ok(())
        },
    );
}
