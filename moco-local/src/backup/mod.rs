//! `moco local backup` (take, `list`, `prune`, `archive`, `verify`) and `moco local restore`.
//! The commands are here; the work is in the modules: [`take`], [`seed`], [`verify`] and the
//! binlog [`archive`] that runs beside the manager.

pub mod archive;
pub mod error;
pub mod seed;
pub mod take;
pub mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::platform::create::SeededError;
use moco_backup::BucketSpec;
use moco_core::time::Timestamp;

use crate::error::{Error, usage};
use crate::host::Host;
use crate::manager::start_manager;
use crate::options::{
    ArchiveOptions, BackupCommand, BackupTarget, PruneOptions, RestoreOptions, TakeOptions,
    VerifyOptions,
};
use crate::output::out;

/// The bucket and cluster name of a restore's `--source` and `--from`. A `--source` that is a
/// cluster's directory gives its name, and without `--from` the `backups/` beside it; a name
/// alone looks in `backups/` beside the new directory (where `up` and `backup` put them when
/// both clusters live side by side).
fn restore_source(
    new_dir: &Path,
    source: &str,
    from: Option<&str>,
) -> Result<(String, String), Error> {
    let as_dir = Path::new(source);
    let layout = crate::platform::Layout::new(as_dir);
    let (name, beside) = if layout.manifest().is_file() {
        let manifest = crate::platform::Manifest::load(&layout)
            .map_err(|e| usage(format!("--source {source}: {e}")))?;
        (manifest.name, default_bucket(as_dir))
    } else {
        (source.to_owned(), default_bucket(new_dir))
    };
    let url = from.map_or_else(|| beside.display().to_string(), str::to_owned);
    Ok((url, name))
}

/// The default bucket: `backups/` beside the cluster directory.
fn default_bucket(dir: &Path) -> PathBuf {
    dir.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("backups")
}

fn bucket(target: &BackupTarget) -> Result<(PathBuf, moco_backup::Bucket), Error> {
    let dir = target
        .dir
        .clone()
        .ok_or_else(|| usage("--dir is required: the cluster directory"))?;
    let url = target
        .to
        .clone()
        .unwrap_or_else(|| default_bucket(&dir).display().to_string());
    Ok((dir, open_url(&url)?))
}

/// The bucket `url` names, with the environment's credentials.
fn open_url(url: &str) -> Result<moco_backup::Bucket, Error> {
    let spec = BucketSpec::from_url(url).map_err(|e| usage(format!("--to: {e}")))?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    spec.open(&env)
        .map_err(|e| usage(format!("--to {url}: {e}")))
}

fn now() -> Timestamp {
    moco_cluster::ports::Clock::now(&moco_cluster::ports::SystemClock)
}

/// Runs `moco local backup`.
pub async fn run(command: BackupCommand) -> Result<(), Error> {
    match command {
        BackupCommand::Take(options) => take(options).await,
        BackupCommand::List(target) => list(target).await,
        BackupCommand::Prune(options) => prune(options).await,
        BackupCommand::Archive(options) => archive(options).await,
        BackupCommand::Verify(options) => verify(options).await,
    }
}

/// `backup`: a physical backup of the cluster in `dir` (MariaDB), streamed to the bucket.
pub async fn take(options: TakeOptions) -> Result<(), Error> {
    let (dir, bucket) = bucket(&options.target)?;
    let started = std::time::Instant::now();
    let max_rate = options.max_rate.as_ref();
    let taken = take::backup(&dir, &bucket, &moco_cluster::ports::SystemClock, max_rate)
        .await
        .map_err(|e| usage(e.to_string()))?;
    let m = &taken.manifest;
    out!(
        "backed up instance {} to {} in {:.1} s: {} bytes stored ({} before compression), GTID state {}",
        taken.source_index,
        taken.prefix,
        started.elapsed().as_secs_f64(),
        m.base.size,
        m.base.uncompressed_size,
        m.binlog_state_before
    );
    Ok(())
}

