//! Growing a cluster (`spec.replicas` 1 → 3, 3 → 5) in the simulator, under writes:
//!
//! - with the old replicas healthy, every write is acknowledged within two replication steps
//!   at every point of the growth (MOCO raises the wait count before the clones, so a
//!   1 → 3 primary waits for a replica that does not exist yet);
//! - faults during the growth (a primary or an old replica crashing at any point, the manager
//!   losing an instance) never lose an acknowledged write and never leave two writable
//!   instances that can acknowledge; once healed, the cluster reaches Healthy with every
//!   instance a member and MOCO's wait count.

use crate::common;

use moco_core::facts::Flavor;
use moco_core::operation::Operation;
use moco_core::state::ClusterState;
use moco_sim::{WriteOutcome, WriteTarget};
use proptest::prelude::*;

use common::drive::{Ev, Run, cases, event};
use common::{acks_needed, runtime};

/// With healthy old replicas, every write during the growth is acknowledged within two
/// replication steps, and the cluster ends with MOCO's wait count.
#[test]
fn growing_never_stalls_writes() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        for (old, new) in [(1, 3), (3, 5)] {
            runtime().block_on(async {
                let mut r = Run::new(old, flavor);
                r.settle("boot").await;
                for _ in 0..3 {
                    r.sim.client_write(WriteTarget::Primary);
                    r.sim.tick();
                }
                r.sim.grow(new);
                r.log.push(format!("grow {old} -> {new}"));
                let mut rounds = 0;
                let mut writes = 0;
                loop {
                    // A write after every round, at every stage of the growth.
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
                    writes += 1;
                    r.sim.tick();
                    let state = r.round().await;
                    rounds += 1;
                    let done = state == Some(ClusterState::Healthy)
                        && r.sim.status().semi_sync_members == Some(new);
                    if done {
                        break;
                    }
                    assert!(
                        rounds < 40,
                        "{flavor} {old}->{new}: never settled\n{}",
                        r.log.join("\n")
                    );
                }
                assert!(writes > 1);
                assert_eq!(
                    r.running_count(),
                    acks_needed(new, flavor),
                    "{}",
                    r.log.join("\n")
                );
                assert_eq!(r.sim.status().semi_sync_min_acks, None);
                r.check_safety("growth");
            });
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_124),
        ..ProptestConfig::default()
    })]

    /// Faults at any point of a growth lose no acknowledged write, never make two writable
    /// acknowledgers, and once healed the cluster finishes growing.
    #[test]
    fn faults_while_growing_lose_nothing(
        flavor in prop_oneof![Just(Flavor::Mysql), Just(Flavor::Mariadb)],
        (old, new) in prop_oneof![Just((1u32, 3u32)), Just((3, 5))],
        events in prop::collection::vec(event(), 4..=40),
    ) {
        runtime().block_on(async {
            let mut r = Run::booted(old, flavor).await;
            r.sim.grow(new);
            r.log.push(format!("{flavor}: grow {old} -> {new}"));
            r.survive(old, &events).await;
            assert_eq!(r.running_count(), acks_needed(new, flavor), "{}", r.log.join("\n"));
        });
    }
}

/// Found by `faults_while_growing_lose_nothing`: the manager loses the primary during a
/// 3 → 5 growth for two rounds.
#[test]
fn growth_resumes_after_the_manager_lost_the_primary() {
    runtime().block_on(async {
        let mut r = Run::booted(3, Flavor::Mysql).await;
        r.sim.grow(5);
        let events = [
            Ev::Writes(1),
            Ev::CutManager(0),
            Ev::Rounds(1),
            Ev::Rounds(1),
        ];
        r.survive(3, &events).await;
    });
}

/// A learner never acknowledges: with the old replicas cut off from the primary, a commit
/// that only a caught-up learner received stays unacknowledged, so losing the primary and
/// that learner loses nothing acknowledged. (Were learners semi-sync replicas, the commit
/// would be acknowledged by the learner alone, and the failover the two old replicas allow
/// would drop it.)
#[test]
fn a_learner_never_acknowledges() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        runtime().block_on(async {
            let mut r = Run::booted(3, flavor).await;
            r.sim.grow(5);
            // Until the round that points both new instances at the primary (as learners).
            for _ in 0..10 {
                r.sim.tick();
                r.round().await;
                let (_, d) = r.sim.last_round().unwrap();
                let configured = d
                    .steps
                    .iter()
                    .filter(|s| {
                        matches!(s.operation, Operation::ConfigureReplication { index, .. } if index >= 3)
                    })
                    .count();
                if configured == 2 {
                    break;
                }
            }
            // Instance 3 falls behind, so instance 4 cannot join before it.
            r.sim.cut_link(0, 3);
            r.sim.client_write(WriteTarget::Primary);
            r.sim.tick_n(2);
            r.round().await;
            assert_eq!(r.sim.status().semi_sync_members, Some(3), "{}", r.log.join("\n"));
            // The old replicas lose the primary; a write reaches the learner only.
            r.sim.cut_link(0, 1);
            r.sim.cut_link(0, 2);
            let outcome = r.sim.client_write(WriteTarget::Primary);
            r.sim.tick_n(3);
            let WriteOutcome::Pending(g) = outcome else {
                panic!("{outcome:?}");
            };
            assert!(
                !r.sim.acknowledged().contains(&g),
                "{flavor}: acknowledged by a learner\n{}",
                r.log.join("\n")
            );
            r.log.push("primary and learner 4 crash".to_owned());
            r.sim.crash(0, false);
            r.sim.crash(4, false);
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
