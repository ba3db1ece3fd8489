//! The restore Job's program on Kubernetes (`moco restore`, MariaDB), end to end: a source
//! cluster's backup Job takes two backups (the second archives the binlogs between them);
//! a new cluster with other passwords is restored to a second between them. Real servers
//! and agents stand in for the Pods, the fake API server holds both MySQLClusters and their
//! Pods, a kubelet stand-in re-creates the deleted Pod (stop, `moco init`, start), and moto
//! holds the bucket. Every row committed before the point is there, none after it; the
//! instance keeps the new cluster's passwords and is read-only; `status.restoredTime` and
//! the `Restored` Event are recorded. Refused inputs touch nothing and say why.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_backup::job::cluster::ClusterAccess;
use moco_backup::job::restore::RestoreJob;
use moco_backup::job::server_tls::ServerTls;
use moco_core::moco_accounts::Account;
use moco_core::time::Timestamp;
use moco_testkit::apiserver::FakeApiServer;
use moco_tests::job_bench::{JobBench, addresses, pod_object, writable_with_table};
use moco_tests::pod::{AgentProcess, TestPod, other_password, other_passwords, test_password};
use mysql_async::prelude::Queryable;
use tokio::io::AsyncReadExt as _;

const CLUSTERS: &str = "moco.cybozu.com/v1beta2/mysqlclusters";
const PODS: &str = "v1/pods";
const LIMIT: Duration = Duration::from_secs(180);

/// The ready Pod of the one-instance cluster `ns/db`.
fn pod(ns: &str) -> serde_json::Value {
    pod_object(ns, 0, true)
}

fn cluster_object(ns: &str) -> serde_json::Value {
    moco_tests::job_bench::cluster_object(ns, &format!("uid-{ns}"), 1)
}

