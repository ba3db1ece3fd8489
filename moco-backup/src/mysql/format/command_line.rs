//! What a command line of the format is: one process ([`CommandLine`]) or processes piped into
//! each other ([`Pipeline`]), never holding a password ([`PasswordInput`] says how it is passed
//! on), and how MOCO's tools connect to a server ([`Endpoint`]): `mysqlsh` with its URI and the
//! password on stdin, `mysqlbinlog` and `mysql` with an option file.

use std::fmt;

use moco_core::moco_accounts::Account;
use moco_core::option_file::quote_value;

/// MySQL's classic protocol port, where MOCO's Jobs connect (`constants.MySQLPort`).
pub const MYSQL_PORT: u16 = 3306;

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

impl CommandLine {
    pub(super) fn new(program: &str, args: Vec<String>) -> Self {
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
pub(super) fn mysqlsh_connection(account: Account, server: &Endpoint) -> Vec<String> {
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
pub(super) fn client_connection(
    account: Account,
    server: &Endpoint,
    work_dir: &str,
) -> Vec<String> {
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

/// The password of `account` passed in [`option_file_path`].
pub(super) fn option_file_input(account: Account, work_dir: &str) -> PasswordInput {
    PasswordInput::OptionFile {
        path: option_file_path(work_dir, account),
    }
}
