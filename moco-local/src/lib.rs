//! # moco-local
//!
//! `moco local` as a library: a replicated MySQL/MariaDB cluster as local processes, driven by
//! the same engine as the operator, with two role-following endpoints instead of Services. The
//! `moco` binary (in moco-bin) parses `moco local`'s arguments into a [`Command`] and calls
//! [`run`]; a program embedding a local cluster calls the commands directly.
//!
//! ```text
//! moco local up --dir DIR --replicas N [--base-port P] [--flavor mariadb|mysql] [--server PATH] [--detach]
//! moco local status --dir DIR [--json]
//! moco local switchover --dir DIR [--to N]
//! moco local credential rotate --dir DIR [--timeout 5m]
//! moco local apply --dir DIR -f accounts.yaml
//! moco local kill --dir DIR N [--down-for 30s | --keep-down]
//! moco local start --dir DIR N
//! moco local freeze --dir DIR N | thaw --dir DIR N
//! moco local resume --dir DIR [--detach]
//! moco local down --dir DIR [--wipe]
//! ```
//!
//! Restart rule: the manager restarts crashed instances (like a kubelet). `kill` marks the
//! instance as held down first: it stays down for `--down-for` (default 30 s) or, with
//! `--keep-down`, until `moco local start N`. A crashed primary is restarted only after the
//! manager failed over (then as a replica, MariaDB with `--init-rpl-role=SLAVE`), or after
//! 20 s when no failover is possible.
//!
//! The commands print their progress lines to standard output through [`output`] (a closed
//! output is ignored); the manager logs through `tracing` to the file the [`Host`] is handed.
//! What only a program decides is its [`Host`]: where the log lines go, when a manager running
//! in the process stops, and how a detached manager is started. Call [`private_umask`] before
//! the first thread starts, as `moco` does, so that nothing of a cluster is readable by others.
//!
//! A program that runs a three-instance cluster in its own process until it says stop:
//!
//! ```no_run
//! use std::fs::File;
//! use std::future::Future;
//! use std::path::Path;
//!
//! use moco_local::{CreateOptions, Host, ManagerOptions, RunManagerOptions, UpOptions};
//!
//! struct Embedded {
//!     stop: tokio::sync::watch::Receiver<bool>,
//! }
//!
//! impl Host for Embedded {
//!     fn log_to(&self, _log: File) {} // the program keeps its own logging
//!     fn shutdown(&self) -> impl Future<Output = ()> + Send {
//!         let mut stop = self.stop.clone();
//!         async move {
//!             let _ = stop.wait_for(|stop| *stop).await;
//!         }
//!     }
//!     fn ignore_hangup(&self) {}
//!     fn manager_command(
//!         &self,
//!         _: &RunManagerOptions,
//!     ) -> Result<std::process::Command, moco_local::Error> {
//!         Err(moco_local::Error::Usage("--detach: not in this program".into()))
//!     }
//! }
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let (stop, receiver) = tokio::sync::watch::channel(false);
//! let options = UpOptions {
//!     create: CreateOptions::new(Path::new("/tmp/db"), 3),
//!     manager: ManagerOptions::default(),
//! };
//! let host = Embedded { stop: receiver };
//! let cluster = tokio::spawn(async move { moco_local::up(options, &host).await });
//! // … use the cluster (its endpoints are in `moco_local::status::LocalStatus`) …
//! stop.send(true)?; // its instances stop with the manager
//! cluster.await??;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod apply;
pub mod backup;
mod control;
mod credential;
mod error;
mod host;
mod manager;
mod options;
pub mod output;
pub mod platform;
pub mod status;

pub use crate::platform::create::CreateOptions;
pub use crate::platform::files::private_umask;
pub use apply::apply;
pub use backup::restore;
pub use control::{down, freeze, kill, scale, start, status, switchover, thaw};
pub use credential::rotate as rotate_credentials;
pub use error::Error;
pub use host::Host;
pub use manager::{resume, run_manager, up};
pub use options::{
    ApplyOptions, ArchiveOptions, BackupCommand, BackupTarget, Command, DownOptions,
    InstanceOptions, KillOptions, ManagerOptions, PruneOptions, RestoreOptions, ResumeOptions,
    RotateOptions, RunManagerOptions, ScaleOptions, StartOptions, StatusOptions, SwitchoverOptions,
    TakeOptions, UpOptions, VerifyOptions,
};

/// Runs one command of `moco local`.
pub async fn run(command: Command, host: &impl Host) -> Result<(), Error> {
    match command {
        Command::Up(options) => up(options, host).await,
        Command::Resume(options) => resume(options, host).await,
        Command::Status(options) => status(options),
        Command::Switchover(options) => switchover(options).await,
        Command::RotateCredentials(options) => rotate_credentials(options).await,
        Command::Apply(options) => apply(options).await,
        Command::Scale(options) => scale(options).await,
        Command::Kill(options) => kill(options).await,
        Command::Freeze(options) => freeze(options),
        Command::Thaw(options) => thaw(options),
        Command::Start(options) => start(options).await,
        Command::Down(options) => down(options).await,
        Command::Backup(command) => backup::run(command).await,
        Command::Restore(options) => restore(options, host).await,
        Command::Run(options) => run_manager(options, host).await,
    }
}