async fn login(port: u16, password: &str) -> Result<mysql_async::Conn, mysql_async::Error> {
    mysql_async::Conn::new(
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some("moco-admin"))
            .pass(Some(password)),
    )
    .await
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Sleeps into the next second and returns it.
async fn next_second() -> i64 {
    let start = now();
    while now() == start {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_restore_job_brings_a_new_cluster_to_the_second() {
    let test = "the_restore_job_brings_a_new_cluster_to_the_second";
    let Some(bench) = JobBench::start(test) else {
        return;
    };
    let (binary, root, certs) = (&bench.binary, &bench.root, &bench.certs);

    // The source cluster: one primary with data, backed up by its backup Job.
    let ([source], [a_source]) = bench
        .pods_with_agents(&root.path().join("old"), None, &[], LIMIT)
        .await;
    let mut c = source.admin().await;
    writable_with_table(&mut c, "id INT PRIMARY KEY, v VARCHAR(64)").await;
    c.query_drop("INSERT INTO app.t SELECT seq, 'base' FROM app.seq_1_to_1000")
        .await
        .unwrap();

    let bucket = bench.bucket().await;
    let fake = FakeApiServer::new();
    fake.insert(cluster_object("old"));
    fake.insert(pod("old"));
    let source_addresses = addresses(&[source.port], &[a_source.agent.port()]);
    let backup_job = || {
        bench.backup_job(
            &fake,
            "old",
            &bucket,
            &source_addresses,
            test_password(Account::CloneDonor),
            "backup-work",
        )
    };
    let first = backup_job().run().await.unwrap();

    // Rows committed before the point, then rows at and after it.
    next_second().await;
    for i in 0..100 {
        c.exec_drop("INSERT INTO app.t VALUES (?, 'before')", (10_000 + i,))
            .await
            .unwrap();
    }
    let point = next_second().await;
    next_second().await;
    for i in 0..100 {
        c.exec_drop("INSERT INTO app.t VALUES (?, 'after')", (20_000 + i,))
            .await
            .unwrap();
    }
    let second = backup_job().run().await.unwrap();
    assert_ne!(first.prefix, second.prefix);

    // What a Kubernetes user sees of the source's backups from a laptop.
    let listed = std::process::Command::new(moco_tests::local::moco_bin())
        .args([
            "local",
            "backup",
            "list",
            "--from",
            "s3://backups",
            "--cluster",
            "old/db",
        ])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env(
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{}", bench.store.port),
        )
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    for prefix in [&first.prefix, &second.prefix] {
        assert!(out.contains(&format!("{prefix}  complete")), "{out}");
    }
    assert!(out.contains("restores to any second from"), "{out}");
    assert!(
        out.contains("binlog archive:") && !out.contains("GAP"),
        "{out}"
    );
    let e = moco_tests::local::moco_err(&[
        "local",
        "backup",
        "list",
        "--from",
        "s3://backups",
        "--cluster",
        "olddb",
    ]);
    assert!(
        e.contains("--cluster \"olddb\": expected NAMESPACE/NAME"),
        "{e}"
    );
    let e = moco_tests::local::moco_err(&["local", "backup", "list", "--cluster", "old/db"]);
    assert!(e.contains("--cluster needs --from URL"), "{e}");

    // The new cluster: one empty instance with its own passwords, and its kubelet.
    let target = TestPod::new(binary, &root.path().join("new"), 0);
    target.init_and_start(20).await;
    let a_target =
        AgentProcess::start_with_passwords(&target, &certs.agent.0, &[], other_passwords());
    a_target.wait_started(LIMIT).await;
    let target_port = target.port;
    let a_target_port = a_target.agent.port();
    fake.insert(cluster_object("new"));
    fake.insert(pod("new"));
    let restarts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let kubelet = {
        let fake = fake.clone();
        let restarts = restarts.clone();
        let mut agent = a_target;
        tokio::spawn(async move {
            loop {
                if fake.get_json(PODS, "new", "moco-db-0").is_none() {
                    target.stop().await;
                    let out = target.run_init_env(20, &[], &other_passwords());
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    target.start().await;
                    agent.restart();
                    fake.insert(pod("new"));
                    restarts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    return (target, agent);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let restore_job_with = |point: i64, schema: &str, client_tool: PathBuf| RestoreJob {
        cluster: ClusterAccess::new(fake.client(), "new", "db"),
        source_prefix: "moco/old/db".into(),
        point: Timestamp(point),
        schema: schema.into(),
        users: String::new(),
        bucket: bucket.clone(),
        agents: Some(certs.agent.client(&certs.agent)),
        addresses: Arc::new(addresses(&[target_port], &[a_target_port])),
        admin_password: other_password(Account::Admin),
        binlog_tool: binary.tool("mariadb-binlog").unwrap(),
        client_tool,
        work_dir: root.path().join("restore-work"),
        wait_limit: LIMIT,
        tls: ServerTls::default(),
        tools: moco_backup::mysql::command::Tools::from_path(),
        threads: std::num::NonZeroU32::MIN,
    };
    let restore_job =
        |point: i64, schema: &str| restore_job_with(point, schema, binary.tool("mariadb").unwrap());
    let events = |reason: &str| {
        fake.list_json("v1/events", Some("new"))
            .into_iter()
            .filter(|e| e["reason"] == reason)
            .collect::<Vec<_>>()
    };

    // Refused up front: a schema filter, a point before the first backup. Nothing touched.
    let e = restore_job(point, "app")
        .run()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("spec.restore.schema: \"app\""), "{e}");
    let e = restore_job(first.manifest.as_ref().unwrap().started_at.0 - 3600, "")
        .run()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("spec.restore.restorePoint"), "{e}");
    assert_eq!(events("RestoreFailed").len(), 2);
    assert_eq!(restarts.load(std::sync::atomic::Ordering::SeqCst), 0);
    let mut t = login(target_port, &other_password(Account::Admin))
        .await
        .unwrap();
    let state: String = t
        .query_first("SELECT @@gtid_binlog_state")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state, "", "the target is untouched");
    drop(t);

    // A damaged base: the upload to the agent ends with an error, the agent drops the copy,
    // the Pod is not restarted and the instance stays empty.
    let base_key = format!(
        "{}/{}",
        first.prefix,
        first.manifest.as_ref().unwrap().base.key
    );
    let mut original = Vec::new();
    bucket
        .download(&base_key)
        .await
        .unwrap()
        .read_to_end(&mut original)
        .await
        .unwrap();
    let mut damaged = original.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0xff;
    bucket.upload(&base_key, &damaged[..]).await.unwrap();
    let e = restore_job(point, "").run().await.unwrap_err().to_string();
    assert!(
        e.contains("did not take the backup") && e.contains("base.xbstream.zst: "),
        "{e}"
    );
    assert_eq!(events("RestoreFailed").len(), 3);
    assert_eq!(restarts.load(std::sync::atomic::Ordering::SeqCst), 0);
    bucket.upload(&base_key, &original[..]).await.unwrap();

    // A run that fails after the copy is in place (its replay cannot start the client): the
    // Job fails with the reason, and instance 0 holds the copy.
    let e = restore_job_with(point, "", root.path().join("no-such-client"))
        .run()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("replaying") && e.contains("No such file"), "{e}");
    assert_eq!(events("RestoreFailed").len(), 4);
    assert_eq!(restarts.load(std::sync::atomic::Ordering::SeqCst), 1);

    // The restore, to the second between the two backups: run again, it goes on from the copy
    // in place (regression: the agent refused the instance as not empty).
    let began = Instant::now();
    let done = restore_job(point, "").run().await.unwrap();
    let took = began.elapsed();
    assert_eq!(
        done.base, first.prefix,
        "the newest backup before the point"
    );
    assert!(done.replayed.transactions >= 100, "{:?}", done.replayed);
    assert_eq!(restarts.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut t = login(target_port, &other_password(Account::Admin))
        .await
        .unwrap();
    let counts: Vec<(String, u64)> = t
        .query("SELECT v, COUNT(*) FROM app.t GROUP BY v ORDER BY v")
        .await
        .unwrap();
    assert_eq!(
        counts,
        [("base".to_owned(), 1000), ("before".to_owned(), 100)],
        "every row before the point, none after it"
    );
    let read_only: u8 = t.query_first("SELECT @@read_only").await.unwrap().unwrap();
    assert_eq!(read_only, 1, "left read-only for the clustering");
    assert!(
        login(target_port, &test_password(Account::Admin))
            .await
            .is_err(),
        "the source cluster's password no longer logs in"
    );
    let status = fake.get_json(CLUSTERS, "new", "db").unwrap()["status"].clone();
    assert!(status["restoredTime"].is_string(), "{status}");
    assert_eq!(events("Restored").len(), 1);

    // Restored already: a second run refuses.
    let e = restore_job(point, "").run().await.unwrap_err().to_string();
    assert!(e.contains("restored already"), "{e}");
    println!(
        "restore job: base {} bytes, {} binlog files / {} transactions replayed, {:.1} s",
        first.manifest.as_ref().unwrap().base.size,
        done.replayed.files,
        done.replayed.transactions,
        took.as_secs_f64()
    );
    drop(t);
    let (target, agent) = kubelet.await.unwrap();
    drop(agent);
    target.stop().await;
}
