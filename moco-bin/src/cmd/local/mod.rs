//! `moco local`: its arguments, and their conversion into `moco_local`'s options. The
//! commands are `moco_local`'s; here are the process-wide choices they are handed
//! ([`host::Binary`]: logging, signals, `--detach` re-running this program) and the runtime.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use moco_core::facts::Flavor;
use moco_core::validate::duration::{DurationError, parse_std_duration};
use moco_local::{
    ApplyOptions, Command, CreateOptions, DownOptions, InstanceOptions, KillOptions,
    ManagerOptions, ResumeOptions, RotateOptions, RunManagerOptions, ScaleOptions, StartOptions,
    StatusOptions, SwitchoverOptions, UpOptions,
};

mod backup_args;
mod host;

/// Arguments of `moco local`.
#[derive(Debug, Args)]
pub(crate) struct LocalArgs {
    #[command(subcommand)]
    command: LocalCommand,
}

#[derive(Debug, Subcommand)]
enum LocalCommand {
    /// Create a cluster in DIR and start it (instances, manager, endpoints).
    Up(UpArgs),
    /// Start the manager of an existing, stopped cluster again.
    Resume(ResumeArgs),
    /// Show the cluster's state, roles, endpoints and per-instance replication.
    Status(StatusArgs),
    /// Move the primary to another instance.
    Switchover(SwitchoverArgs),
    /// MOCO's account passwords: `credential rotate` gives all eight new random passwords,
    /// moving every reader (the manager, replicas' channels, `client/*.cnf`) before the old
    /// ones are refused.
    Credential(CredentialArgs),
    /// Make the MySQLUser and MySQLDatabase objects of a file (moco-rs.io/v1alpha1, with the
    /// Secrets holding their passwords) on the primary, checked first with the rules of the
    /// operator's webhooks (`moco validate`); any finding refuses the whole file.
    Apply(ApplyArgs),
    /// Change the number of instances of a cluster (MariaDB; growing only, so far). New
    /// instances replicate asynchronously until they caught up, so writes never wait for
    /// them (docs/clustering.md); the command waits until the cluster is Healthy at the new
    /// size when a manager runs.
    Scale(ScaleArgs),
    /// SIGKILL one instance's server (a crash, to drill failover).
    ///
    /// The manager restarts crashed servers like a kubelet; a killed one stays down for
    /// `--down-for` (default 30 s) or, with `--keep-down`, until `moco local start N`. A killed
    /// primary comes back only after the manager failed over (as a replica; MariaDB with
    /// `--init-rpl-role=SLAVE`), or after 20 s when no failover is possible.
    Kill(KillArgs),
    /// Let a killed instance start again now.
    Start(StartArgs),
    /// SIGSTOP one instance's server: it keeps running but answers nothing, as a hung
    /// process, a dead node or a network cut look on Kubernetes (to drill failure detection).
    Freeze(FreezeArgs),
    /// SIGCONT a frozen instance's server: it resumes where it stopped.
    Thaw(FreezeArgs),
    /// Stop the manager and every instance; `--wipe` also deletes DIR.
    Down(DownArgs),
    /// Back the cluster up (MariaDB: a physical backup streamed to a bucket), or list its
    /// backups (`backup list`).
    Backup(backup_args::BackupArgs),
    /// Create a new cluster from the newest complete backup of another (`--source NAME`).
    Restore(backup_args::RestoreArgs),
    /// The manager process itself (what `--detach` runs in the background).
    #[command(hide = true)]
    Run(RunArgs),
}

/// The server family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FlavorArg {
    /// MariaDB 10.11+.
    Mariadb,
    /// MySQL 8.0 / 8.4.
    Mysql,
}

#[derive(Debug, Args)]
struct DirArg {
    /// The cluster directory.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
}

#[derive(Debug, Args)]
struct ManagerArgs {
    /// Run the manager in the background (log in DIR/manager.log) and return once the
    /// cluster is Healthy.
    #[arg(long)]
    detach: bool,
    /// Pause between manager rounds when nothing changes (e.g. `1s`, `500ms`).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    check_interval: Duration,
    /// How long an instance may stay silent (not answering pings) before it counts as
    /// unreachable; a silent primary is then failed over. Shorter fails over sooner, longer
    /// rides out longer stalls without a failover.
    #[arg(long, default_value = "1500ms", value_parser = parse_duration)]
    detection_window: Duration,
    /// With `--detach`: how long to wait for the cluster to become Healthy.
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    wait_timeout: Duration,
}

