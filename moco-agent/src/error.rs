//! Failures of the in-pod programs. Each names the flag, file, variable or server to look at:
//! the reader is someone reading a crash-looping container's log.

use std::path::PathBuf;

use moco_adapters::instance::InstanceError;
use moco_adapters::mysqld::MysqldError;
use moco_cluster::ports::PortError;

/// Coarse kinds of failure, usable as a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// A flag or an environment variable is missing or wrong.
    Config,
    /// A file or a process.
    Io,
    /// A statement on the server.
    Sql,
    /// The other agent or the network.
    Remote,
    /// Refused: busy, not empty, not allowed.
    Refused,
}

/// A failure of `moco init` or `moco agent`.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A required environment variable is missing or empty.
    #[error("the environment variable {0} is not set (or empty); the Pod template sets it")]
    MissingEnv(&'static str),
    /// A flag or variable holds a bad value.
    #[error("{name}: {message}")]
    Invalid {
        /// The flag (`--max-delay`) or variable (`POD_NAME`).
        name: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A file operation failed.
    #[error("{what} {path}: {source}", path = path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operation.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Starting, stopping or initialising mysqld failed.
    #[error(transparent)]
    Mysqld(#[from] MysqldError),
    /// An instance procedure (initialise, copy, seed) failed.
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// A statement failed.
    #[error(transparent)]
    Sql(#[from] PortError),
    /// The other side of a clone failed or could not be reached.
    #[error("{target}: {message}")]
    Remote {
        /// The agent called (`donor 10.0.0.5:9080`).
        target: String,
        /// What happened.
        message: String,
    },
    /// The request cannot be served now or at all.
    #[error("{0}")]
    Refused(String),
    /// A certificate or key could not be loaded.
    #[error(transparent)]
    Tls(#[from] moco_http::tls::TlsError),
    /// A listener could not be bound.
    #[error(transparent)]
    Bind(#[from] moco_http::listen::BindError),
}

impl AgentError {
    /// Its category.
    pub fn category(&self) -> Category {
        match self {
            AgentError::MissingEnv(_) | AgentError::Invalid { .. } | AgentError::Tls(_) => {
                Category::Config
            }
            AgentError::Io { .. } | AgentError::Mysqld(_) | AgentError::Bind(_) => Category::Io,
            AgentError::Instance(InstanceError::Sql(_)) | AgentError::Sql(_) => Category::Sql,
            AgentError::Instance(_) => Category::Io,
            AgentError::Remote { .. } => Category::Remote,
            AgentError::Refused(_) => Category::Refused,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> Self {
        AgentError::Io {
            path: path.into(),
            what,
            source,
        }
    }

    pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> Self {
        AgentError::Invalid {
            name,
            message: message.into(),
        }
    }
}
