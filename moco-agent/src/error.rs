//! Failures of the in-pod programs. Each names the flag, file, variable or server to look at:
//! the reader is someone reading a crash-looping container's log.

use std::path::PathBuf;

use moco_adapters::failure::IoError;
use moco_adapters::instance::InstanceError;
use moco_adapters::mysqld::MysqldError;
use moco_cluster::ports::PortError;

moco_core::error_category! {
    /// What kind of failure an [`AgentError`] is: a stable, low-cardinality name for metric
    /// labels and log fields (the message itself varies).
    pub enum ErrorCategory {
        /// A flag or an environment variable is missing or wrong.
        Config => "config",
        /// A file or a process.
        Io => "io",
        /// A statement on the server.
        Sql => "sql",
        /// The other agent or the network.
        Remote => "remote",
        /// Refused: busy, not empty, not allowed.
        Refused => "refused",
    }
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
    #[error(transparent)]
    Io(#[from] IoError),
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
    pub fn category(&self) -> ErrorCategory {
        match self {
            AgentError::MissingEnv(_) | AgentError::Invalid { .. } | AgentError::Tls(_) => {
                ErrorCategory::Config
            }
            AgentError::Io(_) | AgentError::Mysqld(_) | AgentError::Bind(_) => ErrorCategory::Io,
            AgentError::Instance(InstanceError::Sql(_)) | AgentError::Sql(_) => ErrorCategory::Sql,
            AgentError::Instance(_) => ErrorCategory::Io,
            AgentError::Remote { .. } => ErrorCategory::Remote,
            AgentError::Refused(_) => ErrorCategory::Refused,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> Self {
        AgentError::Io(IoError::new(path, what, source))
    }

    pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> Self {
        AgentError::Invalid {
            name,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metric labels must stay distinct and stable: dashboards and alerts key on them.
    #[test]
    fn categories_are_distinct_labels() {
        let labels = [
            AgentError::MissingEnv("POD_NAME"),
            AgentError::io("/d", "read", std::io::Error::other("x")),
            AgentError::Sql(PortError::Failed {
                target: "t".into(),
                message: "m".into(),
            }),
            AgentError::Remote {
                target: "t".into(),
                message: "m".into(),
            },
            AgentError::Refused("busy".into()),
        ]
        .map(|e| e.category().to_string());
        assert_eq!(labels, ["config", "io", "sql", "remote", "refused"]);
    }
}
