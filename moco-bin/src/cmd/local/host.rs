//! What the `moco` binary decides for `moco local`'s commands: its one logging set-up writes
//! the manager's log, SIGINT/SIGTERM stop a manager, a detached one ignores SIGHUP, and
//! `--detach` re-runs this program as `moco local run`.

use std::fs::File;
use std::future::Future;

use moco_local::platform::LocalError;
use moco_local::{Host, RunManagerOptions};

use crate::logging::{self, LogOutput};
use crate::signals;

/// The `moco` binary as `moco local`'s host.
#[derive(Debug)]
pub(super) struct Binary;

impl Host for Binary {
    /// The manager's log lines go to `DIR/manager.log`, at info unless `MOCO_LOG` says
    /// otherwise.
    fn log_to(&self, log: File) {
        logging::init(
            LogOutput::File(log),
            moco_http::flags::LogEncoder::Console,
            tracing::Level::INFO,
        );
    }

    fn shutdown(&self) -> impl Future<Output = ()> + Send {
        signals::shutdown()
    }

    fn ignore_hangup(&self) {
        signals::ignore_hangup();
    }

    /// `moco local run --dir DIR --check-interval …ms --detection-window …ms`.
    fn manager_command(
        &self,
        options: &RunManagerOptions,
    ) -> Result<std::process::Command, moco_local::Error> {
        let exe = std::env::current_exe()
            .map_err(|e| LocalError::io("/proc/self/exe", "locate moco", e))?;
        let mut command = std::process::Command::new(exe);
        command
            .arg("local")
            .arg("run")
            .arg("--dir")
            .arg(&options.dir)
            .arg("--check-interval")
            .arg(format!("{}ms", options.check_interval.as_millis()))
            .arg("--detection-window")
            .arg(format!("{}ms", options.detection_window.as_millis()));
        Ok(command)
    }
}
