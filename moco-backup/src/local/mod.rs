//! Backups of a `moco local` cluster: the physical backup of [`crate::mariadb::physical`]
//! taken from a ready replica (the primary only when there is none, as MOCO chooses), under
//! MOCO's key layout `moco/<namespace>/<name>/<YYYYMMDD-hhmmss>/` with the namespace `local`;
//! restores to a second from it and the binlog archive; verification. [`archive`] archives a
//! local cluster's binlogs beside its manager.

pub mod archive;

use std::collections::BTreeMap;
use std::path::Path;

use moco_adapters::instance::clone::BackupSource;
use moco_adapters::local::secret::Secret;
use moco_adapters::local::snapshot::ClusterSnapshot;
use moco_adapters::local::sql::admin_options;
use moco_adapters::local::tls;
use moco_adapters::local::{Layout, Manifest};
use moco_adapters::mysql::MysqlInstance;
use moco_adapters::mysqld::{ServerBinary, tool_beside};
use moco_cluster::ports::MysqlPort as _;
use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::time::Timestamp;

use crate::bucket::{Bucket, BucketError};
use crate::layout;
use crate::layout::BackupError;
use crate::mariadb::binlog::archive::{self as binlog_archive, ArchiveError};
use crate::mariadb::binlog::events::parse_position;
use crate::mariadb::binlog::replay::{ReplayError, ReplayTarget, Replayed, replay};
use crate::mariadb::binlog::timeline::{Base, PlanError, Point, Timeline, plan};
use crate::mariadb::physical::{self, MANIFEST_KEY, Manifest as BackupManifest};

/// The namespace part of the keys of local clusters.
pub const LOCAL_NAMESPACE: &str = "local";

/// Why a local backup cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum LocalBackupError {
    /// The cluster directory.
    #[error("--dir {dir}: {message}")]
    Cluster {
        /// The directory.
        dir: String,
        /// What is wrong.
        message: String,
    },
    /// Taking or storing the backup.
    #[error(transparent)]
    Backup(#[from] BackupError),
}

/// A backup taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    /// The instance it was taken from.
    pub source_index: u32,
    /// Its prefix in the bucket.
    pub prefix: String,
    /// Its manifest.
    pub manifest: BackupManifest,
}

/// The prefix of the backups of cluster `name`.
pub fn cluster_prefix(name: &str) -> String {
    format!("moco/{LOCAL_NAMESPACE}/{name}")
}

/// The instance to back up: the ready, reachable, non-errant replica least behind, else the
/// primary when it is ready.
pub fn choose_source(snapshot: &ClusterSnapshot) -> Option<u32> {
    let usable = |i: &&moco_adapters::local::snapshot::InstanceSnapshot| {
        i.ready && i.reachable && !i.errant && !i.held_down
    };
    snapshot
        .instances
        .iter()
        .filter(usable)
        .filter(|i| i.role == "replica" && i.replication_error.is_none())
        .min_by_key(|i| (i.lag.unwrap_or(u64::MAX), i.index))
        .or_else(|| {
            snapshot
                .instances
                .iter()
                .filter(usable)
                .find(|i| i.index == snapshot.current_primary_index)
        })
        .map(|i| i.index)
}

