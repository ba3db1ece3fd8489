//! Which backups to delete: MOCO never deletes one, so a bucket grows until someone cleans it
//! by hand. Retention is opt-in: keep the newest `count` complete backups, or those younger
//! than `days`, or both (a backup either rule keeps stays).
//!
//! Whatever the rules, the newest complete backup is never deleted (the cluster's last restore
//! point), nor an incomplete backup newer than it (it may be running now). Incomplete backups
//! older than it were abandoned and go. Every full backup restores on its own, so deleting an
//! older one never breaks a newer one; archived binary logs will add their own rule.

use moco_core::time::Timestamp;

use crate::local::Listed;

/// What to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// The newest this many complete backups.
    pub count: Option<u32>,
    /// Complete backups started less than this many days before now.
    pub days: Option<u32>,
}

/// The prefixes to delete from `backups` (as [`crate::local::list`] returns them, oldest
/// first) at `now`; empty when `keep` sets no rule.
pub fn to_delete(backups: &[Listed], keep: Keep, now: Timestamp) -> Vec<String> {
    if keep.count.is_none() && keep.days.is_none() {
        return Vec::new();
    }
    let complete: Vec<(usize, Timestamp)> = backups
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.manifest.as_ref().map(|m| (i, m.started_at)))
        .collect();
    let Some(&(newest, _)) = complete.last() else {
        return Vec::new();
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
        if b.manifest.is_none() && i < newest {
            delete.push(i);
        }
    }
    delete.sort_unstable();
    delete
        .into_iter()
        .map(|i| backups[i].prefix.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::physical::{Manifest, ObjectRecord};

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
        }
    }

    fn incomplete(name: &str) -> Listed {
        Listed {
            prefix: name.into(),
            manifest: None,
            problem: Some("incomplete".into()),
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
}
