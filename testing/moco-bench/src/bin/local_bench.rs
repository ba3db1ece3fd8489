//! `local-bench`: the numbers of `moco local` on a 3-instance MariaDB cluster — bring-up time,
//! switchover write unavailability, failover time from `kill -9` and from a frozen (SIGSTOP)
//! primary to the first acknowledged write on the new primary, a false-failover soak (short
//! stalls, a long query and both cores saturated: failovers counted, must be 0), and clone time
//! of a ~100 MB replica. Every run checks that no acknowledged row was lost. Run it with `scripts/bench-local.sh`; method and numbers are in
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use moco_tests::local::{
    ClusterDir, Compared, Writer, assert_no_acked_loss, connect, create_table, create_table_with,
    endpoint_port, free_port_block, instance_port, moco_async, opts, primary_index,
    purge_binary_logs, server_or_skip, state_is, up_args, up_detached, wait_status_async,
};
use moco_tests::started_or_skip;
use mysql_async::prelude::Queryable;

#[derive(Default)]
struct Samples {
    bring_up: Vec<Duration>,
    connect: Vec<Duration>,
    switchover_gap: Vec<Duration>,
    failover: Vec<Duration>,
    hung_failover: Vec<Duration>,
    soak_failovers: u64,
    soak_stalls: u64,
    clone: Vec<Duration>,
    clone_mb: Vec<u64>,
    grow3_gap: Vec<Duration>,
    grow3_time: Vec<Duration>,
    grow5_gap: Vec<Duration>,
    grow5_time: Vec<Duration>,
    shrink3_gap: Vec<Duration>,
    shrink3_time: Vec<Duration>,
    shrink1_gap: Vec<Duration>,
    shrink1_time: Vec<Duration>,
    rows: u64,
}

