//! Properties of MySQL archiving, against a model of the cluster that the rules never see:
//! seconds pass; each second the primary commits a few transactions; a failover may end a
//! primary's term, after it wrote transactions to its binlog that it never committed (not
//! acknowledged); a primary may purge its binlogs; backups are taken; the archiver runs
//! rounds when it is up, fetching as a MySQL server sends (its binlog in order, without the
//! excluded GTIDs, failing when it purged one it needs). Then every point is restored from the
//! newest backup at or before it, replaying as `mysqlbinlog --stop-datetime --include-gtids |
//! mysql` would.
//!
//! The truth, from the model alone: a restore holds the backup and exactly the transactions
//! committed before the point, never one that was not committed; and while no binlog was
//! purged, every point up to the last round is restorable from the backup the archive started
//! from and from every later one.

use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use super::{ArchiveReachError, RECORD_FORMAT};
use super::{
    Progress, RoundPlan, RoundRecord, plan_replay, plan_round, progress_after, round_object_key,
};
use moco_core::gtid::GtidSet;

const PREFIX: &str = "moco/ns/db/";

/// What happens in one second.
#[derive(Clone, Debug)]
struct Second {
    /// Transactions the primary commits.
    commits: u8,
    /// The primary fails at the end of this second, after writing this many transactions it
    /// never commits (`None`: no failover).
    failover: Option<u8>,
    /// The primary purges every binlog it has, after the commits.
    purge: bool,
    /// A backup is taken after the commits.
    backup: bool,
    /// The archiver runs a round after the commits.
    round: bool,
}

fn seconds() -> impl Strategy<Value = Vec<Second>> {
    prop::collection::vec(
        (0u8..4, 0u8..12, 0u8..30, 0u8..8, 0u8..10).prop_map(|(commits, f, p, b, r)| Second {
            commits,
            failover: (f < 2).then_some(f + 1),
            purge: p == 0,
            backup: b == 0,
            round: r < 7,
        }),
        8..40,
    )
}

fn uuid(term: usize) -> String {
    format!("{:08x}-0000-4000-8000-000000000000", term + 1)
}

fn one(uuid: &str, n: u64) -> GtidSet {
    GtidSet::parse(&format!("{uuid}:{n}")).unwrap_or_default()
}

fn has(set: &GtidSet, e: &Event) -> bool {
    one(&e.uuid, e.n).is_subset(set)
}

/// A transaction in a binlog: its GTID (uuid, number) and its second.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Event {
    uuid: String,
    n: u64,
    at: i64,
}

/// What a case saw, for the check that the cases that matter occur.
#[derive(Default)]
struct Seen {
    uncommitted_archived: bool,
    restored_after_failover: bool,
    gap: bool,
}