/// The backups of one cluster in one bucket.
struct Found {
    /// The cluster's name in messages.
    name: String,
    /// Its keys' prefix (`moco/<ns>/<name>`).
    prefix: String,
    bucket: moco_backup::Bucket,
    /// Oldest first.
    backups: Vec<moco_backup::catalog::Listed>,
}

/// The backups of the local cluster in `--dir`, or of the MySQLCluster `--cluster` names.
async fn backups_of(target: &BackupTarget) -> Result<Found, Error> {
    let (name, prefix, bucket) = match &target.cluster {
        Some(cluster) => {
            let (ns, name) = cluster
                .split_once('/')
                .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
                .ok_or_else(|| usage(format!("--cluster {cluster:?}: expected NAMESPACE/NAME")))?;
            let url = target.to.as_deref().ok_or_else(|| {
                usage("--cluster needs --from URL: the bucket of the cluster's BackupPolicy")
            })?;
            let prefix = moco_backup::layout::cluster_prefix(ns, name)
                .trim_end_matches('/')
                .to_owned();
            (cluster.clone(), prefix, open_url(url)?)
        }
        None => {
            let (dir, bucket) = bucket(target)?;
            let layout = crate::platform::Layout::new(&dir);
            let name = crate::platform::Manifest::load(&layout)
                .map(|m| m.name)
                .map_err(|e| usage(format!("--dir: {e}")))?;
            let prefix = take::cluster_prefix(&name);
            (name, prefix, bucket)
        }
    };
    let backups = moco_backup::catalog::list(&bucket, &prefix)
        .await
        .map_err(|e| usage(e.to_string()))?;
    Ok(Found {
        name,
        prefix,
        bucket,
        backups,
    })
}

/// `backup prune`: deletes old backups, keeping the newest `keep` complete ones and/or those
/// younger than `keep_days`; the newest complete backup, and an incomplete one newer than it
/// (maybe running), are always kept.
pub async fn prune(args: PruneOptions) -> Result<(), Error> {
    if args.keep.is_none() && args.keep_days.is_none() {
        return Err(usage(
            "prune needs --keep N and/or --keep-days D: which backups to keep",
        ));
    }
    let Found {
        name,
        bucket,
        backups,
        ..
    } = backups_of(&args.target).await?;
    let keep = moco_backup::retention::Keep {
        count: args.keep,
        days: args.keep_days,
    };
    // A backup whose manifest is there but unreadable stops the prune: it may be complete.
    let doomed = moco_backup::retention::decide(&backups, keep, now())
        .map_err(|e| usage(format!("prune deleted nothing: {e}")))?;
    if doomed.is_empty() {
        out!(
            "nothing to delete among the {} backups of {name}",
            backups.len()
        );
    }
    for prefix in doomed {
        if args.dry_run {
            out!("would delete {prefix}");
        } else {
            let n = bucket
                .delete_prefix(&prefix)
                .await
                .map_err(|e| usage(e.to_string()))?;
            out!("deleted {prefix} ({n} objects)");
        }
    }
    Ok(())
}

/// `backup archive`: tells the cluster's manager to archive the binary logs every `every`
/// seconds (or, with `off`, to stop).
pub async fn archive(args: ArchiveOptions) -> Result<(), Error> {
    use archive::{ArchiveConfig, config_path};
    let dir = args
        .target
        .dir
        .clone()
        .ok_or_else(|| usage("--dir is required: the cluster directory"))?;
    let layout = crate::platform::Layout::new(&dir);
    crate::platform::Manifest::load(&layout).map_err(|e| usage(format!("--dir: {e}")))?;
    if args.off {
        match std::fs::remove_file(config_path(&layout)) {
            Ok(()) => out!("binlog archiving is off (the archive stays)"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                out!("binlog archiving was not on")
            }
            Err(e) => return Err(usage(format!("{}: {e}", config_path(&layout).display()))),
        }
        return Ok(());
    }
    if args.every == 0 {
        return Err(usage("--every: at least 1 second"));
    }
    // The bucket must open here, with this environment, before the manager is told.
    let (_, _) = bucket(&args.target)?;
    let url = args
        .target
        .to
        .clone()
        .unwrap_or_else(|| default_bucket(&dir).display().to_string());
    // The manager process may run in another directory: a path is made absolute (it need
    // not exist yet; the first file creates it).
    let url = match std::path::absolute(&url) {
        Ok(p) if !url.contains("://") => p.display().to_string(),
        _ => url,
    };
    let config = ArchiveConfig {
        url: url.clone(),
        every_seconds: args.every,
    };
    crate::platform::files::write_json(&config_path(&layout), &config, 0o600)
        .map_err(|e| usage(e.to_string()))?;
    out!(
        "binlog archiving to {url} every {} s is on; the cluster's manager archives from the primary \
         (object store credentials come from the manager's environment)",
        args.every
    );
    Ok(())
}

