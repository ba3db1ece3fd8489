//! Accounts and databases as code on the real control plane (issue 34): MySQLUser and
//! MySQLDatabase applied with kubectl (the manifest written as the issue writes it, bare `on:`
//! included), kept on a 3-instance MariaDB cluster run in Pods by the Pod runner, reached as
//! an application would.
//!
//! * the declared user can do what it was granted and is refused the rest;
//! * a new password in its Secret is applied (the old one refused) within seconds;
//! * a `DROP USER` and a `REVOKE` by hand are put back with a `DriftRepaired` warning;
//! * all of it on the new primary after a failover (the primary frozen);
//! * `deletionPolicy: Delete` drops the account and the database, `Retain` keeps them;
//! * the API server refuses a changed `clusterName` (the CRD's CEL rule);
//! * `Ready` says why not: `ClusterNotFound`, `ClusterNotAvailable` (an offline cluster),
//!   `SecretMissing` until the Secret is made (then `Applied`),
//!   `UnknownPrivilege` for a privilege MariaDB does not know, with the server's words,
//!   `Conflict` for a second declaration of an account (which changes nothing, and whose
//!   deletion with `deletionPolicy: Delete` drops nothing), `Invalid` for objects the webhook
//!   would refuse (no webhook is registered here: a MySQLUser of `moco-admin`, a
//!   MySQLDatabase of `mysql`), `Exists` for an account made by hand (not taken over without
//!   `spec.adopt`); none of them changes anything or, deleted with `deletionPolicy: Delete`,
//!   drops anything.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use moco_api::accounts::{MySQLDatabase, MySQLUser};
use moco_tests::clustered::{BRING_UP, CHANGE, ClusteredNamespace, setup, setup_as_moco, when};
use moco_tests::operated_namespace::{NAME, mariadb_cluster};
use moco_tests::writer::opts_at;
use mysql_async::prelude::Queryable;

/// How soon a change of the Secret or a drift must be applied: the resync is 30 s; a busy
/// machine gets room.
const APPLIED: Duration = Duration::from_secs(120);

/// `kubectl apply` of the issue's manifest (the bare `on:` that YAML 1.1 reads as `true`).
fn declare(f: &ClusteredNamespace, password: &str, policy: &str) {
    let yaml = format!(
        r#"
apiVersion: v1
kind: Secret
metadata:
  name: app-password
stringData:
  password: "{password}"
---
apiVersion: moco-rs.io/v1alpha1
kind: MySQLDatabase
metadata:
  name: appdb
spec:
  clusterName: {NAME}
  name: appdb
  characterSet: utf8mb4
  collation: utf8mb4_bin
  deletionPolicy: {policy}
---
apiVersion: moco-rs.io/v1alpha1
kind: MySQLUser
metadata:
  name: app
spec:
  clusterName: {NAME}
  name: app
  host: "%"
  passwordSecretKeyRef: {{name: app-password, key: password}}
  grants:
  - privileges: [SELECT, INSERT, UPDATE, DELETE, CREATE]
    on: "appdb.*"
  maxUserConnections: 10
  deletionPolicy: {policy}
---
apiVersion: moco-rs.io/v1alpha1
kind: MySQLUser
metadata:
  name: reader
spec:
  clusterName: {NAME}
  passwordSecretKeyRef: {{name: app-password, key: password}}
  grants:
  - privileges: [SELECT]
    "on": "appdb.*"
"#
    );
    f.cp.apply(&f.ns, &yaml);
}

/// A MySQLUser `name` of MySQLCluster `cluster`, its password in Secret `secret`, granted
/// `privilege` on `on`.
fn user_yaml(cluster: &str, name: &str, secret: &str, privilege: &str, on: &str) -> String {
    format!(
        "apiVersion: moco-rs.io/v1alpha1\nkind: MySQLUser\nmetadata: {{name: {name}}}\n\
         spec:\n  clusterName: {cluster}\n  passwordSecretKeyRef: {{name: {secret}, key: password}}\n  \
         grants: [{{privileges: [{privilege}], \"on\": \"{on}\"}}]\n"
    )
}

