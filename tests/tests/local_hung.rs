//! A hung primary, as Kubernetes sees a dead node or a network cut: its mysqld is stopped with
//! SIGSTOP (`moco local freeze`), so it keeps its pid and connections but answers nothing.
//! Under acknowledged writes through the primary endpoint the manager fails it over once it
//! has been silent for the detection window, no acknowledged row is lost, and the thawed
//! ex-primary is fenced and rejoins (or is reported errant). A stall shorter than the window
//! keeps the primary.

use std::time::{Duration, Instant};

use moco_tests::local::{
    Compared, Writer, assert_no_acked_loss, connect, instance_port, moco_async, opts,
    primary_index, state_is, wait_ex_primary_back, wait_status_async,
};
use moco_tests::started_or_skip;
use mysql_async::prelude::Queryable;
use serde_json::Value;

async fn local(args: &[&str]) -> String {
    moco_async(args.iter().map(|a| (*a).to_owned()).collect()).await
}

fn events(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn frozen_primary_is_failed_over_and_fenced() {
    let (dir, s, writable, port) = started_or_skip!("frozen_primary_is_failed_over_and_fenced", 3);
    let old = primary_index(&s);
    let old_port = instance_port(&s, old);
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(1000)).await;

    local(&["local", "freeze", "--dir", &dir.arg(), &old.to_string()]).await;
    // SIGSTOP was delivered when the command returned: the old primary acknowledges nothing
    // from here on.
    let frozen_at = Instant::now();
    let moved = wait_status_async(&dir, "failover", Duration::from_secs(120), move |s| {
        primary_index(s) != old && (state_is(s, "Degraded") || state_is(s, "Healthy"))
    })
    .await;
    let new = primary_index(&moved);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let report = writer.finish().await;
    let first = report.ack_times.iter().find(|t| **t > frozen_at).copied();
    println!(
        "freeze -> first acknowledged write on instance {new}: {:?}; {} acknowledged, {} failed attempts",
        first.map(|t| t.duration_since(frozen_at)),
        report.acked.len(),
        report.failures
    );
    assert!(first.is_some(), "no acknowledged write after the freeze");
    // The primary endpoint routes only to a writable primary: no client is refused as
    // read-only (ERROR 1290) while the role moves.
    assert!(
        !report.errors.iter().any(|e| e.contains("1290")),
        "a client reached a read-only instance: {:?}",
        report.errors
    );
    assert!(
        events(dir.path()).contains("\"reason\":\"FailOver\""),
        "no FailOver event:\n{}",
        events(dir.path())
    );
    // The frozen ex-primary does not answer: the other two are compared.
    assert_no_acked_loss(&dir, &moved, &report.acked, Compared::Exactly(2)).await;

    // Thawed, the ex-primary must not take writes: the manager fences it and it rejoins as a
    // replica, or is reported errant (its semi-sync commits were never acknowledged).
    local(&["local", "thaw", "--dir", &dir.arg(), &old.to_string()]).await;
    let after = wait_ex_primary_back(&dir, old, true).await;
    assert_eq!(primary_index(&after), new, "{after:#}");
    let admin = dir.password("moco-admin");
    let mut c = connect(
        &opts(old_port, "moco-admin", &admin),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let read_only: u64 = c.query_first("SELECT @@read_only").await.unwrap().unwrap();
    assert_eq!(read_only, 1, "the thawed ex-primary is writable");
    drop(c);
    let o = &after["instances"][old as usize];
    if o["errant"] == Value::Bool(true) {
        println!("thawed ex-primary {old} reported errant: {o:#}");
    } else {
        assert_eq!(o["role"], "replica", "{after:#}");
        println!("thawed ex-primary {old} rejoined as a replica");
    }
    // Every acknowledged row is still everywhere, the thawed instance included unless errant.
    let errant = o["errant"] == Value::Bool(true);
    let want = Compared::Exactly(if errant { 2 } else { 3 });
    assert_no_acked_loss(&dir, &after, &report.acked, want).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stall_shorter_than_the_window_keeps_the_primary() {
    let (dir, s, writable, port) =
        started_or_skip!("a_stall_shorter_than_the_window_keeps_the_primary", 3);
    let primary = primary_index(&s);
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Half the default 1.5 s window, twice, with a pause between.
    for _ in 0..2 {
        local(&["local", "freeze", "--dir", &dir.arg(), &primary.to_string()]).await;
        tokio::time::sleep(Duration::from_millis(750)).await;
        local(&["local", "thaw", "--dir", &dir.arg(), &primary.to_string()]).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let thawed_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let report = writer.finish().await;
    let s = dir.status();
    assert_eq!(primary_index(&s), primary, "the primary moved:\n{s:#}");
    let ev = events(dir.path());
    assert!(
        !ev.contains("FailOver"),
        "a short stall triggered a failover:\n{ev}\nmanager.log:\n{}",
        dir.log_tail(60)
    );
    assert!(
        report.ack_times.iter().any(|t| *t > thawed_at),
        "writes did not resume after the stall"
    );
    assert_no_acked_loss(&dir, &s, &report.acked, Compared::Exactly(3)).await;
}