/// `backup verify`: restores a backup into a scratch one-instance cluster, checks every table
/// and the GTID position, and records or compares rows and checksums per table.
pub async fn verify(args: VerifyOptions) -> Result<(), Error> {
    let Found {
        name,
        bucket,
        backups,
        ..
    } = backups_of(&args.target).await?;
    let chosen = match &args.backup {
        Some(folder) => backups
            .iter()
            .find(|b| b.prefix.rsplit('/').next() == Some(folder.as_str()))
            .ok_or_else(|| usage(format!("--backup {folder}: no such backup of {name}")))?,
        None => backups
            .iter()
            .rev()
            .find(|b| b.manifest.is_some())
            .ok_or_else(|| usage(format!("no complete backup of {name} to verify")))?,
    };
    if chosen.manifest.is_none() {
        return Err(usage(format!(
            "--backup: {} is not restorable: {}",
            chosen.prefix,
            chosen.problem.as_deref().unwrap_or("unknown")
        )));
    }
    // Beside the local cluster, or in the current directory for a Kubernetes one.
    let dir = args.target.dir.clone().unwrap_or_default();
    let scratch = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join(format!(
            ".{}-verify-{}",
            name.replace('/', "-"),
            std::process::id()
        ));
    let started = std::time::Instant::now();
    let mut options = crate::platform::create::CreateOptions::new(&scratch, 1);
    options.flavor = Some(moco_core::facts::Flavor::Mariadb);
    let prepared = crate::platform::create::prepare(options)?;
    let layout = prepared.layout().clone();
    out!(
        "verifying {} in a scratch instance ({})",
        chosen.prefix,
        scratch.display()
    );
    let prefix = chosen.prefix.clone();
    let created = crate::platform::create::create_seeded(prepared, |layout, manifest, binary| {
        let bucket = &bucket;
        async move { verify::verify(&layout, &manifest, &binary, bucket, &prefix, now()).await }
    })
    .await;
    let (v, compared) = match created {
        Ok((_, outcome)) => {
            remove_scratch_cluster(&layout).await;
            outcome
        }
        // The scratch instance is gone already.
        Err(SeededError::Create(e)) => return Err(e.into()),
        Err(SeededError::Seed(e)) => {
            return Err(usage(format!("{}: NOT VERIFIED: {e}", chosen.prefix)));
        }
    };
    let rows: u64 = v.tables.values().map(|t| t.rows).sum();
    out!(
        "{} verified in {:.1} s: it restores, {} tables pass CHECK TABLE ({} rows), GTID position {}; {}",
        chosen.prefix,
        started.elapsed().as_secs_f64(),
        v.tables.len(),
        rows,
        v.position,
        if compared {
            "rows and checksums match its recorded verification"
        } else {
            "rows and checksums recorded for later verifications"
        }
    );
    Ok(())
}