async fn connect(
    addr: SocketAddr,
    user: &str,
    password: &str,
) -> Result<mysql_async::Conn, mysql_async::Error> {
    let opts = opts_at(addr, user, password);
    match tokio::time::timeout(Duration::from_secs(10), mysql_async::Conn::new(opts)).await {
        Ok(r) => r,
        Err(_) => Err(mysql_async::Error::Other("connect timed out".into())),
    }
}

/// Whether `user` logs in to the primary with `password`.
async fn logs_in(f: &ClusteredNamespace, user: &str, password: &str) -> bool {
    let Some(primary) = f.primary_index().await else {
        return false;
    };
    let Some(addr) = f.addr(primary).await else {
        return false;
    };
    match connect(addr, user, password).await {
        Ok(c) => {
            let _ = c.disconnect().await;
            true
        }
        Err(_) => false,
    }
}

fn ready(
    status: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
) -> Option<(String, String)> {
    status?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

async fn user_ready(f: &ClusteredNamespace, name: &str) -> Option<(String, String)> {
    let u: MySQLUser = f.get(name).await?;
    ready(u.status.as_ref().map(|s| &s.conditions))
}

async fn database_ready(f: &ClusteredNamespace, name: &str) -> Option<(String, String)> {
    let d: MySQLDatabase = f.get(name).await?;
    ready(d.status.as_ref().map(|s| &s.conditions))
}

/// `statement` as moco-admin on the primary.
async fn as_admin(f: &ClusteredNamespace, statement: &str) {
    let primary = f.primary_index().await.unwrap();
    let addr = f.addr(primary).await.unwrap();
    let admin = f.password("ADMIN_PASSWORD").await;
    let mut c = connect(addr, "moco-admin", &admin).await.unwrap();
    c.query_drop(statement).await.unwrap();
    c.disconnect().await.unwrap();
}

async fn has_account(f: &ClusteredNamespace, user: &str) -> bool {
    let primary = f.primary_index().await.unwrap();
    let addr = f.addr(primary).await.unwrap();
    let admin = f.password("ADMIN_PASSWORD").await;
    let mut c = connect(addr, "moco-admin", &admin).await.unwrap();
    let n: Option<u64> = c
        .exec_first("SELECT COUNT(*) FROM mysql.user WHERE User = ?", (user,))
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    n.unwrap_or(0) > 0
}

async fn has_database(f: &ClusteredNamespace, name: &str) -> bool {
    let primary = f.primary_index().await.unwrap();
    let addr = f.addr(primary).await.unwrap();
    let admin = f.password("ADMIN_PASSWORD").await;
    let mut c = connect(addr, "moco-admin", &admin).await.unwrap();
    let n: Option<u64> = c
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (name,),
        )
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    n.unwrap_or(0) > 0
}

