//! What only the program embedding `moco local` decides: where the manager's log lines go,
//! when a manager running in the process stops, and how a detached manager is started.

use std::fs::File;
use std::future::Future;

use crate::error::Error;
use crate::options::RunManagerOptions;

/// The embedding program, as the commands that run a manager need it (`up`, `resume` and
/// `restore`, in the foreground or with `detach`, and `run`, the detached manager itself).
/// The `moco` binary's: its one tracing subscriber, SIGINT/SIGTERM, SIGHUP ignored, and
/// `moco local run` re-executed.
pub trait Host: Sync {
    /// Sends the process's log lines to `log`: `DIR/manager.log`, opened for appending.
    /// Called once, before a manager starts in this process.
    fn log_to(&self, log: File);

    /// Completes when a manager running in this process should stop; its instances are then
    /// stopped.
    fn shutdown(&self) -> impl Future<Output = ()> + Send;

    /// Called by `run` before its manager starts: it outlives the terminal that started it,
    /// so the terminal's hangup must not end it.
    fn ignore_hangup(&self);

    /// The command that runs [`crate::run_manager`] with `options` in a new process (what
    /// `detach` starts). Its standard streams, process group and start are set here.
    fn manager_command(&self, options: &RunManagerOptions) -> Result<std::process::Command, Error>;
}
