//! Re-keying a restored copy (`moco_adapters::instance::rekey`) against a real server, both
//! ways it runs: in a session of a server started without grant tables (`moco init` on
//! Kubernetes), and as the `--init-file` of the copy's first start (`moco local restore`).
//!
//! The copy holds the source cluster's `mysql` schema. Its users may have made more accounts
//! than MOCO's eight (`moco-writable` holds `CREATE USER`): another host of a MOCO account
//! name (`'moco-admin'@'localhost'`) or an anonymous account is more specific than
//! `'moco-admin'@'%'` and wins at login, with the source's password (issue 29).

use crate::support;

use std::time::Duration;

use moco_adapters::instance::accounts::{FreshServer, create_accounts};
use moco_adapters::instance::rekey::{rekey_accounts, rekey_init_file};
use moco_adapters::mysql::MysqlInstance;
use moco_adapters::mysqld::{LocalMysqld, ServerKind};
use moco_cluster::ports::MysqlPort as _;
use moco_core::moco_accounts::{Account, MocoPasswords};
use mysql_async::prelude::Queryable;
use support::{Fleet, READY_TIMEOUT, STOP_GRACE, server_binary, tcp_options};

const BOOT: Duration = Duration::from_secs(120);
/// The password the source's users gave their extra accounts.
const KNOWN: &str = "known-to-the-source";

fn socket(m: &LocalMysqld) -> std::path::PathBuf {
    m.settings()
        .socket
        .clone()
        .expect("test my.cnf sets socket")
}

/// `user`/`password` on the socket, as the agent logs in; the server's error code if refused.
async fn on_socket(m: &LocalMysqld, user: &str, password: &str) -> Result<(), u16> {
    let opts = mysql_async::OptsBuilder::default()
        .socket(Some(socket(m).display().to_string()))
        .user(Some(user))
        .pass(Some(password));
    match tokio::time::timeout(Duration::from_secs(20), mysql_async::Conn::new(opts))
        .await
        .expect("connect within 20 s")
    {
        Ok(c) => {
            let _ = c.disconnect().await;
            Ok(())
        }
        Err(e) => Err(support::server_code(&e).unwrap_or(0)),
    }
}

