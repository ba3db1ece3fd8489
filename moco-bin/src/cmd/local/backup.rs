//! `moco local backup [--dir DIR] [--to URL]` and `moco local backup list`: the work is in
//! `moco_backup::local`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use moco_backup::BucketSpec;
use moco_core::time::Timestamp;

use super::{LocalCmdError, usage};

/// `moco local backup`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BackupArgs {
    #[command(subcommand)]
    command: Option<BackupCommand>,
    #[command(flatten)]
    target: Target,
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
}

#[derive(Debug, Subcommand)]
enum BackupCommand {
    /// List the backups of the cluster, oldest first, incomplete ones included.
    List(Target),
    /// Delete old backups: keep the newest N complete ones (`--keep`) and/or those younger
    /// than D days (`--keep-days`). The newest complete backup, and an incomplete one newer
    /// than it (maybe running), are always kept; older incomplete ones are deleted.
    Prune(PruneArgs),
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

/// The default bucket: `backups/` beside the cluster directory.
fn default_bucket(dir: &Path) -> PathBuf {
    dir.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("backups")
}

fn bucket(target: &Target) -> Result<(PathBuf, moco_backup::Bucket), LocalCmdError> {
    let dir = target
        .dir
        .clone()
        .ok_or_else(|| usage("--dir is required: the cluster directory"))?;
    let url = target
        .to
        .clone()
        .unwrap_or_else(|| default_bucket(&dir).display().to_string());
    let spec = BucketSpec::from_url(&url).map_err(|e| usage(format!("--to: {e}")))?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let bucket = spec
        .open(&env)
        .map_err(|e| usage(format!("--to {url}: {e}")))?;
    Ok((dir, bucket))
}

fn now() -> Timestamp {
    moco_adapters::ports::Clock::now(&moco_adapters::ports::SystemClock)
}

/// Runs `moco local backup`.
pub async fn run(args: BackupArgs) -> Result<ExitCode, LocalCmdError> {
    match args.command {
        Some(BackupCommand::List(target)) => list(&target).await,
        Some(BackupCommand::Prune(args)) => prune(&args).await,
        None => take(&args.target).await,
    }
}

async fn take(target: &Target) -> Result<ExitCode, LocalCmdError> {
    let (dir, bucket) = bucket(target)?;
    let started = std::time::Instant::now();
    let taken = moco_backup::local::backup(&dir, &bucket, now())
        .await
        .map_err(|e| usage(e.to_string()))?;
    let m = &taken.manifest;
    say!(
        "backed up instance {} to {} in {:.1} s: {} bytes stored ({} before compression), GTID state {}",
        taken.source_index,
        taken.prefix,
        started.elapsed().as_secs_f64(),
        m.base.size,
        m.base.uncompressed_size,
        m.binlog_state_before
    );
    Ok(ExitCode::SUCCESS)
}

/// The cluster's name and its backups, oldest first.
async fn backups_of(
    target: &Target,
) -> Result<(String, moco_backup::Bucket, Vec<moco_backup::local::Listed>), LocalCmdError> {
    let (dir, bucket) = bucket(target)?;
    let layout = moco_adapters::local::Layout::new(&dir);
    let name = moco_adapters::local::Manifest::load(&layout)
        .map(|m| m.name)
        .map_err(|e| usage(format!("--dir: {e}")))?;
    let backups = moco_backup::local::list(&bucket, &moco_backup::local::cluster_prefix(&name))
        .await
        .map_err(|e| usage(e.to_string()))?;
    Ok((name, bucket, backups))
}

async fn prune(args: &PruneArgs) -> Result<ExitCode, LocalCmdError> {
    if args.keep.is_none() && args.keep_days.is_none() {
        return Err(usage(
            "prune needs --keep N and/or --keep-days D: which backups to keep",
        ));
    }
    let (name, bucket, backups) = backups_of(&args.target).await?;
    let keep = moco_backup::retention::Keep {
        count: args.keep,
        days: args.keep_days,
    };
    let doomed = moco_backup::retention::to_delete(&backups, keep, now());
    if doomed.is_empty() {
        say!(
            "nothing to delete among the {} backups of {name}",
            backups.len()
        );
    }
    for prefix in doomed {
        if args.dry_run {
            say!("would delete {prefix}");
        } else {
            let n = bucket
                .delete_prefix(&prefix)
                .await
                .map_err(|e| usage(e.to_string()))?;
            say!("deleted {prefix} ({n} objects)");
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(target: &Target) -> Result<ExitCode, LocalCmdError> {
    let (name, _, backups) = backups_of(target).await?;
    if backups.is_empty() {
        say!("no backups of {name}");
    }
    for b in backups {
        match (&b.manifest, &b.problem) {
            (Some(m), _) => say!(
                "{}  complete  started {}  {} bytes  GTID state {}",
                b.prefix,
                m.started_at,
                m.base.size,
                m.binlog_state_before
            ),
            (None, problem) => say!(
                "{}  NOT RESTORABLE: {}",
                b.prefix,
                problem.as_deref().unwrap_or("unknown")
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `moco local restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The new cluster's directory (must not exist, or be empty).
    #[arg(long, value_name = "NEWDIR")]
    dir: PathBuf,
    /// The bucket the backups are in (as `moco local backup --to`; default: `backups`
    /// beside NEWDIR).
    #[arg(long, value_name = "URL")]
    from: Option<String>,
    /// The name of the cluster whose backup to restore (its directory's name).
    #[arg(long, value_name = "NAME")]
    source: String,
    /// Which moment: `latest` (the newest complete backup). Restoring to a chosen second needs
    /// the binary logs archived, which is not built yet.
    #[arg(long, default_value = "latest")]
    point: String,
    /// Number of instances of the new cluster: 1, 3, 5, 7 or 9.
    #[arg(long, default_value_t = 3)]
    replicas: u32,
    /// First port of the new cluster's block (default: the first free block from 13306).
    #[arg(long)]
    base_port: Option<u16>,
    #[command(flatten)]
    manager: super::ManagerArgs,
}

/// Runs `moco local restore`: creates the cluster, puts the backup in place of instance 0,
/// and starts the manager, which clones the others from it.
pub async fn restore(a: RestoreArgs) -> Result<ExitCode, LocalCmdError> {
    if a.point != "latest" {
        return Err(usage(format!(
            "--point {}: only `latest` (the newest complete backup) can be restored: restoring \
             to a chosen second needs archived binary logs, which this build does not take yet",
            a.point
        )));
    }
    let url = a
        .from
        .clone()
        .unwrap_or_else(|| default_bucket(&a.dir).display().to_string());
    let spec = BucketSpec::from_url(&url).map_err(|e| usage(format!("--from: {e}")))?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let bucket = spec
        .open(&env)
        .map_err(|e| usage(format!("--from {url}: {e}")))?;
    let chosen = moco_backup::local::latest(&bucket, &a.source)
        .await
        .map_err(|e| usage(format!("--source {}: {e}", a.source)))?;
    let started = std::time::Instant::now();
    let mut options = moco_adapters::local::create::CreateOptions::new(&a.dir, a.replicas);
    options.base_port = a.base_port;
    options.flavor = Some(moco_core::facts::Flavor::Mariadb);
    let prepared = moco_adapters::local::create::prepare(options)?;
    let layout = prepared.layout().clone();
    say!(
        "restoring {} into a new {}-instance cluster in {}",
        chosen.prefix,
        a.replicas,
        layout.root().display()
    );
    let existed = layout.root().exists();
    let manifest = moco_adapters::local::create::create(prepared).await?;
    let restored =
        match moco_backup::local::restore_into(&layout, &manifest, &bucket, &chosen.prefix).await {
            Ok(r) => r,
            Err(e) => {
                // Nothing half-restored is left running or on disk.
                remove_new_cluster(&layout, &manifest, existed).await;
                return Err(usage(format!(
                    "{e} (the new cluster in {} was removed)",
                    a.dir.display()
                )));
            }
        };
    say!(
        "instance 0 holds the backup (GTID position {}) after {:.1} s; the others are cloned from it",
        restored.position,
        started.elapsed().as_secs_f64()
    );
    super::start_manager(&layout, &manifest, &a.manager, started).await
}

/// Stops every server of the cluster `restore` created and removes its directory (its
/// contents only, when the directory existed before).
async fn remove_new_cluster(
    layout: &moco_adapters::local::Layout,
    manifest: &moco_adapters::local::Manifest,
    existed: bool,
) {
    let Ok(binary) = manifest.server_binary() else {
        return;
    };
    let servers: Vec<(u32, std::sync::Arc<moco_adapters::mysqld::LocalMysqld>)> = (0..manifest
        .replicas)
        .filter_map(|i| {
            moco_adapters::mysqld::LocalMysqld::open(binary.clone(), &layout.instance_dir(i))
                .ok()
                .map(|m| (i, std::sync::Arc::new(m)))
        })
        .collect();
    let grace = std::time::Duration::from_secs(60);
    if let Err(e) = moco_adapters::local::servers::stop_servers(&servers, 0, grace).await {
        tracing::warn!(error = %e, "stopping the new cluster's servers");
    }
    let root = layout.root();
    let removed = if existed {
        std::fs::read_dir(root).and_then(|entries| {
            entries.flatten().try_for_each(|e| match e.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(e.path()),
                _ => std::fs::remove_file(e.path()),
            })
        })
    } else {
        std::fs::remove_dir_all(root)
    };
    if let Err(e) = removed {
        say!("could not remove {}: {e}", root.display());
    }
}
