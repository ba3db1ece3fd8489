//! Helpers for the `moco local` end-to-end tests: locating (and building) the `moco` binary,
//! finding a server, clusters in temporary directories that are always torn down, a writer
//! that records acknowledged rows, and condition waits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde_json::Value;
use tokio::sync::watch;

/// `command` without what cargo and the test runner put in a test's environment, as a user's
/// shell would run it. A build from a test otherwise sees the test's `CARGO_MANIFEST_DIR`, and
/// ring's build script (`rerun-if-env-changed`) makes cargo rebuild it and everything above
/// it — minutes, and again for the next build from a shell.
pub fn without_test_env(command: &mut Command) -> &mut Command {
    const KEPT: [&str; 4] = [
        "CARGO_HOME",
        "CARGO_TARGET_DIR",
        "CARGO_INCREMENTAL",
        "CARGO_TERM_COLOR",
    ];
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if (name.starts_with("CARGO") && !KEPT.contains(&name.as_str()))
            || name.starts_with("NEXTEST")
            || name.starts_with("RUSTUP_TOOLCHAIN")
            || name == "RUST_RECURSION_COUNT"
        {
            command.env_remove(&name);
        }
    }
    command
}

/// Environment variable naming a prebuilt `moco` binary (skips the build).
pub const MOCO_BIN_ENV: &str = "MOCO_BIN";

/// The `moco` binary of this workspace, built once per test process with the same profile
/// and target directory as the running test (`cargo build -p moco-bin --bin moco`).
pub fn moco_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os(MOCO_BIN_ENV).filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => panic!("cannot locate the test executable: {e}"),
        };
        // <target>/<profile>/deps/<test>
        let profile_dir = match exe.parent().and_then(Path::parent) {
            Some(d) => d.to_path_buf(),
            None => panic!("unexpected test executable path {}", exe.display()),
        };
        let target_dir = match profile_dir.parent() {
            Some(d) => d.to_path_buf(),
            None => panic!("unexpected test executable path {}", exe.display()),
        };
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        without_test_env(&mut cmd)
            .current_dir(&workspace)
            .args(["build", "--quiet", "-p", "moco-bin", "--bin", "moco"])
            .arg("--target-dir")
            .arg(&target_dir);
        if release {
            cmd.arg("--release");
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("building the moco binary failed: {s}"),
            Err(e) => panic!("running cargo to build the moco binary failed: {e}"),
        }
        let bin = profile_dir.join("moco");
        if !bin.is_file() {
            panic!("built moco but {} does not exist", bin.display());
        }
        bin
    })
    .clone()
}

/// Set to `1` to skip the real-server tests on a machine without a server.
pub const SKIP_ENV: &str = "MOCO_SKIP_REAL_SERVER";

/// The server binary the tests use: `$MOCO_TEST_MYSQLD`, else `mariadbd`/`mysqld` in `PATH`
/// or `/usr/sbin`. Without one the test fails, unless [`SKIP_ENV`] is `1` (then `None`).
pub fn server_or_skip(test: &str) -> Option<moco_adapters::mysqld::ServerBinary> {
    match moco_adapters::mysqld::ServerBinary::find(None) {
        Ok(b) => {
            println!(
                "{test}: verifying with {:?} {} at {}",
                b.kind(),
                b.version(),
                b.path().display()
            );
            moco_testkit::ledger::record(test, &b.label());
            Some(b)
        }
        Err(e) => {
            // An explicitly named server that does not work is a failure, not a skip.
            if std::env::var_os(moco_adapters::mysqld::MYSQLD_ENV).is_some_and(|v| !v.is_empty()) {
                panic!(
                    "{test}: {} is set but unusable: {e}",
                    moco_adapters::mysqld::MYSQLD_ENV
                );
            }
            // A missing server is a failure under the test command, not a silent pass.
            if std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1") {
                println!("SKIPPED {test} ({SKIP_ENV}=1): no server binary ({e})");
                return None;
            }
            panic!(
                "{test}: no server binary ({e}); install mariadb-server and mariadb-backup \
                 (scripts/test.sh does), or set {SKIP_ENV}=1 to skip"
            )
        }
    }
}

/// Owned arguments.
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_owned()).collect()
}

/// Runs `moco <args>` and returns its output.
pub fn moco(args: &[&str]) -> Output {
    match Command::new(moco_bin()).args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("running moco {args:?}: {e}"),
    }
}