fn ms(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn summary(v: &[Duration]) -> String {
    let mut s = v.to_vec();
    s.sort();
    if s.is_empty() {
        return "-".into();
    }
    format!(
        "{} (min {}, max {}, n={})",
        ms(s[s.len() / 2]),
        ms(s[0]),
        ms(s[s.len() - 1]),
        s.len()
    )
}

/// Bring-up, switchover, failover and clone of one 3-instance cluster; with `tls`, made by
/// `up --tls` and every client on TLS.
async fn run_once(samples: &mut Samples, clone_mb: u64, tls: bool) {
    let dir = ClusterDir::new();
    let (bring_up, status) = if tls {
        let started = Instant::now();
        let mut up = up_args(&dir, 3, free_port_block(5));
        up.push("--tls".to_owned());
        moco_async(up).await;
        (started.elapsed(), dir.status())
    } else {
        up_detached(&dir, 3).await
    };
    samples.bring_up.push(bring_up);
    let primary_port = endpoint_port(&status, "primary");
    // The cluster's CA when it has one (`dir.opts`).
    let pool = dir.opts(primary_port, "moco-writable");
    create_table_with(&pool).await.unwrap();
    // What one new client connection costs through the primary endpoint (the median of 50):
    // a switchover's gap ends with the writer's reconnection.
    let mut connects = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let c = connect(&pool, Duration::from_secs(5)).await.unwrap();
        connects.push(t.elapsed());
        let _ = c.disconnect().await;
    }
    samples.connect.push(median(&connects));

    // Switchover under writes: the longest pause between two acknowledgements around it.
    let writer = Writer::start_with(pool.clone());
    tokio::time::sleep(Duration::from_millis(800)).await;
    let before = primary_index(&status);
    let t0 = Instant::now();
    moco_async(vec![
        "local".into(),
        "switchover".into(),
        "--dir".into(),
        dir.arg(),
    ])
    .await;
    let t1 = Instant::now();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let report = writer.finish().await;
    samples.switchover_gap.push(report.max_gap_around(t0, t1));
    let switchover_rows = report.acked.len() as u64;

    // Failover: kill -9 of the primary under writes → first acknowledged write afterwards.
    let status = wait_status_async(
        &dir,
        "Healthy after switchover",
        Duration::from_secs(60),
        // The new primary: a status from before the switchover would name a replica.
        move |s| state_is(s, "Healthy") && primary_index(s) != before,
    )
    .await;
    let victim = primary_index(&status);
    {
        let mut c = connect(&pool, Duration::from_secs(5)).await.unwrap();
        c.query_drop("DELETE FROM moco_test.t").await.unwrap();
    }
    let writer = Writer::start_with(pool.clone());
    tokio::time::sleep(Duration::from_millis(800)).await;
    moco_async(vec![
        "local".into(),
        "kill".into(),
        "--dir".into(),
        dir.arg(),
        victim.to_string(),
    ])
    .await;
    // SIGKILL was delivered when the command returned; nothing the old primary acknowledges
    // can arrive after this instant.
    let killed = Instant::now();
    let status = wait_status_async(&dir, "primary moved", Duration::from_secs(60), move |s| {
        primary_index(s) != victim && (state_is(s, "Degraded") || state_is(s, "Healthy"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let report = writer.finish().await;
    let first = report.ack_times.iter().find(|t| **t > killed).copied();
    samples
        .failover
        .push(first.map_or(Duration::MAX, |t| t.duration_since(killed)));
    // Panics if any reachable, non-errant instance lacks an acknowledged row.
    assert_no_acked_loss(&dir, &status, &report.acked, Compared::AtLeast(2)).await;
    samples.rows += report.acked.len() as u64 + switchover_rows;

    // Clone: ~clone_mb MB of data, binlogs purged so the replica must be cloned, not replayed.
    moco_async(vec![
        "local".into(),
        "start".into(),
        "--dir".into(),
        dir.arg(),
        victim.to_string(),
    ])
    .await;
    let status = wait_status_async(
        &dir,
        "Healthy after failover",
        Duration::from_secs(120),
        |s| state_is(s, "Healthy"),
    )
    .await;
    load_and_purge(&dir, &status, &pool, clone_mb).await;
    let primary = primary_index(&status);
    let target = (0..3u64).find(|i| *i != primary).unwrap();
    wait_status_async(&dir, "replicas caught up", Duration::from_secs(120), |s| {
        state_is(s, "Healthy")
    })
    .await;
    moco_async(vec![
        "local".into(),
        "kill".into(),
        "--dir".into(),
        dir.arg(),
        target.to_string(),
        "--keep-down".into(),
    ])
    .await;
    // The manager must have seen the replica go (state.json is one round behind).
    wait_status_async(&dir, "replica down", Duration::from_secs(60), |s| {
        !state_is(s, "Healthy")
    })
    .await;
    std::fs::remove_dir_all(dir.path().join(format!("instances/{target}/data"))).unwrap();
    let t = Instant::now();
    moco_async(vec![
        "local".into(),
        "start".into(),
        "--dir".into(),
        dir.arg(),
        target.to_string(),
    ])
    .await;
    wait_status_async(
        &dir,
        "wiped replica cloned",
        Duration::from_secs(300),
        |s| state_is(s, "Healthy"),
    )
    .await;
    samples.clone.push(t.elapsed());
    samples.clone_mb.push(clone_mb);
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap_or_default();
    assert!(
        events.contains(&format!("cloned instance {target}")),
        "the wiped replica was not cloned:\n{events}\nmanager.log:\n{}",
        dir.log_tail(60)
    );
}

/// Loads about `mb` MB of blobs through `pool` and purges the primary's binary logs, so that a
/// new or wiped instance must be cloned rather than replay them.
async fn load_and_purge(
    dir: &ClusterDir,
    status: &serde_json::Value,
    pool: &mysql_async::Opts,
    mb: u64,
) {
    let clone_mb = mb;
    let mut c = connect(pool, Duration::from_secs(5)).await.unwrap();
    c.query_drop("CREATE TABLE IF NOT EXISTS moco_test.blob (id INT PRIMARY KEY, b LONGBLOB)")
        .await
        .unwrap();
    for id in 0..clone_mb {
        c.exec_drop(
            "INSERT INTO moco_test.blob (id, b) VALUES (?, REPEAT('x', 1048576))",
            (id,),
        )
        .await
        .unwrap();
    }
    drop(c);
    let admin = dir.opts(instance_port(status, primary_index(status)), "moco-admin");
    purge_binary_logs(&admin).await;
}

/// Growing 1 → 3 → 5 under a writer through the primary endpoint, with `mb` MB of data and
/// purged binary logs (so the new instances are cloned): the longest pause between
/// acknowledged writes and the time to Healthy at each size; no acknowledged row lost.
async fn run_scale(samples: &mut Samples, mb: u64) {
    let dir = ClusterDir::new();
    moco_async(up_args(&dir, 1, free_port_block(7))).await;
    let status = dir.status();
    let writable = dir.password("moco-writable");
    let port = endpoint_port(&status, "primary");
    create_table(port, &writable).await.unwrap();
    let pool = opts(port, "moco-writable", &writable);
    load_and_purge(&dir, &status, &pool, mb).await;
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut windows = Vec::new();
    for to in [3usize, 5] {
        windows.push(scale_to(&dir, to).await);
    }
    // Shrinking back, the worst way round: the primary is one of the instances that leave.
    local(&["local", "switchover", "--dir", &dir.arg(), "--to", "4"]).await;
    wait_status_async(&dir, "primary 4", Duration::from_secs(120), |s| {
        state_is(s, "Healthy") && primary_index(s) == 4
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut shrinks = Vec::new();
    for to in [3usize, 1] {
        shrinks.push(scale_to(&dir, to).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = writer.finish().await;
    for (to, t0, t1) in windows {
        let gap = report.max_gap_around(t0, t1);
        let took = t1.duration_since(t0);
        if to == 3 {
            samples.grow3_gap.push(gap);
            samples.grow3_time.push(took);
        } else {
            samples.grow5_gap.push(gap);
            samples.grow5_time.push(took);
        }
    }
    for (to, t0, t1) in shrinks {
        let gap = report.max_gap_around(t0, t1);
        let took = t1.duration_since(t0);
        if to == 3 {
            samples.shrink3_gap.push(gap);
            samples.shrink3_time.push(took);
        } else {
            samples.shrink1_gap.push(gap);
            samples.shrink1_time.push(took);
        }
    }
    assert_no_acked_loss(&dir, &dir.status(), &report.acked, Compared::Exactly(1)).await;
    samples.rows += report.acked.len() as u64;
}

/// `moco local scale --replicas to`, until Healthy with `to` instances: (to, started, done).
async fn scale_to(dir: &ClusterDir, to: usize) -> (usize, Instant, Instant) {
    let t0 = Instant::now();
    local(&[
        "local",
        "scale",
        "--replicas",
        &to.to_string(),
        "--dir",
        &dir.arg(),
    ])
    .await;
    wait_status_async(
        dir,
        "Healthy at the new size",
        Duration::from_secs(600),
        move |s| state_is(s, "Healthy") && s["instances"].as_array().map_or(0, Vec::len) == to,
    )
    .await;
    (to, t0, Instant::now())
}

fn failovers(dir: &ClusterDir) -> u64 {
    std::fs::read_to_string(dir.path().join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"reason\":\"FailOver\""))
        .count() as u64
}

async fn local(args: &[&str]) {
    moco_async(args.iter().map(|a| (*a).to_owned()).collect()).await;
}

/// A frozen primary (SIGSTOP: what a dead node or a network cut look like) under writes: the
/// time from the freeze to the first write acknowledged afterwards, and no acknowledged row
/// lost. The thawed ex-primary must come back read-only.
async fn run_hung(samples: &mut Samples) {
    let (dir, status, writable, port) = started_or_skip!("local-bench hung primary", 3);
    let victim = primary_index(&status);
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(800)).await;
    local(&["local", "freeze", "--dir", &dir.arg(), &victim.to_string()]).await;
    let frozen = Instant::now();
    let status = wait_status_async(&dir, "primary moved", Duration::from_secs(60), move |s| {
        primary_index(s) != victim && (state_is(s, "Degraded") || state_is(s, "Healthy"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let report = writer.finish().await;
    let first = report.ack_times.iter().find(|t| **t > frozen).copied();
    samples
        .hung_failover
        .push(first.map_or(Duration::MAX, |t| t.duration_since(frozen)));
    assert_no_acked_loss(&dir, &status, &report.acked, Compared::AtLeast(2)).await;
    samples.rows += report.acked.len() as u64;
    local(&["local", "thaw", "--dir", &dir.arg(), &victim.to_string()]).await;
    wait_status_async(
        &dir,
        "ex-primary fenced",
        Duration::from_secs(60),
        move |s| s["instances"][victim as usize]["readOnly"] == serde_json::Value::Bool(true),
    )
    .await;
}

/// What must not fail over: stalls of half the detection window, a long-running query on the
/// primary, and both cores saturated by busy loops while eight writers insert. Counts the
/// failovers (FailOver events), which must be 0.
async fn run_soak(samples: &mut Samples, stalls: u32) {
    let (dir, status, writable, port) = started_or_skip!("local-bench soak", 3);
    let primary = primary_index(&status);
    let writers: Vec<Writer> = (0..8).map(|_| Writer::start(port, &writable)).collect();
    let burners: Vec<std::process::Child> = (0..2)
        .map(|_| {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    let long_query = tokio::spawn({
        let o = opts(port, "moco-writable", &writable);
        async move {
            if let Ok(mut c) = connect(&o, Duration::from_secs(5)).await {
                let _ = c.query_drop("SELECT SLEEP(20)").await;
            }
        }
    });
    for _ in 0..stalls {
        local(&["local", "freeze", "--dir", &dir.arg(), &primary.to_string()]).await;
        tokio::time::sleep(Duration::from_millis(750)).await;
        local(&["local", "thaw", "--dir", &dir.arg(), &primary.to_string()]).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        samples.soak_stalls += 1;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for mut b in burners {
        let _ = b.kill();
        let _ = b.wait();
    }
    let _ = long_query.await;
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.finish().await.acked);
    }
    let status = dir.status();
    samples.soak_failovers += failovers(&dir);
    assert_eq!(
        primary_index(&status),
        primary,
        "the primary moved during the soak"
    );
    assert_no_acked_loss(&dir, &status, &acked, Compared::Exactly(3)).await;
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get(s.len() / 2).copied().unwrap_or_default()
}

/// The same metrics without and with TLS, and what TLS costs (median against median).
fn print_tls_cost(plain: &Samples, tls: &Samples) {
    println!(
        "moco local, 3 instances, {} rows acknowledged without TLS and {} with, 0 lost",
        plain.rows, tls.rows
    );
    println!("| metric | without TLS | with `--tls` | cost |");
    println!("|---|---|---|---|");
    let rows: [(&str, &[Duration], &[Duration]); 5] = [
        ("bring-up to Healthy", &plain.bring_up, &tls.bring_up),
        (
            "a new client connection through the primary endpoint (median of 50)",
            &plain.connect,
            &tls.connect,
        ),
        (
            "switchover: longest gap between acknowledged writes",
            &plain.switchover_gap,
            &tls.switchover_gap,
        ),
        (
            "failover: kill -9 → first acknowledged write",
            &plain.failover,
            &tls.failover,
        ),
        (
            "clone of a wiped replica → Healthy",
            &plain.clone,
            &tls.clone,
        ),
    ];
    for (name, a, b) in rows {
        let (ma, mb) = (median(a), median(b));
        let cost = if ma.is_zero() {
            "-".to_owned()
        } else {
            format!(
                "{:+.0}%",
                (mb.as_secs_f64() / ma.as_secs_f64() - 1.0) * 100.0
            )
        };
        println!("| {name} | {} | {} | {cost} |", summary(a), summary(b));
    }
}

#[tokio::main]
async fn main() {
    let Some(server) = server_or_skip("local-bench") else {
        return;
    };
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let clone_mb: u64 = std::env::var("BENCH_CLONE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let mut samples = Samples::default();
    let mut tls_samples = Samples::default();
    // BENCH_ONLY=scale measures only the growth (the rest takes several minutes per run).
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    for run in 1..=runs {
        eprintln!("run {run}/{runs} …");
        // BENCH_ONLY=tls: the same run without and with `up --tls`, alternating.
        if only == "tls" {
            run_once(&mut samples, clone_mb, false).await;
            run_once(&mut tls_samples, clone_mb, true).await;
        }
        if only.is_empty() {
            run_once(&mut samples, clone_mb, false).await;
            run_hung(&mut samples).await;
            run_soak(&mut samples, 5).await;
        }
        if only.is_empty() || only == "scale" {
            run_scale(&mut samples, clone_mb).await;
        }
    }
    println!(
        "moco local, 3 instances, {} ({} runs, {} acknowledged rows, 0 lost)",
        server.version(),
        runs,
        samples.rows
    );
    if only == "tls" {
        print_tls_cost(&samples, &tls_samples);
        return;
    }
    println!("| metric | median (min, max) | target |");
    println!("|---|---|---|");
    println!(
        "| bring-up to Healthy (`up --detach`) | {} | < 10 s |",
        summary(&samples.bring_up)
    );
    println!(
        "| switchover write unavailability (longest gap between acknowledged writes) | {} | < 300 ms |",
        summary(&samples.switchover_gap)
    );
    println!(
        "| failover: kill -9 → first acknowledged write on the new primary | {} | < 2 s |",
        summary(&samples.failover)
    );
    println!(
        "| failover: primary frozen (SIGSTOP) → first acknowledged write on the new primary | {} | < 3 s |",
        summary(&samples.hung_failover)
    );
    println!(
        "| false failovers: {} stalls of 750 ms (half the detection window), a 20 s query, both cores busy, 8 writers | {} | 0 |",
        samples.soak_stalls, samples.soak_failovers
    );
    println!(
        "| clone of a wiped replica (~{} MB, binlogs purged) → Healthy | {} | |",
        samples.clone_mb.first().copied().unwrap_or(0),
        summary(&samples.clone)
    );
    println!(
        "| `scale` 1 → 3 under writes (~{clone_mb} MB, cloned): longest pause between acknowledged writes | {} | < 1 s |",
        summary(&samples.grow3_gap)
    );
    println!(
        "| `scale` 1 → 3: command to Healthy with 3 members | {} | |",
        summary(&samples.grow3_time)
    );
    println!(
        "| `scale` 3 → 5 under writes: longest pause between acknowledged writes | {} | < 1 s |",
        summary(&samples.grow5_gap)
    );
    println!(
        "| `scale` 3 → 5: command to Healthy with 5 members | {} | |",
        summary(&samples.grow5_time)
    );
    println!(
        "| `scale` 5 → 3 under writes, primary on instance 4 (switched over): longest pause between acknowledged writes | {} | < 1 s |",
        summary(&samples.shrink3_gap)
    );
    println!(
        "| `scale` 5 → 3: command to Healthy with 3 instances (leaving ones retired) | {} | |",
        summary(&samples.shrink3_time)
    );
    println!(
        "| `scale` 3 → 1 under writes: longest pause between acknowledged writes | {} | < 1 s |",
        summary(&samples.shrink1_gap)
    );
    println!(
        "| `scale` 3 → 1: command to Healthy with 1 instance | {} | |",
        summary(&samples.shrink1_time)
    );
}
