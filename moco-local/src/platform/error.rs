//! Errors of the local platform. Every variant names the path, port, pid or instance involved.

use std::path::PathBuf;

use thiserror::Error;

/// A failed local-platform operation.
#[derive(Debug, Error)]
pub enum LocalError {
    /// A file or directory operation failed.
    #[error("{}: {what}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A JSON file could not be read or written.
    #[error("{}: invalid JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The directory does not hold a cluster made by `moco local up`.
    #[error(
        "{}: not a moco local cluster directory (no cluster.json); create one with `moco local up --dir {}`",
        dir.display(),
        dir.display()
    )]
    NotACluster {
        /// The directory.
        dir: PathBuf,
    },
    /// The directory holds something `moco local` did not create.
    #[error("{}: refusing to use a directory moco local did not create: {reason}", dir.display())]
    Foreign {
        /// The directory.
        dir: PathBuf,
        /// What was found.
        reason: String,
    },
    /// `up` on a directory that already holds a cluster.
    #[error(
        "{}: already holds a moco local cluster; use `moco local resume --dir {}` to start it again or `moco local down --dir {} --wipe` to remove it",
        dir.display(),
        dir.display(),
        dir.display()
    )]
    AlreadyInitialised {
        /// The directory.
        dir: PathBuf,
    },
    /// A TCP port is taken.
    #[error("127.0.0.1:{port} ({what}) is already in use")]
    PortInUse {
        /// The port.
        port: u16,
        /// Which listener needed it.
        what: String,
    },
    /// A port range does not fit into 1..=65535.
    #[error("base port {base} with {count} ports does not fit below 65536")]
    PortRange {
        /// First port.
        base: u16,
        /// Number of ports needed.
        count: u32,
    },
    /// An instance ordinal outside the cluster.
    #[error("instance {index} does not exist: the cluster's instances are {}", instance_range(*.replicas))]
    NoSuchInstance {
        /// The ordinal asked for.
        index: u32,
        /// The cluster size.
        replicas: u32,
    },
    /// A process could not be signalled or inspected.
    #[error("instance {index}: pid {pid}: {what}: {source}")]
    Process {
        /// The ordinal.
        index: u32,
        /// The process id.
        pid: u32,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// An external command failed.
    #[error("{what}: {command} failed: {message}")]
    Command {
        /// What it was for (`instance 2: clone`).
        what: String,
        /// The program.
        command: String,
        /// Exit status and the end of its output.
        message: String,
    },
    /// A wait did not finish in time.
    #[error("{what}: timed out after {seconds} s{}", detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Timeout {
        /// What was awaited.
        what: String,
        /// The limit.
        seconds: u64,
        /// Last observation, if any.
        detail: Option<String>,
    },
    /// The manager process of the cluster is not running.
    #[error("{}: the moco local manager is not running (start it with `moco local resume --dir {}`)", dir.display(), dir.display())]
    ManagerNotRunning {
        /// The cluster directory.
        dir: PathBuf,
    },
    /// Anything else, with context.
    #[error("{context}: {message}")]
    Other {
        /// Where it happened.
        context: String,
        /// What happened.
        message: String,
    },
}

impl LocalError {
    /// An [`LocalError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> Self {
        LocalError::Io {
            path: path.into(),
            what,
            source,
        }
    }

    /// An [`LocalError::Other`].
    pub fn other(context: impl Into<String>, message: impl Into<String>) -> Self {
        LocalError::Other {
            context: context.into(),
            message: message.into(),
        }
    }
}

/// The ordinals of a cluster of `replicas` instances, as people read them: `0–2`, or `0`.
fn instance_range(replicas: u32) -> String {
    match replicas {
        0 | 1 => "0".to_owned(),
        n => format!("0–{}", n - 1),
    }
}
