//! `pod-runner container-init`: the first process of a container. It runs single-threaded
//! (setns into a mount namespace refuses threaded processes) and becomes the program by exec,
//! so that the runner's child is the container's main process.

use std::convert::Infallible;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::sched::{CloneFlags, setns, unshare};
use nix::unistd::{Gid, Uid, User, setgid, setgroups, sethostname, setsid, setuid};

use super::{Cgroup, ContainerError, ContainerSpec, InitArgs, StepContext, rootfs};

/// Enters the container described by `args.spec` and execs its program; returns only on
/// failure (`main` then prints `pod-runner container-init: <what failed>: <why>` to the
/// container's log and exits 127, as a runtime does for a program it cannot start).
pub fn init_main(args: &InitArgs) -> Result<Infallible, ContainerError> {
    let text = fs::read(&args.spec).map_err(|source| ContainerError::Io {
        what: "reading the spec",
        path: args.spec.clone(),
        source,
    })?;
    let spec: ContainerSpec =
        serde_json::from_slice(&text).map_err(|source| ContainerError::Spec {
            path: args.spec.clone(),
            source,
        })?;

    // First, so that every process the program will start is tracked from the beginning.
    Cgroup::from_relative(&spec.cgroup).add(std::process::id())?;
    // Its own session: a terminal's signals (Ctrl-C at the runner) do not reach containers,
    // which are stopped by the runner's signals only.
    setsid().step(|| "setsid".to_owned())?;
    enter_netns(&spec.netns)?;
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS)
        .step(|| "unshare(CLONE_NEWNS | CLONE_NEWUTS)".to_owned())?;
    let merged = rootfs::make(&spec)?;
    rootfs::enter(&merged)?;

    let dir = spec.working_dir.as_deref().unwrap_or(Path::new("/"));
    // Made when missing, as runtimes do (still as root: before the user is switched).
    fs::create_dir_all(dir).step(|| format!("making the working directory {}", dir.display()))?;
    std::env::set_current_dir(dir)
        .step(|| format!("chdir to the working directory {}", dir.display()))?;
    sethostname(&spec.hostname).step(|| format!("sethostname {}", spec.hostname))?;
    switch_user(&spec)?;

    // std's exec, not execve(2) directly: it also resets the signal mask and SIGPIPE, which
    // Rust's runtime ignores and an exec would otherwise pass on to the program.
    let error = Command::new(&spec.program)
        .arg0(&spec.argv0)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .exec();
    Err(ContainerError::Step {
        step: format!("executing {}", spec.program.display()),
        source: error,
    })
}

fn enter_netns(netns: &Path) -> Result<(), ContainerError> {
    let file = fs::File::open(netns)
        .step(|| format!("opening the Pod's network namespace {}", netns.display()))?;
    setns(&file, CloneFlags::CLONE_NEWNET).step(|| format!("setns into {}", netns.display()))
}

/// Takes the spec's user, group and supplementary groups; the group defaults to the user's
/// primary group in the container's /etc/passwd (0 when it has none). Nothing changes when
/// none is set: the container runs as the runner does.
fn switch_user(spec: &ContainerSpec) -> Result<(), ContainerError> {
    let group = spec.group.or_else(|| {
        spec.user.map(|uid| {
            User::from_uid(Uid::from_raw(uid))
                .ok()
                .flatten()
                .map_or(0, |u| u.gid.as_raw())
        })
    });
    if spec.user.is_some() || group.is_some() || !spec.supplementary_groups.is_empty() {
        let groups: Vec<Gid> = spec
            .supplementary_groups
            .iter()
            .copied()
            .map(Gid::from_raw)
            .collect();
        setgroups(&groups).step(|| format!("setgroups {:?}", spec.supplementary_groups))?;
    }
    if let Some(gid) = group {
        setgid(Gid::from_raw(gid)).step(|| format!("setgid {gid}"))?;
    }
    if let Some(uid) = spec.user {
        setuid(Uid::from_raw(uid)).step(|| format!("setuid {uid}"))?;
    }
    Ok(())
}
