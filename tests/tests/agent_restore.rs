//! The Pod side of a restore on Kubernetes, against real servers and agents over mutual TLS:
//! a physical backup of one cluster (pulled from its agent, `GET /v1/backup`) is pushed into
//! instance 0 of another cluster with other passwords (`PUT /v1/restore`), the way a restore
//! Job will; then the Pod "restarts" as in `kube_clone.rs` (agent and server stop, `moco init`
//! puts the copy in place and gives its accounts this cluster's passwords, both start again)
//! and the new agent seeds it. Refusals are checked with their status and message, and a body
//! that fails mid-way must leave nothing behind.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use moco_agent::api::{
    ClonePhase, CloneStatus, HEADER_ADMIN_PASSWORD, PATH_RESTORE, RESTORE_DONOR,
};
use moco_agent::client::AgentClient;
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_tests::job_bench::{
    AgentBench, SERVER_ID_BASE, agent_backup, set_writable, writable_with_table,
};
use moco_tests::local::{connect, opts};
use moco_tests::pod::{
    AgentProcess, ReaderBody, TestPod, other_password, other_passwords, test_password, wait_http,
};
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncRead, AsyncReadExt as _};

const LIMIT: Duration = Duration::from_secs(120);
/// Server-id bases of the two clusters: the source's instance 0 is server 10 (the bench's
/// own), the target's 20.
const SOURCE_BASE: u32 = SERVER_ID_BASE;
const TARGET_BASE: u32 = 20;

/// A backup of the source through its agent (a backup that was just abandoned may still be
/// stopping: `409` is retried).
async fn pull_backup(
    job: &AgentClient,
    agent: &AgentProcess,
) -> (GtidSet, impl AsyncRead + Unpin + Send + 'static) {
    let deadline = Instant::now() + LIMIT;
    loop {
        match agent_backup(job, agent).await {
            Ok(b) => return b,
            Err(e) if e.to_string().contains("409") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("backup of the source: {e}\n{}", agent.log_tail()),
        }
    }
}

/// 64 MiB of zeros: a body far larger than a refusal lets through.
fn zeros() -> http_body_util::BodyDataStream<ReaderBody<tokio::io::Take<tokio::io::Repeat>>> {
    ReaderBody::new(tokio::io::repeat(0).take(64 << 20), None).into_data_stream()
}

/// A restore of 64 MiB of zeros through `client` into the agent at `port` with
/// `admin_password`, which must fail: its error.
async fn refused_restore(
    client: &AgentClient,
    port: u16,
    admin_password: &str,
    state: &GtidSet,
) -> String {
    client
        .restore("localhost", port, admin_password, state, zeros())
        .await
        .unwrap_err()
        .to_string()
}

async fn status(controller: &AgentClient, agent: &AgentProcess) -> CloneStatus {
    controller
        .clone_status("localhost", agent.agent.port())
        .await
        .unwrap_or_else(|e| panic!("clone status: {e}\n{}", agent.log_tail()))
}

