//! `moco local scale` on real `mariadbd`: a cluster of one instance grows to 3, then to 5,
//! under continuous acknowledged writes through the primary endpoint. Every acknowledged row
//! is on every instance afterwards, every instance is a semi-sync member, the primary waits
//! for MariaDB's one acknowledgement, and the endpoint's client connection survives the
//! manager's change of size. The longest pause between acknowledgements is printed (the
//! target is in docs/benchmarks.md, measured by `scripts/bench-local.sh`).

use std::time::{Duration, Instant};

use moco_tests::local::{
    ClusterDir, Compared, Writer, assert_no_acked_loss, connect, create_table, endpoint_port,
    free_port_block, insert_rows, moco_async, moco_err, opts, server_or_skip, state_is, up_args,
    wait_status_async,
};
use mysql_async::prelude::Queryable;
use serde_json::Value;

fn instances(s: &Value) -> usize {
    s["instances"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grows_from_one_to_five_under_writes() {
    if server_or_skip("grows_from_one_to_five_under_writes").is_none() {
        return;
    }
    let dir = ClusterDir::new();
    // Room for five instances and the two endpoints.
    let base = free_port_block(7);
    moco_async(up_args(&dir, 1, base)).await;
    let status = dir.status();
    let writable = dir.password("moco-writable");
    let port = endpoint_port(&status, "primary");
    create_table(port, &writable).await.unwrap();
    // Some data, so that the clones copy something.
    insert_rows(port, &writable, 1_000_000..1_000_500).await;

    // Bad requests are refused before anything changes.
    for (n, says) in [("4", "odd"), ("11", "odd")] {
        let err = moco_err(&["local", "scale", "--dir", &dir.arg(), "--replicas", n]);
        assert!(
            err.contains(&format!("--replicas {n}")) && err.contains(says),
            "{err}"
        );
    }

    // One client connection for the whole run: the manager's change of size must not cut it.
    let mut held = connect(
        &opts(port, "moco-writable", &writable),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut windows = Vec::new();
    for to in [3u32, 5] {
        let t0 = Instant::now();
        let out = moco_async(vec![
            "local".into(),
            "scale".into(),
            "--dir".into(),
            dir.arg(),
            "--replicas".into(),
            to.to_string(),
        ])
        .await;
        println!("{}", out.trim());
        let s = wait_status_async(
            &dir,
            "Healthy at the new size",
            Duration::from_secs(300),
            move |s| state_is(s, "Healthy") && instances(s) == to as usize,
        )
        .await;
        windows.push((to, t0, Instant::now()));
        if std::env::var_os("SCALE_DEBUG").is_some() {
            tokio::time::sleep(Duration::from_secs(3)).await;
            println!("--- log after growing to {to}\n{}", dir.log_tail(60));
            println!(
                "--- events\n{}",
                std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap_or_default()
            );
        }
        assert_eq!(instances(&s), to as usize);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let report = writer.finish().await;
    if let (Some(last), Some((_, t0, _))) = (report.ack_times.last(), windows.last()) {
        println!(
            "last acknowledgement {:.1} s after the last growth started",
            last.saturating_duration_since(*t0).as_secs_f64()
                - t0.saturating_duration_since(*last).as_secs_f64()
        );
    }
    report.check_size_changes("grow", "growing", &windows);
    held.query_drop("INSERT INTO moco_test.t (id) VALUES (2000000)")
        .await
        .expect("the client connection opened before the growth still works");

    let final_status = dir.status();
    assert_eq!(
        final_status["semiSyncMembers"], 5,
        "moco local status --json"
    );
    assert_no_acked_loss(&dir, &final_status, &report.acked, Compared::Exactly(5)).await;
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("status.json")).unwrap())
            .unwrap();
    assert_eq!(recorded["semiSyncMembers"], 5, "{recorded}");
    assert!(recorded.get("semiSyncMinAcks").is_none(), "{recorded}");
    // The primary waits for one acknowledgement (MariaDB) with semi-sync on.
    let admin = dir.password("moco-admin");
    let mut c = connect(&opts(port, "moco-admin", &admin), Duration::from_secs(5))
        .await
        .unwrap();
    let on: Option<String> = c
        .query_first("SELECT @@rpl_semi_sync_master_enabled")
        .await
        .unwrap();
    assert_eq!(on.as_deref(), Some("1"));
    let clients: Option<(String, String)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'")
        .await
        .unwrap();
    assert_eq!(clients.map(|(_, v)| v).as_deref(), Some("4"));
    // Growing to the size it has is a no-op.
    let same = moco_async(vec![
        "local".into(),
        "scale".into(),
        "--dir".into(),
        dir.arg(),
        "--replicas".into(),
        "5".into(),
    ])
    .await;
    assert!(same.contains("already has 5"), "{same}");
}