#[derive(Debug, Args)]
struct UpArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Number of instances: 1, 3, 5, 7 or 9.
    #[arg(long)]
    replicas: u32,
    /// First port of the block the cluster uses: primary endpoint = P, replica endpoint =
    /// P+1, instance i = P+2+i. Default: the first free block from 13306.
    #[arg(long)]
    base_port: Option<u16>,
    /// Require this server family.
    #[arg(long, value_enum)]
    flavor: Option<FlavorArg>,
    /// The server binary (default: $MOCO_TEST_MYSQLD, else mariadbd/mysqld in PATH or
    /// /usr/sbin).
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// `server_id` of instance 0.
    #[arg(long, default_value_t = 1)]
    server_id_base: u32,
    /// Re-clone a replica found with errant transactions from a healthy replica, discarding
    /// those transactions (by default it is only excluded from the replica endpoint and from
    /// failover, and waits for `moco local kill` + deleting its data).
    #[arg(long)]
    reclone_errant: bool,
    /// Serve TLS: a CA made for the cluster (DIR/tls/ca.pem) signs a certificate per instance,
    /// the servers refuse plain TCP (require_secure_transport), and the manager, replication,
    /// clones, backups and the client option files verify every server against the CA.
    #[arg(long)]
    tls: bool,
    #[command(flatten)]
    manager: ManagerArgs,
}

#[derive(Debug, Args)]
struct ResumeArgs {
    #[command(flatten)]
    dir: DirArg,
    #[command(flatten)]
    manager: ManagerArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Pause between manager rounds.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    check_interval: Duration,
    /// How long an instance may stay silent before it counts as unreachable.
    #[arg(long, default_value = "1500ms", value_parser = parse_duration)]
    detection_window: Duration,
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SwitchoverArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The instance to promote (default: the engine picks the lowest-ordinal candidate).
    #[arg(long, value_name = "N")]
    to: Option<u32>,
    /// How long to wait for the primary to move.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
}

#[derive(Debug, Args)]
struct ApplyArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The manifest (multi-document YAML; `-` reads standard input).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    file: PathBuf,
}

#[derive(Debug, Args)]
struct CredentialArgs {
    #[command(subcommand)]
    command: CredentialCommand,
}

#[derive(Debug, Subcommand)]
enum CredentialCommand {
    /// Rotate the passwords (a rotation interrupted earlier is resumed, with the passwords it
    /// drew), and follow it until the old passwords are refused.
    Rotate(RotateArgs),
}

#[derive(Debug, Args)]
struct RotateArgs {
    #[command(flatten)]
    dir: DirArg,
    /// How long to follow the rotation (it goes on in the manager afterwards).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    timeout: Duration,
}

#[derive(Debug, Args)]
struct ScaleArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The new number of instances: 1, 3, 5, 7 or 9.
    #[arg(long)]
    replicas: u32,
    /// How long to wait for the cluster to be Healthy at the new size (clones included).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    timeout: Duration,
}

#[derive(Debug, Args)]
struct KillArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The instance ordinal.
    index: u32,
    /// Keep it down this long before the manager restarts it.
    #[arg(long, default_value = "30s", value_parser = parse_duration, conflicts_with = "keep_down")]
    down_for: Duration,
    /// Keep it down until `moco local start --dir DIR N`.
    #[arg(long)]
    keep_down: bool,
}

#[derive(Debug, Args)]
struct FreezeArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The instance ordinal.
    index: u32,
}

#[derive(Debug, Args)]
struct StartArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The instance ordinal.
    index: u32,
    /// How long to wait for it to run.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    timeout: Duration,
}

#[derive(Debug, Args)]
struct DownArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Also delete the cluster directory with all data.
    #[arg(long)]
    wipe: bool,
}

/// Errors of `moco local`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LocalCmdError {
    /// From the command.
    #[error("{0}")]
    Local(#[from] moco_local::Error),
    /// The runtime could not start.
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Parses a duration flag of `moco local`: a Go duration (`500ms`, `1s`, `2m`, `1h30m`), or a
/// bare number of seconds (`3`, `1.5`), which these flags have always accepted.
fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return parse_std_duration(&format!("{t}s"));
    }
    parse_std_duration(t)
}

/// Runs `moco local`.
pub(crate) fn run(args: LocalArgs) -> Result<ExitCode, LocalCmdError> {
    // Before any thread or file exists: nothing of the cluster is readable by others.
    moco_local::private_umask();
    let runtime = crate::async_runtime().map_err(LocalCmdError::Runtime)?;
    runtime.block_on(moco_local::run(args.command.into_command(), &host::Binary))?;
    Ok(ExitCode::SUCCESS)
}

