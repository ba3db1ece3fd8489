//! `moco local`: a replicated MySQL/MariaDB cluster as local processes, driven by the same
//! engine as the operator, with two role-following endpoints instead of Services.
//!
//! ```text
//! moco local up --dir DIR --replicas N [--base-port P] [--flavor mariadb|mysql] [--server PATH] [--detach]
//! moco local status --dir DIR [--json]
//! moco local switchover --dir DIR [--to N]
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

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};
use moco_adapters::local::create::{self, CreateOptions};
use moco_adapters::local::pods::{KillHold, PodsFile, now_ms};
use moco_adapters::local::run::{self as local_run, Freeze, RunOptions, RunningCluster};
use moco_adapters::local::scale as local_scale;
use moco_adapters::local::snapshot::ClusterSnapshot;
use moco_adapters::local::{Layout, LocalError, Manifest};
use moco_core::facts::Flavor;
use moco_core::state::ClusterState;
use moco_core::status::ClusterStatus;
use moco_core::validate::duration::{DurationError, parse_std_duration};
use moco_operator::flags::LogEncoder;

use crate::logging::{self, LogOutput};
use crate::output::print_out;
use crate::signals;
use status::{LiveView, LocalStatus, flavor_name, live_pid, print_status_text};

/// `println!` that cannot fail: the output may be a pipe already closed (`… | tee log`, then
/// Ctrl-C ends `tee` first), and a panic on the way out left the servers running. Stopping
/// the cluster must never depend on being able to print.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::print_out(&format!("{}\n", format_args!($($arg)*)))
    };
}

mod backup;
mod status;

