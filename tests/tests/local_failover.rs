//! kill -9 of the primary of a 3-instance cluster under acknowledged writes: the manager
//! fails over, no acknowledged row is lost, and the old primary comes back as a replica
//! (restarted with `--init-rpl-role=SLAVE` on MariaDB) or is reported errant.

use std::time::{Duration, Instant};

use moco_tests::local::{
    Compared, Writer, assert_no_acked_loss, moco_async, primary_index, wait_ex_primary_back,
    wait_status_async,
};
use moco_tests::started_or_skip;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_after_kill_loses_nothing() {
    let (dir, s, writable, port) = started_or_skip!("failover_after_kill_loses_nothing", 3);
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(1000)).await;

    let old = primary_index(&s);
    let kill_started = Instant::now();
    let out = moco_async(vec![
        "local".into(),
        "kill".into(),
        "--dir".into(),
        dir.arg(),
        old.to_string(),
        "--down-for".into(),
        "3s".into(),
    ])
    .await;
    // `moco local kill` returns once the process is gone: no acknowledgement can come from
    // the old primary after this instant.
    let killed_at = Instant::now();
    println!(
        "{} (kill command took {} ms)",
        out.trim(),
        killed_at.duration_since(kill_started).as_millis()
    );
    let moved = wait_status_async(&dir, "failover", Duration::from_secs(120), move |s| {
        primary_index(s) != old
    })
    .await;
    let moved_at = Instant::now();
    println!(
        "failover: primary {old} -> {} after {} ms",
        primary_index(&moved),
        moved_at.duration_since(killed_at).as_millis()
    );

    // The old primary is restarted by the supervisor and rejoins (or is flagged errant).
    let after = wait_ex_primary_back(&dir, old, false).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = writer.finish().await;
    let first_ack_after_kill = report.ack_times.iter().find(|t| **t > killed_at).copied();
    let last_ack_before_kill = report
        .ack_times
        .iter()
        .rev()
        .find(|t| **t <= killed_at)
        .copied();
    let failover_time = first_ack_after_kill.map(|t| t.duration_since(killed_at));
    let gap = match (last_ack_before_kill, first_ack_after_kill) {
        (Some(a), Some(b)) => Some(b.duration_since(a)),
        _ => None,
    };
    println!(
        "writer: {} acknowledged, {} failed attempts; kill -> first acknowledged write: {:?}; client gap: {:?}",
        report.acked.len(),
        report.failures,
        failover_time,
        gap
    );
    assert!(
        failover_time.is_some(),
        "no acknowledged write after the kill"
    );
    let old_inst = &after["instances"][old as usize];
    let old_errant = old_inst["errant"] == Value::Bool(true);
    if old_errant {
        println!("old primary {old} reported errant: {old_inst:#}");
    } else {
        assert_eq!(old_inst["role"], "replica", "{after:#}");
        assert_eq!(old_inst["reachable"], Value::Bool(true), "{after:#}");
        println!("old primary {old} rejoined as a replica");
    }
    // The old primary is compared too unless it is errant.
    let want = Compared::Exactly(if old_errant { 2 } else { 3 });
    let checked = assert_no_acked_loss(&dir, &after, &report.acked, want).await;
    println!(
        "zero acknowledged rows lost on {checked} instances ({} rows)",
        report.acked.len()
    );
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    assert!(events.contains("\"reason\":\"FailOver\""), "{events}");
    assert!(
        events.contains("\"reason\":\"InstanceRestarted\""),
        "{events}"
    );
}
