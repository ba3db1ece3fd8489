//! A MySQLCluster Pod on this machine, for the tests of `moco init` and `moco agent`: the
//! volumes are directories of a temporary directory, the mysqld container is a real server
//! started from the my.cnf the operator renders (with the paths moved into the directory),
//! and the init container is the `moco` binary run under MOCO's name, `moco-init`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use moco_adapters::mysqld::{LocalMysqld, ServerBinary, ServerKind, free_ports, running_as_root};
use moco_core::facts::Flavor;
use moco_core::resources::mycnf::{MycnfInput, MycnfPaths, MysqlLine, generate_mycnf};

use crate::local::moco_bin;

/// Limits for starting and stopping servers on 2 busy cores.
pub const READY: Duration = Duration::from_secs(120);
/// SIGTERM grace when stopping a server.
pub const GRACE: Duration = Duration::from_secs(60);

/// One Pod's directories and its mysqld.
#[derive(Debug)]
pub struct TestPod {
    /// The Pod's name (`moco-db-<ordinal>`).
    pub name: String,
    /// The directory holding everything.
    pub dir: PathBuf,
    /// The mysqld container.
    pub mysqld: LocalMysqld,
    /// The SQL port.
    pub port: u16,
    /// With TLS, the CA that verifies the server (its my.cnf then requires TLS).
    pub tls_ca: Option<Vec<u8>>,
}

/// What [`write_mysql_tls`] wrote: the files of `/mysql-tls` in a Pod with TLS.
#[derive(Debug, Clone)]
pub struct MysqlTlsFiles {
    /// The directory (`ca.crt`, `tls.crt`, `tls.key`), as cert-manager's Secret holds them.
    pub dir: PathBuf,
    /// The CA, PEM.
    pub ca_pem: Vec<u8>,
}

