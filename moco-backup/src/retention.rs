//! Which backups to delete: MOCO never deletes one, so a bucket grows until someone cleans it
//! by hand. Retention is opt-in: keep the newest `count` complete backups, or those younger
//! than `days`, or both (a backup either rule keeps stays).
//!
//! Whatever the rules, the newest complete backup is never deleted (the cluster's last restore
//! point), nor an incomplete backup newer than it (it may be running now). Incomplete backups
//! (no manifest) older than it were abandoned and go. A backup whose manifest is there but
//! cannot be read now is neither: it stops the prune, and nothing is deleted. Every full backup restores on its own, so deleting an
//! older one never breaks a newer one; archived binary logs will add their own rule.

use moco_core::time::Timestamp;

use crate::catalog::Listed;

/// What to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// The newest this many complete backups.
    pub count: Option<u32>,
    /// Complete backups started less than this many days before now.
    pub days: Option<u32>,
}

/// Why a prune deletes nothing: backups whose `manifest.json` is there but could not be
/// read (a manifest of a newer release, another format, damage, a read that failed). Such a
/// backup may be complete and the newest; only a folder without a manifest is incomplete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "nothing deleted: {} backup(s) hold a manifest this build cannot read now: {}; \
     read them with `backup list`, repair or remove them by hand, then prune again",
    .folders.len(),
    .folders.iter().map(|(prefix, why)| format!("{prefix} ({why})")).collect::<Vec<_>>().join("; ")
)]
pub struct UnreadableManifests {
    /// Each backup's prefix and why its manifest could not be read.
    pub folders: Vec<(String, String)>,
}