/// The source's users add accounts that must not survive (or win) in the copy, and two that
/// stay: an application's, and a privileged one to be reported.
async fn add_source_accounts(admin: &MysqlInstance) {
    admin.set_writable().await.unwrap();
    let mut c = admin.conn().await.unwrap();
    for statement in [
        format!("CREATE OR REPLACE USER 'moco-admin'@'localhost' IDENTIFIED BY '{KNOWN}'"),
        "GRANT PROCESS ON *.* TO 'moco-admin'@'localhost'".to_owned(),
        format!("CREATE OR REPLACE USER 'moco-agent'@'127.0.0.1' IDENTIFIED BY '{KNOWN}'"),
        format!("CREATE OR REPLACE USER 'moco-writable'@'10.%' IDENTIFIED BY '{KNOWN}'"),
        format!("CREATE OR REPLACE USER ''@'localhost' IDENTIFIED BY '{KNOWN}'"),
        format!("CREATE OR REPLACE USER 'ops'@'%' IDENTIFIED BY '{KNOWN}'"),
        "GRANT PROCESS, RELOAD ON *.* TO 'ops'@'%'".to_owned(),
        format!("CREATE OR REPLACE USER 'app'@'%' IDENTIFIED BY '{KNOWN}'"),
        "GRANT SELECT ON app.* TO 'app'@'%'".to_owned(),
    ] {
        c.query_drop(&statement)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

/// The accounts of the copy, `'user'@'host'`, roles aside.
async fn accounts(m: &LocalMysqld, pw: &MocoPasswords) -> Vec<String> {
    let admin = MysqlInstance::new(tcp_options(m, "copy", Account::Admin.name(), &pw.admin));
    let mut c = admin.conn().await.unwrap();
    let rows: Vec<(String, String)> = c
        .query("SELECT User, Host FROM mysql.user WHERE is_role = 'N' ORDER BY User, Host")
        .await
        .unwrap();
    drop(c);
    admin.disconnect().await.unwrap();
    rows.into_iter()
        .map(|(u, h)| format!("'{u}'@'{h}'"))
        .collect()
}

/// After re-keying: this cluster's passwords let MOCO's accounts in on the socket (where a
/// `localhost` account would win); the source's passwords let nothing in; the copy holds
/// MOCO's accounts on `%` only, no anonymous one, the users' own accounts and MariaDB's
/// (locked) `mariadb.sys`.
async fn check_rekeyed(m: &LocalMysqld, source: &MocoPasswords, target: &MocoPasswords) {
    for account in Account::ALL {
        let name = account.name();
        assert_eq!(
            on_socket(m, name, target.get(account)).await,
            Ok(()),
            "{name}"
        );
        assert!(
            on_socket(m, name, source.get(account)).await.is_err(),
            "{name}"
        );
        assert!(on_socket(m, name, KNOWN).await.is_err(), "{name}");
    }
    assert!(on_socket(m, "nobody", KNOWN).await.is_err(), "anonymous");
    let all = accounts(m, target).await;
    let mut expected: Vec<String> = Account::ALL
        .iter()
        .map(|a| format!("'{}'@'%'", a.name()))
        .chain(["'app'@'%'", "'ops'@'%'", "'mariadb.sys'@'localhost'"].map(str::to_owned))
        .collect();
    expected.sort();
    assert_eq!(all, expected);
}

async fn restart_with(m: &LocalMysqld, args: &[String]) {
    m.stop(STOP_GRACE).await.unwrap();
    m.start(args).unwrap();
}

fn fresh(m: &LocalMysqld) -> FreshServer {
    FreshServer {
        name: "source".into(),
        host: m.host(),
        port: m.port(),
        socket: socket(m),
        connect_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(60),
        tls: None,
    }
}

/// Regression (issue 29): only `'<account>'@'%'` got this cluster's password; another host
/// of a MOCO account (`'moco-admin'@'localhost'`, `'moco-agent'@'127.0.0.1'`) and an
/// anonymous `''@'localhost'` kept the source's and won at login on the socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rekeying_drops_the_other_hosts_of_mocos_accounts_both_ways() {
    let test = "rekeying_drops_the_other_hosts_of_mocos_accounts_both_ways";
    let Some(binary) = server_binary(test) else {
        return;
    };
    if binary.kind() != ServerKind::Mariadb {
        eprintln!("{test}: a physical copy (and so its re-keying) is MariaDB's; skipped");
        return;
    }
    let fleet = Fleet::start(binary, 1).await;
    let m = &fleet.nodes[0];
    let source = moco_adapters::mysql::generate_passwords().unwrap();
    let target = moco_adapters::mysql::generate_passwords().unwrap();
    create_accounts(&fresh(m), &source).await.unwrap();
    let admin = MysqlInstance::new(tcp_options(
        m,
        "source",
        Account::Admin.name(),
        &source.admin,
    ));
    add_source_accounts(&admin).await;
    admin.disconnect().await.unwrap();
    // Before: the source's extra account wins over 'moco-admin'@'%' on the socket.
    assert_eq!(on_socket(m, "moco-admin", KNOWN).await, Ok(()));

    // moco init: a server without grant tables, then the session's statements.
    restart_with(
        m,
        &[
            "--skip-grant-tables".to_owned(),
            "--skip-networking".to_owned(),
            "--skip-log-bin".to_owned(),
        ],
    )
    .await;
    let rekeyed = rekey_accounts(&socket(m), &target, BOOT).await.unwrap();
    assert_eq!(
        rekeyed.dropped,
        [
            "''@'localhost'",
            "'moco-admin'@'localhost'",
            "'moco-agent'@'127.0.0.1'",
            "'moco-writable'@'10.%'",
        ]
    );
    // The users' own accounts stay; the one with global privileges is reported.
    assert_eq!(rekeyed.privileged, ["'ops'@'%': RELOAD, PROCESS"]);
    m.stop(STOP_GRACE).await.unwrap();
    m.start_and_wait(&[], READY_TIMEOUT).await.unwrap();
    check_rekeyed(m, &source, &target).await;

    // moco local restore: the same statements as the init file of the copy's first start.
    let admin = MysqlInstance::new(tcp_options(m, "copy", Account::Admin.name(), &target.admin));
    add_source_accounts(&admin).await;
    admin.disconnect().await.unwrap();
    let again = moco_adapters::mysql::generate_passwords().unwrap();
    let file = fleet.dir().join("rekey.sql");
    std::fs::write(&file, rekey_init_file(&again)).unwrap();
    restart_with(m, &[format!("--init-file={}", file.display())]).await;
    m.wait_ready(READY_TIMEOUT).await.unwrap();
    check_rekeyed(m, &target, &again).await;
    fleet.stop().await;
}