impl MysqlTlsFiles {
    /// `<dir>/ca.crt`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// Replaces the server's certificate and key with ones of the same CA for `names` only,
    /// as a renewal would (a name other than 127.0.0.1 shows which one the server presents).
    pub fn reissue(&self, names: &[&str]) {
        let read = |name: &str| {
            std::fs::read_to_string(self.dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let ca = moco_adapters::mysql::tls::Authority::load(
            "test MySQL CA",
            &read("ca.crt"),
            &read("ca.key"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let issued = ca.issue("mysqld", &names).unwrap_or_else(|e| panic!("{e}"));
        for (name, text) in [("tls.crt", &issued.cert_pem), ("tls.key", &issued.key_pem)] {
            std::fs::write(self.dir.join(name), text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

/// A CA and a server certificate naming `127.0.0.1` and `localhost` (as the operator's
/// Certificate does) in `dir`, with the names of a cert-manager Secret.
pub fn write_mysql_tls(dir: &Path) -> MysqlTlsFiles {
    use moco_adapters::mysql::tls::Authority;
    let ca = Authority::generate("test MySQL CA").unwrap_or_else(|e| panic!("{e}"));
    let issued = ca
        .issue("mysqld", &["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for (name, text) in [
        ("ca.crt", ca.cert_pem()),
        // Kept so that a test can issue another certificate (cert-manager's part).
        ("ca.key", ca.key_pem()),
        ("tls.crt", issued.cert_pem.as_str()),
        ("tls.key", issued.key_pem.as_str()),
    ] {
        std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    MysqlTlsFiles {
        dir: dir.to_owned(),
        ca_pem: ca.cert_pem().as_bytes().to_vec(),
    }
}

impl TestPod {
    /// Pod `moco-db-<ordinal>` under `root/<ordinal>`, with the operator's my.cnf (paths and
    /// port moved here). Nothing is started.
    pub fn new(binary: &ServerBinary, root: &Path, ordinal: u32) -> TestPod {
        Self::with_tls(binary, root, ordinal, None)
    }

    /// [`TestPod::new`]; with `tls`, the server requires TLS with those files, as the
    /// operator's my.cnf of a cluster with `moco-rs/tls` says.
    pub fn with_tls(
        binary: &ServerBinary,
        root: &Path,
        ordinal: u32,
        tls: Option<&MysqlTlsFiles>,
    ) -> TestPod {
        let dir = root.join(ordinal.to_string());
        let ports = match free_ports(3) {
            Ok(p) => p,
            Err(e) => panic!("no free ports: {e}"),
        };
        let flavor = match binary.kind() {
            ServerKind::Mariadb => Flavor::Mariadb,
            ServerKind::Mysql => Flavor::Mysql,
        };
        let d = dir.display().to_string();
        let mut user_config = std::collections::BTreeMap::new();
        let mysql_line = MysqlLine::of_version(binary.version());
        // A small redo log, in the option the server knows (MySQL 9 has only the capacity).
        let redo = match (flavor, mysql_line) {
            (Flavor::Mysql, MysqlLine::Mysql9) => ("innodb_redo_log_capacity", "32M"),
            _ => ("innodb_log_file_size", "16M"),
        };
        for (k, v) in [
            redo,
            ("innodb_buffer_pool_size", "32M"),
            ("performance_schema", "OFF"),
            ("bind_address", "127.0.0.1"),
        ] {
            user_config.insert(k.to_owned(), v.to_owned());
        }
        if let Some(tls) = tls {
            let file = |name: &str| tls.dir.join(name).display().to_string();
            for (k, v) in [
                ("ssl_ca", file("ca.crt")),
                ("ssl_cert", file("tls.crt")),
                ("ssl_key", file("tls.key")),
                ("require_secure_transport", "ON".to_owned()),
            ] {
                user_config.insert(k.to_owned(), v);
            }
        }
        let input = MycnfInput {
            flavor,
            user_config,
            memory: Default::default(),
            paths: MycnfPaths {
                datadir: format!("{d}/volume/data"),
                socket: format!("{d}/run/mysqld.sock"),
                pid_file: format!("{d}/run/mysqld.pid"),
                tmpdir: format!("{d}/tmp"),
                slow_query_log_file: format!("{d}/log/mysql.slow"),
                include_dir: format!("{d}/conf.d"),
                port: ports[0],
                mysqlx_port: ports[1],
                admin_port: ports[2],
            },
            mysql_line,
        };
        let mycnf = match generate_mycnf(&input) {
            Ok(t) => t,
            Err(e) => panic!("my.cnf: {e}"),
        };
        for sub in ["volume", "run", "tmp", "log", "conf.d"] {
            if let Err(e) = std::fs::create_dir_all(dir.join(sub)) {
                panic!("create {sub}: {e}");
            }
        }
        let mysqld = match LocalMysqld::create(binary.clone(), &dir, &mycnf) {
            Ok(m) => m,
            Err(e) => panic!("mysqld: {e}"),
        };
        TestPod {
            name: format!("moco-db-{ordinal}"),
            dir,
            mysqld,
            port: ports[0],
            tls_ca: tls.map(|t| t.ca_pem.clone()),
        }
    }

    /// The data volume (`/var/lib/mysql`).
    pub fn volume(&self) -> PathBuf {
        self.dir.join("volume")
    }

    /// The per-instance snippet directory (`/etc/mysql-conf.d`).
    pub fn conf_dir(&self) -> PathBuf {
        self.dir.join("conf.d")
    }

    /// The server's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("run").join("mysqld.sock")
    }

    /// The slow query log.
    pub fn slow_log(&self) -> PathBuf {
        self.dir.join("log").join("mysql.slow")
    }

    /// Runs the init container: the `moco` binary under the name `moco-init`, with MOCO's
    /// command line and `extra` flags before the server-id base.
    pub fn run_init(&self, server_id_base: u32, extra: &[&str]) -> Output {
        self.run_init_with(server_id_base, extra, &[])
    }

    /// [`TestPod::run_init`] with `env` set too (a kubeconfig).
    pub fn run_init_with(
        &self,
        server_id_base: u32,
        extra: &[&str],
        env: &[(&str, &Path)],
    ) -> Output {
        let env: Vec<(&str, String)> = env
            .iter()
            .map(|(k, v)| (*k, v.display().to_string()))
            .collect();
        self.run_init_env(server_id_base, extra, &env)
    }

    /// [`TestPod::run_init`] with the variables `env` (a cluster's passwords, as the
    /// Secret's `envFrom` gives them).
    pub fn run_init_env(
        &self,
        server_id_base: u32,
        extra: &[&str],
        env: &[(&str, String)],
    ) -> Output {
        let alias = self.dir.join("moco-init");
        if !alias.exists()
            && let Err(e) = std::os::unix::fs::symlink(moco_bin(), &alias)
        {
            panic!("link moco-init: {e}");
        }
        let mut cmd = Command::new(&alias);
        cmd.arg(format!("--data-dir={}", self.volume().display()))
            .arg(format!("--conf-dir={}", self.conf_dir().display()))
            .args(extra)
            .arg(server_id_base.to_string())
            .env("POD_NAME", &self.name)
            .env("TMPDIR", self.dir.join("tmp"))
            // No kubeconfig of the machine: only the one a test gives.
            .env("KUBECONFIG", self.dir.join("no-kubeconfig"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        match cmd.output() {
            Ok(o) => o,
            Err(e) => panic!("run moco-init: {e}"),
        }
    }

    /// The init container with server-id base `base` (it must succeed), then the mysqld
    /// container.
    pub async fn init_and_start(&self, base: u32) {
        let out = self.run_init(base, &[]);
        assert!(
            out.status.success(),
            "{}: moco-init: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        self.start().await;
    }

    /// A connection as `moco-admin` over TCP (once the agent or the test created the
    /// accounts with [`test_passwords`]).
    pub async fn admin(&self) -> mysql_async::Conn {
        let password = test_password(moco_core::moco_accounts::Account::Admin);
        let opts = match &self.tls_ca {
            Some(ca) => crate::local::tls_opts(self.port, "moco-admin", &password, ca.clone()),
            None => crate::local::opts(self.port, "moco-admin", &password),
        };
        match crate::local::connect(&opts, Duration::from_secs(10)).await {
            Ok(c) => c,
            Err(e) => panic!("{}: moco-admin: {e}", self.name),
        }
    }

    /// Starts the mysqld container (as root on test machines, which mysqld needs to be told).
    pub async fn start(&self) {
        let args: Vec<String> = if running_as_root() {
            vec!["--user=root".to_owned()]
        } else {
            Vec::new()
        };
        if let Err(e) = self.mysqld.start_and_wait(&args, READY).await {
            panic!("{}: start mysqld: {e}", self.name);
        }
    }

    /// Stops the mysqld container.
    pub async fn stop(&self) {
        if let Err(e) = self.mysqld.stop(GRACE).await {
            panic!("{}: stop mysqld: {e}", self.name);
        }
    }
}

impl Drop for TestPod {
    fn drop(&mut self) {
        if let Some(pid) = self
            .mysqld
            .running_pid()
            .and_then(|p| rustix::process::Pid::from_raw(i32::try_from(p).ok()?))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Root over the server's socket without a password, as a fresh datadir allows.
pub async fn root_on_socket(socket: &Path) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::default()
        .user(Some("root"))
        .socket(Some(socket.to_string_lossy().into_owned()));
    match mysql_async::Conn::new(opts).await {
        Ok(c) => c,
        Err(e) => panic!("root on {}: {e}", socket.display()),
    }
}

/// The passwords of the test cluster's accounts, as the Secret gives them to the agent.
pub fn test_passwords() -> Vec<(&'static str, String)> {
    moco_core::moco_accounts::Account::ALL
        .iter()
        .map(|a| (a.secret_key(), format!("pw-{}-Zq9", a.name())))
        .collect()
}

/// The password of `account` in [`test_passwords`].
pub fn test_password(account: moco_core::moco_accounts::Account) -> String {
    format!("pw-{}-Zq9", account.name())
}

/// Makes the server behind `replica` replicate from the test cluster's server on `source_port`
/// (GTID positions, `moco-repl`), and starts it.
pub async fn replicate_from(replica: &mut mysql_async::Conn, source_port: u16) {
    replicate_from_with(replica, source_port, None).await;
}

/// [`replicate_from`]; with `ca`, over TLS, verifying the source with that CA file.
pub async fn replicate_from_with(
    replica: &mut mysql_async::Conn,
    source_port: u16,
    ca: Option<&Path>,
) {
    use mysql_async::prelude::Queryable as _;
    let tls = ca.map_or_else(String::new, |ca| {
        format!(
            ", MASTER_SSL=1, MASTER_SSL_CA='{}', MASTER_SSL_VERIFY_SERVER_CERT=1",
            ca.display()
        )
    });
    let change = format!(
        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={source_port}, \
         MASTER_USER='moco-repl', MASTER_PASSWORD='{}', MASTER_USE_GTID=slave_pos{tls}",
        test_password(moco_core::moco_accounts::Account::Repl)
    );
    for statement in [change.as_str(), "START SLAVE"] {
        if let Err(e) = replica.query_drop(statement).await {
            panic!("{statement}: {e}");
        }
    }
}

/// The passwords of a second cluster's accounts (a restore's target), none equal to
/// [`test_passwords`]'.
pub fn other_passwords() -> Vec<(&'static str, String)> {
    moco_core::moco_accounts::Account::ALL
        .iter()
        .map(|a| (a.secret_key(), other_password(*a)))
        .collect()
}

/// The password of `account` in [`other_passwords`].
pub fn other_password(account: moco_core::moco_accounts::Account) -> String {
    format!("other-{}-7Kd", account.name())
}

/// A request body read from `reader` in chunks of up to 1 MiB, as a restore Job streams a
/// backup; with `fail_after`, the body ends with an error once that many bytes were sent
/// (the caller's own check of the stream failed). `.into_data_stream()` (http-body-util's
/// `BodyExt`) gives the stream [`moco_agent::client::AgentClient::restore`] takes.
#[derive(Debug)]
pub struct ReaderBody<R> {
    reader: R,
    sent: u64,
    fail_after: Option<u64>,
}

impl<R> ReaderBody<R> {
    /// The body of `reader`, failing after `fail_after` bytes when given.
    pub fn new(reader: R, fail_after: Option<u64>) -> Self {
        ReaderBody {
            reader,
            sent: 0,
            fail_after,
        }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> hyper::body::Body for ReaderBody<R> {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.fail_after.is_some_and(|limit| this.sent >= limit) {
            return Poll::Ready(Some(Err(std::io::Error::other(format!(
                "the stream failed its check after {} bytes",
                this.sent
            )))));
        }
        let mut chunk = vec![0u8; 1 << 20];
        let mut buf = tokio::io::ReadBuf::new(&mut chunk);
        match std::pin::Pin::new(&mut this.reader).poll_read(cx, &mut buf) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) if buf.filled().is_empty() => Poll::Ready(None),
            Poll::Ready(Ok(())) => {
                let filled = buf.filled();
                this.sent += filled.len() as u64;
                Poll::Ready(Some(Ok(hyper::body::Frame::data(
                    bytes::Bytes::copy_from_slice(filled),
                ))))
            }
        }
    }
}

/// A `moco agent` process beside a [`TestPod`]'s server, killed when dropped.
#[derive(Debug)]
pub struct AgentProcess {
    child: std::process::Child,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// The clone service.
    pub agent: std::net::SocketAddr,
    /// The probes.
    pub probe: std::net::SocketAddr,
    /// The metrics.
    pub metrics: std::net::SocketAddr,
    /// Its output.
    pub log: PathBuf,
}

impl AgentProcess {
    /// Starts `moco agent` for `pod` with the certificates in `certs` and `extra` flags.
    pub fn start(pod: &TestPod, certs: &Path, extra: &[&str]) -> AgentProcess {
        Self::start_with_passwords(pod, certs, extra, test_passwords())
    }

    /// [`AgentProcess::start`] for a cluster whose Secret holds `passwords` (secret key,
    /// password), e.g. [`other_passwords`].
    pub fn start_with_passwords(
        pod: &TestPod,
        certs: &Path,
        extra: &[&str],
        passwords: Vec<(&'static str, String)>,
    ) -> AgentProcess {
        let ports = match free_ports(3) {
            Ok(p) => p,
            Err(e) => panic!("no free ports: {e}"),
        };
        let addr = |p: u16| std::net::SocketAddr::from(([127, 0, 0, 1], p));
        let mut args = vec![
            "agent".to_owned(),
            format!("--address=127.0.0.1:{}", ports[0]),
            format!("--probe-address=127.0.0.1:{}", ports[1]),
            format!("--metrics-address=127.0.0.1:{}", ports[2]),
            format!("--socket-path={}", pod.socket().display()),
            format!("--grpc-cert-dir={}", certs.display()),
            format!("--mysqld-port={}", pod.port),
            format!("--data-dir={}", pod.volume().display()),
            format!("--defaults-file={}", pod.mysqld.defaults_file().display()),
            format!("--slow-log={}", pod.slow_log().display()),
            format!("--conf-dir={}", pod.conf_dir().display()),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut env = vec![
            ("POD_NAME".to_owned(), pod.name.clone()),
            ("CLUSTER_NAME".to_owned(), "db".to_owned()),
            (
                "TMPDIR".to_owned(),
                pod.dir.join("tmp").display().to_string(),
            ),
        ];
        env.extend(passwords.into_iter().map(|(k, v)| (k.to_owned(), v)));
        let log = pod.dir.join("agent.log");
        let child = spawn_agent(&args, &env, &log);
        AgentProcess {
            child,
            args,
            env,
            agent: addr(ports[0]),
            probe: addr(ports[1]),
            metrics: addr(ports[2]),
            log,
        }
    }

    /// Kills the agent and starts it again with the same flags and ports (a new Pod).
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn_agent(&self.args, &self.env, &self.log);
    }

    /// Waits up to `limit` for the agent to exit by itself; its exit status, `None` if it
    /// still runs.
    pub async fn wait_exit(
        &mut self,
        limit: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        None
    }

    /// Stops the agent (SIGKILL: the container is gone).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits until the agent serves `/healthz` and has finished its first-start check: from
    /// then on a test may write to its server.
    pub async fn wait_started(&self, limit: std::time::Duration) {
        wait_http(self.probe, "/healthz", 200, limit, || self.log_tail()).await;
        self.wait_first_start(limit).await;
    }

    /// Waits until the agent has finished its first-start check (it serves `/healthz` before:
    /// on a fresh instance the check creates the accounts and leaves the server read-only,
    /// which would undo a test's own `read_only=0` made in between).
    pub async fn wait_first_start(&self, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if text.contains("first start checked") {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the agent did not finish its first start in {limit:?}:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// The end of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

fn spawn_agent(args: &[String], env: &[(String, String)], log: &Path) -> std::process::Child {
    let out = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        Ok(f) => f,
        Err(e) => panic!("agent log: {e}"),
    };
    let mut cmd = Command::new(moco_bin());
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::null())
        .stderr(out);
    match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("start moco agent: {e}"),
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `GET path` on a plain-HTTP listener: status and body; `None` while nothing listens.
pub async fn get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await.ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Some((status, body))
}

/// Waits until `GET path` answers `status`; returns the body, or panics after `limit` with
/// the last answer and `context()`.
pub async fn wait_http(
    addr: std::net::SocketAddr,
    path: &str,
    status: u16,
    limit: Duration,
    context: impl Fn() -> String,
) -> String {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let last = get(addr, path).await;
        if let Some((s, body)) = &last
            && *s == status
        {
            return body.clone();
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "GET {path} on {addr} never answered {status} in {limit:?}; last: {last:?}\n{}",
                context()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Serves `fake` over HTTP on loopback and writes a kubeconfig for it (namespace `ns`) in
/// `dir`; returns the kubeconfig's path.
pub async fn fake_kubeconfig(
    fake: &moco_testkit::apiserver::FakeApiServer,
    dir: &Path,
    ns: &str,
) -> PathBuf {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("bind: {e}"),
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let router = fake.router();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let path = dir.join("kubeconfig");
    let text = [
        "apiVersion: v1".to_owned(),
        "kind: Config".to_owned(),
        "clusters:".to_owned(),
        "- name: fake".to_owned(),
        "  cluster:".to_owned(),
        format!("    server: http://127.0.0.1:{port}"),
        "users:".to_owned(),
        "- name: pod".to_owned(),
        "  user: {}".to_owned(),
        "contexts:".to_owned(),
        "- name: pod".to_owned(),
        "  context:".to_owned(),
        "    cluster: fake".to_owned(),
        "    user: pod".to_owned(),
        format!("    namespace: {ns}"),
        "current-context: pod".to_owned(),
    ]
    .join("\n");
    if let Err(e) = std::fs::write(&path, text) {
        panic!("write kubeconfig: {e}");
    }
    path
}

/// MOCO's passwords of the test Pods ([`test_password`]).
pub fn passwords() -> moco_core::moco_accounts::MocoPasswords {
    match moco_core::moco_accounts::MocoPasswords::try_from_fn(|a| Ok::<_, ()>(test_password(a))) {
        Ok(p) => p,
        Err(()) => panic!("the test passwords"),
    }
}

/// The moco-admin port of `pod`.
pub fn pod_admin(pod: &TestPod) -> moco_adapters::mysql::MysqlInstance {
    moco_adapters::mysql::MysqlInstance::new(moco_adapters::mysql::ConnectOptions::new(
        "127.0.0.1",
        pod.port,
        &moco_cluster::ports::Credentials {
            user: "moco-admin".into(),
            password: test_password(moco_core::moco_accounts::Account::Admin),
        },
    ))
}

/// `pod` as a backup's donor for `binary`'s `mariadb-backup` (clone-donor account, nice 0).
pub fn backup_donor(
    binary: &moco_adapters::mysqld::ServerBinary,
    pod: &TestPod,
) -> moco_adapters::instance::clone::BackupSource {
    let tool = match binary.tool("mariadb-backup") {
        Ok(t) => t,
        Err(e) => panic!("mariadb-backup beside the server: {e}"),
    };
    moco_adapters::instance::clone::BackupSource {
        tool,
        defaults_file: pod.mysqld.defaults_file().to_owned(),
        datadir: pod.volume().join("data"),
        host: "127.0.0.1".into(),
        port: pod.port,
        credentials: moco_cluster::ports::Credentials {
            user: "moco-clone-donor".into(),
            password: test_password(moco_core::moco_accounts::Account::CloneDonor),
        },
        ssl_ca: None,
        scratch_dir: pod.dir.join("backup-scratch"),
        log: pod.dir.join("backup.log"),
        nice: 0,
    }
}

/// `moco init`, start, and MOCO's accounts, as in a Pod.
pub async fn ready_pod(
    binary: &moco_adapters::mysqld::ServerBinary,
    root: &std::path::Path,
    i: u32,
) -> TestPod {
    let pod = TestPod::new(binary, root, i);
    pod.init_and_start(10).await;
    if let Err(e) = moco_adapters::instance::accounts::create_accounts(
        &moco_adapters::instance::accounts::FreshServer {
            name: pod.name.clone(),
            host: "127.0.0.1".into(),
            port: pod.port,
            socket: pod.socket(),
            connect_timeout: std::time::Duration::from_secs(10),
            call_timeout: std::time::Duration::from_secs(60),
            tls: None,
        },
        &passwords(),
    )
    .await
    {
        panic!("creating MOCO's accounts on {}: {e}", pod.name);
    }
    pod
}
