//! What each command takes: plain values, each field named after its flag on the command line
//! (`moco local up --check-interval` is [`ManagerOptions::check_interval`]), so that the
//! errors, which name the flags, name the fields too.

use std::path::PathBuf;
use std::time::Duration;

use crate::platform::create::CreateOptions;
use moco_core::resources::ByteRate;

/// One command of `moco local`, for [`crate::run`].
#[derive(Debug)]
pub enum Command {
    /// Create a cluster and start it: [`crate::up`].
    Up(UpOptions),
    /// Start the manager of an existing, stopped cluster again: [`crate::resume`].
    Resume(ResumeOptions),
    /// Print the cluster's state: [`crate::status()`].
    Status(StatusOptions),
    /// Move the primary: [`crate::switchover`].
    Switchover(SwitchoverOptions),
    /// New passwords for MOCO's accounts: [`crate::rotate_credentials`].
    RotateCredentials(RotateOptions),
    /// Accounts and databases as code: [`crate::apply`].
    Apply(ApplyOptions),
    /// Change the number of instances: [`crate::scale`].
    Scale(ScaleOptions),
    /// SIGKILL one instance's server: [`crate::kill`].
    Kill(KillOptions),
    /// Let a killed instance start again: [`crate::start`].
    Start(StartOptions),
    /// SIGSTOP one instance's server: [`crate::freeze`].
    Freeze(InstanceOptions),
    /// SIGCONT a frozen instance's server: [`crate::thaw`].
    Thaw(InstanceOptions),
    /// Stop the manager and every instance: [`crate::down`].
    Down(DownOptions),
    /// Back up, list, prune, archive or verify: [`crate::backup::run`].
    Backup(BackupCommand),
    /// Create a cluster from a backup: [`crate::restore`].
    Restore(RestoreOptions),
    /// The manager process itself (what `detach` starts): [`crate::run_manager`].
    Run(RunManagerOptions),
}

/// How the manager of `up`, `resume` and `restore` runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerOptions {
    /// Run the manager in the background (log in DIR/manager.log, through
    /// [`crate::Host::manager_command`]) and return once the cluster is Healthy; otherwise it
    /// runs in this process until [`crate::Host::shutdown`].
    pub detach: bool,
    /// Pause between manager rounds when nothing changes.
    pub check_interval: Duration,
    /// How long an instance may stay silent (not answering pings) before it counts as
    /// unreachable.
    pub detection_window: Duration,
    /// With `detach`: how long to wait for the cluster to become Healthy.
    pub wait_timeout: Duration,
}

impl Default for ManagerOptions {
    /// The command line's defaults: in the foreground, `1s`, `1500ms`, `300s`.
    fn default() -> Self {
        ManagerOptions {
            detach: false,
            check_interval: Duration::from_secs(1),
            detection_window: moco_cluster::health::DEFAULT_DETECTION_WINDOW,
            wait_timeout: Duration::from_secs(300),
        }
    }
}

/// `up`: the new cluster (directory, replicas, ports, flavor, server, TLS, …) and its manager.
#[derive(Clone, Debug)]
pub struct UpOptions {
    /// The cluster to create.
    pub create: CreateOptions,
    /// Its manager.
    pub manager: ManagerOptions,
}

/// `resume`.
#[derive(Clone, Debug)]
pub struct ResumeOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// Its manager.
    pub manager: ManagerOptions,
}

/// `run`: the manager process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunManagerOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// Pause between manager rounds.
    pub check_interval: Duration,
    /// How long an instance may stay silent before it counts as unreachable.
    pub detection_window: Duration,
}

/// `status`.
#[derive(Clone, Debug)]
pub struct StatusOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// Print JSON.
    pub json: bool,
}

/// `switchover`.
#[derive(Clone, Debug)]
pub struct SwitchoverOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// The instance to promote (`None`: the engine picks the lowest-ordinal candidate).
    pub to: Option<u32>,
    /// How long to wait for the primary to move.
    pub timeout: Duration,
}

/// `apply`.
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// The manifest (`-`: standard input).
    pub file: PathBuf,
}

/// `credential rotate`.
#[derive(Clone, Debug)]
pub struct RotateOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// How long to follow the rotation (it goes on in the manager afterwards).
    pub timeout: Duration,
}

