//! The simulator tests' driver for clusters that change size: a manager over a simulated
//! cluster, the safety checks, and the random events of the fault schedules.

use moco_cluster::manager::Manager;
use moco_core::facts::Flavor;
use moco_core::state::ClusterState;
use moco_sim::{SimCluster, SimConfig, WriteTarget};
use proptest::prelude::*;

use super::manager_config;

pub(crate) struct Run {
    pub sim: SimCluster,
    pub manager: Manager,
    pub log: Vec<String>,
}

impl Run {
    pub(crate) fn new(n: u32, flavor: Flavor) -> Self {
        let sim = SimCluster::new(SimConfig::new(n, flavor));
        let manager = sim.manager(manager_config());
        Run {
            sim,
            manager,
            log: Vec::new(),
        }
    }

    /// A Healthy cluster of `n` with one write replicated: where every size change starts.
    pub(crate) async fn booted(n: u32, flavor: Flavor) -> Self {
        let mut r = Run::new(n, flavor);
        r.settle("boot").await;
        r.sim.client_write(WriteTarget::Primary);
        r.sim.tick_n(2);
        r
    }

    /// Plays `events` (faults hit ordinals below `stable` where they must, see [`Ev`]),
    /// checking safety after each, then heals everything and waits for Healthy.
    pub(crate) async fn survive(&mut self, stable: u32, events: &[Ev]) {
        for ev in events {
            apply(self, stable, *ev).await;
            self.check_safety("during the schedule");
        }
        self.log.push("heal all".to_owned());
        self.sim.heal_all();
        self.settle("after the heal").await;
        self.check_safety("after the heal");
    }

    pub(crate) async fn round(&mut self) -> Option<ClusterState> {
        let r = self.manager.run_once().await;
        let state = self.sim.last_round().map(|(_, d)| d.state);
        self.log.push(format!(
            "round: {:?} -> {:?} {:?}",
            r.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            state,
            self.sim.last_round().map(|(_, d)| d
                .steps
                .iter()
                .map(|s| s.operation.label())
                .collect::<Vec<_>>())
        ));
        state
    }

    /// Rounds (with replication steps between them) until Healthy with every instance a
    /// member and none leaving.
    /// An instance the engine excludes as errant (an old primary's unacknowledged tail) is
    /// re-initialised by an operator after a while, as MOCO documents.
    pub(crate) async fn settle(&mut self, what: &str) {
        for k in 0..60 {
            self.sim.tick_n(2);
            let state = self.round().await;
            let members = self.sim.status().semi_sync_members;
            if state == Some(ClusterState::Healthy)
                && members == Some(self.sim.replicas())
                && self.sim.instance_count() == self.sim.replicas()
            {
                return;
            }
            if k % 10 == 9 {
                for i in self.sim.status().errant_replica_list {
                    self.log
                        .push(format!("operator re-initialises errant instance {i}"));
                    self.sim.wipe(i);
                }
                // The engine's `ReplicationImpossible`: a replica lacks transactions the
                // primary already purged (it was down while a cloned instance took over), and
                // MOCO's answer, like the engine's, is an operator re-initialising it.
                for i in self.lacking_purged() {
                    self.log.push(format!(
                        "operator re-initialises instance {i}, which lacks purged transactions"
                    ));
                    self.sim.wipe(i);
                }
            }
        }
        if let Ok(path) = std::env::var("SIM_GROWTH_DUMP")
            && let Some((facts, _)) = self.sim.last_round()
        {
            let _ = std::fs::write(
                path,
                serde_json::to_string_pretty(&facts).unwrap_or_default(),
            );
        }
        panic!("{what}: not Healthy\n{}", self.log.join("\n"));
    }

    /// Replicas of the last round that lack part of the primary's purged set.
    fn lacking_purged(&self) -> Vec<u32> {
        let Some((facts, _)) = self.sim.last_round() else {
            return Vec::new();
        };
        let primary = facts.status.current_primary_index;
        let Some(purged) = facts
            .instances
            .iter()
            .find(|i| i.index == primary)
            .and_then(|i| i.mysqld.as_ref())
            .map(|m| m.gtid_purged.clone())
        else {
            return Vec::new();
        };
        facts
            .instances
            .iter()
            .filter(|i| i.index != primary)
            .filter_map(|i| i.mysqld.as_ref().map(|m| (i.index, m)))
            .filter(|(_, m)| !purged.is_subset(&m.gtid_executed))
            .map(|(i, _)| i)
            .collect()
    }

