//! The runner's network: the bridge with the Node addresses, the Service range routed to a
//! blackhole, one network namespace per Pod joined to the bridge by a veth pair, and the faults
//! that cut a Pod off. (Being written.)

use std::path::PathBuf;

/// `pod-runner network-up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// The runner's state directory.
    #[arg(long)]
    pub state_dir: PathBuf,
}

/// `pod-runner down`.
#[derive(Debug, clap::Args)]
pub struct DownArgs {
    /// The runner's state directory.
    #[arg(long)]
    pub state_dir: PathBuf,
}

/// Placeholder until written.
#[derive(Debug, thiserror::Error)]
#[error("not written yet")]
pub struct NetError;

/// Placeholder until written.
pub fn up(_args: &UpArgs) -> Result<(), NetError> {
    Err(NetError)
}

/// Placeholder until written.
pub fn down(_args: &DownArgs) -> Result<(), NetError> {
    Err(NetError)
}
