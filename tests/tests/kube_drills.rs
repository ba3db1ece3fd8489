//! The clustering drills of `moco local`, run through the Kubernetes platform: real
//! `mariadbd` processes stand in for the Pods, the fake API server holds the MySQLCluster,
//! its Secret and Pods, and a writer sends its INSERTs wherever the primary role label points
//! (as the `-primary` Service routes). Every acknowledged row must survive a switchover by
//! demote annotation, a kill -9 of the primary and a hung (SIGSTOP) primary; an errant replica
//! loses its role label and is never promoted. A killed primary that comes back may hold
//! transactions no replica acknowledged: it is then errant and stays out, which the first drill
//! accepts (it must never be primary again); the hung-primary drill starts from a healthy
//! cluster for that reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use moco_core::dialect::Dialect;
use moco_tests::kube::KubeDrill;
use moco_tests::local::{assert_channels_verify, connect, create_table_with, opts, wait_rows_with};
use mysql_async::prelude::Queryable;
use tokio::sync::Mutex;

const BRING_UP: Duration = Duration::from_secs(180);
const FAILOVER: Duration = Duration::from_secs(120);

/// Writes ids 1, 2, … to the instance the primary label points at; records the ids whose
/// INSERT returned OK.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<u64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    fn start(drill: &Arc<KubeDrill>) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let (s, a, d) = (stop.clone(), acked.clone(), drill.clone());
        let task = tokio::spawn(async move {
            let mut next = 1u64;
            let mut conn: Option<(u16, mysql_async::Conn)> = None;
            while !s.load(Ordering::Relaxed) {
                let Some(port) = d.routed_primary_port() else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                if conn.as_ref().is_none_or(|(p, _)| *p != port) {
                    conn = connect(&d.opts(port, "moco-writable"), Duration::from_secs(1))
                        .await
                        .ok()
                        .map(|c| (port, c));
                }
                let Some((_, c)) = conn.as_mut() else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let id = next;
                next += 1;
                let insert = c.exec_drop("INSERT INTO moco_test.t (id) VALUES (?)", (id,));
                match tokio::time::timeout(Duration::from_secs(5), insert).await {
                    Ok(Ok(())) => a.lock().await.push(id),
                    _ => {
                        conn = None;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        });
        Writer { stop, acked, task }
    }

    async fn acked(&self) -> usize {
        self.acked.lock().await.len()
    }

    async fn finish(self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.acked.lock().await.clone()
    }
}

async fn wait_acked(writer: &Writer, more_than: usize) {
    for _ in 0..600 {
        if writer.acked().await > more_than {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the writer acknowledged no write beyond {more_than} in 30 s");
}

async fn assert_no_acked_write_lost(drill: &KubeDrill, acked: &[u64]) {
    let port = drill.routed_primary_port().expect("a primary");
    let stored = wait_rows_with(
        &drill.opts(port, "moco-admin"),
        acked,
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|(missing, e)| {
        panic!(
            "{} acknowledged rows lost: {missing:?} ({e})",
            missing.len()
        )
    });
    println!(
        "{} rows acknowledged, {stored} stored on the primary",
        acked.len()
    );
}

/// A Healthy 3-instance drill with the test table and a writer that has 20 rows acknowledged;
/// `None` when no server is available.
async fn healthy_with_writer(test: &str) -> Option<(Arc<KubeDrill>, Writer)> {
    writer_on(Arc::new(KubeDrill::start(test, 3).await?)).await
}

/// `drill`, Healthy, with the test table and a writer that has 20 rows acknowledged.
async fn writer_on(drill: Arc<KubeDrill>) -> Option<(Arc<KubeDrill>, Writer)> {
    drill
        .wait("Healthy with role labels", BRING_UP, KubeDrill::healthy)
        .await;
    let port = drill.routed_primary_port().unwrap();
    assert_eq!(port, drill.manifest.instance_port(drill.primary()));
    create_table_with(&drill.opts(port, "moco-writable"))
        .await
        .unwrap();
    let writer = Writer::start(&drill);
    wait_acked(&writer, 20).await;
    Some((drill, writer))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_switchover_by_annotation_and_kill9_failover_lose_no_acknowledged_write() {
    let Some((drill, writer)) = healthy_with_writer("kube_switchover_and_kill9_failover").await
    else {
        return;
    };
    switchover_then_kill9_failover(&drill, writer).await;
}

/// TLS on Kubernetes (`moco-rs/tls: "true"`, MOCO #544): every server requires it, the
/// manager trusts only the CA of `moco-db-mysql-ca`, and the channels it configures verify
/// their source with the CA file the instances read, across a switchover and a failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_tls_cluster_verifies_every_server_through_switchover_and_failover() {
    let test = "kube_tls_cluster_verifies_every_server";
    let Some(drill) = KubeDrill::start_tls(test, 3).await else {
        return;
    };
    let Some((drill, writer)) = writer_on(Arc::new(drill)).await else {
        return;
    };
    let ca_file = drill.layout.ca_cert().display().to_string();
    let admin = drill.password("moco-admin");
    for i in 0..3 {
        let port = drill.manifest.instance_port(i);
        let plain = connect(&opts(port, "moco-admin", admin), Duration::from_secs(10)).await;
        assert!(plain.is_err(), "instance {i} accepted plain TCP");
    }
    // The replicas that replicate: not the primary, and not an errant instance (a killed
    // primary may come back with transactions nobody acknowledged; it then stays out).
    let replicas = |d: &KubeDrill| -> Vec<(u32, mysql_async::Opts)> {
        let errant = d.cluster()["status"]["errantReplicaList"].clone();
        let errant: Vec<u64> = errant
            .as_array()
            .map(|l| l.iter().filter_map(serde_json::Value::as_u64).collect())
            .unwrap_or_default();
        (0..3)
            .filter(|i| *i != d.primary() && !errant.contains(&u64::from(*i)))
            .map(|i| (i, d.opts(d.manifest.instance_port(i), "moco-admin")))
            .collect()
    };
    assert_channels_verify(replicas(&drill), &ca_file).await;

    switchover_then_kill9_failover(&drill, writer).await;
    // The returned ex-primary is classified first: back in (Healthy) or recorded errant.
    drill
        .wait("the returned instance classified", FAILOVER, |d| {
            d.healthy()
                || d.cluster()["status"]["errantReplicaList"]
                    .as_array()
                    .is_some_and(|l| !l.is_empty())
        })
        .await;
    let after = replicas(&drill);
    assert!(!after.is_empty(), "no replica after the failover");
    assert_channels_verify(after, &ca_file).await;
}

/// A switchover by the demote annotation, then a kill -9 of the new primary and its return,
/// under `writer`; no acknowledged row may be lost.
async fn switchover_then_kill9_failover(drill: &Arc<KubeDrill>, writer: Writer) {
    let first = drill.primary();

    // Switchover: the demote annotation on the primary Pod.
    drill.demote(first);
    drill
        .wait("a switchover", FAILOVER, |d| {
            d.primary() != first && d.healthy()
        })
        .await;
    let second = drill.primary();
    let annotations = drill.pod(first)["metadata"]["annotations"].clone();
    assert!(
        annotations.get("moco.cybozu.com/demote").is_none(),
        "the demote annotation is removed: {annotations}"
    );
    assert!(
        drill.event_reasons().contains(&"SwitchOver".to_owned()),
        "{:?}",
        drill.event_reasons()
    );
    // Every event is about the MySQLCluster, as `kubectl describe` finds them.
    let uid = drill.cluster()["metadata"]["uid"].clone();
    for event in drill.events() {
        assert_eq!(
            event["regarding"],
            serde_json::json!({"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
                               "name": moco_tests::kube::NAME,
                               "namespace": moco_tests::kube::NS, "uid": uid}),
            "{event}"
        );
    }
    let before = writer.acked().await;
    wait_acked(&writer, before + 20).await;

    // kill -9 of the new primary: the kubelet sees it not ready; the manager fails over.
    assert!(drill.server(second).kill().await.unwrap());
    drill
        .wait("a failover", FAILOVER, |d| {
            d.primary() != second && d.role(d.primary()).as_deref() == Some("primary")
        })
        .await;
    let third = drill.primary();
    assert!(
        drill.event_reasons().contains(&"FailOver".to_owned()),
        "{:?}",
        drill.event_reasons()
    );
    let before = writer.acked().await;
    wait_acked(&writer, before + 20).await;

    // The kubelet restarts the container: the old primary comes back as a replica (or is
    // excluded as errant if it had unacknowledged transactions, never as a second primary).
    drill
        .server(second)
        .start_and_wait(&[], Duration::from_secs(120))
        .await
        .unwrap();
    drill
        .wait("Healthy or Degraded, measured", FAILOVER, |d| {
            d.metrics.available.get_or_create(&d.labels()).get() == 1.0
        })
        .await;
    drill
        .wait("the restarted instance back as a replica", FAILOVER, |d| {
            d.primary() == third
                && d.role(second).as_deref() != Some("primary")
                && d.condition("Available").as_deref() == Some("True")
        })
        .await;

    let acked = writer.finish().await;
    assert_no_acked_write_lost(drill, &acked).await;

    // Issue 35: the manager's liveness is visible. Its rounds are counted in
    // `moco_cluster_round_duration_seconds`, and `moco_cluster_last_round_timestamp_seconds`
    // is recent (an alert fires on its age).
    let labels = drill.labels();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let last = drill.metrics.last_round.get_or_create(&labels).get();
    assert!(
        (0.0..30.0).contains(&(now - last)),
        "last round ended {}s ago",
        now - last
    );
    let mut text = String::new();
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register(
        "moco_cluster_round_duration_seconds",
        "rounds",
        drill.metrics.round_duration.clone(),
    );
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let count = text
        .lines()
        .find(|l| l.starts_with("moco_cluster_round_duration_seconds_count"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(count >= 3, "{text}");
}

/// The healthy reason of the cluster (the state name).
fn state(drill: &KubeDrill) -> String {
    drill.cluster()["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == "Healthy"))
        .and_then(|c| c["reason"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_errant_replica_is_unlabelled_and_never_promoted() {
    let Some((drill, writer)) = healthy_with_writer("kube_errant_replica").await else {
        return;
    };
    let primary = drill.primary();

    // An errant transaction written straight to a replica (as an admin could by mistake).
    let errant = (0..3).find(|i| *i != primary).unwrap();
    let mut c = connect(
        &drill.opts(drill.manifest.instance_port(errant), "moco-admin"),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    // The mistake: make the replica writable (MariaDB: through the admin's role) and write.
    let open = vec!["SET GLOBAL read_only = 0".to_owned()];
    for statement in moco_adapters::mysql::sql::privileged(Dialect::Mariadb, open) {
        c.query_drop(statement).await.unwrap();
    }
    drop(c);
    let mut w = connect(
        &drill.opts(drill.manifest.instance_port(errant), "moco-writable"),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    w.query_drop("INSERT INTO moco_test.t (id) VALUES (1000000000)")
        .await
        .unwrap();
    drop(w);
    drill
        .managers
        .wake(moco_tests::kube::NS, moco_tests::kube::NAME);
    drill
        .wait("the errant replica unlabelled", FAILOVER, |d| {
            d.cluster()["status"]["errantReplicaList"]
                .as_array()
                .is_some_and(|l| l.iter().any(|i| i.as_u64() == Some(u64::from(errant))))
                && d.role(errant).is_none()
        })
        .await;
    let before = writer.acked().await;
    wait_acked(&writer, before + 20).await;

    // With the primary hung and one of two replicas errant, no failover can be proven safe
    // (the one acknowledgement a commit had may be on either replica): the cluster is Lost
    // and nobody is promoted, least of all the errant replica.
    drill.server(primary).freeze().unwrap();
    drill.wait("Lost", FAILOVER, |d| state(d) == "Lost").await;
    assert_eq!(drill.primary(), primary);
    assert_ne!(drill.role(errant).as_deref(), Some("primary"));
    drill.server(primary).thaw().unwrap();
    drill
        .wait("the primary back", FAILOVER, |d| {
            d.primary() == primary && d.condition("Available").as_deref() == Some("True")
        })
        .await;
    let acked = writer.finish().await;
    assert_no_acked_write_lost(&drill, &acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_hung_primary_fails_over_and_loses_no_acknowledged_write() {
    let Some((drill, writer)) = healthy_with_writer("kube_hung_primary").await else {
        return;
    };
    let primary = drill.primary();

    // SIGSTOP: the kernel still accepts TCP connections for it, it answers nothing.
    drill.server(primary).freeze().unwrap();
    drill
        .wait("a failover from the hung primary", FAILOVER, |d| {
            d.primary() != primary && d.role(d.primary()).as_deref() == Some("primary")
        })
        .await;
    assert!(
        drill.event_reasons().contains(&"FailOver".to_owned()),
        "{:?}",
        drill.event_reasons()
    );
    let before = writer.acked().await;
    wait_acked(&writer, before + 20).await;
    // It wakes up read-only and never takes the primary role back.
    drill.server(primary).thaw().unwrap();
    let new_primary = drill.primary();
    drill
        .wait("the old primary out of the primary role", FAILOVER, |d| {
            d.primary() == new_primary && d.role(primary).as_deref() != Some("primary")
        })
        .await;
    let acked = writer.finish().await;
    assert_no_acked_write_lost(&drill, &acked).await;
}

/// Every instance in `instances` holds every acknowledged row (waiting up to a minute each).
async fn assert_rows_on(drill: &KubeDrill, instances: std::ops::Range<u32>, acked: &[u64]) {
    for index in instances {
        wait_rows_with(
            &drill.opts(drill.manifest.instance_port(index), "moco-admin"),
            acked,
            Duration::from_secs(60),
        )
        .await
        .unwrap_or_else(|(missing, e)| panic!("instance {index} lacks {missing:?} ({e})"));
    }
}

/// `spec.replicas` 3 → 5 under writes through the Kubernetes platform: the new Pods' empty
/// servers are brought in as learners (cloned, or replaying), join once caught up, and the
/// status records them as members (`semiSyncMembers`, written through the MySQLCluster's
/// status subresource). Writes go on throughout; nothing acknowledged is lost, and every
/// instance ends with every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_grows_from_three_to_five_under_writes() {
    let Some(drill) = KubeDrill::start_with_room("kube_grows_from_three_to_five", 3, 5).await
    else {
        return;
    };
    let drill = Arc::new(drill);
    drill
        .wait("Healthy with role labels", BRING_UP, KubeDrill::healthy)
        .await;
    let port = drill.routed_primary_port().unwrap();
    create_table_with(&drill.opts(port, "moco-writable"))
        .await
        .unwrap();
    let writer = Writer::start(&drill);
    wait_acked(&writer, 20).await;
    assert_eq!(drill.cluster()["status"]["semiSyncMembers"], 3);

    drill.grow(5);
    // Writes are acknowledged while the new instances are still learners.
    let before = writer.acked().await;
    wait_acked(&writer, before + 20).await;
    drill
        .wait("Healthy with five members", BRING_UP, |d| {
            d.healthy() && d.cluster()["status"]["semiSyncMembers"] == 5
        })
        .await;
    let before = writer.acked().await;
    wait_acked(&writer, before + 20).await;
    let acked = writer.finish().await;
    assert_no_acked_write_lost(&drill, &acked).await;
    let status = drill.cluster()["status"].clone();
    assert!(status.get("semiSyncMinAcks").is_none(), "{status}");
    // Every instance holds every acknowledged row.
    assert_rows_on(&drill, 0..5, &acked).await;
}

/// `spec.replicas` 5 → 3 under writes through the Kubernetes platform, with the primary on
/// instance 4: the engine switches it over to a remaining instance, lowers the wait count,
/// stops the leaving instances' IO threads and records the new members once the remaining
/// ones hold everything; only then does the StatefulSet (as the reconciler renders it) drop
/// the two Pods. Writes go on throughout; nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_shrinks_from_five_to_three_under_writes() {
    let Some(drill) = KubeDrill::start("kube_shrinks_from_five_to_three", 5).await else {
        return;
    };
    let drill = Arc::new(drill);
    drill
        .wait("Healthy with role labels", BRING_UP, KubeDrill::healthy)
        .await;
    // Move the primary onto a leaving instance: with 1 and 2 frozen, 3 is the lowest
    // switchover candidate.
    for i in [1, 2] {
        drill.server(i).freeze().unwrap();
    }
    drill.demote(0);
    drill
        .wait("a switchover to 3", BRING_UP, |d| d.primary() == 3)
        .await;
    for i in [1, 2] {
        drill.server(i).thaw().unwrap();
    }
    drill
        .wait("Healthy with primary 3", BRING_UP, KubeDrill::healthy)
        .await;
    let leaving_primary = drill.primary();
    let port = drill.routed_primary_port().unwrap();
    create_table_with(&drill.opts(port, "moco-writable"))
        .await
        .unwrap();
    let writer = Writer::start(&drill);
    wait_acked(&writer, 20).await;

    drill.shrink(3);
    let mut held_while_counted = 0;
    let deadline = Instant::now() + BRING_UP;
    loop {
        let members = drill.cluster()["status"]["semiSyncMembers"].as_u64();
        let left = drill.follow_statefulset().await;
        if members == Some(5) {
            assert_eq!(
                left, 5,
                "Pods removed while the leaving instances still count"
            );
            held_while_counted += 1;
        }
        if left == 3 && drill.healthy() && drill.cluster()["status"]["semiSyncMembers"] == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not shrunk: {}",
            drill.cluster()["status"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(held_while_counted > 0);
    assert!(
        drill.primary() < 3,
        "the primary moved off {leaving_primary}"
    );
    let before = writer.acked().await;
    wait_acked(&writer, before + 20).await;
    let acked = writer.finish().await;
    assert_no_acked_write_lost(&drill, &acked).await;
    assert_rows_on(&drill, 0..3, &acked).await;
}