/// The prefixes to delete from `backups` (as [`crate::catalog::list`] returns them, oldest
/// first) at `now`; empty when `keep` sets no rule. Any backup whose manifest is there but
/// unreadable stops the prune: the error names each.
pub fn decide(
    backups: &[Listed],
    keep: Keep,
    now: Timestamp,
) -> Result<Vec<String>, UnreadableManifests> {
    let unreadable: Vec<(String, String)> = backups
        .iter()
        .filter(|b| b.has_manifest && b.manifest.is_none())
        .map(|b| {
            let why = b.problem.as_deref().unwrap_or("unknown");
            // The reading error names the folder already.
            let why = why
                .strip_prefix(b.prefix.as_str())
                .and_then(|w| w.strip_prefix(": "))
                .unwrap_or(why);
            (b.prefix.clone(), why.to_owned())
        })
        .collect();
    if !unreadable.is_empty() {
        return Err(UnreadableManifests {
            folders: unreadable,
        });
    }
    if keep.count.is_none() && keep.days.is_none() {
        return Ok(Vec::new());
    }
    let complete: Vec<(usize, Timestamp)> = backups
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.manifest.as_ref().map(|m| (i, m.started_at)))
        .collect();
    let Some(&(newest, _)) = complete.last() else {
        return Ok(Vec::new());
    };
    let kept_by_count = |rank_from_newest: usize| {
        keep.count
            .is_some_and(|n| rank_from_newest < usize::try_from(n).unwrap_or(usize::MAX))
    };
    let kept_by_age = |started: Timestamp| {
        keep.days
            .is_some_and(|d| now.0 - started.0 < i64::from(d) * 86_400)
    };
    let mut delete = Vec::new();
    for (rank, &(i, started)) in complete.iter().rev().enumerate() {
        if i != newest && !kept_by_count(rank) && !kept_by_age(started) {
            delete.push(i);
        }
    }
    for (i, b) in backups.iter().enumerate() {
        if !b.has_manifest && i < newest {
            delete.push(i);
        }
    }
    delete.sort_unstable();
    Ok(delete
        .into_iter()
        .map(|i| backups[i].prefix.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the rule deletes when every manifest can be read.
    fn to_delete(backups: &[Listed], keep: Keep, now: Timestamp) -> Vec<String> {
        decide(backups, keep, now).unwrap()
    }
    use crate::mariadb::physical::{Manifest, ObjectRecord};

    fn complete(name: &str, day: i64) -> Listed {
        Listed {
            prefix: name.into(),
            manifest: Some(Manifest {
                format_version: 1,
                kind: "mariadb-physical".into(),
                started_at: Timestamp(day * 86_400),
                finished_at: Timestamp(day * 86_400 + 60),
                binlog_state_before: Default::default(),
                position: None,
                base: ObjectRecord {
                    key: "base.xbstream.zst".into(),
                    size: 1,
                    uncompressed_size: 1,
                    sha256: String::new(),
                },
            }),
            problem: None,
            has_manifest: true,
        }
    }

    fn incomplete(name: &str) -> Listed {
        Listed {
            prefix: name.into(),
            manifest: None,
            problem: Some("incomplete".into()),
            has_manifest: false,
        }
    }

    const NOW: Timestamp = Timestamp(10 * 86_400);

    #[test]
    fn by_count_by_age_and_both() {
        let b = [
            complete("d1", 1),
            incomplete("d2"),
            complete("d3", 3),
            complete("d8", 8),
            complete("d9", 9),
            incomplete("d10"),
        ];
        let count = |n| Keep {
            count: Some(n),
            days: None,
        };
        assert_eq!(to_delete(&b, count(2), NOW), ["d1", "d2", "d3"]);
        assert_eq!(to_delete(&b, count(3), NOW), ["d1", "d2"]);
        // Zero still keeps the newest complete backup, and the one that may be running.
        assert_eq!(to_delete(&b, count(0), NOW), ["d1", "d2", "d3", "d8"]);
        let days = |d| Keep {
            count: None,
            days: Some(d),
        };
        // Younger than 5 days at day 10: d8 and d9.
        assert_eq!(to_delete(&b, days(5), NOW), ["d1", "d2", "d3"]);
        assert_eq!(to_delete(&b, days(8), NOW), ["d1", "d2"]);
        // Either rule keeps.
        let both = Keep {
            count: Some(1),
            days: Some(8),
        };
        assert_eq!(to_delete(&b, both, NOW), ["d1", "d2"]);
        assert_eq!(to_delete(&b, Keep::default(), NOW), Vec::<String>::new());
        // Only incomplete backups: nothing is a restore point, nothing goes.
        assert!(to_delete(&[incomplete("a"), incomplete("b")], count(0), NOW).is_empty());
    }

    /// Regression (issue 29, item 2): a folder whose `manifest.json` is there but cannot be
    /// read now (a manifest of a newer release with a field this one does not know, another
    /// format version, a failed read) was taken for an abandoned incomplete backup and deleted
    /// whatever `--keep` said. Only a folder without a manifest is incomplete; an unreadable
    /// one stops the prune, which deletes nothing and names the folder and the reason.
    #[tokio::test]
    async fn a_backup_whose_manifest_cannot_be_read_stops_the_prune() {
        use crate::mariadb::physical::{BASE_KEY, MANIFEST_KEY};
        let dir = tempfile::tempdir().unwrap();
        let bucket = crate::BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&Default::default())
            .unwrap();
        let prefix = "moco/local/db";
        let manifest = |day: i64| complete("", day).manifest.unwrap();
        let put = |folder: &'static str, text: Vec<u8>| {
            let bucket = bucket.clone();
            async move {
                for (key, body) in [(BASE_KEY, b"x".to_vec()), (MANIFEST_KEY, text)] {
                    bucket
                        .upload(&format!("{prefix}/{folder}/{key}"), &body[..])
                        .await
                        .unwrap();
                }
            }
        };
        put("20261101-000000", serde_json::to_vec(&manifest(1)).unwrap()).await;
        let mut newer = serde_json::to_value(manifest(2)).unwrap();
        newer["encryption"] = serde_json::json!("aes-256");
        put("20261102-000000", serde_json::to_vec(&newer).unwrap()).await;
        let mut other_format = manifest(3);
        other_format.format_version = 2;
        put(
            "20261103-000000",
            serde_json::to_vec(&other_format).unwrap(),
        )
        .await;
        put("20261109-000000", serde_json::to_vec(&manifest(9)).unwrap()).await;
        // No manifest: incomplete, and older than a complete backup: abandoned.
        bucket
            .upload(&format!("{prefix}/20261104-000000/{BASE_KEY}"), &b"x"[..])
            .await
            .unwrap();

        let listed = crate::catalog::list(&bucket, prefix).await.unwrap();
        let keep = Keep {
            count: Some(1),
            days: None,
        };
        let e = decide(&listed, keep, NOW).unwrap_err();
        let text = e.to_string();
        for folder in ["20261102-000000", "20261103-000000"] {
            assert!(text.contains(&format!("{prefix}/{folder}")), "{text}");
        }
        assert!(text.contains("encryption"), "{text}");
        assert!(text.contains("format 2"), "{text}");
        assert!(!text.contains("20261104-000000"), "{text}");

        // Without them, the rule deletes the older complete and the abandoned backup.
        let readable: Vec<Listed> = listed
            .into_iter()
            .filter(|b| b.manifest.is_some() || !b.has_manifest)
            .collect();
        assert_eq!(
            decide(&readable, keep, NOW).unwrap(),
            [
                format!("{prefix}/20261101-000000"),
                format!("{prefix}/20261104-000000")
            ]
        );
    }
}