/// Runs `moco <args>`, panicking with its output unless it succeeds; returns stdout.
pub fn moco_ok(args: &[&str]) -> String {
    let out = moco(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        panic!("moco {args:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    }
    stdout
}

/// Runs `moco <args>` expecting failure; returns stderr.
pub fn moco_err(args: &[&str]) -> String {
    let out = moco(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        panic!("moco {args:?} succeeded but should have failed:\n{stdout}\n{stderr}");
    }
    stderr
}

/// Kills every process whose command line mentions `needle` (our servers and managers in
/// a test directory), by pid, with SIGKILL.
pub fn kill_processes_mentioning(needle: &str) -> usize {
    processes_mentioning(needle)
        .into_iter()
        .filter_map(rustix::process::Pid::from_raw)
        .filter(|&p| rustix::process::kill_process(p, rustix::process::Signal::KILL).is_ok())
        .count()
}

/// The processes other than this one whose command line contains `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| u32::try_from(pid).is_ok_and(|p| p != me))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
                String::from_utf8_lossy(&raw)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

/// The nice value of `/proc/<which>` (a pid, `self` or `thread-self`): field 19 of `stat`.
pub fn nice_of(which: &str) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{which}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{which}/stat: {e}"));
    nice_in_stat(&stat).unwrap_or_else(|| panic!("/proc/{which}/stat: {stat}"))
}

/// Field 19 of a `/proc/<pid>/stat` line.
fn nice_in_stat(stat: &str) -> Option<i32> {
    // The command name (field 2) may hold spaces; the fields after it do not.
    let after_name = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    after_name.split(' ').nth(16).and_then(|n| n.parse().ok())
}

/// Records, from a thread of its own, the nice value of every process whose command line
/// holds all of some needles, as first seen. One look after the fact raced the process: a
/// small backup fits whole into the pipe, HTTP/2 and loopback TCP buffers, and its tool may
/// have ended before anyone looked.
#[derive(Debug)]
pub struct ProcessWatch {
    /// Nice values by pid.
    seen: Arc<Mutex<BTreeMap<i32, i32>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProcessWatch {
    /// Starts watching (every 2 ms) for processes mentioning every one of `needles`.
    pub fn start(needles: &[&str]) -> Self {
        let needles: Vec<String> = needles.iter().map(|n| (*n).to_owned()).collect();
        let seen: Arc<Mutex<BTreeMap<i32, i32>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let [first, rest @ ..] = needles.as_slice() else {
                        return;
                    };
                    for pid in processes_mentioning(first) {
                        let matches = std::fs::read(format!("/proc/{pid}/cmdline"))
                            .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                            .is_ok_and(|line| rest.iter().all(|n| line.contains(n.as_str())));
                        // A process that ended meanwhile has no stat: it is not recorded.
                        let nice = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                            .ok()
                            .and_then(|stat| nice_in_stat(&stat));
                        if let (true, Some(nice)) = (matches, nice) {
                            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                            seen.entry(pid).or_insert(nice);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        ProcessWatch {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// Waits (until `limit`) for at least one process to have been seen, stops watching and
    /// returns every pid seen with its nice value; empty when none was.
    pub fn wait_seen(mut self, limit: Duration) -> BTreeMap<i32, i32> {
        let deadline = Instant::now() + limit;
        while self.snapshot().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.halt();
        self.snapshot()
    }

    fn snapshot(&self) -> BTreeMap<i32, i32> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ProcessWatch {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A cluster directory in a fresh temporary directory. Dropping it (also on panic) runs
/// `moco local down`, then SIGKILLs any process still mentioning the directory, then removes
/// it.
#[derive(Debug)]
pub struct ClusterDir {
    tmp: Option<tempfile::TempDir>,
    dir: PathBuf,
}

impl ClusterDir {
    /// A new, not yet existing cluster directory `<tmp>/c`.
    pub fn new() -> ClusterDir {
        Self::named("c")
    }

    /// A new, not yet existing cluster directory `<tmp>/<name>` (a name with a space tests
    /// path handling).
    pub fn named(name: &str) -> ClusterDir {
        let tmp = match tempfile::Builder::new().prefix("moco-local-").tempdir() {
            Ok(t) => t,
            Err(e) => panic!("creating a temporary directory: {e}"),
        };
        let dir = tmp.path().join(name);
        ClusterDir {
            tmp: Some(tmp),
            dir,
        }
    }

    /// The cluster directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The directory as a string argument.
    pub fn arg(&self) -> String {
        self.dir.display().to_string()
    }

    /// `moco local status --dir DIR --json`.
    pub fn status(&self) -> Value {
        let text = moco_ok(&["local", "status", "--dir", &self.arg(), "--json"]);
        match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => panic!("status JSON: {e}:\n{text}"),
        }
    }

    /// The pid of the cluster's running manager (`manager.pid`).
    pub fn manager_pid(&self) -> i32 {
        match std::fs::read_to_string(self.dir.join("manager.pid"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            Some(pid) => pid,
            None => panic!("no manager.pid in {}", self.dir.display()),
        }
    }

    /// The MOCO passwords (`secret.json`).
    pub fn password(&self, user: &str) -> String {
        let text = match std::fs::read_to_string(self.dir.join("secret.json")) {
            Ok(t) => t,
            Err(e) => panic!("reading secret.json: {e}"),
        };
        let v: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => panic!("secret.json: {e}"),
        };
        match v
            .pointer(&format!("/passwords/{user}"))
            .and_then(Value::as_str)
        {
            Some(p) => p.to_owned(),
            None => panic!("secret.json has no password for {user}"),
        }
    }

    /// Connection options for `user` (password from `secret.json`) at `127.0.0.1:port`; with
    /// the cluster's CA (`up --tls`), over TLS verifying the server against it.
    pub fn opts(&self, port: u16, user: &str) -> mysql_async::Opts {
        match std::fs::read(self.dir.join("tls").join("ca.pem")) {
            Ok(ca) => tls_opts(port, user, &self.password(user), ca),
            Err(_) => opts(port, user, &self.password(user)),
        }
    }

    /// Fails a wait on the status, with the last status and the manager log's tail.
    fn timed_out(&self, what: &str, limit: Duration, last: &Value) -> ! {
        panic!(
            "timed out after {} s waiting for {what}; last status:\n{}\nmanager.log tail:\n{}",
            limit.as_secs(),
            serde_json::to_string_pretty(last).unwrap_or_default(),
            self.log_tail(40)
        )
    }

    /// Waits until `pred(status)` holds; returns that status. Panics with the last status on
    /// timeout.
    pub fn wait_status(&self, what: &str, limit: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.status();
            if pred(&s) {
                return s;
            }
            if Instant::now() >= deadline {
                self.timed_out(what, limit, &s);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The end of `manager.log`.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("manager.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Default for ClusterDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ClusterDir {
    fn drop(&mut self) {
        if self.dir.join("cluster.json").exists() {
            let _ = Command::new(moco_bin())
                .args(["local", "down", "--dir", &self.arg()])
                .output();
        }
        let needle = self.arg();
        kill_processes_mentioning(&needle);
        if let Some(tmp) = self.tmp.take() {
            let _ = tmp.close();
        }
    }
}

/// State is the given name.
pub fn state_is(s: &Value, state: &str) -> bool {
    s.get("state").and_then(Value::as_str) == Some(state)
}

/// `currentPrimaryIndex`.
pub fn primary_index(s: &Value) -> u64 {
    s.get("currentPrimaryIndex")
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX)
}

/// The port of instance `index` from a status.
pub fn instance_port(s: &Value, index: u64) -> u16 {
    s.pointer(&format!("/instances/{index}/port"))
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0)
}

/// The port of an endpoint (`primary` / `replica`) from a status.
pub fn endpoint_port(s: &Value, which: &str) -> u16 {
    s.pointer(&format!("/endpoints/{which}"))
        .and_then(Value::as_str)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

/// Connection options for `user` at `127.0.0.1:port` over TCP (never the socket, so
/// endpoints are really used).
pub fn opts(port: u16, user: &str, password: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false)
        .into()
}

/// [`opts`] over TLS, trusting only `ca_pem` and checking that the server's certificate
/// names `127.0.0.1`.
pub fn tls_opts(port: u16, user: &str, password: &str, ca_pem: Vec<u8>) -> mysql_async::Opts {
    let ssl = mysql_async::SslOpts::default()
        .with_root_certs(vec![ca_pem.into()])
        .with_disable_built_in_roots(true);
    mysql_async::OptsBuilder::from_opts(opts(port, user, password))
        .ssl_opts(ssl)
        .into()
}

/// Connects with a limit.
pub async fn connect(
    opts: &mysql_async::Opts,
    limit: Duration,
) -> Result<mysql_async::Conn, String> {
    match tokio::time::timeout(limit, mysql_async::Conn::new(opts.clone())).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("connect timed out after {limit:?}")),
    }
}

/// Creates `moco_test.t` through the primary endpoint.
pub async fn create_table(port: u16, password: &str) -> Result<(), String> {
    create_table_with(&opts(port, "moco-writable", password)).await
}

/// Creates `moco_test.t` through `o` (`moco-writable` at the primary endpoint).
pub async fn create_table_with(o: &mysql_async::Opts) -> Result<(), String> {
    let mut c = connect(o, Duration::from_secs(10)).await?;
    c.query_drop("CREATE DATABASE IF NOT EXISTS moco_test")
        .await
        .map_err(|e| e.to_string())?;
    c.query_drop("CREATE TABLE IF NOT EXISTS moco_test.t (id BIGINT PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    Ok(())
}

/// What a [`Writer`] saw.
#[derive(Clone, Debug, Default)]
pub struct WriterReport {
    /// Ids whose INSERT returned OK (acknowledged).
    pub acked: Vec<u64>,
    /// Failed attempts (errors, closed connections).
    pub failures: u64,
    /// Acknowledgement instants, in order.
    pub ack_times: Vec<Instant>,
    /// Wall-clock acknowledgement times, matching `acked` (for restore points, which are
    /// wall-clock seconds).
    pub acked_wall: Vec<std::time::SystemTime>,
    /// When each attempted id's INSERT was sent (wall clock).
    pub sent_wall: std::collections::BTreeMap<u64, std::time::SystemTime>,
    /// A sample of error messages.
    pub errors: Vec<String>,
}

impl WriterReport {
    /// The longest pause between two consecutive acknowledgements inside `[from, to]`
    /// (including the pause that spans `from`).
    pub fn max_gap_around(&self, from: Instant, to: Instant) -> Duration {
        let mut best = Duration::ZERO;
        for w in self.ack_times.windows(2) {
            if w[1] >= from && w[0] <= to {
                best = best.max(w[1].duration_since(w[0]));
            }
        }
        best
    }

    /// Prints each size change (`to`, started, Healthy) of a run of `moco local scale` with
    /// the writes acknowledged meanwhile and the longest pause between them, and asserts that
    /// some write was acknowledged during each. `change` names it (`grow`), `changing` too
    /// (`growing`).
    pub fn check_size_changes(
        &self,
        change: &str,
        changing: &str,
        windows: &[(u32, Instant, Instant)],
    ) {
        println!(
            "writer: {} acknowledged, {} failures {:?}",
            self.acked.len(),
            self.failures,
            self.errors.iter().take(5).collect::<Vec<_>>()
        );
        for (to, t0, t1) in windows {
            let acks = self
                .ack_times
                .iter()
                .filter(|t| **t >= *t0 && **t <= *t1)
                .count();
            println!(
                "{change} to {to}: {:.1} s to Healthy, {acks} writes acknowledged meanwhile, longest pause between acknowledgements {:.0} ms",
                t1.duration_since(*t0).as_secs_f64(),
                self.max_gap_around(*t0, *t1).as_secs_f64() * 1000.0
            );
            assert!(acks > 0, "no write acknowledged while {changing} to {to}");
        }
        assert!(!self.acked.is_empty());
    }
}

/// A client inserting one row at a time (autocommit) through an endpoint; an id counts as
/// acknowledged only when its INSERT returned OK. Reconnects after any error.
#[derive(Debug)]
pub struct Writer {
    stop: watch::Sender<bool>,
    handle: tokio::task::JoinHandle<WriterReport>,
}

impl Writer {
    /// Starts writing to `127.0.0.1:port` as `moco-writable`.
    pub fn start(port: u16, password: &str) -> Writer {
        Self::start_with(opts(port, "moco-writable", password))
    }

    /// Starts writing through `o`.
    pub fn start_with(o: mysql_async::Opts) -> Writer {
        Self::start_at(o, 1)
    }

    /// Starts writing through `o`, ids from `first` on (several writers, each its own range).
    pub fn start_at(o: mysql_async::Opts, first: u64) -> Writer {
        let (stop, mut stop_rx) = watch::channel(false);
        let handle = tokio::spawn(async move {
            let mut report = WriterReport::default();
            let mut next_id: u64 = first;
            let mut conn: Option<mysql_async::Conn> = None;
            while !*stop_rx.borrow() {
                if conn.is_none() {
                    match connect(&o, Duration::from_secs(3)).await {
                        Ok(c) => conn = Some(c),
                        Err(e) => {
                            report.failures += 1;
                            if report.errors.len() < 20 {
                                report.errors.push(e);
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                                _ = stop_rx.changed() => {}
                            }
                            continue;
                        }
                    }
                }
                let id = next_id;
                next_id += 1;
                let Some(c) = conn.as_mut() else { continue };
                report.sent_wall.insert(id, std::time::SystemTime::now());
                let insert = c.exec_drop("INSERT INTO moco_test.t (id) VALUES (?)", (id,));
                match tokio::time::timeout(Duration::from_secs(30), insert).await {
                    Ok(Ok(())) => {
                        report.acked.push(id);
                        report.ack_times.push(Instant::now());
                        report.acked_wall.push(std::time::SystemTime::now());
                    }
                    Ok(Err(e)) => {
                        report.failures += 1;
                        if report.errors.len() < 20 {
                            report.errors.push(e.to_string());
                        }
                        conn = None;
                    }
                    Err(_) => {
                        report.failures += 1;
                        report.errors.push(format!("insert {id} timed out"));
                        conn = None;
                    }
                }
            }
            report
        });
        Writer { stop, handle }
    }

    /// Stops and returns the report.
    pub async fn finish(self) -> WriterReport {
        let _ = self.stop.send(true);
        match self.handle.await {
            Ok(r) => r,
            Err(e) => panic!("writer task failed: {e}"),
        }
    }
}

/// Ids in `moco_test.t` of the server at `port` (as `user`).
pub async fn stored_ids(port: u16, user: &str, password: &str) -> Result<BTreeSet<u64>, String> {
    stored_ids_with(&opts(port, user, password)).await
}

/// Ids in `moco_test.t` of the server `o` reaches.
pub async fn stored_ids_with(o: &mysql_async::Opts) -> Result<BTreeSet<u64>, String> {
    let mut c = connect(o, Duration::from_secs(5)).await?;
    let ids: Vec<u64> = c
        .query("SELECT id FROM moco_test.t")
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    Ok(ids.into_iter().collect())
}

/// Waits until every id of `acked` is stored on the server at `port`; returns the missing
/// ids on timeout.
pub async fn wait_rows(
    port: u16,
    password: &str,
    acked: &[u64],
    limit: Duration,
) -> Result<usize, (Vec<u64>, String)> {
    wait_rows_with(&opts(port, "moco-admin", password), acked, limit).await
}

/// [`wait_rows`] on the server `o` reaches.
pub async fn wait_rows_with(
    o: &mysql_async::Opts,
    acked: &[u64],
    limit: Duration,
) -> Result<usize, (Vec<u64>, String)> {
    let deadline = Instant::now() + limit;
    let mut last_error = String::new();
    loop {
        match stored_ids_with(o).await {
            Ok(ids) => {
                let missing: Vec<u64> =
                    acked.iter().copied().filter(|i| !ids.contains(i)).collect();
                if missing.is_empty() {
                    return Ok(ids.len());
                }
                if Instant::now() >= deadline {
                    return Err((missing, last_error));
                }
            }
            Err(e) => {
                last_error = e;
                if Instant::now() >= deadline {
                    return Err((acked.to_vec(), last_error));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A block of `count` free loopback ports below the ephemeral range, never handed out before
/// in this process ([`moco_adapters::mysqld::free_port_block`]: tests running at the same time
/// never share a port, and client connections' source ports never take a server's port).
pub fn free_port_block(count: u16) -> u16 {
    match moco_adapters::mysqld::free_port_block(count) {
        Ok(base) => base,
        Err(e) => panic!("{e}"),
    }
}

/// `moco local up --detach` of `replicas` instances in `dir` (from a blocking thread);
/// returns the time to Healthy and the status.
pub async fn up_detached(dir: &ClusterDir, replicas: u32) -> (Duration, Value) {
    // Build (or locate) the binary first so that the timing is the bring-up alone.
    if let Err(e) = tokio::task::spawn_blocking(moco_bin).await {
        panic!("locating moco: {e}");
    }
    let base = free_port_block(u16::try_from(replicas).unwrap_or(1) + 2);
    let started = Instant::now();
    moco_async(up_args(dir, replicas, base)).await;
    (started.elapsed(), dir.status())
}

/// `moco local up --detach` of `replicas` instances in `dir` from `base` on, waiting up to
/// 300 s for Healthy.
pub fn up_args(dir: &ClusterDir, replicas: u32, base: u16) -> Vec<String> {
    args(&[
        "local",
        "up",
        "--dir",
        &dir.arg(),
        "--replicas",
        &replicas.to_string(),
        "--base-port",
        &base.to_string(),
        "--detach",
        "--wait-timeout",
        "300s",
    ])
}

/// What most end-to-end tests start from: `replicas` instances brought up detached and
/// Healthy, the test table created through the primary endpoint. Returns the directory, the
/// Healthy status, the `moco-writable` password and the primary endpoint's port; `None` only
/// when the test is skipped for lack of a server ([`SKIP_ENV`]).
pub async fn started_with_table(
    test: &str,
    replicas: u32,
) -> Option<(ClusterDir, Value, String, u16)> {
    server_or_skip(test)?;
    let dir = ClusterDir::new();
    let (took, status) = up_detached(&dir, replicas).await;
    println!(
        "{replicas} instances Healthy after {:.1} s",
        took.as_secs_f64()
    );
    let writable = dir.password("moco-writable");
    let port = endpoint_port(&status, "primary");
    if let Err(e) = create_table(port, &writable).await {
        panic!("creating the test table: {e}");
    }
    Some((dir, status, writable, port))
}

/// Waits until process `pid` is gone (or a zombie): its locks are released. Panics after
/// `limit`.
pub async fn wait_process_gone(pid: i32, limit: Duration) {
    let until = Instant::now() + limit;
    while std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("State:") && !l.contains("zombie"))
    }) {
        assert!(Instant::now() < until, "process {pid} did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `moco <args>` on a blocking thread; returns stdout (panics on failure).
pub async fn moco_async(args: Vec<String>) -> String {
    match tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        moco_ok(&refs)
    })
    .await
    {
        Ok(s) => s,
        Err(e) => panic!("moco task: {e}"),
    }
}

/// [`ClusterDir::wait_status`] on a blocking thread.
pub async fn wait_status_async(
    dir: &ClusterDir,
    what: &str,
    limit: Duration,
    pred: impl Fn(&Value) -> bool + Send + 'static,
) -> Value {
    let path = dir.path().to_path_buf();
    let what = what.to_owned();
    let deadline = Instant::now() + limit;
    loop {
        let p = path.clone();
        let s = match tokio::task::spawn_blocking(move || {
            let text = moco_ok(&[
                "local",
                "status",
                "--dir",
                &p.display().to_string(),
                "--json",
            ]);
            serde_json::from_str::<Value>(&text)
        })
        .await
        {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => panic!("status JSON: {e}"),
            Err(e) => panic!("status task: {e}"),
        };
        if pred(&s) {
            return s;
        }
        if Instant::now() >= deadline {
            dir.timed_out(&what, limit, &s);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until former primary `old` is back: the cluster Healthy (it rejoined) or `old`
/// reported errant, and `old` read-only when `read_only` is asked for.
pub async fn wait_ex_primary_back(dir: &ClusterDir, old: u64, read_only: bool) -> Value {
    wait_status_async(
        dir,
        "former primary back as a replica (or errant)",
        Duration::from_secs(180),
        move |s| {
            let o = &s["instances"][old as usize];
            (state_is(s, "Healthy") || o["errant"] == Value::Bool(true))
                && (!read_only || o["readOnly"] == Value::Bool(true))
        },
    )
    .await
}

/// How many instances a no-loss check must compare: a check that compares fewer than the
/// test expects (a status listing them unreachable, a shrunk cluster) proves less than it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compared {
    /// Exactly this many.
    Exactly(usize),
    /// At least this many (a benchmark, where an instance's fate varies by round).
    AtLeast(usize),
}

/// Checks that every acknowledged id is stored on every instance listed in `status` as
/// reachable and not errant (waiting for replicas to catch up), that there were acknowledged
/// ids, and that as many instances were compared as `want` says; returns how many were.
pub async fn assert_no_acked_loss(
    dir: &ClusterDir,
    status: &Value,
    acked: &[u64],
    want: Compared,
) -> usize {
    assert!(!acked.is_empty(), "no acknowledged write to look for");
    let mut checked = 0;
    for inst in status
        .get("instances")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if inst.get("errant").and_then(Value::as_bool) == Some(true)
            || inst.get("reachable").and_then(Value::as_bool) != Some(true)
        {
            continue;
        }
        let index = inst.get("index").and_then(Value::as_u64).unwrap_or(0);
        let port = instance_port(status, index);
        match wait_rows_with(
            &dir.opts(port, "moco-admin"),
            acked,
            Duration::from_secs(120),
        )
        .await
        {
            Ok(_) => checked += 1,
            Err((missing, err)) => panic!(
                "instance {index} lacks {} acknowledged row(s) (first: {:?}); last error: {err}",
                missing.len(),
                missing.iter().take(10).collect::<Vec<_>>()
            ),
        }
    }
    let enough = match want {
        Compared::Exactly(n) => checked == n,
        Compared::AtLeast(n) => checked >= n,
    };
    assert!(
        enough,
        "{} acknowledged row(s) compared on {checked} instance(s), {want:?} wanted: {status:#}",
        acked.len()
    );
    checked
}

/// Purges every binary log but the current one on the server `admin` reaches (as
/// `moco-admin`), so that an empty instance must be cloned rather than replay them. MariaDB
/// keeps a binlog until its checkpoint moves on: retried until one file is left.
pub async fn purge_binary_logs(admin: &mysql_async::Opts) {
    let mut c = match connect(admin, Duration::from_secs(10)).await {
        Ok(c) => c,
        Err(e) => panic!("connecting to purge binary logs: {e}"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left: Result<Vec<(String, u64)>, mysql_async::Error> = async {
            c.query_drop("FLUSH BINARY LOGS").await?;
            let logs: Vec<(String, u64)> = c.query("SHOW BINARY LOGS").await?;
            if let Some((last, _)) = logs.last() {
                c.query_drop(format!("PURGE BINARY LOGS TO '{last}'"))
                    .await?;
            }
            c.query("SHOW BINARY LOGS").await
        }
        .await;
        match left {
            Ok(left) if left.len() == 1 => return,
            Ok(left) => assert!(
                Instant::now() < deadline,
                "binary logs not purged: {left:?}"
            ),
            Err(e) => panic!("purging binary logs: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Kills replica `index` (held down), deletes its datadir, starts it again and waits until
/// the cluster is Healthy with it cloned (the `Cloned` event), and re-creating its accounts
/// raised no `AccountRefused`; returns that status.
pub async fn wipe_and_await_clone(dir: &ClusterDir, index: u64) -> Value {
    let d = dir.arg();
    let local = |cmd: &str, extra: &[&str]| {
        let mut a = vec![
            "local".to_owned(),
            cmd.to_owned(),
            "--dir".to_owned(),
            d.clone(),
        ];
        a.push(index.to_string());
        a.extend(extra.iter().map(|e| (*e).to_owned()));
        a
    };
    moco_async(local("kill", &["--keep-down"])).await;
    let datadir = dir.path().join(format!("instances/{index}/data"));
    if let Err(e) = std::fs::remove_dir_all(&datadir) {
        panic!("removing {}: {e}", datadir.display());
    }
    let t = Instant::now();
    moco_async(local("start", &[])).await;
    let after = wait_status_async(
        dir,
        "wiped replica cloned and Healthy",
        Duration::from_secs(240),
        |s| state_is(s, "Healthy"),
    )
    .await;
    println!(
        "wiped replica {index}: cloned and Healthy after {} ms",
        t.elapsed().as_millis()
    );
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap_or_default();
    assert!(
        events.contains(&format!(
            "\"reason\":\"Cloned\",\"message\":\"cloned instance {index}"
        )),
        "{events}"
    );
    // Re-creating the accounts never looks like a refused account (the pooled connections
    // are forgotten afterwards).
    assert!(!events.contains("AccountRefused"), "{events}");
    after
}

/// Inserts `ids` one by one into `moco_test.t` as `moco-writable` through `127.0.0.1:port`;
/// returns the ids (all acknowledged, or the call panics).
pub async fn insert_rows(port: u16, password: &str, ids: std::ops::Range<u64>) -> Vec<u64> {
    let mut c = match connect(
        &opts(port, "moco-writable", password),
        Duration::from_secs(10),
    )
    .await
    {
        Ok(c) => c,
        Err(e) => panic!("connecting to 127.0.0.1:{port}: {e}"),
    };
    for id in ids.clone() {
        if let Err(e) = c
            .exec_drop("INSERT INTO moco_test.t (id) VALUES (?)", (id,))
            .await
        {
            panic!("inserting {id}: {e}");
        }
    }
    ids.collect()
}

/// The fields of `SHOW SLAVE STATUS` on the server `o` reaches, by column name.
pub async fn replica_status(o: &mysql_async::Opts) -> Option<Vec<(String, String)>> {
    let mut c = connect(o, Duration::from_secs(10)).await.ok()?;
    let row: Option<mysql_async::Row> = c.query_first("SHOW SLAVE STATUS").await.ok()?;
    let _ = c.disconnect().await;
    let row = row?;
    let columns = row.columns();
    Some(
        columns
            .iter()
            .enumerate()
            .map(|(i, col)| {
                let value: Option<String> = row.get_opt(i).and_then(Result::ok);
                (col.name_str().into_owned(), value.unwrap_or_default())
            })
            .collect(),
    )
}

/// The value of column `name` in a [`replica_status`] answer (empty when absent).
pub fn field<'a>(status: &'a [(String, String)], name: &str) -> &'a str {
    status
        .iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Every replica in `replicas` (index, options to reach it) replicates over TLS and verifies
/// its source's certificate against `ca_file` (the path as the servers read it); a channel
/// still connecting gets a minute.
pub async fn assert_channels_verify<I: std::fmt::Display>(
    replicas: Vec<(I, mysql_async::Opts)>,
    ca_file: &str,
) {
    for (i, o) in replicas {
        let deadline = Instant::now() + Duration::from_secs(60);
        let st = loop {
            let st = replica_status(&o).await.unwrap_or_default();
            if field(&st, "Slave_IO_Running") == "Yes" || Instant::now() > deadline {
                break st;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(
            field(&st, "Slave_IO_Running"),
            "Yes",
            "instance {i}: {st:?}"
        );
        assert_eq!(field(&st, "Master_SSL_Allowed"), "Yes", "instance {i}");
        assert_eq!(
            field(&st, "Master_SSL_Verify_Server_Cert"),
            "Yes",
            "instance {i}"
        );
        assert_eq!(field(&st, "Master_SSL_CA_File"), ca_file, "instance {i}");
    }
}

/// What an account with binary-log rights reads of every binary log the server at `reader`
/// holds (`SHOW BINARY LOGS`, then `SHOW BINLOG EVENTS` of each: the statements as logged),
/// and the raw bytes of each of those files in `datadir`. The probe of the cleartext in the
/// binary log: an application account (`moco-readonly` holds `BINLOG MONITOR`) reads the
/// first, a replica, the archive and a backup copy the second.
pub async fn binlog_as_read(reader: &mysql_async::Opts, datadir: &Path) -> (Vec<String>, Vec<u8>) {
    let mut c = match connect(reader, Duration::from_secs(10)).await {
        Ok(c) => c,
        Err(e) => panic!("connecting to read the binary logs: {e}"),
    };
    let logs: Vec<(String, u64)> = match c.query("SHOW BINARY LOGS").await {
        Ok(l) => l,
        Err(e) => panic!("SHOW BINARY LOGS: {e}"),
    };
    assert!(!logs.is_empty(), "no binary logs");
    let mut statements = Vec::new();
    let mut bytes = Vec::new();
    for (name, _) in &logs {
        let rows: Vec<mysql_async::Row> =
            match c.query(format!("SHOW BINLOG EVENTS IN '{name}'")).await {
                Ok(r) => r,
                Err(e) => panic!("SHOW BINLOG EVENTS IN {name}: {e}"),
            };
        statements.extend(
            rows.iter()
                .filter_map(|r| r.get_opt::<String, _>("Info").and_then(Result::ok)),
        );
        match std::fs::read(datadir.join(name)) {
            Ok(b) => bytes.extend(b),
            Err(e) => panic!("reading {}: {e}", datadir.join(name).display()),
        }
    }
    let _ = c.disconnect().await;
    (statements, bytes)
}

/// Fails when a password of `secrets` is in the binary log as [`binlog_as_read`] read it;
/// returns how many statements were read (the probe read something).
pub fn assert_no_cleartext(what: &str, read: &(Vec<String>, Vec<u8>), secrets: &[&str]) -> usize {
    let (statements, bytes) = read;
    for secret in secrets {
        assert!(!secret.is_empty());
        if let Some(s) = statements.iter().find(|s| s.contains(secret)) {
            panic!("{what}: a password is in the binary log in clear: {s}");
        }
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{what}: a password is in a binary log file in clear"
        );
    }
    statements.len()
}
