//! Running a command inside a running container (exec probes, tests), as `nsenter` does: the
//! target process's network, UTS and mount namespaces, its root and working directory, its
//! user, groups and environment, and its cgroup (so that the container's end ends it too).

use std::convert::Infallible;
use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sched::{CloneFlags, setns};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Gid, Pid, Uid, chroot, fchdir, setgid, setgroups, setuid};
use tokio::io::AsyncReadExt;

use super::cgroup::pid_t;
use super::{Cgroup, ContainerError, ExecArgs, ExecOutput, StepContext};

/// How long output is still read after the command ended (a background process it left may
/// hold the pipe open for ever).
const AFTER_EXIT: Duration = Duration::from_millis(100);

/// How long the end of a command killed at its time limit is waited for.
const AFTER_KILL: Duration = Duration::from_secs(1);

/// Runs `argv` inside the container of process `pid` through `exe container-exec`, with
/// stdout and stderr captured together; kills it (its whole process group) at `timeout`.
pub async fn exec(
    exe: &Path,
    pid: u32,
    argv: &[String],
    timeout: Duration,
) -> Result<ExecOutput, ContainerError> {
    let what = || format!("container-exec --pid {pid} -- {}", argv.join(" "));
    let spawn_error = |source| ContainerError::Spawn {
        exe: exe.to_owned(),
        what: what(),
        source,
    };
    let run_error = |source| ContainerError::Step {
        step: format!("running {} {}", exe.display(), what()),
        source,
    };
    let (reader, writer) = std::io::pipe().map_err(spawn_error)?;
    let writer2 = writer.try_clone().map_err(spawn_error)?;
    let mut command = tokio::process::Command::new(exe);
    command
        .arg("container-exec")
        .arg("--pid")
        .arg(pid.to_string())
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        // Its own group, so that the timeout kills what it started too.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(spawn_error)?;
    // The command holds the pipe's write ends: dropped, only the child's remain, and the
    // reader sees the end when the child (and what it started) closes them.
    drop(command);
    let child_pid = child.id();
    let mut reader = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(spawn_error)?;

    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut output = Vec::new();
    let mut buf = [0u8; 8192];
    let mut status = None;
    let mut eof = false;
    let mut timed_out = false;
    while !(eof && status.is_some()) {
        tokio::select! {
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => output.extend_from_slice(&buf[..n]),
                Err(e) => return Err(run_error(e)),
            },
            ended = child.wait(), if status.is_none() => {
                status = Some(ended.map_err(run_error)?);
                let soon = tokio::time::Instant::now() + AFTER_EXIT;
                if soon < deadline.deadline() {
                    deadline.as_mut().reset(soon);
                }
            },
            () = &mut deadline => {
                if status.is_none() {
                    timed_out = true;
                    if let Some(p) = child_pid {
                        let _ = killpg(Pid::from_raw(pid_t(p)), Signal::SIGKILL);
                    }
                    // In a frozen container the kill lands only at the thaw: the answer does
                    // not wait for it (tokio reaps the dropped child when it ends).
                    if let Ok(ended) = tokio::time::timeout(AFTER_KILL, child.wait()).await {
                        status = Some(ended.map_err(run_error)?);
                    }
                }
                break;
            },
        }
    }
    let code = if timed_out {
        None
    } else {
        status.and_then(|s| s.code())
    };
    Ok(ExecOutput {
        code,
        output,
        timed_out,
    })
}

