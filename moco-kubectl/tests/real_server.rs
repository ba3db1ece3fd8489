//! `plan` and `status` against real servers: three `mariadbd` created as `moco local` creates
//! instances (running, read-only, no replication yet) stand in for the Pods of a MySQLCluster
//! held by the fake API server, reached with `--address`. The test makes instance 1 replicate
//! from instance 0 and leaves instance 2 alone.
//!
//! It checks what the fake-only tests cannot: the facts carry the servers' real status, the
//! printed decision is the engine's for them and plans work (configuring the cluster), yet
//! after `plan` every server is as it was and nothing was written to the API; `status` shows
//! the replica's lag; and an instance refusing the operator's account gives a note, not an
//! event.
//!
//! Needs `mariadbd` or `mysqld` (`$MOCO_TEST_MYSQLD`, `PATH`, `/usr/sbin`); set
//! `MOCO_SKIP_REAL_SERVER=1` to skip on a machine without one.
// Helpers panic on failure as the tests do.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{NAME, NS, cluster, pod, run, writes};
use moco_adapters::mysql::{ConnectOptions, MysqlInstance};
use moco_cluster::ports::{Credentials, MysqlPort as _};
use moco_core::facts::{ClusterFacts, Flavor, MysqldStatus};
use moco_core::moco_accounts::Account;
use moco_core::operation::ReplicationSource;
use moco_local::platform::create::{self, CreateOptions};
use moco_local::platform::layout::Layout;
use moco_local::platform::secret::Secret;
use moco_testkit::apiserver::FakeApiServer;
use serde_json::{Value, json};

/// Kills, by pid, the processes whose command line mentions the test's directory (the server
/// this test started), whatever happened to the test.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if pid.parse::<u32>().is_err() || pid == std::process::id().to_string() {
                continue;
            }
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&raw).contains(&self.0) {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid])
                    .status();
            }
        }
    }
}

fn password_secret(passwords: &BTreeMap<&'static str, String>) -> Value {
    let data: BTreeMap<&str, k8s_openapi::ByteString> = passwords
        .iter()
        .map(|(k, v)| (*k, k8s_openapi::ByteString(v.clone().into_bytes())))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("moco-{NAME}"), "namespace": NS},
        "data": serde_json::to_value(&data).unwrap()
    })
}

/// What the test compares before and after `plan`: each server's settings and GTID state.
async fn settings(servers: &[MysqlInstance]) -> Vec<(bool, bool, Option<(String, u16)>, String)> {
    let mut out = Vec::new();
    for server in servers {
        let s: MysqldStatus = server.status().await.unwrap();
        out.push((
            s.read_only,
            s.semi_sync.source_enabled || s.semi_sync.replica_enabled,
            s.replica_status.map(|r| (r.source_host, r.source_port)),
            s.gtid_executed.to_string(),
        ));
    }
    out
}

