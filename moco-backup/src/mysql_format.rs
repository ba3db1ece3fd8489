//! MOCO's own MySQL backup format, as pure data: the command lines MOCO's backup and restore
//! Jobs run, the choices they make, and the bucket keys they read and write. Nothing here runs
//! a process or touches the network, so every rule is unit-tested against what MOCO does (its
//! `backup/`, `pkg/bkop/` and `backup/key.go`); a runner executes the [`CommandLine`]s.
//!
//! Following MOCO keeps two promises: a MOCO user's existing backups restore here, and new
//! MySQL backups look exactly like MOCO's, so MOCO (or anyone's tooling built for it) can
//! restore them in turn.
//!
//! Layout in the bucket (`backup/key.go`), all times UTC:
//!
//! | key | written by | holds |
//! |---|---|---|
//! | `moco/<ns>/<name>/<YYYYMMDD-hhmmss>/dump.tar` | the backup started at that time | `tar` of `mysqlsh util dump-instance`'s directory `dump/` |
//! | `moco/<ns>/<name>/<YYYYMMDD-hhmmss>/binlog.tar.zst` | the **next** backup | `tar \| zstd` of the binlogs from this backup's GTID set to the next backup |
//!
//! The binlog tarball of backup N sits in backup N−1's folder: a folder's dump plus the same
//! folder's binlogs reach every second up to the next backup, which is what a restore needs.
//!
//! Where this module departs from MOCO, on purpose (each is named where it happens):
//! * passwords never appear in an argument (MOCO passes `-p<password>`, visible in `ps` on the
//!   node): `mysqlsh` reads it from stdin, `mysqlbinlog` and `mysql` from a 0600 option file;
//! * a restore point the stored binlogs cannot reach is an error naming the latest time that
//!   can be reached, where MOCO loads the dump alone and reports success (the harm of #563);
//! * `spec.restore.users` and `spec.restore.schema` are checked before anything runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::num::{NonZeroU32, NonZeroU64};

use moco_adapters::mysql::option_file::quote_value;
use moco_adapters::mysql::{Account, Dialect};
use moco_core::facts::Role;
use moco_core::resources::ByteRate;
use moco_core::time::Timestamp;

use crate::physical::folder_name;

/// MySQL's classic protocol port, where MOCO's Jobs connect (`constants.MySQLPort`).
pub const MYSQL_PORT: u16 = 3306;
/// The Jobs' working directory (`--work-dir`, the `work` volume).
pub const WORK_DIR: &str = "/work";
/// The first key component of every backup object.
pub const KEY_ROOT: &str = "moco";
/// The name of the dump tarball in a backup folder.
pub const DUMP_FILE: &str = "dump.tar";
/// The name of the binlog tarball in a backup folder.
pub const BINLOG_FILE: &str = "binlog.tar.zst";
/// The directory under the work dir that `dump-instance` writes and `dump.tar` holds.
pub const DUMP_DIR: &str = "dump";
/// The directory under the work dir that `mysqlbinlog` writes and `binlog.tar.zst` holds.
pub const BINLOG_DIR: &str = "binlog";
/// The directory under the work dir that `mysqlbinlog` uses for temporary files on replay
/// (the container's root file system is read-only, and the files can be large).
pub const TMP_DIR: &str = "tmp";
/// The prefix of MySQL's binary log files in MOCO's instances (`log_bin = binlog`).
pub const BINLOG_PREFIX: &str = "binlog.";
/// The warning MOCO records in `status.backup.warnings` when no instance is known to hold
/// every binlog since the last backup (#603).
pub const SKIP_BINLOG_WARNING: &str =
    "skip binlog backups because some binlog files may be missing";
/// The CRD field [`RestoreFilter`] reports for a bad user list.
pub const USERS_FIELD: &str = "spec.restore.users";
/// The CRD field [`RestoreFilter`] reports for a bad schema.
pub const SCHEMA_FIELD: &str = "spec.restore.schema";
/// The longest schema name MySQL accepts.
const MAX_SCHEMA_LEN: usize = 64;

// ---------------------------------------------------------------------------------------------
// Data types
// ---------------------------------------------------------------------------------------------

/// One process to start: what a runner hands to `Command`. It never holds a password:
/// [`CommandLine::password`] says how the runner, which holds it, passes it on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    /// The program, looked up in `PATH` (MOCO's backup image ships all of them).
    pub program: String,
    /// Its arguments, each one `argv` element (no shell quoting).
    pub args: Vec<String>,
    /// Variables set on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// How the connecting account's password reaches the process.
    pub password: PasswordInput,
}

/// How a process gets its password without it being an argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordInput {
    /// It does not connect to a server.
    None,
    /// Write the password to its stdin, then close stdin (`mysqlsh --passwords-from-stdin`).
    /// `mysqlsh` then prints a prompt without a line break; forward its output line by line
    /// and end that line, or a line-based log shipper holds it back (the reason MOCO moved to
    /// `-p<password>` in PR #605).
    Stdin,
    /// Write [`client_option_file`] to `path` (mode 0600) before the start and remove it after:
    /// the command line names it with `--defaults-extra-file`.
    OptionFile {
        /// Where the file goes.
        path: String,
    },
}

/// Processes connected stdout to stdin, in order. The first one's stdin and the last one's
/// stdout are the runner's: an object being uploaded or downloaded, or nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pipeline {
    /// The stages, the first one first.
    pub stages: Vec<CommandLine>,
}

/// A MySQL server a Job connects to: the Pod IP and MOCO's port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// A host name or an IP address (IPv6 without brackets).
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

/// The previous backup, from `status.backup` of the MySQLCluster: what the next backup
/// continues from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreviousBackup {
    /// `time`: when it started; `None` when there has been no backup.
    pub time: Option<Timestamp>,
    /// `sourceIndex`: the instance it was taken from.
    pub source_index: u32,
    /// `sourceUUID`: that instance's `server_uuid` then.
    pub source_uuid: String,
    /// `uuidSet`: the `server_uuid` of every instance ready then, by ordinal as text (MOCO's
    /// JSON map). Empty in statuses written before MOCO had it (#604).
    pub uuid_set: BTreeMap<String, String>,
    /// `binlogFilename`: the source's current binlog file when the backup started.
    pub binlog_filename: String,
    /// `gtidSet`: `gtid_executed` of the dump, as MOCO stored it.
    pub gtid_set: String,
}

/// An instance that is ready now (its Pod's Ready condition is true), with what the backup Job
/// read from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadyInstance {
    /// Its ordinal.
    pub index: u32,
    /// Its `@@server_uuid` now.
    pub server_uuid: String,
    /// Primary or replica (the cluster's `status.currentPrimaryIndex`).
    pub role: Role,
}

/// Where a backup is taken from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceChoice {
    /// The instance to dump.
    pub index: u32,
    /// Whether the binlogs since the previous backup are fetched too.
    pub take_binlog: bool,
    /// For `status.backup.warnings`: [`SKIP_BINLOG_WARNING`] when binlogs are skipped although
    /// there was a previous backup.
    pub warning: Option<&'static str>,
    /// The new `status.backup.uuidSet`: every ready instance's `server_uuid`.
    pub uuid_set: BTreeMap<String, String>,
}

/// What kind of backup object a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// `dump.tar`.
    Dump,
    /// `binlog.tar.zst`.
    Binlog,
}

/// What to download and apply to reach a restore point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestorePlan {
    /// The dump to load: the newest at or before the point.
    pub dump_key: String,
    /// When that dump was taken.
    pub dump_time: Timestamp,
    /// The binlog tarballs to replay, in order, up to [`RestorePlan::stop_at`]. Empty when the
    /// point is the dump's own time. With MOCO's layout one tarball always suffices: the one in
    /// the dump's folder reaches the next backup, and the point is before it.
    pub binlog_keys: Vec<String>,
    /// `--stop-datetime` of the replay: the restore point (transactions committed in that
    /// second or later are left out, as `mysqlbinlog` does). `None` when nothing is replayed.
    pub stop_at: Option<Timestamp>,
}