/// Backs up the cluster in `dir` into `bucket`, named by the second `clock` gives when it
/// starts, reading the tool's stream at most at `max_rate`.
pub async fn backup(
    dir: &Path,
    bucket: &Bucket,
    clock: &dyn moco_cluster::ports::Clock,
    max_rate: Option<&moco_core::resources::ByteRate>,
) -> Result<Taken, LocalBackupError> {
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.display().to_string(),
        message,
    };
    let layout = Layout::new(dir);
    let manifest = Manifest::load(&layout).map_err(|e| fail(e.to_string()))?;
    if manifest.flavor != Flavor::Mariadb {
        return Err(fail(
            "a MySQL cluster: physical backups use MariaDB's mariadb-backup, and MOCO's MySQL \
             format (mysqlsh) is not built yet"
                .to_owned(),
        ));
    }
    let secret = Secret::load(&layout).map_err(|e| fail(e.to_string()))?;
    let snapshot = ClusterSnapshot::load(&layout)
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| {
            fail("the manager has not observed the cluster yet: is it up?".to_owned())
        })?;
    let index = choose_source(&snapshot).ok_or_else(|| {
        fail("no instance is ready to be backed up (see `moco local status`)".to_owned())
    })?;
    let tool = tool_beside(&manifest.server, "mariadb-backup")
        .or_else(|_| tool_beside(&manifest.server, "mariabackup"))
        .map_err(|e| fail(e.to_string()))?;
    let port = manifest.instance_port(index);
    let admin = MysqlInstance::new(
        admin_options(&manifest, &layout, index, &secret).map_err(|e| fail(e.to_string()))?,
    );
    let state = admin
        .executed_gtid()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let _ = admin.disconnect().await;
    let instance_dir = layout.instance_dir(index);
    let source = BackupSource {
        tool,
        defaults_file: layout.mycnf(index),
        datadir: layout.datadir(index),
        host: "127.0.0.1".to_owned(),
        port,
        credentials: secret.credentials(Account::CloneDonor),
        ssl_ca: tls::ca_file(&layout, &manifest),
        scratch_dir: instance_dir.join("backup-scratch"),
        log: instance_dir.join("backup.log"),
        nice: moco_adapters::instance::clone::BACKUP_NICE,
    };
    moco_adapters::instance::clone::wipe_dir(&source.scratch_dir)
        .map_err(|e| fail(e.to_string()))?;
    let (_, prefix) = layout::free_folder(
        bucket,
        &format!("{}/", cluster_prefix(&manifest.name)),
        clock,
    )
    .await?;
    let taken = physical::backup(&source, state, bucket, &prefix, max_rate).await?;
    let _ = std::fs::remove_dir_all(&source.scratch_dir);
    Ok(Taken {
        source_index: index,
        prefix,
        manifest: taken,
    })
}

/// One backup folder in a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Its prefix.
    pub prefix: String,
    /// Its manifest; `None` for an incomplete backup (no manifest).
    pub manifest: Option<BackupManifest>,
    /// Why the manifest could not be read, when it could not.
    pub problem: Option<String>,
    /// Whether the folder holds a `manifest.json`, read or not. One that holds an unreadable
    /// manifest (`manifest` is `None`) is not incomplete: it may be a newer release's backup,
    /// or the read may have failed, and no rule deletes it.
    pub has_manifest: bool,
}

/// Every physical backup under `cluster_prefix` (`moco/<ns>/<name>`), oldest first. The
/// archives' folders and MOCO's MySQL backups (`dump.tar`, `binlog.tar.zst`:
/// [`crate::mysql::format::keys::list_dumps`]) are not physical backups and are left out.
pub async fn list(bucket: &Bucket, cluster_prefix: &str) -> Result<Vec<Listed>, BucketError> {
    use crate::mysql::format::keys::{BINLOG_FILE, DUMP_FILE};
    // Per folder: has a manifest, holds MOCO's MySQL format.
    let mut folders: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for object in bucket.list(cluster_prefix).await? {
        let Some(rest) = object.key.strip_prefix(&format!("{cluster_prefix}/")) else {
            continue;
        };
        let Some((folder, name)) = rest.split_once('/') else {
            continue;
        };
        if folder == crate::mariadb::binlog::archive::ARCHIVE_FOLDER
            || folder == crate::mysql::archive::ARCHIVE_FOLDER
        {
            continue;
        }
        let (has_manifest, moco_format) = folders
            .entry(format!("{cluster_prefix}/{folder}"))
            .or_default();
        *has_manifest |= name == MANIFEST_KEY;
        *moco_format |= name == DUMP_FILE || name == BINLOG_FILE;
    }
    let mut out = Vec::new();
    for (prefix, (has_manifest, moco_format)) in folders {
        if moco_format && !has_manifest {
            continue;
        }
        let (manifest, problem) = if has_manifest {
            match physical::manifest(bucket, &prefix).await {
                Ok(m) => (Some(m), None),
                Err(e) => (None, Some(e.to_string())),
            }
        } else {
            (None, Some("incomplete: no manifest".to_owned()))
        };
        out.push(Listed {
            prefix,
            manifest,
            problem,
            has_manifest,
        });
    }
    Ok(out)
}