fn check(plan: &[Second]) -> Result<Seen, TestCaseError> {
    let mut seen = Seen::default();
    let mut term = 0usize;
    let mut next_n = 1u64;
    // Committed transactions, in commit order.
    let mut committed: Vec<Event> = Vec::new();
    // The primary's binlog and how much of it was purged.
    let mut binlog: Vec<Event> = Vec::new();
    let mut purged = 0usize;
    let mut ever_purged = false;
    let mut backups: Vec<(i64, GtidSet)> = Vec::new();
    let mut rounds: Vec<(RoundRecord, Vec<Event>)> = Vec::new();
    let mut progress: Option<Progress> = None;
    let mut failover_at: Option<i64> = None;
    // The backup the archive started from: it knows nothing of the seconds before it.
    let mut started_from: Option<i64> = None;
    let set_of = |events: &[Event]| {
        events
            .iter()
            .fold(GtidSet::new(), |s, e| s.union(&one(&e.uuid, e.n)))
    };
    for (i, second) in plan.iter().enumerate() {
        let t = i as i64 + 1;
        for _ in 0..second.commits {
            let e = Event {
                uuid: uuid(term),
                n: next_n,
                at: t,
            };
            next_n += 1;
            committed.push(e.clone());
            binlog.push(e);
        }
        if second.purge {
            purged = binlog.len();
            ever_purged = true;
        }
        if second.backup {
            backups.push((t, set_of(&committed)));
        }
        // Written to the binlog, not committed: only a failover this second leaves them so.
        let uncommitted: Vec<Event> = (0..second.failover.unwrap_or(0))
            .map(|k| Event {
                uuid: uuid(term),
                n: next_n + u64::from(k),
                at: t,
            })
            .collect();
        binlog.extend(uncommitted.iter().cloned());
        if second.round {
            let executed = set_of(&committed);
            let newest = backups.last().map(|(_, s)| s.clone()).unwrap_or_default();
            if progress.is_none() {
                started_from = backups.last().map(|(t, _)| *t);
            }
            let read_at_ms = t * 1000 + 500;
            if backups.is_empty() {
                // The archiver starts with the first backup.
            } else {
                let gtid_purged = set_of(&binlog[..purged]);
                match plan_round(
                    progress.as_ref(),
                    &newest,
                    &executed,
                    &gtid_purged,
                    read_at_ms,
                ) {
                    RoundPlan::Idle(p) => progress = Some(p),
                    RoundPlan::Fetch { exclude } => {
                        let sent: Vec<(usize, &Event)> = binlog
                            .iter()
                            .enumerate()
                            .filter(|(_, e)| !has(&exclude, e))
                            .collect();
                        // A server that purged what the fetch needs fails it: nothing stored.
                        if sent.iter().all(|(i, _)| *i >= purged) {
                            let files: Vec<Event> =
                                sent.into_iter().map(|(_, e)| e.clone()).collect();
                            if files.iter().any(|e| uncommitted.contains(e)) {
                                seen.uncommitted_archived = true;
                            }
                            let record = RoundRecord {
                                format: RECORD_FORMAT,
                                read_at_ms,
                                instance: term as u32,
                                server_uuid: uuid(term),
                                excluded: exclude,
                                covers: executed,
                                files: vec!["binlog.000001".into()],
                                bytes: 0,
                            };
                            progress = Some(progress_after(&record));
                            rounds.push((record, files));
                        }
                    }
                }
            }
        }
        if second.failover.is_some() {
            // The new primary has every committed transaction, in order, and none of the
            // old one's uncommitted ones; its own numbers continue past them (a new uuid).
            term += 1;
            next_n = 1;
            binlog = committed.clone();
            purged = 0;
            failover_at.get_or_insert(t);
        }
    }

    let records: Vec<RoundRecord> = rounds.iter().map(|(r, _)| r.clone()).collect();
    let last_round_ms = records.last().map(|r| r.read_at_ms);
    let end = plan.len() as i64 + 1;
    for &(first_backup, _) in backups.first().iter() {
        for point in *first_backup..=end {
            let Some((dump_time, dump)) = backups.iter().rev().find(|(t, _)| *t <= point) else {
                continue;
            };
            match plan_replay(PREFIX, dump, *dump_time, &records, progress.as_ref(), point) {
                Ok(replay) => {
                    // Replay as mysqlbinlog | mysql would: each round stops at its first event
                    // at or after the point; a GTID already executed is skipped.
                    let mut target = dump.clone();
                    for key in &replay.keys {
                        let (_, files) = rounds
                            .iter()
                            .find(|(r, _)| round_object_key(PREFIX, r.read_at_ms) == *key)
                            .ok_or_else(|| TestCaseError::fail(format!("no round {key}")))?;
                        for e in files {
                            if e.at >= point {
                                break;
                            }
                            if has(&replay.include, e) {
                                target = target.union(&one(&e.uuid, e.n));
                            }
                        }
                    }
                    let before: Vec<Event> =
                        committed.iter().filter(|e| e.at < point).cloned().collect();
                    let expected = dump.union(&set_of(&before));
                    prop_assert_eq!(
                        &target,
                        &expected,
                        "point {} from the backup of {}",
                        point,
                        dump_time
                    );
                    if failover_at.is_some_and(|f| f < point) && !replay.keys.is_empty() {
                        seen.restored_after_failover = true;
                    }
                }
                Err(e) => {
                    if matches!(e, ArchiveReachError::Gap { .. }) {
                        seen.gap = true;
                    }
                    // Without a purge, every point up to the last round is reachable from the
                    // backup the archive started from and every later one.
                    let reachable = point == *dump_time
                        || (started_from.is_some_and(|s| s <= *dump_time)
                            && last_round_ms.is_some_and(|ms| ms >= point * 1000));
                    prop_assert!(
                        ever_purged || !reachable,
                        "point {} from the backup of {} refused: {}",
                        point,
                        dump_time,
                        e
                    );
                }
            }
        }
    }
    Ok(seen)
}

#[test]
fn a_restore_holds_exactly_what_was_committed_before_the_point() {
    let mut runner = TestRunner::new(crate::property_seed::config(
        "a_restore_holds_exactly_what_was_committed_before_the_point",
        512,
    ));
    let counts = std::cell::Cell::new((0u32, 0u32, 0u32));
    let result = runner.run(&seconds(), |plan| {
        let seen = check(&plan)?;
        let (a, b, c) = counts.get();
        counts.set((
            a + u32::from(seen.uncommitted_archived),
            b + u32::from(seen.restored_after_failover),
            c + u32::from(seen.gap),
        ));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The cases that matter occurred: uncommitted transactions archived, restores across a
    // failover, gaps after a purge.
    let (uncommitted, failover, gap) = counts.get();
    assert!(
        uncommitted > 20,
        "uncommitted transactions archived in only {uncommitted} cases"
    );
    assert!(
        failover > 50,
        "restores across a failover in only {failover} cases"
    );
    assert!(gap > 10, "gaps in only {gap} cases");
}
