//! `local-bench`: the numbers of `moco local` on a 3-instance MariaDB cluster — bring-up time,
//! switchover write unavailability, failover time from `kill -9` to the first acknowledged
//! write on the new primary, and clone time of a ~100 MB replica. Every run checks that no
//! acknowledged row was lost. Run it with `scripts/bench-local.sh`; method and numbers are in
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use moco_tests::local::{
    ClusterDir, Writer, assert_no_acked_loss, connect, create_table, endpoint_port, instance_port,
    moco_async, opts, primary_index, server_or_skip, state_is, up_detached, wait_status_async,
};
use mysql_async::prelude::Queryable;

#[derive(Default)]
struct Samples {
    bring_up: Vec<Duration>,
    switchover_gap: Vec<Duration>,
    failover: Vec<Duration>,
    clone: Vec<Duration>,
    clone_mb: Vec<u64>,
    rows: u64,
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
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

async fn run_once(samples: &mut Samples, clone_mb: u64) {
    let dir = ClusterDir::new();
    let (bring_up, status) = up_detached(&dir, 3).await;
    samples.bring_up.push(bring_up);
    let writable = dir.password("moco-writable");
    let primary_port = endpoint_port(&status, "primary");
    create_table(primary_port, &writable).await.unwrap();

    // Switchover under writes: the longest pause between two acknowledgements around it.
    let writer = Writer::start(primary_port, &writable);
    tokio::time::sleep(Duration::from_millis(800)).await;
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
        |s| state_is(s, "Healthy"),
    )
    .await;
    let victim = primary_index(&status);
    let pool = opts(primary_port, "moco-writable", &writable);
    {
        let mut c = connect(&pool, Duration::from_secs(5)).await.unwrap();
        c.query_drop("DELETE FROM moco_test.t").await.unwrap();
    }
    let writer = Writer::start(primary_port, &writable);
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
    let checked = assert_no_acked_loss(&dir, &status, &report.acked).await;
    samples.rows += report.acked.len() as u64 + switchover_rows;
    assert!(
        checked >= 1,
        "no instance could be checked for acknowledged rows"
    );

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
    {
        let mut c = connect(&pool, Duration::from_secs(5)).await.unwrap();
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
        let admin = opts(
            instance_port(&status, primary_index(&status)),
            "moco-admin",
            &dir.password("moco-admin"),
        );
        let mut c = connect(&admin, Duration::from_secs(5)).await.unwrap();
        // MariaDB keeps a binlog until its checkpoint moves on: retry until one file is left.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            c.query_drop("FLUSH BINARY LOGS").await.unwrap();
            let logs: Vec<(String, u64)> = c.query("SHOW BINARY LOGS").await.unwrap();
            let last = logs.last().map(|l| l.0.clone()).unwrap();
            c.query_drop(format!("PURGE BINARY LOGS TO '{last}'"))
                .await
                .unwrap();
            let left: Vec<(String, u64)> = c.query("SHOW BINARY LOGS").await.unwrap();
            if left.len() == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "binary logs not purged: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
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
    for run in 1..=runs {
        eprintln!("run {run}/{runs} …");
        run_once(&mut samples, clone_mb).await;
    }
    println!(
        "moco local, 3 instances, {} ({} runs, {} acknowledged rows, 0 lost)",
        server.version(),
        runs,
        samples.rows
    );
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
        "| clone of a wiped replica (~{} MB, binlogs purged) → Healthy | {} | |",
        samples.clone_mb.first().copied().unwrap_or(0),
        summary(&samples.clone)
    );
}
