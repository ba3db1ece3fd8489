//! The point-in-time restore drill, end to end on real `mariadbd`: a 3-instance cluster
//! archives its binlogs; a writer inserts rows, noting when each INSERT was sent and
//! acknowledged; a full backup; more writes; a failover (kill -9 of the primary); more
//! writes; a second full backup; more writes. Then new clusters are restored to a second
//! before the failover, to a second after it (the first backup plus binlogs of both
//! primaries), and to `latest` (the second backup plus binlogs). In each, every row
//! acknowledged before the point is there and none sent at or after it. Points the backups
//! and the archive do not reach are refused, naming what they do reach.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use moco_tests::local::{
    ClusterDir, Writer, WriterReport, endpoint_port, free_port_block, moco_async, moco_err,
    moco_ok, opts, primary_index, stored_ids, wait_status_async,
};
use moco_tests::started_or_skip;

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn rfc3339(second: u64) -> String {
    moco_core::time::Timestamp(second as i64).to_string()
}

/// Waits until a whole new second has begun and returns it.
async fn next_second() -> u64 {
    let now = unix(SystemTime::now());
    let next = now.floor() as u64 + 1;
    tokio::time::sleep(Duration::from_secs_f64(next as f64 - now + 0.05)).await;
    next
}

/// The archive's progress mark from `archive-status.json`, waiting until it covers
/// `second` (the archive is complete up to a second after it).
async fn wait_archived_past(dir: &ClusterDir, second: u64, limit: Duration) -> u64 {
    let path = dir.path().join("archive-status.json");
    let deadline = Instant::now() + limit;
    loop {
        let status: Option<serde_json::Value> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let checked = status
            .as_ref()
            .and_then(|s| s["progress"]["checkedAt"].as_u64())
            .unwrap_or(0);
        if checked > second {
            return checked;
        }
        assert!(
            Instant::now() < deadline,
            "the archive did not get past {second} within {limit:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Restores `point` into a new one-instance cluster and returns its rows; each login of
/// `refused` (user, password) must be refused by it.
async fn restore(
    name: &str,
    bucket: &str,
    point: &str,
    refused: &[(&str, &str)],
) -> std::collections::BTreeSet<u64> {
    let restored = ClusterDir::named(name);
    let base = free_port_block(3);
    let out = moco_async(
        [
            "local",
            "restore",
            "--dir",
            &restored.arg(),
            "--from",
            bucket,
            "--source",
            "c",
            "--point",
            point,
            "--replicas",
            "1",
            "--base-port",
            &base.to_string(),
            "--detach",
            "--wait-timeout",
            "300s",
        ]
        .map(str::to_owned)
        .to_vec(),
    )
    .await;
    println!("restore {point}: {}", out.trim());
    assert!(out.contains("cluster is Healthy"), "{out}");
    let s = restored.status();
    let ids = stored_ids(
        endpoint_port(&s, "primary"),
        "moco-admin",
        &restored.password("moco-admin"),
    )
    .await
    .unwrap();
    for (user, password) in refused {
        let login =
            mysql_async::Conn::new(opts(endpoint_port(&s, "primary"), user, password)).await;
        assert!(
            matches!(&login, Err(mysql_async::Error::Server(e)) if e.code == 1045),
            "the restored cluster let {user} in with the source's password: {:?}",
            login.map(|_| ())
        );
    }
    moco_ok(&["local", "down", "--dir", &restored.arg()]);
    ids
}

/// `moco local restore` of cluster `c` into `newdir` at `point` (or the default, `latest`),
/// one instance, expected to fail; returns its error output.
fn refused_restore(newdir: &std::path::Path, bucket: &str, point: Option<&str>) -> String {
    let newdir = newdir.display().to_string();
    let base = free_port_block(3).to_string();
    let mut args = vec![
        "local",
        "restore",
        "--dir",
        &newdir,
        "--from",
        bucket,
        "--source",
        "c",
        "--replicas",
        "1",
        "--base-port",
        &base,
    ];
    if let Some(point) = point {
        args.extend(["--point", point]);
    }
    moco_err(&args)
}

/// Every row acknowledged before `point` is in `ids`, and no row sent at or after it.
fn check(report: &WriterReport, ids: &std::collections::BTreeSet<u64>, point: u64, what: &str) {
    let point = point as f64;
    let mut before = 0;
    for (id, at) in report.acked.iter().zip(&report.acked_wall) {
        if unix(*at) < point {
            before += 1;
            assert!(
                ids.contains(id),
                "{what}: row {id} acknowledged before the point is missing"
            );
        }
    }
    let after: Vec<u64> = report
        .sent_wall
        .iter()
        .filter(|(_, at)| unix(**at) >= point)
        .map(|(id, _)| *id)
        .filter(|id| ids.contains(id))
        .collect();
    assert!(
        after.is_empty(),
        "{what}: rows sent at or after the point are there: {after:?}"
    );
    assert!(
        before > 10,
        "{what}: the point has rows before it ({before})"
    );
    assert!(
        report.sent_wall.values().any(|at| unix(*at) >= point),
        "{what}: the point has rows after it"
    );
    println!(
        "{what}: {} rows, {before} acknowledged before the point",
        ids.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pitr_to_the_second_across_a_failover_and_two_backups() {
    let test = "pitr_to_the_second_across_a_failover_and_two_backups";
    let (dir, status, writable, port) = started_or_skip!(test, 3);
    let bucket = dir.path().parent().unwrap().join("backups");
    let bucket_arg = bucket.display().to_string();
    let out = moco_ok(&[
        "local",
        "backup",
        "archive",
        "--dir",
        &dir.arg(),
        "--every",
        "1",
    ]);
    assert!(out.contains("archiving"), "{out}");

    // Before any backup: nothing restores.
    let writer = Writer::start(port, &writable);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let out = moco_async(
        ["local", "backup", "--dir", &dir.arg()]
            .map(str::to_owned)
            .to_vec(),
    )
    .await;
    assert!(out.contains("backed up instance"), "{out}");
    let first_backup_done = unix(SystemTime::now()) as u64;
    let t1 = next_second().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The failover.
    let old = primary_index(&status);
    moco_async(
        [
            "local",
            "kill",
            "--dir",
            &dir.arg(),
            &old.to_string(),
            "--down-for",
            "3s",
        ]
        .map(str::to_owned)
        .to_vec(),
    )
    .await;
    let moved = wait_status_async(&dir, "failover", Duration::from_secs(120), move |s| {
        primary_index(s) != old
    })
    .await;
    println!("failover: primary {old} -> {}", primary_index(&moved));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t2 = next_second().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // A second backup after the failover, then more writes.
    let backup2 = moco_async(
        ["local", "backup", "--dir", &dir.arg()]
            .map(str::to_owned)
            .to_vec(),
    )
    .await;
    assert!(backup2.contains("backed up instance"), "{backup2}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = writer.finish().await;
    let last_ack = report.acked_wall.last().copied().unwrap();
    let last_ack_second = unix(last_ack) as u64;
    // The recovery point: how long after the last acknowledged write the archive covered it.
    let covered = wait_archived_past(&dir, last_ack_second, Duration::from_secs(60)).await;
    println!(
        "writer: {} acknowledged, {} failed; archive complete up to {} ({:.1} s after the last acknowledgement)",
        report.acked.len(),
        report.failures,
        rfc3339(covered),
        covered as f64 - unix(last_ack)
    );

    let listed = moco_ok(&["local", "backup", "list", "--dir", &dir.arg()]);
    println!("{listed}");
    assert_eq!(
        listed.matches("restores to any second from").count(),
        2,
        "{listed}"
    );
    assert!(!listed.contains("GAP"), "{listed}");

    // Refused, each naming what it reaches; no cluster is made for them.
    let before = rfc3339(first_backup_done.saturating_sub(30));
    let err = refused_restore(
        &dir.path().parent().unwrap().join("early"),
        &bucket_arg,
        Some(&before),
    );
    assert!(err.contains("earliest restorable point is"), "{err}");
    assert!(!dir.path().parent().unwrap().join("early").exists());
    let future = rfc3339(covered + 3600);
    let err = refused_restore(
        &dir.path().parent().unwrap().join("late"),
        &bucket_arg,
        Some(&future),
    );
    assert!(err.contains("complete up to"), "{err}");

    // To a second before the failover, and to one after it.
    let ids = restore("r1", &bucket_arg, &rfc3339(t1), &[]).await;
    check(&report, &ids, t1, "before the failover");
    let ids = restore("r2", &bucket_arg, &rfc3339(t2), &[]).await;
    check(&report, &ids, t2, "after the failover");
    // Latest: every acknowledged row.
    let ids = restore("r3", &bucket_arg, "latest", &[]).await;
    let missing: Vec<u64> = report
        .acked
        .iter()
        .copied()
        .filter(|i| !ids.contains(i))
        .collect();
    assert!(
        missing.is_empty(),
        "latest lacks acknowledged rows {missing:?}"
    );

    // Into a directory that holds a cluster: refused, and that cluster is untouched.
    let err = refused_restore(dir.path(), &bucket_arg, None);
    assert!(err.contains(&dir.arg()), "{err}");
    assert!(dir.path().join("cluster.json").exists());

    // The newest archived file before t2 (no other file holds its newest transactions):
    // damaged, the restore to t2 fails saying which object, and leaves no cluster.
    let archive = bucket.join("moco/local/c/binlog");
    let mut metas: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&archive)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.ends_with("progress.json"))
        .map(|p| {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            (v["archivedAtMs"].as_u64().unwrap(), p)
        })
        .filter(|(at, _)| *at < t2 * 1000)
        .collect();
    metas.sort();
    let (_, meta) = metas.last().cloned().expect("a file archived before t2");
    let object = meta.with_extension("zst");
    let good = std::fs::read(&object).unwrap();
    let mut bad = good.clone();
    let middle = bad.len() / 2;
    bad[middle] ^= 0xff;
    std::fs::write(&object, &bad).unwrap();
    let damaged = dir.path().parent().unwrap().join("damaged");
    let err = refused_restore(&damaged, &bucket_arg, Some(&rfc3339(t2)));
    assert!(
        err.contains("archived binlog") && err.contains("SHA-256"),
        "{err}"
    );
    assert!(err.contains("was removed") && !damaged.exists(), "{err}");
    // Missing: the archive has a gap, `list` says so, and a point past it is refused before
    // any cluster is made.
    std::fs::remove_file(&object).unwrap();
    std::fs::remove_file(&meta).unwrap();
    let listed = moco_ok(&["local", "backup", "list", "--dir", &dir.arg()]);
    assert!(listed.contains("GAP"), "{listed}");
    let err = refused_restore(&damaged, &bucket_arg, Some(&rfc3339(t2)));
    assert!(err.contains("gap"), "{err}");
    assert!(!damaged.exists());
}

/// A restore whose replay crosses a rotation of the source's passwords keeps the restored
/// cluster's own: the source's `ALTER USER 'moco-*'` statements are replayed (their GTIDs are
/// the source's history) but MOCO's accounts are put back after each file, so the restored
/// cluster is Healthy under its operator and the source's new passwords are refused there.
/// (Before, the restored cluster took the source's passwords: its manager was refused, and
/// whoever held the source's Secret held the copy's admin account.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_across_a_rotation_keeps_the_restored_clusters_passwords() {
    let test = "a_replay_across_a_rotation_keeps_the_restored_clusters_passwords";
    let (dir, _status, writable, port) = started_or_skip!(test, 1);
    let bucket = dir.path().parent().unwrap().join("backups");
    let bucket_arg = bucket.display().to_string();
    moco_ok(&[
        "local",
        "backup",
        "archive",
        "--dir",
        &dir.arg(),
        "--every",
        "1",
    ]);
    let out = moco_async(
        ["local", "backup", "--dir", &dir.arg()]
            .map(str::to_owned)
            .to_vec(),
    )
    .await;
    assert!(out.contains("backed up instance"), "{out}");
    let before = dir.password("moco-admin");
    let out = moco_async(
        ["local", "credential", "rotate", "--dir", &dir.arg()]
            .map(str::to_owned)
            .to_vec(),
    )
    .await;
    assert!(out.contains("rotation finished"), "{out}");
    let rotated = dir.password("moco-admin");
    assert_ne!(before, rotated);
    // Writes after the rotation, so that the replay goes past it.
    let writer = Writer::start(port, &dir.password("moco-writable"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = writer.finish().await;
    assert!(!report.acked.is_empty(), "{:?}", report.errors);
    drop(writable);
    let last = unix(*report.acked_wall.last().unwrap()) as u64;
    wait_archived_past(&dir, last, Duration::from_secs(60)).await;

    let ids = restore(
        "rotated",
        &bucket_arg,
        "latest",
        &[("moco-admin", &rotated)],
    )
    .await;
    let missing: Vec<u64> = report
        .acked
        .iter()
        .copied()
        .filter(|i| !ids.contains(i))
        .collect();
    assert!(missing.is_empty(), "the replay stopped short: {missing:?}");
    moco_ok(&["local", "down", "--dir", &dir.arg(), "--wipe"]);
}