/// Puts the backup under `prefix` into instance 0 of the new cluster in `layout`, which
/// [`create_seeded`](moco_adapters::local::create::create_seeded) left to it (written, never
/// initialised nor started): the copy is extracted and prepared in its datadir, started with
/// an init file that gives its accounts this cluster's passwords (the copy holds the source
/// cluster's) before any connection is accepted, and given the source's GTID history. The
/// manager then makes it the primary and clones the other, empty, instances from it.
pub async fn restore_into(
    layout: &Layout,
    manifest: &Manifest,
    binary: &ServerBinary,
    bucket: &Bucket,
    prefix: &str,
) -> Result<physical::Restored, LocalBackupError> {
    use moco_adapters::instance::clone::{RestoreTarget, seed};
    use moco_adapters::instance::rekey::rekey_init_file;
    use moco_adapters::mysqld::LocalMysqld;
    use moco_core::moco_accounts::MocoPasswords;
    use std::time::Duration;

    let dir = layout.root().display().to_string();
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.clone(),
        message,
    };
    let tool = |name: &str| binary.tool(name).map_err(|e| fail(e.to_string()));
    let server = LocalMysqld::open(binary.clone(), &layout.instance_dir(0))
        .map_err(|e| fail(e.to_string()))?;
    let boot = Duration::from_secs(300);
    let target = RestoreTarget {
        backup_tool: tool("mariadb-backup").or_else(|_| tool("mariabackup"))?,
        mbstream: tool("mbstream")?,
        datadir: layout.datadir(0),
        log: layout.instance_dir(0).join("restore.log"),
    };
    let restored = physical::restore(bucket, prefix, &target).await?;
    // The copy starts with the source's binlog history; the seed then only sets its position.
    moco_adapters::instance::clone::write_binlog_state(
        &target.datadir,
        &restored.manifest.binlog_state_before,
        &restored.position,
    )
    .map_err(|e| fail(e.to_string()))?;

    let secret = Secret::load(layout).map_err(|e| fail(e.to_string()))?;
    let passwords =
        MocoPasswords::try_from_fn(|a: Account| secret.password(a.name()).map(str::to_owned))
            .map_err(|e| fail(e.to_string()))?;
    let init_file = layout.instance_dir(0).join("tmp").join("rekey.sql");
    moco_adapters::local::files::write_atomic(
        &init_file,
        rekey_init_file(&passwords).as_bytes(),
        0o600,
    )
    .map_err(|e| fail(e.to_string()))?;
    let started = server
        .start_and_wait(&[format!("--init-file={}", init_file.display())], boot)
        .await;
    let _ = std::fs::remove_file(&init_file);
    started.map_err(|e| fail(e.to_string()))?;
    let admin_opts =
        admin_options(manifest, layout, 0, &secret).map_err(|e| fail(e.to_string()))?;
    // mariadbd logs a failed statement of its init file, skips the rest of it and starts all
    // the same: an account the copy lacks would go unnoticed until something logged in as it.
    for account in Account::ALL {
        let mut opts = admin_opts.clone();
        opts.user = account.name().to_owned();
        opts.password = passwords.get(account).to_owned();
        let instance = MysqlInstance::new(opts);
        let login = instance.conn().await.map(drop);
        let _ = instance.disconnect().await;
        login.map_err(|e| {
            fail(format!(
                "the restored copy does not let {} log in with this cluster's password ({e}); \
                 the error log {} names the statement that failed",
                account.name(),
                server.settings().log_error.as_ref().map_or_else(
                    || "of instance 0".to_owned(),
                    |log| log.display().to_string()
                )
            ))
        })?;
    }
    let admin = MysqlInstance::new(admin_opts);
    seed(
        &admin,
        &restored.manifest.binlog_state_before,
        &restored.position,
    )
    .await
    .map_err(|e| fail(e.to_string()))?;
    let _ = admin.disconnect().await;
    Ok(restored)
}