/// `pod-runner container-exec --pid PID -- ARGV…`: becomes `ARGV` inside the container of
/// process `PID`. Returns only on failure (`main` prints it and exits 127).
pub fn exec_main(args: &ExecArgs) -> Result<Infallible, ContainerError> {
    let proc = PathBuf::from(format!("/proc/{}", args.pid));
    // Everything of the target is opened before entering anything: afterwards its /proc
    // entries are no longer at these paths (or not visible at all).
    let open = |name: &str| {
        let path = proc.join(name);
        fs::File::open(&path).map_err(|source| ContainerError::Io {
            what: "opening",
            path,
            source,
        })
    };
    let net = open("ns/net")?;
    let uts = open("ns/uts")?;
    let mnt = open("ns/mnt")?;
    let root = open("root")?;
    let cwd = open("cwd")?;
    let ids = Ids::read(&proc.join("status"))?;
    let env = environ(&proc.join("environ"))?;
    if let Some(cgroup) = freezer_cgroup(&proc.join("cgroup"))? {
        cgroup.add(std::process::id())?;
    }

    setns(&net, CloneFlags::CLONE_NEWNET).step(|| format!("setns into {}'s network", args.pid))?;
    setns(&uts, CloneFlags::CLONE_NEWUTS).step(|| format!("setns into {}'s UTS", args.pid))?;
    setns(&mnt, CloneFlags::CLONE_NEWNS).step(|| format!("setns into {}'s mounts", args.pid))?;
    // As nsenter: the mount namespace's root is not the process's root (pivot_root'ed), so
    // the root is taken from the process itself.
    fchdir(&root).step(|| format!("fchdir to {}'s root", args.pid))?;
    chroot(".").step(|| format!("chroot to {}'s root", args.pid))?;
    fchdir(&cwd).step(|| format!("fchdir to {}'s working directory", args.pid))?;
    drop((net, uts, mnt, root, cwd));

    let groups: Vec<Gid> = ids.groups.iter().copied().map(Gid::from_raw).collect();
    setgroups(&groups).step(|| format!("setgroups {:?}", ids.groups))?;
    setgid(Gid::from_raw(ids.gid)).step(|| format!("setgid {}", ids.gid))?;
    setuid(Uid::from_raw(ids.uid)).step(|| format!("setuid {}", ids.uid))?;

    let (program, rest) = args
        .argv
        .split_first()
        .ok_or_else(|| ContainerError::Step {
            step: "container-exec".to_owned(),
            source: std::io::Error::other("no command given"),
        })?;
    // std's exec: the search for `program` uses the container's PATH, and the signal mask
    // and SIGPIPE are reset (see init_main).
    let error = Command::new(program)
        .args(rest)
        .env_clear()
        .envs(env)
        .exec();
    Err(ContainerError::Step {
        step: format!("executing {program}"),
        source: error,
    })
}

/// The target's real user and group and its supplementary groups.
#[derive(Debug)]
struct Ids {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

impl Ids {
    fn read(status: &Path) -> Result<Self, ContainerError> {
        let text = fs::read_to_string(status).map_err(|source| ContainerError::Io {
            what: "reading",
            path: status.to_owned(),
            source,
        })?;
        let field = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name)).map(|rest| {
                rest.split_whitespace()
                    .filter_map(|n| n.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            })
        };
        let missing = |what: &str| ContainerError::Step {
            step: format!("reading {} from {}", what, status.display()),
            source: std::io::Error::other("not there"),
        };
        let uid = field("Uid:")
            .and_then(|v| v.first().copied())
            .ok_or_else(|| missing("Uid"))?;
        let gid = field("Gid:")
            .and_then(|v| v.first().copied())
            .ok_or_else(|| missing("Gid"))?;
        let groups = field("Groups:").unwrap_or_default();
        Ok(Self { uid, gid, groups })
    }
}

/// The environment the target was started with.
fn environ(path: &Path) -> Result<Vec<(String, String)>, ContainerError> {
    let bytes = fs::read(path).map_err(|source| ContainerError::Io {
        what: "reading",
        path: path.to_owned(),
        source,
    })?;
    Ok(bytes
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (k, v) = entry.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect())
}

/// The target's freezer cgroup, unless it is the hierarchy's root.
fn freezer_cgroup(path: &Path) -> Result<Option<Cgroup>, ContainerError> {
    let text = fs::read_to_string(path).map_err(|source| ContainerError::Io {
        what: "reading",
        path: path.to_owned(),
        source,
    })?;
    Ok(text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, dir) = (parts.next()?, parts.next()?, parts.next()?);
        let relative = dir.trim_start_matches('/');
        (controllers.split(',').any(|c| c == "freezer") && !relative.is_empty())
            .then(|| Cgroup::from_relative(relative))
    }))
}
