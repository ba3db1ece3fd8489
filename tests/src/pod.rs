//! A MySQLCluster Pod on this machine, for the tests of `moco init` and `moco agent`: the
//! volumes are directories of a temporary directory, the mysqld container is a real server
//! started from the my.cnf the operator renders (with the paths moved into the directory),
//! and the init container is the `moco` binary run under MOCO's name, `moco-init`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use moco_adapters::mysqld::{LocalMysqld, ServerBinary, ServerKind, free_ports, running_as_root};
use moco_core::facts::Flavor;
use moco_core::resources::mycnf::{MycnfInput, MycnfPaths, generate_mycnf};

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
}

impl TestPod {
    /// Pod `moco-db-<ordinal>` under `root/<ordinal>`, with the operator's my.cnf (paths and
    /// port moved here). Nothing is started.
    pub fn new(binary: &ServerBinary, root: &Path, ordinal: u32) -> TestPod {
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
        for (k, v) in [
            ("innodb_log_file_size", "16M"),
            ("innodb_buffer_pool_size", "32M"),
            ("performance_schema", "OFF"),
            ("bind_address", "127.0.0.1"),
        ] {
            user_config.insert(k.to_owned(), v.to_owned());
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
            .env("TMPDIR", self.dir.join("tmp"));
        match cmd.output() {
            Ok(o) => o,
            Err(e) => panic!("run moco-init: {e}"),
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
