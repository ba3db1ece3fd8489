//! Starting a container from the runner and following it: its main process (a child of the
//! runner) and its cgroup.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::cgroup::pid_t;
use super::{Cgroup, ContainerError, ContainerSpec, Exit};

/// A started container: its main process and its cgroup.
#[derive(Debug)]
pub struct Running {
    pid: u32,
    child: tokio::process::Child,
    cgroup: Cgroup,
    exit: Option<Exit>,
}

/// Starts the container `spec` describes: makes its cgroup, writes the spec to
/// `spec.root/spec.json` and spawns `exe container-init` on it, stdout and stderr appended to
/// `spec.log`, stdin from /dev/null. Returns once the program runs in the container (or
/// container-init has failed: its log says why, and its exit code is 127).
pub async fn start(exe: &Path, spec: &ContainerSpec) -> Result<Running, ContainerError> {
    let cgroup = Cgroup::from_relative(&spec.cgroup);
    cgroup.create()?;
    let io = |what, path: &Path| {
        let path = path.to_owned();
        move |source| ContainerError::Io { what, path, source }
    };
    fs::create_dir_all(&spec.root).map_err(io("making the container directory", &spec.root))?;
    let spec_path = spec.root.join("spec.json");
    let json = serde_json::to_vec_pretty(spec).map_err(|source| ContainerError::Spec {
        path: spec_path.clone(),
        source,
    })?;
    fs::write(&spec_path, json).map_err(io("writing the spec", &spec_path))?;
    if let Some(dir) = spec.log.parent() {
        fs::create_dir_all(dir).map_err(io("making the log directory", dir))?;
    }
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.log)
        .map_err(io("opening the log", &spec.log))?;
    let log2 = log.try_clone().map_err(io("opening the log", &spec.log))?;
    let child = tokio::process::Command::new(exe)
        .arg("container-init")
        .arg(&spec_path)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        // The container outlives a dropped handle, as a runtime's containers outlive the
        // kubelet: it is stopped by signal, kill_all or `down`.
        .kill_on_drop(false)
        .spawn()
        .map_err(|source| ContainerError::Spawn {
            exe: exe.to_owned(),
            what: format!("container-init for {}", spec.program.display()),
            source,
        })?;
    let pid = child.id().ok_or_else(|| ContainerError::Spawn {
        exe: exe.to_owned(),
        what: format!("container-init for {}", spec.program.display()),
        source: std::io::Error::other("the process has no pid (already reaped)"),
    })?;
    // container-init has joined the cgroup before the exec waited for here.
    until_exec(pid, exe).await;
    Ok(Running {
        pid,
        child,
        cgroup,
        exit: None,
    })
}

/// How long `start` waits for `container-init` to become the program.
const EXEC_DEADLINE: Duration = Duration::from_secs(10);

/// Waits until process `pid` is no longer `exe` (container-init has exec'd the program, or
/// has ended), as a runtime's start returns once the program runs: an exec probe or an
/// `exec` right after `start` then finds the container's namespaces and root, not the
/// host's. Compared by inode: the path of /proc/PID/exe is relative to the container's root.
async fn until_exec(pid: u32, exe: &Path) {
    let Ok(ours) = fs::metadata(exe) else {
        return;
    };
    let proc_exe = format!("/proc/{pid}/exe");
    let end = Instant::now() + EXEC_DEADLINE;
    loop {
        match fs::metadata(&proc_exe) {
            Ok(m) if m.dev() == ours.dev() && m.ino() == ours.ino() => {}
            _ => return,
        }
        if Instant::now() >= end {
            tracing::warn!(
                pid,
                "container-init has not exec'd its program after {EXEC_DEADLINE:?}"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

impl Running {
    /// The main process (the program, once `container-init` has exec'd it).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The container's cgroup.
    pub fn cgroup(&self) -> &Cgroup {
        &self.cgroup
    }

    /// Waits for the main process to end, then kills whatever is left in the cgroup (orphans
    /// the program forked, `exec` sessions): there is no PID namespace whose end would.
    pub async fn wait(&mut self) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        let exit = match self.child.wait().await {
            Ok(status) => Exit {
                code: status.code(),
                signal: status.signal(),
            },
            Err(e) => {
                tracing::warn!(pid = self.pid, error = %e, "waiting for a container's process");
                Exit {
                    code: None,
                    signal: None,
                }
            }
        };
        self.exit = Some(exit);
        if let Err(e) = self.kill_all().await {
            tracing::warn!(pid = self.pid, error = %e, "killing what a container left");
        }
        exit
    }

    /// Sends `signal` to the main process, as a runtime's stop does (SIGTERM, then SIGKILL
    /// after the grace period); nothing once [`wait`](Self::wait) has seen it end.
    pub fn signal(&self, signal: Signal) -> Result<(), ContainerError> {
        if self.exit.is_some() {
            return Ok(());
        }
        // Until reaped by wait, the pid cannot be reused: a zombie still holds it.
        match kill(Pid::from_raw(pid_t(self.pid)), signal) {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(e) => Err(ContainerError::Step {
                step: format!("sending {signal} to container process {}", self.pid),
                source: e.into(),
            }),
        }
    }

    /// Freezes every process of the container (a paused machine, to the others).
    pub async fn freeze(&self) -> Result<(), ContainerError> {
        let cgroup = self.cgroup.clone();
        blocking(move || cgroup.freeze()).await
    }

    /// Lets a frozen container run again.
    pub async fn thaw(&self) -> Result<(), ContainerError> {
        let cgroup = self.cgroup.clone();
        blocking(move || cgroup.thaw()).await
    }

    /// Kills every process of the container (thawed first if frozen) and waits until none is
    /// left; returns how many were killed.
    pub async fn kill_all(&self) -> Result<usize, ContainerError> {
        let cgroup = self.cgroup.clone();
        blocking(move || cgroup.kill_all()).await
    }
}

/// Runs a cgroup step (which polls until the kernel is done) off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, super::CgroupError> + Send + 'static,
) -> Result<T, ContainerError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map_err(Into::into),
        Err(e) => Err(ContainerError::Step {
            step: "a cgroup step's thread".to_owned(),
            source: std::io::Error::other(e.to_string()),
        }),
    }
}
