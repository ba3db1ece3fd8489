//! The backup Job's program on Kubernetes (`moco backup`, MariaDB): a real primary and
//! replica with their agents stand in for two Pods, the fake API server holds the
//! MySQLCluster and its Pods, and moto holds the bucket. The Job picks the ready replica,
//! streams its backup from its agent over mutual TLS into MOCO's key layout, records
//! `status.backup` and creates the `BackupCreated` Event; the stored backup restores at the
//! position it records. Refusals (an offline cluster, missing Pods, nothing ready, a wrong
//! clone-donor password) leave no backup and the previous `status.backup`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_adapters::instance::clone::RestoreTarget;
use moco_adapters::mysql::sql;
use moco_backup::job::mysql::BackupServers as _;
use moco_backup::job::server_tls::ServerTls;
use moco_backup::mariadb::{binlog, physical};
use moco_core::moco_accounts::Account;
use moco_testkit::apiserver::FakeApiServer;
use moco_tests::job_bench::{
    JobBench, addresses, binlog_position, pod_object, set_super_read_only, writable_with_table,
};
use moco_tests::pod::{TestPod, replicate_from, test_password};
use mysql_async::prelude::Queryable;
use serde_json::json;

const NS: &str = "prod";
const CLUSTERS: &str = "moco.cybozu.com/v1beta2/mysqlclusters";
const LIMIT: Duration = Duration::from_secs(120);

fn pod(index: u32, ready: bool) -> serde_json::Value {
    pod_object(NS, index, ready)
}

fn cluster_object(replicas: u32, offline: bool) -> serde_json::Value {
    let mut cluster = moco_tests::job_bench::cluster_object(NS, "uid-db", replicas);
    cluster["spec"]["offline"] = json!(offline);
    cluster
}