#[tokio::test]
async fn plan_reads_real_servers_and_leaves_them_as_they_were() {
    let test = "moco-kubectl plan_reads_real_servers_and_leaves_them_as_they_were";
    let binary = match moco_adapters::mysqld::ServerBinary::find(None) {
        Ok(b) => b,
        Err(e) if std::env::var_os("MOCO_SKIP_REAL_SERVER").is_some_and(|v| v == "1") => {
            println!("SKIPPED {test} (MOCO_SKIP_REAL_SERVER=1): {e}");
            return;
        }
        Err(e) => panic!(
            "{test}: no server binary ({e}); install mariadb-server, or set \
             MOCO_SKIP_REAL_SERVER=1 to skip"
        ),
    };
    moco_testkit::ledger::record(test, &binary.label());

    let dir = tempfile::Builder::new()
        .prefix("moco-kubectl-real-")
        .tempdir()
        .unwrap();
    let root = dir.path().join("c");
    let _cleanup = Cleanup(root.display().to_string());
    let mut options = CreateOptions::new(&root, 3);
    options.server = Some(binary.path().to_path_buf());
    let prepared = create::prepare(options).unwrap();
    let layout: Layout = prepared.layout().clone();
    let manifest = create::create(prepared).await.unwrap();
    let ports: Vec<u16> = (0..3).map(|i| manifest.instance_port(i)).collect();
    let secret = Secret::load(&layout).unwrap();
    let mut passwords: BTreeMap<&'static str, String> = Account::ALL
        .iter()
        .map(|a| {
            (
                a.secret_key(),
                secret.password(a.name()).unwrap().to_owned(),
            )
        })
        .collect();

    let admin = Credentials {
        user: Account::Admin.name().to_owned(),
        password: passwords[Account::Admin.secret_key()].clone(),
    };
    let servers: Vec<MysqlInstance> = ports
        .iter()
        .map(|p| {
            MysqlInstance::new(
                ConnectOptions::new("127.0.0.1", *p, &admin)
                    .with_timeouts(Duration::from_secs(5), Duration::from_secs(10)),
            )
        })
        .collect();
    // Instance 1 replicates from instance 0; wait until it reports its lag.
    let repl = Credentials {
        user: Account::Repl.name().to_owned(),
        password: passwords[Account::Repl.secret_key()].clone(),
    };
    let source = ReplicationSource::Instance {
        index: 0,
        host: "127.0.0.1".to_owned(),
        port: ports[0],
    };
    servers[1]
        .configure_replication(&source, &repl, false)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = servers[1].status().await.unwrap();
        let lag = status
            .replica_status
            .as_ref()
            .and_then(|r| r.seconds_behind_source);
        if lag == Some(0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "instance 1 does not replicate: {:?}",
            status.replica_status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let before: Vec<_> = settings(&servers).await;

    let fake = FakeApiServer::new();
    let mut c = cluster(3, json!({"currentPrimaryIndex": 0}));
    c["spec"]["serverIDBase"] = json!(manifest.server_id_base);
    if manifest.flavor == Flavor::Mariadb {
        c["metadata"]["annotations"]["moco-rs/flavor"] = json!("mariadb");
    }
    fake.insert(c);
    fake.insert(pod(0, Some("primary"), true, "Running"));
    fake.insert(pod(1, Some("replica"), true, "Running"));
    fake.insert(pod(2, Some("replica"), false, "Running"));
    fake.insert(password_secret(&passwords));
    let addresses: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("--address={i}=127.0.0.1:{p}"))
        .collect();
    let with_addresses = |head: &[&'static str]| -> Vec<String> {
        head.iter()
            .map(|s| (*s).to_owned())
            .chain(addresses.iter().cloned())
            .chain([NAME.to_owned()])
            .collect()
    };

    // plan: the real status in the facts, the engine's decision on them.
    let args = with_addresses(&["plan", "--show-facts"]);
    let out = run(&fake, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let printed: Value = serde_json::from_str(out.ok()).unwrap();
    let facts: ClusterFacts = serde_json::from_value(printed["facts"].clone()).unwrap();
    for (index, instance) in facts.instances.iter().enumerate() {
        let mysqld = instance.mysqld.as_ref().expect("every server answered");
        assert_eq!(
            mysqld.server_id,
            manifest.server_id_base + u32::try_from(index).unwrap()
        );
        assert_eq!(mysqld.flavor, manifest.flavor);
        assert!(mysqld.read_only, "new instances start read-only");
        assert_eq!(mysqld.replica_status.is_some(), index == 1);
    }
    let decision = moco_core::decide(&facts).unwrap();
    assert_eq!(
        printed["decision"],
        serde_json::to_value(&decision).unwrap()
    );
    assert!(
        !decision.steps.is_empty(),
        "the operator would configure the cluster: {decision:?}"
    );
    assert_eq!(out.err, "", "every instance answered: no note");

    // Nothing was done: no API write, and every server is as it was.
    assert!(writes(&fake).is_empty(), "{:?}", writes(&fake));
    assert_eq!(settings(&servers).await, before);

    // status reads the replica's lag over SQL.
    let args = with_addresses(&["status", "-o", "json"]);
    let status = run(&fake, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let report: Value = serde_json::from_str(status.ok()).unwrap();
    let sql_and_lag: Vec<(Value, Value)> = report["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["sql"].clone(), i["lagSeconds"].clone()))
        .collect();
    assert_eq!(
        sql_and_lag,
        [
            (json!("reachable"), Value::Null),
            (json!("reachable"), json!(0)),
            (json!("reachable"), Value::Null)
        ]
    );
    assert_eq!(report["sqlError"], Value::Null);
    let args = with_addresses(&["status"]);
    let text = run(&fake, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(
        text.ok()
            .contains("  1      moco-db-1  Running  replica  true   false   reachable  0s\n"),
        "{}",
        text.ok()
    );

    // A refused account: the operator would record an event; plan only says so.
    passwords.insert(Account::Admin.secret_key(), "not-the-password".to_owned());
    fake.insert(password_secret(&passwords));
    let args = with_addresses(&["plan"]);
    let refused = run(&fake, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    refused.ok();
    assert!(
        refused
            .err
            .contains("kubectl-moco: note: the operator would record a Warning event AccountRefused: instance 0 refuses the operator's account moco-admin"),
        "{}",
        refused.err
    );
    assert!(writes(&fake).is_empty(), "{:?}", writes(&fake));
    assert!(fake.list_json("events.k8s.io/v1/events", None).is_empty());

    drop(servers);
    moco_local::platform::run::stop_instances(&layout, Duration::from_secs(10))
        .await
        .unwrap();
}
