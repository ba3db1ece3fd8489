//! Copying one instance's data onto another.
//!
//! MariaDB has no `CLONE INSTANCE`: the copy is a physical backup streamed from the donor.
//! The two halves run where the files are — the backup on the donor's host, the extraction
//! on the recipient's — and the caller carries the bytes between them: a pipe for
//! `moco local`, the network between two agents in a Pod. In order:
//!
//! 1. the caller reads the donor's `@@gtid_binlog_state` (a restored datadir has no binlog);
//! 2. donor: [`start_backup`] runs `mariadb-backup --backup --stream=xbstream --slave-info
//!    --safe-slave-backup`; its output is the stream;
//! 3. recipient (server stopped): [`extract`] empties the datadir and feeds the stream to
//!    `mbstream -x`; [`BackupStream::finish`] checks the donor side ended well;
//! 4. recipient: [`prepare`] runs `mariadb-backup --prepare` and returns the copy's GTID
//!    position (`xtrabackup_slave_info` from a replica donor, `xtrabackup_binlog_info` from
//!    a primary);
//! 5. recipient (server started): [`seed`] sets `gtid_binlog_state` to the donor's history
//!    up to the position and `gtid_slave_pos` to the position.
//!
//! MySQL copies with [`clone_instance_from`] (`CLONE INSTANCE FROM`, run on the recipient).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use moco_cluster::ports::Credentials;
use moco_core::gtid::GtidSet;
use mysql_async::prelude::Queryable;
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::process::{Child, ChildStdout, Command};

use super::InstanceError;
use crate::failure::{CommandFailed, file_tail};
use crate::mysql::{self, MysqlInstance};
use moco_core::option_file::{quote_value, tls_client_options};

/// The donor side of a MariaDB copy.
#[derive(Clone, Debug)]
pub struct BackupSource {
    /// `mariadb-backup` (or `mariabackup`).
    pub tool: PathBuf,
    /// The donor's my.cnf.
    pub defaults_file: PathBuf,
    /// The donor's datadir (mariadb-backup reads its files directly).
    pub datadir: PathBuf,
    /// Host of the donor's SQL port.
    pub host: String,
    /// The donor's SQL port.
    pub port: u16,
    /// `moco-clone-donor`.
    pub credentials: Credentials,
    /// The CA that verifies the donor's certificate, when the donor serves TLS (then the
    /// tool connects with TLS and checks the donor's name).
    pub ssl_ca: Option<PathBuf>,
    /// mariadb-backup's working directory (`--target-dir`).
    pub scratch_dir: PathBuf,
    /// Where the tool's messages go (appended).
    pub log: PathBuf,
    /// Added to the tool's nice value (0 keeps this process's): [`BACKUP_NICE`] for a scheduled
    /// backup, 0 for a clone, which a new instance waits for.
    pub nice: i32,
}

/// The nice value of a backup's `mariadb-backup`: it gives way to the servers for CPU (and,
/// under Linux's I/O schedulers that derive I/O priority from it, for the disk). Not lower:
/// the tool must copy the redo log faster than the donor writes it, or the backup fails.
pub const BACKUP_NICE: i32 = 10;

/// A running backup: its standard output is the stream.
#[derive(Debug)]
pub struct BackupStream {
    child: Child,
    command: String,
    log: PathBuf,
    /// The 0600 option file holding the donor's credentials; removed when the backup ends.
    options: PathBuf,
}

impl Drop for BackupStream {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.options);
    }
}

/// The option file `mariadb-backup` reads instead of a password on its command line (where
/// any local user sees it in `ps`): the donor's my.cnf, then the client credentials and,
/// with a CA, TLS that verifies the donor.
fn backup_options(defaults_file: &Path, credentials: &Credentials, ca: Option<&Path>) -> String {
    let mut text = format!(
        "!include {}\n[mariadb-backup]\nuser={}\npassword={}\n",
        defaults_file.display(),
        quote_value(&credentials.user),
        quote_value(&credentials.password)
    );
    text.push_str(&tls_client_options(ca));
    text
}

