//! Switchover of a 3-instance cluster under continuous acknowledged writes through the
//! primary endpoint: zero acknowledged rows lost, the client gap measured, the demoted
//! primary's client connection closed.

use std::time::{Duration, Instant};

use moco_tests::local::{
    Compared, Writer, assert_no_acked_loss, moco_async, primary_index, state_is, wait_status_async,
};
use moco_tests::started_or_skip;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switchover_under_writes_loses_nothing() {
    let (dir, s, writable, port) = started_or_skip!("switchover_under_writes_loses_nothing", 3);

    let writer = Writer::start(port, &writable);
    // Let it write a while before switching.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut gaps = Vec::new();
    let first = primary_index(&s);
    let d = dir.arg();
    // 1. Default target (the engine's lowest-ordinal candidate).
    let t0 = Instant::now();
    let out = moco_async(vec![
        "local".into(),
        "switchover".into(),
        "--dir".into(),
        d.clone(),
    ])
    .await;
    println!("{}", out.trim());
    let s1 = wait_status_async(
        &dir,
        "primary moved and Healthy",
        Duration::from_secs(120),
        move |s| primary_index(s) != first && state_is(s, "Healthy"),
    )
    .await;
    let t1 = Instant::now();
    let second = primary_index(&s1);
    // 2. An explicit target: the instance that is neither primary.
    let target = (0..3)
        .find(|i| *i != second && *i != first)
        .unwrap_or(first);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t2 = Instant::now();
    let out = moco_async(vec![
        "local".into(),
        "switchover".into(),
        "--dir".into(),
        d.clone(),
        "--to".into(),
        target.to_string(),
    ])
    .await;
    println!("{}", out.trim());
    let s2 = wait_status_async(
        &dir,
        "primary is the --to target",
        Duration::from_secs(120),
        move |s| primary_index(s) == target && state_is(s, "Healthy"),
    )
    .await;
    let t3 = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = writer.finish().await;
    gaps.push(report.max_gap_around(t0, t1));
    gaps.push(report.max_gap_around(t2, t3));

    println!(
        "writer: {} acknowledged, {} failed attempts; client gap during switchover: {:?} (default target), {:?} (--to {target}); errors seen: {:?}",
        report.acked.len(),
        report.failures,
        gaps[0],
        gaps[1],
        report.errors.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        report.acked.len() > 20,
        "too few writes: {}",
        report.acked.len()
    );
    // The demoted primary's connection was cut: the writer had to reconnect.
    assert!(
        report.failures >= 1,
        "the writer never lost its connection to a demoted primary"
    );
    // Writes continued after each switchover.
    assert!(
        report.ack_times.iter().any(|t| *t > t3),
        "no acknowledged write after the second switchover"
    );
    let checked = assert_no_acked_loss(&dir, &s2, &report.acked, Compared::Exactly(3)).await;
    assert_eq!(
        checked, 3,
        "every instance must hold every acknowledged row"
    );
    println!(
        "zero acknowledged rows lost on {checked} instances ({} rows)",
        report.acked.len()
    );
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    assert_eq!(
        events.matches("\"reason\":\"SwitchOver\"").count(),
        2,
        "{events}"
    );
}
