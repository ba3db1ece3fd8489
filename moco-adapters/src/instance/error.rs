//! Failures of the instance procedures.

use std::path::PathBuf;

use moco_cluster::ports::PortError;
use thiserror::Error;

/// A failed instance procedure, naming the file, command or server it concerns.
#[derive(Debug, Error)]
pub enum InstanceError {
    /// A file or process operation failed.
    #[error("{what} {path}: {source}", path = path.display())]
    Io {
        /// The file, directory or program.
        path: PathBuf,
        /// The operation.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A tool exited with a failure.
    #[error("`{command}` failed ({status}):\n{output_tail}")]
    Command {
        /// The command line (no passwords).
        command: String,
        /// Its exit status.
        status: String,
        /// The end of its output.
        output_tail: String,
    },
    /// A step did not finish in time.
    #[error("{what} timed out after {seconds} s")]
    Timeout {
        /// The step.
        what: String,
        /// The limit.
        seconds: u64,
    },
    /// A statement on the server failed.
    #[error(transparent)]
    Sql(#[from] PortError),
    /// The inputs do not allow the procedure (a MySQL-only step on MariaDB, …).
    #[error("{0}")]
    Invalid(String),
}

impl InstanceError {
    pub(crate) fn io(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> Self {
        InstanceError::Io {
            path: path.into(),
            what,
            source,
        }
    }
}

/// The last `lines` lines of `text`, for error messages.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last 15 lines of the file at `path` (empty when it cannot be read).
pub fn file_tail(path: &std::path::Path) -> String {
    tail(&std::fs::read_to_string(path).unwrap_or_default(), 15)
}