impl LocalCommand {
    /// The library's command for these arguments.
    fn into_command(self) -> Command {
        match self {
            LocalCommand::Up(a) => Command::Up(a.options()),
            LocalCommand::Resume(a) => Command::Resume(ResumeOptions {
                dir: a.dir.dir,
                manager: a.manager.options(),
            }),
            LocalCommand::Status(a) => Command::Status(StatusOptions {
                dir: a.dir.dir,
                json: a.json,
            }),
            LocalCommand::Switchover(a) => Command::Switchover(SwitchoverOptions {
                dir: a.dir.dir,
                to: a.to,
                timeout: a.timeout,
            }),
            LocalCommand::Apply(a) => Command::Apply(ApplyOptions {
                dir: a.dir.dir,
                file: a.file,
            }),
            LocalCommand::Credential(CredentialArgs {
                command: CredentialCommand::Rotate(a),
            }) => Command::RotateCredentials(RotateOptions {
                dir: a.dir.dir,
                timeout: a.timeout,
            }),
            LocalCommand::Scale(a) => Command::Scale(ScaleOptions {
                dir: a.dir.dir,
                replicas: a.replicas,
                timeout: a.timeout,
            }),
            LocalCommand::Kill(a) => Command::Kill(KillOptions {
                dir: a.dir.dir,
                index: a.index,
                down_for: a.down_for,
                keep_down: a.keep_down,
            }),
            LocalCommand::Start(a) => Command::Start(StartOptions {
                dir: a.dir.dir,
                index: a.index,
                timeout: a.timeout,
            }),
            LocalCommand::Freeze(a) => Command::Freeze(a.options()),
            LocalCommand::Thaw(a) => Command::Thaw(a.options()),
            LocalCommand::Down(a) => Command::Down(DownOptions {
                dir: a.dir.dir,
                wipe: a.wipe,
            }),
            LocalCommand::Backup(a) => Command::Backup(a.command()),
            LocalCommand::Restore(a) => Command::Restore(a.options()),
            LocalCommand::Run(a) => Command::Run(RunManagerOptions {
                dir: a.dir.dir,
                check_interval: a.check_interval,
                detection_window: a.detection_window,
            }),
        }
    }
}

impl From<FlavorArg> for Flavor {
    fn from(flavor: FlavorArg) -> Self {
        match flavor {
            FlavorArg::Mariadb => Flavor::Mariadb,
            FlavorArg::Mysql => Flavor::Mysql,
        }
    }
}

impl ManagerArgs {
    fn options(&self) -> ManagerOptions {
        ManagerOptions {
            detach: self.detach,
            check_interval: self.check_interval,
            detection_window: self.detection_window,
            wait_timeout: self.wait_timeout,
        }
    }
}

impl UpArgs {
    fn options(self) -> UpOptions {
        let mut create = CreateOptions::new(&self.dir.dir, self.replicas);
        create.base_port = self.base_port;
        create.flavor = self.flavor.map(Flavor::from);
        create.server = self.server;
        create.server_id_base = self.server_id_base;
        create.reclone_errant = self.reclone_errant;
        create.tls = self.tls;
        UpOptions {
            create,
            manager: self.manager.options(),
        }
    }
}

impl FreezeArgs {
    fn options(self) -> InstanceOptions {
        InstanceOptions {
            dir: self.dir.dir,
            index: self.index,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("1x").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        local: LocalArgs,
    }

    fn command(args: &[&str]) -> Command {
        Cli::parse_from(std::iter::once("local").chain(args.iter().copied()))
            .local
            .command
            .into_command()
    }

    /// The library's defaults for an embedding program are the flags' defaults.
    #[test]
    fn the_manager_flags_default_to_the_library_defaults() {
        let Command::Up(up) = command(&["up", "--dir", "d", "--replicas", "3"]) else {
            panic!("not up");
        };
        assert_eq!(up.manager, ManagerOptions::default());
        assert_eq!(up.create, CreateOptions::new("d".as_ref(), 3));
        let Command::Run(run) = command(&["run", "--dir", "d"]) else {
            panic!("not run");
        };
        let defaults = ManagerOptions::default();
        assert_eq!(
            (run.check_interval, run.detection_window),
            (defaults.check_interval, defaults.detection_window)
        );
    }
}
