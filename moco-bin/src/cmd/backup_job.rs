//! `moco backup` and `moco restore` (and `moco-backup backup|restore`): the programs of MOCO's
//! backup CronJob and restore Job; `moco archive`, the binlog archiver's. Their work is
//! `moco_backup::job`'s. Here: logging, the runtime, the environment and the exit code.

use std::process::ExitCode;

use moco_backup::job::JobError;
use moco_backup::job::archive::ArchiveJob;
use moco_backup::job::args::{ArchiveArgs, BackupArgs, RestoreArgs};
use moco_backup::job::backup::BackupJob;
use moco_backup::job::restore::RestoreJob;
use moco_http::flags::LogEncoder;

use crate::logging::{self, LogOutput};

/// Errors of the Job programs.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// From the program.
    #[error(transparent)]
    Job(#[from] JobError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Runs one backup.
pub(crate) fn run_backup(args: &BackupArgs) -> Result<ExitCode, Error> {
    logging::init(LogOutput::Stderr, LogEncoder::Json, tracing::Level::INFO);
    moco_http::tls::install_crypto_provider();
    let env = std::env::vars().collect();
    let runtime = crate::async_runtime().map_err(Error::Runtime)?;
    runtime.block_on(async {
        let job = BackupJob::in_pod(args, &env).await?;
        job.run().await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Runs one restore.
pub(crate) fn run_restore(args: &RestoreArgs) -> Result<ExitCode, Error> {
    logging::init(LogOutput::Stderr, LogEncoder::Json, tracing::Level::INFO);
    moco_http::tls::install_crypto_provider();
    let env = std::env::vars().collect();
    let runtime = crate::async_runtime().map_err(Error::Runtime)?;
    runtime.block_on(async {
        let job = RestoreJob::in_pod(args, &env).await?;
        job.run().await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Archives until SIGTERM or SIGINT.
pub(crate) fn run_archive(args: &ArchiveArgs) -> Result<ExitCode, Error> {
    logging::init(LogOutput::Stderr, LogEncoder::Json, tracing::Level::INFO);
    moco_http::tls::install_crypto_provider();
    let env = std::env::vars().collect();
    let runtime = crate::async_runtime().map_err(Error::Runtime)?;
    runtime.block_on(async {
        let job = ArchiveJob::in_pod(args, &env).await?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            crate::signals::shutdown().await;
            let _ = stop.send(true);
        });
        job.run(stopped, |_| {}).await;
        Ok::<(), JobError>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