/// Writes `contents` to a new file readable only by its owner.
pub fn write_private(path: &Path, contents: &str) -> Result<(), InstanceError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| InstanceError::io(path, "create", e))?;
    file.write_all(contents.as_bytes())
        .map_err(|e| InstanceError::io(path, "write", e))
}

/// The recipient side of a MariaDB copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreTarget {
    /// `mariadb-backup` (for `--prepare`).
    pub backup_tool: PathBuf,
    /// `mbstream`.
    pub mbstream: PathBuf,
    /// The recipient's datadir; emptied first.
    pub datadir: PathBuf,
    /// Where the tools' messages go (appended).
    pub log: PathBuf,
}

/// `path` opened for appending, as a child's standard output or error.
pub fn log_handle(path: &Path) -> Result<Stdio, InstanceError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Stdio::from)
        .map_err(|e| InstanceError::io(path, "open", e))
}

fn failed(command: String, status: impl ToString, log: &Path) -> InstanceError {
    InstanceError::Command(CommandFailed {
        command,
        status: status.to_string(),
        output_tail: format!("{}:\n{}", log.display(), file_tail(log)),
    })
}

/// Starts `mariadb-backup --backup` on the donor; read the stream from
/// [`BackupStream::take_stream`], then call [`BackupStream::finish`].
pub fn start_backup(source: &BackupSource) -> Result<BackupStream, InstanceError> {
    std::fs::create_dir_all(&source.scratch_dir)
        .map_err(|e| InstanceError::io(&source.scratch_dir, "create", e))?;
    let options = source.scratch_dir.with_extension("client.cnf");
    write_private(
        &options,
        &backup_options(
            &source.defaults_file,
            &source.credentials,
            source.ssl_ca.as_deref(),
        ),
    )?;
    let args = backup_args(source, &options);
    let command = format!("{} {}", source.tool.display(), args.join(" "));
    let mut tool = Command::new(&source.tool);
    tool.args(&args)
        .env("UMASK", crate::modes::SERVER_FILE_UMASK)
        .env("UMASK_DIR", crate::modes::SERVER_DIR_UMASK)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_handle(&source.log)?)
        .kill_on_drop(true);
    let child = spawn_niced(&mut tool, source.nice).map_err(|e| {
        let _ = std::fs::remove_file(&options);
        InstanceError::io(&source.tool, "run", e)
    })?;
    if let Some(out) = &child.stdout {
        set_pipe_size(out);
    }
    Ok(BackupStream {
        child,
        command,
        log: source.log.clone(),
        options,
    })
}

/// Size of the pipes a copy streams through.
const PIPE_SIZE: usize = 1 << 20;

/// Gives a pipe of a copy [`PIPE_SIZE`] bytes of buffer. With Linux's 64 KiB default, every
/// 1 MiB piece of the stream woke the reader and the writer sixteen times: a restore's
/// extraction of 1 GB took 4.4–6.5 s instead of 1.7–2.4 s (measured). A refusal (a limit on
/// pipe sizes, `/proc/sys/fs/pipe-max-size`) only costs speed.
fn set_pipe_size(pipe: impl std::os::fd::AsFd) {
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(pipe, PIPE_SIZE) {
        tracing::debug!(error = %e, "the pipe keeps its default size");
    }
}

/// Spawns `command` with its nice value raised by `nice`: from a thread of its own that lowers its own
/// priority first, since a child inherits its parent thread's nice value and a nice value
/// cannot be raised back without privileges (so no thread of this process's pools may do it).
fn spawn_niced(command: &mut Command, nice: i32) -> std::io::Result<tokio::process::Child> {
    if nice == 0 {
        return command.spawn();
    }
    let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _entered = runtime.enter();
                let current = rustix::process::getpriority_process(None)?;
                rustix::process::setpriority_process(None, current.saturating_add(nice).min(19))?;
                command.spawn()
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the spawning thread panicked")))
    })
}

