//! `moco plan` and `moco schema`.

use std::process::ExitCode;

/// Arguments of `moco plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Facts file (JSON), or `-` for standard input.
    #[arg(long)]
    pub facts: String,
}

/// Arguments of `moco schema`.
#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Which schema: `facts` or `decision`.
    pub which: String,
}

/// Errors of the plan commands.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Unknown schema name.
    #[error("unknown schema {0:?}: expected `facts` or `decision`")]
    UnknownSchema(String),
}

/// Runs `moco plan`.
pub fn run_plan(_args: &PlanArgs) -> Result<ExitCode, PlanError> {
    Ok(ExitCode::SUCCESS)
}

/// Runs `moco schema`.
pub fn run_schema(args: &SchemaArgs) -> Result<ExitCode, PlanError> {
    Err(PlanError::UnknownSchema(args.which.clone()))
}