/// The user's grants work and stop where they end.
async fn check_grants(f: &ClusteredNamespace, password: &str) {
    let primary = f.primary_index().await.unwrap();
    let addr = f.addr(primary).await.unwrap();
    let mut c = connect(addr, "app", password).await.unwrap();
    c.query_drop("CREATE TABLE IF NOT EXISTS appdb.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    c.query_drop("REPLACE INTO appdb.t VALUES (1)")
        .await
        .unwrap();
    let n: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM appdb.t WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(n, Some(1));
    let refused = c.query_drop("DROP TABLE appdb.t").await.unwrap_err();
    assert!(
        matches!(&refused, mysql_async::Error::Server(e) if e.code == 1142),
        "DROP not granted: {refused}"
    );
    let refused = c.query_drop("CREATE DATABASE other").await.unwrap_err();
    assert!(
        matches!(&refused, mysql_async::Error::Server(e) if e.code == 1044),
        "no rights beyond appdb: {refused}"
    );
    c.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn declared_users_and_databases_are_kept_across_password_changes_drift_and_a_failover() {
    let Some(f) = setup("acc_users", 3).await else {
        return;
    };
    f.wait_healthy("bring-up", BRING_UP).await;
    declare(&f, "first-pw", "Delete");
    when("the database Ready", APPLIED, || async {
        database_ready(&f, "appdb")
            .await
            .is_some_and(|(s, _)| s == "True")
    })
    .await;
    when("the users Ready", APPLIED, || async {
        user_ready(&f, "app")
            .await
            .is_some_and(|(s, _)| s == "True")
            && user_ready(&f, "reader")
                .await
                .is_some_and(|(s, _)| s == "True")
    })
    .await;
    assert!(logs_in(&f, "app", "first-pw").await);
    check_grants(&f, "first-pw").await;
    // metadata.name is the account name when spec.name is unset.
    assert!(logs_in(&f, "reader", "first-pw").await);

    // A new password in the Secret: the old one refused, the new one accepted.
    let t = std::time::Instant::now();
    f.cp.apply(
        &f.ns,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: app-password}\nstringData: {password: second-pw}\n",
    );
    when("the new password accepted", APPLIED, || async {
        logs_in(&f, "app", "second-pw").await
    })
    .await;
    println!("{}: new password applied after {:?}", f.ns, t.elapsed());
    assert!(
        !logs_in(&f, "app", "first-pw").await,
        "the old password is refused"
    );
    // Both users have recorded the Secret they applied: a drift from now on is one.
    let secrets: Api<Secret> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let version = secrets
        .get("app-password")
        .await
        .unwrap()
        .metadata
        .resource_version;
    when("both users on the new Secret", APPLIED, || async {
        let mut both = true;
        for name in ["app", "reader"] {
            let u: Option<MySQLUser> = f.get(name).await;
            both &= u
                .and_then(|u| u.status)
                .is_some_and(|s| s.password_secret_resource_version == version);
        }
        both
    })
    .await;

    // By hand: the account dropped, a grant of the other revoked. Both put back.
    as_admin(&f, "DROP USER 'app'@'%'").await;
    as_admin(&f, "REVOKE SELECT ON `appdb`.* FROM 'reader'@'%'").await;
    // (No check that the login fails in between: a step woken by the Secret's change may
    // already be putting the account back.)
    when("the dropped account back", APPLIED, || async {
        logs_in(&f, "app", "second-pw").await
    })
    .await;
    check_grants(&f, "second-pw").await;
    when("both repairs reported", APPLIED, || async {
        f.event_notes("MySQLUser", "DriftRepaired").await.len() >= 2
    })
    .await;
    let repaired = f.event_notes("MySQLUser", "DriftRepaired").await;
    println!("{}: {repaired:?}", f.ns);
    assert!(
        repaired
            .iter()
            .any(|n| n.contains("'reader'@'%'") && n.contains("granted SELECT on `appdb`.*")),
        "{repaired:?}"
    );
    assert!(
        repaired
            .iter()
            .any(|n| n.starts_with("'app'@'%'") && n.contains("put back: created")),
        "{repaired:?}"
    );

    // A failover: the primary frozen; the accounts are on the new primary by replication, and
    // a drop there is put back there.
    let old = f.primary_index().await.unwrap();
    f.annotate_pod(old, "pod-runner.moco-rs.test/freeze", Some("true"))
        .await;
    when("a new primary", CHANGE, || async {
        f.primary_index().await.is_some_and(|p| p != old)
    })
    .await;
    let new = f.primary_index().await.unwrap();
    f.annotate_pod(old, "pod-runner.moco-rs.test/freeze", None)
        .await;
    // The user logs in as soon as the new primary answers (it held the account as a
    // replica); it writes once the manager has made it writable.
    when("the user writing on the new primary", APPLIED, || async {
        let Some(addr) = f.addr(new).await else {
            return false;
        };
        let Ok(mut c) = connect(addr, "app", "second-pw").await else {
            return false;
        };
        let wrote = c
            .query_drop("REPLACE INTO appdb.t VALUES (2)")
            .await
            .is_ok();
        let _ = c.disconnect().await;
        wrote
    })
    .await;
    check_grants(&f, "second-pw").await;
    as_admin(&f, "DROP USER 'reader'@'%'").await;
    when(
        "the dropped account back on the new primary",
        APPLIED,
        || async { logs_in(&f, "reader", "second-pw").await },
    )
    .await;
    assert_eq!(f.primary_index().await, Some(new));
    assert_eq!(
        user_ready(&f, "app").await.map(|(s, _)| s).as_deref(),
        Some("True")
    );

    // The API server refuses a changed clusterName (CEL), naming the field.
    let out = f.cp.kubectl(
        &[
            "-n",
            &f.ns,
            "patch",
            "mysqluser",
            "app",
            "--type=merge",
            "-p",
            r#"{"spec":{"clusterName":"other"}}"#,
        ],
        None,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("clusterName is immutable"), "{err}");

    // Why not: a Secret that does not exist yet, then made; a privilege MariaDB does not
    // know (MySQL's FLUSH_STATUS: admission cannot tell the flavour, the server answers).
    // And a cluster that does not exist, and one that is offline (never Available).
    let mut sleeping = mariadb_cluster(&f.ns, 1, "1Gi");
    sleeping["metadata"]["name"] = serde_json::json!("sleeping");
    sleeping["spec"]["offline"] = serde_json::json!(true);
    f.cp.apply(&f.ns, &sleeping.to_string());
    // An account made by hand: a declaration of it leaves it alone (Exists).
    as_admin(&f, "CREATE USER 'handmade'@'%' IDENTIFIED BY 'its-own'").await;
    f.cp.apply(
        &f.ns,
        &[
            user_yaml(NAME, "late", "late-password", "SELECT", "appdb.*"),
            user_yaml(NAME, "odd", "app-password", "FLUSH_STATUS", "*.*"),
            // A second declaration of app, with another password: the older keeps it.
            user_yaml(NAME, "twin", "late-password", "SELECT", "appdb.*")
                + "  name: app\n  deletionPolicy: Delete\n",
            user_yaml("nosuch", "lost", "app-password", "SELECT", "appdb.*"),
            user_yaml("sleeping", "asleep", "app-password", "SELECT", "appdb.*"),
            // Objects the webhook would refuse, admitted here because no webhook is
            // registered (as when its configuration is deleted): the controller runs the
            // same rules before any SQL.
            user_yaml(NAME, "imposter", "app-password", "SELECT", "appdb.*")
                + "  name: moco-admin\n  deletionPolicy: Delete\n",
            user_yaml(NAME, "handmade", "app-password", "SELECT", "appdb.*")
                + "  deletionPolicy: Delete\n",
            format!(
                "apiVersion: moco-rs.io/v1alpha1\nkind: MySQLDatabase\nmetadata: {{name: grant-tables}}\n\
                 spec: {{clusterName: {NAME}, name: mysql, deletionPolicy: Delete}}\n"
            ),
        ]
        .join("---\n"),
    );
    when("grant-tables not Ready: Invalid", APPLIED, || async {
        database_ready(&f, "grant-tables")
            .await
            .is_some_and(|(s, r)| s == "False" && r == "Invalid")
    })
    .await;
    for (name, reason, words) in [
        (
            "late",
            "SecretMissing",
            "spec.passwordSecretKeyRef.name: Secret late-password does not exist",
        ),
        ("odd", "UnknownPrivilege", "spec.grants"),
        (
            "lost",
            "ClusterNotFound",
            "no MySQLCluster nosuch in namespace",
        ),
        (
            "asleep",
            "ClusterNotAvailable",
            "MySQLCluster sleeping is not Available",
        ),
        (
            "twin",
            "Conflict",
            "MySQLUser app already declares 'app'@'%' on MySQLCluster db; it keeps it",
        ),
        (
            "imposter",
            "Invalid",
            "spec.name: \"moco-admin\" is one of MOCO's own accounts",
        ),
        (
            "handmade",
            "Exists",
            "'handmade'@'%' already exists on MySQLCluster db and this MySQLUser did not create it",
        ),
    ] {
        // The reason may come first with an earlier message (an offline cluster is "has no
        // Available condition yet" until its status says Offline): wait for the words too.
        when(&format!("{name} not Ready: {reason}"), APPLIED, || async {
            let u: Option<MySQLUser> = f.get(name).await;
            let conditions = u.and_then(|u| u.status).map(|s| s.conditions);
            conditions.is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "Ready"
                        && c.status == "False"
                        && c.reason == reason
                        && c.message.contains(words)
                })
            })
        })
        .await;
        let u: MySQLUser = f.get(name).await.unwrap();
        let status = u.status.unwrap_or_default();
        let message = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.message.clone())
            .unwrap_or_default();
        println!("{}: {name}: {reason}: {message}", f.ns);
        assert!(message.contains(words), "{name}: {message}");
    }
    f.cp.apply(
        &f.ns,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: late-password}\nstringData: {password: late-pw}\n",
    );
    when("late Ready once its Secret exists", APPLIED, || async {
        user_ready(&f, "late")
            .await
            .is_some_and(|(s, r)| s == "True" && r == "Applied")
    })
    .await;
    assert!(logs_in(&f, "late", "late-pw").await);
    // The conflicting twin changed nothing, and its deletion (policy Delete) drops nothing.
    assert!(
        logs_in(&f, "app", "second-pw").await,
        "the twin's password applied"
    );
    let users: Api<MySQLUser> = Api::namespaced(f.cp.client.clone(), &f.ns);
    users
        .delete("twin", &DeleteParams::default())
        .await
        .unwrap();
    f.wait_gone::<MySQLUser>("MySQLUser", "twin").await;
    assert!(
        logs_in(&f, "app", "second-pw").await,
        "deleting the conflicting twin dropped app"
    );

    // The invalid objects changed nothing, and their deletion (policy Delete) drops nothing:
    // MOCO's admin still works, the grant tables are still there.
    let databases: Api<MySQLDatabase> = Api::namespaced(f.cp.client.clone(), &f.ns);
    users
        .delete("imposter", &DeleteParams::default())
        .await
        .unwrap();
    users
        .delete("handmade", &DeleteParams::default())
        .await
        .unwrap();
    f.wait_gone::<MySQLUser>("MySQLUser", "handmade").await;
    assert!(
        logs_in(&f, "handmade", "its-own").await,
        "a declaration that never held the account changed or dropped it"
    );
    databases
        .delete("grant-tables", &DeleteParams::default())
        .await
        .unwrap();
    f.wait_gone::<MySQLUser>("MySQLUser", "imposter").await;
    f.wait_gone::<MySQLDatabase>("MySQLDatabase", "grant-tables")
        .await;
    assert!(
        has_database(&f, "mysql").await,
        "an invalid object dropped mysql"
    );
    as_admin(&f, "SELECT 1").await;
    f.wait_healthy("after the invalid objects", APPLIED).await;

    // Deletion: Delete drops app and appdb; Retain (reader's default) keeps reader.
    for name in ["app", "reader"] {
        users.delete(name, &DeleteParams::default()).await.unwrap();
    }
    databases
        .delete("appdb", &DeleteParams::default())
        .await
        .unwrap();
    f.wait_gone::<MySQLUser>("MySQLUser", "app").await;
    f.wait_gone::<MySQLUser>("MySQLUser", "reader").await;
    f.wait_gone::<MySQLDatabase>("MySQLDatabase", "appdb").await;
    assert!(!has_account(&f, "app").await, "Delete drops the account");
    assert!(has_account(&f, "reader").await, "Retain keeps the account");
    assert!(
        !has_database(&f, "appdb").await,
        "Delete drops the database"
    );
}

