//! `moco local credential rotate` on real `mariadbd`: a three-instance cluster under
//! acknowledged writes gets new passwords for all eight of MOCO's accounts. No write fails,
//! the manager records no warning, and afterwards every instance refuses every old password
//! and accepts every new one; `client/*.cnf` holds the new ones; each replica's channel was
//! re-pointed with the new replication password (its `master.info`); no binary log of any
//! instance holds a password of either set in clear (as `moco-readonly` reads it, and as its
//! files are copied). A second
//! rotation whose manager is killed after it published finishes, after `resume`, with the
//! passwords it drew (never drawn again).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use moco_local::platform::secret::MOCO_USERS as USERS;
use moco_tests::local::{
    ClusterDir, Compared, Writer, assert_no_acked_loss, assert_no_cleartext, binlog_as_read,
    endpoint_port, instance_port, moco_async, moco_ok, opts, started_with_table, wait_process_gone,
};
use serde_json::Value;

fn secret(dir: &ClusterDir) -> Value {
    let text = std::fs::read_to_string(dir.path().join("secret.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn passwords(v: &Value, pointer: &str) -> BTreeMap<String, String> {
    USERS
        .iter()
        .map(|u| {
            let p = v
                .pointer(&format!("{pointer}/{u}"))
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{pointer}/{u} missing in {v}"));
            ((*u).to_owned(), p.to_owned())
        })
        .collect()
}

/// Whether `user` with `password` logs in at `127.0.0.1:port` (`false` for error 1045 only).
async fn logs_in(port: u16, user: &str, password: &str) -> bool {
    match mysql_async::Conn::new(opts(port, user, password)).await {
        Ok(c) => {
            let _ = c.disconnect().await;
            true
        }
        Err(mysql_async::Error::Server(e)) if e.code == 1045 => false,
        Err(e) => panic!("logging in as {user} at {port}: {e}"),
    }
}

fn events(dir: &ClusterDir) -> Vec<Value> {
    std::fs::read_to_string(dir.path().join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn rotate_args(dir: &ClusterDir) -> Vec<String> {
    ["local", "credential", "rotate", "--dir", &dir.arg()]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_password_is_rotated_under_writes_and_a_killed_manager_finishes_the_rotation() {
    let Some((dir, status, writable, port)) = started_with_table(
        "every_password_is_rotated_under_writes_and_a_killed_manager_finishes_the_rotation",
        3,
    )
    .await
    else {
        return;
    };
    let old = passwords(&secret(&dir), "/passwords");
    let events_before = events(&dir).len();
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let started = Instant::now();
    let out = moco_async(rotate_args(&dir)).await;
    println!("{out}");
    println!("rotated in {} ms", started.elapsed().as_millis());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = writer.finish().await;
    assert!(out.contains("rotation finished"), "{out}");
    assert_eq!(
        report.failures, 0,
        "writes failed during the rotation: {:?}",
        report.errors
    );
    assert!(report.acked.len() > 10, "{} writes", report.acked.len());

    // The manager saw no failure on the way, and took every step.
    let new_events: Vec<Value> = events(&dir).split_off(events_before);
    let warnings: Vec<&Value> = new_events
        .iter()
        .filter(|e| e["type"] == "Warning")
        .collect();
    assert!(warnings.is_empty(), "warnings: {warnings:?}");
    let steps: Vec<String> = new_events
        .iter()
        .filter(|e| e["reason"] == "PasswordRotation")
        .map(|e| e["message"].as_str().unwrap_or("").to_owned())
        .collect();
    for e in &new_events {
        println!("{} {}: {}", e["time"], e["reason"], e["message"]);
    }
    for needle in [
        "accepts the new passwords",
        "given to every reader",
        "instance 1 replicates with the new password",
        "instance 2 replicates with the new password",
        "no longer accepts the old passwords",
        "finished",
    ] {
        assert!(
            steps.iter().any(|m| m.contains(needle)),
            "no step {needle:?} in {steps:#?}"
        );
    }

    // Every instance refuses the old passwords and accepts the new ones.
    let after = secret(&dir);
    assert!(after.get("rotation").is_none(), "{after}");
    let new = passwords(&after, "/passwords");
    for (user, pw) in &new {
        assert_ne!(pw, &old[user], "{user} kept its password");
    }
    for index in 0..3 {
        let p = instance_port(&status, index);
        for user in USERS {
            assert!(
                !logs_in(p, user, &old[user]).await,
                "instance {index} accepts the old password of {user}"
            );
            assert!(
                logs_in(p, user, &new[user]).await,
                "instance {index} refuses the new password of {user}"
            );
        }
    }
    let cnf = std::fs::read_to_string(dir.path().join("client").join("moco-writable.cnf")).unwrap();
    assert!(cnf.contains(&format!("password={}\n", new["moco-writable"])));

    // Each replica's channel holds the new replication password (MariaDB keeps it in the
    // datadir's master.info, which a restart reads).
    let primary = status["currentPrimaryIndex"].as_u64().unwrap();
    for index in (0..3).filter(|i| *i != primary) {
        let info = dir
            .path()
            .join("instances")
            .join(index.to_string())
            .join("data")
            .join("master.info");
        let text = std::fs::read_to_string(&info).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.contains(&new["moco-repl"].as_str())
                && !lines.contains(&old["moco-repl"].as_str()),
            "instance {index}'s master.info lacks the new replication password"
        );
    }
    let healthy = dir.status();
    assert_no_acked_loss(&dir, &healthy, &report.acked, Compared::Exactly(3)).await;

    // No password of either set is in any binary log, as the application reads it
    // (`moco-readonly` holds BINLOG MONITOR) or as a replica or the archive copies it: MariaDB
    // logs account statements as sent, so only hashes may be sent. The rotation's statements
    // are there (the probe sees them), with hashes.
    let secrets: Vec<&str> = old
        .values()
        .chain(new.values())
        .map(String::as_str)
        .collect();
    for index in 0..3 {
        let reader = opts(
            instance_port(&status, index),
            "moco-readonly",
            &new["moco-readonly"],
        );
        let datadir = dir
            .path()
            .join("instances")
            .join(index.to_string())
            .join("data");
        let read = binlog_as_read(&reader, &datadir).await;
        let statements = assert_no_cleartext(&format!("instance {index}"), &read, &secrets);
        assert!(
            read.0
                .iter()
                .any(|s| s.contains("ALTER USER 'moco-admin'@'%' IDENTIFIED VIA")),
            "instance {index}: the rotation's statements are not in its binary log ({statements} read)"
        );
    }

    // A second rotation, the manager killed once it published: resumed, it finishes with the
    // passwords drawn before the kill.
    let d = dir.arg();
    let pid = dir.manager_pid();
    let mut rotate = std::process::Command::new(moco_tests::local::moco_bin())
        .args(rotate_args(&dir))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let drawn = loop {
        let s = secret(&dir);
        if s.pointer("/rotation/phase") == Some(&Value::from("published")) {
            break passwords(&s, "/rotation/new");
        }
        assert!(Instant::now() < deadline, "never published: {s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let p = rustix::process::Pid::from_raw(pid).unwrap();
    rustix::process::kill_process(p, rustix::process::Signal::KILL).unwrap();
    let _ = rotate.wait();
    wait_process_gone(pid, Duration::from_secs(30)).await;
    assert_eq!(
        secret(&dir).pointer("/rotation/phase"),
        Some(&Value::from("published")),
        "killed mid-rotation"
    );
    let d2 = d.clone();
    tokio::task::spawn_blocking(move || moco_ok(&["local", "resume", "--dir", &d2, "--detach"]))
        .await
        .unwrap();
    let out = moco_async(rotate_args(&dir)).await;
    assert!(out.contains("a rotation is in progress"), "{out}");
    assert!(out.contains("rotation finished"), "{out}");
    let last = passwords(&secret(&dir), "/passwords");
    assert_eq!(last, drawn, "the resumed rotation drew new passwords");
    let healthy = dir.status();
    for index in 0..3 {
        let p = instance_port(&healthy, index);
        for user in USERS {
            assert!(
                !logs_in(p, user, &new[user]).await,
                "{user}: previous accepted"
            );
            assert!(logs_in(p, user, &last[user]).await, "{user}: last refused");
        }
    }
    let ep = endpoint_port(&healthy, "primary");
    let writer = Writer::start_at(
        opts(ep, "moco-writable", &last["moco-writable"]),
        10_000_000,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = writer.finish().await;
    assert!(
        !report.acked.is_empty() && report.failures == 0,
        "{:?}",
        report.errors
    );
    moco_ok(&["local", "down", "--dir", &d, "--wipe"]);
}
