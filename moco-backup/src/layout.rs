//! Where backups go in a bucket, the same for both families (MOCO's `backup/key.go`): every
//! object of cluster `<ns>/<name>` under `moco/<ns>/<name>/`, a folder per backup named by the
//! second it started (`YYYYMMDD-hhmmss`, UTC, also the restore Job's restore point), and a
//! new backup's folder chosen free ([`free_folder`]). [`BackupError`] is why taking, storing or
//! restoring a backup failed, whatever its family.

use moco_adapters::instance::InstanceError;
use moco_core::time::Timestamp;

use crate::bucket::{Bucket, BucketError};

/// The first key component of every backup object.
pub const KEY_ROOT: &str = "moco";

/// The prefix of every backup object of cluster `namespace/name`: `moco/<ns>/<name>/`.
pub fn cluster_prefix(namespace: &str, name: &str) -> String {
    format!("{KEY_ROOT}/{namespace}/{name}/")
}

/// A backup time as MOCO writes it in keys (a backup's folder) and in the restore Job's
/// arguments: `YYYYMMDD-hhmmss`, UTC.
pub fn backup_time_text(t: Timestamp) -> String {
    let text = t.to_string(); // 2026-11-23T22:15:00Z
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    format!(
        "{}-{}",
        &digits[..8.min(digits.len())],
        &digits[8.min(digits.len())..]
    )
}

/// Reads a [`backup_time_text`].
pub fn parse_backup_time(text: &str) -> Result<Timestamp, BadBackupTime> {
    let bad = || BadBackupTime {
        text: text.to_owned(),
    };
    let b = text.as_bytes();
    let digits_at = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 15 || b[8] != b'-' || !digits_at(0..8) || !digits_at(9..15) {
        return Err(bad());
    }
    // Go's time.Parse refuses a leap second here; so does this.
    if &text[13..15] >= "60" {
        return Err(bad());
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &text[0..4],
        &text[4..6],
        &text[6..8],
        &text[9..11],
        &text[11..13],
        &text[13..15]
    );
    Timestamp::parse(&rfc3339).map_err(|_| bad())
}

/// Not a [`backup_time_text`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid backup time {text:?}: expected YYYYMMDD-hhmmss")]
pub struct BadBackupTime {
    /// The rejected text.
    pub text: String,
}

/// How many seconds [`free_folder`] tries before it gives up.
const FOLDER_TRIES: u32 = 3;

/// The folder (`<cluster_prefix><YYYYMMDD-hhmmss>`, no trailing `/`) and start time of a
/// backup starting now. MOCO names a backup by the second it starts; a second backup in
/// the same second (a retried Job, two quick `moco local backup` runs) would write into the
/// first one's folder and replace its files, so it waits for a second whose folder is
/// empty instead.
pub async fn free_folder(
    bucket: &Bucket,
    cluster_prefix: &str,
    clock: &dyn moco_cluster::ports::Clock,
) -> Result<(Timestamp, String), BackupError> {
    let mut prefix = String::new();
    for attempt in 0..FOLDER_TRIES {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        let started_at = clock.now();
        prefix = format!("{cluster_prefix}{}", backup_time_text(started_at));
        if bucket.list(&format!("{prefix}/")).await?.is_empty() {
            return Ok((started_at, prefix));
        }
    }
    Err(BackupError::FolderTaken { prefix })
}

/// Why a backup or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The object store.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// The tools or the server.
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// Every folder name tried for a new backup already holds one.
    #[error("{prefix}: a backup already exists there and the clock did not move to a free second")]
    FolderTaken {
        /// The last folder tried.
        prefix: String,
    },
    /// The backup in the bucket is not usable (missing manifest, wrong hash, …).
    #[error("{prefix}: {message}")]
    Corrupt {
        /// The backup's prefix.
        prefix: String,
        /// What is wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::bucket::BucketSpec;

    /// Gives the times it holds, one per call, then the last one forever.
    #[derive(Debug)]
    struct Steps(Mutex<Vec<i64>>);

    impl moco_cluster::ports::Clock for Steps {
        fn now(&self) -> Timestamp {
            let mut steps = self.0.lock().unwrap();
            let t = if steps.len() > 1 {
                steps.remove(0)
            } else {
                steps[0]
            };
            Timestamp(t)
        }
    }

    /// Regression: two backups started in the same second were written into one folder, the
    /// second replacing the first's files (the backup Job's test caught it once copies got
    /// fast). The second now waits for a free second; a clock that never moves is an error
    /// naming the folder.
    #[tokio::test]
    async fn a_backup_never_takes_a_folder_that_holds_one() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&BTreeMap::new())
            .unwrap();
        let t = Timestamp::parse("2026-11-24T08:42:33Z").unwrap().0;
        let root = "moco/prod/db/";
        let (at, first) = free_folder(&bucket, root, &Steps(Mutex::new(vec![t])))
            .await
            .unwrap();
        assert_eq!((at.0, first.as_str()), (t, "moco/prod/db/20261124-084233"));
        bucket
            .upload(&format!("{first}/base.xbstream.zst"), &b"x"[..])
            .await
            .unwrap();

        let (at, second) = free_folder(&bucket, root, &Steps(Mutex::new(vec![t, t + 1])))
            .await
            .unwrap();
        assert_eq!(
            (at.0, second.as_str()),
            (t + 1, "moco/prod/db/20261124-084234")
        );

        let e = free_folder(&bucket, root, &Steps(Mutex::new(vec![t])))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, BackupError::FolderTaken { prefix } if prefix == &first),
            "{e}"
        );
    }
}
