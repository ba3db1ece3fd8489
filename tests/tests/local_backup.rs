//! `moco local backup` and `restore` end to end: a 3-instance cluster is backed up from a
//! replica into the default directory beside it and into a real S3 server, `backup list`
//! shows each backup (an incomplete one too), and `restore` brings up a new 3-instance
//! cluster holding exactly the rows of the newest backup, its replicas cloned.

use moco_tests::local::{
    ClusterDir, endpoint_port, free_port_block, insert_rows, moco_async, moco_ok, stored_ids,
};
use moco_tests::s3::{create_bucket, moto};
use moco_tests::started_or_skip;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_backup_streams_a_replica_into_a_directory_and_s3_and_lists_them() {
    let test = "local_backup_streams_a_replica_into_a_directory_and_s3_and_lists_them";
    let (dir, status, writable, port) = started_or_skip!(test, 3);
    let Some(s3) = moto(test) else {
        return;
    };
    insert_rows(port, &writable, 0..500).await;
    let primary = moco_tests::local::primary_index(&status);

    // Into the default bucket: `backups/` beside the cluster directory.
    let out = moco_async(
        ["local", "backup", "--dir", &dir.arg()]
            .map(str::to_owned)
            .to_vec(),
    )
    .await;
    assert!(out.contains("backed up instance"), "{out}");
    let source: u64 = out
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no instance in {out:?}"));
    assert_ne!(
        source, primary,
        "a replica is backed up, not the primary: {out}"
    );
    let default_bucket = dir.path().parent().unwrap().join("backups");
    let folder = default_bucket.join("moco").join("local").join("c");
    let backups: Vec<_> = std::fs::read_dir(&folder).unwrap().collect();
    assert_eq!(backups.len(), 1, "{folder:?}");

    // Into S3, with the credentials and endpoint in the environment.
    create_bucket(s3.port, "moco-backups").await;
    let endpoint = format!("http://127.0.0.1:{}", s3.port);
    let env = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
    ];
    let run = |args: &[&str]| {
        let out = std::process::Command::new(moco_tests::local::moco_bin())
            .args(args)
            .envs(env)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "moco {args:?}: {text}");
        text
    };
    // (The manager is another process: waiting on the command here blocks nothing it needs.)
    let dir_arg = dir.arg();
    let out = run(&[
        "local",
        "backup",
        "--dir",
        &dir_arg,
        "--to",
        "s3://moco-backups",
    ]);
    assert!(out.contains("backed up instance"), "{out}");
    let listed = run(&[
        "local",
        "backup",
        "list",
        "--dir",
        &dir_arg,
        "--from",
        "s3://moco-backups",
    ]);
    assert_eq!(listed.matches("  complete  ").count(), 1, "{listed}");

    // An incomplete backup (no manifest) is listed as not restorable.
    let incomplete = folder.join("20000101-000000");
    std::fs::create_dir_all(&incomplete).unwrap();
    std::fs::write(incomplete.join("base.xbstream.zst"), b"partial").unwrap();
    let listed = moco_ok(&["local", "backup", "list", "--dir", &dir_arg]);
    assert!(
        listed.contains("moco/local/c/20000101-000000  NOT RESTORABLE: incomplete: no manifest"),
        "{listed}"
    );
    assert_eq!(listed.matches("  complete  ").count(), 1, "{listed}");

    // Verify: restored in a scratch instance, checked, its rows and checksums recorded; a
    // second verification compares with the record, and a record that disagrees fails it.
    let out = moco_ok(&["local", "backup", "verify", "--dir", &dir_arg]);
    assert!(
        out.contains("verified")
            && out.contains("(500 rows)")
            && out.contains("recorded for later"),
        "{out}"
    );
    let out = moco_ok(&["local", "backup", "verify", "--dir", &dir_arg]);
    assert!(out.contains("match its recorded verification"), "{out}");
    let record = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path().join("verify.json"))
        .find(|p| p.exists())
        .expect("the verification record");
    let text = std::fs::read_to_string(&record).unwrap();
    std::fs::write(&record, text.replace("\"rows\": 500", "\"rows\": 499")).unwrap();
    let err = moco_tests::local::moco_err(&["local", "backup", "verify", "--dir", &dir_arg]);
    assert!(
        err.contains("NOT VERIFIED") && err.contains("500 rows") && err.contains("recorded 499"),
        "{err}"
    );
    std::fs::write(&record, text).unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("-verify-"))
        .collect();
    assert!(leftovers.is_empty(), "scratch clusters left: {leftovers:?}");

    // Rows written after the backups are not in them.
    insert_rows(port, &writable, 500..600).await;
    let restored = ClusterDir::named("r");
    let base = free_port_block(5);
    let out = moco_async(
        [
            "local",
            "restore",
            "--dir",
            &restored.arg(),
            "--from",
            &default_bucket.display().to_string(),
            "--source",
            "c",
            "--replicas",
            "3",
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
    assert!(out.contains("cluster is Healthy"), "{out}");
    let s = restored.status();
    let ids = stored_ids(
        endpoint_port(&s, "primary"),
        "moco-writable",
        &restored.password("moco-writable"),
    )
    .await
    .unwrap();
    assert_eq!(ids, (0..500).collect(), "exactly the rows of the backup");

    // Retention: a second backup, then keep one. The dry run deletes nothing; the prune
    // deletes the older complete backup and the abandoned incomplete one.
    let out = moco_ok(&["local", "backup", "--dir", &dir_arg]);
    assert!(out.contains("backed up instance"), "{out}");
    let dry = moco_ok(&[
        "local",
        "backup",
        "prune",
        "--dir",
        &dir_arg,
        "--keep",
        "1",
        "--dry-run",
    ]);
    assert_eq!(dry.matches("would delete").count(), 2, "{dry}");
    assert!(dry.contains("20000101-000000"), "{dry}");
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 3);
    // A backup whose manifest is there but cannot be read (a newer release's) stops the
    // prune: nothing is deleted, and the error names it (issue 29, item 2).
    let unreadable = folder.join("20991231-000000");
    std::fs::create_dir_all(&unreadable).unwrap();
    std::fs::write(
        unreadable.join("manifest.json"),
        br#"{"formatVersion": 99}"#,
    )
    .unwrap();
    let err = moco_tests::local::moco_err(&[
        "local", "backup", "prune", "--dir", &dir_arg, "--keep", "1",
    ]);
    assert!(
        err.contains("20991231-000000") && err.contains("deleted nothing"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 4);
    std::fs::remove_dir_all(&unreadable).unwrap();
    let pruned = moco_ok(&["local", "backup", "prune", "--dir", &dir_arg, "--keep", "1"]);
    assert_eq!(pruned.matches("deleted ").count(), 2, "{pruned}");
    let listed = moco_ok(&["local", "backup", "list", "--dir", &dir_arg]);
    assert_eq!(listed.matches("  complete  ").count(), 1, "{listed}");
    assert!(!listed.contains("NOT RESTORABLE"), "{listed}");
    let err = moco_tests::local::moco_err(&["local", "backup", "prune", "--dir", &dir_arg]);
    assert!(err.contains("--keep N and/or --keep-days D"), "{err}");

    // A damaged backup: the restore fails, says why, and leaves no cluster behind.
    let object = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path().join("base.xbstream.zst"))
        .find(|p| p.exists())
        .expect("the kept backup");
    let mut bytes = std::fs::read(&object).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&object, &bytes).unwrap();
    // A restore that must fail: its error, and the directory it must not leave behind.
    let failed_restore = |name: &str| {
        let newdir = dir.path().parent().unwrap().join(name);
        let err = moco_tests::local::moco_err(&[
            "local",
            "restore",
            "--dir",
            &newdir.display().to_string(),
            "--from",
            &default_bucket.display().to_string(),
            "--source",
            "c",
            "--replicas",
            "1",
            "--base-port",
            &free_port_block(3).to_string(),
            "--detach",
        ]);
        (newdir, err)
    };
    let (newdir, err) = failed_restore("damaged");
    assert!(
        err.contains("damaged") && err.contains("was removed"),
        "{err}"
    );
    assert!(!newdir.exists(), "the half-restored cluster is gone");
    assert_eq!(
        moco_tests::local::kill_processes_mentioning(&newdir.display().to_string()),
        0,
        "no server of it is left running"
    );
    // A point that is not a time names the flag and the form; an unknown source is named.
    let err = moco_tests::local::moco_err(&[
        "local",
        "restore",
        "--dir",
        "/nonexistent/x",
        "--source",
        "c",
        "--point",
        "yesterday",
    ]);
    assert!(
        err.contains("--point yesterday: ") && err.contains("RFC 3339"),
        "{err}"
    );
    // Without archived binlogs a chosen second after the backup is refused, saying why.
    let err = moco_tests::local::moco_err(&[
        "local",
        "restore",
        "--dir",
        &dir.path().parent().unwrap().join("y").display().to_string(),
        "--from",
        &default_bucket.display().to_string(),
        "--source",
        "c",
        "--point",
        "2999-01-01T00:00:00Z",
    ]);
    assert!(err.contains("no binlogs are archived"), "{err}");
    let err = moco_tests::local::moco_err(&[
        "local",
        "restore",
        "--dir",
        &dir.path().parent().unwrap().join("x").display().to_string(),
        "--from",
        &default_bucket.display().to_string(),
        "--source",
        "nope",
    ]);
    assert!(
        err.contains("--source nope") && err.contains("no complete backup of cluster \"nope\""),
        "{err}"
    );

    // A copy that lacks one of MOCO's accounts: mariadbd starts although the init file that
    // sets this cluster's passwords failed half way, so the restore checks every login, names
    // the account and leaves nothing behind.
    use mysql_async::prelude::Queryable as _;
    let admin = |index: u64| {
        mysql_async::Conn::new(dir.opts(
            moco_tests::local::instance_port(&status, index),
            "moco-admin",
        ))
    };
    let mut c = admin(primary).await.unwrap();
    c.query_drop("DROP USER 'moco-readonly'@'%'").await.unwrap();
    let dropped: String = c
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    c.disconnect().await.unwrap();
    for index in (0..3).filter(|&i| i != primary) {
        let mut c = admin(index).await.unwrap();
        let waited: Option<i64> = c
            .exec_first("SELECT MASTER_GTID_WAIT(?, 120)", (dropped.as_str(),))
            .await
            .unwrap();
        assert_eq!(waited, Some(0), "instance {index} applied the DROP USER");
        c.disconnect().await.unwrap();
    }
    let out = moco_ok(&["local", "backup", "--dir", &dir_arg]);
    assert!(out.contains("backed up instance"), "{out}");
    let (newdir, err) = failed_restore("no-readonly");
    assert!(
        err.contains("does not let moco-readonly log in") && err.contains("was removed"),
        "{err}"
    );
    assert!(!newdir.exists(), "the half-restored cluster is gone");
}

/// Bad input names the flag.
#[test]
fn local_backup_refuses_bad_input_by_flag() {
    let out = std::process::Command::new(moco_tests::local::moco_bin())
        .args(["local", "backup"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dir is required"));
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(moco_tests::local::moco_bin())
        .args(["local", "backup", "--dir"])
        .arg(dir.path())
        .args(["--to", "ftp://x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--to: url: \"ftp://x\": unknown scheme"),
        "{err}"
    );
}