/// The optional filters of `spec.restore`, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreFilter {
    /// `schema`: the one schema to load and replay.
    pub schema: Option<String>,
    /// `users`: the accounts to load, as given (comma-separated `user@host`).
    pub users: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// A `spec.restore` filter that would not do what its user meant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestoreSpecError {
    /// An entry of `spec.restore.users`.
    #[error("{field}: entry {entry:?}: {reason}")]
    Users {
        /// Always [`USERS_FIELD`].
        field: &'static str,
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `spec.restore.schema`.
    #[error("{field}: {schema:?}: {reason}")]
    Schema {
        /// Always [`SCHEMA_FIELD`].
        field: &'static str,
        /// The value as written.
        schema: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A restore point the stored backups cannot reach.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestorePointError {
    /// There is no dump at all under the prefix.
    #[error("no backup under {prefix}")]
    NoBackup {
        /// The cluster's key prefix.
        prefix: String,
    },
    /// The point is before the first dump.
    #[error(
        "restore point {point} is before the first backup; the earliest restorable time is {earliest}"
    )]
    BeforeFirstBackup {
        /// The requested point.
        point: Timestamp,
        /// The oldest dump's time.
        earliest: Timestamp,
    },
    /// The binlogs from the dump before the point to the next backup are not stored (that
    /// backup skipped or failed them): only the dump's own time is reachable.
    #[error(
        "restore point {point} needs the binlogs after the backup of {dump_time}, which the backup of {next_backup} did not store; the latest restorable time at or before it is {dump_time}"
    )]
    BinlogMissing {
        /// The requested point.
        point: Timestamp,
        /// The newest dump at or before it.
        dump_time: Timestamp,
        /// The backup that should have stored them.
        next_backup: Timestamp,
    },
    /// The point is after the newest backup, whose binlogs only the next backup will store.
    #[error(
        "restore point {point} is after the newest backup ({latest}), and its binlogs are stored only by the next backup; the latest restorable time is {latest}"
    )]
    AfterLatestBackup {
        /// The requested point.
        point: Timestamp,
        /// The newest dump's time.
        latest: Timestamp,
    },
}

/// Everything else that stops a backup or restore step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// No instance can be backed up (MOCO's message).
    #[error("no ready pod exists")]
    NoReadyInstance,
    /// `SHOW BINARY LOGS` listed nothing on the chosen source.
    #[error("no binlog files found")]
    NoBinaryLogs,
    /// The extracted binlog tarball holds no `binlog.*` file.
    #[error("no binlog files in {dir}")]
    NoBinlogFiles {
        /// The directory searched.
        dir: String,
    },
    /// Not a `YYYYMMDD-hhmmss` time.
    #[error("invalid backup time {text:?}: expected YYYYMMDD-hhmmss")]
    BadBackupTime {
        /// The rejected text.
        text: String,
    },
    /// The dump's `@.json` does not say which GTIDs it holds.
    #[error("dump metadata @.json: {reason}")]
    DumpMetadata {
        /// What is wrong.
        reason: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Command lines: backup
// ---------------------------------------------------------------------------------------------

impl CommandLine {
    fn new(program: &str, args: Vec<String>) -> Self {
        CommandLine {
            program: program.to_owned(),
            args,
            env: Vec::new(),
            password: PasswordInput::None,
        }
    }
}

impl fmt::Display for CommandLine {
    /// `VAR=value program arg…`, for logs: safe to print, as it holds no password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, value) in &self.env {
            write!(f, "{name}={value} ")?;
        }
        f.write_str(&self.program)?;
        for arg in &self.args {
            write!(f, " {arg}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, stage) in self.stages.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{stage}")?;
        }
        Ok(())
    }
}

impl Endpoint {
    /// An instance's Pod IP on [`MYSQL_PORT`], where MOCO's Jobs connect.
    pub fn pod(ip: &str) -> Self {
        Endpoint {
            host: ip.to_owned(),
            port: MYSQL_PORT,
        }
    }

    /// `host:port`, with an IPv6 address in brackets (Go's `net.JoinHostPort`, which MOCO uses
    /// for `mysqlsh`'s URI).
    fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// The option file that carries `mysqlbinlog`'s and `mysql`'s password (`[client]` is read by
/// both). Quoted, so no password can end the line and add an option of its own.
pub fn client_option_file(password: &str) -> String {
    format!("[client]\npassword={}\n", quote_value(password))
}

/// Where the runner writes [`client_option_file`] for `account`: in the work dir (writable,
/// private to the Job), beside rather than inside the directories that get archived.
pub fn option_file_path(work_dir: &str, account: Account) -> String {
    format!("{work_dir}/{}.cnf", account.name())
}

/// `mysqlsh`'s connection arguments as MOCO passes them, with the password on stdin instead
/// of `-p<password>`: the URI, never saving the password, no protocol compression.
fn mysqlsh_connection(account: Account, server: &Endpoint) -> Vec<String> {
    vec![
        format!("mysql://{}@{}", account.name(), server.host_port()),
        "--passwords-from-stdin".into(),
        "--save-passwords=never".into(),
        "-C".into(),
        "False".into(),
        "--".into(),
        "util".into(),
    ]
}

/// The classic client connection arguments MOCO passes to `mysqlbinlog` and `mysql` (TCP to
/// the Pod IP), with the option file first (the tools require `--defaults-extra-file` to come
/// first) in place of `-p<password>`.
fn client_connection(account: Account, server: &Endpoint, work_dir: &str) -> Vec<String> {
    vec![
        format!(
            "--defaults-extra-file={}",
            option_file_path(work_dir, account)
        ),
        "-h".into(),
        server.host.clone(),
        "--port".into(),
        server.port.to_string(),
        "--protocol=tcp".into(),
        "-u".into(),
        account.name().into(),
    ]
}

fn option_file_input(account: Account, work_dir: &str) -> PasswordInput {
    PasswordInput::OptionFile {
        path: option_file_path(work_dir, account),
    }
}

/// The full dump (`bkop.DumpFull`): `mysqlsh … util dump-instance <work>/dump` as
/// `moco-backup`, leaving out MOCO's own eight accounts (the restored cluster has its own),
/// with `threads` workers. mysqlsh compresses the chunks with zstd by default. Its `maxRate`
/// caps each thread's reads, so `max_rate` (beyond MOCO) is shared among them.
pub fn dump_instance(
    source: &Endpoint,
    work_dir: &str,
    threads: NonZeroU32,
    max_rate: Option<&ByteRate>,
) -> CommandLine {
    let excluded: Vec<&str> = Account::ALL.iter().map(|a| a.name()).collect();
    let mut args = mysqlsh_connection(Account::Backup, source);
    args.extend([
        "dump-instance".into(),
        format!("{work_dir}/{DUMP_DIR}"),
        format!("--excludeUsers={}", excluded.join(",")),
        format!("--threads={threads}"),
    ]);
    if let Some(rate) = max_rate {
        let per_thread = rate.per_worker(NonZeroU64::from(threads));
        args.push(format!("--maxRate={per_thread}"));
    }
    CommandLine {
        password: PasswordInput::Stdin,
        ..CommandLine::new("mysqlsh", args)
    }
}

/// The dump's directory as one tar stream to upload as `dump.tar` (uncompressed: the chunks
/// already are).
pub fn dump_archive(work_dir: &str) -> CommandLine {
    CommandLine::new("tar", tar_create(work_dir, DUMP_DIR))
}

fn tar_create(work_dir: &str, dir: &str) -> Vec<String> {
    ["-c", "-f", "-", "-C", work_dir, dir]
        .map(String::from)
        .to_vec()
}

/// The binlog file the fetch starts from: the previous backup's current file when the source
/// is the same instance (its files since then are all there), else the oldest file the new
/// source still has (`binary_logs`, `SHOW BINARY LOGS`); `--exclude-gtids` drops what the
/// previous dump already holds either way. MOCO also passes an empty recorded name through
/// and fails; starting from the oldest file is what it would have had to do.
pub fn binlog_start_file(
    previous: &PreviousBackup,
    source_index: u32,
    binary_logs: &[String],
) -> Result<String, FormatError> {
    if source_index == previous.source_index && !previous.binlog_filename.is_empty() {
        return Ok(previous.binlog_filename.clone());
    }
    let mut sorted = binary_logs.to_vec();
    sort_binlog_files(&mut sorted);
    sorted.into_iter().next().ok_or(FormatError::NoBinaryLogs)
}

/// The binlog fetch (`bkop.DumpBinlog`): every transaction since the previous backup, read from
/// the source as a replica would (`BINLOG-DUMP-GTIDS`), minus the previous dump's
/// `gtid_set` (passed as MOCO stored it), from `start_file` through the last file (`-t`,
/// `--to-last-log`), kept raw in `<work>/binlog/`.
pub fn binlog_fetch(
    source: &Endpoint,
    work_dir: &str,
    exclude_gtids: &str,
    start_file: &str,
) -> CommandLine {
    let mut args = client_connection(Account::Backup, source, work_dir);
    args.extend([
        "--get-server-public-key".into(),
        "--read-from-remote-master=BINLOG-DUMP-GTIDS".into(),
        format!("--exclude-gtids={exclude_gtids}"),
        "-t".into(),
        "--raw".into(),
        format!("--result-file={work_dir}/{BINLOG_DIR}/"),
        start_file.into(),
    ]);
    CommandLine {
        password: option_file_input(Account::Backup, work_dir),
        ..CommandLine::new("mysqlbinlog", args)
    }
}

/// The fetched binlogs as one stream to upload as `binlog.tar.zst`: `tar` piped into `zstd`
/// with `threads` workers.
pub fn binlog_archive(work_dir: &str, threads: NonZeroU32) -> Pipeline {
    Pipeline {
        stages: vec![
            CommandLine::new("tar", tar_create(work_dir, BINLOG_DIR)),
            CommandLine::new("zstd", vec!["--no-progress".into(), format!("-T{threads}")]),
        ],
    }
}

/// The statement whose first column is the binlog file a server writes now
/// (`status.backup.binlogFilename`): MySQL 8.4 renamed `SHOW MASTER STATUS`.
pub fn binlog_status_statement(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Mysql84 => "SHOW BINARY LOG STATUS",
        Dialect::Mysql80 | Dialect::Mariadb => "SHOW MASTER STATUS",
    }
}

