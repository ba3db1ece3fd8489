//! Hung (frozen) primaries with the real manager and its health watch, on virtual time: a
//! primary that stops answering for longer than the detection window is failed over without
//! losing an acknowledged write, and fenced when it comes back; one that stalls for less than
//! the window keeps its role while the manager runs rounds throughout the stall.

use std::time::Duration;

use moco_cluster::health::DEFAULT_DETECTION_WINDOW;
use moco_cluster::manager::{Manager, ManagerConfig};
use moco_core::Action;
use moco_core::facts::Flavor;
use moco_core::state::ClusterState;
use moco_sim::{SimCluster, SimConfig, WriteOutcome, WriteTarget};
use tokio::time::Instant;

/// The manager as the property tests configure it (default health watch: 2 s window).
fn config() -> ManagerConfig {
    ManagerConfig {
        clone_timeout: Duration::from_secs(120),
        ..ManagerConfig::default()
    }
}

/// A bootstrapped, Healthy cluster with a few acknowledged writes.
async fn healthy(n: u32, flavor: Flavor) -> (SimCluster, Manager) {
    let sim = SimCluster::new(SimConfig::new(n, flavor));
    let manager = sim.manager(config());
    for _ in 0..12 {
        sim.tick();
        if let Ok(r) = manager.run_once().await
            && r.state() == ClusterState::Healthy
            && r.decision.action == Action::None
        {
            break;
        }
    }
    for _ in 0..3 {
        assert!(matches!(
            sim.client_write(WriteTarget::Primary),
            WriteOutcome::Pending(_) | WriteOutcome::Acknowledged(_)
        ));
        sim.tick();
    }
    assert_eq!(sim.acknowledged().len(), 3, "{}", sim.describe());
    (sim, manager)
}

/// No split brain, no bad promotion, and every acknowledged write on instance `primary`.
fn assert_safe(sim: &SimCluster, primary: u32) {
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    for p in sim.promotions() {
        assert!(p.problems.is_empty(), "{p:?}\n{}", sim.describe());
    }
    let have = sim.received(primary);
    for g in sim.acknowledged() {
        assert!(have.contains(&g), "acknowledged {g} missing on {primary}");
    }
}

/// A frozen primary is failed over within a few detection windows of virtual time: the new
/// primary is writable and holds every acknowledged write; when the old primary thaws —
/// still writable, a commit still waiting for its ACK — it is fenced, never acknowledging
/// anything the cluster then loses.
#[tokio::test(start_paused = true)]
async fn frozen_primary_is_failed_over_and_fenced_when_it_thaws() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        for n in [3, 5] {
            let (sim, manager) = healthy(n, flavor).await;
            // A commit no replica received yet, then the primary freezes.
            sim.cut_link(0, 1);
            let stuck = sim.client_write(WriteTarget::Primary);
            assert!(matches!(stuck, WriteOutcome::Pending(_)), "{stuck:?}");
            sim.freeze(0);
            sim.heal_network();
            let frozen_at = Instant::now();
            let mut rounds = 0;
            while sim.status().current_primary_index == 0 {
                rounds += 1;
                assert!(rounds <= 6, "no failover\n{}", sim.describe());
                sim.tick();
                let _ = manager.run_once().await;
                assert_safe(&sim, sim.status().current_primary_index);
            }
            let took = frozen_at.elapsed();
            assert!(
                took >= DEFAULT_DETECTION_WINDOW && took < DEFAULT_DETECTION_WINDOW * 3,
                "{flavor:?} x{n}: failed over after {took:?}"
            );
            let new = sim.status().current_primary_index;
            let promotion = sim.promotions().pop().unwrap();
            assert!(promotion.from_frozen, "{promotion:?}");
            assert!(sim.events().iter().any(|e| e.reason == "FailOver"));
            for _ in 0..3 {
                sim.tick();
                let _ = manager.run_once().await;
            }
            assert_eq!(sim.writable_ackers(), vec![new], "{}", sim.describe());
            let o = sim.client_write(WriteTarget::Primary);
            sim.tick();
            assert!(
                matches!(o, WriteOutcome::Pending(_) | WriteOutcome::Acknowledged(_)),
                "{o:?}"
            );
            assert_eq!(sim.acknowledged().len(), 4, "{}", sim.describe());
            assert_safe(&sim, new);

            // The old primary resumes where it was: writable, its commit still waiting.
            sim.thaw(0);
            assert!(sim.is_writable(0));
            assert_eq!(sim.pending(0), 1);
            for _ in 0..6 {
                sim.tick();
                let _ = manager.run_once().await;
                assert_safe(&sim, new);
                let _ = sim.client_write(WriteTarget::Instance(0));
                sim.tick();
                assert_safe(&sim, new);
            }
            assert_eq!(sim.status().current_primary_index, new);
            assert!(!sim.is_writable(0), "{}", sim.describe());
            assert_eq!(sim.acknowledged().len(), 4, "{}", sim.describe());
        }
    }
}

/// A primary frozen for less than the detection window keeps its role: the manager runs
/// rounds throughout the stall (their probes wait for the primary), and none of them stops a
/// replica, changes `currentPrimaryIndex` or records a failover.
#[tokio::test(start_paused = true)]
async fn short_stall_keeps_the_primary() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        for stall in [
            DEFAULT_DETECTION_WINDOW / 2,
            DEFAULT_DETECTION_WINDOW * 3 / 4,
        ] {
            let (sim, manager) = healthy(3, flavor).await;
            let events = sim.events().len();
            let start = Instant::now();
            let freeze_at = start + Duration::from_millis(500);
            let thaw_at = freeze_at + stall;
            let script = {
                let sim = sim.clone();
                async move {
                    tokio::time::sleep_until(freeze_at).await;
                    sim.freeze(0);
                    tokio::time::sleep_until(thaw_at).await;
                    sim.thaw(0);
                }
            };
            let rounds = async {
                let mut during = 0;
                let mut decisions = Vec::new();
                while Instant::now() < thaw_at + Duration::from_secs(2) {
                    if sim.is_frozen(0) {
                        during += 1;
                    }
                    sim.tick();
                    match manager.run_once().await {
                        Ok(r) => decisions.push((r.state(), r.decision.action)),
                        Err(e) => panic!("{flavor:?} {stall:?}: round failed: {e}"),
                    }
                    let _ = sim.client_write(WriteTarget::Primary);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (during, decisions)
            };
            let ((), (during, decisions)) = tokio::join!(script, rounds);
            assert!(during >= 1, "no round started during the stall");
            for (state, action) in &decisions {
                assert_ne!(
                    *action,
                    Action::Failover,
                    "{flavor:?} {stall:?}: {decisions:?}"
                );
                assert!(
                    !matches!(state, ClusterState::Failed | ClusterState::Lost),
                    "{flavor:?} {stall:?}: {decisions:?}"
                );
            }
            assert_eq!(sim.status().current_primary_index, 0);
            assert!(sim.promotions().is_empty());
            let new_events: Vec<_> = sim.events()[events..]
                .iter()
                .map(|e| e.reason.clone())
                .collect();
            assert!(
                !new_events.iter().any(|r| r.starts_with("FailOver")),
                "{new_events:?}"
            );
            assert_eq!(sim.writable_ackers(), vec![0]);
            assert_safe(&sim, 0);
            let spans = sim.frozen_spans();
            assert!(matches!(
                spans[0].end,
                Some(moco_sim::SpanEnd::Thawed {
                    failover_rounds: 0,
                    replaced: false,
                    ..
                })
            ));
        }
    }
}
