//! The freezer cgroup (v1) of a container: it holds every process the container starts, so that
//! all of them can be signalled, frozen (a stopped-the-world fault, as a paused VM) and killed,
//! orphans included, since there is no PID namespace whose end would kill them.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Where the freezer hierarchy is mounted.
pub const FREEZER_ROOT: &str = "/sys/fs/cgroup/freezer";

/// The runner's directory in the hierarchy; one directory per bridge below it.
const RUNNER_DIR: &str = "moco-pod-runner";

/// How long a freeze, a thaw or a kill may take before it is an error.
const DEADLINE: Duration = Duration::from_secs(10);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(5);

/// Why a cgroup step failed, naming the cgroup.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No v1 freezer hierarchy to make cgroups in.
    #[error(
        "no cgroup v1 freezer hierarchy at {FREEZER_ROOT} (the runner tracks containers' processes with it; mount one: mount -t cgroup -o freezer freezer {FREEZER_ROOT})"
    )]
    NoFreezer,
    /// A file of the cgroup could not be read or written, or its directory made or removed.
    #[error("cgroup {}: {}: {source}", cgroup.display(), what)]
    Io {
        /// The cgroup (relative to the hierarchy's root).
        cgroup: PathBuf,
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A signal could not be sent.
    #[error("cgroup {}: sending {signal} to {pid}: {source}", cgroup.display())]
    Signal {
        /// The cgroup.
        cgroup: PathBuf,
        /// The signal.
        signal: Signal,
        /// The process.
        pid: u32,
        /// Why.
        source: Errno,
    },
    /// A freeze, thaw or kill did not finish in time.
    #[error("cgroup {}: {what} did not finish in {DEADLINE:?} ({state})", cgroup.display())]
    Timeout {
        /// The cgroup.
        cgroup: PathBuf,
        /// What was waited for.
        what: &'static str,
        /// What was seen last.
        state: String,
    },
}

/// A freezer cgroup, by its path relative to [`FREEZER_ROOT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    relative: PathBuf,
}

/// What [`Cgroup::remove_tree`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeRemoval {
    /// Processes killed.
    pub processes: usize,
    /// Cgroup directories removed.
    pub cgroups: usize,
}

impl Cgroup {
    /// A container's cgroup: `moco-pod-runner/<bridge>/<pod_uid>/<container>`.
    pub fn for_container(bridge: &str, pod_uid: &str, container: &str) -> Self {
        Self::for_pod(bridge, pod_uid).child(container)
    }

    /// The parent of a Pod's containers' cgroups.
    pub fn for_pod(bridge: &str, pod_uid: &str) -> Self {
        Self::for_bridge(bridge).child(pod_uid)
    }

    /// The parent of every cgroup of one runner (one bridge).
    pub fn for_bridge(bridge: &str) -> Self {
        Self {
            relative: Path::new(RUNNER_DIR).join(bridge),
        }
    }

    /// The cgroup at `relative` (a [`ContainerSpec`](super::ContainerSpec)'s `cgroup`).
    pub fn from_relative(relative: impl Into<PathBuf>) -> Self {
        Self {
            relative: relative.into(),
        }
    }

    fn child(&self, name: &str) -> Self {
        Self {
            relative: self.relative.join(name),
        }
    }

    /// Its path relative to the hierarchy's root.
    pub fn relative(&self) -> &Path {
        &self.relative
    }

    /// Its directory.
    pub fn path(&self) -> PathBuf {
        Path::new(FREEZER_ROOT).join(&self.relative)
    }

    /// Whether its directory exists.
    pub fn exists(&self) -> bool {
        self.path().is_dir()
    }

    fn io(&self, what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CgroupError {
        let cgroup = self.relative.clone();
        let what = what.into();
        move |source| CgroupError::Io {
            cgroup,
            what,
            source,
        }
    }

    /// Makes it (and its parents); fine when it exists.
    pub fn create(&self) -> Result<(), CgroupError> {
        if !Path::new(FREEZER_ROOT).join("cgroup.procs").exists() {
            return Err(CgroupError::NoFreezer);
        }
        fs::create_dir_all(self.path()).map_err(self.io("making its directory"))
    }

    /// Moves process `pid` (and its threads) into it.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        fs::write(self.path().join("cgroup.procs"), pid.to_string())
            .map_err(self.io(format!("adding process {pid}")))
    }

    /// The processes in it (not those of cgroups below it); none when it does not exist.
    /// Zombies are not listed: a killed process leaves the list as it dies.
    pub fn pids(&self) -> Result<Vec<u32>, CgroupError> {
        match fs::read_to_string(self.path().join("cgroup.procs")) {
            Ok(text) => Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(self.io("reading cgroup.procs")(e)),
        }
    }

