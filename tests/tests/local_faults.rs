//! Fault scenarios of 3-instance clusters: an errant replica is excluded (or re-cloned when
//! opted in), a lost majority is not failed over, and a manager killed in the middle of a
//! switchover converges after `moco local resume`.

use std::time::{Duration, Instant};

use moco_tests::local::{
    ClusterDir, Compared, Writer, args, assert_no_acked_loss, connect, create_table, endpoint_port,
    free_port_block, insert_rows as insert, instance_port, moco_async, moco_bin, moco_ok, opts,
    primary_index, server_or_skip, state_is, up_args, up_detached, wait_process_gone,
    wait_status_async,
};
use moco_tests::started_or_skip;
use mysql_async::prelude::Queryable;
use serde_json::Value;

const ERRANT_ID: u64 = 9_000_000;

/// `moco local up --detach` with extra arguments; returns the Healthy status.
async fn up_with(dir: &ClusterDir, replicas: u32, extra: &[&str]) -> Value {
    tokio::task::spawn_blocking(moco_bin).await.unwrap();
    let base = free_port_block(u16::try_from(replicas).unwrap() + 2);
    let mut a = up_args(dir, replicas, base);
    a.extend(args(extra));
    moco_async(a).await;
    dir.status()
}

/// Commits an errant transaction (a row in `moco_test.t`) directly on the replica at `port`.
async fn errant_write(port: u16, admin: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let role = "SET ROLE 'moco-read-only-admin'";
    loop {
        let mut c = connect(&opts(port, "moco-admin", admin), Duration::from_secs(10))
            .await
            .unwrap();
        c.query_drop("SET SESSION sql_log_bin=1").await.unwrap();
        c.query_drop(role).await.unwrap();
        c.query_drop("SET GLOBAL read_only=0").await.unwrap();
        c.query_drop("SET ROLE NONE").await.unwrap();
        let r = c
            .exec_drop("INSERT INTO moco_test.t (id) VALUES (?)", (ERRANT_ID,))
            .await;
        c.query_drop(role).await.unwrap();
        c.query_drop("SET GLOBAL read_only=1").await.unwrap();
        c.query_drop("SET ROLE NONE").await.unwrap();
        let _ = c.disconnect().await;
        match r {
            Ok(()) => return,
            Err(e) => {
                // The manager may have set read_only back in between: retry.
                assert!(Instant::now() < deadline, "errant insert failed: {e}");
                println!("errant insert failed ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn events(dir: &ClusterDir) -> String {
    std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap_or_default()
}

fn count_reason(dir: &ClusterDir, reason: &str) -> usize {
    let needle = format!("\"reason\":\"{reason}\"");
    events(dir).lines().filter(|l| l.contains(&needle)).count()
}

fn role(s: &Value, index: u64) -> String {
    s.pointer(&format!("/instances/{index}/role"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn errant(s: &Value, index: u64) -> bool {
    s.pointer(&format!("/instances/{index}/errant"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn errant_replica_is_excluded() {
    let (dir, s, writable, port) = started_or_skip!("errant_replica_is_excluded", 3);
    let admin = dir.password("moco-admin");
    let acked = insert(port, &writable, 1..21).await;
    let primary = primary_index(&s);
    let bad = (0..3u64).find(|i| *i != primary).unwrap();
    let bad_port = instance_port(&s, bad);
    // Let the replica catch up on the table before writing to it.
    assert_no_acked_loss(&dir, &s, &acked, Compared::Exactly(3)).await;

    errant_write(bad_port, &admin).await;
    let t = Instant::now();
    let s = wait_status_async(
        &dir,
        "errant instance excluded",
        Duration::from_secs(60),
        move |s| errant(s, bad) && role(s, bad) != "replica",
    )
    .await;
    println!(
        "instance {bad}: errant, role {:?}, after {} ms",
        role(&s, bad),
        t.elapsed().as_millis()
    );

    let rport = endpoint_port(&s, "replica");
    for _ in 0..10 {
        let mut c = connect(&opts(rport, "moco-admin", &admin), Duration::from_secs(10))
            .await
            .unwrap();
        let p: Option<u16> = c.query_first("SELECT @@port").await.unwrap();
        let _ = c.disconnect().await;
        assert_ne!(
            p,
            Some(bad_port),
            "the replica endpoint routed to errant {bad}"
        );
    }

    // With the errant replica excluded only one usable replica is left, less than the
    // failover quorum of 3 instances (2): the cluster is Lost and never promotes it.
    let d = dir.arg();
    moco_async(args(&[
        "local",
        "kill",
        "--dir",
        &d,
        &primary.to_string(),
        "--keep-down",
    ]))
    .await;
    let lost = wait_status_async(&dir, "Lost", Duration::from_secs(60), move |s| {
        assert_ne!(primary_index(s), bad, "the errant instance was promoted");
        state_is(s, "Lost")
    })
    .await;
    assert_eq!(primary_index(&lost), primary);
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let s = dir.status();
        assert_eq!(primary_index(&s), primary, "primary changed while Lost");
        assert_ne!(role(&s, bad), "primary");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(count_reason(&dir, "FailOver"), 0, "{}", events(&dir));
    moco_async(args(&["local", "start", "--dir", &d, &primary.to_string()])).await;
    let settled = wait_status_async(
        &dir,
        "primary back and writable",
        Duration::from_secs(120),
        move |s| state_is(s, "Degraded") && role(s, primary) == "primary",
    )
    .await;
    assert_eq!(primary_index(&settled), primary);
    assert!(errant(&settled, bad));
    assert_ne!(role(&settled, bad), "replica");
    assert_eq!(count_reason(&dir, "FailOver"), 0, "{}", events(&dir));
    let more = insert(endpoint_port(&settled, "primary"), &writable, 21..31).await;
    let mut all = acked;
    all.extend(more);
    assert_no_acked_loss(&dir, &settled, &all, Compared::Exactly(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn errant_replica_is_recloned_when_opted_in() {
    if server_or_skip("errant_replica_is_recloned_when_opted_in").is_none() {
        return;
    }
    let dir = ClusterDir::new();
    let s = up_with(&dir, 3, &["--reclone-errant"]).await;
    let writable = dir.password("moco-writable");
    let admin = dir.password("moco-admin");
    let port = endpoint_port(&s, "primary");
    create_table(port, &writable).await.unwrap();
    let acked = insert(port, &writable, 1..21).await;
    let primary = primary_index(&s);
    let bad = (0..3u64).find(|i| *i != primary).unwrap();
    let bad_port = instance_port(&s, bad);
    assert_no_acked_loss(&dir, &s, &acked, Compared::Exactly(3)).await;

    errant_write(bad_port, &admin).await;
    let t = Instant::now();
    let needle = format!("re-cloned errant instance {bad}");
    let events_path = dir.path().join("events.jsonl");
    let s = wait_status_async(
        &dir,
        "errant instance re-cloned and Healthy",
        Duration::from_secs(240),
        move |s| {
            state_is(s, "Healthy")
                && !errant(s, bad)
                && std::fs::read_to_string(&events_path)
                    .unwrap_or_default()
                    .lines()
                    .any(|l| l.contains("\"reason\":\"Cloned\"") && l.contains(&needle))
        },
    )
    .await;
    println!(
        "instance {bad}: re-cloned and Healthy after {} ms",
        t.elapsed().as_millis()
    );
    let ids = moco_tests::local::stored_ids(instance_port(&s, bad), "moco-admin", &admin)
        .await
        .unwrap();
    assert!(!ids.contains(&ERRANT_ID), "the errant row survived");
    assert_no_acked_loss(&dir, &s, &acked, Compared::Exactly(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn primary_and_majority_down_is_lost() {
    if server_or_skip("primary_and_majority_down_is_lost").is_none() {
        return;
    }
    let dir = ClusterDir::new();
    let (_, s) = up_detached(&dir, 3).await;
    let writable = dir.password("moco-writable");
    let port = endpoint_port(&s, "primary");
    create_table(port, &writable).await.unwrap();
    let acked = insert(port, &writable, 1..21).await;
    let primary = primary_index(&s);
    let replica = (0..3u64).find(|i| *i != primary).unwrap();
    let d = dir.arg();
    // The replica first (Degraded, nothing to fail over), then the primary.
    for i in [replica, primary] {
        moco_async(args(&[
            "local",
            "kill",
            "--dir",
            &d,
            &i.to_string(),
            "--keep-down",
        ]))
        .await;
    }
    let lost = wait_status_async(&dir, "Lost", Duration::from_secs(60), |s| {
        state_is(s, "Lost")
    })
    .await;
    let idx = primary_index(&lost);
    assert_eq!(idx, primary);
    let failovers = count_reason(&dir, "FailOver");
    // At least 3 manager rounds (1 s each).
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let s = dir.status();
        assert_eq!(primary_index(&s), idx, "primary changed while Lost");
        assert_eq!(
            count_reason(&dir, "FailOver"),
            failovers,
            "{}",
            events(&dir)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(failovers, 0, "{}", events(&dir));
    for i in [primary, replica] {
        moco_async(args(&["local", "start", "--dir", &d, &i.to_string()])).await;
    }
    let t = Instant::now();
    let healthy = wait_status_async(&dir, "Healthy", Duration::from_secs(180), |s| {
        state_is(s, "Healthy")
    })
    .await;
    println!("Healthy {} ms after starting both", t.elapsed().as_millis());
    assert_eq!(primary_index(&healthy), primary);
    assert_no_acked_loss(&dir, &healthy, &acked, Compared::Exactly(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn manager_killed_mid_switchover_converges() {
    if server_or_skip("manager_killed_mid_switchover_converges").is_none() {
        return;
    }
    let dir = ClusterDir::new();
    let (_, s) = up_detached(&dir, 3).await;
    let writable = dir.password("moco-writable");
    let port = endpoint_port(&s, "primary");
    create_table(port, &writable).await.unwrap();
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let d = dir.arg();
    let pid = dir.manager_pid();
    let mut switch = std::process::Command::new(moco_bin())
        .args(["local", "switchover", "--dir", &d])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the manager as soon as the request is in (or at the latest after 2 s).
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline
        && count_reason(&dir, "SwitchOver") == 0
        && switch.try_wait().unwrap().is_none()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let p = rustix::process::Pid::from_raw(pid).unwrap();
    rustix::process::kill_process(p, rustix::process::Signal::KILL).unwrap();
    println!("killed manager {pid}");
    // The switchover client ends (successfully or not) once the manager is gone.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = switch.try_wait().unwrap() {
            let mut out = String::new();
            let mut err = String::new();
            if let Some(mut o) = switch.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut o, &mut out);
            }
            if let Some(mut e) = switch.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            println!(
                "switchover client exited: {st}: {} {}",
                out.trim(),
                err.trim()
            );
            break;
        }
        if Instant::now() >= until {
            let _ = switch.kill();
            let _ = switch.wait();
            println!("switchover client still waiting after 60 s; killed it");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Wait for the process to be really gone (the lock is released).
    wait_process_gone(pid, Duration::from_secs(30)).await;
    let d2 = d.clone();
    tokio::task::spawn_blocking(move || moco_ok(&["local", "resume", "--dir", &d2, "--detach"]))
        .await
        .unwrap();
    let t = Instant::now();
    // Only statuses written by the resumed manager count.
    let resumed_at = dir.status()["updatedAt"].clone();
    let healthy = wait_status_async(
        &dir,
        "Healthy with one primary",
        Duration::from_secs(180),
        move |s| {
            s["updatedAt"] != resumed_at
                && s.pointer("/manager/running") == Some(&Value::Bool(true))
                && s.pointer("/manager/pid").and_then(Value::as_i64) != Some(i64::from(pid))
                && state_is(s, "Healthy")
                && (0..3).filter(|i| role(s, *i) == "primary").count() == 1
                && role(s, primary_index(s)) == "primary"
        },
    )
    .await;
    println!(
        "Healthy {} ms after resume; primary {} (was {})",
        t.elapsed().as_millis(),
        primary_index(&healthy),
        primary_index(&s)
    );
    // The primary endpoint accepts writes (the writer acknowledges new rows).
    let before = Instant::now();
    let deadline = before + Duration::from_secs(60);
    let ep = endpoint_port(&healthy, "primary");
    let mut extra = Vec::new();
    let mut id = 50_000_000u64;
    while extra.len() < 5 {
        assert!(
            Instant::now() < deadline,
            "primary endpoint does not accept writes"
        );
        if let Ok(mut c) = connect(
            &opts(ep, "moco-writable", &writable),
            Duration::from_secs(5),
        )
        .await
            && c.exec_drop("INSERT INTO moco_test.t (id) VALUES (?)", (id,))
                .await
                .is_ok()
        {
            extra.push(id);
        }
        id += 1;
        if extra.len() < 5 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let report = writer.finish().await;
    println!(
        "writer: {} acknowledged, {} failures, errors {:?}",
        report.acked.len(),
        report.failures,
        report.errors.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        report.ack_times.iter().any(|a| *a >= t),
        "no write acknowledged after resume"
    );
    let mut all = report.acked.clone();
    all.extend(extra);
    let final_status = dir.status();
    assert_no_acked_loss(&dir, &final_status, &all, Compared::Exactly(3)).await;
}

/// Ends every session of `moco-admin` on the instance at `port` but the caller's, so that the
/// manager's pools must log in again.
async fn kill_admin_sessions(port: u16, password: &str) {
    let mut c = connect(&opts(port, "moco-admin", password), Duration::from_secs(10))
        .await
        .unwrap();
    let ids: Vec<u64> = c
        .query(
            "SELECT ID FROM information_schema.PROCESSLIST \
             WHERE USER = 'moco-admin' AND ID <> CONNECTION_ID()",
        )
        .await
        .unwrap();
    for id in ids {
        // A session may end by itself in between.
        let _ = c.query_drop(format!("KILL {id}")).await;
    }
    c.disconnect().await.unwrap();
}

/// Issue 12, item 1: an operator account broken behind the operator's back (here the admin's
/// password changed on the primary, which replicates) used to leave the manager retrying
/// silently. It must say which account each instance refuses, and recover once the account is
/// restored, without a failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_operator_account_is_reported_and_recovers() {
    let (dir, s, writable, port) =
        started_or_skip!("a_refused_operator_account_is_reported_and_recovers", 3);
    let admin = dir.password("moco-admin");
    let acked = insert(port, &writable, 1..11).await;
    let primary = primary_index(&s);
    assert_no_acked_loss(&dir, &s, &acked, Compared::Exactly(3)).await;

    let taken = "taken-by-someone-else";
    let mut c = connect(&opts(port, "moco-admin", &admin), Duration::from_secs(10))
        .await
        .unwrap();
    c.query_drop(format!(
        "ALTER USER 'moco-admin'@'%' IDENTIFIED BY '{taken}'"
    ))
    .await
    .unwrap();
    c.disconnect().await.unwrap();
    for i in 0..3u64 {
        let p = instance_port(&s, i);
        // The replicas apply the change shortly.
        let deadline = Instant::now() + Duration::from_secs(60);
        while connect(&opts(p, "moco-admin", taken), Duration::from_secs(5))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "instance {i} never took the change"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        kill_admin_sessions(p, taken).await;
    }

    let t = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(120);
    let reported = loop {
        let refusals: Vec<String> = events(&dir)
            .lines()
            .filter(|l| l.contains("\"reason\":\"AccountRefused\""))
            .map(str::to_owned)
            .collect();
        if refusals.len() >= 3 {
            break refusals;
        }
        assert!(
            Instant::now() < deadline,
            "no AccountRefused event for every instance: {}",
            events(&dir)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "every refusal reported after {} ms",
        t.elapsed().as_millis()
    );
    for i in 0..3u64 {
        let needle = format!("instance {i} refuses the operator's account moco-admin");
        assert!(
            reported
                .iter()
                .any(|l| l.contains(&needle) && l.contains("1045")),
            "{needle}: {reported:#?}"
        );
    }
    // Reported once per instance, not every round.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(count_reason(&dir, "AccountRefused"), 3, "{}", events(&dir));

    let mut c = connect(&opts(port, "moco-admin", taken), Duration::from_secs(10))
        .await
        .unwrap();
    c.query_drop(format!(
        "ALTER USER 'moco-admin'@'%' IDENTIFIED BY '{admin}'"
    ))
    .await
    .unwrap();
    c.disconnect().await.unwrap();
    let t = Instant::now();
    let healthy = wait_status_async(&dir, "Healthy again", Duration::from_secs(120), |s| {
        state_is(s, "Healthy")
    })
    .await;
    println!(
        "Healthy {} ms after the account was restored",
        t.elapsed().as_millis()
    );
    assert_eq!(primary_index(&healthy), primary, "no failover happened");
    assert_eq!(count_reason(&dir, "FailOver"), 0, "{}", events(&dir));
    assert_no_acked_loss(&dir, &healthy, &acked, Compared::Exactly(3)).await;
}

/// Issue 12, item 9: a replica's SQL thread that stopped (on a full tmpdir in the report; here
/// by hand) while its IO thread kept running was never started again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_sql_thread_is_started_again() {
    let (dir, s, writable, port) = started_or_skip!("a_stopped_sql_thread_is_started_again", 3);
    let admin = dir.password("moco-admin");
    let primary = primary_index(&s);
    let replica = (0..3u64).find(|i| *i != primary).unwrap();
    let rport = instance_port(&s, replica);
    let mut c = connect(&opts(rport, "moco-admin", &admin), Duration::from_secs(10))
        .await
        .unwrap();
    c.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    let acked = insert(port, &writable, 1..11).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row: Option<mysql_async::Row> = c.query_first("SHOW SLAVE STATUS").await.unwrap();
        let sql: Option<String> = row.and_then(|r| r.get("Slave_SQL_Running"));
        if sql.as_deref() == Some("Yes") {
            break;
        }
        assert!(Instant::now() < deadline, "the SQL thread stays stopped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.disconnect().await.unwrap();
    let healthy = wait_status_async(&dir, "Healthy", Duration::from_secs(60), |s| {
        state_is(s, "Healthy")
    })
    .await;
    assert_no_acked_loss(&dir, &healthy, &acked, Compared::Exactly(3)).await;
}