    pub(crate) fn primary(&self) -> u32 {
        self.sim.status().current_primary_index
    }

    /// The primary's wait count as the last round saw it (0: semi-sync off).
    pub(crate) fn running_count(&self) -> u32 {
        let (facts, _) = self.sim.last_round().unwrap();
        let p = facts
            .instances
            .iter()
            .find(|i| i.index == self.primary())
            .and_then(|i| i.mysqld.clone())
            .unwrap();
        if p.semi_sync.source_enabled {
            p.semi_sync.wait_for_replica_count.unwrap_or(1)
        } else {
            0
        }
    }

    /// Every acknowledged write is on the primary, and no instant had two writable
    /// acknowledgers.
    pub(crate) fn check_safety(&self, what: &str) {
        let violations = self.sim.violations();
        assert!(
            violations.is_empty(),
            "{what}: {violations:?}\n{}",
            self.log.join("\n")
        );
        let held = self.sim.executed(self.primary());
        let lost: Vec<_> = self
            .sim
            .acknowledged()
            .into_iter()
            .filter(|g| !held.contains(g))
            .collect();
        assert!(
            lost.is_empty(),
            "{what}: acknowledged writes missing on primary {}: {lost:?}\n{}",
            self.primary(),
            self.log.join("\n")
        );
    }
}

/// Something that happens while a cluster changes size.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    Writes(u8),
    Tick(u8),
    Rounds(u8),
    CrashPrimary {
        keep_tail: bool,
    },
    /// A replica below `stable` (the size before a growth, after a shrink), not the primary,
    /// crashes.
    CrashOld(u8),
    /// Any instance restarts.
    Restart(u8),
    CutManager(u8),
    /// Any instance (a learner too) crashes.
    Crash(u8, bool),
    /// A replica applies and fetches slowly (`k` transactions per step).
    Slow(u8, u8),
    /// Two instances cannot reach each other.
    CutLink(u8, u8),
    HealNetwork,
}

pub(crate) fn event() -> impl Strategy<Value = Ev> {
    prop_oneof![
        6 => (1u8..=3).prop_map(Ev::Writes),
        4 => (1u8..=3).prop_map(Ev::Tick),
        6 => (1u8..=3).prop_map(Ev::Rounds),
        2 => any::<bool>().prop_map(|keep_tail| Ev::CrashPrimary { keep_tail }),
        2 => any::<u8>().prop_map(Ev::CrashOld),
        2 => any::<u8>().prop_map(Ev::Restart),
        1 => any::<u8>().prop_map(Ev::CutManager),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(i, t)| Ev::Crash(i, t)),
        2 => (any::<u8>(), 0u8..=2).prop_map(|(i, k)| Ev::Slow(i, k)),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Ev::CutLink(a, b)),
        1 => Just(Ev::HealNetwork),
    ]
}

async fn apply(r: &mut Run, stable: u32, ev: Ev) {
    r.log.push(format!("{ev:?}"));
    // Leaving instances are hit too.
    let n = r.sim.instance_count();
    match ev {
        Ev::Writes(k) => {
            for _ in 0..k {
                r.sim.client_write(WriteTarget::Primary);
            }
        }
        Ev::Tick(k) => r.sim.tick_n(u32::from(k)),
        Ev::Rounds(k) => {
            for _ in 0..k {
                r.round().await;
                r.sim.tick();
            }
        }
        Ev::CrashPrimary { keep_tail } => r.sim.crash(r.primary(), keep_tail),
        Ev::CrashOld(i) => {
            let i = u32::from(i) % stable;
            if i != r.primary() {
                r.sim.crash(i, true);
            }
        }
        Ev::Restart(i) => {
            let i = u32::from(i) % n;
            if !r.sim.is_up(i) {
                r.sim.restart(i);
            }
        }
        Ev::CutManager(i) => r.sim.cut_manager(u32::from(i) % n),
        Ev::Crash(i, keep_tail) => r.sim.crash(u32::from(i) % n, keep_tail),
        Ev::Slow(i, k) => {
            let per_tick = (k > 0).then_some(u32::from(k));
            r.sim.set_slow(u32::from(i) % n, per_tick);
        }
        Ev::CutLink(a, b) => r.sim.cut_link(u32::from(a) % n, u32::from(b) % n),
        Ev::HealNetwork => r.sim.heal_network(),
    }
}

pub(crate) fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}