async fn rows(pod: &TestPod) -> u64 {
    let mut c = pod.admin().await;
    c.query_first("SELECT COUNT(*) FROM app.t")
        .await
        .unwrap_or(None)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backup_job_streams_a_replica_into_the_bucket_and_records_it() {
    let test = "the_backup_job_streams_a_replica_into_the_bucket_and_records_it";
    let Some(bench) = JobBench::start(test) else {
        return;
    };
    let (binary, root) = (&bench.binary, &bench.root);
    let ([primary, replica], [a0, a1]) =
        bench.pods_with_agents(root.path(), None, &[], LIMIT).await;

    // A primary with data, and a replica of it.
    let mut c = primary.admin().await;
    writable_with_table(&mut c, "id INT PRIMARY KEY, v VARCHAR(64)").await;
    c.query_drop("INSERT INTO app.t SELECT seq, REPEAT('x', 60) FROM app.seq_1_to_20000")
        .await
        .unwrap();
    let mut r = replica.admin().await;
    replicate_from(&mut r, primary.port).await;
    // As the manager leaves a replica.
    set_super_read_only(&mut r).await;
    let deadline = Instant::now() + LIMIT;
    while rows(&replica).await != 20_000 {
        assert!(Instant::now() < deadline, "the replica did not catch up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let bucket = bench.bucket().await;

    let fake = FakeApiServer::new();
    fake.insert(cluster_object(2, false));
    fake.insert(pod(0, true));
    fake.insert(pod(1, true));
    let addresses = addresses(
        &[primary.port, replica.port],
        &[a0.agent.port(), a1.agent.port()],
    );
    let job = |donor_password: String| {
        bench.backup_job(&fake, NS, &bucket, &addresses, donor_password, "work")
    };
    let backup_status = || fake.get_json(CLUSTERS, NS, "db").unwrap()["status"]["backup"].clone();
    let objects = || {
        let bucket = bucket.clone();
        async move { bucket.list("moco/prod/db/").await.unwrap() }
    };

    // Refusals first: nothing is written.
    let refusal = |donor_password: &str| {
        let job = job(donor_password.to_owned());
        async move { job.run().await.unwrap_err().to_string() }
    };
    let donor_password = test_password(Account::CloneDonor);
    let e = refusal("wrong").await;
    assert!(
        e.contains("403") && e.contains("clone-donor password"),
        "{e}"
    );
    fake.insert(cluster_object(3, false));
    let e = refusal(&donor_password).await;
    assert!(e.contains("2 Pods exist for spec.replicas 3"), "{e}");
    fake.insert(cluster_object(2, true));
    let e = refusal(&donor_password).await;
    assert!(e.contains("spec.offline is true"), "{e}");
    fake.insert(cluster_object(2, false));
    fake.insert(pod(0, false));
    fake.insert(pod(1, false));
    let e = refusal(&donor_password).await;
    assert!(
        e.contains("MySQLCluster prod/db") && e.contains("ready"),
        "{e}"
    );
    assert_eq!(
        backup_status(),
        serde_json::Value::Null,
        "no status.backup yet"
    );
    assert!(
        objects()
            .await
            .iter()
            .all(|o| !o.key.ends_with("manifest.json")),
        "a refused backup left a manifest: {:?}",
        objects().await
    );

    // The backup: from the ready replica.
    fake.insert(pod(0, true));
    fake.insert(pod(1, true));
    let began = Instant::now();
    let done = job(test_password(Account::CloneDonor)).run().await.unwrap();
    let took = began.elapsed();
    assert_eq!(done.source_index, 1, "the replica is backed up");
    let folder = done.prefix.rsplit('/').next().unwrap().to_owned();
    assert!(
        done.prefix.starts_with("moco/prod/db/")
            && folder.len() == 15
            && folder.as_bytes()[8] == b'-',
        "MOCO's key layout: {}",
        done.prefix
    );
    let status = backup_status();
    assert_eq!(status["sourceIndex"], 1);
    assert_eq!(
        status["dumpSize"],
        json!(done.manifest.as_ref().unwrap().base.size)
    );
    let position = done
        .manifest
        .as_ref()
        .unwrap()
        .position
        .clone()
        .expect("the stream names its position");
    assert_eq!(
        status["gtidSet"],
        json!(sql::mariadb_binlog_state_text(&position))
    );
    let time = status["time"].as_str().unwrap().to_owned();
    assert_eq!(
        time.chars()
            .filter(char::is_ascii_digit)
            .collect::<String>(),
        folder.replace('-', ""),
        "status.backup.time names the folder"
    );
    assert!(
        status["elapsed"].as_str().unwrap().ends_with('s'),
        "{status}"
    );
    // MOCO's Event, named <cluster>.<hex nanoseconds>.
    let events = fake.list_json("v1/events", Some(NS));
    assert!(
        events.iter().all(|e| e["reason"] != "BackupNoBinlog"),
        "{events:?}"
    );
    let created: Vec<_> = events
        .iter()
        .filter(|e| e["reason"] == "BackupCreated")
        .collect();
    assert_eq!(created.len(), 1, "{events:?}");
    let event = created[0];
    assert_eq!(event["involvedObject"]["name"], "db");
    assert_eq!(event["involvedObject"]["kind"], "MySQLCluster");
    assert_eq!(event["type"], "Normal");
    let name = event["metadata"]["name"].as_str().unwrap();
    assert!(
        name.strip_prefix("db.")
            .is_some_and(|h| u128::from_str_radix(h, 16).is_ok()),
        "{name}"
    );

    // The binlogs went into the archive through the primary, with a progress mark.
    assert!(status["binlogSize"].as_i64().unwrap() > 0, "{status}");
    assert!(status["warnings"].is_null(), "{status}");
    let archive = binlog::archive::load(&bucket, "moco/prod/db")
        .await
        .unwrap();
    assert!(!archive.segments.is_empty());
    let primary_position = || async { binlog_position(&mut primary.admin().await).await };
    assert_eq!(
        archive.progress.unwrap().position,
        Some(primary_position().await),
        "the archive is complete up to the primary's position"
    );

    // What was stored restores at the recorded position, with every row.
    let datadir = root.path().join("restored");
    let restored = physical::restore(
        &bucket,
        &done.prefix,
        &RestoreTarget {
            backup_tool: binary.tool("mariadb-backup").unwrap(),
            mbstream: binary.tool("mbstream").unwrap(),
            datadir: datadir.clone(),
            log: root.path().join("restore.log"),
        },
    )
    .await
    .unwrap();
    assert_eq!(restored.position, position);
    assert!(datadir.join("app").join("t.ibd").is_file());

    // More writes; the replica not ready: the primary is backed up, and the archive takes
    // the new binlogs only (each closed file once).
    for i in 0..300 {
        c.exec_drop("INSERT INTO app.t VALUES (?, 'after')", (100_000 + i,))
            .await
            .unwrap();
    }
    fake.insert(pod(1, false));
    let second = job(test_password(Account::CloneDonor)).run().await.unwrap();
    assert_ne!(second.prefix, done.prefix);
    assert_eq!(second.source_index, 0);
    assert_eq!(backup_status()["sourceIndex"], 0);
    let archive = binlog::archive::load(&bucket, "moco/prod/db")
        .await
        .unwrap();
    assert_eq!(
        archive.progress.unwrap().position,
        Some(primary_position().await)
    );
    let mut files: Vec<(u32, &str)> = archive
        .segments
        .iter()
        .map(|s| (s.server_id, s.file.as_str()))
        .collect();
    let count = files.len();
    files.sort_unstable();
    files.dedup();
    assert_eq!(files.len(), count, "a file was archived twice: {files:?}");
    assert!(backup_status()["binlogSize"].as_i64().unwrap() > 0);
    // A fetched file is the server's byte for byte (the size is what tells the Job a file is
    // archived already, so it is not fetched again).
    let logs: Vec<(String, u64)> = c.query("SHOW BINARY LOGS").await.unwrap();
    let compared = archive
        .segments
        .iter()
        .filter_map(|s| {
            let (_, size) = logs.iter().find(|(name, _)| *name == s.file)?;
            assert_eq!(s.object.uncompressed_size, *size, "{}", s.file);
            Some(())
        })
        .count();
    assert!(compared >= 2, "{compared} files compared");

    // The recorded primary is read-only (a stale status): the backup is made without the
    // binlogs, with MOCO's warning Event, and the Job succeeds.
    fake.insert(pod(1, true));
    let mut stale = cluster_object(2, false);
    stale["status"]["currentPrimaryIndex"] = json!(1);
    fake.insert(stale);
    let third = job(test_password(Account::CloneDonor)).run().await.unwrap();
    assert_eq!(third.source_index, 0, "the replica by the recorded roles");
    let status = backup_status();
    assert_eq!(status["binlogSize"], 0);
    let warning = status["warnings"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{status}"));
    assert!(warning.contains("not the primary"), "{warning}");
    let reasons: Vec<String> = fake
        .list_json("v1/events", Some(NS))
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        reasons.iter().filter(|r| *r == "BackupNoBinlog").count(),
        1,
        "{reasons:?}"
    );
    assert_eq!(reasons.iter().filter(|r| *r == "BackupCreated").count(), 3);
    // The MySQL Jobs' queries where MariaDB shares them: the binlog files as moco-backup.
    let servers = moco_backup::job::mysql::SqlServers::new(
        Arc::new(addresses.clone()),
        moco_api::cluster::ClusterId {
            name: "db".into(),
            namespace: NS.into(),
            uid: "uid-db".into(),
        },
        moco_cluster::ports::Credentials {
            user: Account::Backup.name().into(),
            password: test_password(Account::Backup),
        },
        ServerTls::default(),
    );
    let files = servers.binlog_files(0).await.unwrap();
    let mut c = primary.admin().await;
    let row: mysql_async::Row = c.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    let current: String = row.get(0).unwrap();
    assert_eq!(files.current, current);
    assert!(
        files.all.contains(&current) && files.all.len() >= 2,
        "{files:?}"
    );
    // MariaDB has no server_uuid: the error names the instance and the statement.
    let e = servers.server_uuid(1).await.unwrap_err().to_string();
    assert!(e.starts_with("instance 1: SELECT @@server_uuid: "), "{e}");
    println!(
        "backup job: {} bytes stored ({} raw) in {:.2} s",
        done.manifest.as_ref().unwrap().base.size,
        done.manifest.as_ref().unwrap().base.uncompressed_size,
        took.as_secs_f64()
    );
    drop((a0, a1));
}
