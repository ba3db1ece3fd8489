//! `moco controller`: the in-cluster process of the install manifests, whose flags, servers,
//! reconciler and clustering are `moco_operator`'s. Here: logging, the runtime, and SIGTERM/SIGINT as the shutdown.

use std::process::ExitCode;

use moco_operator::config::pod_namespace;
use moco_operator::operator::OperatorConfig;
use moco_operator::{ControllerArgs, ControllerError, ServeConfig};

use crate::logging::{self, LogOutput};
use crate::signals;

/// Errors of `moco controller`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// From the process itself.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Runs `moco controller` until SIGTERM or SIGINT.
pub(crate) fn run(args: &ControllerArgs) -> Result<ExitCode, Error> {
    logging::init(LogOutput::Stderr, args.log_encoder(), args.log_level());
    moco_operator::announce(args);
    let namespace = pod_namespace(std::env::var_os("POD_NAMESPACE"))?;
    let config = ServeConfig::from_args(args, namespace.clone());
    let operator = OperatorConfig::from_args(args, namespace);
    let runtime = crate::async_runtime().map_err(Error::Runtime)?;
    runtime.block_on(moco_operator::run(&config, operator, signals::shutdown()))?;
    Ok(ExitCode::SUCCESS)
}