/// The command line of the donor's backup. It carries no secret: the credentials are in the
/// `options` file.
fn backup_args(source: &BackupSource, options: &Path) -> Vec<String> {
    vec![
        format!("--defaults-file={}", options.display()),
        "--backup".to_owned(),
        "--stream=xbstream".to_owned(),
        "--slave-info".to_owned(),
        "--safe-slave-backup".to_owned(),
        // The redo log is polled every 10 ms instead of every second: the copy ends with
        // commits blocked (BACKUP STAGE BLOCK_COMMIT) until the log thread has seen the last
        // LSN, so the default held every write on the donor for about a second.
        "--log-copy-interval=10".to_owned(),
        format!("--host={}", source.host),
        format!("--port={}", source.port),
        format!("--datadir={}", source.datadir.display()),
        format!("--target-dir={}", source.scratch_dir.display()),
    ]
}

impl BackupStream {
    /// The backup's bytes (once).
    pub fn take_stream(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The tool's process id, until it was waited for.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Waits for the backup to end and fails unless it succeeded.
    pub async fn finish(mut self) -> Result<(), InstanceError> {
        let status = self
            .child
            .wait()
            .await
            .map_err(|e| InstanceError::io(&self.command, "wait for", e))?;
        if status.success() {
            Ok(())
        } else {
            Err(failed(self.command.clone(), status, &self.log))
        }
    }
}

/// Empties `dir` (creating it when missing).
pub fn wipe_dir(dir: &Path) -> Result<(), InstanceError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(InstanceError::io(dir, "remove", e)),
    }
    std::fs::create_dir_all(dir).map_err(|e| InstanceError::io(dir, "create", e))
}

/// Empties the recipient's datadir and unpacks `stream` into it with `mbstream -x`; returns
/// the number of bytes received. The server must be stopped.
pub async fn extract<R>(stream: R, target: &RestoreTarget) -> Result<u64, InstanceError>
where
    R: AsyncRead + Unpin,
{
    wipe_dir(&target.datadir)?;
    let command = format!(
        "{} -x -C {}",
        target.mbstream.display(),
        target.datadir.display()
    );
    let mut child = Command::new(&target.mbstream)
        .arg("-x")
        .env("UMASK", crate::modes::SERVER_FILE_UMASK)
        .env("UMASK_DIR", crate::modes::SERVER_DIR_UMASK)
        .arg("-C")
        .arg(&target.datadir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log_handle(&target.log)?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| InstanceError::io(&target.mbstream, "run", e))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| InstanceError::Invalid(format!("{command}: no standard input")))?;
    set_pipe_size(&stdin);
    // Large writes: 8 KiB ones (tokio::io::copy's) tripled the extraction's system time.
    let mut stream = tokio::io::BufReader::with_capacity(1 << 20, stream);
    let copied = tokio::io::copy_buf(&mut stream, &mut stdin).await;
    // Closing stdin ends the extraction whether or not the copy finished.
    let _ = stdin.shutdown().await;
    drop(stdin);
    let status = child
        .wait()
        .await
        .map_err(|e| InstanceError::io(&target.mbstream, "wait for", e))?;
    let bytes = copied.map_err(|e| InstanceError::io(&target.mbstream, "feed", e))?;
    if !status.success() {
        return Err(failed(command, status, &target.log));
    }
    Ok(bytes)
}

