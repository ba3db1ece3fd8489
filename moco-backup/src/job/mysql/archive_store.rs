//! The archive of a MySQL cluster in the bucket: its records read and written, and what a
//! restore reads of it ([`load`]). Apart from the rounds so that the restore, which reads the
//! archive, does not depend on the archiver.

use crate::bucket::Bucket;
use crate::job::JobError;
use crate::mysql::archive::{self as mysql_archive, Progress, RECORD_FORMAT, RoundRecord};

/// What the archive of one cluster holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArchiveContents {
    /// Its rounds, in time order.
    pub rounds: Vec<RoundRecord>,
    /// The progress mark.
    pub progress: Option<Progress>,
}

impl ArchiveContents {
    /// Up to when the archive reaches from any dump, at most: the mark or the last round.
    pub fn latest_ms(&self) -> Option<i64> {
        let last_round = self.rounds.iter().map(|r| r.read_at_ms).max();
        let mark = self.progress.as_ref().map(|p| p.read_at_ms);
        last_round.max(mark)
    }
}

/// Reads the archive of the cluster under `cluster_prefix` (MOCO's `moco/<ns>/<name>/`).
pub async fn load(bucket: &Bucket, cluster_prefix: &str) -> Result<ArchiveContents, JobError> {
    load_since(bucket, cluster_prefix, i64::MIN).await
}

/// Reads the progress mark and the rounds read at or after `since_ms`: a restore from a dump
/// needs no round read before it (those hold only what the dump holds), and a busy cluster
/// stores a round every few seconds, each a download.
pub async fn load_since(
    bucket: &Bucket,
    cluster_prefix: &str,
    since_ms: i64,
) -> Result<ArchiveContents, JobError> {
    let folder = mysql_archive::folder(cluster_prefix);
    let progress_key = mysql_archive::progress_key(cluster_prefix);
    let mut contents = ArchiveContents::default();
    for object in bucket.list(folder.trim_end_matches('/')).await? {
        if object.key == progress_key {
            contents.progress = Some(read_record(bucket, &object.key).await?);
        } else if mysql_archive::parse_round_record_key(cluster_prefix, &object.key)
            .is_some_and(|read_at| read_at >= since_ms)
        {
            contents
                .rounds
                .push(read_record(bucket, &object.key).await?);
        }
    }
    contents.rounds.sort_by_key(|r| r.read_at_ms);
    Ok(contents)
}

/// A record of [`RECORD_FORMAT`].
pub(super) async fn read_record<T: serde::de::DeserializeOwned + HasFormat>(
    bucket: &Bucket,
    key: &str,
) -> Result<T, JobError> {
    let text = bucket.read_json_bytes(key).await?;
    let record: T =
        serde_json::from_slice(&text).map_err(|e| JobError::input(key, e.to_string()))?;
    if record.format() != RECORD_FORMAT {
        return Err(JobError::input(
            key,
            format!(
                "format {}; this build reads format {RECORD_FORMAT}",
                record.format()
            ),
        ));
    }
    Ok(record)
}

pub(super) trait HasFormat {
    fn format(&self) -> u32;
}

impl HasFormat for RoundRecord {
    fn format(&self) -> u32 {
        self.format
    }
}

impl HasFormat for Progress {
    fn format(&self) -> u32 {
        self.format
    }
}

pub(super) async fn write_record<T: serde::Serialize>(
    bucket: &Bucket,
    key: &str,
    record: &T,
) -> Result<(), JobError> {
    let text =
        serde_json::to_vec_pretty(record).map_err(|e| JobError::input(key, e.to_string()))?;
    bucket.upload(key, &text[..]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use moco_core::gtid::GtidSet;

    #[tokio::test]
    async fn a_restore_reads_only_the_rounds_from_its_dump_on() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = crate::BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&Default::default())
            .unwrap();
        let prefix = "moco/ns/db/";
        let round = |read_at_ms: i64| RoundRecord {
            format: RECORD_FORMAT,
            read_at_ms,
            instance: 0,
            server_uuid: String::new(),
            excluded: GtidSet::new(),
            covers: GtidSet::new(),
            files: Vec::new(),
            bytes: 0,
        };
        for ms in [1_000, 5_000, 9_000] {
            let key = mysql_archive::round_record_key(prefix, ms);
            write_record(&bucket, &key, &round(ms)).await.unwrap();
        }
        // An object that is not a record is not read.
        bucket
            .upload(&format!("{prefix}binlog-archive/1000.tar.zst"), &b"x"[..])
            .await
            .unwrap();
        let times = |c: &ArchiveContents| c.rounds.iter().map(|r| r.read_at_ms).collect::<Vec<_>>();
        assert_eq!(
            times(&load(&bucket, prefix).await.unwrap()),
            [1_000, 5_000, 9_000]
        );
        let since = load_since(&bucket, prefix, 5_000).await.unwrap();
        assert_eq!(times(&since), [5_000, 9_000]);
        assert_eq!(since.progress, None);
    }
}
