//! The manager's liveness (issue 35): every round ends within the limit its plan allows
//! (`Manager::round_limit`), whatever the instances do, and a cluster whose faults end is
//! Healthy again within a bound. Schedules freeze and thaw the primary and replicas, and stall
//! them (pings answered while the probe, or every statement, waits: a server whose statements
//! wait on a lock, as a MariaDB primary's binlog lock behind commits waiting for
//! acknowledgements), each for a random length around the detection window, under writes.
//! Safety is checked throughout: no acknowledged write lost, no split brain.
//!
//! The truth is the manager's own report of each round's duration against the virtual clock,
//! compared with the limit computed from the plan; the schedule is random, and the cases that
//! matter (a probe timing out on a silent instance, a step timing out on a stalled one, a
//! failover, a thawed ex-primary fenced) must occur in the run.

use std::time::Duration;

use moco_core::facts::Flavor;
use moco_core::state::ClusterState;
use moco_sim::{Stall, WriteTarget};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tokio::time::Instant;

use crate::common::drive::Run;
use crate::common::{manager_config, runtime};

/// Who a fault hits.
#[derive(Clone, Copy, Debug)]
enum Who {
    Primary,
    Any(u8),
}

/// One event of a schedule. A freeze lasts its `ms` of virtual time while the manager keeps
/// running rounds; a stall lasts its `ms` too but is ended only by the next `EndStalls` (or the
/// heal at the end), so stalls overlap freezes and failovers.
#[derive(Clone, Copy, Debug)]
enum Ev {
    Writes(u8),
    Rounds(u8),
    Freeze(Who, u16),
    Stall(Who, u8, u16),
    EndStalls,
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![2 => Just(Who::Primary), 3 => any::<u8>().prop_map(Who::Any)]
}

/// Around the detection window (1.5 s): shorter ones must not fail over, longer ones must.
fn length() -> impl Strategy<Value = u16> {
    500u16..=5000
}

fn event() -> impl Strategy<Value = Ev> {
    prop_oneof![
        4 => (1u8..=4).prop_map(Ev::Writes),
        3 => (1u8..=3).prop_map(Ev::Rounds),
        3 => (who(), length()).prop_map(|(w, ms)| Ev::Freeze(w, ms)),
        4 => (who(), 0u8..3, length()).prop_map(|(w, kind, ms)| Ev::Stall(w, kind, ms)),
        2 => Just(Ev::EndStalls),
    ]
}

fn schedule() -> impl Strategy<Value = Vec<Ev>> {
    prop::collection::vec(event(), 3..10)
}

/// What the run saw, to check that the cases that matter occurred.
#[derive(Debug, Default)]
struct Seen {
    rounds: usize,
    longest: Duration,
    /// Rounds that waited for a silent or stalled instance at least a detection window.
    waited_for_an_instance: usize,
    /// Rounds whose step ran out of time on a stalled instance.
    step_timeouts: usize,
    failovers: usize,
    fenced_ex_primaries: usize,
    /// Virtual seconds from the end of the last fault to Healthy (or to Degraded by an errant
    /// instance only, which waits for an operator), per case.
    back_to_healthy: Vec<Duration>,
}

/// Runs rounds as the manager's loop would (the check interval between them, the health
/// watch pinging meanwhile) for `ms` of virtual time, with writes now and then.
async fn hold(r: &mut Run, ms: u16) {
    let until = Instant::now() + Duration::from_millis(u64::from(ms));
    let mut k = 0u32;
    while Instant::now() < until {
        round(r).await;
        r.sim.tick();
        if k.is_multiple_of(2) {
            r.sim.client_write(WriteTarget::Primary);
        }
        k += 1;
        tokio::time::sleep(manager_config().check_interval).await;
        r.check_safety("while a fault lasts");
    }
}

/// One round, failing the test if it never ends (a wait without a limit in the manager would
/// otherwise hang the test in virtual time).
async fn round(r: &mut Run) -> Option<ClusterState> {
    match tokio::time::timeout(Duration::from_secs(3600), r.round()).await {
        Ok(state) => state,
        Err(_) => panic!(
            "a round did not end within an hour of virtual time\n{}",
            r.log.join("\n")
        ),
    }
}

