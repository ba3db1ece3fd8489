//! `pod-runner exec`: the runner's stand-in for `kubectl exec` (there is no kubelet API to
//! stream through). The worker keeps the main process id of each running container in
//! `STATE/exec/<namespace>/<pod>/<container>.pid`; this enters that process's namespaces.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// `pod-runner exec --state-dir STATE NAMESPACE/POD CONTAINER -- COMMAND...`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The runner's state directory.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// The Pod, as `NAMESPACE/NAME`.
    pub pod: String,
    /// The container.
    pub container: String,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Why `exec` could not run the command.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The Pod argument is not `NAMESPACE/NAME`.
    #[error("POD must be NAMESPACE/NAME, not {0:?}")]
    PodName(String),
    /// No such running container.
    #[error("no running container {container:?} in Pod {pod} (no {path})")]
    NotRunning {
        /// The Pod.
        pod: String,
        /// The container.
        container: String,
        /// The file looked for.
        path: String,
    },
    /// `container-exec` could not be run.
    #[error("running {exe}: {source}")]
    Exec {
        /// The runner binary.
        exe: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The pid file of a running container.
pub fn pid_file(state: &Path, namespace: &str, pod: &str, container: &str) -> PathBuf {
    state
        .join("exec")
        .join(namespace)
        .join(pod)
        .join(format!("{container}.pid"))
}

/// Replaces this process with `pod-runner container-exec` into the container.
pub fn main(args: &ExecArgs) -> Result<std::convert::Infallible, ExecError> {
    let (namespace, pod) = args
        .pod
        .split_once('/')
        .filter(|(n, p)| !n.is_empty() && !p.is_empty())
        .ok_or_else(|| ExecError::PodName(args.pod.clone()))?;
    let file = pid_file(&args.state_dir, namespace, pod, &args.container);
    let pid = std::fs::read_to_string(&file)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .ok_or_else(|| ExecError::NotRunning {
            pod: args.pod.clone(),
            container: args.container.clone(),
            path: file.display().to_string(),
        })?;
    let exe = std::env::current_exe().map_err(|source| ExecError::Exec {
        exe: "pod-runner".into(),
        source,
    })?;
    let source = std::process::Command::new(&exe)
        .arg("container-exec")
        .arg("--pid")
        .arg(pid.to_string())
        .arg("--")
        .args(&args.command)
        .exec();
    Err(ExecError::Exec {
        exe: exe.display().to_string(),
        source,
    })
}