/// The complete backups of `backups` as the restore plan sees them, with their indexes in
/// `backups`. A backup whose manifest names no GTID position (its tool did not report one)
/// can only be restored as it is, so it takes part only when nothing else is asked.
pub fn bases(backups: &[Listed], domain: Option<u32>) -> Vec<(usize, Base)> {
    backups
        .iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let m = b.manifest.as_ref()?;
            let position = m.position.as_ref()?;
            let tip = parse_position(&position.mariadb_position())
                .ok()?
                .into_iter()
                .find(|g| domain.is_none_or(|d| g.domain == d));
            Some((
                i,
                Base {
                    prefix: b.prefix.clone(),
                    position: tip,
                    finished_at: m.finished_at.seconds(),
                },
            ))
        })
        .collect()
}

/// What a point-in-time restore did.
#[derive(Clone, Debug)]
pub struct RestoredTo {
    /// The base backup's prefix.
    pub base: String,
    /// Its restore.
    pub restored: physical::Restored,
    /// The binlogs replayed after it.
    pub replayed: Replayed,
}

/// Why a point-in-time restore failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreToError {
    /// The cluster or the base backup.
    #[error(transparent)]
    Local(#[from] LocalBackupError),
    /// Reading the archive.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// No restore reaches the point.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Replaying binlogs.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Nothing of the source cluster to restore.
    #[error("{0}")]
    NoSource(String),
}

/// A restore decided: the base backup and the binlogs after it.
#[derive(Clone, Debug)]
pub struct PlannedRestore {
    /// The source cluster's prefix.
    pub prefix: String,
    /// The base backup's prefix.
    pub base: String,
    /// The archive's segments the plan's steps index.
    pub segments: Vec<crate::mariadb::binlog::Segment>,
    /// The plan.
    pub plan: crate::mariadb::binlog::Plan,
}

/// Decides how to restore cluster `source`'s state at `point` from `bucket`: the newest
/// backup complete before the point, then the archived binlogs up to it. Nothing is touched,
/// so a point the archive does not reach fails before a new cluster is made.
pub async fn plan_restore(
    bucket: &Bucket,
    source: &str,
    point: Point,
) -> Result<PlannedRestore, RestoreToError> {
    plan_restore_under(bucket, cluster_prefix(source), source, point).await
}

/// [`plan_restore`] of the cluster whose keys start with `prefix` (`moco/<ns>/<name>`, no
/// trailing `/`); `source` names it in messages.
pub async fn plan_restore_under(
    bucket: &Bucket,
    prefix: String,
    source: &str,
    point: Point,
) -> Result<PlannedRestore, RestoreToError> {
    let backups = list(bucket, &prefix)
        .await
        .map_err(|e| LocalBackupError::Backup(e.into()))?;
    let contents = binlog_archive::load(bucket, &prefix).await?;
    let timeline = Timeline::build(&contents.segments).map_err(ArchiveError::from)?;
    let bases = bases(&backups, timeline.domain);
    let plain: Vec<Base> = bases.iter().map(|(_, b)| b.clone()).collect();
    let plan = match plan(&plain, &timeline, contents.progress, point) {
        Err(PlanError::NoBackup) if backups.iter().any(|b| b.manifest.is_some()) => {
            return Err(LocalBackupError::Cluster {
                dir: prefix,
                message: "the complete backups name no GTID position (taken by an older build), \
                          so they cannot start a point-in-time restore"
                    .to_owned(),
            }
            .into());
        }
        Err(PlanError::NoBackup) => {
            return Err(RestoreToError::NoSource(format!(
                "no complete backup of cluster {source:?} in this bucket \
                 (`moco local backup list` shows them)"
            )));
        }
        other => other?,
    };
    Ok(PlannedRestore {
        base: bases[plan.base].1.prefix.clone(),
        prefix,
        segments: contents.segments,
        plan,
    })
}

