//! `moco init` and `moco agent`: the programs of a MySQLCluster's Pod, whose work is
//! `moco_agent`'s. Here: logging, the runtime and the exit code.

use std::process::ExitCode;

use moco_agent::init::InitArgs;
use moco_agent::{AgentArgs, AgentError};
use moco_http::flags::LogEncoder;

use crate::logging::{self, LogOutput};
use crate::signals;

/// Errors of the in-pod subcommands.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// From the program.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Runs `moco init` once.
pub(crate) fn run_init(args: &InitArgs) -> Result<ExitCode, Error> {
    logging::init(LogOutput::Stderr, LogEncoder::Json, tracing::Level::INFO);
    let runtime = crate::async_runtime().map_err(Error::Runtime)?;
    let report = runtime.block_on(moco_agent::init::run(args))?;
    tracing::info!(
        swapped_clone = report.swapped_clone,
        rekeyed = report.rekeyed,
        initialized = report.initialized,
        loaded_timezones = report.loaded_timezones,
        replica_role = report.replica_role,
        snippet = %report.snippet.display(),
        "moco init done"
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `moco agent` until SIGTERM or SIGINT.
pub(crate) fn run_agent(args: &AgentArgs) -> Result<ExitCode, Error> {
    logging::init(LogOutput::Stderr, LogEncoder::Json, tracing::Level::INFO);
    moco_http::tls::install_crypto_provider();
    let runtime = crate::async_runtime().map_err(Error::Runtime)?;
    runtime.block_on(moco_agent::agent::run(args, signals::shutdown(), None))?;
    Ok(ExitCode::SUCCESS)
}
