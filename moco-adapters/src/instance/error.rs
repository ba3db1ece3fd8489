//! Failures of the instance procedures.

use std::path::PathBuf;

use moco_cluster::ports::PortError;
use thiserror::Error;

use crate::failure::{CommandFailed, IoError};

/// A failed instance procedure, naming the file, command or server it concerns.
#[derive(Debug, Error)]
pub enum InstanceError {
    /// A file or process operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A tool exited with a failure.
    #[error(transparent)]
    Command(#[from] CommandFailed),
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
        InstanceError::Io(IoError::new(path, what, source))
    }
}