/// Carries out `planned` into instance 0 of the new cluster in `layout`, left to it by
/// [`create_seeded`](moco_adapters::local::create::create_seeded): the base backup
/// ([`restore_into`]), then the binlogs.
pub async fn restore_to(
    layout: &Layout,
    manifest: &Manifest,
    binary: &ServerBinary,
    bucket: &Bucket,
    planned: &PlannedRestore,
) -> Result<RestoredTo, RestoreToError> {
    let PlannedRestore {
        prefix,
        base,
        segments,
        plan,
    } = planned;
    let base = base.clone();
    let restored = restore_into(layout, manifest, binary, bucket, &base).await?;
    let dir = layout.root().display().to_string();
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.clone(),
        message,
    };
    if plan.steps.is_empty() {
        return Ok(RestoredTo {
            base,
            restored,
            replayed: Replayed::default(),
        });
    }
    let tool = |names: [&str; 2]| {
        binary
            .tool(names[0])
            .or_else(|_| binary.tool(names[1]))
            .map_err(|e| fail(e.to_string()))
    };
    let secret = Secret::load(layout).map_err(|e| fail(e.to_string()))?;
    let credentials = secret.credentials(Account::Admin);
    let target = ReplayTarget {
        binlog_tool: tool(["mariadb-binlog", "mysqlbinlog"])?,
        client: tool(["mariadb", "mysql"])?,
        host: "127.0.0.1".to_owned(),
        port: manifest.instance_port(0),
        credentials: credentials.clone(),
        ssl_ca: tls::ca_file(layout, manifest),
        scratch: layout.instance_dir(0).join("replay-scratch"),
        log: layout.instance_dir(0).join("restore.log"),
    };
    let admin = MysqlInstance::new(
        admin_options(manifest, layout, 0, &secret).map_err(|e| fail(e.to_string()))?,
    );
    let replayed = replay(bucket, prefix, segments, plan, &target, &admin).await;
    let _ = admin.disconnect().await;
    let _ = std::fs::remove_dir_all(&target.scratch);
    Ok(RestoredTo {
        base,
        restored,
        replayed: replayed?,
    })
}

/// The key of a backup's verification record, beside its manifest.
pub const VERIFY_KEY: &str = "verify.json";

/// What a verification found in a restored backup.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verification {
    /// When (Unix second).
    pub verified_at: i64,
    /// The restored server's GTID position (it must be the manifest's).
    pub position: String,
    /// Per table (`schema.table`): rows and `CHECKSUM TABLE`.
    pub tables: BTreeMap<String, TableCheck>,
}

/// One table of a [`Verification`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TableCheck {
    /// `SELECT COUNT(*)`.
    pub rows: u64,
    /// `CHECKSUM TABLE … EXTENDED`.
    pub checksum: Option<u64>,
}

/// The differences between two verifications of one backup (empty when they agree).
pub fn differences(recorded: &Verification, now: &Verification) -> Vec<String> {
    let mut out = Vec::new();
    if recorded.position != now.position {
        out.push(format!(
            "GTID position {} (recorded {})",
            now.position, recorded.position
        ));
    }
    for (name, was) in &recorded.tables {
        match now.tables.get(name) {
            None => out.push(format!("{name}: missing")),
            Some(t) if t != was => out.push(format!(
                "{name}: {} rows, checksum {:?} (recorded {} rows, {:?})",
                t.rows, t.checksum, was.rows, was.checksum
            )),
            Some(_) => {}
        }
    }
    for name in now.tables.keys() {
        if !recorded.tables.contains_key(name) {
            out.push(format!("{name}: not in the recorded verification"));
        }
    }
    out
}

