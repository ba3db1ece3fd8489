//! The partitioned rollout as a whole: `decide_partition` drives a model of a StatefulSet
//! controller that restarts, at once, every Pod the partition lets go (stricter than the real
//! one, which takes them one by one), Pods that come back Ready and catch up after random
//! delays (or never, with a broken revision), and switchovers that take a few seconds. The
//! truth is the model's own record: which Pods were down together, which was restarted while
//! it was the primary, in which order, how many switchovers.

use moco_core::resources::{PartitionDecision, PartitionInput, PartitionPod, decide_partition};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestCaseResult};

use super::harness::{Counts, check};

const MIN_READY: u64 = 5;
const STALL: u64 = 120;
/// Seconds after its restart a Pod of a broken revision is seen failing (its container exited).
const CRASH: u64 = 3;
const SWITCHOVER_TICKS: u64 = 2;
const LIMIT: u64 = 3000;

#[derive(Clone, Debug)]
struct Rollout {
    replicas: u32,
    primary: u32,
    broken: bool,
    /// Per Pod: seconds to Ready after a restart, then to catch up.
    delays: Vec<(u64, u64)>,
    /// Seconds between two runs of the controller.
    cadence: u64,
}

fn rollout() -> impl Strategy<Value = Rollout> {
    prop_oneof![4 => 1u32..=5, 1 => 9u32..=12]
        .prop_flat_map(|n| {
            (
                Just(n),
                0..n,
                prop::bool::weighted(0.25),
                prop::collection::vec((1u64..=15, 0u64..=8), n as usize),
                1u64..=3,
            )
        })
        .prop_map(|(replicas, primary, broken, delays, cadence)| Rollout {
            replicas,
            primary,
            broken,
            delays,
            cadence,
        })
}

#[derive(Clone, Debug, Default)]
struct Pod {
    updated: bool,
    ready: bool,
    since: u64,
    caught_up: bool,
    restarts: u32,
    ready_at: Option<u64>,
    caught_up_at: Option<u64>,
}

/// What a run recorded.
#[derive(Debug, Default)]
struct Record {
    restarted: Vec<u32>,
    restarted_as_primary: Vec<u32>,
    most_down_at_once: usize,
    switchovers: u32,
    stalled: Option<(u32, String)>,
    finished_at: Option<u64>,
}

fn fail(why: String) -> TestCaseError {
    TestCaseError::fail(why)
}

fn run(r: &Rollout) -> Result<(Record, u32, u32), TestCaseError> {
    let n = r.replicas;
    let mut pods: Vec<Pod> = (0..n)
        .map(|_| Pod {
            ready: true,
            caught_up: true,
            ..Pod::default()
        })
        .collect();
    let mut partition = n;
    let mut primary = r.primary;
    let mut switching: Option<(u64, u32)> = None;
    let mut rec = Record::default();
    for tick in 0..LIMIT {
        // The StatefulSet controller: every Pod at or above the partition on the old revision.
        for i in (partition..n).rev() {
            let (ready_in, catch_up_in) = r.delays[i as usize];
            let p = &mut pods[i as usize];
            if p.updated {
                continue;
            }
            if i == primary && switching.is_none() && n > 1 {
                rec.restarted_as_primary.push(i);
            }
            rec.restarted.push(i);
            *p = Pod {
                updated: true,
                ready: false,
                since: tick,
                caught_up: false,
                restarts: p.restarts + 1,
                ready_at: (!r.broken).then_some(tick + ready_in),
                caught_up_at: (!r.broken).then_some(tick + ready_in + catch_up_in),
            };
        }
        for (i, p) in pods.iter_mut().enumerate() {
            if p.ready_at == Some(tick) {
                p.ready = true;
                p.since = tick;
            }
            if p.caught_up_at.is_some_and(|t| tick >= t) || i as u32 == primary && p.ready {
                p.caught_up = p.ready;
            }
        }
        if let Some((until, to)) = switching
            && tick >= until
        {
            primary = to;
            pods[to as usize].caught_up = true;
            switching = None;
        }
        let down = pods.iter().filter(|p| !p.ready).count();
        rec.most_down_at_once = rec.most_down_at_once.max(down);
        let healthy = switching.is_none() && pods.iter().all(|p| p.ready && p.caught_up);
        if partition == 0 && pods.iter().all(|p| p.updated && p.ready) {
            rec.finished_at = Some(tick);
            break;
        }
        if tick % r.cadence != 0 || switching.is_some() {
            continue;
        }
        let input = PartitionInput {
            replicas: n,
            partition: Some(partition),
            updated_replicas: pods.iter().filter(|p| p.updated).count() as u32,
            rollout_complete: false,
            settled: true,
            force_rolling_update: false,
            cluster_healthy: healthy,
            primary: Some(primary),
            min_ready_seconds: MIN_READY,
            stall_seconds: STALL,
            pods: pods
                .iter()
                .enumerate()
                .map(|(i, p)| PartitionPod {
                    index: i as u32,
                    updated: p.updated,
                    terminating: false,
                    ready: p.ready,
                    seconds_in_condition: tick - p.since,
                    caught_up: p.caught_up,
                    failing: r.broken && p.restarts > 0 && !p.ready && tick - p.since >= CRASH,
                    not_ready_reason: if r.broken && !p.ready {
                        "mysqld exited 1: unknown variable".to_owned()
                    } else {
                        String::new()
                    },
                })
                .collect(),
        };
        match decide_partition(&input) {
            PartitionDecision::Lower { from, to } => {
                if from != partition || to + 1 != from {
                    return Err(fail(format!(
                        "lowered {from} → {to} at partition {partition}"
                    )));
                }
                partition = to;
            }
            PartitionDecision::SwitchOver { from, to } => {
                if from != primary || to == primary || to >= n {
                    return Err(fail(format!("switchover {from} → {to}, primary {primary}")));
                }
                if !pods[to as usize].ready || !pods[to as usize].caught_up {
                    return Err(fail(format!("switchover to {to}, not ready or behind")));
                }
                rec.switchovers += 1;
                switching = Some((tick + SWITCHOVER_TICKS, to));
            }
            PartitionDecision::Stalled { index, reason } => {
                rec.stalled.get_or_insert((index, reason));
            }
            PartitionDecision::Idle | PartitionDecision::Wait(_) => {}
        }
    }
    Ok((rec, partition, primary))
}

