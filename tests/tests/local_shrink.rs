//! `moco local scale` shrinking on real `mariadbd`: a cluster of five whose primary is
//! instance 4 shrinks to 3, then to 1, under continuous acknowledged writes through the
//! primary endpoint. The leaving primary is switched over first; every acknowledged row is on
//! every remaining instance afterwards; the leaving instances' directories are kept under
//! `retired/` with their data; the single instance left runs without semi-sync. The longest
//! pause between acknowledgements is printed (the target is in docs/benchmarks.md, measured
//! by `scripts/bench-local.sh`).

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

fn scale_args(dir: &ClusterDir, to: u32) -> Vec<String> {
    vec![
        "local".into(),
        "scale".into(),
        "--dir".into(),
        dir.arg(),
        "--replicas".into(),
        to.to_string(),
    ]
}

/// The retired directories (`retired/<index>-<seconds>`), by ordinal.
fn retired(dir: &ClusterDir) -> Vec<u32> {
    let mut found: Vec<u32> = std::fs::read_dir(dir.path().join("retired"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    assert!(e.path().join("data").is_dir(), "{name} keeps its datadir");
                    name.split('-').next()?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shrinks_from_five_to_one_under_writes() {
    if server_or_skip("shrinks_from_five_to_one_under_writes").is_none() {
        return;
    }
    let dir = ClusterDir::new();
    let base = free_port_block(7);
    moco_async(up_args(&dir, 5, base)).await;
    let status = dir.status();
    let writable = dir.password("moco-writable");
    let port = endpoint_port(&status, "primary");
    create_table(port, &writable).await.unwrap();
    insert_rows(port, &writable, 1_000_000..1_000_200).await;

    // The primary is one of the instances that will leave.
    moco_async(vec![
        "local".into(),
        "switchover".into(),
        "--dir".into(),
        dir.arg(),
        "--to".into(),
        "4".into(),
    ])
    .await;
    wait_status_async(
        &dir,
        "Healthy with primary 4",
        Duration::from_secs(120),
        |s| state_is(s, "Healthy") && s["currentPrimaryIndex"] == 4,
    )
    .await;

    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut windows = Vec::new();
    for to in [3u32, 1] {
        let t0 = Instant::now();
        let out = moco_async(scale_args(&dir, to)).await;
        println!("{}", out.trim());
        assert!(
            out.contains(&format!("Healthy with {to} instance(s)")),
            "{out}"
        );
        let s = wait_status_async(
            &dir,
            "Healthy at the new size",
            Duration::from_secs(120),
            move |s| state_is(s, "Healthy") && instances(s) == to as usize,
        )
        .await;
        windows.push((to, t0, Instant::now()));
        assert!(
            s["currentPrimaryIndex"].as_u64().unwrap() < u64::from(to),
            "{s}"
        );
        assert_eq!(s["semiSyncMembers"], to, "{s}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let report = writer.finish().await;
    report.check_size_changes("shrink", "shrinking", &windows);

    let final_status = dir.status();
    assert_no_acked_loss(&dir, &final_status, &report.acked, Compared::Exactly(1)).await;
    assert_eq!(
        retired(&dir),
        vec![1, 2, 3, 4],
        "the leaving directories are kept"
    );
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("cluster.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["replicas"], 1, "{manifest}");
    assert!(manifest.get("shrinkingTo").is_none(), "{manifest}");
    // A single instance waits for nobody.
    let admin = dir.password("moco-admin");
    let mut c = connect(&opts(port, "moco-admin", &admin), Duration::from_secs(5))
        .await
        .unwrap();
    let on: Option<String> = c
        .query_first("SELECT @@rpl_semi_sync_master_enabled")
        .await
        .unwrap();
    assert_eq!(on.as_deref(), Some("0"));
    // A size that is not odd is refused, naming the flag; growing again starts from fresh
    // instances, never from the retired directories.
    let err = moco_err(&["local", "scale", "--dir", &dir.arg(), "--replicas", "2"]);
    assert!(err.contains("--replicas 2") && err.contains("odd"), "{err}");
}
