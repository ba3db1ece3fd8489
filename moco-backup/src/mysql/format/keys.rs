//! The keys of MOCO's MySQL backups (`backup/key.go`) and the restore's choice among them: a
//! folder's `dump.tar` and the `binlog.tar.zst` the next backup stored beside it, listed
//! ([`list_dumps`]) and planned from ([`plan_restore`]). The folders themselves are
//! [`crate::layout`]'s, the same for both families.

use std::collections::{BTreeMap, BTreeSet};

use moco_core::time::Timestamp;

use crate::layout::{backup_time_text, cluster_prefix, parse_backup_time};

/// The name of the dump tarball in a backup folder.
pub const DUMP_FILE: &str = "dump.tar";
/// The name of the binlog tarball in a backup folder.
pub const BINLOG_FILE: &str = "binlog.tar.zst";

/// What kind of backup object a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// `dump.tar`.
    Dump,
    /// `binlog.tar.zst`.
    Binlog,
}

/// What to download and apply to reach a restore point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestorePlan {
    /// The dump to load: the newest at or before the point.
    pub dump_key: String,
    /// When that dump was taken.
    pub dump_time: Timestamp,
    /// The binlog tarballs to replay, in order, up to [`RestorePlan::stop_at`]. Empty when the
    /// point is the dump's own time. With MOCO's layout one tarball always suffices: the one in
    /// the dump's folder reaches the next backup, and the point is before it.
    pub binlog_keys: Vec<String>,
    /// `--stop-datetime` of the replay: the restore point (transactions committed in that
    /// second or later are left out, as `mysqlbinlog` does). `None` when nothing is replayed.
    pub stop_at: Option<Timestamp>,
}

/// A restore point the stored backups cannot reach.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestorePointError {
    /// There is no dump at all under the prefix.
    #[error("no backup under {prefix}")]
    NoBackup {
        /// The cluster's key prefix.
        prefix: String,
    },
    /// The point is before the first dump.
    #[error(
        "restore point {point} is before the first backup; the earliest restorable time is {earliest}"
    )]
    BeforeFirstBackup {
        /// The requested point.
        point: Timestamp,
        /// The oldest dump's time.
        earliest: Timestamp,
    },
    /// The binlogs from the dump before the point to the next backup are not stored (that
    /// backup skipped or failed them): only the dump's own time is reachable.
    #[error(
        "restore point {point} needs the binlogs after the backup of {dump_time}, which the backup of {next_backup} did not store; the latest restorable time at or before it is {dump_time}"
    )]
    BinlogMissing {
        /// The requested point.
        point: Timestamp,
        /// The newest dump at or before it.
        dump_time: Timestamp,
        /// The backup that should have stored them.
        next_backup: Timestamp,
    },
    /// The point is after the newest backup, whose binlogs only the next backup will store.
    #[error(
        "restore point {point} is after the newest backup ({latest}), and its binlogs are stored only by the next backup; the latest restorable time is {latest}"
    )]
    AfterLatestBackup {
        /// The requested point.
        point: Timestamp,
        /// The newest dump's time.
        latest: Timestamp,
    },
}

/// The key of the dump of the backup started at `started`.
pub fn dump_key(namespace: &str, name: &str, started: Timestamp) -> String {
    object_key(namespace, name, started, ObjectKind::Dump)
}

/// The key of the binlog tarball a backup uploads: in the folder of the **previous** backup
/// (`previous_started`), whose dump these binlogs continue.
pub fn binlog_key(namespace: &str, name: &str, previous_started: Timestamp) -> String {
    object_key(namespace, name, previous_started, ObjectKind::Binlog)
}

fn object_key(namespace: &str, name: &str, t: Timestamp, kind: ObjectKind) -> String {
    let file = match kind {
        ObjectKind::Dump => DUMP_FILE,
        ObjectKind::Binlog => BINLOG_FILE,
    };
    format!(
        "{}{}/{file}",
        cluster_prefix(namespace, name),
        backup_time_text(t)
    )
}

/// What `key` is under `prefix` ([`cluster_prefix`]): its folder's time and kind, or `None`
/// for anything else (other files, other depths, unreadable folder names), which a restore
/// skips as MOCO does.
pub fn parse_key(prefix: &str, key: &str) -> Option<(Timestamp, ObjectKind)> {
    let (folder, file) = key.strip_prefix(prefix)?.split_once('/')?;
    let kind = match file {
        DUMP_FILE => ObjectKind::Dump,
        BINLOG_FILE => ObjectKind::Binlog,
        _ => return None,
    };
    Some((parse_backup_time(folder).ok()?, kind))
}

