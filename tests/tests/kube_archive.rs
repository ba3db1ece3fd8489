//! Binlog archiving every second on Kubernetes (`moco archive`, beyond MOCO) across a
//! switchover: a real primary and replica stand in for two Pods, the fake API server holds
//! the MySQLCluster whose `status.currentPrimaryIndex` the archiver follows, moto holds the
//! bucket. A writer inserts through whichever instance is primary; after the last write the
//! archive becomes complete up to it (the time it took, the recovery point, is printed; the
//! target is in `docs/benchmarks.md`), and its history holds both primaries' transactions
//! with no gap.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moco_backup::job::archive::{ArchiveJob, PrimaryAccess, RoundOutcome};
use moco_backup::job::cluster::ClusterAccess;
use moco_backup::job::mysql::MysqlTools;
use moco_backup::job::server_tls::ServerTls;
use moco_backup::mariadb::binlog::{self, Timeline};
use moco_backup::mysql::command::Tools;
use moco_core::moco_accounts::Account;
use moco_testkit::apiserver::FakeApiServer;
use moco_tests::job_bench::{
    JobBench, addresses, binlog_position, set_super_read_only, set_writable, writable_with_table,
};
use moco_tests::local::server_or_skip;
use moco_tests::pod::{TestPod, replicate_from_with, test_password, write_mysql_tls};
use mysql_async::prelude::Queryable;
use serde_json::json;

const NS: &str = "prod";
const LIMIT: Duration = Duration::from_secs(120);

fn cluster_object(primary: u32) -> serde_json::Value {
    let mut cluster = moco_tests::job_bench::cluster_object(NS, "uid-db", 2);
    cluster["metadata"]["annotations"]["moco-rs/binlog-archive-interval"] = json!("1s");
    cluster["status"]["currentPrimaryIndex"] = json!(primary);
    cluster
}

