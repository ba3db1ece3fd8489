//! `moco agent` against real servers, as in a Pod: its first start, its probes through their
//! transitions, and a MariaDB clone streamed from the donor's agent to the recipient's over
//! mutual TLS, finished by a "Pod restart" (`moco init` puts the copy in place, the new agent
//! seeds it). Clients the agent must refuse are refused.

use std::time::{Duration, Instant};

use moco_agent::api::{ClonePhase, CloneRequest, CopyPurpose};
use moco_agent::client::AgentClient;
use moco_core::moco_accounts::Account;
use moco_tests::certs::TestCerts;
use moco_tests::local::server_or_skip;
use moco_tests::pod::{AgentProcess, TestPod, test_password, wait_http, write_mysql_tls};
use mysql_async::prelude::Queryable;

const LIMIT: Duration = Duration::from_secs(120);

async fn wait_phase(
    client: &AgentClient,
    agent: &AgentProcess,
    phase: ClonePhase,
) -> moco_agent::api::CloneStatus {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        // A restarted agent refuses connections until it listens.
        let status = match client.clone_status("localhost", agent.agent.port()).await {
            Ok(s) => s,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "clone status: {e}\n{}",
                    agent.log_tail()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if status.phase == phase {
            return status;
        }
        assert!(
            status.phase != ClonePhase::Failed,
            "clone failed: {status:?}\n{}",
            agent.log_tail()
        );
        assert!(
            Instant::now() < deadline,
            "clone never reached {phase:?}: {status:?}\n{}",
            agent.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The controller's request to clone from `donor`, whose agent is `agent`.
fn clone_request(donor: &TestPod, agent: &AgentProcess) -> CloneRequest {
    CloneRequest {
        donor_host: "localhost".into(),
        donor_port: donor.port,
        donor_agent_host: "localhost".into(),
        donor_agent_port: agent.agent.port(),
        user: "moco-clone-donor".into(),
        password: test_password(Account::CloneDonor),
        init_user: "moco-admin".into(),
        init_password: test_password(Account::Admin),
        boot_timeout_seconds: 60,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_clone_a_mariadb_instance_over_mutual_tls() {
    let test = "agents_clone_a_mariadb_instance_over_mutual_tls";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    moco_http::tls::install_crypto_provider();
    let root = tempfile::tempdir().unwrap();
    let certs = TestCerts::write(&root.path().join("certs"));
    let donor = TestPod::new(&binary, root.path(), 0);
    let recipient = TestPod::new(&binary, root.path(), 1);
    for pod in [&donor, &recipient] {
        pod.init_and_start(10).await;
    }
    let a0 = AgentProcess::start(&donor, &certs.agent.0, &["--max-delay=60s"]);
    let mut a1 = AgentProcess::start(&recipient, &certs.agent.0, &["--max-delay=60s"]);

    // First start: the accounts exist (the agent's own login answers /healthz), root is gone.
    a0.wait_started(LIMIT).await;
    a1.wait_started(LIMIT).await;
    let root_login = mysql_async::OptsBuilder::default()
        .user(Some("root"))
        .socket(Some(donor.socket().to_string_lossy().into_owned()));
    assert!(
        mysql_async::Conn::new(root_login).await.is_err(),
        "root still logs in"
    );
    // Read-only without replication: MOCO's 500.
    let body = wait_http(a0.probe, "/readyz", 500, LIMIT, || a0.log_tail()).await;
    assert!(body.contains("replication is not configured"), "{body}");

    // The donor becomes a primary with data: ready.
    let mut c = donor.admin().await;
    for statement in moco_adapters::mysql::sql::set_writable(moco_core::dialect::Dialect::Mariadb) {
        c.query_drop(statement).await.unwrap();
    }
    c.query_drop("CREATE DATABASE app").await.unwrap();
    c.query_drop("CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(64))")
        .await
        .unwrap();
    for i in 0..200 {
        c.exec_drop("INSERT INTO app.t VALUES (?, REPEAT('x', 60))", (i,))
            .await
            .unwrap();
    }
    let donor_state: String = c
        .query_first("SELECT @@gtid_binlog_state")
        .await
        .unwrap()
        .unwrap();
    wait_http(a0.probe, "/readyz", 200, LIMIT, || a0.log_tail()).await;

    let controller = certs.controller.client(&certs.agent);
    let request = clone_request(&donor, &a0);

    // Refusals: a client of another CA never gets past the handshake; another client of the
    // CA may not start clones; a donor that is not empty is refused; a backup without the
    // cluster's clone-donor password is refused.
    let foreign = certs.foreign.client(&certs.agent);
    let e = foreign
        .start_clone("localhost", a1.agent.port(), &request)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("TLS") || e.to_string().contains("request"),
        "{e}"
    );
    let intruder = certs.intruder.client(&certs.agent);
    let e = intruder
        .start_clone("localhost", a1.agent.port(), &request)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("403") && e.to_string().contains("CN=intruder"),
        "{e}"
    );
    let e = controller
        .start_clone("localhost", a0.agent.port(), &request)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("412") && e.to_string().contains("not empty"),
        "{e}"
    );
    let e = match intruder
        .backup("localhost", a0.agent.port(), "guess", CopyPurpose::Clone)
        .await
    {
        Ok(_) => panic!("a backup was streamed for a wrong password"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("403"), "{e}");

    // The clone: received and prepared beside the running server.
    let started = controller
        .start_clone("localhost", a1.agent.port(), &request)
        .await
        .unwrap();
    assert_eq!(started.phase, ClonePhase::Receiving);
    let ready = wait_phase(&controller, &a1, ClonePhase::Ready).await;
    assert!(ready.bytes > 1_000_000, "{ready:?}");
    let body = wait_http(a1.probe, "/readyz", 503, LIMIT, || a1.log_tail()).await;
    assert!(body.contains("clone"), "{body}");
    let e = controller
        .start_clone("localhost", a1.agent.port(), &request)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("409"), "{e}");
    assert!(recipient.volume().join("moco-clone-ready").is_dir());

    // The Pod restarts: agent and server stop, moco init puts the copy in place, the new
    // agent seeds it.
    a1.stop();
    recipient.stop().await;
    let out = recipient.run_init(10, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"swapped_clone\":true"));
    recipient.start().await;
    let a1 = AgentProcess::start(&recipient, &certs.agent.0, &["--max-delay=60s"]);
    let done = wait_phase(&controller, &a1, ClonePhase::Completed).await;
    assert!(done.finished_at.is_some(), "{done:?}");

    let mut r = recipient.admin().await;
    let (rows, state, read_only, server_id): (u64, String, u8, u32) = r
        .query_first(
            "SELECT (SELECT COUNT(*) FROM app.t), @@gtid_binlog_state, @@read_only, @@server_id",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rows, 200);
    assert_eq!(state, donor_state, "the copy continues the donor's history");
    assert_eq!(read_only, 1);
    assert_eq!(server_id, 11, "the copy keeps its own server_id");

    // Replicating from the donor: ready; the SQL thread stopped: not ready.
    r.query_drop(format!(
        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='moco-repl', \
         MASTER_PASSWORD='{}', MASTER_USE_GTID=slave_pos",
        donor.port,
        test_password(Account::Repl)
    ))
    .await
    .unwrap();
    r.query_drop("START SLAVE").await.unwrap();
    c.query_drop("INSERT INTO app.t VALUES (1000, 'after the clone')")
        .await
        .unwrap();
    wait_http(a1.probe, "/readyz", 200, LIMIT, || a1.log_tail()).await;
    // The replica's next start (a crashed container) is as a replica; the primary's is not.
    let snippet = |pod: &TestPod| std::fs::read_to_string(pod.conf_dir().join("my.cnf")).unwrap();
    let deadline = Instant::now() + LIMIT;
    while !snippet(&recipient).contains("init_rpl_role = SLAVE") {
        assert!(
            Instant::now() < deadline,
            "{}\n{}",
            snippet(&recipient),
            a1.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !snippet(&donor).contains("init_rpl_role"),
        "{}",
        snippet(&donor)
    );
    r.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    let body = wait_http(a1.probe, "/readyz", 503, LIMIT, || a1.log_tail()).await;
    assert!(body.contains("SQL: No"), "{body}");

    let metrics = moco_tests::pod::get(a1.metrics, "/metrics")
        .await
        .unwrap()
        .1;
    assert!(
        metrics.contains("moco_instance_clone_in_progress{name=\"db\",index=\"1\"} 0"),
        "{metrics}"
    );
    drop(c);
    drop(r);
    drop(a0);
    drop(a1);
    donor.stop().await;
    recipient.stop().await;
}

/// With TLS (`moco-rs/tls`): the servers refuse plain TCP, so the agent's first login of
/// `moco-admin` and `mariadb-backup`'s connection to 127.0.0.1 must use the CA of
/// `--mysql-tls-ca` and verify the server; the clone then works as without TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_clone_when_mysqld_requires_tls() {
    let test = "agents_clone_when_mysqld_requires_tls";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    moco_http::tls::install_crypto_provider();
    let root = tempfile::tempdir().unwrap();
    let certs = TestCerts::write(&root.path().join("certs"));
    let tls = write_mysql_tls(&root.path().join("mysql-tls"));
    let donor = TestPod::with_tls(&binary, root.path(), 0, Some(&tls));
    let recipient = TestPod::with_tls(&binary, root.path(), 1, Some(&tls));
    for pod in [&donor, &recipient] {
        pod.init_and_start(10).await;
    }
    let flag = format!("--mysql-tls-ca={}", tls.ca_file().display());
    let flags = [
        "--max-delay=60s",
        flag.as_str(),
        "--mysql-tls-check-interval=1s",
    ];
    let a0 = AgentProcess::start(&donor, &certs.agent.0, &flags);
    let mut a1 = AgentProcess::start(&recipient, &certs.agent.0, &flags);
    a0.wait_started(LIMIT).await;
    a1.wait_started(LIMIT).await;

    // The accounts exist, and TCP without TLS is refused.
    let plain = moco_tests::local::opts(donor.port, "moco-admin", &test_password(Account::Admin));
    assert!(
        moco_tests::local::connect(&plain, Duration::from_secs(10))
            .await
            .is_err(),
        "plain TCP accepted"
    );
    let mut c = donor.admin().await;
    for statement in moco_adapters::mysql::sql::set_writable(moco_core::dialect::Dialect::Mariadb) {
        c.query_drop(statement).await.unwrap();
    }
    c.query_drop("CREATE DATABASE app").await.unwrap();
    c.query_drop("CREATE TABLE app.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    for i in 0..50 {
        c.exec_drop("INSERT INTO app.t VALUES (?)", (i,))
            .await
            .unwrap();
    }

    let controller = certs.controller.client(&certs.agent);
    let request = clone_request(&donor, &a0);
    controller
        .start_clone("localhost", a1.agent.port(), &request)
        .await
        .unwrap();
    wait_phase(&controller, &a1, ClonePhase::Ready).await;
    a1.stop();
    recipient.stop().await;
    let out = recipient.run_init(10, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    recipient.start().await;
    let a1 = AgentProcess::start(&recipient, &certs.agent.0, &flags);
    wait_phase(&controller, &a1, ClonePhase::Completed).await;
    let mut r = recipient.admin().await;
    let rows: u64 = r
        .query_first("SELECT COUNT(*) FROM app.t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rows, 50);

    // cert-manager renews the certificate (the kubelet swaps the files): the donor's agent has
    // mysqld read them again, with no restart and no statement from here. The renewal names
    // another host, which shows which certificate the server presents: a client that checks
    // the name for 127.0.0.1 is refused once the reload happened.
    //
    // Then the backup tool verifies the server, not just encrypts: a backup through the
    // donor's agent fails. (mariadb-backup also reads `ssl_ca` from my.cnf's [mysqld]; only
    // the agent's flag turns on the name check.)
    tls.reissue(&["db.example"]);
    let verifying = moco_tests::local::tls_opts(
        donor.port,
        "moco-admin",
        &test_password(Account::Admin),
        tls.ca_pem.clone(),
    );
    let deadline = Instant::now() + LIMIT;
    while moco_tests::local::connect(&verifying, Duration::from_secs(10))
        .await
        .is_ok()
    {
        assert!(
            Instant::now() < deadline,
            "mysqld still presents the old certificate\n{}",
            a0.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        a0.log_tail()
            .contains("reloaded its renewed TLS certificate"),
        "{}",
        a0.log_tail()
    );
    let backup = async {
        let (_, mut stream) = controller
            .backup(
                "localhost",
                a0.agent.port(),
                &test_password(Account::CloneDonor),
                CopyPurpose::Backup,
            )
            .await
            .map_err(|e| e.to_string())?;
        tokio::io::copy(&mut stream, &mut tokio::io::sink())
            .await
            .map_err(|e| e.to_string())
    };
    let refused = backup.await;
    let log = std::fs::read_to_string(donor.dir.join("tmp").join("backup.log")).unwrap_or_default();
    assert!(
        refused.is_err(),
        "a backup was taken from a server whose certificate does not name 127.0.0.1: {refused:?}"
    );
    assert!(log.contains("SSL"), "{log}");
    drop((c, r, a0, a1));
    donor.stop().await;
    recipient.stop().await;
}
