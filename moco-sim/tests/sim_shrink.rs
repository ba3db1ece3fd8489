//! Shrinking a cluster (`spec.replicas` 5 → 3, 3 → 1) in the simulator, under writes:
//!
//! - with every instance healthy, every write is acknowledged within two replication steps at
//!   every point of the shrink, and the leaving instances are removed only once the engine
//!   recorded that they no longer count;
//! - a leaving primary is switched over first, never to another leaving instance;
//! - a leaving instance never acknowledges a commit alone once the shrink started;
//! - faults during the shrink never lose an acknowledged write and never leave two writable
//!   instances that can acknowledge; once healed, the cluster reaches Healthy at its new size
//!   with MOCO's wait count.

use crate::common;

use moco_core::facts::Flavor;
use moco_core::operation::Operation;
use moco_core::state::ClusterState;
use moco_sim::{WriteOutcome, WriteTarget};
use proptest::prelude::*;

use common::drive::{Run, cases, event};
use common::{acks_needed, runtime};

/// True once the shrink finished: Healthy, the members and the instances at the new size.
fn shrunk(r: &Run, state: Option<ClusterState>, new: u32) -> bool {
    state == Some(ClusterState::Healthy)
        && r.sim.status().semi_sync_members == Some(new)
        && r.sim.instance_count() == new
}

/// With every instance healthy, every write during the shrink is acknowledged within two
/// replication steps; the leaving instances go only after the members dropped, and the
/// cluster ends with MOCO's wait count for its new size.
#[test]
fn shrinking_never_stalls_writes() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        for (old, new) in [(5, 3), (3, 1)] {
            runtime().block_on(async {
                let mut r = Run::new(old, flavor);
                r.settle("boot").await;
                for _ in 0..3 {
                    r.sim.client_write(WriteTarget::Primary);
                    r.sim.tick();
                }
                r.sim.shrink(new);
                r.log.push(format!("shrink {old} -> {new}"));
                let mut rounds = 0;
                let mut removed_at = None;
                loop {
                    match r.sim.client_write(WriteTarget::Primary) {
                        WriteOutcome::Acknowledged(_) => {}
                        WriteOutcome::Pending(g) => {
                            r.sim.tick_n(2);
                            assert!(
                                r.sim.acknowledged().contains(&g),
                                "{flavor} {old}->{new}: write {g:?} waits after round {rounds}\n{}",
                                r.log.join("\n")
                            );
                        }
                        WriteOutcome::Rejected => panic!(
                            "{flavor} {old}->{new}: write refused after round {rounds}\n{}",
                            r.log.join("\n")
                        ),
                    }
                    r.sim.tick();
                    let members_before = r.sim.status().semi_sync_members;
                    let count_before = r.sim.instance_count();
                    let state = r.round().await;
                    rounds += 1;
                    if r.sim.instance_count() < count_before {
                        // Removed at the start of this round: the status said they may go.
                        assert_eq!(members_before, Some(new), "{}", r.log.join("\n"));
                        removed_at.get_or_insert(rounds);
                    }
                    if shrunk(&r, state, new) {
                        break;
                    }
                    assert!(
                        rounds < 40,
                        "{flavor} {old}->{new}: never settled\n{}",
                        r.log.join("\n")
                    );
                }
                assert!(removed_at.is_some(), "{}", r.log.join("\n"));
                assert_eq!(
                    r.running_count(),
                    acks_needed(new, flavor),
                    "{}",
                    r.log.join("\n")
                );
                assert_eq!(r.sim.status().semi_sync_min_acks, None);
                r.check_safety("shrink");
            });
        }
    }
}

/// A primary past the new size is switched over to a remaining instance before anything
/// leaves.
#[test]
fn a_leaving_primary_is_switched_over_first() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        runtime().block_on(async {
            let mut r = Run::new(5, flavor);
            r.sim.force_primary(4);
            r.settle("boot").await;
            assert_eq!(r.primary(), 4);
            r.sim.client_write(WriteTarget::Primary);
            r.sim.tick_n(2);
            r.sim.shrink(3);
            for _ in 0..20 {
                r.sim.tick();
                let state = r.round().await;
                if shrunk(&r, state, 3) {
                    break;
                }
            }
            assert!(r.primary() < 3, "{}", r.log.join("\n"));
            let switched = r
                .sim
                .promotions()
                .iter()
                .filter(|p| p.from == 4)
                .map(|p| p.to)
                .collect::<Vec<_>>();
            assert_eq!(switched, vec![0], "{}", r.log.join("\n"));
            r.settle("after the shrink").await;
            r.check_safety("after the shrink");
        });
    }
}