/// `mariadb-backup --prepare` on the extracted copy; returns its GTID position.
pub async fn prepare(target: &RestoreTarget) -> Result<GtidSet, InstanceError> {
    let command = format!(
        "{} --prepare --target-dir={}",
        target.backup_tool.display(),
        target.datadir.display()
    );
    let status = Command::new(&target.backup_tool)
        .arg("--prepare")
        .env("UMASK", crate::modes::SERVER_FILE_UMASK)
        .env("UMASK_DIR", crate::modes::SERVER_DIR_UMASK)
        .arg(format!("--target-dir={}", target.datadir.display()))
        .stdin(Stdio::null())
        .stdout(log_handle(&target.log)?)
        .stderr(log_handle(&target.log)?)
        .kill_on_drop(true)
        .status()
        .await
        .map_err(|e| InstanceError::io(&target.backup_tool, "run --prepare", e))?;
    if !status.success() {
        return Err(failed(command, status, &target.log));
    }
    backup_position(&target.datadir)
}

/// The GTID position a prepared copy corresponds to: `xtrabackup_slave_info`'s
/// `gtid_slave_pos` (replica donor), else the third field of `xtrabackup_binlog_info`
/// (primary donor); empty when neither names one.
pub fn backup_position(datadir: &Path) -> Result<GtidSet, InstanceError> {
    let slave_info = datadir.join("xtrabackup_slave_info");
    if let Ok(text) = std::fs::read_to_string(&slave_info)
        && let Ok(pos) = mysql::parse_xtrabackup_slave_info(&text)
        && !pos.is_empty()
    {
        return Ok(pos);
    }
    let binlog_info = datadir.join("xtrabackup_binlog_info");
    match std::fs::read_to_string(&binlog_info) {
        Ok(text) => mysql::parse_xtrabackup_binlog_info(&text)
            .map_err(|e| InstanceError::Invalid(format!("{}: {e}", binlog_info.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(GtidSet::new()),
        Err(e) => Err(InstanceError::io(binlog_info, "read", e)),
    }
}

/// MariaDB's binlog state file in a datadir (`<log_bin>.state`; MOCO's `log_bin` is `binlog`).
pub const BINLOG_STATE_FILE: &str = "binlog.state";

/// Gives a prepared copy (which has no binlog file) the binlog state [`seed`] would set: the
/// donor's history up to `position`. Its first start reads it, and the seed then only sets
/// `gtid_slave_pos`: setting the state on the running copy waited 0.8 s for InnoDB.
pub fn write_binlog_state(
    datadir: &Path,
    donor_state: &GtidSet,
    position: &GtidSet,
) -> Result<(), InstanceError> {
    let state = mysql::clone_binlog_state(donor_state, position);
    let path = datadir.join(BINLOG_STATE_FILE);
    crate::modes::write_atomic(
        &path,
        mysql::sql::mariadb_binlog_state_file(&state).as_bytes(),
        0o640,
    )
    .map_err(|e| InstanceError::io(&path, "write", e))
}

/// Seeds the started copy: replication cleared, `gtid_binlog_state` = the donor's history
/// up to `position` ([`mysql::clone_binlog_state`]), `gtid_slave_pos` = `position`.
pub async fn seed(
    recipient: &MysqlInstance,
    donor_state: &GtidSet,
    position: &GtidSet,
) -> Result<(), InstanceError> {
    let state = mysql::clone_binlog_state(donor_state, position);
    Ok(mysql::seed_mariadb_clone(recipient, &state, position).await?)
}

/// The statements of a MySQL clone from `donor_host:donor_port`, run on the recipient. With
/// `ssl_ca` (the donor serves TLS), the copy travels encrypted and trusts only that CA file
/// (`clone_ssl_ca`, `REQUIRE SSL`); without it, MySQL encrypts when the donor offers TLS and
/// checks nothing.
pub fn clone_statements(
    donor_host: &str,
    donor_port: u16,
    donor: &Credentials,
    ssl_ca: Option<&Path>,
) -> Vec<String> {
    let mut out = vec![format!(
        "SET GLOBAL clone_valid_donor_list = {}",
        mysql::sql::quote(&format!("{donor_host}:{donor_port}"))
    )];
    if let Some(ca) = ssl_ca {
        out.push(format!(
            "SET GLOBAL clone_ssl_ca = {}",
            mysql::sql::quote(&ca.display().to_string())
        ));
    }
    out.push(format!(
        "CLONE INSTANCE FROM {}:{donor_port} IDENTIFIED BY {}{}",
        mysql::sql::account(&donor.user, donor_host),
        mysql::sql::quote(&donor.password),
        if ssl_ca.is_some() { " REQUIRE SSL" } else { "" }
    ));
    out
}

/// MySQL: `CLONE INSTANCE FROM` the donor, run on the recipient (as its admin), with
/// [`clone_statements`]. The recipient shuts down after the copy (error 3707 when nothing
/// restarts it, or a dropped connection), which counts as success: the caller starts it again.
pub async fn clone_instance_from(
    recipient: &MysqlInstance,
    donor_host: &str,
    donor_port: u16,
    donor: &Credentials,
    ssl_ca: Option<&Path>,
) -> Result<(), InstanceError> {
    const ER_CLONE_RESTART: u16 = 3707;
    let context = format!(
        "{}: CLONE INSTANCE from {donor_host}:{donor_port}",
        recipient.target()
    );
    let sql_failed = |e: mysql_async::Error| InstanceError::Invalid(format!("{context}: {e}"));
    let mut conn = recipient.conn().await?;
    let mut statements = clone_statements(donor_host, donor_port, donor, ssl_ca);
    let clone = statements.pop().unwrap_or_default();
    for statement in statements {
        conn.query_drop(statement).await.map_err(sql_failed)?;
    }
    match conn.query_drop(&clone).await {
        Ok(()) => Ok(()),
        Err(mysql_async::Error::Server(e)) if e.code == ER_CLONE_RESTART => Ok(()),
        Err(mysql_async::Error::Io(_)) => Ok(()),
        Err(e) => Err(sql_failed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the donor's CA the copy must be encrypted and trust that CA only; without it, the
    /// statements are what they always were.
    #[test]
    fn a_mysql_clone_requires_ssl_and_the_ca_when_given_one() {
        let donor = Credentials {
            user: "moco-clone-donor".to_owned(),
            password: "p'w".to_owned(),
        };
        let plain = clone_statements("moco-db-0.moco-db.ns.svc", 3306, &donor, None);
        assert_eq!(
            plain,
            [
                "SET GLOBAL clone_valid_donor_list = 'moco-db-0.moco-db.ns.svc:3306'",
                "CLONE INSTANCE FROM 'moco-clone-donor'@'moco-db-0.moco-db.ns.svc':3306 \
                 IDENTIFIED BY 'p''w'",
            ]
        );
        let tls = clone_statements(
            "moco-db-0.moco-db.ns.svc",
            3306,
            &donor,
            Some(Path::new("/mysql-tls/ca.crt")),
        );
        assert_eq!(tls.len(), 3);
        assert_eq!(tls[0], plain[0]);
        assert_eq!(tls[1], "SET GLOBAL clone_ssl_ca = '/mysql-tls/ca.crt'");
        assert_eq!(tls[2], format!("{} REQUIRE SSL", plain[1]));
    }

    /// Regression (docs/benchmarks.md, growing a cluster): with mariadb-backup's default
    /// redo-log polling of 1 s, the end of every copy blocked the donor's commits for about a
    /// second; the copy polls every 10 ms. No password is on the command line.
    #[test]
    fn backup_polls_the_redo_log_often_and_keeps_the_password_off_the_command_line() {
        let source = BackupSource {
            tool: "mariadb-backup".into(),
            defaults_file: "/d/my.cnf".into(),
            datadir: "/d/data".into(),
            host: "127.0.0.1".to_owned(),
            port: 3306,
            credentials: Credentials {
                user: "moco-clone-donor".to_owned(),
                password: "s3cret".to_owned(),
            },
            ssl_ca: None,
            scratch_dir: "/d/scratch".into(),
            log: "/d/log".into(),
            nice: 0,
        };
        let args = backup_args(&source, Path::new("/d/options.cnf"));
        assert!(
            args.contains(&"--log-copy-interval=10".to_owned()),
            "{args:?}"
        );
        assert!(args.iter().all(|a| !a.contains("s3cret")), "{args:?}");
    }

    #[test]
    fn positions_from_backup_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(backup_position(dir.path()).unwrap().is_empty());
        std::fs::write(
            dir.path().join("xtrabackup_binlog_info"),
            "binlog.000001\t5\t0-1-7\n",
        )
        .unwrap();
        assert_eq!(
            backup_position(dir.path()).unwrap().to_string(),
            GtidSet::from_mariadb("0-1-7").unwrap().to_string()
        );
        std::fs::write(
            dir.path().join("xtrabackup_slave_info"),
            "SET GLOBAL gtid_slave_pos = '0-1-9';\nCHANGE MASTER TO master_use_gtid = slave_pos;\n",
        )
        .unwrap();
        assert_eq!(
            backup_position(dir.path()).unwrap(),
            GtidSet::from_mariadb("0-1-9").unwrap()
        );
    }

    /// The recipient half takes any byte stream: a stream that is not xbstream makes
    /// `mbstream` fail, and the error names the command and shows its log.
    #[tokio::test]
    async fn extract_reports_a_bad_stream() {
        let Ok(mbstream) = which("mbstream") else {
            panic!("mbstream not found: install mariadb-backup (scripts/test.sh does)");
        };
        let dir = tempfile::tempdir().unwrap();
        let target = RestoreTarget {
            backup_tool: "/nonexistent".into(),
            mbstream,
            datadir: dir.path().join("data"),
            log: dir.path().join("clone.log"),
        };
        std::fs::create_dir_all(&target.datadir).unwrap();
        std::fs::write(target.datadir.join("stale"), b"x").unwrap();
        let garbage: &[u8] = b"this is not an xbstream archive";
        let e = extract(garbage, &target).await.unwrap_err();
        assert!(e.to_string().contains("mbstream"), "{e}");
        assert!(
            !target.datadir.join("stale").exists(),
            "datadir emptied first"
        );
    }

    /// Regression (hardening review): the donor's password was an argument of
    /// `mariadb-backup`, visible to any local user in `ps` until the tool masked it.
    #[tokio::test]
    async fn the_backup_password_is_never_on_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "s3cr#t \"quoted\" \\ pass";
        let source = BackupSource {
            // A tool that prints its arguments: what `ps` would show.
            tool: "/bin/echo".into(),
            defaults_file: dir.path().join("my.cnf"),
            datadir: dir.path().join("data"),
            host: "127.0.0.1".into(),
            port: 3306,
            credentials: Credentials {
                user: "moco-clone-donor".into(),
                password: secret.into(),
            },
            ssl_ca: None,
            scratch_dir: dir.path().join("scratch"),
            log: dir.path().join("clone.log"),
            nice: 0,
        };
        let mut backup = start_backup(&source).unwrap();
        let options = source.scratch_dir.with_extension("client.cnf");
        let text = std::fs::read_to_string(&options).unwrap();
        assert!(text.starts_with(&format!("!include {}\n", source.defaults_file.display())));
        assert!(
            text.contains(r#"password="s3cr#t \"quoted\" \\ pass""#),
            "{text}"
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&options).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "option file mode {mode:o}");
        let mut argv = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut backup.take_stream().unwrap(), &mut argv)
            .await
            .unwrap();
        backup.finish().await.unwrap();
        assert!(argv.contains("--defaults-file="), "{argv}");
        assert!(
            !argv.contains("s3cr"),
            "password on the command line: {argv}"
        );
        assert!(!options.exists(), "the option file outlived the backup");
    }

    fn which(name: &str) -> Result<PathBuf, ()> {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .ok_or(())
    }
}