/// `gtidExecuted` of the dump's `@.json`: the GTID set a restore of it starts from, stored as
/// `status.backup.gtidSet` for the next backup's `--exclude-gtids`. MOCO reads a missing key
/// as empty and the next binlog fetch then filters nothing; here it is an error.
pub fn dump_gtid_executed(at_json: &str) -> Result<String, FormatError> {
    let value: serde_json::Value =
        serde_json::from_str(at_json).map_err(|e| FormatError::DumpMetadata {
            reason: e.to_string(),
        })?;
    match value.get("gtidExecuted") {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(FormatError::DumpMetadata {
            reason: "gtidExecuted is not a string".into(),
        }),
        None => Err(FormatError::DumpMetadata {
            reason: "no gtidExecuted".into(),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Command lines: restore
// ---------------------------------------------------------------------------------------------

impl RestoreFilter {
    /// Checks `spec.restore.schema` and `spec.restore.users` as the restore Job receives them
    /// (empty strings when unset).
    ///
    /// `users` is a comma-separated list of accounts, each `user@host` or `user` (every host,
    /// as `mysqlsh` reads it), either part unquoted or in single quotes. Rejected: empty
    /// entries (a doubled or trailing comma), blanks (`mysqlsh` would look for a user whose
    /// name starts with a space), an empty user or host, a second `@`, stray quotes. The
    /// accepted text is passed to `mysqlsh` unchanged, as MOCO does.
    ///
    /// `schema` is one schema name: `mysqlsh` would read a comma as a list while `mysqlbinlog
    /// --database` takes one name, so the load and the replay would disagree.
    pub fn new(schema: &str, users: &str) -> Result<Self, RestoreSpecError> {
        let schema = if schema.is_empty() {
            None
        } else {
            check_schema(schema)?;
            Some(schema.to_owned())
        };
        let users = if users.is_empty() {
            None
        } else {
            for entry in users.split(',') {
                check_account(entry)?;
            }
            Some(users.to_owned())
        };
        Ok(RestoreFilter { schema, users })
    }
}

fn check_schema(schema: &str) -> Result<(), RestoreSpecError> {
    let err = |reason| RestoreSpecError::Schema {
        field: SCHEMA_FIELD,
        schema: schema.to_owned(),
        reason,
    };
    if schema.chars().count() > MAX_SCHEMA_LEN {
        return Err(err("longer than 64 characters"));
    }
    if schema.contains(',') {
        return Err(err(
            "one schema only: a comma would make a list for the load but not for the binlog replay",
        ));
    }
    if schema.chars().any(char::is_control) {
        return Err(err("contains a control character"));
    }
    if schema.ends_with(' ') {
        return Err(err("ends with a space (MySQL does not allow it)"));
    }
    Ok(())
}

fn check_account(entry: &str) -> Result<(), RestoreSpecError> {
    let err = |reason| RestoreSpecError::Users {
        field: USERS_FIELD,
        entry: entry.to_owned(),
        reason,
    };
    if entry.is_empty() {
        return Err(err("empty entry (doubled or trailing comma)"));
    }
    if entry.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err("contains a blank or control character"));
    }
    let (user, rest) = account_part(entry).map_err(err)?;
    if user.is_empty() {
        return Err(err("empty user name"));
    }
    if rest.is_empty() {
        return Ok(());
    }
    let Some(host_text) = rest.strip_prefix('@') else {
        return Err(err("expected user@host"));
    };
    let (host, rest) = account_part(host_text).map_err(err)?;
    if host.is_empty() {
        return Err(err("empty host (use % for any host)"));
    }
    if !rest.is_empty() {
        return Err(err("more than one @ (quote a user name that contains one)"));
    }
    Ok(())
}

/// One part of an account, unquoted up to `@` or in single quotes, and what follows it.
fn account_part(text: &str) -> Result<(&str, &str), &'static str> {
    if let Some(quoted) = text.strip_prefix('\'') {
        let end = quoted.find('\'').ok_or("unterminated quote")?;
        return Ok((&quoted[..end], &quoted[end + 1..]));
    }
    let end = text.find('@').unwrap_or(text.len());
    let part = &text[..end];
    if part.contains(['\'', '"', '`']) {
        return Err("stray quote (quote a whole part: 'user'@'host')");
    }
    Ok((part, &text[end..]))
}

/// What instance 0 is set to before the load (MOCO's `PrepareRestore`): `load-dump` needs
/// `LOAD DATA LOCAL`, and writes (turning `read_only` off turns `super_read_only` off too).
pub const OPEN_FOR_LOAD: [&str; 2] = ["SET GLOBAL local_infile=1", "SET GLOBAL read_only=0"];

/// What instance 0 is set to after the load and replay (MOCO's `FinishRestore`): read-only
/// until the clustering has configured the restored cluster, and no `LOAD DATA LOCAL`.
pub const CLOSE_AFTER_LOAD: [&str; 2] =
    ["SET GLOBAL super_read_only=1", "SET GLOBAL local_infile=0"];

/// The dump tarball unpacked into the work dir (it holds `dump/`, and only that is unpacked).
pub fn dump_extract(work_dir: &str) -> CommandLine {
    CommandLine::new("tar", tar_extract(work_dir, DUMP_DIR))
}

/// `tar -x` of the member `top` only (and what is under it): a tarball from the bucket has
/// no say over the rest of the work dir, where the option files with passwords are.
fn tar_extract(work_dir: &str, top: &str) -> Vec<String> {
    ["-C", work_dir, "-x", "-f", "-", top]
        .map(String::from)
        .to_vec()
}

/// The binlog tarball unpacked into the work dir (it holds `binlog/`, and only that is
/// unpacked): `zstd -d | tar -x`.
pub fn binlog_extract(work_dir: &str) -> Pipeline {
    Pipeline {
        stages: vec![
            CommandLine::new("zstd", vec!["-d".into(), "--no-progress".into()]),
            CommandLine::new("tar", tar_extract(work_dir, BINLOG_DIR)),
        ],
    }
}

/// The load (`bkop.LoadDump`): `mysqlsh … util load-dump <work>/dump` as `moco-admin` into the
/// new, empty instance, with the dump's users (MOCO's own were never dumped), tables analysed,
/// nothing written to the binlog, indexes built after the data, and `gtid_executed` set to the
/// dump's so the replay and later replication continue from it. [`RestoreFilter`] narrows it
/// to one schema and to some accounts.
pub fn load_dump(
    target: &Endpoint,
    work_dir: &str,
    threads: NonZeroU32,
    filter: &RestoreFilter,
) -> CommandLine {
    let mut args = mysqlsh_connection(Account::Admin, target);
    args.extend([
        "load-dump".into(),
        format!("{work_dir}/{DUMP_DIR}"),
        format!("--threads={threads}"),
        "--loadUsers=true".into(),
        "--analyzeTables=on".into(),
        "--skipBinlog=true".into(),
        "--deferTableIndexes=all".into(),
        "--updateGtidSet=replace".into(),
    ]);
    if let Some(schema) = &filter.schema {
        args.push(format!("--includeSchemas={schema}"));
    }
    if let Some(users) = &filter.users {
        args.push(format!("--includeUsers={users}"));
    }
    CommandLine {
        password: PasswordInput::Stdin,
        ..CommandLine::new("mysqlsh", args)
    }
}

/// The binlog files of an unpacked tarball, given the names in `<work>/binlog/`: only
/// `binlog.<digits>`, in sequence order, as full paths. An empty tarball is an error, as in
/// MOCO. (MOCO takes every `binlog.*`, which would hand a stray `binlog.index` to
/// `mysqlbinlog`; a raw fetch writes none, so the stricter rule changes nothing real.)
pub fn replay_files(work_dir: &str, names: &[String]) -> Result<Vec<String>, FormatError> {
    let mut files: Vec<String> = names
        .iter()
        .filter(|n| {
            n.strip_prefix(BINLOG_PREFIX)
                .is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
        })
        .cloned()
        .collect();
    if files.is_empty() {
        return Err(FormatError::NoBinlogFiles {
            dir: format!("{work_dir}/{BINLOG_DIR}"),
        });
    }
    sort_binlog_files(&mut files);
    Ok(files
        .into_iter()
        .map(|n| format!("{work_dir}/{BINLOG_DIR}/{n}"))
        .collect())
}

/// The replay (`bkop.LoadBinlog`): `mysqlbinlog` decodes `files` (from [`replay_files`]) up to
/// `stop_at`, read as UTC because `TZ=Etc/UTC` (MOCO's backup keys and restore points are UTC),
/// with its temporary files in `<work>/tmp` (the runner creates it); `mysql --binary-mode`
/// applies the stream as `moco-admin`. With a schema, only that schema's events are decoded
/// (`--database`, after the files as MOCO places it).
pub fn binlog_replay(
    target: &Endpoint,
    work_dir: &str,
    stop_at: Timestamp,
    files: &[String],
    filter: &RestoreFilter,
) -> Pipeline {
    let mut decode_args = vec![format!("--stop-datetime={}", stop_datetime(stop_at))];
    decode_args.extend(files.iter().cloned());
    if let Some(schema) = &filter.schema {
        decode_args.push(format!("--database={schema}"));
    }
    let decode = CommandLine {
        env: vec![
            ("TZ".into(), "Etc/UTC".into()),
            ("TMPDIR".into(), format!("{work_dir}/{TMP_DIR}")),
        ],
        ..CommandLine::new("mysqlbinlog", decode_args)
    };
    let mut apply_args = client_connection(Account::Admin, target, work_dir);
    apply_args.insert(1, "--binary-mode".into());
    let apply = CommandLine {
        password: option_file_input(Account::Admin, work_dir),
        ..CommandLine::new("mysql", apply_args)
    };
    Pipeline {
        stages: vec![decode, apply],
    }
}

/// `YYYY-MM-DD hh:mm:ss`, `mysqlbinlog --stop-datetime`'s form (one argument: no quotes).
fn stop_datetime(t: Timestamp) -> String {
    // Display is `YYYY-MM-DDThh:mm:ssZ`.
    t.to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

/// Sorts binlog file names by their sequence number (`binlog.000010` after `binlog.000009`
/// whatever the digits), as MOCO's `SortBinlogs`; names without one sort first, by name.
pub fn sort_binlog_files(names: &mut [String]) {
    names.sort_by_cached_key(|n| {
        let number = n
            .split_once('.')
            .filter(|(_, suffix)| !suffix.contains('.'))
            .and_then(|(_, suffix)| suffix.parse::<u64>().ok())
            .unwrap_or(0);
        (number, n.clone())
    });
}

// ---------------------------------------------------------------------------------------------
// Choosing the backup source
// ---------------------------------------------------------------------------------------------

/// MOCO's choice of the instance to back up (`ChoosePod`, with the `uuidSet` rule of #604).
///
/// Backups come from a replica when one is ready, so the primary does not carry the load. The
/// binlogs since the previous backup are only complete on an instance that has kept its
/// `server_uuid` since then: a re-initialised (re-cloned) instance lost its old binlogs, and
/// fetching from it left gaps after a source change (#603). So:
///
/// * First backup: the first ready replica by ordinal, else the primary if ready; no binlogs.
/// * Later: the candidates are the ready instances whose `server_uuid` is the one recorded in
///   `uuidSet` (or, for a status written before `uuidSet` existed, the recorded source's
///   `sourceUUID`). None: [`SKIP_BINLOG_WARNING`], and the first-backup choice without
///   binlogs. Otherwise the previous source if it is still a candidate and a replica, else the
///   first candidate replica, else the primary (then a candidate); binlogs are taken.
///
/// No ready instance that may be chosen is [`FormatError::NoReadyInstance`].
pub fn choose_source(
    previous: &PreviousBackup,
    ready: &[ReadyInstance],
) -> Result<SourceChoice, FormatError> {
    let mut ready: Vec<&ReadyInstance> = ready.iter().collect();
    ready.sort_by_key(|i| i.index);
    ready.dedup_by_key(|i| i.index);
    let uuid_set: BTreeMap<String, String> = ready
        .iter()
        .map(|i| (i.index.to_string(), i.server_uuid.clone()))
        .collect();

    let first_choice = |warning| {
        ready
            .iter()
            .find(|i| i.role == Role::Replica)
            .or_else(|| ready.iter().find(|i| i.role == Role::Primary))
            .map(|i| SourceChoice {
                index: i.index,
                take_binlog: false,
                warning,
                uuid_set: uuid_set.clone(),
            })
            .ok_or(FormatError::NoReadyInstance)
    };
    if previous.time.is_none() {
        return first_choice(None);
    }

    let recorded: BTreeMap<u32, &str> = if previous.uuid_set.is_empty() {
        BTreeMap::from([(previous.source_index, previous.source_uuid.as_str())])
    } else {
        // Keys that are not ordinals never match, as in MOCO.
        previous
            .uuid_set
            .iter()
            .filter_map(|(k, v)| Some((k.parse::<u32>().ok()?, v.as_str())))
            .collect()
    };
    let candidates: Vec<&ReadyInstance> = ready
        .iter()
        .copied()
        .filter(|i| recorded.get(&i.index) == Some(&i.server_uuid.as_str()))
        .collect();
    if candidates.is_empty() {
        return first_choice(Some(SKIP_BINLOG_WARNING));
    }
    let chosen = candidates
        .iter()
        .find(|i| i.index == previous.source_index && i.role == Role::Replica)
        .or_else(|| candidates.iter().find(|i| i.role == Role::Replica))
        .or_else(|| candidates.iter().find(|i| i.role == Role::Primary))
        .ok_or(FormatError::NoReadyInstance)?;
    Ok(SourceChoice {
        index: chosen.index,
        take_binlog: true,
        warning: None,
        uuid_set,
    })
}

// ---------------------------------------------------------------------------------------------
// Keys and the restore choice
// ---------------------------------------------------------------------------------------------

/// The prefix of every backup object of cluster `namespace/name`: `moco/<ns>/<name>/`.
pub fn cluster_prefix(namespace: &str, name: &str) -> String {
    format!("{KEY_ROOT}/{namespace}/{name}/")
}

/// A backup time as MOCO writes it in keys and in the restore Job's arguments:
/// `YYYYMMDD-hhmmss`, UTC.
pub fn backup_time_text(t: Timestamp) -> String {
    folder_name(t)
}

/// Reads a [`backup_time_text`].
pub fn parse_backup_time(text: &str) -> Result<Timestamp, FormatError> {
    let bad = || FormatError::BadBackupTime {
        text: text.to_owned(),
    };
    let b = text.as_bytes();
    let digits_at = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 15 || b[8] != b'-' || !digits_at(0..8) || !digits_at(9..15) {
        return Err(bad());
    }
    // Go's time.Parse refuses a leap second here; so does this.
    if &text[13..15] >= "60" {
        return Err(bad());
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &text[0..4],
        &text[4..6],
        &text[6..8],
        &text[9..11],
        &text[11..13],
        &text[13..15]
    );
    Timestamp::parse(&rfc3339).map_err(|_| bad())
}

/// The key of the dump of the backup started at `started`.
pub fn dump_key(namespace: &str, name: &str, started: Timestamp) -> String {
    object_key(namespace, name, started, ObjectKind::Dump)
}

/// The key of the binlog tarball a backup uploads: in the folder of the **previous** backup
/// (`previous_started`), whose dump these binlogs continue.
pub fn binlog_key(namespace: &str, name: &str, previous_started: Timestamp) -> String {
    object_key(namespace, name, previous_started, ObjectKind::Binlog)
}

fn object_key(namespace: &str, name: &str, t: Timestamp, kind: ObjectKind) -> String {
    let file = match kind {
        ObjectKind::Dump => DUMP_FILE,
        ObjectKind::Binlog => BINLOG_FILE,
    };
    format!(
        "{}{}/{file}",
        cluster_prefix(namespace, name),
        backup_time_text(t)
    )
}

/// What `key` is under `prefix` ([`cluster_prefix`]): its folder's time and kind, or `None`
/// for anything else (other files, other depths, unreadable folder names), which a restore
/// skips as MOCO does.
pub fn parse_key(prefix: &str, key: &str) -> Option<(Timestamp, ObjectKind)> {
    let (folder, file) = key.strip_prefix(prefix)?.split_once('/')?;
    let kind = match file {
        DUMP_FILE => ObjectKind::Dump,
        BINLOG_FILE => ObjectKind::Binlog,
        _ => return None,
    };
    Some((parse_backup_time(folder).ok()?, kind))
}

/// One of MOCO's MySQL backups, as `moco local backup list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpListed {
    /// Its time (its folder).
    pub time: Timestamp,
    /// `dump.tar`'s size.
    pub dump_size: u64,
    /// `binlog.tar.zst`'s size, when the next backup stored it.
    pub binlog_size: Option<u64>,
    /// The next backup's time; `None` for the newest.
    pub next: Option<Timestamp>,
}

/// MOCO's backups under `prefix` ([`cluster_prefix`]) among `objects` (key and size, any
/// order), oldest first. A folder with binlogs and no dump is not a backup and is left out.
pub fn list_dumps(prefix: &str, objects: &[(String, u64)]) -> Vec<DumpListed> {
    let mut dumps: BTreeMap<Timestamp, u64> = BTreeMap::new();
    let mut binlogs: BTreeMap<Timestamp, u64> = BTreeMap::new();
    for (key, size) in objects {
        match parse_key(prefix, key) {
            Some((t, ObjectKind::Dump)) => {
                dumps.insert(t, *size);
            }
            Some((t, ObjectKind::Binlog)) => {
                binlogs.insert(t, *size);
            }
            None => {}
        }
    }
    let times: Vec<Timestamp> = dumps.keys().copied().collect();
    times
        .iter()
        .enumerate()
        .map(|(i, &time)| DumpListed {
            time,
            dump_size: dumps[&time],
            binlog_size: binlogs.get(&time).copied(),
            next: times.get(i + 1).copied(),
        })
        .collect()
}

/// What to restore to reach `point` from the objects listed under cluster
/// `namespace/name` (`keys`, in any order): the newest dump at or before the point, and, unless
/// the point is that dump's own time, the binlog tarball in the same folder, which reaches the
/// next backup.
///
/// This is what MOCO's `FindNearestDump` means to do; before 0.17.0 (PR #565) it could come
/// out with no binlog tarball for the dump it chose, so restores silently stopped at the dump
/// (#563). Where MOCO still loads the dump alone (the tarball was never stored, or the point is
/// past the newest backup), this refuses with the latest time that can be reached instead of
/// restoring to another time than asked.
pub fn plan_restore(
    namespace: &str,
    name: &str,
    keys: &[String],
    point: Timestamp,
) -> Result<RestorePlan, RestorePointError> {
    let prefix = cluster_prefix(namespace, name);
    let mut dumps = BTreeSet::new();
    let mut binlogs = BTreeSet::new();
    for key in keys {
        match parse_key(&prefix, key) {
            Some((t, ObjectKind::Dump)) => {
                dumps.insert(t);
            }
            Some((t, ObjectKind::Binlog)) => {
                binlogs.insert(t);
            }
            None => {}
        }
    }
    let Some(&earliest) = dumps.first() else {
        return Err(RestorePointError::NoBackup { prefix });
    };
    let Some(&dump_time) = dumps.range(..=point).next_back() else {
        return Err(RestorePointError::BeforeFirstBackup { point, earliest });
    };
    let dump_key = dump_key(namespace, name, dump_time);
    if dump_time == point {
        return Ok(RestorePlan {
            dump_key,
            dump_time,
            binlog_keys: Vec::new(),
            stop_at: None,
        });
    }
    if binlogs.contains(&dump_time) {
        return Ok(RestorePlan {
            dump_key,
            dump_time,
            binlog_keys: vec![binlog_key(namespace, name, dump_time)],
            stop_at: Some(point),
        });
    }
    match dumps.range(point..).next() {
        Some(&next_backup) => Err(RestorePointError::BinlogMissing {
            point,
            dump_time,
            next_backup,
        }),
        None => Err(RestorePointError::AfterLatestBackup {
            point,
            latest: dump_time,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn threads(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const MOCO_USERS: &str = "moco-admin,moco-agent,moco-repl,moco-clone-donor,moco-exporter,moco-backup,moco-readonly,moco-writable";

    #[test]
    fn list_dumps_pairs_each_dump_with_its_binlogs_and_the_next_backup() {
        let prefix = "moco/ns/db/";
        let objects = vec![
            ("moco/ns/db/20250102-000000/dump.tar".to_owned(), 300),
            ("moco/ns/db/20250101-000000/binlog.tar.zst".to_owned(), 20),
            ("moco/ns/db/20250101-000000/dump.tar".to_owned(), 100),
            ("moco/ns/db/20250103-000000/dump.tar".to_owned(), 400),
            // Binlogs without a dump, an archive, another cluster: none is a backup.
            ("moco/ns/db/20241231-000000/binlog.tar.zst".to_owned(), 5),
            (
                "moco/ns/db/binlog-archive/0001700000000000.json".to_owned(),
                1,
            ),
            ("moco/ns/dbx/20250101-000000/dump.tar".to_owned(), 7),
        ];
        let listed = list_dumps(prefix, &objects);
        assert_eq!(
            listed,
            vec![
                DumpListed {
                    time: t("2025-01-01T00:00:00Z"),
                    dump_size: 100,
                    binlog_size: Some(20),
                    next: Some(t("2025-01-02T00:00:00Z")),
                },
                DumpListed {
                    time: t("2025-01-02T00:00:00Z"),
                    dump_size: 300,
                    binlog_size: None,
                    next: Some(t("2025-01-03T00:00:00Z")),
                },
                DumpListed {
                    time: t("2025-01-03T00:00:00Z"),
                    dump_size: 400,
                    binlog_size: None,
                    next: None,
                },
            ]
        );
    }

    // --- command lines, argument by argument against MOCO's (`-p<password>` replaced) ---

    #[test]
    fn dump_instance_is_mocos_dump_full() {
        let cmd = dump_instance(&Endpoint::pod("10.64.0.7"), WORK_DIR, threads(4), None);
        assert_eq!(cmd.program, "mysqlsh");
        assert_eq!(
            cmd.args,
            strings(&[
                "mysql://moco-backup@10.64.0.7:3306",
                "--passwords-from-stdin",
                "--save-passwords=never",
                "-C",
                "False",
                "--",
                "util",
                "dump-instance",
                "/work/dump",
                &format!("--excludeUsers={MOCO_USERS}"),
                "--threads=4",
            ])
        );
        assert!(cmd.env.is_empty());
        assert_eq!(cmd.password, PasswordInput::Stdin);
    }

    #[test]
    fn a_rate_cap_is_shared_among_mysqlshs_threads() {
        let rate = ByteRate::parse("100M").unwrap();
        let endpoint = Endpoint::pod("10.64.0.7");
        let cmd = dump_instance(&endpoint, WORK_DIR, threads(4), Some(&rate));
        let without = dump_instance(&endpoint, WORK_DIR, threads(4), None);
        // The same command, with the cap last: 100 MB/s over four threads.
        assert_eq!(cmd.args[..without.args.len()], without.args[..]);
        assert_eq!(
            cmd.args[without.args.len()..],
            strings(&["--maxRate=25000000"])
        );
        let one = dump_instance(&endpoint, WORK_DIR, threads(1), Some(&rate));
        assert_eq!(one.args.last().unwrap(), "--maxRate=100000000");
    }

    #[test]
    fn mysqlsh_uri_brackets_ipv6_like_join_host_port() {
        let cmd = dump_instance(&Endpoint::pod("fd00::7"), WORK_DIR, threads(1), None);
        assert_eq!(cmd.args[0], "mysql://moco-backup@[fd00::7]:3306");
        assert_eq!(cmd.args.last().unwrap(), "--threads=1");
    }

    #[test]
    fn dump_archive_is_mocos_tar() {
        assert_eq!(
            dump_archive(WORK_DIR),
            CommandLine {
                program: "tar".into(),
                args: strings(&["-c", "-f", "-", "-C", "/work", "dump"]),
                env: vec![],
                password: PasswordInput::None,
            }
        );
    }

    #[test]
    fn binlog_fetch_is_mocos_dump_binlog() {
        let cmd = binlog_fetch(
            &Endpoint::pod("10.64.0.8"),
            WORK_DIR,
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77",
            "binlog.000012",
        );
        assert_eq!(cmd.program, "mysqlbinlog");
        assert_eq!(
            cmd.args,
            strings(&[
                "--defaults-extra-file=/work/moco-backup.cnf",
                "-h",
                "10.64.0.8",
                "--port",
                "3306",
                "--protocol=tcp",
                "-u",
                "moco-backup",
                "--get-server-public-key",
                "--read-from-remote-master=BINLOG-DUMP-GTIDS",
                "--exclude-gtids=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77",
                "-t",
                "--raw",
                "--result-file=/work/binlog/",
                "binlog.000012",
            ])
        );
        assert!(cmd.env.is_empty());
        assert_eq!(
            cmd.password,
            PasswordInput::OptionFile {
                path: "/work/moco-backup.cnf".into()
            }
        );
    }

    #[test]
    fn binlog_archive_is_tar_into_zstd() {
        let p = binlog_archive(WORK_DIR, threads(8));
        assert_eq!(p.stages.len(), 2);
        assert_eq!(p.stages[0].program, "tar");
        assert_eq!(
            p.stages[0].args,
            strings(&["-c", "-f", "-", "-C", "/work", "binlog"])
        );
        assert_eq!(p.stages[1].program, "zstd");
        assert_eq!(p.stages[1].args, strings(&["--no-progress", "-T8"]));
        assert_eq!(
            p.to_string(),
            "tar -c -f - -C /work binlog | zstd --no-progress -T8"
        );
    }

    /// MOCO's extractions, narrowed to the one directory each tarball holds.
    #[test]
    fn extracts_are_mocos() {
        assert_eq!(
            dump_extract(WORK_DIR).to_string(),
            "tar -C /work -x -f - dump"
        );
        assert_eq!(
            binlog_extract(WORK_DIR).to_string(),
            "zstd -d --no-progress | tar -C /work -x -f - binlog"
        );
    }

    #[test]
    fn load_dump_is_mocos_with_and_without_filters() {
        let base = strings(&[
            "mysql://moco-admin@10.64.1.2:3306",
            "--passwords-from-stdin",
            "--save-passwords=never",
            "-C",
            "False",
            "--",
            "util",
            "load-dump",
            "/work/dump",
            "--threads=4",
            "--loadUsers=true",
            "--analyzeTables=on",
            "--skipBinlog=true",
            "--deferTableIndexes=all",
            "--updateGtidSet=replace",
        ]);
        let target = Endpoint::pod("10.64.1.2");
        let cases: [(&str, &str, &[&str]); 4] = [
            ("", "", &[]),
            ("app", "", &["--includeSchemas=app"]),
            ("", "app@%", &["--includeUsers=app@%"]),
            (
                "app",
                "app@%,'report'@'10.0.%'",
                &[
                    "--includeSchemas=app",
                    "--includeUsers=app@%,'report'@'10.0.%'",
                ],
            ),
        ];
        for (schema, users, extra) in cases {
            let filter = RestoreFilter::new(schema, users).unwrap();
            let cmd = load_dump(&target, WORK_DIR, threads(4), &filter);
            let mut expected = base.clone();
            expected.extend(strings(extra));
            assert_eq!(cmd.program, "mysqlsh");
            assert_eq!(cmd.args, expected, "schema {schema:?} users {users:?}");
            assert_eq!(cmd.password, PasswordInput::Stdin);
        }
    }

    #[test]
    fn binlog_replay_is_mocos_pipe() {
        let files = replay_files(
            WORK_DIR,
            &strings(&["binlog.000010", "binlog.index", "binlog.000009", "other"]),
        )
        .unwrap();
        let point = t("2023-09-03T00:00:00Z");
        for (schema, database) in [("", None), ("app", Some("--database=app"))] {
            let filter = RestoreFilter::new(schema, "").unwrap();
            let p = binlog_replay(
                &Endpoint::pod("10.64.1.2"),
                WORK_DIR,
                point,
                &files,
                &filter,
            );
            let decode = &p.stages[0];
            let mut expected = strings(&[
                "--stop-datetime=2023-09-03 00:00:00",
                "/work/binlog/binlog.000009",
                "/work/binlog/binlog.000010",
            ]);
            expected.extend(database.map(String::from));
            assert_eq!(decode.program, "mysqlbinlog");
            assert_eq!(decode.args, expected);
            assert_eq!(
                decode.env,
                vec![
                    ("TZ".to_string(), "Etc/UTC".to_string()),
                    ("TMPDIR".to_string(), "/work/tmp".to_string())
                ]
            );
            assert_eq!(decode.password, PasswordInput::None);
            let apply = &p.stages[1];
            assert_eq!(apply.program, "mysql");
            assert_eq!(
                apply.args,
                strings(&[
                    "--defaults-extra-file=/work/moco-admin.cnf",
                    "--binary-mode",
                    "-h",
                    "10.64.1.2",
                    "--port",
                    "3306",
                    "--protocol=tcp",
                    "-u",
                    "moco-admin",
                ])
            );
            assert!(apply.env.is_empty());
            assert_eq!(
                apply.password,
                PasswordInput::OptionFile {
                    path: "/work/moco-admin.cnf".into()
                }
            );
        }
    }

    #[test]
    fn replay_needs_binlog_files() {
        assert_eq!(
            replay_files(WORK_DIR, &strings(&["binlog.index", "relay.000001"])),
            Err(FormatError::NoBinlogFiles {
                dir: "/work/binlog".into()
            })
        );
    }

    #[test]
    fn binlog_files_sort_by_number_not_text() {
        let mut names = strings(&["binlog.1000000", "binlog.999999", "binlog.000002", "odd"]);
        sort_binlog_files(&mut names);
        assert_eq!(
            names,
            strings(&["odd", "binlog.000002", "binlog.999999", "binlog.1000000"])
        );
    }

    #[test]
    fn no_password_in_any_argument_or_variable() {
        let secret = "pa\"ss\\word";
        let target = Endpoint::pod("10.0.0.1");
        let filter = RestoreFilter::new("app", "app@%").unwrap();
        let mut all = vec![
            dump_instance(&target, WORK_DIR, threads(2), None),
            binlog_fetch(&target, WORK_DIR, "", "binlog.000001"),
            load_dump(&target, WORK_DIR, threads(2), &filter),
        ];
        all.extend(
            binlog_replay(&target, WORK_DIR, t("2024-01-01T00:00:00Z"), &[], &filter).stages,
        );
        for cmd in &all {
            for arg in &cmd.args {
                // MOCO's `-p<password>` / `--password=`: never.
                assert!(
                    !(arg.starts_with("-p") || arg.starts_with("--password=")),
                    "{cmd}"
                );
            }
        }
        assert_eq!(
            client_option_file(secret),
            "[client]\npassword=\"pa\\\"ss\\\\word\"\n"
        );
    }

    #[test]
    fn dump_metadata_gives_the_gtid_set() {
        let json = r#"{"dumper":"mysqlsh Ver 8.4.8","gtidExecuted":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5","tzUtc":true}"#;
        assert_eq!(
            dump_gtid_executed(json).unwrap(),
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
        );
        assert!(matches!(
            dump_gtid_executed(r#"{"dumper":"x"}"#),
            Err(FormatError::DumpMetadata { .. })
        ));
        assert!(matches!(
            dump_gtid_executed("{"),
            Err(FormatError::DumpMetadata { .. })
        ));
    }

    // --- restore filters ---

    #[test]
    fn users_accepts_what_mysqlsh_reads() {
        for users in [
            "app@%",
            "app@%,report@10.0.0.%",
            "app",
            "'app'@'%'",
            "'odd@name'@'localhost'",
            "app-user@host.example.com",
        ] {
            assert_eq!(
                RestoreFilter::new("", users).unwrap().users.as_deref(),
                Some(users)
            );
        }
        assert_eq!(
            RestoreFilter::new("", "").unwrap(),
            RestoreFilter::default()
        );
    }

    #[test]
    fn malformed_users_name_the_field_and_the_entry() {
        let cases = [
            ("app@%,", "", "empty entry (doubled or trailing comma)"),
            ("app@%,,b@%", "", "empty entry (doubled or trailing comma)"),
            (
                "app@%, b@%",
                " b@%",
                "contains a blank or control character",
            ),
            ("@%", "@%", "empty user name"),
            ("app@", "app@", "empty host (use % for any host)"),
            (
                "a@b@c",
                "a@b@c",
                "more than one @ (quote a user name that contains one)",
            ),
            ("'app@%", "'app@%", "unterminated quote"),
            (
                "ap'p@%",
                "ap'p@%",
                "stray quote (quote a whole part: 'user'@'host')",
            ),
            ("'app'x@%", "'app'x@%", "expected user@host"),
            ("''@%", "''@%", "empty user name"),
        ];
        for (users, entry, reason) in cases {
            let err = RestoreFilter::new("", users).unwrap_err();
            assert_eq!(
                err,
                RestoreSpecError::Users {
                    field: "spec.restore.users",
                    entry: entry.into(),
                    reason
                },
                "{users:?}"
            );
            assert!(err.to_string().starts_with("spec.restore.users: "), "{err}");
        }
    }

    #[test]
    fn schema_is_one_name() {
        assert_eq!(
            RestoreFilter::new("app_db", "").unwrap().schema.as_deref(),
            Some("app_db")
        );
        let long = "x".repeat(65);
        for (schema, reason) in [
            (
                "a,b",
                "one schema only: a comma would make a list for the load but not for the binlog replay",
            ),
            ("app ", "ends with a space (MySQL does not allow it)"),
            ("a\nb", "contains a control character"),
            (long.as_str(), "longer than 64 characters"),
        ] {
            let err = RestoreFilter::new(schema, "").unwrap_err();
            assert_eq!(
                err,
                RestoreSpecError::Schema {
                    field: "spec.restore.schema",
                    schema: schema.into(),
                    reason
                }
            );
        }
    }

    // --- source choice: MOCO's TestChoosePod table, plus the #603 cases ---

    /// Ready instances `ready` (ordinal, uuid) with `primary` as the primary.
    fn instances(primary: u32, ready: &[(u32, &str)]) -> Vec<ReadyInstance> {
        ready
            .iter()
            .map(|&(index, uuid)| ReadyInstance {
                index,
                server_uuid: uuid.into(),
                role: if index == primary {
                    Role::Primary
                } else {
                    Role::Replica
                },
            })
            .collect()
    }

    fn previous(source: u32, source_uuid: &str, uuid_set: &[(&str, &str)]) -> PreviousBackup {
        PreviousBackup {
            time: Some(t("2024-05-01T00:00:00Z")),
            source_index: source,
            source_uuid: source_uuid.into(),
            uuid_set: uuid_set
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            binlog_filename: "binlog.000003".into(),
            gtid_set: String::new(),
        }
    }

    #[test]
    fn source_choice_table() {
        let first = PreviousBackup::default();
        let all3 = [(0, "uuid-0"), (1, "uuid-1"), (2, "uuid-2")];
        let set3 = [("0", "uuid-0"), ("1", "uuid-1"), ("2", "uuid-2")];
        type Case<'a> = (
            &'a str,
            PreviousBackup,
            Vec<ReadyInstance>,
            Result<(u32, bool, bool), FormatError>,
        );
        let cases: Vec<Case> = vec![
            (
                "single",
                first.clone(),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, false, false)),
            ),
            (
                "single-not-ready",
                first.clone(),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-ready",
                first.clone(),
                instances(0, &[(0, "uuid-0"), (2, "uuid-2")]),
                Ok((2, false, false)),
            ),
            (
                "triple-some-not-ready",
                first.clone(),
                instances(1, &[(1, "uuid-1")]),
                Ok((1, false, false)),
            ),
            (
                "triple-all-not-ready",
                first.clone(),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-last-uuid-set-is-empty",
                previous(2, "uuid-2", &[]),
                instances(1, &all3),
                Ok((2, true, false)),
            ),
            (
                "triple-last-uuid-set-is-empty-source-uuid-changed",
                previous(2, "uuid-b", &[]),
                instances(1, &all3),
                Ok((0, false, true)),
            ),
            (
                "single-2nd",
                previous(0, "uuid-0", &[("0", "uuid-0")]),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, true, false)),
            ),
            (
                "single-2nd-uuid-changed",
                previous(0, "uuid-a", &[("0", "uuid-a")]),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, false, true)),
            ),
            (
                "single-2nd-not-ready",
                previous(0, "uuid-0", &[("0", "uuid-0")]),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-2nd",
                previous(1, "uuid-1", &set3),
                instances(0, &all3),
                Ok((1, true, false)),
            ),
            (
                "triple-2nd-uuid-changed",
                previous(
                    1,
                    "uuid-b",
                    &[("0", "uuid-0"), ("1", "uuid-b"), ("2", "uuid-2")],
                ),
                instances(0, &all3),
                Ok((2, true, false)),
            ),
            (
                "triple-2nd-last-index-not-ready",
                previous(1, "uuid-1", &set3),
                instances(0, &[(0, "uuid-0"), (2, "uuid-2")]),
                Ok((2, true, false)),
            ),
            (
                "triple-2nd-primary",
                previous(1, "uuid-1", &set3),
                instances(1, &all3),
                Ok((0, true, false)),
            ),
            (
                "triple-2nd-all-not-ready",
                previous(1, "uuid-1", &set3),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-2nd-replica-uuid-changed",
                previous(
                    1,
                    "uuid-a",
                    &[("0", "uuid-0"), ("1", "uuid-a"), ("2", "uuid-b")],
                ),
                instances(0, &all3),
                Ok((0, true, false)),
            ),
            (
                "triple-2nd-some-not-ready-and-uuid-changed-1",
                previous(
                    1,
                    "uuid-1",
                    &[("0", "uuid-a"), ("1", "uuid-1"), ("2", "uuid-b")],
                ),
                instances(0, &[(0, "uuid-0"), (2, "uuid-2")]),
                Ok((2, false, true)),
            ),
            (
                "triple-2nd-some-not-ready-and-uuid-changed-2",
                previous(
                    0,
                    "uuid-a",
                    &[("0", "uuid-a"), ("1", "uuid-1"), ("2", "uuid-b")],
                ),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, false, true)),
            ),
            // The previous source stays while it is a candidate replica, even when a lower
            // ordinal is one too.
            (
                "triple-2nd-keeps-last-source",
                previous(2, "uuid-2", &set3),
                instances(0, &all3),
                Ok((2, true, false)),
            ),
            // #603: the previous source (1) was re-cloned; 2 kept its history, so it is the
            // source and its binlogs are complete; 1 would have had a gap.
            (
                "603-source-recloned",
                previous(1, "uuid-1", &set3),
                instances(0, &[(0, "uuid-0"), (1, "uuid-new"), (2, "uuid-2")]),
                Ok((2, true, false)),
            ),
            // Ordinal keys that are not numbers never match.
            (
                "garbage-keys",
                previous(0, "uuid-0", &[("zero", "uuid-0")]),
                instances(1, &[(0, "uuid-0"), (1, "uuid-1")]),
                Ok((0, false, true)),
            ),
        ];
        for (name, prev, ready, expected) in cases {
            let got = choose_source(&prev, &ready).map(|c| {
                (
                    c.index,
                    c.take_binlog,
                    c.warning == Some(SKIP_BINLOG_WARNING),
                )
            });
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn source_choice_records_every_ready_uuid() {
        let choice = choose_source(
            &PreviousBackup::default(),
            &instances(0, &[(2, "uuid-2"), (0, "uuid-0")]),
        )
        .unwrap();
        assert_eq!(
            choice.uuid_set,
            BTreeMap::from([
                ("0".to_string(), "uuid-0".to_string()),
                ("2".to_string(), "uuid-2".to_string())
            ])
        );
        assert_eq!(choice.warning, None);
    }

    #[test]
    fn binlog_start_file_table() {
        let prev = previous(1, "uuid-1", &[]);
        let logs = strings(&["binlog.000010", "binlog.000009", "binlog.000011"]);
        assert_eq!(binlog_start_file(&prev, 1, &logs).unwrap(), "binlog.000003");
        assert_eq!(binlog_start_file(&prev, 2, &logs).unwrap(), "binlog.000009");
        assert_eq!(
            binlog_start_file(&prev, 2, &[]),
            Err(FormatError::NoBinaryLogs)
        );
        let unrecorded = PreviousBackup {
            binlog_filename: String::new(),
            ..prev
        };
        assert_eq!(
            binlog_start_file(&unrecorded, 1, &logs).unwrap(),
            "binlog.000009"
        );
    }

    // --- keys ---

    #[test]
    fn keys_are_mocos() {
        let t1 = t("2021-05-15T23:00:03Z");
        assert_eq!(cluster_prefix("foo", "bar"), "moco/foo/bar/");
        assert_eq!(
            dump_key("foo", "bar", t1),
            "moco/foo/bar/20210515-230003/dump.tar"
        );
        assert_eq!(
            binlog_key("foo", "bar", t1),
            "moco/foo/bar/20210515-230003/binlog.tar.zst"
        );
        assert_eq!(backup_time_text(t1), "20210515-230003");
        assert_eq!(parse_backup_time("20210515-230003").unwrap(), t1);
        assert_eq!(
            parse_key(
                "moco/foo/bar/",
                "moco/foo/bar/20210515-230003/binlog.tar.zst"
            ),
            Some((t1, ObjectKind::Binlog))
        );
        for bad in [
            "20210515-2300",
            "20211315-230003",
            "20210515-230060",
            "2021051-5230003",
            "20210515x230003",
        ] {
            assert!(parse_backup_time(bad).is_err(), "{bad}");
        }
        for garbage in [
            "moco/foo/bar/20210515-230003/dump.tar.tmp",
            "moco/foo/bar/20210515-230003/x/dump.tar",
            "moco/foo/bar/latest/dump.tar",
            "moco/foo/bar2/20210515-230003/dump.tar",
            "moco/foo/bar/20210515-230003/old-dump.tar",
        ] {
            assert_eq!(parse_key("moco/foo/bar/", garbage), None, "{garbage}");
        }
    }

    // --- the restore choice ---

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(|k| format!("moco/ns/db/{k}")).collect()
    }

    fn plan(keys: &[String], point: &str) -> Result<RestorePlan, RestorePointError> {
        plan_restore("ns", "db", keys, t(point))
    }

    /// #563 as reported: backups at 09-02 03:03 and 09-03 03:03 (whose binlogs went to the
    /// 09-02 folder), restore to 09-03 00:00. MOCO before 0.17.0 loaded the 09-02 dump and
    /// applied no binlog. Then again with a later backup, so that a newer tarball exists (the
    /// one the maintainers said MOCO could pick instead).
    #[test]
    fn issue_563_replays_the_binlogs_of_the_dumps_folder() {
        let expected = RestorePlan {
            dump_key: "moco/ns/db/20230902-030300/dump.tar".into(),
            dump_time: t("2023-09-02T03:03:00Z"),
            binlog_keys: vec!["moco/ns/db/20230902-030300/binlog.tar.zst".into()],
            stop_at: Some(t("2023-09-03T00:00:00Z")),
        };
        let mut stored = keys(&[
            "20230903-030300/dump.tar",
            "20230902-030300/dump.tar",
            "20230902-030300/binlog.tar.zst",
        ]);
        assert_eq!(plan(&stored, "2023-09-03T00:00:00Z"), Ok(expected.clone()));
        stored.extend(keys(&[
            "20230904-030300/dump.tar",
            "20230903-030300/binlog.tar.zst",
        ]));
        assert_eq!(plan(&stored, "2023-09-03T00:00:00Z"), Ok(expected));
    }

    #[test]
    fn restore_choice_table() {
        let stored = keys(&[
            "20240101-000000/dump.tar",
            "20240101-000000/binlog.tar.zst",
            "20240102-000000/dump.tar",
            "20240102-000000/binlog.tar.zst",
            "20240103-000000/dump.tar",
            "20240102-000000/notes.txt",
            "garbage",
        ]);
        let b1 = "moco/ns/db/20240101-000000/";
        let b2 = "moco/ns/db/20240102-000000/";
        let b3 = "moco/ns/db/20240103-000000/";
        type Expect<'a> = Result<(String, Vec<String>, Option<&'a str>), RestorePointError>;
        let ok = |folder: &str, binlog: bool, stop: Option<&'static str>| -> Expect<'static> {
            let binlogs = if binlog {
                vec![format!("{folder}binlog.tar.zst")]
            } else {
                vec![]
            };
            Ok((format!("{folder}dump.tar"), binlogs, stop))
        };
        let cases: Vec<(&str, Expect)> = vec![
            // Exactly on a backup: that dump alone.
            ("2024-01-01T00:00:00Z", ok(b1, false, None)),
            ("2024-01-02T00:00:00Z", ok(b2, false, None)),
            ("2024-01-03T00:00:00Z", ok(b3, false, None)),
            // Between backups: the dump before plus its folder's binlogs.
            (
                "2024-01-01T00:00:01Z",
                ok(b1, true, Some("2024-01-01T00:00:01Z")),
            ),
            (
                "2024-01-01T23:59:59Z",
                ok(b1, true, Some("2024-01-01T23:59:59Z")),
            ),
            (
                "2024-01-02T12:00:00Z",
                ok(b2, true, Some("2024-01-02T12:00:00Z")),
            ),
            // Before the first backup: the earliest restorable time is named.
            (
                "2023-12-31T23:59:59Z",
                Err(RestorePointError::BeforeFirstBackup {
                    point: t("2023-12-31T23:59:59Z"),
                    earliest: t("2024-01-01T00:00:00Z"),
                }),
            ),
            // After the newest backup: its binlogs are not stored yet.
            (
                "2024-01-03T00:00:01Z",
                Err(RestorePointError::AfterLatestBackup {
                    point: t("2024-01-03T00:00:01Z"),
                    latest: t("2024-01-03T00:00:00Z"),
                }),
            ),
        ];
        for (point, expected) in cases {
            let got = plan(&stored, point)
                .map(|p| (p.dump_key, p.binlog_keys, p.stop_at.map(|s| s.to_string())));
            let expected = expected.map(|(d, b, s)| (d, b, s.map(String::from)));
            assert_eq!(got, expected, "{point}");
        }
    }

    #[test]
    fn a_backup_that_skipped_its_binlogs_leaves_a_gap() {
        // The 01-02 backup could not fetch binlogs (#603's warning): nothing reaches between.
        let stored = keys(&["20240101-000000/dump.tar", "20240102-000000/dump.tar"]);
        let err = plan(&stored, "2024-01-01T12:00:00Z").unwrap_err();
        assert_eq!(
            err,
            RestorePointError::BinlogMissing {
                point: t("2024-01-01T12:00:00Z"),
                dump_time: t("2024-01-01T00:00:00Z"),
                next_backup: t("2024-01-02T00:00:00Z"),
            }
        );
        assert!(
            err.to_string()
                .ends_with("the latest restorable time at or before it is 2024-01-01T00:00:00Z"),
            "{err}"
        );
    }

    #[test]
    fn no_backup_and_before_first_errors_say_what_exists() {
        assert_eq!(
            plan(
                &keys(&["20240101-000000/binlog.tar.zst"]),
                "2024-02-01T00:00:00Z"
            ),
            Err(RestorePointError::NoBackup {
                prefix: "moco/ns/db/".into()
            })
        );
        let err = plan(&keys(&["20240101-000000/dump.tar"]), "2023-01-01T00:00:00Z").unwrap_err();
        assert_eq!(
            err.to_string(),
            "restore point 2023-01-01T00:00:00Z is before the first backup; the earliest restorable time is 2024-01-01T00:00:00Z"
        );
    }

    #[test]
    fn a_backups_own_keys_restore() {
        // What this module writes for two backups is what it restores from.
        let (t1, t2) = (t("2024-03-01T01:02:03Z"), t("2024-03-02T01:02:03Z"));
        let stored = vec![
            dump_key("ns", "db", t1),
            dump_key("ns", "db", t2),
            binlog_key("ns", "db", t1),
        ];
        let p = plan_restore("ns", "db", &stored, t("2024-03-01T20:00:00Z")).unwrap();
        assert_eq!(p.dump_key, stored[0]);
        assert_eq!(p.binlog_keys, vec![stored[2].clone()]);
    }
}
