//! Containers as local processes: started through `pod-runner container-init` in the Pod's
//! network namespace and their own mount and UTS namespaces, over a copy-on-write view of the
//! host's filesystem, and tracked by a freezer cgroup so that every process of a container can
//! be signalled, frozen and killed.
//!
//! ```text
//! start()          the runner (tokio): cgroup, spec.json, spawns `pod-runner container-init`
//! init_main()      the new process: cgroup, netns, mount+UTS namespaces, overlay, volumes,
//!                  pivot_root, hostname, user, then exec of the program (same pid)
//! exec()/exec_main()  `pod-runner container-exec --pid P -- ARGV`: enters a running
//!                  container's namespaces, root, cwd, user and environment, and execs ARGV
//! ```

mod cgroup;
mod exec;
mod init;
mod rootfs;
mod run;
mod spec;

use std::path::PathBuf;

pub use cgroup::{Cgroup, CgroupError, FREEZER_ROOT, TreeRemoval};
pub use exec::{exec, exec_main};
pub use init::init_main;
pub use run::{Running, start};
pub use spec::{BindMount, ContainerSpec, ExecOutput, Exit, ImageDir};

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
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, num_args = 1..)]
    pub argv: Vec<String>,
}

/// Why starting, entering or running a container failed, naming the step and the file,
/// program or container.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// The container's cgroup.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// A file could not be read, written or made.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done (`writing the spec`, …).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The spec file is not a container spec.
    #[error("{} is not a container spec: {source}", path.display())]
    Spec {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The `pod-runner` process could not be started.
    #[error("starting `{} {what}`: {source}", exe.display())]
    Spawn {
        /// The `pod-runner` binary.
        exe: PathBuf,
        /// The subcommand and what it was for.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A step of entering or making a container (inside `container-init` or
    /// `container-exec`, where it becomes the one line printed before exit 127).
    #[error("{step}: {source}")]
    Step {
        /// What failed (`mounting overlay at …`, `setns into /run/netns/…`, …).
        step: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Names the step a system call's failure belongs to.
trait StepContext<T> {
    fn step(self, step: impl FnOnce() -> String) -> Result<T, ContainerError>;
}

impl<T, E: Into<std::io::Error>> StepContext<T> for Result<T, E> {
    fn step(self, step: impl FnOnce() -> String) -> Result<T, ContainerError> {
        self.map_err(|e| ContainerError::Step {
            step: step(),
            source: e.into(),
        })
    }
}
