//! The arguments of `moco local backup` (and its subcommands) and `moco local restore`, and
//! their conversion into `moco_local`'s options.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use moco_core::resources::ByteRate;
use moco_local::{
    ArchiveOptions, BackupCommand as Backup, BackupTarget, PruneOptions, RestoreOptions,
    TakeOptions, VerifyOptions,
};

/// `moco local backup`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct BackupArgs {
    #[command(subcommand)]
    command: Option<BackupCommand>,
    #[command(flatten)]
    target: Target,
    /// Read the backup no faster than this many bytes per second, a Kubernetes quantity
    /// (`60Mi`, `100M`): the backup takes longer and the primary keeps its write latency
    /// (`docs/benchmarks.md` has what rates did on one machine).
    #[arg(long, value_name = "RATE")]
    max_rate: Option<ByteRate>,
}

/// Which cluster and which bucket.
#[derive(Debug, Args)]
struct Target {
    /// The cluster directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where backups go: s3://BUCKET, gs://BUCKET, azure://CONTAINER, file:///DIR or a path
    /// (default: a `backups` directory beside DIR). Credentials come from the environment
    /// (`AWS_*`, `AZURE_*`, `GOOGLE_*`); `AWS_ENDPOINT_URL` points S3 at another service.
    #[arg(long, visible_alias = "from", value_name = "URL")]
    to: Option<String>,
    /// `list`, `verify` and `prune` only: the backups of a Kubernetes MySQLCluster (keys
    /// `moco/NAMESPACE/NAME/`) in the bucket `--from` names, instead of a local cluster's.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "dir")]
    cluster: Option<String>,
}

#[derive(Debug, Subcommand)]
enum BackupCommand {
    /// List the backups of the cluster, oldest first, incomplete ones included.
    List(Target),
    /// Delete old backups: keep the newest N complete ones (`--keep`) and/or those younger
    /// than D days (`--keep-days`). The newest complete backup, and an incomplete one newer
    /// than it (maybe running), are always kept; older incomplete ones are deleted.
    Prune(PruneArgs),
    /// Archive the binary logs continuously (every few seconds, from whichever instance is
    /// primary), so that `moco local restore --point` reaches any second since the oldest
    /// backup. The cluster's manager does it; `--off` stops it.
    Archive(ArchiveArgs),
    /// Prove a backup restores: restore it (the newest complete one, or `--backup`) into a
    /// scratch one-instance cluster beside DIR, check every table (`CHECK TABLE`) and the
    /// GTID position, and record rows and checksums per table (`verify.json` beside the
    /// manifest) or compare them with the recorded ones. The scratch cluster is removed.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
struct VerifyArgs {
    #[command(flatten)]
    target: Target,
    /// The backup's folder (`YYYYMMDD-hhmmss`, as `list` shows it); default: the newest
    /// complete one.
    #[arg(long, value_name = "FOLDER")]
    backup: Option<String>,
}

#[derive(Debug, Args)]
struct ArchiveArgs {
    #[command(flatten)]
    target: Target,
    /// Seconds between rounds: the recovery point is about this plus an upload.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    every: u64,
    /// Stop archiving (what is archived stays).
    #[arg(long)]
    off: bool,
}

#[derive(Debug, Args)]
struct PruneArgs {
    #[command(flatten)]
    target: Target,
    /// Keep the newest N complete backups.
    #[arg(long, value_name = "N")]
    keep: Option<u32>,
    /// Keep complete backups started less than D days ago.
    #[arg(long, value_name = "D")]
    keep_days: Option<u32>,
    /// Say what would be deleted, and delete nothing.
    #[arg(long)]
    dry_run: bool,
}

/// `moco local restore`.
#[derive(Debug, Args)]
pub(super) struct RestoreArgs {
    /// The new cluster's directory (must not exist, or be empty).
    #[arg(long, value_name = "NEWDIR")]
    dir: PathBuf,
    /// The bucket the backups are in (as `moco local backup --to`; default: `backups` beside
    /// the source cluster's directory when `--source` names one, else beside NEWDIR).
    #[arg(long, value_name = "URL")]
    from: Option<String>,
    /// The cluster whose backup to restore: its name (its directory's name), or its
    /// directory.
    #[arg(long, value_name = "NAME|DIR")]
    source: String,
    /// Which moment: an RFC 3339 time (`2026-11-23T08:29:06Z`: every transaction committed
    /// before that second, as MOCO's restorePoint), or `latest` (the newest the backups and
    /// the binlog archive hold). A chosen second needs the binlogs archived
    /// (`moco local backup archive`).
    #[arg(long, default_value = "latest")]
    point: String,
    /// Number of instances of the new cluster: 1, 3, 5, 7 or 9.
    #[arg(long, default_value_t = 3)]
    replicas: u32,
    /// First port of the new cluster's block (default: the first free block from 13306).
    #[arg(long)]
    base_port: Option<u16>,
    /// The new cluster serves TLS with its own CA (as `moco local up --tls`).
    #[arg(long)]
    tls: bool,
    #[command(flatten)]
    manager: super::ManagerArgs,
}

impl BackupArgs {
    /// The library's command for these arguments: taking a backup without a subcommand.
    pub(super) fn command(self) -> Backup {
        match self.command {
            Some(BackupCommand::List(target)) => Backup::List(target.into()),
            Some(BackupCommand::Prune(a)) => Backup::Prune(PruneOptions {
                target: a.target.into(),
                keep: a.keep,
                keep_days: a.keep_days,
                dry_run: a.dry_run,
            }),
            Some(BackupCommand::Archive(a)) => Backup::Archive(ArchiveOptions {
                target: a.target.into(),
                every: a.every,
                off: a.off,
            }),
            Some(BackupCommand::Verify(a)) => Backup::Verify(VerifyOptions {
                target: a.target.into(),
                backup: a.backup,
            }),
            None => Backup::Take(TakeOptions {
                target: self.target.into(),
                max_rate: self.max_rate,
            }),
        }
    }
}

impl From<Target> for BackupTarget {
    fn from(target: Target) -> Self {
        BackupTarget {
            dir: target.dir,
            to: target.to,
            cluster: target.cluster,
        }
    }
}

impl RestoreArgs {
    /// The library's options for these arguments.
    pub(super) fn options(self) -> RestoreOptions {
        RestoreOptions {
            dir: self.dir,
            from: self.from,
            source: self.source,
            point: self.point,
            replicas: self.replicas,
            base_port: self.base_port,
            tls: self.tls,
            manager: self.manager.options(),
        }
    }
}
