//! What the growth and shrink tests share (`sim_growth.rs`, `sim_shrink.rs`): a cluster
//! resized under writes, rounds until a point of the resize, a write the old replicas miss,
//! the failover and heal that end a case, and the fault property's setup.

use moco_core::Decision;
use moco_core::facts::Flavor;
use moco_core::state::ClusterState;
use moco_sim::{WriteOutcome, WriteTarget};
use proptest::prelude::*;

use super::acks_needed;
use super::drive::{Ev, Run, cases};

/// A change of `spec.replicas`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resize {
    Grow,
    Shrink,
}

impl Resize {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Resize::Grow => "grow",
            Resize::Shrink => "shrink",
        }
    }

    /// Sets `spec.replicas` of `r` to `new`.
    pub(crate) fn apply(self, r: &Run, new: u32) {
        match self {
            Resize::Grow => r.sim.grow(new),
            Resize::Shrink => r.sim.shrink(new),
        }
    }
}

/// The cluster as a round found it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Before {
    /// `semiSyncMembers` of the status.
    pub members: Option<u32>,
    /// The instances running, leaving ones included.
    pub instances: u32,
}

/// The fault properties' configuration: a fixed seed, `PROPTEST_CASES` cases.
pub(crate) fn property_config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_124),
        ..ProptestConfig::default()
    }
}

/// Either flavor.
pub(crate) fn flavor() -> impl Strategy<Value = Flavor> {
    prop_oneof![Just(Flavor::Mysql), Just(Flavor::Mariadb)]
}

/// A Healthy cluster of `old` (one write replicated) resized to `new` plays `events` (see
/// [`Run::survive`]), heals and must end with MOCO's wait count for `new`.
pub(crate) async fn survive_resize(
    flavor: Flavor,
    old: u32,
    new: u32,
    resize: Resize,
    events: &[Ev],
) {
    let mut r = Run::booted(old, flavor).await;
    resize.apply(&r, new);
    r.log
        .push(format!("{flavor}: {} {old} -> {new}", resize.name()));
    // Faults that must spare the old replicas spare those below the smaller size.
    r.survive(old.min(new), events).await;
    r.check_wait_count(new);
}

/// A cluster of `old` (three writes) resized to `new` with every instance healthy: before
/// every round a client write that must be acknowledged at once or within two replication
/// steps, until the resize finished (at most 40 rounds); `each_round` sees every round, with
/// the cluster the round started from, and the rounds so far. Then MOCO's wait count for
/// `new`, no `semiSyncMinAcks`, and safety. Returns the cluster and the rounds it took.
pub(crate) async fn resize_under_writes(
    flavor: Flavor,
    old: u32,
    new: u32,
    resize: Resize,
    mut each_round: impl FnMut(&Run, Before, u32),
) -> (Run, u32) {
    let mut r = Run::new(old, flavor);
    r.settle("boot").await;
    for _ in 0..3 {
        r.sim.client_write(WriteTarget::Primary);
        r.sim.tick();
    }
    resize.apply(&r, new);
    r.log.push(format!("{} {old} -> {new}", resize.name()));
    let mut rounds = 0;
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
        let before = Before {
            members: r.sim.status().semi_sync_members,
            instances: r.sim.instance_count(),
        };
        let state = r.round().await;
        rounds += 1;
        each_round(&r, before, rounds);
        if r.resized(state, new) {
            break;
        }
        assert!(
            rounds < 40,
            "{flavor} {old}->{new}: never settled\n{}",
            r.log.join("\n")
        );
    }
    r.check_wait_count(new);
    assert_eq!(r.sim.status().semi_sync_min_acks, None);
    r.check_safety(resize.name());
    (r, rounds)
}

impl Run {
    /// The primary waits for MOCO's count of ACKs for `n` instances.
    pub(crate) fn check_wait_count(&self, n: u32) {
        assert_eq!(
            self.running_count(),
            acks_needed(n, self.sim.flavor()),
            "{}",
            self.log.join("\n")
        );
    }

    /// True once a resize to `new` finished: Healthy, the members and the instances at the
    /// new size.
    pub(crate) fn resized(&self, state: Option<ClusterState>, new: u32) -> bool {
        state == Some(ClusterState::Healthy)
            && self.sim.status().semi_sync_members == Some(new)
            && self.sim.instance_count() == new
    }

    /// Rounds, a tick before each, until one whose decision is `reached` (at most `max`).
    pub(crate) async fn rounds_until(&mut self, max: u32, reached: impl Fn(&Decision) -> bool) {
        for _ in 0..max {
            self.sim.tick();
            self.round().await;
            let (_, d) = self.sim.last_round().unwrap();
            if reached(&d) {
                break;
            }
        }
    }

    /// The old replicas 1 and 2 lose primary 0, which commits a write: only the other
    /// instances (`others`, for the message) can receive it, and it must stay unacknowledged.
    pub(crate) fn write_the_old_replicas_miss(&mut self, others: &str) {
        self.sim.cut_link(0, 1);
        self.sim.cut_link(0, 2);
        let outcome = self.sim.client_write(WriteTarget::Primary);
        self.sim.tick_n(3);
        let WriteOutcome::Pending(g) = outcome else {
            panic!("{outcome:?}\n{}", self.log.join("\n"));
        };
        assert!(
            !self.sim.acknowledged().contains(&g),
            "{}: acknowledged by {others}\n{}",
            self.sim.flavor(),
            self.log.join("\n")
        );
    }

    /// `crashed` crash (without their tails) and the network heals: `rounds` rounds, safe
    /// after the last (after each when `check_each`); then every fault heals and the cluster
    /// must reach Healthy, safely.
    pub(crate) async fn fail_over_and_heal(
        &mut self,
        crashed: &[u32],
        rounds: u32,
        check_each: bool,
    ) {
        self.log
            .push(format!("{crashed:?} crash, the network heals"));
        for &i in crashed {
            self.sim.crash(i, false);
        }
        self.sim.heal_network();
        for _ in 0..rounds {
            self.sim.tick();
            self.round().await;
            if check_each {
                self.check_safety("after the failover");
            }
        }
        self.check_safety("after the failover");
        self.sim.heal_all();
        self.settle("after the heal").await;
        self.check_safety("after the heal");
    }
}