fn target(r: &Run, w: Who) -> u32 {
    match w {
        Who::Primary => r.primary(),
        Who::Any(i) => u32::from(i) % r.sim.instance_count(),
    }
}

async fn apply(r: &mut Run, ev: Ev) {
    r.log.push(format!("{ev:?}"));
    match ev {
        Ev::Writes(k) => {
            for _ in 0..k {
                r.sim.client_write(WriteTarget::Primary);
            }
            r.sim.tick();
        }
        Ev::Rounds(k) => {
            for _ in 0..k {
                round(r).await;
                r.sim.tick();
                tokio::time::sleep(manager_config().check_interval).await;
            }
        }
        Ev::Freeze(w, ms) => {
            let i = target(r, w);
            r.sim.freeze(i);
            hold(r, ms).await;
            r.log.push(format!("thaw {i}"));
            r.sim.thaw(i);
        }
        Ev::Stall(w, kind, ms) => {
            let i = target(r, w);
            let kind = match kind {
                0 => Stall::Probe,
                1 => Stall::Commands,
                _ => Stall::Statements,
            };
            r.sim.stall(i, kind);
            hold(r, ms).await;
        }
        Ev::EndStalls => {
            for i in 0..r.sim.instance_count() {
                r.sim.stall(i, Stall::None);
            }
        }
    }
}

fn check_rounds(r: &Run, seen: &mut Seen) {
    let window = manager_config().health.detection_window;
    for t in r.sim.round_timings() {
        assert!(
            t.took <= t.limit,
            "a round took {:?}, more than its limit {:?}\n{}",
            t.took,
            t.limit,
            r.log.join("\n")
        );
        seen.rounds += 1;
        seen.longest = seen.longest.max(t.took);
        if t.took >= window {
            seen.waited_for_an_instance += 1;
        }
    }
    seen.step_timeouts += r
        .log
        .iter()
        .filter(|l| l.contains("did not finish within"))
        .count();
    let events = r.sim.events();
    let count = |reason: &str| events.iter().filter(|e| e.reason == reason).count();
    seen.failovers += count("FailOver");
    seen.fenced_ex_primaries += r
        .sim
        .operations()
        .iter()
        .filter(|op| format!("{:?}", op.op).starts_with("SetSuperReadOnly"))
        .count();
}

async fn case(flavor: Flavor, events: &[Ev], seen: &mut Seen) {
    let mut r = Run::booted(3, flavor).await;
    for ev in events {
        apply(&mut r, *ev).await;
    }
    r.log.push("heal all".to_owned());
    r.sim.heal_all();
    let healed = Instant::now();
    // Rounds as the manager's loop runs them, until Healthy with every instance a member.
    for _ in 0..30 {
        let state = round(&mut r).await;
        r.sim.tick_n(2);
        let status = r.sim.status();
        let waits_for_an_operator = state == Some(ClusterState::Degraded)
            && !status.errant_replica_list.is_empty()
            && r.sim.last_round().is_some_and(|(_, d)| d.steps.is_empty());
        if (state == Some(ClusterState::Healthy)
            && status.semi_sync_members == Some(r.sim.replicas()))
            || waits_for_an_operator
        {
            break;
        }
        tokio::time::sleep(manager_config().check_interval).await;
    }
    let back = healed.elapsed();
    // An errant ex-primary (its unacknowledged tail) waits for an operator, as MOCO's does.
    r.settle("after the faults ended").await;
    // Generous: a fenced ex-primary may be re-cloned or re-pointed, a few rounds each.
    assert!(
        back <= Duration::from_secs(120),
        "Healthy again only after {back:?}\n{}",
        r.log.join("\n")
    );
    seen.back_to_healthy.push(back);
    if std::env::var_os("SIM_LIVENESS_LOG").is_some() {
        eprintln!("---- case\n{}", r.log.join("\n"));
    }
    r.check_safety("after the faults ended");
    check_rounds(&r, seen);
}

