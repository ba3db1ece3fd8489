//! Binlog archiving for MySQL clusters, beside MOCO's format: every few seconds, the
//! transactions the primary executed that the archive lacks are fetched with `mysqlbinlog`
//! and stored, so a restore reaches seconds ago instead of the last backup. It is pure: the
//! keys, the records, the round's decision and the restore's choice of rounds. The runner is
//! `job::mysql::archive`.
//!
//! **A round.** The archiver reads, in one statement, the primary's `@@gtid_executed`,
//! `@@gtid_purged` and its clock. When the executed set holds a transaction the archive lacks,
//! it fetches from the primary as a replica would (`BINLOG-DUMP-GTIDS`) with
//! `--exclude-gtids` set to what the archive already holds (the newest dump's set too, on the
//! first round and when the primary purged what the archive lacks: [`plan_round`]). The
//! server sends only the rest, in its binlog order, and fails when it purged a file the fetch
//! needs. The round's `tar | zstd` is stored, then
//! its [`RoundRecord`], then [`Progress`]. A round without new transactions stores only
//! [`Progress`]: idle clusters cost one small object write per round.
//!
//! **What a round vouches for.** The set read *before* the fetch ([`RoundRecord::covers`]):
//! every transaction committed by then is in the files (the fetch reads to the end of the
//! binlog after that read). The files may hold later transactions too; a restore applies only
//! vouched-for ones (`--include-gtids`), so a transaction that the primary wrote to its binlog
//! but had not committed (semi-synchronous: not acknowledged) when it failed is never restored.
//! The next round vouches for those the new primary has.
//!
//! **Why this shape, not MariaDB's timeline** ([`crate::mariadb::binlog`]): MySQL's GTIDs name their
//! origin server and a server skips a transaction it already executed, so rounds may overlap
//! and are replayed in the order they were read; a failover needs no branch logic, only the
//! set algebra. It needs no binlog decoding here (MySQL's events are not parsed by this
//! project, which cannot run MySQL to test a parser against).
//!
//! Keys under the cluster's prefix (`moco/<ns>/<name>/`), beside MOCO's backup folders:
//!
//! | key | what |
//! |---|---|
//! | `binlog-archive/<ms>.tar.zst` | one round's fetched files, `tar \| zstd` as MOCO's `binlog.tar.zst` |
//! | `binlog-archive/<ms>.json` | its [`RoundRecord`], written after it |
//! | `binlog-archive/progress.json` | [`Progress`], replaced each round |
//!
//! `<ms>` is the round's read time in milliseconds since the epoch, 13 digits, so key order is
//! time order.

use moco_core::gtid::GtidSet;
use moco_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::mysql::format;
use crate::mysql::format::command_line::{CommandLine, Endpoint, Pipeline};
use crate::mysql::format::restore::RestoreFilter;

/// The folder of the archive under a cluster's prefix.
pub const ARCHIVE_FOLDER: &str = "binlog-archive";
/// The progress mark in the archive's folder.
pub const PROGRESS_NAME: &str = "progress.json";
/// The version of [`RoundRecord`] and [`Progress`] this build writes and reads.
pub const RECORD_FORMAT: u32 = 1;
/// The work directory's subdirectory a round's fetch uses (apart from a backup's).
pub const ROUND_WORK: &str = "archive";

/// What one round fetched and stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundRecord {
    /// [`RECORD_FORMAT`].
    pub format: u32,
    /// The primary's clock when `covers` was read, in milliseconds since the epoch.
    pub read_at_ms: i64,
    /// The instance it was fetched from.
    pub instance: u32,
    /// That instance's `server_uuid`.
    pub server_uuid: String,
    /// `--exclude-gtids` of the fetch: what the archive held before (and the newest dump, on
    /// a round that started from it).
    pub excluded: GtidSet,
    /// `@@gtid_executed` read before the fetch: every one of these is in the archive now.
    pub covers: GtidSet,
    /// The fetched files' names, in order.
    pub files: Vec<String>,
    /// The stored object's size.
    pub bytes: u64,
}

/// Up to when the archive is complete, replaced every round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// [`RECORD_FORMAT`].
    pub format: u32,
    /// The primary's clock at the last good round, in milliseconds since the epoch.
    pub read_at_ms: i64,
    /// Everything the archive holds (with the dump it started from), as of then.
    pub covered: GtidSet,
}

