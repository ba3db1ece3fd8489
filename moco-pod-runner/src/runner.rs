//! `pod-runner run`: the runner's main loop. (Being written.)

use std::path::PathBuf;

/// `pod-runner run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The runner's state directory (network-up made its network.json).
    #[arg(long)]
    pub state_dir: PathBuf,
}

/// Placeholder until written.
#[derive(Debug, thiserror::Error)]
#[error("not written yet")]
pub struct RunError;

/// Placeholder until written.
pub fn main(_args: RunArgs) -> Result<(), RunError> {
    Err(RunError)
}
