//! Starting, stopping and initialising local `mariadbd` / `mysqld` processes, for tests and
//! `moco local`.
//!
//! The launcher manages a process; it does not write configuration. It takes my.cnf *text*
//! (written to `<dir>/my.cnf`) and reads back only the settings it needs ([`MycnfSettings`]:
//! `datadir`, `pid_file`, `port`, `bind_address`, `socket`, `log_error`, `user`, following
//! `!include`/`!includedir`, so write per-instance snippets before `create`). Servers are
//! started in their own process group with output in `<dir>/mysqld.out`, so they survive the
//! process that started them (`moco local --detach`) and can be stopped later by pid from
//! another process; a pid is trusted only while `/proc/PID/cmdline` still carries this
//! instance's `--defaults-file`, and zombies count as stopped.
//!
//! Public API:
//! * [`ServerBinary::find`]`(Option<&Path>) -> Result<ServerBinary>`: explicit path, else
//!   `$MOCO_TEST_MYSQLD` ([`MYSQLD_ENV`]), else `mariadbd`/`mysqld` in `PATH` or `/usr/sbin`;
//!   [`ServerBinary::kind`] (MariaDB or MySQL), [`ServerBinary::version`],
//!   [`ServerBinary::tool`] (`mariadb-backup`, `mbstream`, … next to the server).
//! * [`LocalMysqld::create`]`(binary, dir, mycnf_text)` / [`LocalMysqld::open`]`(binary, dir)`.
//! * [`LocalMysqld::initialize`]`(timeout) -> Result<bool>`: `mariadb-install-db
//!   --auth-root-authentication-method=normal --skip-test-db` or `mysqld --initialize-insecure`
//!   (`false` when the datadir was already initialised); root then has no password on the
//!   socket.
//! * [`LocalMysqld::start`]`(&[args]) -> Result<u32>` (detached; pid file written at once),
//!   [`LocalMysqld::wait_ready`]`(timeout)` (the server sends its protocol greeting on TCP),
//!   [`LocalMysqld::start_and_wait`], [`LocalMysqld::restart`]`(&[args], grace, timeout)`
//!   (e.g. `--init-rpl-role=SLAVE` for a crashed MariaDB ex-primary).
//! * [`LocalMysqld::stop`]`(grace) -> Result<StopOutcome>` (SIGTERM, SIGKILL after `grace`),
//!   [`LocalMysqld::kill`]`()` (SIGKILL, a simulated crash), [`LocalMysqld::running_pid`].
//! * [`LocalMysqld::log_tail`]`(lines)`: error log and console output, for error messages.
//! * [`LocalMysqld::tmpdir`]: `tmpdir` from my.cnf, else a private `<dir>/tmp` (servers
//!   sharing `/tmp` delete each other's temporary tables while starting).
//! * [`free_port`]`()` / [`free_ports`]`(n)` / [`free_port_block`]`(n)`: unused 127.0.0.1 ports
//!   for tests, never the same one twice in a process.
//! * [`process_alive`]`(pid)`, [`is_server_process`]`(pid, defaults_file)`.

mod binary;
mod config;
mod ports;
mod process;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use thiserror::Error;

use crate::failure::{CommandFailed, IoError, tail};
use crate::greeting::read_greeting;
use crate::instance::InstanceError;
use crate::instance::datadir::{DatadirInit, InitProgram, initialize_datadir};
use crate::modes::{SERVER_DIR_UMASK, SERVER_FILE_UMASK, private_dir, write_private};

pub use binary::{MYSQLD_ENV, ServerBinary, ServerKind, find_program, tool_beside};
pub use config::MycnfSettings;
pub use ports::{free_port, free_port_block, free_ports};
pub use process::{is_server_process, process_alive, running_as_root};

use process::send_signal;

/// How often conditions (process gone, port answering) are re-checked.
const POLL: Duration = Duration::from_millis(20);
/// How long a SIGKILLed process may take to disappear before it is reported stuck.
const KILL_WAIT: Duration = Duration::from_secs(30);
/// Lines of logs quoted in errors.
const LOG_LINES: usize = 15;

