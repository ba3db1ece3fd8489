//! Replica failures of a 3-instance cluster: a replica held down makes the cluster Degraded
//! and Healthy again once it is back; a replica whose datadir was wiped (after the primary
//! purged its binlogs) is cloned from a healthy replica and rejoins.

use std::time::{Duration, Instant};

use moco_tests::local::{
    Compared, assert_no_acked_loss, connect, insert_rows as insert, instance_port, moco_async,
    opts, primary_index, state_is, wait_status_async, wipe_and_await_clone,
};
use moco_tests::started_or_skip;
use mysql_async::prelude::Queryable;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replica_down_and_wiped_replica_recover() {
    let (dir, s, writable, port) = started_or_skip!("replica_down_and_wiped_replica_recover", 3);
    let mut acked = insert(port, &writable, 1..101).await;
    let primary = primary_index(&s);
    let replica = (0..3u64).find(|i| *i != primary).unwrap();
    let d = dir.arg();

    // 1. Replica down → Degraded → back → Healthy.
    moco_async(vec![
        "local".into(),
        "kill".into(),
        "--dir".into(),
        d.clone(),
        replica.to_string(),
        "--keep-down".into(),
    ])
    .await;
    let degraded = wait_status_async(&dir, "Degraded", Duration::from_secs(60), |s| {
        state_is(s, "Degraded")
    })
    .await;
    assert_eq!(degraded["instances"][replica as usize]["pid"], Value::Null);
    assert_eq!(
        degraded["instances"][replica as usize]["heldDown"],
        Value::Bool(true)
    );
    // Still writable while Degraded.
    acked.extend(insert(port, &writable, 101..151).await);
    let back = Instant::now();
    moco_async(vec![
        "local".into(),
        "start".into(),
        "--dir".into(),
        d.clone(),
        replica.to_string(),
    ])
    .await;
    let healthy = wait_status_async(&dir, "Healthy again", Duration::from_secs(120), |s| {
        state_is(s, "Healthy")
    })
    .await;
    println!(
        "replica {replica}: Degraded while down, Healthy {} ms after `start`",
        back.elapsed().as_millis()
    );
    assert_no_acked_loss(&dir, &healthy, &acked, Compared::Exactly(3)).await;

    // 2. The primary purges its binlogs, so an empty replica cannot replay them: it is cloned.
    let admin = dir.password("moco-admin");
    let pport = instance_port(&healthy, primary_index(&healthy));
    let mut c = connect(&opts(pport, "moco-admin", &admin), Duration::from_secs(10))
        .await
        .unwrap();
    c.query_drop("FLUSH BINARY LOGS").await.unwrap();
    acked.extend(insert(port, &writable, 151..201).await);
    let logs: Vec<(String, u64)> = c.query("SHOW BINARY LOGS").await.unwrap();
    let last = logs.last().map(|l| l.0.clone()).unwrap();
    c.query_drop(format!("PURGE BINARY LOGS TO '{last}'"))
        .await
        .unwrap();
    drop(c);

    let wiped = (0..3u64)
        .find(|i| *i != primary_index(&healthy) && *i != replica)
        .unwrap();
    let after = wipe_and_await_clone(&dir, wiped).await;
    assert!(
        !after["instances"][wiped as usize]["errant"]
            .as_bool()
            .unwrap_or(true)
    );
    assert_no_acked_loss(&dir, &after, &acked, Compared::Exactly(3)).await;
    // The clone replicates new writes too.
    acked.extend(insert(port, &writable, 201..211).await);
    assert_no_acked_loss(&dir, &after, &acked, Compared::Exactly(3)).await;

    // 3. Issue 12, item 5: a datadir deleted under a *running* replica. The process kept
    //    running without data, unreachable, and nothing happened for minutes. It must be
    //    stopped, re-initialised and cloned.
    let victim = (0..3u64).find(|i| *i != primary_index(&after)).unwrap();
    let datadir = dir.path().join(format!("instances/{victim}/data"));
    std::fs::remove_dir_all(&datadir).unwrap();
    let t = Instant::now();
    let events = || std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    let cloned_before = events().matches("\"reason\":\"Cloned\"").count();
    let deadline = Instant::now() + Duration::from_secs(240);
    while events().matches("\"reason\":\"Cloned\"").count() == cloned_before {
        assert!(Instant::now() < deadline, "never cloned: {}", events());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let recovered = wait_status_async(
        &dir,
        "replica with a deleted datadir re-initialised, cloned and Healthy",
        Duration::from_secs(240),
        |s| state_is(s, "Healthy"),
    )
    .await;
    println!(
        "replica {victim} with its datadir deleted while running: cloned and Healthy after {} ms",
        t.elapsed().as_millis()
    );
    let all = events();
    assert!(
        all.contains(&format!(
            "\"reason\":\"DatadirDeleted\",\"message\":\"instance {victim}: its data directory"
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "instance {victim} (replica) restarted from an empty datadir"
        )),
        "{all}"
    );
    acked.extend(insert(port, &writable, 211..221).await);
    assert_no_acked_loss(&dir, &recovered, &acked, Compared::Exactly(3)).await;
}