/// Once the shrink started, a leaving instance acknowledges nothing: with the remaining
/// replicas cut off from the primary, a commit only the leaving instances could receive stays
/// unacknowledged, so losing the primary loses nothing acknowledged. (Were the leaving
/// instances still acknowledging under the lowered count, the commit would be acknowledged
/// by one of them alone, and removing it would drop it.)
#[test]
fn a_leaving_instance_never_acknowledges_alone() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        runtime().block_on(async {
            let mut r = Run::booted(5, flavor).await;
            r.sim.shrink(3);
            // Until the round that lowered the count and stopped the leaving instances.
            for _ in 0..10 {
                r.sim.tick();
                r.round().await;
                let (_, d) = r.sim.last_round().unwrap();
                let stopped = d
                    .steps
                    .iter()
                    .filter(|s| {
                        matches!(s.operation, Operation::StopReplicaIoThread { index } if index >= 3)
                    })
                    .count();
                if stopped == 2 {
                    break;
                }
            }
            r.sim.cut_link(0, 1);
            r.sim.cut_link(0, 2);
            let outcome = r.sim.client_write(WriteTarget::Primary);
            r.sim.tick_n(3);
            let WriteOutcome::Pending(g) = outcome else {
                panic!("{outcome:?}\n{}", r.log.join("\n"));
            };
            assert!(
                !r.sim.acknowledged().contains(&g),
                "{flavor}: acknowledged by a leaving instance\n{}",
                r.log.join("\n")
            );
            assert_eq!(r.sim.status().semi_sync_members, Some(5));
            r.log.push("primary crashes".to_owned());
            r.sim.crash(0, false);
            r.sim.heal_network();
            for _ in 0..6 {
                r.sim.tick();
                r.round().await;
            }
            r.check_safety("after the failover");
            r.sim.heal_all();
            r.settle("after the heal").await;
            r.check_safety("after the heal");
        });
    }
}

/// Commits acknowledged by the leaving instances alone (the remaining replicas were cut off
/// from the primary when the shrink began) keep them counting until a remaining replica holds
/// them: removing them earlier and then losing the primary would drop those commits.
#[test]
fn the_leaving_instances_stay_while_only_they_hold_acknowledged_commits() {
    runtime().block_on(async {
        let mut r = Run::booted(5, Flavor::Mysql).await;
        r.sim.cut_link(0, 1);
        r.sim.cut_link(0, 2);
        let WriteOutcome::Pending(g) = r.sim.client_write(WriteTarget::Primary) else {
            panic!("MOCO's count 2 waits for the ACKs");
        };
        r.sim.tick_n(2);
        assert!(r.sim.acknowledged().contains(&g), "3 and 4 acknowledged it");
        r.sim.shrink(3);
        for _ in 0..4 {
            r.sim.tick();
            r.round().await;
        }
        assert_eq!(
            (r.sim.status().semi_sync_members, r.sim.instance_count()),
            (Some(5), 5),
            "only the leaving instances hold an acknowledged commit\n{}",
            r.log.join("\n")
        );
        r.log.push("primary crashes, links heal".to_owned());
        r.sim.crash(0, false);
        r.sim.heal_network();
        for _ in 0..8 {
            r.sim.tick();
            r.round().await;
            r.check_safety("after the failover");
        }
        r.sim.heal_all();
        r.settle("after the heal").await;
        r.check_safety("after the heal");
    });
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_124),
        ..ProptestConfig::default()
    })]

    /// Faults at any point of a shrink lose no acknowledged write, never make two writable
    /// acknowledgers, and once healed the cluster finishes shrinking.
    #[test]
    fn faults_while_shrinking_lose_nothing(
        flavor in prop_oneof![Just(Flavor::Mysql), Just(Flavor::Mariadb)],
        (old, new) in prop_oneof![Just((5u32, 3u32)), Just((3, 1))],
        events in prop::collection::vec(event(), 4..=40),
    ) {
        runtime().block_on(async {
            let mut r = Run::booted(old, flavor).await;
            r.sim.shrink(new);
            r.log.push(format!("{flavor}: shrink {old} -> {new}"));
            r.survive(new, &events).await;
            assert_eq!(r.running_count(), acks_needed(new, flavor), "{}", r.log.join("\n"));
        });
    }
}