/// What a round does, decided from what the archive holds and what the primary executed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoundPlan {
    /// Nothing new: only the progress mark moves.
    Idle(Progress),
    /// Fetch everything but `exclude`.
    Fetch {
        /// What the archive holds (and the newest dump, when the round starts from it).
        exclude: GtidSet,
    },
}

/// The archive's rounds that take a dump to a point, and which transactions to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveReplay {
    /// The rounds' object keys (`.tar.zst`), in order.
    pub keys: Vec<String>,
    /// `--include-gtids`: what the rounds vouch for, minus the dump's.
    pub include: GtidSet,
}

/// Why the archive cannot take a dump to a point.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveReachError {
    /// No round after the dump, or the archive stops before the point.
    #[error("the binlog archive reaches {} from this backup, not {}", show_ms(*.reachable_ms), show_s(*.point))]
    NotYet {
        /// The point asked for, seconds since the epoch.
        point: i64,
        /// Up to when it reaches, milliseconds since the epoch.
        reachable_ms: i64,
    },
    /// A round needs transactions that neither the dump nor earlier rounds hold.
    #[error(
        "the binlog archive has a gap after {}: the round of {} lacks {missing} (the archiver could not fetch them; a backup taken after the gap restores from there)",
        show_ms(*.reachable_ms),
        show_ms(*.round_ms)
    )]
    Gap {
        /// Up to when it reaches, milliseconds since the epoch.
        reachable_ms: i64,
        /// The round that cannot follow.
        round_ms: i64,
        /// What neither holds.
        missing: GtidSet,
    },
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

/// The archive's folder under `cluster_prefix` (which ends in `/`).
pub fn folder(cluster_prefix: &str) -> String {
    format!("{cluster_prefix}{ARCHIVE_FOLDER}/")
}

/// The progress mark's key.
pub fn progress_key(cluster_prefix: &str) -> String {
    format!("{}{PROGRESS_NAME}", folder(cluster_prefix))
}

/// A round's object key.
pub fn round_object_key(cluster_prefix: &str, read_at_ms: i64) -> String {
    format!("{}{read_at_ms:013}.tar.zst", folder(cluster_prefix))
}

/// A round's record key.
pub fn round_record_key(cluster_prefix: &str, read_at_ms: i64) -> String {
    format!("{}{read_at_ms:013}.json", folder(cluster_prefix))
}