/// `backup list`: the cluster's backups, oldest first, incomplete ones included, with the
/// times each restores to and the binlog archive.
pub async fn list(target: BackupTarget) -> Result<(), Error> {
    let Found {
        name,
        prefix,
        bucket,
        backups,
    } = backups_of(&target).await?;
    // MOCO's MySQL backups and their archive, beside the physical ones.
    let moco_prefix = format!("{prefix}/");
    let objects: Vec<(String, u64)> = bucket
        .list(&prefix)
        .await
        .map_err(|e| usage(e.to_string()))?
        .into_iter()
        .map(|o| (o.key, o.size))
        .collect();
    let dumps = moco_backup::mysql::format::keys::list_dumps(&moco_prefix, &objects);
    let mysql_archive = moco_backup::job::mysql::archive_store::load(&bucket, &moco_prefix)
        .await
        .map_err(|e| usage(e.to_string()))?;
    if backups.is_empty() && dumps.is_empty() {
        out!("no backups of {name}");
    }
    list_mysql(&moco_prefix, &dumps, &mysql_archive);
    let contents = moco_backup::mariadb::binlog::archive::load(&bucket, &prefix)
        .await
        .map_err(|e| usage(e.to_string()))?;
    let timeline = moco_backup::mariadb::binlog::Timeline::build(&contents.segments)
        .map_err(|e| usage(e.to_string()))?;
    let bases = moco_backup::catalog::bases(&backups, timeline.domain);
    let show = moco_backup::mariadb::binlog::timeline::show;
    for (i, b) in backups.iter().enumerate() {
        let Some(m) = &b.manifest else {
            out!(
                "{}  NOT RESTORABLE: {}",
                b.prefix,
                b.problem.as_deref().unwrap_or("unknown")
            );
            continue;
        };
        let base = bases.iter().find(|(j, _)| *j == i).map(|(_, base)| base);
        let window = match base.map(|base| {
            (
                base,
                moco_backup::mariadb::binlog::timeline::restorable_until(
                    base,
                    &timeline,
                    contents.progress,
                ),
            )
        }) {
            Some((base, Some(until))) => format!(
                "restores to any second from {} to {}",
                show(base.finished_at + 1),
                show(until)
            ),
            Some((_, None)) => "restores as it is (no archived binlogs continue it)".to_owned(),
            None => "restores as it is (its GTID position is not recorded)".to_owned(),
        };
        out!(
            "{}  complete  finished {}  {} bytes  GTID state {}  {window}",
            b.prefix,
            m.finished_at,
            m.base.size,
            m.binlog_state_before
        );
    }
    if !contents.segments.is_empty() {
        out!("binlog archive: {} files", contents.segments.len());
        for (first, last) in timeline.stretches() {
            let (a, z) = (&timeline.pieces[first], &timeline.pieces[last]);
            out!(
                "  transactions {}..={} committed {} .. {}",
                a.first_seq,
                z.last_seq,
                show(a.first_time),
                show(z.last_time)
            );
        }
        if timeline.stretches().len() > 1 {
            out!(
                "  GAP: binlogs are missing between the stretches above; a backup before a gap restores only up to it"
            );
        }
        if let Some(p) = contents.progress {
            out!("  complete up to {}", show(p.checked_at));
        }
    }
    Ok(())
}

/// The MySQL part of `list`: MOCO's backups with the seconds their binlogs reach, and the
/// binlog archive (whether it reaches a point from a given backup needs that backup's GTID
/// set, inside its dump: the restore finds it, and names a gap).
fn list_mysql(
    prefix: &str,
    dumps: &[moco_backup::mysql::format::keys::DumpListed],
    archive: &moco_backup::job::mysql::archive_store::ArchiveContents,
) {
    use moco_backup::layout::backup_time_text;
    for d in dumps {
        let window = match (d.binlog_size, d.next) {
            (Some(size), Some(next)) => format!(
                "restores to any second from {} until {next} ({size} bytes of binlogs)",
                d.time
            ),
            (None, Some(next)) => {
                format!("restores as it is (the backup of {next} stored no binlogs)")
            }
            (_, None) => "restores as it is; later seconds through the binlog archive".to_owned(),
        };
        out!(
            "{prefix}{}  MOCO dump  {} bytes  {window}",
            backup_time_text(d.time),
            d.dump_size
        );
    }
    let show = moco_backup::mysql::archive::show_ms;
    let first = archive.rounds.first().map(|r| r.read_at_ms);
    let last = archive.rounds.last().map(|r| r.read_at_ms);
    if let (Some(first), Some(last)) = (first, last) {
        out!(
            "binlog archive (MySQL): {} rounds stored, read {} .. {}",
            archive.rounds.len(),
            show(first),
            show(last)
        );
    }
    if let Some(p) = &archive.progress {
        out!("  complete up to {}", show(p.read_at_ms));
    }
}