/// One of MOCO's MySQL backups, as `moco local backup list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpListed {
    /// Its time (its folder).
    pub time: Timestamp,
    /// `dump.tar`'s size.
    pub dump_size: u64,
    /// `binlog.tar.zst`'s size, when the next backup stored it.
    pub binlog_size: Option<u64>,
    /// The next backup's time; `None` for the newest.
    pub next: Option<Timestamp>,
}

/// MOCO's backups under `prefix` ([`cluster_prefix`]) among `objects` (key and size, any
/// order), oldest first. A folder with binlogs and no dump is not a backup and is left out.
pub fn list_dumps(prefix: &str, objects: &[(String, u64)]) -> Vec<DumpListed> {
    let mut dumps: BTreeMap<Timestamp, u64> = BTreeMap::new();
    let mut binlogs: BTreeMap<Timestamp, u64> = BTreeMap::new();
    for (key, size) in objects {
        match parse_key(prefix, key) {
            Some((t, ObjectKind::Dump)) => {
                dumps.insert(t, *size);
            }
            Some((t, ObjectKind::Binlog)) => {
                binlogs.insert(t, *size);
            }
            None => {}
        }
    }
    let times: Vec<Timestamp> = dumps.keys().copied().collect();
    times
        .iter()
        .enumerate()
        .map(|(i, &time)| DumpListed {
            time,
            dump_size: dumps[&time],
            binlog_size: binlogs.get(&time).copied(),
            next: times.get(i + 1).copied(),
        })
        .collect()
}