/// Arguments of `moco local`.
#[derive(Debug, Args)]
pub struct LocalArgs {
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
    Backup(backup::BackupArgs),
    /// Create a new cluster from the newest complete backup of another (`--source NAME`).
    Restore(backup::RestoreArgs),
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
pub enum LocalCmdError {
    /// From the local platform.
    #[error("{0}")]
    Local(#[from] LocalError),
    /// Bad arguments or state, with the flag or object named.
    #[error("{0}")]
    Usage(String),
    /// The runtime could not start.
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
}

fn usage(message: impl Into<String>) -> LocalCmdError {
    LocalCmdError::Usage(message.into())
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
pub fn run(args: LocalArgs) -> Result<ExitCode, LocalCmdError> {
    // Before any thread or file exists: nothing of the cluster is readable by others.
    moco_adapters::local::files::private_umask();
    let runtime = crate::async_runtime().map_err(LocalCmdError::Runtime)?;
    runtime.block_on(async move {
        match args.command {
            LocalCommand::Up(a) => up(a).await,
            LocalCommand::Resume(a) => resume(a).await,
            LocalCommand::Status(a) => status(a),
            LocalCommand::Switchover(a) => switchover(a).await,
            LocalCommand::Scale(a) => scale(a).await,
            LocalCommand::Kill(a) => kill(a).await,
            LocalCommand::Freeze(a) => freeze(a, Freeze::Freeze),
            LocalCommand::Thaw(a) => freeze(a, Freeze::Thaw),
            LocalCommand::Start(a) => start(a).await,
            LocalCommand::Down(a) => down(a).await,
            LocalCommand::Backup(a) => backup::run(a).await,
            LocalCommand::Restore(a) => backup::restore(a).await,
            LocalCommand::Run(a) => run_manager(a).await,
        }
    })
}

/// Opens an existing cluster directory (refusing anything else).
fn open(dir: &Path) -> Result<(Layout, Manifest), LocalCmdError> {
    let layout = Layout::new(dir);
    let manifest = Manifest::load(&layout).map_err(|e| match e {
        LocalError::NotACluster { .. } | LocalError::Foreign { .. } => usage(format!("--dir: {e}")),
        other => LocalCmdError::Local(other),
    })?;
    Ok((layout, manifest))
}

/// Opens (creating) `DIR/manager.log` for appending.
fn open_manager_log(layout: &Layout) -> Result<File, LocalError> {
    let path = layout.manager_log();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| LocalError::io(&path, "open", e))
}

/// The manager's log lines go to `DIR/manager.log`, at info unless `MOCO_LOG` says otherwise.
fn init_logging(layout: &Layout) -> Result<(), LocalCmdError> {
    let file = open_manager_log(layout)?;
    logging::init(
        LogOutput::File(file),
        LogEncoder::Console,
        tracing::Level::INFO,
    );
    Ok(())
}

async fn up(a: UpArgs) -> Result<ExitCode, LocalCmdError> {
    let mut options = CreateOptions::new(&a.dir.dir, a.replicas);
    options.base_port = a.base_port;
    options.flavor = a.flavor.map(|f| match f {
        FlavorArg::Mariadb => Flavor::Mariadb,
        FlavorArg::Mysql => Flavor::Mysql,
    });
    options.server = a.server.clone();
    options.server_id_base = a.server_id_base;
    options.reclone_errant = a.reclone_errant;
    options.tls = a.tls;
    let started = Instant::now();
    let prepared = create::prepare(options)?;
    let m = prepared.manifest();
    say!(
        "creating {} instance(s) of {} {} in {} (ports {}-{})",
        m.replicas,
        flavor_name(m.flavor),
        m.server_version,
        prepared.layout().root().display(),
        m.base_port,
        u32::from(m.base_port) + create::port_count(m.replicas, m.flavor) - 1
    );
    let layout = prepared.layout().clone();
    let manifest = create::create(prepared).await?;
    say!(
        "initialised {} instance(s) in {:.1} s",
        manifest.replicas,
        started.elapsed().as_secs_f64()
    );
    start_manager(&layout, &manifest, &a.manager, started).await
}

async fn resume(a: ResumeArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, manifest) = open(&a.dir.dir)?;
    if let Some(pid) = local_run::running_manager(&layout)? {
        return Err(usage(format!(
            "{}: the manager is already running (pid {pid})",
            layout.root().display()
        )));
    }
    start_manager(&layout, &manifest, &a.manager, Instant::now()).await
}

async fn start_manager(
    layout: &Layout,
    manifest: &Manifest,
    args: &ManagerArgs,
    started: Instant,
) -> Result<ExitCode, LocalCmdError> {
    if args.detach {
        let exe = std::env::current_exe()
            .map_err(|e| LocalError::io("/proc/self/exe", "locate moco", e))?;
        let log_path = layout.manager_log();
        let log = open_manager_log(layout)?;
        let err = log
            .try_clone()
            .map_err(|e| LocalError::io(&log_path, "duplicate handle of", e))?;
        let mut command = std::process::Command::new(&exe);
        command
            .arg("local")
            .arg("run")
            .arg("--dir")
            .arg(layout.root())
            .arg("--check-interval")
            .arg(format!("{}ms", args.check_interval.as_millis()))
            .arg("--detection-window")
            .arg(format!("{}ms", args.detection_window.as_millis()))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .spawn()
            .map_err(|e| LocalError::io(&exe, "start the manager", e))?;
        let pid = child.id();
        let deadline = Instant::now() + args.wait_timeout;
        loop {
            if let Ok(Some(exit)) = child.try_wait() {
                return Err(usage(format!(
                    "the manager (pid {pid}) exited with {exit}; {}:\n{}",
                    log_path.display(),
                    tail(&log_path, 20)
                )));
            }
            let snapshot = ClusterSnapshot::load(layout).ok().flatten();
            if let Some(s) = &snapshot
                && s.manager_pid == pid
                && s.is(ClusterState::Healthy)
            {
                print_status_text(layout, manifest, Some(pid), snapshot.as_ref());
                say!(
                    "cluster is Healthy after {:.1} s; manager pid {pid} (log {})",
                    started.elapsed().as_secs_f64(),
                    log_path.display()
                );
                print_out(&connect_commands(layout, manifest));
                return Ok(ExitCode::SUCCESS);
            }
            if Instant::now() >= deadline {
                let state = snapshot
                    .as_ref()
                    .map(|s| s.state_name())
                    .unwrap_or("no round yet");
                print_status_text(layout, manifest, Some(pid), snapshot.as_ref());
                return Err(usage(format!(
                    "the cluster did not become Healthy within {} s (state: {state}); the manager (pid {pid}) keeps running: see {} or stop it with `moco local down --dir {}`",
                    args.wait_timeout.as_secs(),
                    log_path.display(),
                    layout.root().display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Foreground: manager in this process, a live view, Ctrl-C stops everything.
    init_logging(layout)?;
    let options = RunOptions {
        check_interval: args.check_interval,
        detection_window: args.detection_window,
        ..RunOptions::default()
    };
    let cluster = RunningCluster::start(layout, options).await?;
    let archiver = Archiving::start(layout);
    say!(
        "manager running (log {}); Ctrl-C stops the cluster",
        layout.manager_log().display()
    );
    let mut view = LiveView::new(layout);
    let mut healthy_reported = false;
    let stop = signals::shutdown();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                let snapshot = view.tick(manifest);
                if !healthy_reported && snapshot.as_ref().is_some_and(|s| s.is(ClusterState::Healthy)) {
                    healthy_reported = true;
                    say!("cluster is Healthy after {:.1} s", started.elapsed().as_secs_f64());
                    print_out(&connect_commands(layout, manifest));
                }
            }
        }
    }
    say!("stopping the cluster…");
    archiver.stop().await;
    cluster.stop().await?;
    say!(
        "stopped; start it again with `moco local resume --dir {}`",
        layout.root().display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Binlog archiving beside the manager (it acts only while `moco local backup archive` has
/// turned it on; see `moco_backup::local::archive`).
struct Archiving {
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Archiving {
    fn start(layout: &Layout) -> Self {
        let (shutdown, receiver) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(moco_backup::local::archive::run(layout.clone(), receiver));
        Archiving { shutdown, task }
    }

    async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

async fn run_manager(a: RunArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, _manifest) = open(&a.dir.dir)?;
    init_logging(&layout)?;
    // A detached manager outlives the terminal that started it: ignore its hangup.
    signals::ignore_hangup();
    let options = RunOptions {
        check_interval: a.check_interval,
        detection_window: a.detection_window,
        ..RunOptions::default()
    };
    let cluster = match RunningCluster::start(&layout, options).await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "manager start failed");
            return Err(e.into());
        }
    };
    let archiver = Archiving::start(&layout);
    tracing::info!(pid = std::process::id(), "manager running");
    signals::shutdown().await;
    tracing::info!("stopping");
    archiver.stop().await;
    cluster.stop().await?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

fn status(a: StatusArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, manifest) = open(&a.dir.dir)?;
    let manager = local_run::running_manager(&layout)?;
    let snapshot = ClusterSnapshot::load(&layout)?;
    let status = LocalStatus::gather(&layout, &manifest, manager, snapshot.as_ref());
    if a.json {
        // Through a JSON value: keys come out sorted, as this command always printed them.
        let text = serde_json::to_value(&status)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .map_err(|e| usage(format!("encoding status: {e}")))?;
        print_out(&format!("{text}\n"));
    } else {
        print_out(&status.render_text(true));
    }
    Ok(ExitCode::SUCCESS)
}

fn require_manager(layout: &Layout) -> Result<u32, LocalCmdError> {
    local_run::running_manager(layout)?.ok_or_else(|| {
        LocalCmdError::Local(LocalError::ManagerNotRunning {
            dir: layout.root().to_path_buf(),
        })
    })
}

fn read_status(layout: &Layout) -> Result<ClusterStatus, LocalCmdError> {
    Ok(moco_adapters::local::files::read_json_opt(&layout.status())?.unwrap_or_default())
}

async fn scale(a: ScaleArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, manifest) = open(&a.dir.dir)?;
    let started = Instant::now();
    let from = manifest.replicas;
    let plan = local_scale::scale(&layout, a.replicas)
        .await
        .map_err(|e| match e {
            LocalError::Other { .. }
            | LocalError::PortInUse { .. }
            | LocalError::PortRange { .. } => usage(e.to_string()),
            other => LocalCmdError::Local(other),
        })?;
    if plan == local_scale::ScalePlan::Unchanged {
        say!("the cluster already has {from} instances");
        return Ok(ExitCode::SUCCESS);
    }
    match plan {
        local_scale::ScalePlan::Shrink { from, to } => say!(
            "cluster.json now asks for {to} instances: instances {to}..{} leave once no acknowledged commit needs them (their directories are kept under retired/)",
            from - 1
        ),
        _ => say!(
            "instances {from}..{} created in {:.1} s; cluster.json now says {} instances",
            a.replicas - 1,
            started.elapsed().as_secs_f64(),
            a.replicas
        ),
    }
    if local_run::running_manager(&layout)?.is_none() {
        say!(
            "no manager runs: `moco local resume --dir {}` starts the cluster at its new size",
            layout.root().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = started + a.timeout;
    loop {
        let status = read_status(&layout)?;
        let snapshot = ClusterSnapshot::load(&layout)?;
        let done = snapshot.as_ref().is_some_and(|s| {
            s.is(ClusterState::Healthy)
                && u32::try_from(s.instances.len()).is_ok_and(|n| n == a.replicas)
        }) && status.semi_sync_members == Some(a.replicas)
            && Manifest::load(&layout)?.replicas == a.replicas;
        if done {
            say!(
                "Healthy with {} instance(s) after {:.1} s",
                a.replicas,
                started.elapsed().as_secs_f64()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if Instant::now() >= deadline {
            return Err(usage(format!(
                "--timeout {}: the cluster is not Healthy with {} instances yet (state {}); the manager goes on, see `moco local status --dir {}`",
                humantime_like(a.timeout),
                a.replicas,
                snapshot.as_ref().map_or("Unknown", |s| s.state_name()),
                layout.root().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A duration as the flags accept it (`90s`).
fn humantime_like(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

async fn switchover(a: SwitchoverArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, manifest) = open(&a.dir.dir)?;
    if manifest.replicas == 1 {
        return Err(usage(format!(
            "--dir {}: a single-instance cluster cannot switch over",
            layout.root().display()
        )));
    }
    require_manager(&layout)?;
    let from = read_status(&layout)?.current_primary_index;
    if let Some(to) = a.to {
        manifest
            .check_index(to)
            .map_err(|e| usage(format!("--to {to}: {e}")))?;
        if to >= manifest.spec_replicas() {
            return Err(usage(format!(
                "--to {to}: instance {to} is leaving (the cluster shrinks to {})",
                manifest.spec_replicas()
            )));
        }
        if to == from {
            say!("instance {to} is already the primary");
            return Ok(ExitCode::SUCCESS);
        }
        let snapshot = ClusterSnapshot::load(&layout)?;
        if let Some(s) = snapshot
            && !s.candidates.contains(&to)
        {
            return Err(usage(format!(
                "--to {to}: instance {to} is not a switchover candidate now (candidates: {:?}; state {})",
                s.candidates,
                s.state_name()
            )));
        }
        PodsFile::update(&layout, |p| p.switchover_to = Some(to))?;
    } else {
        PodsFile::update(&layout, |p| {
            p.instances.entry(from).or_default().demote = true
        })?;
    }
    let started = Instant::now();
    let deadline = started + a.timeout;
    loop {
        let now = read_status(&layout)?.current_primary_index;
        // Done when the index moved and the primary endpoint follows (role label moved).
        let labelled =
            PodsFile::load(&layout)?.get(now).role == Some(moco_core::facts::Role::Primary);
        if now != from && a.to.is_none_or(|t| t == now) && labelled {
            say!(
                "primary moved from instance {from} to instance {now} in {} ms",
                started.elapsed().as_millis()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if local_run::running_manager(&layout)?.is_none() {
            // The request stays: the old primary may already be read-only, and the next
            // manager finishes the switchover (it is crash-only).
            return Err(usage(format!(
                "switchover: the manager stopped before the primary moved (still instance {from}); the request stays and completes once `moco local resume --dir {}` starts the manager again",
                layout.root().display()
            )));
        }
        if Instant::now() >= deadline {
            // Withdraw the request so that it does not fire later by surprise.
            PodsFile::update(&layout, |p| {
                p.switchover_to = None;
                if let Some(m) = p.instances.get_mut(&from) {
                    m.demote = false;
                }
            })?;
            let snapshot = ClusterSnapshot::load(&layout)?;
            let detail = snapshot
                .map(|s| {
                    format!(
                        "state {}, candidates {:?}{}",
                        s.state_name(),
                        s.candidates,
                        s.last_error
                            .map(|e| format!(", last error: {e}"))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            return Err(usage(format!(
                "switchover: the primary is still instance {from} after {} s ({detail}); the request was withdrawn",
                a.timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn kill(a: KillArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, manifest) = open(&a.dir.dir)?;
    manifest
        .check_index(a.index)
        .map_err(|e| usage(format!("N = {}: {e}", a.index)))?;
    let now = now_ms();
    let until = if a.keep_down {
        None
    } else {
        Some(now + u64::try_from(a.down_for.as_millis()).unwrap_or(u64::MAX))
    };
    PodsFile::update(&layout, |p| {
        p.instances.entry(a.index).or_default().kill_hold = Some(KillHold {
            since_ms: now,
            until_ms: until,
        });
    })?;
    let pid = live_pid(&layout, a.index);
    let before = ClusterSnapshot::load(&layout).ok().flatten();
    let killed = moco_adapters::local::run::kill_instance(&layout, &manifest, a.index).await?;
    let hold = match until {
        None => format!(
            "it stays down until `moco local start --dir {} {}`",
            layout.root().display(),
            a.index
        ),
        Some(_) => format!(
            "the manager restarts it after {} s (or `moco local start --dir {} {}`)",
            a.down_for.as_secs(),
            layout.root().display(),
            a.index
        ),
    };
    if killed {
        say!(
            "killed instance {} (pid {}) with SIGKILL; {hold}",
            a.index,
            pid.map_or("?".to_owned(), |p| p.to_string())
        );
    } else {
        say!("instance {} was not running; {hold}", a.index);
    }
    if let Some(note) = before
        .as_ref()
        .and_then(|s| status::no_failover_note(s, Some(a.index)))
    {
        say!("{note}");
    }
    Ok(ExitCode::SUCCESS)
}

fn freeze(a: FreezeArgs, what: Freeze) -> Result<ExitCode, LocalCmdError> {
    let (layout, manifest) = open(&a.dir.dir)?;
    manifest
        .check_index(a.index)
        .map_err(|e| usage(format!("N = {}: {e}", a.index)))?;
    let done = local_run::freeze_instance(&layout, &manifest, a.index, what)?;
    match (done, what) {
        (Some(pid), Freeze::Freeze) => say!(
            "froze instance {} (pid {pid}) with SIGSTOP; `moco local thaw --dir {} {}` resumes it",
            a.index,
            layout.root().display(),
            a.index
        ),
        (Some(pid), Freeze::Thaw) => {
            say!("thawed instance {} (pid {pid}) with SIGCONT", a.index)
        }
        (None, _) => say!("instance {} is not running", a.index),
    }
    Ok(ExitCode::SUCCESS)
}

async fn start(a: StartArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, manifest) = open(&a.dir.dir)?;
    manifest
        .check_index(a.index)
        .map_err(|e| usage(format!("N = {}: {e}", a.index)))?;
    PodsFile::update(&layout, |p| {
        if let Some(m) = p.instances.get_mut(&a.index) {
            m.kill_hold = None;
        }
    })?;
    require_manager(&layout)?;
    let deadline = Instant::now() + a.timeout;
    loop {
        if let Some(pid) = live_pid(&layout, a.index) {
            say!("instance {} runs (pid {pid})", a.index);
            return Ok(ExitCode::SUCCESS);
        }
        if Instant::now() >= deadline {
            return Err(usage(format!(
                "instance {} did not start within {} s; see {}",
                a.index,
                a.timeout.as_secs(),
                layout.manager_log().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn down(a: DownArgs) -> Result<ExitCode, LocalCmdError> {
    let (layout, _manifest) = open(&a.dir.dir)?;
    let stopped_manager = local_run::stop_manager(&layout, Duration::from_secs(120)).await?;
    if let Some(pid) = stopped_manager {
        say!("stopped the manager (pid {pid})");
    }
    local_run::stop_instances(&layout, Duration::from_secs(60)).await?;
    say!("every instance is stopped");
    if a.wipe {
        std::fs::remove_dir_all(layout.root())
            .map_err(|e| LocalError::io(layout.root(), "remove", e))?;
        say!("removed {}", layout.root().display());
    }
    Ok(ExitCode::SUCCESS)
}

/// How to connect, printed once the cluster is Healthy: the option files hold user, password,
/// host and port.
fn connect_commands(layout: &Layout, manifest: &Manifest) -> String {
    let cnf = |user: &str| {
        let path = layout.client_cnf(user);
        shell_word(
            &std::path::absolute(&path)
                .unwrap_or(path)
                .display()
                .to_string(),
        )
    };
    let mut out = format!(
        "connect (read-write, follows the primary): mariadb --defaults-extra-file={}\n",
        cnf("moco-writable")
    );
    if manifest.replicas > 1 {
        out.push_str(&format!(
            "connect (read-only, the replicas):          mariadb --defaults-extra-file={}\n",
            cnf("moco-readonly")
        ));
    }
    out
}

/// `text` as one shell word, for commands printed to be copied: quoted when it holds anything
/// but letters, digits and `/._-+=:@,`.
fn shell_word(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@,".contains(c));
    if plain && !text.is_empty() {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod shell_word_tests {
    use super::shell_word;

    #[test]
    fn printed_paths_paste_as_one_word() {
        assert_eq!(shell_word("/home/me/db/c.cnf"), "/home/me/db/c.cnf");
        assert_eq!(shell_word("/tmp/sp ace/c.cnf"), "'/tmp/sp ace/c.cnf'");
        assert_eq!(shell_word("/tmp/it's"), "'/tmp/it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}

#[cfg(test)]
mod tests {
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
}