/// `scale`.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// The new number of instances: 1, 3, 5, 7 or 9.
    pub replicas: u32,
    /// How long to wait for the cluster to be Healthy at the new size (clones included).
    pub timeout: Duration,
}

/// `kill`.
#[derive(Clone, Debug)]
pub struct KillOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// The instance ordinal (`N`).
    pub index: u32,
    /// Keep it down this long before the manager restarts it (unless `keep_down`).
    pub down_for: Duration,
    /// Keep it down until `start`.
    pub keep_down: bool,
}

/// `freeze` and `thaw`.
#[derive(Clone, Debug)]
pub struct InstanceOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// The instance ordinal (`N`).
    pub index: u32,
}

/// `start`.
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// The instance ordinal (`N`).
    pub index: u32,
    /// How long to wait for it to run.
    pub timeout: Duration,
}

/// `down`.
#[derive(Clone, Debug)]
pub struct DownOptions {
    /// The cluster directory.
    pub dir: PathBuf,
    /// Also delete the cluster directory with all data.
    pub wipe: bool,
}

/// `backup` and its subcommands.
#[derive(Clone, Debug)]
pub enum BackupCommand {
    /// Back the cluster up.
    Take(TakeOptions),
    /// List the backups of the cluster, oldest first, incomplete ones included.
    List(BackupTarget),
    /// Delete old backups.
    Prune(PruneOptions),
    /// Turn continuous binlog archiving on or off.
    Archive(ArchiveOptions),
    /// Prove a backup restores.
    Verify(VerifyOptions),
}

/// Which cluster and which bucket.
#[derive(Clone, Debug, Default)]
pub struct BackupTarget {
    /// The cluster directory.
    pub dir: Option<PathBuf>,
    /// Where backups go (`--to`, alias `--from`): s3://BUCKET, gs://BUCKET, azure://CONTAINER,
    /// file:///DIR or a path (`None`: a `backups` directory beside `dir`).
    pub to: Option<String>,
    /// `list`, `verify` and `prune` only: the backups of a Kubernetes MySQLCluster
    /// (`NAMESPACE/NAME`) in the bucket `to` names, instead of a local cluster's.
    pub cluster: Option<String>,
}

/// `backup` (taking one).
#[derive(Clone, Debug, Default)]
pub struct TakeOptions {
    /// Which cluster and which bucket.
    pub target: BackupTarget,
    /// Read the backup no faster than this many bytes per second.
    pub max_rate: Option<ByteRate>,
}

/// `backup prune`: keep the newest `keep` complete backups and/or those younger than
/// `keep_days` days.
#[derive(Clone, Debug, Default)]
pub struct PruneOptions {
    /// Which cluster and which bucket.
    pub target: BackupTarget,
    /// Keep the newest N complete backups.
    pub keep: Option<u32>,
    /// Keep complete backups started less than D days ago.
    pub keep_days: Option<u32>,
    /// Say what would be deleted, and delete nothing.
    pub dry_run: bool,
}

/// `backup archive`.
#[derive(Clone, Debug)]
pub struct ArchiveOptions {
    /// Which cluster and which bucket.
    pub target: BackupTarget,
    /// Seconds between rounds.
    pub every: u64,
    /// Stop archiving (what is archived stays).
    pub off: bool,
}

/// `backup verify`.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// Which cluster and which bucket.
    pub target: BackupTarget,
    /// The backup's folder (`YYYYMMDD-hhmmss`); `None`: the newest complete one.
    pub backup: Option<String>,
}

/// `restore`.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    /// The new cluster's directory (must not exist, or be empty).
    pub dir: PathBuf,
    /// The bucket the backups are in (`None`: `backups` beside the source cluster's directory
    /// when `source` names one, else beside `dir`).
    pub from: Option<String>,
    /// The cluster whose backup to restore: its name (its directory's name), or its directory.
    pub source: String,
    /// Which moment: an RFC 3339 time, or `latest`.
    pub point: String,
    /// Number of instances of the new cluster: 1, 3, 5, 7 or 9.
    pub replicas: u32,
    /// First port of the new cluster's block (`None`: the first free block from 13306).
    pub base_port: Option<u16>,
    /// The new cluster serves TLS with its own CA.
    pub tls: bool,
    /// Its manager.
    pub manager: ManagerOptions,
}