/// A launcher failure, with the path, pid or command it concerns.
#[derive(Debug, Error)]
pub enum MysqldError {
    /// No server binary or helper tool was found.
    #[error("no {what} found (searched {searched:?}); set {env} to the server binary", env = MYSQLD_ENV)]
    NotFound {
        /// The program looked for.
        what: String,
        /// The directories searched.
        searched: Vec<PathBuf>,
    },
    /// The my.cnf lacks a setting the launcher needs, or holds a bad value.
    #[error("{path}: {message}", path = path.display())]
    Config {
        /// The my.cnf.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A helper command failed.
    #[error(transparent)]
    Command(#[from] CommandFailed),
    /// The server is already running.
    #[error("{defaults_file}: server already running as pid {pid}", defaults_file = defaults_file.display())]
    AlreadyRunning {
        /// Its my.cnf.
        defaults_file: PathBuf,
        /// Its pid.
        pid: u32,
    },
    /// The datadir has not been initialised.
    #[error("{datadir}: not initialised (no mysql/ system schema)", datadir = datadir.display())]
    NotInitialized {
        /// The datadir.
        datadir: PathBuf,
    },
    /// The server exited while it was expected to come up.
    #[error("server pid {pid} ({defaults_file}) exited during startup: {status}\n{log_tail}", defaults_file = defaults_file.display())]
    Exited {
        /// Its pid.
        pid: u32,
        /// Its my.cnf.
        defaults_file: PathBuf,
        /// Exit status if known.
        status: String,
        /// The end of its logs.
        log_tail: String,
    },
    /// The server did not answer in time.
    #[error(
        "server pid {pid} at {address} not ready after {waited:?} (last probe: {last_error})\n{log_tail}"
    )]
    NotReady {
        /// Its pid.
        pid: u32,
        /// `host:port` probed.
        address: String,
        /// How long we waited.
        waited: Duration,
        /// What the last probe saw.
        last_error: String,
        /// The end of its logs.
        log_tail: String,
    },
    /// A signal could not be sent.
    #[error("cannot send {signal} to pid {pid}: {source}")]
    Signal {
        /// The target.
        pid: u32,
        /// The signal name.
        signal: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The process survived SIGKILL.
    #[error("pid {pid} still alive {waited:?} after SIGKILL")]
    StopTimeout {
        /// The target.
        pid: u32,
        /// How long we waited.
        waited: Duration,
    },
}

impl MysqldError {
    /// A [`MysqldError::Io`] of `what` on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> Self {
        MysqldError::Io(IoError::new(path, what, source))
    }
}

/// How [`LocalMysqld::stop`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopOutcome {
    /// No server was running.
    NotRunning,
    /// It shut down after SIGTERM.
    Terminated,
    /// It ignored SIGTERM for the grace period and was killed.
    Killed,
}

/// One local server: its directory, my.cnf and (while running) process.
#[derive(Debug)]
pub struct LocalMysqld {
    binary: ServerBinary,
    dir: PathBuf,
    defaults_file: PathBuf,
    settings: MycnfSettings,
    /// The process we spawned, kept so it can be reaped (no lingering zombie).
    child: Mutex<Option<Child>>,
}

impl LocalMysqld {
    /// Writes `mycnf` to `<dir>/my.cnf` (creating `dir`) and reads the settings it needs.
    pub fn create(binary: ServerBinary, dir: &Path, mycnf: &str) -> Result<Self, MysqldError> {
        private_dir(dir).map_err(|source| {
            MysqldError::io(dir.to_owned(), "create instance directory", source)
        })?;
        let dir = absolute(dir)?;
        let defaults_file = dir.join("my.cnf");
        write_private(&defaults_file, mycnf.as_bytes())
            .map_err(|source| MysqldError::io(defaults_file.clone(), "write", source))?;
        Self::open(binary, &dir)
    }