/// The read time of a round record's key, `None` for any other key.
pub fn parse_round_record_key(cluster_prefix: &str, key: &str) -> Option<i64> {
    let name = key.strip_prefix(&folder(cluster_prefix))?;
    let digits = name.strip_suffix(".json")?;
    (digits.len() == 13 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

// ---------------------------------------------------------------------------------------------
// Rounds
// ---------------------------------------------------------------------------------------------

/// What a round does: `progress` is the stored mark (`None` before the first round),
/// `newest_dump` the newest backup's `gtidSet` (what a restore loads anyway), `executed`,
/// `purged` and `read_at_ms` the primary's `@@gtid_executed`, `@@gtid_purged` and clock.
///
/// The first round starts from the newest backup. Later rounds continue the archive's own
/// history, so that every backup before them stays restorable through it; only when the
/// primary purged binlogs holding transactions the archive lacks (the archiver was down too
/// long) does a round start again from the newest backup. Restores from older backups then
/// stop at that gap, and [`plan_replay`] names it.
pub fn plan_round(
    progress: Option<&Progress>,
    newest_dump: &GtidSet,
    executed: &GtidSet,
    purged: &GtidSet,
    read_at_ms: i64,
) -> RoundPlan {
    let held = progress.map_or_else(|| newest_dump.clone(), |p| p.covered.clone());
    let exclude = if purged.is_subset(&held) {
        held
    } else {
        held.union(newest_dump)
    };
    if executed.is_subset(&exclude) {
        RoundPlan::Idle(Progress {
            format: RECORD_FORMAT,
            read_at_ms: progress.map_or(read_at_ms, |p| p.read_at_ms.max(read_at_ms)),
            covered: exclude,
        })
    } else {
        RoundPlan::Fetch { exclude }
    }
}

/// The mark after a round that fetched and stored `record`.
pub fn progress_after(record: &RoundRecord) -> Progress {
    Progress {
        format: RECORD_FORMAT,
        read_at_ms: record.read_at_ms,
        covered: record.excluded.union(&record.covers),
    }
}

/// The fetch of a round: MOCO's binlog fetch ([`format::backup::binlog_fetch`]) into
/// `<work_dir>/binlog/`, from the primary's oldest file; the server starts at the first file
/// holding a transaction not in `exclude`.
pub fn round_fetch(
    primary: &Endpoint,
    work_dir: &str,
    exclude: &GtidSet,
    binary_logs: &[String],
) -> Result<CommandLine, format::FormatError> {
    let mut sorted = binary_logs.to_vec();
    format::sort_binlog_files(&mut sorted);
    let first = sorted
        .into_iter()
        .next()
        .ok_or(format::FormatError::NoBinaryLogs)?;
    Ok(format::backup::binlog_fetch(
        primary,
        work_dir,
        &exclude.to_string(),
        &first,
    ))
}

// ---------------------------------------------------------------------------------------------
// Restores
// ---------------------------------------------------------------------------------------------

/// Up to when the archive takes a dump whose `gtidSet` is `dump` (taken at `dump_time`,
/// seconds), through `rounds` (any order) and `progress`; milliseconds since the epoch, or the
/// gap that stops it first.
///
/// Rounds are followed in their read order. A round that adds nothing to what is held is
/// passed over; one that adds must find everything it excluded held already (by the dump or
/// earlier rounds), or the fetch skipped transactions that nothing here holds: a gap.
pub fn reach(
    dump: &GtidSet,
    dump_time: i64,
    rounds: &[RoundRecord],
    progress: Option<&Progress>,
) -> (i64, Option<ArchiveReachError>) {
    let mut ordered: Vec<&RoundRecord> = rounds.iter().collect();
    ordered.sort_by_key(|r| r.read_at_ms);
    let mut held = dump.clone();
    let mut reachable_ms = dump_time.saturating_mul(1000);
    for round in ordered {
        if round.covers.is_subset(&held) {
            reachable_ms = reachable_ms.max(round.read_at_ms);
            continue;
        }
        let missing = round.excluded.subtract(&held);
        if !missing.is_empty() {
            return (
                reachable_ms,
                Some(ArchiveReachError::Gap {
                    reachable_ms,
                    round_ms: round.read_at_ms,
                    missing,
                }),
            );
        }
        held = held.union(&round.covers);
        reachable_ms = reachable_ms.max(round.read_at_ms);
    }
    if let Some(p) = progress.filter(|p| p.covered.is_subset(&held)) {
        reachable_ms = reachable_ms.max(p.read_at_ms);
    }
    (reachable_ms, None)
}

/// The rounds that take the dump (`dump`, taken at `dump_time`) to `point` (seconds): every
/// round that adds to it up to the first one read at or after the point, and the transactions
/// they vouch for; none at the dump's own second (MOCO's rule: the dump as it is). `keys` are
/// the object keys under `cluster_prefix`.
pub fn plan_replay(
    cluster_prefix: &str,
    dump: &GtidSet,
    dump_time: i64,
    rounds: &[RoundRecord],
    progress: Option<&Progress>,
    point: i64,
) -> Result<ArchiveReplay, ArchiveReachError> {
    let point_ms = point.saturating_mul(1000);
    let (reachable_ms, gap) = reach(dump, dump_time, rounds, progress);
    if reachable_ms < point_ms {
        return Err(gap.unwrap_or(ArchiveReachError::NotYet {
            point,
            reachable_ms,
        }));
    }
    let mut ordered: Vec<&RoundRecord> = rounds.iter().collect();
    ordered.sort_by_key(|r| r.read_at_ms);
    let mut held = dump.clone();
    let mut keys = Vec::new();
    // MOCO's rule: a point at the dump's own second restores the dump as it is.
    if point <= dump_time {
        ordered.clear();
    }
    for round in ordered {
        if round.covers.is_subset(&held) {
            continue;
        }
        // A round after a gap (the point is before it, or at the dump's second) is never
        // applied, not even cut at the point.
        if !round.excluded.is_subset(&held) {
            break;
        }
        held = held.union(&round.covers);
        keys.push(round_object_key(cluster_prefix, round.read_at_ms));
        if round.read_at_ms >= point_ms {
            break;
        }
    }
    Ok(ArchiveReplay {
        keys,
        include: held.subtract(dump),
    })
}

/// The replay of one round's files (`files`, from [`format::restore::replay_files`]): MOCO's
/// `mysqlbinlog --stop-datetime | mysql` with only the vouched-for transactions
/// (`--include-gtids`), which also keeps the dump's own from being applied twice.
pub fn round_replay(
    target: &Endpoint,
    work_dir: &str,
    stop_at: Timestamp,
    files: &[String],
    filter: &RestoreFilter,
    include: &GtidSet,
) -> Pipeline {
    let mut pipeline = format::restore::binlog_replay(target, work_dir, stop_at, files, filter);
    if let Some(decode) = pipeline.stages.first_mut() {
        decode.args.insert(1, format!("--include-gtids={include}"));
    }
    pipeline
}

/// `YYYY-MM-DDThh:mm:ss.mmmZ`.
pub fn show_ms(ms: i64) -> String {
    format!(
        "{}.{:03}Z",
        show_s(ms.div_euclid(1000)).trim_end_matches('Z'),
        ms.rem_euclid(1000)
    )
}

fn show_s(seconds: i64) -> String {
    Timestamp(seconds).to_string()
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";
    const B: &str = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb";
    const PREFIX: &str = "moco/ns/db/";

    fn set(text: &str) -> GtidSet {
        GtidSet::parse(text).unwrap()
    }

    fn round(read_at_ms: i64, excluded: &str, covers: &str) -> RoundRecord {
        RoundRecord {
            format: RECORD_FORMAT,
            read_at_ms,
            instance: 0,
            server_uuid: A.to_owned(),
            excluded: set(excluded),
            covers: set(covers),
            files: vec!["binlog.000002".to_owned()],
            bytes: 100,
        }
    }

    #[test]
    fn keys_sort_by_time_and_parse_back() {
        assert_eq!(
            round_object_key(PREFIX, 1_700_000_000_123),
            "moco/ns/db/binlog-archive/1700000000123.tar.zst"
        );
        let key = round_record_key(PREFIX, 1_700_000_000_123);
        assert_eq!(key, "moco/ns/db/binlog-archive/1700000000123.json");
        assert_eq!(
            parse_round_record_key(PREFIX, &key),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            progress_key(PREFIX),
            "moco/ns/db/binlog-archive/progress.json"
        );
        assert_eq!(
            round_record_key(PREFIX, 999),
            "moco/ns/db/binlog-archive/0000000000999.json"
        );
        for other in [
            progress_key(PREFIX),
            round_object_key(PREFIX, 1),
            "moco/ns/db/binlog-archive/17.json".to_owned(),
            "moco/ns/other/binlog-archive/1700000000123.json".to_owned(),
            "moco/ns/db/20250101-000000/dump.tar".to_owned(),
        ] {
            assert_eq!(parse_round_record_key(PREFIX, &other), None, "{other}");
        }
        // MOCO's own key parser does not take the archive for a backup folder.
        assert_eq!(format::keys::parse_key(PREFIX, &key), None);
    }

    #[test]
    fn a_round_continues_the_archive_and_starts_again_from_a_backup_only_after_a_purge() {
        let dump = set(&format!("{A}:1-10"));
        let none = GtidSet::new();
        // The first round: the backup is all that is held.
        assert_eq!(
            plan_round(None, &dump, &set(&format!("{A}:1-12")), &none, 5_000),
            RoundPlan::Fetch {
                exclude: dump.clone()
            }
        );
        let progress = Progress {
            format: RECORD_FORMAT,
            read_at_ms: 5_000,
            covered: set(&format!("{A}:1-12")),
        };
        // Nothing new: the mark moves.
        assert_eq!(
            plan_round(
                Some(&progress),
                &dump,
                &set(&format!("{A}:1-12")),
                &none,
                6_000
            ),
            RoundPlan::Idle(Progress {
                format: RECORD_FORMAT,
                read_at_ms: 6_000,
                covered: set(&format!("{A}:1-12")),
            })
        );
        // A newer backup that holds transactions the archive lacks: the archive fetches them
        // all the same, so that older backups stay restorable past the newer one.
        let newer_dump = set(&format!("{A}:1-20"));
        let executed = set(&format!("{A}:1-20,{B}:1-3"));
        assert_eq!(
            plan_round(
                Some(&progress),
                &newer_dump,
                &executed,
                &set(&format!("{A}:1-12")),
                7_000
            ),
            RoundPlan::Fetch {
                exclude: set(&format!("{A}:1-12"))
            }
        );
        // Unless the primary purged some of them: then from the newer backup on.
        assert_eq!(
            plan_round(
                Some(&progress),
                &newer_dump,
                &executed,
                &set(&format!("{A}:1-15")),
                7_000
            ),
            RoundPlan::Fetch {
                exclude: set(&format!("{A}:1-20"))
            }
        );
        // Idle after such a restart: the mark takes the backup in.
        assert_eq!(
            plan_round(
                Some(&progress),
                &newer_dump,
                &newer_dump,
                &set(&format!("{A}:1-15")),
                8_000
            ),
            RoundPlan::Idle(Progress {
                format: RECORD_FORMAT,
                read_at_ms: 8_000,
                covered: newer_dump.clone(),
            })
        );
        // A clock that went back never moves the mark back.
        assert!(matches!(
            plan_round(
                Some(&progress),
                &dump,
                &set(&format!("{A}:1-5")),
                &none,
                4_000
            ),
            RoundPlan::Idle(Progress {
                read_at_ms: 5_000,
                ..
            })
        ));
        let record = round(7_000, &format!("{A}:1-20"), &format!("{A}:1-20,{B}:1-3"));
        assert_eq!(
            progress_after(&record),
            Progress {
                format: RECORD_FORMAT,
                read_at_ms: 7_000,
                covered: set(&format!("{A}:1-20,{B}:1-3")),
            }
        );
    }

    #[test]
    fn the_fetch_is_mocos_from_the_oldest_file_excluding_what_is_held() {
        let exclude = set(&format!("{A}:1-20,{B}:1-3"));
        let files = vec![
            "binlog.000010".to_owned(),
            "binlog.000009".to_owned(),
            "binlog.000011".to_owned(),
        ];
        let primary = Endpoint::pod("10.0.0.5");
        let cmd = round_fetch(&primary, "/work/archive", &exclude, &files).unwrap();
        assert_eq!(
            cmd,
            format::backup::binlog_fetch(
                &primary,
                "/work/archive",
                &format!("{A}:1-20,{B}:1-3"),
                "binlog.000009"
            )
        );
        assert!(
            cmd.args
                .contains(&"--result-file=/work/archive/binlog/".to_owned())
        );
        assert!(matches!(
            round_fetch(&primary, "/work/archive", &exclude, &[]),
            Err(format::FormatError::NoBinaryLogs)
        ));
    }

    /// A failover: the old primary (A) archived 1-12; the new one (B) has A's 1-11 (12 was
    /// written but never acknowledged) and its own.
    fn failover_rounds() -> Vec<RoundRecord> {
        vec![
            round(9_000, &format!("{A}:1-10"), &format!("{A}:1-11")),
            round(10_000, &format!("{A}:1-11"), &format!("{A}:1-12")),
            round(15_000, &format!("{A}:1-12"), &format!("{A}:1-11,{B}:1-4")),
            round(
                20_000,
                &format!("{A}:1-12,{B}:1-4"),
                &format!("{A}:1-11,{B}:1-9"),
            ),
        ]
    }

    #[test]
    fn a_replay_takes_the_rounds_up_to_the_point_and_only_what_they_vouch_for() {
        let dump = set(&format!("{A}:1-10"));
        let rounds = failover_rounds();
        let progress = Progress {
            format: RECORD_FORMAT,
            read_at_ms: 25_000,
            covered: set(&format!("{A}:1-12,{B}:1-9")),
        };
        // Rounds given in any order.
        let mut shuffled = rounds.clone();
        shuffled.reverse();
        let plan = plan_replay(PREFIX, &dump, 8, &shuffled, Some(&progress), 12).unwrap();
        assert_eq!(
            plan.keys,
            vec![
                round_object_key(PREFIX, 9_000),
                round_object_key(PREFIX, 10_000),
                round_object_key(PREFIX, 15_000),
            ]
        );
        assert_eq!(plan.include, set(&format!("{A}:11-12,{B}:1-4")));
        // Up to the last round; past it, the progress mark vouches (an idle cluster).
        let plan = plan_replay(PREFIX, &dump, 8, &rounds, Some(&progress), 25).unwrap();
        assert_eq!(plan.keys.len(), 4);
        assert_eq!(plan.include, set(&format!("{A}:11-12,{B}:1-9")));
        let e = plan_replay(PREFIX, &dump, 8, &rounds, Some(&progress), 26).unwrap_err();
        assert_eq!(
            e,
            ArchiveReachError::NotYet {
                point: 26,
                reachable_ms: 25_000
            }
        );
        assert!(
            e.to_string().contains(
                "reaches 1970-01-01T00:00:25.000Z from this backup, not 1970-01-01T00:00:26Z"
            ),
            "{e}"
        );
        // Without the mark: the last round.
        assert!(plan_replay(PREFIX, &dump, 8, &rounds, None, 20).is_ok());
        assert!(plan_replay(PREFIX, &dump, 8, &rounds, None, 21).is_err());
    }

    #[test]
    fn a_newer_dump_passes_over_the_rounds_it_holds() {
        let dump = set(&format!("{A}:1-12,{B}:1-4"));
        let plan = plan_replay(PREFIX, &dump, 16, &failover_rounds(), None, 20).unwrap();
        assert_eq!(plan.keys, vec![round_object_key(PREFIX, 20_000)]);
        assert_eq!(plan.include, set(&format!("{B}:5-9")));
        // At the dump's own second nothing is replayed.
        let plan = plan_replay(PREFIX, &dump, 16, &failover_rounds(), None, 16).unwrap();
        assert!(plan.keys.is_empty() && plan.include.is_empty(), "{plan:?}");
    }

    #[test]
    fn a_round_that_skipped_what_nothing_holds_is_a_gap() {
        // The archiver was down from 10 s to 30 s; the primary purged what it missed, and a
        // backup at 28 s (A:1-40) let it go on from there.
        let rounds = vec![
            round(9_000, &format!("{A}:1-10"), &format!("{A}:1-11")),
            round(30_000, &format!("{A}:1-40"), &format!("{A}:1-45")),
        ];
        let old = set(&format!("{A}:1-10"));
        let e = plan_replay(PREFIX, &old, 8, &rounds, None, 30).unwrap_err();
        assert_eq!(
            e,
            ArchiveReachError::Gap {
                reachable_ms: 9_000,
                round_ms: 30_000,
                missing: set(&format!("{A}:12-40")),
            }
        );
        assert!(e.to_string().contains("lacks"), "{e}");
        // Before the gap, the old backup still reaches.
        assert!(plan_replay(PREFIX, &old, 8, &rounds, None, 9).is_ok());
        // The newer backup reaches past it.
        let newer = set(&format!("{A}:1-40"));
        let plan = plan_replay(PREFIX, &newer, 28, &rounds, None, 30).unwrap();
        assert_eq!(plan.keys, vec![round_object_key(PREFIX, 30_000)]);
        assert_eq!(plan.include, set(&format!("{A}:41-45")));
        // A mark whose set the rounds do not reach does not extend the window.
        let stray = Progress {
            format: RECORD_FORMAT,
            read_at_ms: 99_000,
            covered: set(&format!("{A}:1-50")),
        };
        assert_eq!(reach(&newer, 28, &rounds, Some(&stray)).0, 30_000);
    }

    #[test]
    fn the_replay_applies_only_the_included_transactions() {
        let include = set(&format!("{A}:11-12,{B}:1-4"));
        let files = vec!["/work/binlog/binlog.000002".to_owned()];
        let pipeline = round_replay(
            &Endpoint::pod("10.0.0.9"),
            "/work",
            Timestamp(1_700_000_000),
            &files,
            &RestoreFilter::default(),
            &include,
        );
        let plain = format::restore::binlog_replay(
            &Endpoint::pod("10.0.0.9"),
            "/work",
            Timestamp(1_700_000_000),
            &files,
            &RestoreFilter::default(),
        );
        let mut expected = plain.stages[0].args.clone();
        expected.insert(1, format!("--include-gtids={A}:11-12,{B}:1-4"));
        assert_eq!(pipeline.stages[0].args, expected);
        assert_eq!(
            pipeline.stages[0].args[..2],
            [
                "--stop-datetime=2023-11-14 22:13:20".to_owned(),
                format!("--include-gtids={A}:11-12,{B}:1-4")
            ]
        );
        assert_eq!(pipeline.stages[1], plain.stages[1]);
    }

    #[test]
    fn records_round_trip_as_json() {
        let record = round(7_000, &format!("{A}:1-20"), &format!("{A}:1-20,{B}:1-3"));
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains("\"readAtMs\":7000"), "{text}");
        assert!(
            text.contains(&format!("\"covers\":\"{A}:1-20,{B}:1-3\"")),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<RoundRecord>(&text).unwrap(), record);
        let progress = progress_after(&record);
        let text = serde_json::to_string(&progress).unwrap();
        assert_eq!(serde_json::from_str::<Progress>(&text).unwrap(), progress);
    }
}
