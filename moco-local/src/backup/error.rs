//! Why a backup, restore or verification of a local cluster failed.

use moco_backup::catalog::PlanRestoreError;
use moco_backup::layout::BackupError;
use moco_backup::mariadb::binlog::replay::ReplayError;

/// Why a local backup cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum LocalBackupError {
    /// The cluster directory.
    #[error("--dir {dir}: {message}")]
    Cluster {
        /// The directory.
        dir: String,
        /// What is wrong.
        message: String,
    },
    /// Taking or storing the backup.
    #[error(transparent)]
    Backup(#[from] BackupError),
}

/// Why a point-in-time restore failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreToError {
    /// The cluster or the base backup.
    #[error(transparent)]
    Local(#[from] LocalBackupError),
    /// No restore can be planned.
    #[error(transparent)]
    Plan(#[from] PlanRestoreError),
    /// Replaying binlogs.
    #[error(transparent)]
    Replay(#[from] ReplayError),
}