/// What one measuring window saw.
struct Window {
    /// kube-apiserver's `apiserver_request_total` over the window, by (verb, resource).
    requests: std::collections::BTreeMap<(String, String), f64>,
    /// The primary's `Connections` and `Questions` over the window.
    connections: u64,
    questions: u64,
    /// The operator's CPU over the window (seconds) and resident memory at its end (KiB).
    cpu: Option<f64>,
    rss_kib: Option<u64>,
}

/// `apiserver_request_total` summed by (verb, resource).
async fn api_requests(f: &ClusteredNamespace) -> std::collections::BTreeMap<(String, String), f64> {
    let request = hyper::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = f.on.cp.client.request_text(request).await.unwrap();
    let mut out = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |name: &str| {
            let start = line.find(&format!("{name}=\""))? + name.len() + 2;
            let end = line[start..].find('"')? + start;
            Some(line[start..end].to_owned())
        };
        let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        let key = (
            label("verb").unwrap_or_default(),
            label("resource").unwrap_or_default(),
        );
        *out.entry(key).or_default() += value;
    }
    out
}

/// The primary's global status counter `name`.
async fn status_counter(f: &ClusteredNamespace, name: &str) -> u64 {
    let primary = f.primary_index().await.unwrap();
    let addr = f.addr(primary).await.unwrap();
    let admin = f.password("ADMIN_PASSWORD").await;
    let mut c = connect(addr, "moco-admin", &admin).await.unwrap();
    let row: Option<(String, u64)> = c
        .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    row.unwrap().1
}