    /// Uses the existing `<dir>/my.cnf` (e.g. to stop a server another process started).
    pub fn open(binary: ServerBinary, dir: &Path) -> Result<Self, MysqldError> {
        let dir = absolute(dir)?;
        let defaults_file = dir.join("my.cnf");
        let text = std::fs::read_to_string(&defaults_file)
            .map_err(|source| MysqldError::io(defaults_file.clone(), "read", source))?;
        let settings = MycnfSettings::parse(&text, &defaults_file)?;
        Ok(LocalMysqld {
            binary,
            dir,
            defaults_file,
            settings,
            child: Mutex::new(None),
        })
    }

    /// The server binary.
    pub fn binary(&self) -> &ServerBinary {
        &self.binary
    }

    /// The instance directory (holds `my.cnf` and `mysqld.out`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<dir>/my.cnf`.
    pub fn defaults_file(&self) -> &Path {
        &self.defaults_file
    }

    /// The settings read from my.cnf.
    pub fn settings(&self) -> &MycnfSettings {
        &self.settings
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.settings.port
    }

    /// The host a local client connects to.
    pub fn host(&self) -> String {
        self.settings.probe_host()
    }

    /// True when the datadir holds the `mysql` system schema.
    pub fn is_initialized(&self) -> bool {
        self.settings.datadir.join("mysql").is_dir()
    }

    /// Creates the system tables in an empty datadir; returns `false` (doing nothing) when it
    /// is already initialised. Root is left without a password, reachable on the socket.
    pub async fn initialize(&self, timeout: Duration) -> Result<bool, MysqldError> {
        if self.is_initialized() {
            return Ok(false);
        }
        let program = match self.binary.kind() {
            ServerKind::Mariadb => {
                let tool = self
                    .binary
                    .tool("mariadb-install-db")
                    .or_else(|_| self.binary.tool("mysql_install_db"))?;
                // A server from an unpacked tarball: install-db must be told where it is.
                let basedir = self
                    .binary
                    .path()
                    .parent()
                    .and_then(Path::parent)
                    .filter(|prefix| *prefix != Path::new("/usr") && tool.starts_with(prefix))
                    .map(Path::to_path_buf);
                InitProgram::MariadbInstallDb { tool, basedir }
            }
            ServerKind::Mysql => InitProgram::MysqldInitializeInsecure {
                mysqld: self.binary.path().to_owned(),
            },
        };
        let init = DatadirInit {
            program,
            defaults_file: self.defaults_file.clone(),
            datadir: self.settings.datadir.clone(),
            tmpdir: self.prepare_tmpdir()?,
            as_root: running_as_root() && self.settings.user.is_none(),
            timeout,
        };
        initialize_datadir(&init).await.map_err(|e| match e {
            InstanceError::Io(e) => MysqldError::Io(e),
            InstanceError::Command(c) => MysqldError::Command(CommandFailed {
                output_tail: format!("{}\n{}", c.output_tail, self.log_tail(LOG_LINES)),
                ..c
            }),
            InstanceError::Timeout { what, seconds } => MysqldError::Command(CommandFailed {
                command: what,
                status: format!("timed out after {seconds} s"),
                output_tail: self.log_tail(LOG_LINES),
            }),
            other => MysqldError::Command(CommandFailed {
                command: "initialise the datadir".to_owned(),
                status: other.to_string(),
                output_tail: self.log_tail(LOG_LINES),
            }),
        })
    }

