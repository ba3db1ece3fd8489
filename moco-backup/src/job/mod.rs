//! The programs of the backup CronJob and the restore Job (`moco backup`, `moco restore`),
//! with MOCO's command lines and environment, so that the objects the operator renders
//! (`moco_operator::render::jobs`) run them unchanged.
//!
//! [`cluster`] reads and records on the MySQLCluster (its Pods, `status.backup`, Events);
//! [`backup`] is the backup Job, [`restore`] the restore Job, and [`archive`] archives the
//! binlogs every few seconds (beyond MOCO). A MariaDB cluster's steps are in those three; a
//! MySQL cluster's, in MOCO's format, are in [`mysql`] (its archiving rounds in
//! [`mysql::archive`]).

pub mod archive;
pub mod args;
pub mod backup;
pub mod cluster;
pub mod mysql;
pub mod restore;
pub mod server_tls;

use moco_agent::error::AgentError;
use moco_api::cluster::ObjectError;

use crate::bucket::BucketError;
use crate::catalog::PlanRestoreError;
use crate::layout::BackupError;
use crate::mariadb::binlog::replay::ReplayError;

/// Why a Job failed. Each names what it was working on.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The command line or the environment.
    #[error("{field}: {message}")]
    Input {
        /// The flag, argument or variable.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The MySQLCluster cannot be backed up or restored as it is.
    #[error("MySQLCluster {namespace}/{name}: {message}")]
    Cluster {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        message: String,
    },
    /// An instance's server answered with an error or not at all.
    #[error("instance {index}: {message}")]
    Instance {
        /// Its ordinal.
        index: u32,
        /// The statement and what went wrong.
        message: String,
    },
    /// The Kubernetes API.
    #[error("{action}: {source}")]
    Kube {
        /// What was asked (`get MySQLCluster ns/name`).
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The cluster's object is not what this build understands.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// An agent.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The backup itself.
    #[error(transparent)]
    Backup(#[from] BackupError),
    /// The object store.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// Planning the restore.
    #[error(transparent)]
    PlanRestore(#[from] PlanRestoreError),
    /// Replaying the archived binlogs.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A tool of MOCO's MySQL format.
    #[error(transparent)]
    Command(#[from] crate::mysql::command::CommandError),
}

impl JobError {
    pub(crate) fn input(field: impl Into<String>, message: impl Into<String>) -> Self {
        JobError::Input {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> JobError {
        let action = action.into();
        move |source| JobError::Kube { action, source }
    }
}