/// A process's user + system CPU (seconds) and resident memory (KiB), from `/proc`.
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 per second).
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    (ticks as f64 / 100.0, rss)
}

impl Window {
    async fn measure(f: &ClusteredNamespace, pid: Option<u32>, length: Duration) -> Window {
        let requests = api_requests(f).await;
        let connections = status_counter(f, "Connections").await;
        let questions = status_counter(f, "Questions").await;
        let cpu = pid.map(|p| usage(p).0);
        tokio::time::sleep(length).await;
        let after = api_requests(f).await;
        Window {
            requests: after
                .into_iter()
                .map(|(k, v)| {
                    let d = v - requests.get(&k).copied().unwrap_or(0.0);
                    (k, d)
                })
                .filter(|(_, d)| *d > 0.0)
                .collect(),
            // Less the one connection (and two statements) of each reading.
            connections: status_counter(f, "Connections").await - connections - 2,
            questions: status_counter(f, "Questions").await - questions - 2,
            cpu: pid.zip(cpu).map(|(p, c)| usage(p).0 - c),
            rss_kib: pid.map(|p| usage(p).1),
        }
    }
}

/// Benchmark (ignored by `cargo test`; `cargo test -p moco-tests --test integration
/// kube_accounts::bench -- --ignored --nocapture` with `MOCO_KUBE_DIR`; `BENCH_USERS` users,
/// 1,000 unless set, `BENCH_WINDOW_SECS` a window, 120 unless set): that many MySQLUsers, each
/// with its own password Secret, on one single-instance cluster. Prints the time to have all
/// `Ready`, then over one window with the operator and one after it is stopped (the baseline:
/// the control plane's other clients, the readings): the operator's CPU and memory, the
/// primary's new connections and statements per minute, and the API requests per minute by
/// verb and resource. Numbers in `docs/benchmarks.md`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: run by hand, numbers in docs/benchmarks.md"]
async fn bench_many_users_on_one_cluster() {
    use futures::StreamExt;
    let count: usize = std::env::var("BENCH_USERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let window = Duration::from_secs(
        std::env::var("BENCH_WINDOW_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    );
    let Some(mut f) = setup_as_moco("acc_bench", 1, |o| o).await else {
        return;
    };
    f.wait_healthy("bring-up", BRING_UP).await;
    let pid = f.on.host.pid().unwrap();
    let idle = usage(pid);
    let secrets: Api<Secret> = Api::namespaced(f.on.cp.client.clone(), &f.ns);
    let users: Api<MySQLUser> = Api::namespaced(f.on.cp.client.clone(), &f.ns);
    let started = std::time::Instant::now();
    futures::stream::iter(0..count)
        .for_each_concurrent(16, |i| {
            let (secrets, users) = (secrets.clone(), users.clone());
            async move {
                let secret: Secret = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("bench-{i}")},
                    "stringData": {"password": format!("Bench-password-{i}")},
                }))
                .unwrap();
                secrets.create(&Default::default(), &secret).await.unwrap();
                let user: MySQLUser = serde_json::from_value(serde_json::json!({
                    "apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLUser",
                    "metadata": {"name": format!("bench-{i}")},
                    "spec": {"clusterName": NAME,
                        "passwordSecretKeyRef": {"name": format!("bench-{i}"), "key": "password"},
                        "grants": [{"privileges": ["SELECT", "INSERT"], "on": format!("app{}.*", i % 10)}]},
                }))
                .unwrap();
                users.create(&Default::default(), &user).await.unwrap();
            }
        })
        .await;
    let created = started.elapsed();
    let all_ready = || async {
        let Ok(list) = users.list(&Default::default()).await else {
            return false;
        };
        let ready = list
            .items
            .iter()
            .filter(|u| {
                ready(u.status.as_ref().map(|s| &s.conditions))
                    == Some(("True".into(), "Applied".into()))
            })
            .count();
        ready == count
    };
    when(
        &format!("{count} MySQLUsers Ready"),
        Duration::from_secs(3600),
        all_ready,
    )
    .await;
    let ready_after = started.elapsed();
    let during = usage(pid);
    let with = Window::measure(&f, Some(pid), window).await;
    assert!(all_ready().await, "every user stays Ready");
    f.on.host.stop();
    let without = Window::measure(&f, None, window).await;
    let per_minute = |n: f64| n * 60.0 / window.as_secs_f64();
    println!(
        "{count} MySQLUsers: created in {:.1} s, all Ready {:.1} s after the first; operator CPU \
         while they were made Ready {:.1} s",
        created.as_secs_f64(),
        ready_after.as_secs_f64(),
        during.0 - idle.0
    );
    println!(
        "operator at rest before: RSS {} KiB; over the {} s window: CPU {:.3} cores, RSS {} KiB",
        idle.1,
        window.as_secs(),
        with.cpu.unwrap() / window.as_secs_f64(),
        with.rss_kib.unwrap()
    );
    println!(
        "primary, per minute: {:.0} connections ({:.0} without the operator), {:.0} statements \
         ({:.0} without)",
        per_minute(with.connections as f64),
        per_minute(without.connections as f64),
        per_minute(with.questions as f64),
        per_minute(without.questions as f64),
    );
    println!("| verb | resource | requests per minute, with the operator | without |");
    println!("|---|---|---|---|");
    let keys: std::collections::BTreeSet<_> = with
        .requests
        .keys()
        .chain(without.requests.keys())
        .collect();
    for key in keys {
        let w = with.requests.get(key).copied().unwrap_or(0.0);
        let o = without.requests.get(key).copied().unwrap_or(0.0);
        if per_minute(w) >= 0.5 || per_minute(o) >= 0.5 {
            println!(
                "| {} | {} | {:.1} | {:.1} |",
                key.0,
                key.1,
                per_minute(w),
                per_minute(o)
            );
        }
    }
}