/// Runs `moco local restore`: creates the cluster, puts the backup in place of instance 0,
/// and starts the manager, which clones the others from it.
pub async fn restore(a: RestoreOptions, host: &impl Host) -> Result<(), Error> {
    let point = if a.point == "latest" {
        moco_backup::mariadb::binlog::Point::Latest
    } else {
        let t = Timestamp::parse(&a.point).map_err(|e| {
            usage(format!(
                "--point {}: {e} (an RFC 3339 time such as 2026-11-23T08:29:06Z, or `latest`)",
                a.point
            ))
        })?;
        moco_backup::mariadb::binlog::Point::Before(t.seconds())
    };
    let (url, source) = restore_source(&a.dir, &a.source, a.from.as_deref())?;
    let spec = BucketSpec::from_url(&url).map_err(|e| usage(format!("--from: {e}")))?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let bucket = spec
        .open(&env)
        .map_err(|e| usage(format!("--from {url}: {e}")))?;
    // Decided before a new cluster is made for it.
    let planned = seed::plan_restore(&bucket, &source, point)
        .await
        .map_err(|e| {
            usage(format!(
                "--source {} --point {} (bucket {url}): {e}",
                a.source, a.point
            ))
        })?;
    let started = std::time::Instant::now();
    let mut options = crate::platform::create::CreateOptions::new(&a.dir, a.replicas);
    options.base_port = a.base_port;
    options.tls = a.tls;
    options.flavor = Some(moco_core::facts::Flavor::Mariadb);
    let prepared = crate::platform::create::prepare(options)?;
    let layout = prepared.layout().clone();
    out!(
        "restoring {} at {} into a new {}-instance cluster in {}",
        a.source,
        a.point,
        a.replicas,
        layout.root().display()
    );
    // Instance 0 is restored while the others are created; a failure of either leaves
    // nothing half-restored running or on disk.
    let created = crate::platform::create::create_seeded(prepared, |layout, manifest, binary| {
        let (bucket, planned) = (&bucket, &planned);
        async move { seed::restore_to(&layout, &manifest, &binary, bucket, planned).await }
    })
    .await;
    let (manifest, done) = match created {
        Ok(created) => created,
        Err(SeededError::Create(e)) => return Err(e.into()),
        Err(SeededError::Seed(e)) => {
            return Err(usage(format!(
                "{e} (the new cluster in {} was removed)",
                a.dir.display()
            )));
        }
    };
    out!(
        "instance 0 holds backup {} (GTID position {}) and {} binlog transactions from {} files \
         (last {}) after {:.1} s (copied in {:.1} s, prepared in {:.1} s); the others are \
         cloned from it",
        done.base,
        done.restored.position,
        done.replayed.transactions,
        done.replayed.files,
        done.replayed
            .last
            .map_or("none".to_owned(), |g| g.to_string()),
        started.elapsed().as_secs_f64(),
        done.restored.copied_in.as_secs_f64(),
        done.restored.prepared_in.as_secs_f64()
    );
    start_manager(&layout, &manifest, &a.manager, started, host).await
}

/// Stops every server of the scratch cluster `verify` created and removes its directory.
async fn remove_scratch_cluster(layout: &crate::platform::Layout) {
    let grace = std::time::Duration::from_secs(60);
    if let Err(e) = crate::platform::run::stop_instances(layout, grace).await {
        tracing::warn!(error = %e, "stopping the scratch cluster's servers");
    }
    let root = layout.root();
    if let Err(e) = std::fs::remove_dir_all(root) {
        out!("could not remove {}: {e}", root.display());
    }
}