/// Waits until the clone status (a restore's included) satisfies `done`; a failure that
/// does not is fatal.
async fn wait_until(
    controller: &AgentClient,
    agent: &AgentProcess,
    what: &str,
    done: impl Fn(&CloneStatus) -> bool,
) -> CloneStatus {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        // A restarted agent refuses connections until it listens.
        if let Ok(s) = controller
            .clone_status("localhost", agent.agent.port())
            .await
        {
            if done(&s) {
                return s;
            }
            assert!(
                s.phase != ClonePhase::Completed,
                "completed, not {what}: {s:?}"
            );
            assert!(
                Instant::now() < deadline,
                "never {what}: {s:?}\n{}",
                agent.log_tail()
            );
        } else {
            assert!(Instant::now() < deadline, "{}", agent.log_tail());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits for a failure whose error says `cause`.
async fn wait_failed(controller: &AgentClient, agent: &AgentProcess, cause: &str) -> CloneStatus {
    wait_until(controller, agent, &format!("failed with {cause:?}"), |s| {
        s.phase == ClonePhase::Failed && s.error.as_deref().is_some_and(|e| e.contains(cause))
    })
    .await
}

fn nothing_of_a_copy_left(pod: &TestPod) {
    let v = pod.volume();
    for leftover in [
        "moco-clone-staging",
        "moco-clone-ready",
        "moco-clone-seed.json",
    ] {
        assert!(!v.join(leftover).exists(), "{leftover} was left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_another_cluster_is_restored_through_the_agent() {
    let test = "a_backup_of_another_cluster_is_restored_through_the_agent";
    let Some(bench) = AgentBench::start(test) else {
        return;
    };
    let (root, certs) = (&bench.root, &bench.certs);
    // Two clusters (one CA, as one operator's): instance 0 of each, the target with its own
    // passwords. Regression: writing before the agents' first-start check ended raced it (the
    // check leaves a fresh instance read-only): the bench waits for both.
    let ([source], [a_source]) = bench
        .pods_with_agents(&root.path().join("source"), None, &[], LIMIT)
        .await;
    let ([target], [mut a_target]) = bench
        .cluster_pods_with_agents(
            &root.path().join("target"),
            TARGET_BASE,
            other_passwords,
            None,
            &[],
            LIMIT,
        )
        .await;

    // The source: 5,000 rows, and a history of two primaries (server 12, then 10).
    let mut c = source.admin().await;
    c.query_drop("SET SESSION server_id = 12").await.unwrap();
    writable_with_table(&mut c, "id INT PRIMARY KEY, v VARCHAR(64)").await;
    c.query_drop(format!("SET SESSION server_id = {SOURCE_BASE}"))
        .await
        .unwrap();
    for chunk in 0..5 {
        c.query_drop(format!(
            "INSERT INTO app.t SELECT seq, REPEAT('x', 60) FROM app.seq_{}_to_{}",
            chunk * 1000 + 1,
            chunk * 1000 + 1000
        ))
        .await
        .unwrap();
    }
    let (source_state, source_pos): (String, String) = c
        .query_first("SELECT @@gtid_binlog_state, @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    assert!(source_state.contains("0-12-2"), "{source_state}");

    let job = certs.agent.client(&certs.agent);
    let controller = certs.controller.client(&certs.agent);
    let port = a_target.agent.port();
    let state = GtidSet::from_mariadb(&source_state).unwrap();

    // Refusals. Another cluster's admin password (the source's): 403, whatever the body.
    let e = refused_restore(&job, port, &test_password(Account::Admin), &state).await;
    assert!(
        e.contains("403") && e.contains(&format!("{HEADER_ADMIN_PASSWORD} does not match")),
        "{e}"
    );
    // No source history: 400, naming the header.
    let request = hyper::Request::builder()
        .method(hyper::Method::PUT)
        .uri(PATH_RESTORE)
        .header(hyper::header::HOST, "localhost")
        .header(HEADER_ADMIN_PASSWORD, other_password(Account::Admin))
        .body(
            Full::new(Bytes::from_static(b"x"))
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .unwrap();
    let response = job.send("localhost", port, request).await.unwrap();
    assert_eq!(response.status(), 400);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("x-moco-gtid-binlog-state"), "{body}");
    // An instance that executed transactions (the source itself): 412.
    let e = refused_restore(
        &job,
        a_source.agent.port(),
        &test_password(Account::Admin),
        &state,
    )
    .await;
    assert!(e.contains("412") && e.contains("not empty"), "{e}");

    // A stream that is not an xbstream one: the tools fail, 500 (the answer, not a reset,
    // although the body was still being sent), and nothing is kept.
    let e = refused_restore(&job, port, &other_password(Account::Admin), &state).await;
    assert!(e.contains("500") && e.contains("mbstream"), "{e}");
    let failed = wait_failed(&controller, &a_target, "mbstream").await;
    assert_eq!(failed.donor.as_deref(), Some(RESTORE_DONOR));
    nothing_of_a_copy_left(&target);

    // A body that fails its caller's check after 4 MiB: an error, and nothing is kept.
    let (_, stream) = pull_backup(&job, &a_source).await;
    let e = job
        .restore(
            "localhost",
            port,
            &other_password(Account::Admin),
            &state,
            ReaderBody::new(stream, Some(4 << 20)).into_data_stream(),
        )
        .await
        .unwrap_err()
        .to_string();
    println!("{test}: a body failing after 4 MiB: {e}");
    let failed = wait_failed(&controller, &a_target, "request body").await;
    assert_eq!(failed.donor.as_deref(), Some(RESTORE_DONOR));
    nothing_of_a_copy_left(&target);

    // The restore: streamed, unpacked and prepared before the answer.
    let datadir = format!("--datadir={}", source.mysqld.settings().datadir.display());
    let watch = moco_tests::local::ProcessWatch::start(&["--backup --stream=xbstream", &datadir]);
    let (backup_state, stream) = pull_backup(&job, &a_source).await;
    // Asked for as a backup, the donor's tool gives way to its mysqld. (Regression: looked
    // for once, after the answer, the tool of this 19 MB backup had sometimes ended, the
    // whole stream in buffers.)
    let tools = watch.wait_seen(LIMIT);
    assert!(
        !tools.is_empty(),
        "no mariadb-backup --backup {datadir} seen"
    );
    let ours = moco_tests::local::nice_of("self");
    for (pid, nice) in tools {
        assert_eq!(nice, (ours + 10).min(19), "the nice value of {pid}");
    }
    assert_eq!(backup_state, state);
    let started = Instant::now();
    let received = job
        .restore(
            "localhost",
            port,
            &other_password(Account::Admin),
            &backup_state,
            ReaderBody::new(stream, None).into_data_stream(),
        )
        .await
        .unwrap_or_else(|e| panic!("restore: {e}\n{}", a_target.log_tail()));
    let received_in = started.elapsed();
    println!(
        "{test}: {} bytes received and prepared in {:.1} s, position {}",
        received.bytes,
        received_in.as_secs_f64(),
        received.position
    );
    assert!(received.bytes > 1_000_000, "{received:?}");
    assert_eq!(
        received.position,
        GtidSet::from_mariadb(&source_pos).unwrap()
    );
    let ready = status(&controller, &a_target).await;
    assert_eq!(ready.phase, ClonePhase::Ready, "{ready:?}");
    assert_eq!(ready.bytes, received.bytes);
    // The restore Job (a client of this cluster) reads the same status: it waits on it for the
    // seed before it replays. Another cluster's agent and another client of the CA may not.
    let seen_by_job = status(&job, &a_target).await;
    assert_eq!(seen_by_job.phase, ClonePhase::Ready, "{seen_by_job:?}");
    for (who, refused) in [
        ("another cluster", &certs.other_cluster),
        ("another client", &certs.intruder),
    ] {
        let e = refused
            .client(&certs.agent)
            .clone_status("localhost", port)
            .await
            .expect_err(who)
            .to_string();
        assert!(
            e.contains("403") && e.contains("not of this cluster"),
            "{who}: {e}"
        );
    }
    assert!(target.volume().join("moco-clone-ready").is_dir());
    let seed = std::fs::read_to_string(target.volume().join("moco-clone-seed.json")).unwrap();
    assert!(seed.contains("\"rekey\": true"), "{seed}");
    // A second restore while the copy waits: 409.
    let e = refused_restore(&job, port, &other_password(Account::Admin), &state).await;
    assert!(e.contains("409") && e.contains("waits"), "{e}");

    // The Pod restarts (the Job deleted it). Without the cluster's Secret in its environment
    // moco init cannot re-key the copy and says which variable it lacks; with it, it does
    // (the copy was put in place by the failed run: re-keying is not tied to the swap).
    let restarted = Instant::now();
    a_target.stop();
    target.stop().await;
    let out = target.run_init(TARGET_BASE, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("ADMIN_PASSWORD"), "{stderr}");
    let out = target.run_init_env(TARGET_BASE, &[], &other_passwords());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("have this cluster's passwords"), "{stderr}");
    let seed = std::fs::read_to_string(target.volume().join("moco-clone-seed.json")).unwrap();
    assert!(seed.contains("\"rekey\": false"), "{seed}");
    target.start().await;
    let a_target =
        AgentProcess::start_with_passwords(&target, &certs.agent.0, &[], other_passwords());
    let done = wait_until(&controller, &a_target, "completed", |s| {
        s.phase == ClonePhase::Completed
    })
    .await;
    println!(
        "{test}: restart, re-key and seeding took {:.1} s",
        restarted.elapsed().as_secs_f64()
    );
    assert_eq!(done.donor.as_deref(), Some(RESTORE_DONOR));
    assert!(!target.volume().join("moco-clone-seed.json").exists());
    // The agent's own account (this cluster's password) answers the probes.
    wait_http(a_target.probe, "/healthz", 200, LIMIT, || {
        a_target.log_tail()
    })
    .await;

    // This cluster's passwords let in; the source's do not.
    let admin = |password: String| opts(target.port, "moco-admin", &password);
    let e = connect(&admin(test_password(Account::Admin)), LIMIT)
        .await
        .unwrap_err();
    assert!(e.contains("1045"), "{e}");
    let mut r = connect(&admin(other_password(Account::Admin)), LIMIT)
        .await
        .unwrap();
    let (rows, state_after, slave_pos, read_only): (u64, String, String, u8) = r
        .query_first(
            "SELECT (SELECT COUNT(*) FROM app.t), @@gtid_binlog_state, @@gtid_slave_pos, \
             @@read_only",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rows, 5000);
    assert_eq!(
        state_after, source_state,
        "the copy continues the source's history"
    );
    assert_eq!(slave_pos, source_pos);
    assert_eq!(read_only, 1);
    // Its next transaction follows the source's last, as this cluster's server 20.
    set_writable(&mut r).await;
    r.query_drop("INSERT INTO app.t VALUES (5001, 'after the restore')")
        .await
        .unwrap();
    let next: String = r
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let seq: u64 = source_pos.rsplit('-').next().unwrap().parse().unwrap();
    assert_eq!(next, format!("0-{TARGET_BASE}-{}", seq + 1));

    drop((c, r, a_source, a_target));
    source.stop().await;
    target.stop().await;
}

/// Issue 29: every cluster's agents share one CA, so the certificate only proved "some
/// cluster of this operator", and the password alone kept another cluster's Jobs (or agents)
/// from pulling this one's data or pushing a copy into it. Now the agent also requires the
/// client's certificate to be of its own cluster (the operator's Certificate names every Pod of
/// the cluster, `*.moco-<name>.<ns>.svc`) or the controller's: another cluster's certificate
/// is refused with 403 before the password is looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_and_restore_refuse_another_clusters_certificate() {
    let test = "backup_and_restore_refuse_another_clusters_certificate";
    let Some(bench) = AgentBench::start(test) else {
        return;
    };
    let certs = &bench.certs;
    let ([pod], [agent]) = bench
        .pods_with_agents(&bench.root.path().join("db"), None, &[], LIMIT)
        .await;
    let port = agent.agent.port();
    let state = GtidSet::from_mariadb("0-10-1").unwrap();

    // Another cluster's agents' certificate (same CA) with this cluster's passwords, and a
    // client of the CA that names no cluster: refused, naming the certificate.
    for (client, who) in [
        (
            certs.other_cluster.client(&certs.agent),
            "*.moco-other.default.svc",
        ),
        (certs.intruder.client(&certs.agent), "CN=intruder"),
    ] {
        let e = match agent_backup(&client, &agent).await {
            Ok(_) => panic!("{who}: a backup was streamed to another cluster's certificate"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("403") && e.contains("not of this cluster") && e.contains(who),
            "{who}: {e}"
        );
        let e = refused_restore(&client, port, &test_password(Account::Admin), &state).await;
        assert!(
            e.contains("403") && e.contains("not of this cluster") && e.contains(who),
            "{who}: {e}"
        );
    }
    // Nothing was received: the instance is as it was.
    let status = status(&certs.controller.client(&certs.agent), &agent).await;
    assert_eq!(status.phase, ClonePhase::Idle, "{status:?}");

    // This cluster's certificate (a backup Job's, a recipient agent's) with the password: the
    // backup streams.
    let (_, mut stream) = pull_backup(&certs.agent.client(&certs.agent), &agent).await;
    let mut first = vec![0u8; 1 << 16];
    stream.read_exact(&mut first).await.unwrap();
    drop(stream);

    drop(agent);
    pod.stop().await;
}
