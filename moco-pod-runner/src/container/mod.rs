//! Containers as local processes: started through `pod-runner container-init` in the Pod's
//! network namespace and their own mount and UTS namespaces, tracked by a freezer cgroup so
//! that every process of a container can be signalled, frozen and killed. (Being written.)

mod spec;

use std::path::PathBuf;

pub use spec::{BindMount, ContainerSpec, ExecOutput, Exit};

/// `pod-runner container-init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The container's spec (JSON).
    pub spec: PathBuf,
}

/// `pod-runner container-exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// A process of the container.
    #[arg(long)]
    pub pid: u32,
}

/// Placeholder until written.
#[derive(Debug, thiserror::Error)]
#[error("not written yet")]
pub struct ContainerError;

/// Placeholder until written.
pub fn init_main(_args: &InitArgs) -> Result<(), ContainerError> {
    Err(ContainerError)
}

/// Placeholder until written.
pub fn exec_main(_args: &ExecArgs) -> Result<(), ContainerError> {
    Err(ContainerError)
}