/// Verifies the backup under `prefix` by restoring it into instance 0 of the scratch cluster
/// in `layout` (as [`restore_into`]): its hash, the prepare, a server that starts, every
/// table passing `CHECK TABLE`, the GTID position the manifest recorded; then rows and
/// checksums per table, compared with the backup's earlier verification when there is one
/// (else recorded as `verify.json` beside the manifest). Returns the verification and
/// whether it was compared with a recorded one.
pub async fn verify(
    layout: &Layout,
    manifest: &Manifest,
    binary: &ServerBinary,
    bucket: &Bucket,
    prefix: &str,
    now: Timestamp,
) -> Result<(Verification, bool), LocalBackupError> {
    use mysql_async::prelude::Queryable as _;
    let dir = layout.root().display().to_string();
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.clone(),
        message,
    };
    let restored = restore_into(layout, manifest, binary, bucket, prefix).await?;
    let secret = Secret::load(layout).map_err(|e| fail(e.to_string()))?;
    let admin = MysqlInstance::new(
        admin_options(manifest, layout, 0, &secret).map_err(|e| fail(e.to_string()))?,
    );
    let mut c = admin.conn().await.map_err(|e| fail(e.to_string()))?;
    let sql_error = |what: &str, e: mysql_async::Error| fail(format!("{what}: {e}"));
    let position: Option<String> = c
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .map_err(|e| sql_error("SELECT @@gtid_binlog_pos", e))?;
    let position = position.unwrap_or_default();
    if let Some(recorded) = &restored.manifest.position
        && GtidSet::from_mariadb(&recorded.mariadb_position()).ok()
            != GtidSet::from_mariadb(&position).ok()
    {
        return Err(fail(format!(
            "the restored server is at GTID position {position:?}, the backup recorded {}",
            recorded.mariadb_position()
        )));
    }
    let tables: Vec<(String, String)> = c
        .query(
            "SELECT table_schema, table_name FROM information_schema.tables \
             WHERE table_type = 'BASE TABLE' AND table_schema NOT IN \
             ('mysql', 'information_schema', 'performance_schema', 'sys') \
             ORDER BY table_schema, table_name",
        )
        .await
        .map_err(|e| sql_error("listing tables", e))?;
    let mut checked = BTreeMap::new();
    for (schema, table) in tables {
        let name = format!("{}.{}", identifier(&schema), identifier(&table));
        let results: Vec<(String, String, String, String)> = c
            .query(format!("CHECK TABLE {name} EXTENDED"))
            .await
            .map_err(|e| sql_error(&format!("CHECK TABLE {name}"), e))?;
        if let Some(bad) = results
            .iter()
            .find(|r| (r.2 == "status" && r.3 != "OK") || r.2 == "error")
        {
            return Err(fail(format!("CHECK TABLE {name}: {} {}", bad.2, bad.3)));
        }
        let rows: Option<u64> = c
            .query_first(format!("SELECT COUNT(*) FROM {name}"))
            .await
            .map_err(|e| sql_error(&format!("counting {name}"), e))?;
        let sum: Option<(String, Option<u64>)> = c
            .query_first(format!("CHECKSUM TABLE {name} EXTENDED"))
            .await
            .map_err(|e| sql_error(&format!("CHECKSUM TABLE {name}"), e))?;
        checked.insert(
            format!("{schema}.{table}"),
            TableCheck {
                rows: rows.unwrap_or(0),
                checksum: sum.and_then(|s| s.1),
            },
        );
    }
    let _ = c.disconnect().await;
    let _ = admin.disconnect().await;
    let verification = Verification {
        verified_at: now.seconds(),
        position,
        tables: checked,
    };
    let key = format!("{prefix}/{VERIFY_KEY}");
    let recorded: Option<Verification> = match bucket.read_json_bytes(&key).await {
        Ok(text) => Some(serde_json::from_slice(&text).map_err(|e| fail(format!("{key}: {e}")))?),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(fail(e.to_string())),
    };
    match recorded {
        Some(recorded) => {
            let diff = differences(&recorded, &verification);
            if !diff.is_empty() {
                return Err(fail(format!(
                    "the restored backup differs from its verification of {}: {}",
                    crate::mariadb::binlog::timeline::show(recorded.verified_at),
                    diff.join("; ")
                )));
            }
            Ok((verification, true))
        }
        None => {
            let text = serde_json::to_vec_pretty(&verification).map_err(|e| fail(e.to_string()))?;
            bucket
                .upload(&key, &text[..])
                .await
                .map_err(|e| LocalBackupError::Backup(e.into()))?;
            Ok((verification, false))
        }
    }
}