fn run(flavor: Flavor, cases: u32, seed: u64) -> Seen {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    let mut seen = Seen::default();
    for _ in 0..cases {
        let events = schedule().new_tree(&mut runner).unwrap().current();
        runtime().block_on(case(flavor, &events, &mut seen));
    }
    seen
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

#[test]
fn every_round_ends_within_its_limit_whatever_the_instances_do() {
    let seed = std::env::var("SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(35);
    for flavor in [Flavor::Mariadb, Flavor::Mysql] {
        let seen = run(flavor, cases(), seed);
        let mut back = seen.back_to_healthy.clone();
        back.sort();
        eprintln!(
            "{flavor:?}: {} rounds, longest {:?}; {} waited a detection window for an instance, \
             {} step timeouts, {} failovers, {} fences; back to Healthy: median {:?}, max {:?}",
            seen.rounds,
            seen.longest,
            seen.waited_for_an_instance,
            seen.step_timeouts,
            seen.failovers,
            seen.fenced_ex_primaries,
            back.get(back.len() / 2),
            back.last()
        );
        // The cases this property is about must have happened.
        assert!(seen.waited_for_an_instance > 0, "{seen:?}");
        assert!(seen.step_timeouts > 0, "{seen:?}");
        assert!(seen.failovers > 0, "{seen:?}");
        assert!(seen.fenced_ex_primaries > 0, "{seen:?}");
    }
}

/// A replica whose SQL thread stops at once whenever it is started (a duplicate key): every
/// round plans the same start. The manager's own loop keeps trying, with a pause that doubles
/// up to the check interval, not at the speed of its rounds. (Regression: on the real control
/// plane it started the thread about thirty times a second, probing every instance each
/// time.) The manager's loop runs here as the operator runs it, in virtual time; a loop that
/// never paused would keep tokio's clock from advancing, so the manager is stopped at its
/// 2,000th operation and the count below fails the test instead of hanging it. Once the
/// fault is repaired, the next start holds and the cluster is Healthy.
#[test]
fn a_plan_without_effect_is_retried_with_a_growing_pause() {
    runtime().block_on(async {
        for flavor in [Flavor::Mariadb, Flavor::Mysql] {
            let r = Run::booted(3, flavor).await;
            let replica = (0..3).find(|&i| i != r.primary()).unwrap_or(1);
            r.sim.fail_sql_thread(replica, true);
            r.sim.client_write(WriteTarget::Primary);
            r.sim.tick();
            let before = r.sim.operations().len();
            r.sim.kill_manager_after(2000);
            let window = Duration::from_secs(30);
            let (stop, stopped) = tokio::sync::watch::channel(false);
            tokio::select! {
                () = r.manager.run(stopped.clone()) => panic!("the loop ended by itself"),
                () = tokio::time::sleep(window) => {}
            }
            let is_start = |op: &moco_sim::SimOp| {
                matches!(op, moco_sim::SimOp::StartReplica { instance, sql_thread_only: true }
                    if *instance == replica)
            };
            let starts = r
                .sim
                .operations_since(before)
                .iter()
                .filter(|op| is_start(&op.op))
                .count();
            // At once, then after 0.1, 0.2, 0.4, 0.8 s, then every check interval (1 s).
            let interval = manager_config().check_interval;
            let most = (window.as_millis() / interval.as_millis()) as usize + 10;
            eprintln!("{flavor:?}: {starts} starts of the SQL thread in {window:?}");
            assert!(
                (10..=most).contains(&starts),
                "{flavor:?}: {starts} starts of instance {replica}'s SQL thread in {window:?} \
                 (expected 10 to {most})"
            );

            // Repaired: the next start holds, and the loop settles.
            r.sim.clear_manager_kill();
            r.sim.fail_sql_thread(replica, false);
            let settled = async {
                loop {
                    r.sim.tick();
                    if r.sim.last_round().map(|(_, d)| d.state) == Some(ClusterState::Healthy) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            };
            tokio::select! {
                () = r.manager.run(stopped) => panic!("the loop ended by itself"),
                () = settled => {}
                () = tokio::time::sleep(Duration::from_secs(60)) => {
                    panic!("{flavor:?}: not Healthy within 60 s of the repair: {}", r.sim.describe())
                }
            }
            drop(stop);
        }
    });
}
