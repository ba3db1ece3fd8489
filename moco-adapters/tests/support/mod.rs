//! Helpers shared by the `mysql_*` integration tests: find a server, write a minimal my.cnf,
//! launch instances in a temporary directory and make sure they are killed afterwards.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use moco_adapters::mysqld::{LocalMysqld, MYSQLD_ENV, ServerBinary, ServerKind, free_ports};

/// Generous limits: 2 shared cores, other builds may be running.
pub(crate) const INIT_TIMEOUT: Duration = Duration::from_secs(180);
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(120);
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(60);

/// Set to `1` to skip the real-server tests on a machine without a server.
pub(crate) const SKIP_ENV: &str = "MOCO_SKIP_REAL_SERVER";

/// The server to test against; `None` (skip) only when [`SKIP_ENV`] is `1`, a failure
/// otherwise.
pub(crate) fn server_binary(test: &str) -> Option<ServerBinary> {
    match ServerBinary::find(None) {
        Ok(b) => {
            eprintln!(
                "{test}: using {} ({:?} {})",
                b.path().display(),
                b.kind(),
                b.version()
            );
            moco_testkit::ledger::record(test, &b.label());
            Some(b)
        }
        Err(e) => {
            // An explicitly named server that does not work is a failure, not a skip.
            if std::env::var_os(MYSQLD_ENV).is_some_and(|v| !v.is_empty()) {
                panic!("{MYSQLD_ENV} is set but unusable: {e}");
            }
            // Without a server the real-server tests prove nothing: fail, unless the
            // developer asked to skip them explicitly.
            if std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1") {
                eprintln!("SKIPPED {test} ({SKIP_ENV}=1): no MySQL/MariaDB server binary: {e}");
                return None;
            }
            panic!(
                "{test}: no MySQL/MariaDB server binary ({e}); install mariadb-server and \
                 mariadb-backup (scripts/test.sh does), or set {SKIP_ENV}=1 to skip"
            );
        }
    }
}

/// A minimal my.cnf for one test instance (the real generator lives in moco-core).
pub(crate) fn mycnf(kind: ServerKind, dir: &Path, port: u16, server_id: u32) -> String {
    let d = dir.display();
    let common = format!(
        "datadir={d}/data
socket={d}/mysqld.sock
pid_file={d}/mysqld.pid
log_error={d}/error.log
port={port}
bind_address=127.0.0.1
skip_name_resolve=ON
server_id={server_id}
report_host=127.0.0.1
report_port={port}
log_bin=binlog
relay_log=relay-bin
binlog_format=ROW
innodb_buffer_pool_size=32M
max_connections=60
"
    );
    match kind {
        ServerKind::Mariadb => format!(
            "[mariadbd]
{common}innodb_log_file_size=16M
log_slave_updates=ON
gtid_strict_mode=ON
read_only=ON
skip_slave_start=ON
rpl_semi_sync_master_enabled=OFF
rpl_semi_sync_slave_enabled=OFF
performance_schema=OFF
"
        ),
        ServerKind::Mysql => format!(
            "[mysqld]
{common}log_replica_updates=ON
gtid_mode=ON
enforce_gtid_consistency=ON
skip_replica_start=ON
mysqlx=OFF
performance_schema=ON
secure_file_priv=NULL
"
        ),
    }
}

/// Instances in one temporary directory, killed when dropped.
pub(crate) struct Fleet {
    pub tmp: tempfile::TempDir,
    pub binary: ServerBinary,
    pub nodes: Vec<LocalMysqld>,
}

impl Fleet {
    /// Creates, initialises and starts `n` instances (server ids 1..=n) in parallel.
    pub(crate) async fn start(binary: ServerBinary, n: usize) -> Fleet {
        let tmp = tempfile::Builder::new()
            .prefix("moco-mysql-test-")
            .tempdir()
            .unwrap();
        let ports = free_ports(n).unwrap();
        let mut nodes = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let dir = tmp.path().join(format!("node{i}"));
            let text = mycnf(binary.kind(), &dir, *port, i as u32 + 1);
            nodes.push(LocalMysqld::create(binary.clone(), &dir, &text).unwrap());
        }
        let fleet = Fleet { tmp, binary, nodes };
        let t = Instant::now();
        futures_join(fleet.nodes.iter().map(|m| async move {
            assert!(m.initialize(INIT_TIMEOUT).await.unwrap());
        }))
        .await;
        let init = t.elapsed();
        let t = Instant::now();
        futures_join(fleet.nodes.iter().map(|m| async move {
            m.start_and_wait(&[], READY_TIMEOUT).await.unwrap();
        }))
        .await;
        eprintln!(
            "started {n} instance(s): initialise {:?}, start to ready {:?}",
            init,
            t.elapsed()
        );
        fleet
    }

    pub(crate) fn dir(&self) -> PathBuf {
        self.tmp.path().to_owned()
    }

    /// Stops every instance cleanly.
    pub(crate) async fn stop(&self) {
        for m in &self.nodes {
            m.stop(STOP_GRACE).await.unwrap();
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // Tests that fail mid-way still must not leave servers behind.
        for m in &self.nodes {
            if let Some(pid) = m.running_pid() {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
    }
}

/// Runs futures concurrently on the current task.
pub(crate) async fn futures_join<F: std::future::Future<Output = ()>>(
    futs: impl Iterator<Item = F>,
) {
    let handles: Vec<_> = futs.collect();
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = handles.into_iter().map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        pinned.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if pinned.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

/// Polls `check` until it returns `Some`, failing with `what` after `limit`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Root without a password on the instance's socket: the bootstrap login of a fresh datadir.
pub(crate) fn bootstrap_options(
    m: &LocalMysqld,
    name: &str,
) -> moco_adapters::mysql::ConnectOptions {
    let root = moco_cluster::ports::Credentials {
        user: "root".into(),
        password: String::new(),
    };
    moco_adapters::mysql::ConnectOptions::new(m.host(), m.port(), &root)
        .with_name(name.to_owned())
        .with_socket(
            m.settings()
                .socket
                .clone()
                .expect("test my.cnf sets socket"),
        )
        .with_timeouts(Duration::from_secs(20), Duration::from_secs(60))
}

/// `user` over TCP, the way the manager and applications connect.
pub(crate) fn tcp_options(
    m: &LocalMysqld,
    name: &str,
    user: &str,
    password: &str,
) -> moco_adapters::mysql::ConnectOptions {
    let creds = moco_cluster::ports::Credentials {
        user: user.into(),
        password: password.into(),
    };
    moco_adapters::mysql::ConnectOptions::new(m.host(), m.port(), &creds)
        .with_name(name.to_owned())
        .with_timeouts(Duration::from_secs(20), Duration::from_secs(60))
}

/// A plain client connection (not pooled) over TCP.
pub(crate) async fn client(m: &LocalMysqld, user: &str, password: &str) -> mysql_async::Conn {
    try_client(m, user, password).await.unwrap()
}

/// Like [`client`], returning the error.
pub(crate) async fn try_client(
    m: &LocalMysqld,
    user: &str,
    password: &str,
) -> Result<mysql_async::Conn, mysql_async::Error> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(m.host())
        .tcp_port(m.port())
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false);
    tokio::time::timeout(Duration::from_secs(20), mysql_async::Conn::new(opts))
        .await
        .expect("connect within 20 s")
}

/// The server error code of a failed statement, if it was a server error.
pub(crate) fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}