/// A quoted SQL identifier.
fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::backup_time_text;
    use moco_adapters::local::snapshot::InstanceSnapshot;

    /// Regression: a MySQL cluster's MOCO backups and archive were listed as incomplete
    /// physical backups, and `prune` deletes incomplete backups older than a complete one.
    #[tokio::test]
    async fn moco_mysql_backups_and_archives_are_neither_listed_nor_pruned() {
        use crate::mariadb::physical::{BASE_KEY, FORMAT_VERSION, Manifest, ObjectRecord};
        let dir = tempfile::tempdir().unwrap();
        let bucket = crate::BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&Default::default())
            .unwrap();
        let prefix = "moco/ns/db";
        let (old, new) = (1_795_568_400, 1_795_572_000);
        let folder = |t: i64| format!("{prefix}/{}", backup_time_text(Timestamp(t)));
        let keys = [
            format!("{}/dump.tar", folder(old)),
            format!("{}/binlog.tar.zst", folder(old)),
            format!("{prefix}/binlog-archive/1795568401000.tar.zst"),
            format!("{prefix}/binlog-archive/progress.json"),
            format!("{prefix}/binlog/progress.json"),
            format!("{}/{BASE_KEY}", folder(new)),
        ];
        for key in &keys {
            bucket.upload(key, &b"x"[..]).await.unwrap();
        }
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            kind: "mariadb-physical".into(),
            started_at: Timestamp(new),
            finished_at: Timestamp(new + 5),
            binlog_state_before: GtidSet::new(),
            position: None,
            base: ObjectRecord {
                key: BASE_KEY.into(),
                size: 1,
                uncompressed_size: 1,
                sha256: String::new(),
            },
        };
        bucket
            .upload(
                &format!("{}/{MANIFEST_KEY}", folder(new)),
                &serde_json::to_vec(&manifest).unwrap()[..],
            )
            .await
            .unwrap();
        let listed = list(&bucket, prefix).await.unwrap();
        let prefixes: Vec<&str> = listed.iter().map(|l| l.prefix.as_str()).collect();
        assert_eq!(prefixes, [folder(new)]);
        let keep = crate::retention::Keep {
            count: Some(1),
            days: None,
        };
        assert!(
            crate::retention::decide(&listed, keep, Timestamp(new + 86_400))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn verifications_differ_by_table() {
        let t = |rows, checksum| TableCheck {
            rows,
            checksum: Some(checksum),
        };
        let a = Verification {
            verified_at: 1,
            position: "0-1-5".into(),
            tables: [
                ("app.t".to_owned(), t(10, 7)),
                ("app.u".to_owned(), t(1, 2)),
            ]
            .into(),
        };
        assert!(differences(&a, &a).is_empty());
        let mut b = a.clone();
        b.tables.insert("app.t".into(), t(10, 8));
        b.tables.remove("app.u");
        b.tables.insert("app.v".into(), t(0, 0));
        b.position = "0-1-6".into();
        let d = differences(&a, &b);
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(
            d[1].starts_with("app.t: 10 rows, checksum Some(8)"),
            "{d:?}"
        );
        assert_eq!(identifier("we`ird"), "`we``ird`");
    }

    #[test]
    fn folder_names_are_mocos() {
        let t = Timestamp::parse("2026-11-23T22:15:07Z").unwrap();
        assert_eq!(backup_time_text(t), "20261123-221507");
        assert_eq!(cluster_prefix("db"), "moco/local/db");
    }

    fn instance(index: u32, role: &str, lag: Option<u64>) -> InstanceSnapshot {
        InstanceSnapshot {
            index,
            role: role.into(),
            port: 0,
            pid: Some(1),
            reachable: true,
            ready: true,
            executed_gtids: String::new(),
            lag,
            errant: false,
            read_only: Some(role != "primary"),
            source: None,
            replication_error: None,
            held_down: false,
        }
    }

    #[test]
    fn the_source_is_the_replica_least_behind_else_the_primary() {
        let mut s: ClusterSnapshot = serde_json::from_value(serde_json::json!({
            "updatedAt": "", "updatedAtMs": 0, "managerPid": 1, "state": "Healthy",
            "action": "none", "currentPrimaryIndex": 0, "candidates": [],
            "endpoints": {"primary": "", "replica": ""}, "conditions": [], "flavor": "mariadb",
            "instances": [], "lastError": null
        }))
        .unwrap();
        s.instances = vec![
            instance(0, "primary", None),
            instance(1, "replica", Some(5)),
            instance(2, "replica", Some(0)),
        ];
        assert_eq!(choose_source(&s), Some(2));
        s.instances[2].errant = true;
        assert_eq!(choose_source(&s), Some(1));
        s.instances[1].replication_error = Some("1236".into());
        assert_eq!(choose_source(&s), Some(0), "no usable replica: the primary");
        s.instances[0].ready = false;
        assert_eq!(choose_source(&s), None);
    }
}