/// What the rollout must do, from the model's record alone.
fn rollout_property(r: &Rollout, counts: &Counts) -> TestCaseResult {
    let n = r.replicas;
    let (rec, partition, primary) = run(r)?;
    let ctx = || format!("{r:?}\n{rec:?}");
    if rec.most_down_at_once > 1 {
        return Err(fail(format!(
            "{} Pods down at once: {}",
            rec.most_down_at_once,
            ctx()
        )));
    }
    if !rec.restarted_as_primary.is_empty() {
        return Err(fail(format!("restarted as the primary: {}", ctx())));
    }
    counts.hit_if(n >= 10, "ten or more instances");
    counts.hit_if(n == 1, "a single instance");
    counts.hit_if(
        r.primary > 0 && r.primary + 1 < n,
        "the primary in the middle",
    );
    counts.hit_if(n > 1 && r.primary + 1 == n, "the primary rolled first");
    if r.broken {
        // One Pod restarted (the highest), reported stalled with its reason; the others kept.
        counts.hit("broken revision");
        if rec.restarted != [n - 1] || partition != n - 1 {
            return Err(fail(format!(
                "a broken revision went past one Pod: {}",
                ctx()
            )));
        }
        match &rec.stalled {
            Some((i, why)) if *i == n - 1 && why.contains("unknown variable") => {}
            _ => {
                return Err(fail(format!(
                    "no stall reported for Pod {}: {}",
                    n - 1,
                    ctx()
                )));
            }
        }
        if n > 1 && primary == n - 1 {
            return Err(fail(format!("the broken Pod is the primary: {}", ctx())));
        }
        return Ok(());
    }
    let Some(_) = rec.finished_at else {
        return Err(fail(format!("not finished in {LIMIT} s: {}", ctx())));
    };
    let order: Vec<u32> = (0..n).rev().collect();
    if rec.restarted != order {
        return Err(fail(format!(
            "restart order {:?}: {}",
            rec.restarted,
            ctx()
        )));
    }
    let expected = match n {
        1 => 0,
        _ if r.primary + 1 == n => 2,
        _ => 1,
    };
    if rec.switchovers != expected {
        return Err(fail(format!(
            "{} switchovers, expected {expected}: {}",
            rec.switchovers,
            ctx()
        )));
    }
    counts.hit_if(expected == 2, "two switchovers");
    if rec.stalled.is_some() {
        return Err(fail(format!(
            "a healthy rollout reported stalled: {}",
            ctx()
        )));
    }
    Ok(())
}

#[test]
fn a_rollout_takes_one_pod_at_a_time_never_restarts_the_primary_and_stops_at_a_broken_pod() {
    check("rollout", 400, rollout(), rollout_property).require(&[
        ("ten or more instances", 40),
        ("a single instance", 20),
        ("the primary in the middle", 60),
        ("the primary rolled first", 40),
        ("broken revision", 60),
        ("two switchovers", 20),
    ]);
}
