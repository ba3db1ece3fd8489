//! Process facts from `/proc` and signals, without `unsafe`.
//!
//! A server started detached is reparented to PID 1 once its launcher exits, and a container's
//! PID 1 may reap zombies only every second or two; `kill(pid, 0)` succeeds on a zombie. So
//! "alive" here means: `/proc/PID/status` exists and its state is not `Z` (or `X`).

use std::path::Path;

use rustix::process::{Pid, Signal, kill_process};

use super::MysqldError;

/// True when `pid` names a process that has not exited (zombies count as exited).
pub fn process_alive(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .map(|s| s.trim_start().chars().next())
        .is_some_and(|state| !matches!(state, Some('Z' | 'X' | 'x')))
}

/// The arguments of `pid`, as it was started (empty when unreadable). Split on the NULs of
/// `/proc/<pid>/cmdline`, so an argument with a space stays one argument.
pub(super) fn process_args(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// True when `pid` is alive and was started with `--defaults-file=<defaults_file>`, so a pid
/// file that outlived its server (and whose PID was reused) is never trusted.
pub fn is_server_process(pid: u32, defaults_file: &Path) -> bool {
    if !process_alive(pid) {
        return false;
    }
    let needle = format!("--defaults-file={}", defaults_file.display());
    process_args(pid).contains(&needle)
}

/// Sends `signal` to `pid`; a process that is already gone is not an error.
pub(super) fn send_signal(pid: u32, signal: Signal, name: &'static str) -> Result<(), MysqldError> {
    let raw = i32::try_from(pid).ok().and_then(Pid::from_raw);
    let Some(target) = raw else {
        return Err(MysqldError::Signal {
            pid,
            signal: name,
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    };
    match kill_process(target, signal) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(MysqldError::Signal {
            pid,
            signal: name,
            source: e.into(),
        }),
    }
}

/// True when the current process runs as root (servers then need `--user=root`).
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_bogus_pids_are_not() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(u32::MAX));
        assert!(!process_args(std::process::id()).is_empty());
        assert!(!is_server_process(
            std::process::id(),
            Path::new("/nonexistent/my.cnf")
        ));
    }

    #[test]
    fn reaped_and_zombie_children_are_not_alive() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(process_alive(pid));
        send_signal(pid, Signal::KILL, "SIGKILL").unwrap();
        // Not reaped yet: a zombie must already count as exited.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_alive(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "pid {pid} still alive"
            );
            std::thread::yield_now();
        }
        child.wait().unwrap();
        assert!(!process_alive(pid));
        // Signalling a vanished process is fine.
        send_signal(pid, Signal::TERM, "SIGTERM").unwrap();
    }
}