/// Inserts rows on `c` for `how_long`, from id `first`; returns the last id and when its
/// insert was acknowledged.
async fn write(c: &mut mysql_async::Conn, first: u32, how_long: Duration) -> (u32, Instant) {
    let end = Instant::now() + how_long;
    let mut id = first;
    let mut acked = Instant::now();
    while Instant::now() < end {
        c.exec_drop("INSERT INTO app.t VALUES (?)", (id,))
            .await
            .unwrap();
        acked = Instant::now();
        id += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (id - 1, acked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archiver_follows_the_primary_and_keeps_the_archive_seconds_behind() {
    archiver_drill(
        "the_archiver_follows_the_primary_and_keeps_the_archive_seconds_behind",
        false,
    )
    .await;
}

/// With TLS (`moco-rs/tls`, `--mysql-tls-ca`): the servers refuse plain TCP, so the
/// archiver's SQL connection and `mariadb-binlog` verify the primary with the CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archiver_verifies_the_primary_when_it_requires_tls() {
    archiver_drill(
        "the_archiver_verifies_the_primary_when_it_requires_tls",
        true,
    )
    .await;
}

/// Writes on instance 0, a switchover to 1, writes on 1, with the archiver running; the
/// archive must reach the last write with no gap.
async fn archiver_drill(test: &str, with_tls: bool) {
    let Some(bench) = JobBench::start(test) else {
        return;
    };
    let (binary, root) = (&bench.binary, &bench.root);
    let tls = with_tls.then(|| write_mysql_tls(&root.path().join("mysql-tls")));
    // The agents' first start creates the accounts.
    let ca_flag = tls
        .as_ref()
        .map(|t| format!("--mysql-tls-ca={}", t.ca_file().display()));
    let flags: Vec<&str> = ca_flag.iter().map(String::as_str).collect();
    let (pods, agents) = bench
        .pods_with_agents::<2>(root.path(), tls.as_ref(), &flags, LIMIT)
        .await;
    let mut c0 = pods[0].admin().await;
    let mut c1 = pods[1].admin().await;
    writable_with_table(&mut c0, "id INT PRIMARY KEY").await;
    let ca_file = tls.as_ref().map(|t| t.ca_file());
    replicate_from_with(&mut c1, pods[0].port, ca_file.as_deref()).await;
    set_super_read_only(&mut c1).await;

    let bucket = bench.bucket().await;
    let fake = FakeApiServer::new();
    fake.insert(cluster_object(0));
    let job = ArchiveJob {
        cluster: ClusterAccess::new(fake.client(), NS, "db"),
        bucket: bucket.clone(),
        access: PrimaryAccess {
            addresses: Arc::new(addresses(&[pods[0].port, pods[1].port], &[])),
            backup_password: test_password(Account::Backup),
            binlog_tool: binary.tool("mariadb-binlog").unwrap(),
            scratch: root.path().join("work").join("binlog"),
            tls: ServerTls::from_flag(ca_file.as_deref()).unwrap(),
        },
        // Unused: a MariaDB cluster.
        mysql: MysqlTools {
            tools: Tools::in_dir(root.path()),
            work_dir: root.path().join("work"),
            threads: std::num::NonZeroU32::MIN,
        },
        every: Duration::from_secs(1),
    };
    let outcomes: Arc<Mutex<Vec<RoundOutcome>>> = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let archiver = {
        let outcomes = outcomes.clone();
        tokio::spawn(async move {
            job.run(stopped, |o| outcomes.lock().unwrap().push(o.clone()))
                .await;
        })
    };

    // Writes on instance 0, then a switchover to 1, then writes on 1.
    let (_, _) = write(&mut c0, 1, Duration::from_secs(4)).await;
    let last_on_0 = binlog_position(&mut c0).await;
    set_super_read_only(&mut c0).await;
    let deadline = Instant::now() + LIMIT;
    while binlog_position(&mut c1).await != last_on_0 {
        assert!(Instant::now() < deadline, "the replica did not catch up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    set_writable(&mut c1).await;
    fake.insert(cluster_object(1));
    let (_, last_acked) = write(&mut c1, 100_000, Duration::from_secs(4)).await;
    let last_on_1 = binlog_position(&mut c1).await;
    assert_eq!(last_on_1.server_id, 11);

    // The archive catches up with the last write.
    let complete = loop {
        let archive = binlog::archive::load(&bucket, "moco/prod/db")
            .await
            .unwrap();
        if archive.progress.and_then(|p| p.position) == Some(last_on_1) {
            break Instant::now();
        }
        assert!(
            last_acked.elapsed() < LIMIT,
            "the archive did not reach {last_on_1:?}; rounds: {:?}",
            outcomes
                .lock()
                .unwrap()
                .iter()
                .rev()
                .take(3)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = stop.send(true);
    tokio::time::timeout(LIMIT, archiver)
        .await
        .unwrap()
        .unwrap();

    let archive = binlog::archive::load(&bucket, "moco/prod/db")
        .await
        .unwrap();
    let timeline = Timeline::build(&archive.segments).unwrap();
    assert_eq!(
        timeline.stretches().len(),
        1,
        "no gap: {:?}",
        timeline.pieces
    );
    assert_eq!(timeline.server_at(last_on_0.seq), Some(10));
    assert_eq!(timeline.server_at(last_on_1.seq), Some(11));
    assert_eq!(timeline.server_at(1), Some(10));
    let rounds = outcomes.lock().unwrap().clone();
    assert!(
        rounds
            .iter()
            .any(|o| o.primary == Some(0) && o.result.is_ok())
            && rounds
                .iter()
                .any(|o| o.primary == Some(1) && o.result.is_ok()),
        "rounds on both primaries: {rounds:?}"
    );
    println!(
        "archiver: {} rounds, {} files; complete {:.1} s after the last acknowledged write",
        rounds.len(),
        archive.segments.len(),
        (complete - last_acked).as_secs_f64()
    );
    drop(agents);
}

/// MariaDB's clients encrypt by default but check nothing: `mariadb-binlog` without our CA
/// still fetches from a server whose certificate names another host. With `--mysql-tls-ca`
/// (`RemoteFetch::ssl_ca`) it verifies the name and refuses that server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binlog_fetches_verify_the_servers_name_with_the_ca() {
    let test = "binlog_fetches_verify_the_servers_name_with_the_ca";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let tls = write_mysql_tls(&root.path().join("mysql-tls"));
    let pod = TestPod::with_tls(&binary, root.path(), 0, Some(&tls));
    pod.init_and_start(10).await;
    moco_adapters::instance::accounts::create_accounts(
        &moco_adapters::instance::accounts::FreshServer {
            name: pod.name.clone(),
            host: "127.0.0.1".into(),
            port: pod.port,
            socket: pod.socket(),
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
            tls: Some(moco_adapters::mysql::tls::MysqlTls::new(tls.ca_pem.clone())),
        },
        &moco_tests::pod::passwords(),
    )
    .await
    .unwrap();
    let mut c = pod.admin().await;
    c.query_drop("FLUSH BINARY LOGS").await.unwrap();
    // The first file is closed now.
    let row: mysql_async::Row = c.query_first("SHOW BINARY LOGS").await.unwrap().unwrap();
    let closed: String = row.get(0).unwrap();
    let fetch = |ssl_ca: Option<std::path::PathBuf>, dir: &str| binlog::fetch::RemoteFetch {
        tool: binary.tool("mariadb-binlog").unwrap(),
        scratch: root.path().join(dir),
        host: "127.0.0.1".into(),
        port: pod.port,
        credentials: moco_cluster::ports::Credentials {
            user: Account::Backup.name().into(),
            password: test_password(Account::Backup),
        },
        ssl_ca,
    };
    let verified = fetch(Some(tls.ca_file()), "verified");
    verified.fetch(&closed).await.unwrap();

    // The server now presents a certificate of the same CA for another name.
    tls.reissue(&["db.example"]);
    c.query_drop("FLUSH SSL").await.unwrap();
    fetch(None, "unverified")
        .fetch(&closed)
        .await
        .expect("MariaDB's default: encrypted, not verified");
    let e = verified.fetch(&closed).await.unwrap_err();
    assert!(e.contains("SSL") || e.contains("certificate"), "{e}");
    drop(c);
    pod.stop().await;
}
