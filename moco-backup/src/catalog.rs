//! What a bucket holds of one cluster's physical backups, and the restores they allow: the
//! backups under `moco/<namespace>/<name>/` ([`list`]) and the plan of a point-in-time restore
//! from them and the binlog archive ([`plan_restore_under`]). Shared by the restore Job, the
//! retention rule and `moco local`; nothing here reads a cluster.

use std::collections::BTreeMap;

use crate::bucket::{Bucket, BucketError};
use crate::layout::BackupError;
use crate::mariadb::binlog::archive::{self as binlog_archive, ArchiveError};
use crate::mariadb::binlog::events::parse_position;
use crate::mariadb::binlog::timeline::{Base, PlanError, Point, Timeline, plan};
use crate::mariadb::physical::{self, MANIFEST_KEY, Manifest as BackupManifest};

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

/// Why no restore can be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanRestoreError {
    /// Listing or reading the backups.
    #[error(transparent)]
    Backup(#[from] BackupError),
    /// Reading the archive.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// No restore reaches the point.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The complete backups record no GTID position.
    #[error(
        "{prefix}: the complete backups name no GTID position (taken by an older build), so \
         they cannot start a point-in-time restore"
    )]
    NoPosition {
        /// The cluster's prefix.
        prefix: String,
    },
    /// Nothing of the source cluster to restore.
    #[error("{0}")]
    NoSource(String),
}

/// Decides how to restore the state at `point` of the cluster whose keys start with `prefix`
/// (`moco/<ns>/<name>`, no trailing `/`; `source` names it in messages): the newest backup
/// complete before the point, then the archived binlogs up to it. Nothing is touched, so a
/// point the archive does not reach fails before anything is made.
pub async fn plan_restore_under(
    bucket: &Bucket,
    prefix: String,
    source: &str,
    point: Point,
) -> Result<PlannedRestore, PlanRestoreError> {
    let backups = list(bucket, &prefix).await.map_err(BackupError::from)?;
    let contents = binlog_archive::load(bucket, &prefix).await?;
    let timeline = Timeline::build(&contents.segments).map_err(ArchiveError::from)?;
    let bases = bases(&backups, timeline.domain);
    let plain: Vec<Base> = bases.iter().map(|(_, b)| b.clone()).collect();
    let plan = match plan(&plain, &timeline, contents.progress, point) {
        Err(PlanError::NoBackup) if backups.iter().any(|b| b.manifest.is_some()) => {
            return Err(PlanRestoreError::NoPosition { prefix });
        }
        Err(PlanError::NoBackup) => {
            return Err(PlanRestoreError::NoSource(format!(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::backup_time_text;
    use moco_core::gtid::GtidSet;
    use moco_core::time::Timestamp;

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
}