    /// Starts the server detached (own process group, output in `<dir>/mysqld.out`) with
    /// `extra_args` after `--defaults-file`, and writes its pid file at once so another process
    /// can stop it even before the server writes it. Returns the pid.
    pub fn start(&self, extra_args: &[String]) -> Result<u32, MysqldError> {
        if let Some(pid) = self.running_pid() {
            return Err(MysqldError::AlreadyRunning {
                defaults_file: self.defaults_file.clone(),
                pid,
            });
        }
        if !self.is_initialized() {
            return Err(MysqldError::NotInitialized {
                datadir: self.settings.datadir.clone(),
            });
        }
        let tmpdir = self.prepare_tmpdir()?;
        for path in [Some(&self.settings.pid_file), self.settings.socket.as_ref()]
            .into_iter()
            .flatten()
        {
            if let Some(parent) = path.parent() {
                private_dir(parent).map_err(|source| {
                    MysqldError::io(parent.to_owned(), "create directory", source)
                })?;
            }
        }
        let out_path = self.console_log();
        use std::os::unix::fs::OpenOptionsExt as _;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&out_path)
            .map_err(|source| MysqldError::io(out_path.clone(), "open", source))?;
        let err = out
            .try_clone()
            .map_err(|source| MysqldError::io(out_path.clone(), "duplicate handle of", source))?;
        let mut command = std::process::Command::new(self.binary.path());
        command.arg(format!("--defaults-file={}", self.defaults_file.display()));
        if running_as_root() && self.settings.user.is_none() {
            command.arg("--user=root");
        }
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .args(extra_args)
            .current_dir(&self.dir)
            .env("TMPDIR", &tmpdir)
            // The server sets its own umask from these (default 0660 and 0700, which leave
            // its files group-readable and writable): owner only.
            .env("UMASK", SERVER_FILE_UMASK)
            .env("UMASK_DIR", SERVER_DIR_UMASK)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| MysqldError::io(self.binary.path().to_owned(), "start", source))?;
        let pid = child.id();
        *self.child_slot() = Some(child);
        write_private(&self.settings.pid_file, format!("{pid}\n").as_bytes()).map_err(
            |source| MysqldError::io(self.settings.pid_file.clone(), "write pid file", source),
        )?;
        tracing::debug!(pid, defaults_file = %self.defaults_file.display(), "mysqld started");
        Ok(pid)
    }

    /// Waits until the server sends its protocol greeting on its TCP port (it only listens
    /// once recovery is done). Fails early, with the log tail, if the process exits.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), MysqldError> {
        let started = Instant::now();
        let address = format!("{}:{}", self.host(), self.port());
        loop {
            let pid = match self.running_pid() {
                Some(pid) => pid,
                None => {
                    let (pid, status) = self.exit_status();
                    return Err(MysqldError::Exited {
                        pid,
                        defaults_file: self.defaults_file.clone(),
                        status,
                        log_tail: self.log_tail(LOG_LINES),
                    });
                }
            };
            let remaining = timeout.saturating_sub(started.elapsed());
            let last_error =
                match probe_greeting(&address, remaining.min(Duration::from_secs(2))).await {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                };
            if started.elapsed() >= timeout {
                return Err(MysqldError::NotReady {
                    pid,
                    address,
                    waited: timeout,
                    last_error,
                    log_tail: self.log_tail(LOG_LINES),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// [`Self::start`] then [`Self::wait_ready`].
    pub async fn start_and_wait(
        &self,
        extra_args: &[String],
        timeout: Duration,
    ) -> Result<u32, MysqldError> {
        let pid = self.start(extra_args)?;
        self.wait_ready(timeout).await?;
        Ok(pid)
    }

    /// Stops the server if running, then starts it with `extra_args` and waits until ready.
    pub async fn restart(
        &self,
        extra_args: &[String],
        grace: Duration,
        timeout: Duration,
    ) -> Result<u32, MysqldError> {
        self.stop(grace).await?;
        self.start_and_wait(extra_args, timeout).await
    }

    /// The pid of this instance's server, if one is running: the child we spawned, else the
    /// pid file's process when its command line names this my.cnf.
    pub fn running_pid(&self) -> Option<u32> {
        {
            let mut slot = self.child_slot();
            if let Some(child) = slot.as_mut()
                && matches!(child.try_wait(), Ok(None))
                && process_alive(child.id())
            {
                return Some(child.id());
            }
        }
        let text = std::fs::read_to_string(&self.settings.pid_file).ok()?;
        let pid = text.trim().parse::<u32>().ok()?;
        is_server_process(pid, &self.defaults_file).then_some(pid)
    }

    /// Shuts the server down: SIGTERM, then SIGKILL if it is still alive after `grace`.
    pub async fn stop(&self, grace: Duration) -> Result<StopOutcome, MysqldError> {
        let Some(pid) = self.running_pid() else {
            self.remove_pid_file(None);
            return Ok(StopOutcome::NotRunning);
        };
        send_signal(pid, Signal::TERM, "SIGTERM")?;
        // A frozen server (`freeze`) acts on SIGTERM only once it runs again.
        send_signal(pid, Signal::CONT, "SIGCONT")?;
        if self.wait_gone(pid, grace).await {
            self.remove_pid_file(Some(pid));
            return Ok(StopOutcome::Terminated);
        }
        tracing::warn!(pid, ?grace, "mysqld ignored SIGTERM; sending SIGKILL");
        self.kill_pid(pid).await?;
        Ok(StopOutcome::Killed)
    }

    /// Stops the running server with SIGSTOP, as a hung process, a dead node or a network cut
    /// look to the manager: it keeps its pid and its connections but answers nothing.
    /// Returns its pid, `None` when no server was running.
    pub fn freeze(&self) -> Result<Option<u32>, MysqldError> {
        self.signal_running(Signal::STOP, "SIGSTOP")
    }

    /// Lets a frozen server run again (SIGCONT). Returns its pid, `None` when none was running.
    pub fn thaw(&self) -> Result<Option<u32>, MysqldError> {
        self.signal_running(Signal::CONT, "SIGCONT")
    }

    fn signal_running(
        &self,
        signal: Signal,
        name: &'static str,
    ) -> Result<Option<u32>, MysqldError> {
        let Some(pid) = self.running_pid() else {
            return Ok(None);
        };
        send_signal(pid, signal, name)?;
        Ok(Some(pid))
    }

    /// Kills the server with SIGKILL (a crash, for failover tests) and waits until it is gone.
    /// Returns `false` when no server was running.
    pub async fn kill(&self) -> Result<bool, MysqldError> {
        match self.running_pid() {
            Some(pid) => self.kill_pid(pid).await.map(|()| true),
            None => Ok(false),
        }
    }

    /// The last `lines` lines of the error log and of the console output.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        let mut files = vec![self.console_log()];
        files.extend(self.settings.log_error.clone());
        for path in files {
            if let Ok(text) = std::fs::read_to_string(&path)
                && !text.trim().is_empty()
            {
                out.push_str(&format!(
                    "--- {} ---\n{}\n",
                    path.display(),
                    tail(&text, lines)
                ));
            }
        }
        out
    }

    /// The server's temporary directory: `tmpdir` from my.cnf, else `<dir>/tmp` (passed as
    /// `TMPDIR`, which the server uses when `tmpdir` is unset). Never a shared `/tmp`: a
    /// starting server deletes every `#sql*` file in its tmpdir, including the temporary
    /// tables of another server that is bootstrapping next to it.
    pub fn tmpdir(&self) -> PathBuf {
        self.settings
            .tmpdir
            .clone()
            .unwrap_or_else(|| self.dir.join("tmp"))
    }

    fn prepare_tmpdir(&self) -> Result<PathBuf, MysqldError> {
        let tmpdir = self.tmpdir();
        private_dir(&tmpdir)
            .map_err(|source| MysqldError::io(tmpdir.clone(), "create tmpdir", source))?;
        Ok(tmpdir)
    }

    fn console_log(&self) -> PathBuf {
        self.dir.join("mysqld.out")
    }

    fn child_slot(&self) -> MutexGuard<'_, Option<Child>> {
        // A poisoned lock only means another thread panicked while holding it; the Child
        // inside is still valid.
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn exit_status(&self) -> (u32, String) {
        let mut slot = self.child_slot();
        match slot.as_mut() {
            Some(child) => {
                let status = match child.try_wait() {
                    Ok(Some(status)) => status.to_string(),
                    _ => "exited (zombie not yet reaped)".to_owned(),
                };
                (child.id(), status)
            }
            None => (
                0,
                "not running (no live process for the pid file)".to_owned(),
            ),
        }
    }

    async fn kill_pid(&self, pid: u32) -> Result<(), MysqldError> {
        send_signal(pid, Signal::KILL, "SIGKILL")?;
        if self.wait_gone(pid, KILL_WAIT).await {
            // A killed server leaves its pid file behind.
            self.remove_pid_file(Some(pid));
            Ok(())
        } else {
            Err(MysqldError::StopTimeout {
                pid,
                waited: KILL_WAIT,
            })
        }
    }

    async fn wait_gone(&self, pid: u32, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            // Our own child is gone once collected: its leader shows as a zombie while its
            // other threads still exit, and a zombie left uncollected holds its pid, which
            // MySQL finds in its socket's lock file and refuses to start beside (MariaDB does
            // not look).
            let gone = match self.collect(pid) {
                Some(collected) => collected,
                None => !process_alive(pid),
            };
            if gone {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether our child `pid` has ended and been collected; `None` when `pid` is not our
    /// child.
    fn collect(&self, pid: u32) -> Option<bool> {
        let mut slot = self.child_slot();
        let child = slot.as_mut().filter(|c| c.id() == pid)?;
        let collected = match child.try_wait() {
            Ok(None) => false,
            Ok(Some(_)) => true,
            Err(_) => !process_alive(pid),
        };
        if collected {
            *slot = None;
        }
        Some(collected)
    }

    fn remove_pid_file(&self, pid: Option<u32>) {
        let path = &self.settings.pid_file;
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let recorded = text.trim().parse::<u32>().ok();
        let stale = match (pid, recorded) {
            (Some(pid), Some(r)) => r == pid,
            (_, Some(r)) => !is_server_process(r, &self.defaults_file),
            (_, None) => true,
        };
        if stale {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn absolute(dir: &Path) -> Result<PathBuf, MysqldError> {
    std::fs::canonicalize(dir).map_err(|source| MysqldError::io(dir.to_owned(), "resolve", source))
}

/// Connects to `address` and reads the first packet ([`read_greeting`]).
async fn probe_greeting(address: &str, limit: Duration) -> Result<(), String> {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        read_greeting(&mut stream).await
    };
    tokio::time::timeout(limit, attempt)
        .await
        .unwrap_or_else(|_| Err(format!("no greeting within {limit:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn greeting_probe_tells_closed_ports_and_non_mysql_servers_apart() {
        let port = free_port().unwrap();
        let err = probe_greeting(&format!("127.0.0.1:{port}"), Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(err.starts_with("connect"), "{err}");

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for payload in [
                &b"\x0a5.5.5-fake\0"[..],
                &b"\xff\x10\x04Too many connections"[..],
            ] {
                let (mut s, _) = listener.accept().await.unwrap();
                let len = payload.len() as u8;
                s.write_all(&[len, 0, 0, 0]).await.unwrap();
                s.write_all(payload).await.unwrap();
            }
        });
        probe_greeting(&addr.to_string(), Duration::from_secs(5))
            .await
            .unwrap();
        let err = probe_greeting(&addr.to_string(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(err.contains("Too many connections"), "{err}");
        server.await.unwrap();
    }

    #[test]
    fn create_writes_mycnf_and_requires_initialisation_before_start() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("inst");
        let datadir = tmp.path().join("inst/data");
        let text = format!(
            "[mysqld]\ndatadir={}\npid_file=mysqld.pid\nport=1\n",
            datadir.display()
        );
        let binary = ServerBinary::for_tests(Path::new("/nonexistent/mysqld"), ServerKind::Mysql);
        let m = LocalMysqld::create(binary, &dir, &text).unwrap();
        assert_eq!(std::fs::read_to_string(m.defaults_file()).unwrap(), text);
        assert_eq!(m.settings().pid_file, datadir.join("mysqld.pid"));
        assert!(!m.is_initialized());
        assert!(m.running_pid().is_none());
        let err = m.start(&[]).unwrap_err();
        assert!(matches!(err, MysqldError::NotInitialized { .. }), "{err}");
    }
}