/// What to restore to reach `point` from the objects listed under cluster
/// `namespace/name` (`keys`, in any order): the newest dump at or before the point, and, unless
/// the point is that dump's own time, the binlog tarball in the same folder, which reaches the
/// next backup.
///
/// This is what MOCO's `FindNearestDump` means to do; before 0.17.0 (PR #565) it could come
/// out with no binlog tarball for the dump it chose, so restores silently stopped at the dump
/// (#563). Where MOCO still loads the dump alone (the tarball was never stored, or the point is
/// past the newest backup), this refuses with the latest time that can be reached instead of
/// restoring to another time than asked.
pub fn plan_restore(
    namespace: &str,
    name: &str,
    keys: &[String],
    point: Timestamp,
) -> Result<RestorePlan, RestorePointError> {
    let prefix = cluster_prefix(namespace, name);
    let mut dumps = BTreeSet::new();
    let mut binlogs = BTreeSet::new();
    for key in keys {
        match parse_key(&prefix, key) {
            Some((t, ObjectKind::Dump)) => {
                dumps.insert(t);
            }
            Some((t, ObjectKind::Binlog)) => {
                binlogs.insert(t);
            }
            None => {}
        }
    }
    let Some(&earliest) = dumps.first() else {
        return Err(RestorePointError::NoBackup { prefix });
    };
    let Some(&dump_time) = dumps.range(..=point).next_back() else {
        return Err(RestorePointError::BeforeFirstBackup { point, earliest });
    };
    let dump_key = dump_key(namespace, name, dump_time);
    if dump_time == point {
        return Ok(RestorePlan {
            dump_key,
            dump_time,
            binlog_keys: Vec::new(),
            stop_at: None,
        });
    }
    if binlogs.contains(&dump_time) {
        return Ok(RestorePlan {
            dump_key,
            dump_time,
            binlog_keys: vec![binlog_key(namespace, name, dump_time)],
            stop_at: Some(point),
        });
    }
    match dumps.range(point..).next() {
        Some(&next_backup) => Err(RestorePointError::BinlogMissing {
            point,
            dump_time,
            next_backup,
        }),
        None => Err(RestorePointError::AfterLatestBackup {
            point,
            latest: dump_time,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::t;
    use super::*;

    #[test]
    fn list_dumps_pairs_each_dump_with_its_binlogs_and_the_next_backup() {
        let prefix = "moco/ns/db/";
        let objects = vec![
            ("moco/ns/db/20250102-000000/dump.tar".to_owned(), 300),
            ("moco/ns/db/20250101-000000/binlog.tar.zst".to_owned(), 20),
            ("moco/ns/db/20250101-000000/dump.tar".to_owned(), 100),
            ("moco/ns/db/20250103-000000/dump.tar".to_owned(), 400),
            // Binlogs without a dump, an archive, another cluster: none is a backup.
            ("moco/ns/db/20241231-000000/binlog.tar.zst".to_owned(), 5),
            (
                "moco/ns/db/binlog-archive/0001700000000000.json".to_owned(),
                1,
            ),
            ("moco/ns/dbx/20250101-000000/dump.tar".to_owned(), 7),
        ];
        let listed = list_dumps(prefix, &objects);
        assert_eq!(
            listed,
            vec![
                DumpListed {
                    time: t("2025-01-01T00:00:00Z"),
                    dump_size: 100,
                    binlog_size: Some(20),
                    next: Some(t("2025-01-02T00:00:00Z")),
                },
                DumpListed {
                    time: t("2025-01-02T00:00:00Z"),
                    dump_size: 300,
                    binlog_size: None,
                    next: Some(t("2025-01-03T00:00:00Z")),
                },
                DumpListed {
                    time: t("2025-01-03T00:00:00Z"),
                    dump_size: 400,
                    binlog_size: None,
                    next: None,
                },
            ]
        );
    }

    #[test]
    fn keys_are_mocos() {
        let t1 = t("2021-05-15T23:00:03Z");
        assert_eq!(cluster_prefix("foo", "bar"), "moco/foo/bar/");
        assert_eq!(
            dump_key("foo", "bar", t1),
            "moco/foo/bar/20210515-230003/dump.tar"
        );
        assert_eq!(
            binlog_key("foo", "bar", t1),
            "moco/foo/bar/20210515-230003/binlog.tar.zst"
        );
        assert_eq!(backup_time_text(t1), "20210515-230003");
        assert_eq!(parse_backup_time("20210515-230003").unwrap(), t1);
        assert_eq!(
            parse_key(
                "moco/foo/bar/",
                "moco/foo/bar/20210515-230003/binlog.tar.zst"
            ),
            Some((t1, ObjectKind::Binlog))
        );
        for bad in [
            "20210515-2300",
            "20211315-230003",
            "20210515-230060",
            "2021051-5230003",
            "20210515x230003",
        ] {
            assert!(parse_backup_time(bad).is_err(), "{bad}");
        }
        for garbage in [
            "moco/foo/bar/20210515-230003/dump.tar.tmp",
            "moco/foo/bar/20210515-230003/x/dump.tar",
            "moco/foo/bar/latest/dump.tar",
            "moco/foo/bar2/20210515-230003/dump.tar",
            "moco/foo/bar/20210515-230003/old-dump.tar",
        ] {
            assert_eq!(parse_key("moco/foo/bar/", garbage), None, "{garbage}");
        }
    }

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(|k| format!("moco/ns/db/{k}")).collect()
    }

    fn plan(keys: &[String], point: &str) -> Result<RestorePlan, RestorePointError> {
        plan_restore("ns", "db", keys, t(point))
    }

    /// #563 as reported: backups at 09-02 03:03 and 09-03 03:03 (whose binlogs went to the
    /// 09-02 folder), restore to 09-03 00:00. MOCO before 0.17.0 loaded the 09-02 dump and
    /// applied no binlog. Then again with a later backup, so that a newer tarball exists (the
    /// one the maintainers said MOCO could pick instead).
    #[test]
    fn issue_563_replays_the_binlogs_of_the_dumps_folder() {
        let expected = RestorePlan {
            dump_key: "moco/ns/db/20230902-030300/dump.tar".into(),
            dump_time: t("2023-09-02T03:03:00Z"),
            binlog_keys: vec!["moco/ns/db/20230902-030300/binlog.tar.zst".into()],
            stop_at: Some(t("2023-09-03T00:00:00Z")),
        };
        let mut stored = keys(&[
            "20230903-030300/dump.tar",
            "20230902-030300/dump.tar",
            "20230902-030300/binlog.tar.zst",
        ]);
        assert_eq!(plan(&stored, "2023-09-03T00:00:00Z"), Ok(expected.clone()));
        stored.extend(keys(&[
            "20230904-030300/dump.tar",
            "20230903-030300/binlog.tar.zst",
        ]));
        assert_eq!(plan(&stored, "2023-09-03T00:00:00Z"), Ok(expected));
    }

    #[test]
    fn restore_choice_table() {
        let stored = keys(&[
            "20240101-000000/dump.tar",
            "20240101-000000/binlog.tar.zst",
            "20240102-000000/dump.tar",
            "20240102-000000/binlog.tar.zst",
            "20240103-000000/dump.tar",
            "20240102-000000/notes.txt",
            "garbage",
        ]);
        let b1 = "moco/ns/db/20240101-000000/";
        let b2 = "moco/ns/db/20240102-000000/";
        let b3 = "moco/ns/db/20240103-000000/";
        type Expect<'a> = Result<(String, Vec<String>, Option<&'a str>), RestorePointError>;
        let ok = |folder: &str, binlog: bool, stop: Option<&'static str>| -> Expect<'static> {
            let binlogs = if binlog {
                vec![format!("{folder}binlog.tar.zst")]
            } else {
                vec![]
            };
            Ok((format!("{folder}dump.tar"), binlogs, stop))
        };
        let cases: Vec<(&str, Expect)> = vec![
            // Exactly on a backup: that dump alone.
            ("2024-01-01T00:00:00Z", ok(b1, false, None)),
            ("2024-01-02T00:00:00Z", ok(b2, false, None)),
            ("2024-01-03T00:00:00Z", ok(b3, false, None)),
            // Between backups: the dump before plus its folder's binlogs.
            (
                "2024-01-01T00:00:01Z",
                ok(b1, true, Some("2024-01-01T00:00:01Z")),
            ),
            (
                "2024-01-01T23:59:59Z",
                ok(b1, true, Some("2024-01-01T23:59:59Z")),
            ),
            (
                "2024-01-02T12:00:00Z",
                ok(b2, true, Some("2024-01-02T12:00:00Z")),
            ),
            // Before the first backup: the earliest restorable time is named.
            (
                "2023-12-31T23:59:59Z",
                Err(RestorePointError::BeforeFirstBackup {
                    point: t("2023-12-31T23:59:59Z"),
                    earliest: t("2024-01-01T00:00:00Z"),
                }),
            ),
            // After the newest backup: its binlogs are not stored yet.
            (
                "2024-01-03T00:00:01Z",
                Err(RestorePointError::AfterLatestBackup {
                    point: t("2024-01-03T00:00:01Z"),
                    latest: t("2024-01-03T00:00:00Z"),
                }),
            ),
        ];
        for (point, expected) in cases {
            let got = plan(&stored, point)
                .map(|p| (p.dump_key, p.binlog_keys, p.stop_at.map(|s| s.to_string())));
            let expected = expected.map(|(d, b, s)| (d, b, s.map(String::from)));
            assert_eq!(got, expected, "{point}");
        }
    }

    #[test]
    fn a_backup_that_skipped_its_binlogs_leaves_a_gap() {
        // The 01-02 backup could not fetch binlogs (#603's warning): nothing reaches between.
        let stored = keys(&["20240101-000000/dump.tar", "20240102-000000/dump.tar"]);
        let err = plan(&stored, "2024-01-01T12:00:00Z").unwrap_err();
        assert_eq!(
            err,
            RestorePointError::BinlogMissing {
                point: t("2024-01-01T12:00:00Z"),
                dump_time: t("2024-01-01T00:00:00Z"),
                next_backup: t("2024-01-02T00:00:00Z"),
            }
        );
        assert!(
            err.to_string()
                .ends_with("the latest restorable time at or before it is 2024-01-01T00:00:00Z"),
            "{err}"
        );
    }

    #[test]
    fn no_backup_and_before_first_errors_say_what_exists() {
        assert_eq!(
            plan(
                &keys(&["20240101-000000/binlog.tar.zst"]),
                "2024-02-01T00:00:00Z"
            ),
            Err(RestorePointError::NoBackup {
                prefix: "moco/ns/db/".into()
            })
        );
        let err = plan(&keys(&["20240101-000000/dump.tar"]), "2023-01-01T00:00:00Z").unwrap_err();
        assert_eq!(
            err.to_string(),
            "restore point 2023-01-01T00:00:00Z is before the first backup; the earliest restorable time is 2024-01-01T00:00:00Z"
        );
    }

    #[test]
    fn a_backups_own_keys_restore() {
        // What this module writes for two backups is what it restores from.
        let (t1, t2) = (t("2024-03-01T01:02:03Z"), t("2024-03-02T01:02:03Z"));
        let stored = vec![
            dump_key("ns", "db", t1),
            dump_key("ns", "db", t2),
            binlog_key("ns", "db", t1),
        ];
        let p = plan_restore("ns", "db", &stored, t("2024-03-01T20:00:00Z")).unwrap();
        assert_eq!(p.dump_key, stored[0]);
        assert_eq!(p.binlog_keys, vec![stored[2].clone()]);
    }
}
