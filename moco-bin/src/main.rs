//! The `moco` command: the decision engine on files (`plan`, `schema`), a local replicated
//! cluster (`local`), the Kubernetes API tools (`crd`, `validate`) and the in-cluster process
//! (`controller`, from `moco_operator`). This crate parses arguments and dispatches; the work is
//! in the library crates.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod logging;
mod signals;

// Printing that cannot fail (a closed pipe is ignored): `crate::output::{out, err, print_out}`.
use moco_local::output;

/// moco-rs: a MOCO-compatible MySQL/MariaDB operator.
#[derive(Debug, Parser)]
#[command(name = "moco", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decide what a cluster needs from a facts file and print the decision as JSON.
    Plan(cmd::plan::PlanArgs),
    /// Print the JSON Schema of the facts or of the decision.
    Schema(cmd::plan::SchemaArgs),
    /// Print the MySQLCluster and BackupPolicy CRDs as YAML.
    Crd(cmd::crd::Args),
    /// Check MySQLCluster/BackupPolicy manifests offline (schema, CEL and admission rules).
    Validate(cmd::validate::Args),
    /// Print, offline, every object the operator would create for the MySQLClusters of some
    /// manifests.
    Render(cmd::render::Args),
    /// A replicated cluster as local processes (`up`, `status`, `switchover`, `kill`, `down`).
    Local(cmd::local::LocalArgs),
    /// The operator (MOCO's `moco-controller`): reconciles MySQLClusters and runs their
    /// clustering while it leads; serves the admission webhooks, health probes and metrics.
    Controller(moco_operator::ControllerArgs),
    /// The init container of a MySQLCluster's Pod: initialise the datadir once, write the
    /// per-instance options (MOCO's `moco-init`; also run when invoked as `moco-init`).
    Init(moco_agent::init::InitArgs),
    /// The sidecar of a MySQLCluster's Pod: first start, health probes, the clone service,
    /// slow-log rotation and metrics (MOCO's `moco-agent`).
    Agent(Box<moco_agent::AgentArgs>),
    /// The backup CronJob's program: back up a MySQLCluster into a bucket, record
    /// `status.backup` (MOCO's `moco-backup backup`; also run when invoked as `moco-backup`).
    Backup(moco_backup::job::args::BackupArgs),
    /// The restore Job's program: restore a MySQLCluster from a bucket to a second, record
    /// `status.restoredTime` (MOCO's `moco-backup restore`).
    Restore(moco_backup::job::args::RestoreArgs),
    /// Archive a MySQLCluster's binlogs every few seconds (beyond MOCO; what the operator runs
    /// for the annotation `moco-rs/binlog-archive-interval`).
    Archive(moco_backup::job::args::ArchiveArgs),
}

/// The names this binary answers to besides `moco`: MOCO's Pods run `/moco-init` (copied to
/// `/shared/moco-init`) and `moco-agent`, with the subcommand's arguments only; its Jobs run
/// `moco-backup backup …`, whose first argument already is the subcommand (`None`).
const PROGRAM_NAMES: [(&str, Option<&str>); 3] = [
    ("moco-init", Some("init")),
    ("moco-agent", Some("agent")),
    ("moco-backup", None),
];

/// The command line, with `moco-init ARGS` read as `moco init ARGS`.
fn command_line() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned());
    if let Some((_, sub)) = PROGRAM_NAMES
        .iter()
        .find(|(name, _)| called.as_deref() == Some(*name))
    {
        args[0] = "moco".into();
        if let Some(sub) = sub {
            args.insert(1, (*sub).into());
        }
    }
    args
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(command_line());
    // Each subcommand has its own typed error; here they only need printing.
    let result: Result<ExitCode, Box<dyn std::error::Error>> = match cli.command {
        Command::Plan(args) => cmd::plan::run_plan(&args).map_err(Into::into),
        Command::Schema(args) => cmd::plan::run_schema(&args).map_err(Into::into),
        Command::Crd(args) => cmd::crd::run(&args).map_err(Into::into),
        Command::Validate(args) => cmd::validate::run(&args).map_err(Into::into),
        Command::Render(args) => cmd::render::run(&args).map_err(Into::into),
        Command::Local(args) => cmd::local::run(args).map_err(Into::into),
        Command::Controller(args) => cmd::controller::run(&args).map_err(Into::into),
        Command::Init(args) => cmd::agent::run_init(&args).map_err(Into::into),
        Command::Agent(args) => cmd::agent::run_agent(&args).map_err(Into::into),
        Command::Backup(args) => cmd::backup_job::run_backup(&args).map_err(Into::into),
        Command::Restore(args) => cmd::backup_job::run_restore(&args).map_err(Into::into),
        Command::Archive(args) => cmd::backup_job::run_archive(&args).map_err(Into::into),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // Not eprintln!: stderr may be a closed pipe, and exiting must not panic.
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "moco: {err}");
            ExitCode::from(2)
        }
    }
}

/// The runtime of the subcommands that run servers or processes: two workers are plenty for a
/// handful of listeners and child processes.
fn async_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
