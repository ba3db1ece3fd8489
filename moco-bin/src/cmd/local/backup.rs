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
    Timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
    )
}

/// Runs `moco local backup`.
pub async fn run(args: BackupArgs) -> Result<ExitCode, LocalCmdError> {
    match args.command {
        Some(BackupCommand::List(target)) => list(&target).await,
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

async fn list(target: &Target) -> Result<ExitCode, LocalCmdError> {
    let (dir, bucket) = bucket(target)?;
    let layout = moco_adapters::local::Layout::new(&dir);
    let name = moco_adapters::local::Manifest::load(&layout)
        .map(|m| m.name)
        .map_err(|e| usage(format!("--dir: {e}")))?;
    let backups = moco_backup::local::list(&bucket, &moco_backup::local::cluster_prefix(&name))
        .await
        .map_err(|e| usage(e.to_string()))?;
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
