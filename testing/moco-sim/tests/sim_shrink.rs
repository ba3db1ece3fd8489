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
use moco_sim::{WriteOutcome, WriteTarget};
use proptest::prelude::*;

use common::drive::{Run, event};
use common::resize::{Resize, flavor, property_config, resize_under_writes, survive_resize};
use common::runtime;

/// With every instance healthy, every write during the shrink is acknowledged within two
/// replication steps; the leaving instances go only after the members dropped, and the
/// cluster ends with MOCO's wait count for its new size.
#[test]
fn shrinking_never_stalls_writes() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        for (old, new) in [(5, 3), (3, 1)] {
            let mut removed_at = None;
            let (r, _) = runtime().block_on(resize_under_writes(
                flavor,
                old,
                new,
                Resize::Shrink,
                |r, before, rounds| {
                    if r.sim.instance_count() < before.instances {
                        // Removed at the start of this round: the status said they may go.
                        assert_eq!(before.members, Some(new), "{}", r.log.join("\n"));
                        removed_at.get_or_insert(rounds);
                    }
                },
            ));
            assert!(removed_at.is_some(), "{}", r.log.join("\n"));
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
                if r.resized(state, 3) {
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
            r.rounds_until(10, |d| {
                d.steps
                    .iter()
                    .filter(|s| {
                        matches!(s.operation, Operation::StopReplicaIoThread { index } if index >= 3)
                    })
                    .count()
                    == 2
            })
            .await;
            r.write_the_old_replicas_miss("a leaving instance");
            assert_eq!(r.sim.status().semi_sync_members, Some(5));
            // The primary crashes.
            r.fail_over_and_heal(&[0], 6, false).await;
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
        // The primary crashes, the links heal.
        r.fail_over_and_heal(&[0], 8, true).await;
    });
}

proptest! {
    #![proptest_config(property_config())]

    /// Faults at any point of a shrink lose no acknowledged write, never make two writable
    /// acknowledgers, and once healed the cluster finishes shrinking.
    #[test]
    fn faults_while_shrinking_lose_nothing(
        flavor in flavor(),
        (old, new) in prop_oneof![Just((5u32, 3u32)), Just((3, 1))],
        events in prop::collection::vec(event(), 4..=40),
    ) {
        runtime().block_on(survive_resize(flavor, old, new, Resize::Shrink, &events));
    }
}