    /// Sends `signal` to every process in it; returns how many were sent one (a process that
    /// ended meanwhile is no error).
    pub fn signal_all(&self, signal: Signal) -> Result<usize, CgroupError> {
        let mut sent = 0;
        for pid in self.pids()? {
            match kill(Pid::from_raw(pid_t(pid)), signal) {
                Ok(()) => sent += 1,
                Err(Errno::ESRCH) => {}
                Err(source) => {
                    return Err(CgroupError::Signal {
                        cgroup: self.relative.clone(),
                        signal,
                        pid,
                        source,
                    });
                }
            }
        }
        Ok(sent)
    }

    /// Its `freezer.state`: `THAWED`, `FREEZING` or `FROZEN`.
    pub fn state(&self) -> Result<String, CgroupError> {
        fs::read_to_string(self.path().join("freezer.state"))
            .map(|s| s.trim().to_owned())
            .map_err(self.io("reading freezer.state"))
    }

    /// Stops every process in it (they stay, in state D, until [`thaw`](Self::thaw)); returns
    /// once the kernel reports them all frozen.
    pub fn freeze(&self) -> Result<(), CgroupError> {
        self.set_state("FROZEN", DEADLINE)
    }

    /// Lets its processes run again; returns once the kernel reports them thawed.
    pub fn thaw(&self) -> Result<(), CgroupError> {
        self.set_state("THAWED", DEADLINE)
    }

    fn set_state(&self, want: &'static str, deadline: Duration) -> Result<(), CgroupError> {
        let end = Instant::now() + deadline;
        let file = self.path().join("freezer.state");
        loop {
            // Written again on every round: the kernel's documentation says a FREEZING cgroup
            // (a task that could not be frozen yet) is retried by writing FROZEN again.
            fs::write(&file, want).map_err(self.io(format!("writing {want} to freezer.state")))?;
            let state = self.state()?;
            if state == want {
                return Ok(());
            }
            if Instant::now() >= end {
                return Err(CgroupError::Timeout {
                    cgroup: self.relative.clone(),
                    what: if want == "FROZEN" {
                        "freezing"
                    } else {
                        "thawing"
                    },
                    state: format!("freezer.state is {state}"),
                });
            }
            sleep(POLL);
        }
    }

    /// Kills every process in it and waits until none is left. Frozen first, so that no
    /// process can fork past the kill, then killed, then thawed so that the kills land.
    /// Returns how many processes were killed.
    pub fn kill_all(&self) -> Result<usize, CgroupError> {
        if !self.exists() {
            return Ok(0);
        }
        // A freeze that cannot finish (a process in an uninterruptible wait) must not keep the
        // kill from happening: its failure is ignored, the kill below is retried until empty.
        let _ = self.set_state("FROZEN", Duration::from_secs(1));
        let killed = self.signal_all(Signal::SIGKILL)?;
        self.thaw()?;
        let end = Instant::now() + DEADLINE;
        loop {
            let left = self.pids()?;
            if left.is_empty() {
                return Ok(killed);
            }
            if Instant::now() >= end {
                return Err(CgroupError::Timeout {
                    cgroup: self.relative.clone(),
                    what: "killing every process",
                    state: format!("processes left: {left:?}"),
                });
            }
            self.signal_all(Signal::SIGKILL)?;
            sleep(POLL);
        }
    }

    /// Removes its directory (it must have no processes: see [`kill_all`](Self::kill_all));
    /// fine when it is gone.
    pub fn remove(&self) -> Result<(), CgroupError> {
        match fs::remove_dir(self.path()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io("removing its directory")(e)),
        }
    }

    /// Kills the processes of it and of every cgroup below it and removes them all, deepest
    /// first (a Pod's end, or `down`); fine when it is gone.
    pub fn remove_tree(&self) -> Result<TreeRemoval, CgroupError> {
        let mut all = Vec::new();
        self.collect(&mut all)?;
        // Deepest first: a directory cannot be removed while it has children.
        all.sort_by_key(|c| std::cmp::Reverse(c.relative.components().count()));
        let mut removal = TreeRemoval::default();
        for cgroup in &all {
            removal.processes += cgroup.kill_all()?;
        }
        for cgroup in &all {
            cgroup.remove()?;
            removal.cgroups += 1;
        }
        Ok(removal)
    }

    /// Removes the runner's directory when no runner has cgroups in it any more; fine when
    /// another runner still has (its directory stays).
    pub fn remove_runner_dir_if_empty() {
        let _ = fs::remove_dir(Path::new(FREEZER_ROOT).join(RUNNER_DIR));
    }

    fn collect(&self, all: &mut Vec<Cgroup>) -> Result<(), CgroupError> {
        let entries = match fs::read_dir(self.path()) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io("listing its directory")(e)),
        };
        all.push(self.clone());
        for entry in entries {
            let entry = entry.map_err(self.io("listing its directory"))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                self.child(&entry.file_name().to_string_lossy())
                    .collect(all)?;
            }
        }
        Ok(())
    }
}

/// A pid as the kernel's signed type (pids are below 2^22, so the conversion never clips).
pub(crate) fn pid_t(pid: u32) -> i32 {
    i32::try_from(pid).unwrap_or(i32::MAX)
}
