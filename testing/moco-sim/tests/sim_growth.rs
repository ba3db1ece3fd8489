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
use moco_sim::WriteTarget;
use proptest::prelude::*;

use common::drive::{Ev, Run, event};
use common::resize::{Resize, flavor, property_config, resize_under_writes, survive_resize};
use common::runtime;

/// With healthy old replicas, every write during the growth is acknowledged within two
/// replication steps, and the cluster ends with MOCO's wait count.
#[test]
fn growing_never_stalls_writes() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        for (old, new) in [(1, 3), (3, 5)] {
            let (_, rounds) = runtime().block_on(resize_under_writes(
                flavor,
                old,
                new,
                Resize::Grow,
                |_, _, _| {},
            ));
            // A write after every round, at every stage of the growth.
            assert!(rounds > 1);
        }
    }
}

proptest! {
    #![proptest_config(property_config())]

    /// Faults at any point of a growth lose no acknowledged write, never make two writable
    /// acknowledgers, and once healed the cluster finishes growing.
    #[test]
    fn faults_while_growing_lose_nothing(
        flavor in flavor(),
        (old, new) in prop_oneof![Just((1u32, 3u32)), Just((3, 5))],
        events in prop::collection::vec(event(), 4..=40),
    ) {
        runtime().block_on(survive_resize(flavor, old, new, Resize::Grow, &events));
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
            r.rounds_until(10, |d| {
                d.steps
                    .iter()
                    .filter(|s| {
                        matches!(s.operation, Operation::ConfigureReplication { index, .. } if index >= 3)
                    })
                    .count()
                    == 2
            })
            .await;
            // Instance 3 falls behind, so instance 4 cannot join before it.
            r.sim.cut_link(0, 3);
            r.sim.client_write(WriteTarget::Primary);
            r.sim.tick_n(2);
            r.round().await;
            assert_eq!(r.sim.status().semi_sync_members, Some(3), "{}", r.log.join("\n"));
            // The old replicas lose the primary; a write reaches the learner only.
            r.write_the_old_replicas_miss("a learner");
            // The primary and learner 4 crash.
            r.fail_over_and_heal(&[0, 4], 6, false).await;
        });
    }
}
