//! Does MariaDB accept what the generator writes? Initialises a data directory with a generated
//! MariaDB my.cnf plus a local-mode instance snippet, starts `mariadbd`, checks the settings the
//! replication logic relies on, and stops it again.
//!
//! Without MariaDB's programs it fails (`MOCO_SKIP_REAL_SERVER=1` skips, which the test
//! command refuses). The test owns the process it starts and stops it by its pid; the data
//! lives in a fresh temporary directory that is removed afterwards.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use moco_adapters::mysqld::{ServerBinary, find_program, free_port, running_as_root};
use moco_core::facts::Flavor;
use moco_core::resources::mycnf::{
    InstanceConfig, MycnfInput, MycnfPaths, generate_mycnf, instance_mycnf,
};

use crate::support::SKIP_ENV;

/// Generous: `mariadb-install-db` takes seconds when the cores are busy.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// MariaDB's `mariadbd`, `mariadb-install-db` and `mariadb`, whatever server the other tests
/// use; the test is recorded in the ledger. Without them the test fails, unless [`SKIP_ENV`]
/// is `1` (then `None`).
fn mariadb_programs(test: &str) -> Option<[PathBuf; 3]> {
    let found = ["mariadbd", "mariadb-install-db", "mariadb"].map(|n| find_program(&[n]));
    if let [Some(server), Some(install_db), Some(client)] = found {
        let binary = ServerBinary::from_path(&server).unwrap_or_else(|e| panic!("{test}: {e}"));
        moco_testkit::ledger::record(test, &binary.label());
        return Some([server, install_db, client]);
    }
    if std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1") {
        eprintln!("SKIPPED {test} ({SKIP_ENV}=1): MariaDB's programs are not installed");
        return None;
    }
    panic!(
        "{test}: mariadbd, mariadb-install-db or mariadb not found ({found:?}); install \
         mariadb-server (scripts/test.sh does), or set {SKIP_ENV}=1 to skip"
    );
}

/// The started server: stopped (SIGTERM by pid, SIGKILL as a last resort) and its directory
/// removed when dropped, so a failing assertion leaves nothing behind.
struct Server {
    child: Option<Child>,
    dir: PathBuf,
}

impl Server {
    fn stop(&mut self) -> Option<Duration> {
        let mut child = self.child.take()?;
        let started = Instant::now();
        let signalled = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        if signalled {
            while started.elapsed() < STOP_TIMEOUT {
                if let Ok(Some(_)) = child.try_wait() {
                    return Some(started.elapsed());
                }
                sleep(Duration::from_millis(20));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn client_query(client: &Path, defaults: &Path, sql: &str) -> Result<String, String> {
    let out = Command::new(client)
        .arg(format!("--defaults-file={}", defaults.display()))
        .args(["-uroot", "-N", "-B", "-e", sql])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn generated_mariadb_config_starts_mariadbd() {
    let Some([mariadbd, install_db, client]) =
        mariadb_programs("generated_mariadb_config_starts_mariadbd")
    else {
        return;
    };

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "moco-resources-mariadb-{}-{nanos}",
        std::process::id()
    ));
    let dir_text = dir.to_string_lossy().into_owned();
    let port = free_port().unwrap_or_else(|e| panic!("free port: {e}"));
    let paths = MycnfPaths::local(&dir_text, port, 0, 0);
    for sub in [&paths.datadir, &paths.tmpdir, &paths.include_dir] {
        fs::create_dir_all(sub).unwrap_or_else(|e| panic!("{sub}: {e}"));
    }
    let mut server = Server {
        child: None,
        dir: dir.clone(),
    };

    // Small sizes keep the instance light; everything else is the generator's.
    let user_config: BTreeMap<String, String> = [
        ("innodb_buffer_pool_size", "32M"),
        ("innodb_log_file_size", "16M"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mycnf = generate_mycnf(&MycnfInput {
        flavor: Flavor::Mariadb,
        user_config,
        memory: Default::default(),
        paths: paths.clone(),
        mysql_line: Default::default(),
    })
    .unwrap_or_else(|e| panic!("generate: {e}"));
    let snippet = instance_mycnf(
        Flavor::Mariadb,
        &InstanceConfig::local(7, 2, port, running_as_root()),
    )
    .unwrap_or_else(|e| panic!("snippet: {e}"));
    let defaults = dir.join("my.cnf");
    fs::write(&defaults, &mycnf).unwrap_or_else(|e| panic!("write my.cnf: {e}"));
    fs::write(Path::new(&paths.include_dir).join("instance.cnf"), &snippet)
        .unwrap_or_else(|e| panic!("write snippet: {e}"));
    let defaults_arg = format!("--defaults-file={}", defaults.display());

    let install = Command::new(&install_db)
        .arg(&defaults_arg)
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
        .output()
        .unwrap_or_else(|e| panic!("mariadb-install-db: {e}"));
    assert!(
        install.status.success(),
        "mariadb-install-db failed:\n{}\n{}\nmy.cnf:\n{mycnf}",
        String::from_utf8_lossy(&install.stdout),
        String::from_utf8_lossy(&install.stderr)
    );

    let error_log = dir.join("error.log");
    let log_file = fs::File::create(&error_log).unwrap_or_else(|e| panic!("error log: {e}"));
    let child = Command::new(&mariadbd)
        .arg(&defaults_arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn mariadbd: {e}"));
    server.child = Some(child);

    let started = Instant::now();
    loop {
        if client_query(&client, &defaults, "SELECT 1").is_ok() {
            break;
        }
        let exited = server
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        if exited.is_some() || started.elapsed() > READY_TIMEOUT {
            panic!(
                "mariadbd did not become ready ({exited:?}); error log:\n{}\nmy.cnf:\n{mycnf}",
                fs::read_to_string(&error_log).unwrap_or_default()
            );
        }
        sleep(Duration::from_millis(100));
    }
    eprintln!("mariadbd ready after {:?}", started.elapsed());

    let row = client_query(
        &client,
        &defaults,
        "SELECT @@server_id, @@port, @@report_port, @@read_only, @@gtid_strict_mode, @@log_bin, \
         @@binlog_format, @@log_slave_updates, @@relay_log, @@rpl_semi_sync_master_enabled, \
         @@rpl_semi_sync_slave_enabled, @@rpl_semi_sync_master_wait_point, @@secure_file_priv, \
         @@tx_isolation, @@innodb_buffer_pool_size",
    )
    .unwrap_or_else(|e| panic!("query: {e}"));
    let got: Vec<&str> = row.trim_end().split('\t').collect();
    let port_text = port.to_string();
    let want = [
        "9",
        port_text.as_str(),
        port_text.as_str(),
        "1",
        "1",
        "1",
        "ROW",
        "1",
        "relay-bin",
        "0",
        "1",
        "AFTER_SYNC",
        "/dev/null/",
        "READ-COMMITTED",
        "33554432",
    ];
    assert_eq!(got, want, "server variables");

    // secure_file_priv=/dev/null must disable file export like MySQL's NULL does.
    let export = client_query(
        &client,
        &defaults,
        &format!("SELECT 1 INTO OUTFILE '{dir_text}/out.txt'"),
    );
    assert!(
        export.as_ref().is_err_and(|e| e.contains("1290")),
        "export was allowed: {export:?}"
    );

    let stopped = server.stop();
    assert!(stopped.is_some(), "mariadbd did not stop on SIGTERM");
    eprintln!("mariadbd stopped after {stopped:?}");
}
