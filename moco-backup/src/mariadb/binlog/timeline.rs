//! The archive's history and the restore plan, as pure functions over what the archive's
//! metadata says (no I/O).
//!
//! Each archived binlog file is a [`Segment`]: its transactions summarised as [`Run`]s of
//! consecutive sequence numbers from one server. The [`Timeline`] lays the segments over
//! each other in archive order: a later segment is authoritative for the sequence numbers
//! it holds, and when it disagrees with the history (the same sequence number from another
//! server: the old primary wrote transactions the new one never received, before a
//! failover), what the history held beyond the later segment is dropped as well: that was
//! an abandoned branch. One archiver per cluster makes archive order the primaries' order.
//!
//! The restore point follows MOCO's rule (`mysqlbinlog --stop-datetime`): restoring to `T`
//! keeps every transaction whose commit second is before `T`.

use serde::{Deserialize, Serialize};

use super::events::{FileSummary, Gtid};
use crate::mariadb::physical::ObjectRecord;

/// The segment metadata layout this build writes and reads.
pub const SEGMENT_FORMAT: u32 = 1;

/// Consecutive transactions of one server in one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Run {
    /// The originating server.
    pub server_id: u32,
    /// The first sequence number.
    pub first_seq: u64,
    /// The last sequence number (every one between is in the run).
    pub last_seq: u64,
    /// The sequence number the run follows in its file's history (`first_seq - 1` unless the
    /// server skipped numbers): a run continues a history that ends at or after it.
    pub after_seq: u64,
    /// Commit second (Unix) of the first transaction.
    pub first_time: i64,
    /// Commit second of the last transaction.
    pub last_time: i64,
}

/// One archived binlog file (stored as JSON beside its object, written after it: a segment
/// without metadata is incomplete and ignored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Segment {
    /// [`SEGMENT_FORMAT`].
    pub format_version: u32,
    /// The server whose file it is (the primary then).
    pub server_id: u32,
    /// The file's name on that server.
    pub file: String,
    /// When it was archived (Unix milliseconds): the order of the archive.
    pub archived_at_ms: u64,
    /// The GTID domain of its transactions.
    pub domain: u32,
    /// The file's start state (its `Gtid_list`).
    pub start_state: Vec<Gtid>,
    /// Its transactions.
    pub runs: Vec<Run>,
    /// The stored object (zstd of the file) and how to check it.
    pub object: ObjectRecord,
}

/// Why a file cannot be described as a segment, or an archive laid out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimelineError {
    /// Transactions of more than one GTID domain.
    #[error(
        "transactions of GTID domains {0} and {1}: archiving supports one domain \
         (gtid_domain_id is the same on every instance of a MOCO cluster)"
    )]
    SeveralDomains(u32, u32),
}

/// The runs of one file's transactions in `domain`, or the domain found when it is not the
/// only one.
pub fn runs_of(summary: &FileSummary) -> Result<(Option<u32>, Vec<Run>), TimelineError> {
    let Some(first) = summary.transactions.first() else {
        return Ok((None, Vec::new()));
    };
    let domain = first.gtid.domain;
    let mut after = summary
        .start_state
        .iter()
        .filter(|g| g.domain == domain)
        .map(|g| g.seq)
        .max()
        .unwrap_or(0);
    let mut runs: Vec<Run> = Vec::new();
    for t in &summary.transactions {
        if t.gtid.domain != domain {
            return Err(TimelineError::SeveralDomains(domain, t.gtid.domain));
        }
        let time = i64::from(t.time);
        match runs.last_mut() {
            Some(r) if r.server_id == t.gtid.server_id && t.gtid.seq == r.last_seq + 1 => {
                r.last_seq = t.gtid.seq;
                r.last_time = time;
            }
            _ => runs.push(Run {
                server_id: t.gtid.server_id,
                first_seq: t.gtid.seq,
                last_seq: t.gtid.seq,
                after_seq: after,
                first_time: time,
                last_time: time,
            }),
        }
        after = t.gtid.seq;
    }
    Ok((Some(domain), runs))
}

/// A stretch of the history taken from one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The run's server.
    pub server_id: u32,
    /// First sequence number.
    pub first_seq: u64,
    /// Last sequence number.
    pub last_seq: u64,
    /// What it follows (see [`Run::after_seq`]).
    pub after_seq: u64,
    /// Commit second of the first transaction; a lower bound once the piece was cut at the
    /// front.
    pub first_time: i64,
    /// Commit second of the last transaction; an upper bound once cut at the back.
    pub last_time: i64,
    /// Index of its segment in the slice the timeline was built from.
    pub segment: usize,
}

/// The archive's history of one domain: pieces in sequence order, not overlapping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The domain.
    pub domain: Option<u32>,
    /// The pieces.
    pub pieces: Vec<Piece>,
    /// Sequence numbers where a later segment disagreed with the history, with the server
    /// whose branch was dropped there.
    pub abandoned: Vec<(u64, u32)>,
}

impl Timeline {
    /// The pieces of `segments` in archive order (`archived_at_ms`, then file name).
    pub fn build(segments: &[Segment]) -> Result<Timeline, TimelineError> {
        let mut order: Vec<usize> = (0..segments.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&segments[a], &segments[b]);
            (a.archived_at_ms, &a.file).cmp(&(b.archived_at_ms, &b.file))
        });
        let mut timeline = Timeline::default();
        for i in order {
            let s = &segments[i];
            if s.runs.is_empty() {
                continue;
            }
            match timeline.domain {
                Some(d) if d != s.domain => return Err(TimelineError::SeveralDomains(d, s.domain)),
                _ => timeline.domain = Some(s.domain),
            }
            timeline.overlay(i, &s.runs);
        }
        Ok(timeline)
    }

    /// The server that wrote sequence number `seq`, when the history holds it.
    pub fn server_at(&self, seq: u64) -> Option<u32> {
        self.pieces
            .iter()
            .find(|p| p.first_seq <= seq && seq <= p.last_seq)
            .map(|p| p.server_id)
    }

    /// True when a file with `runs` would add to the history or change it: a sequence number
    /// it does not hold, or holds from another server.
    pub fn would_change(&self, runs: &[Run]) -> bool {
        runs.iter().any(|r| {
            let mut covered = 0u64;
            for p in &self.pieces {
                let (lo, hi) = (p.first_seq.max(r.first_seq), p.last_seq.min(r.last_seq));
                if lo <= hi {
                    if p.server_id != r.server_id {
                        return true;
                    }
                    covered += hi - lo + 1;
                }
            }
            covered < r.last_seq - r.first_seq + 1
        })
    }

    fn overlay(&mut self, segment: usize, runs: &[Run]) {
        let (lo, hi) = (runs[0].first_seq, runs[runs.len() - 1].last_seq);
        let mut diverged: Option<(u64, u32)> = None;
        for r in runs {
            for p in &self.pieces {
                let (a, b) = (p.first_seq.max(r.first_seq), p.last_seq.min(r.last_seq));
                if a <= b && p.server_id != r.server_id && diverged.is_none_or(|(s, _)| a < s) {
                    diverged = Some((a, p.server_id));
                }
            }
        }
        let mut kept = Vec::new();
        for p in &self.pieces {
            if p.first_seq < lo {
                let mut front = *p;
                if front.last_seq >= lo {
                    front.last_seq = lo - 1;
                }
                kept.push(front);
            }
            if p.last_seq > hi && diverged.is_none() {
                let mut back = *p;
                if back.first_seq <= hi {
                    back.first_seq = hi + 1;
                    back.after_seq = hi;
                }
                kept.push(back);
            }
        }
        kept.extend(runs.iter().map(|r| Piece {
            server_id: r.server_id,
            first_seq: r.first_seq,
            last_seq: r.last_seq,
            after_seq: r.after_seq,
            first_time: r.first_time,
            last_time: r.last_time,
            segment,
        }));
        kept.sort_by_key(|p| p.first_seq);
        self.pieces = kept;
        if let Some(d) = diverged {
            self.abandoned.push(d);
        }
    }

    /// The pieces that continue the history from sequence number `from` (exclusive) without
    /// a gap, in order; the first may start before `from`.
    fn continuing(&self, from: u64) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut end = from;
        for p in &self.pieces {
            if p.last_seq <= end {
                continue;
            }
            if p.after_seq > end && p.first_seq > end + 1 {
                break;
            }
            out.push(*p);
            end = p.last_seq;
        }
        out
    }

    /// The contiguous stretches of the history: `(first piece, last piece)` indexes.
    pub fn stretches(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (i, p) in self.pieces.iter().enumerate() {
            match out.last_mut() {
                Some((_, last))
                    if p.after_seq <= self.pieces[*last].last_seq
                        || p.first_seq == self.pieces[*last].last_seq + 1 =>
                {
                    *last = i
                }
                _ => out.push((i, i)),
            }
        }
        out
    }
}

/// What the archiver last confirmed: at `checked_at` (Unix second), every transaction up to
/// `position` was archived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Progress {
    /// When the primary's position was read (before its binlog was closed and archived).
    pub checked_at: i64,
    /// The primary's last GTID in the archive's domain then; `None` for an empty history.
    pub position: Option<Gtid>,
}

/// A full backup, as the plan sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    /// Its prefix.
    pub prefix: String,
    /// Its GTID position in the archive's domain (`None`: it holds no transaction).
    pub position: Option<Gtid>,
    /// When it was complete (Unix second): it holds nothing committed after.
    pub finished_at: i64,
}

/// Which moment to restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// The newest the archive allows.
    Latest,
    /// Every transaction committed before this Unix second.
    Before(i64),
}

/// One file to replay: its transactions after `after` up to `last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Index of the segment.
    pub segment: usize,
    /// Replay starts after this GTID (`mariadb-binlog --start-position`, exclusive).
    pub after: Option<Gtid>,
    /// And ends with this one (`--stop-position`, inclusive).
    pub last: Gtid,
}

/// A restore: a full backup, then binlogs up to a point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Index of the base backup.
    pub base: usize,
    /// The files to replay, in order.
    pub steps: Vec<Step>,
    /// Replay stops before the first transaction committed at or after this second.
    pub stop_before: Option<i64>,
}

/// Why no restore reaches the point.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No complete backup.
    #[error("no complete backup to restore")]
    NoBackup,
    /// The point is before every backup.
    #[error(
        "the point is before the first complete backup: the earliest restorable point is {} \
         (every transaction before it is in backup {prefix})",
        crate::mariadb::binlog::timeline::show(*earliest)
    )]
    BeforeEarliest {
        /// The earliest restorable second.
        earliest: i64,
        /// The backup that gives it.
        prefix: String,
    },
    /// The archive does not reach the point.
    #[error("{0}")]
    NotArchived(String),
}

/// A Unix second as RFC 3339.
pub fn show(seconds: i64) -> String {
    moco_core::time::Timestamp(seconds).to_string()
}

/// Until which second (exclusive) the archive is known complete from backup `b`, whose
/// continuing history is `pieces`: the progress mark's, when that history holds the mark's
/// position.
fn complete_until(b: &Base, pieces: &[Piece], progress: Option<Progress>) -> Option<i64> {
    let from = b.position.map_or(0, |g| g.seq);
    let reaches = |g: Gtid| {
        g.seq <= from
            || pieces
                .iter()
                .any(|p| p.first_seq <= g.seq && g.seq <= p.last_seq && p.server_id == g.server_id)
    };
    progress.and_then(|p| match p.position {
        Some(g) if reaches(g) => Some(p.checked_at),
        None if from == 0 => Some(p.checked_at),
        _ => None,
    })
}

/// The seconds each backup restores to with the archive: every point from the second after
/// it finished up to the returned one (inclusive); `None` when the archive does not continue
/// it (it restores only as it is).
pub fn restorable_until(b: &Base, timeline: &Timeline, progress: Option<Progress>) -> Option<i64> {
    let from = b.position.map_or(0, |g| g.seq);
    complete_until(b, &timeline.continuing(from), progress).filter(|c| *c > b.finished_at)
}

/// The restore of `point` from `bases` and the archive (`timeline` over `segments`,
/// confirmed up to `progress`): the newest backup complete before the point, and the
/// binlogs that continue it up to the point.
pub fn plan(
    bases: &[Base],
    timeline: &Timeline,
    progress: Option<Progress>,
    point: Point,
) -> Result<Plan, PlanError> {
    if bases.is_empty() {
        return Err(PlanError::NoBackup);
    }
    let newest = |eligible: &dyn Fn(&Base) -> bool| {
        bases
            .iter()
            .enumerate()
            .filter(|(_, b)| eligible(b))
            .max_by_key(|(_, b)| b.finished_at)
            .map(|(i, _)| i)
    };
    let base = match point {
        Point::Latest => newest(&|_| true),
        Point::Before(t) => newest(&|b| b.finished_at < t),
    };
    let Some(base) = base else {
        let (_, first) = bases
            .iter()
            .enumerate()
            .min_by_key(|(_, b)| b.finished_at)
            .ok_or(PlanError::NoBackup)?;
        return Err(PlanError::BeforeEarliest {
            earliest: first.finished_at + 1,
            prefix: first.prefix.clone(),
        });
    };
    let b = &bases[base];
    let from = b.position.map_or(0, |g| g.seq);
    if let Some(position) = b.position
        && let Some(server) = timeline.server_at(position.seq)
        && server != position.server_id
    {
        return Err(PlanError::NotArchived(format!(
            "backup {} holds {position}, but the archived history has sequence number {} from \
             server {server}: the backup is not on the archive's history",
            b.prefix, position.seq
        )));
    }
    let pieces = timeline.continuing(from);
    let complete_until = complete_until(b, &pieces, progress);
    let stop_before = match point {
        Point::Latest => None,
        Point::Before(t) => {
            match complete_until {
                Some(c) if t <= c => {}
                _ => {
                    let end = pieces.last().map(|p| p.last_time);
                    return Err(PlanError::NotArchived(match (complete_until, end) {
                        (Some(c), _) => format!(
                            "the archive is complete up to {} only (backup {} finished at {}); \
                             a later point needs binlogs not archived yet",
                            show(c),
                            b.prefix,
                            show(b.finished_at)
                        ),
                        (None, Some(e)) => format!(
                            "the binlogs archived after backup {} stop at a gap (the last \
                             continuous transaction committed at {}); restorable points \
                             after the backup end there",
                            b.prefix,
                            show(e)
                        ),
                        (None, None) => format!(
                            "no binlogs are archived after backup {} (finished at {}): \
                             restore `latest`, or archive binlogs to restore a later second",
                            b.prefix,
                            show(b.finished_at)
                        ),
                    }));
                }
            }
            Some(t)
        }
    };
    let mut steps: Vec<Step> = Vec::new();
    let mut after = b.position;
    for p in pieces {
        if stop_before.is_some_and(|t| p.first_time >= t) {
            break;
        }
        let last = Gtid {
            domain: timeline.domain.unwrap_or(0),
            server_id: p.server_id,
            seq: p.last_seq,
        };
        match steps.last_mut() {
            Some(s) if s.segment == p.segment => s.last = last,
            _ => steps.push(Step {
                segment: p.segment,
                after,
                last,
            }),
        }
        after = Some(last);
    }
    Ok(Plan {
        base,
        steps,
        stop_before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mariadb::binlog::events::tests::g;

    fn run(server_id: u32, first: u64, last: u64, t0: i64) -> Run {
        Run {
            server_id,
            first_seq: first,
            last_seq: last,
            after_seq: first - 1,
            first_time: t0,
            last_time: t0 + (last - first) as i64,
        }
    }

    fn segment(at: u64, server_id: u32, runs: Vec<Run>) -> Segment {
        Segment {
            format_version: SEGMENT_FORMAT,
            server_id,
            file: format!("binlog.{at:06}"),
            archived_at_ms: at,
            domain: 0,
            start_state: Vec::new(),
            runs,
            object: ObjectRecord {
                key: String::new(),
                size: 0,
                uncompressed_size: 0,
                sha256: String::new(),
            },
        }
    }

    #[test]
    fn a_file_becomes_runs_of_consecutive_transactions_per_server() {
        use crate::mariadb::binlog::events::{summarize, tests::file};
        let bytes = file(
            &[g(0, 1, 100), g(0, 2, 50)],
            &[
                (10, g(0, 1, 101)),
                (11, g(0, 1, 102)),
                (12, g(0, 2, 103)),
                (13, g(0, 2, 105)), // the server skipped 104
            ],
        );
        let (domain, runs) = runs_of(&summarize(&bytes[..], false).unwrap()).unwrap();
        assert_eq!(domain, Some(0));
        assert_eq!(
            runs,
            [
                Run {
                    server_id: 1,
                    first_seq: 101,
                    last_seq: 102,
                    after_seq: 100,
                    first_time: 10,
                    last_time: 11
                },
                Run {
                    server_id: 2,
                    first_seq: 103,
                    last_seq: 103,
                    after_seq: 102,
                    first_time: 12,
                    last_time: 12
                },
                Run {
                    server_id: 2,
                    first_seq: 105,
                    last_seq: 105,
                    after_seq: 103,
                    first_time: 13,
                    last_time: 13
                },
            ]
        );
        let t = Timeline::build(&[segment(1, 1, runs)]).unwrap();
        assert_eq!(t.stretches().len(), 1, "a skipped number is not a gap");
        let two = file(&[], &[(1, g(0, 1, 1)), (2, g(1, 1, 1))]);
        assert_eq!(
            runs_of(&summarize(&two[..], false).unwrap()),
            Err(TimelineError::SeveralDomains(0, 1))
        );
        assert_eq!(
            runs_of(&summarize(&file(&[], &[])[..], false).unwrap()),
            Ok((None, vec![]))
        );
    }

    #[test]
    fn a_later_branch_replaces_what_the_old_primary_alone_had() {
        // Server 1 archived 1..=110, of which 108..=110 never reached server 2; server 2
        // became primary after 107 and wrote 108.. itself.
        let segments = vec![
            segment(1, 1, vec![run(1, 1, 100, 1000)]),
            segment(2, 1, vec![run(1, 101, 110, 1100)]),
            segment(3, 2, vec![run(1, 95, 107, 1095), run(2, 108, 150, 1200)]),
        ];
        let t = Timeline::build(&segments).unwrap();
        assert_eq!(t.abandoned, [(108, 1)]);
        let shape: Vec<_> = t
            .pieces
            .iter()
            .map(|p| (p.server_id, p.first_seq, p.last_seq, p.segment))
            .collect();
        assert_eq!(shape, [(1, 1, 94, 0), (1, 95, 107, 2), (2, 108, 150, 2)]);
        assert_eq!(t.stretches(), [(0, 2)]);
    }

    #[test]
    fn an_agreeing_later_file_keeps_the_newer_history() {
        let segments = vec![
            segment(1, 1, vec![run(1, 1, 100, 1000)]),
            segment(2, 2, vec![run(1, 50, 60, 1050)]),
        ];
        let t = Timeline::build(&segments).unwrap();
        assert!(t.abandoned.is_empty());
        let shape: Vec<_> = t
            .pieces
            .iter()
            .map(|p| (p.first_seq, p.last_seq, p.segment))
            .collect();
        assert_eq!(shape, [(1, 49, 0), (50, 60, 1), (61, 100, 0)]);
        assert!(!t.would_change(&[run(1, 10, 100, 0)]));
        assert!(t.would_change(&[run(1, 90, 101, 0)]), "one new transaction");
        assert!(t.would_change(&[run(3, 90, 90, 0)]), "another server's 90");
    }

    #[test]
    fn a_missing_file_breaks_the_history_into_stretches() {
        let segments = vec![
            segment(1, 1, vec![run(1, 1, 100, 1000)]),
            segment(3, 1, vec![run(1, 201, 300, 1200)]),
        ];
        let t = Timeline::build(&segments).unwrap();
        assert_eq!(t.stretches(), [(0, 0), (1, 1)]);
    }

    fn base(prefix: &str, seq: u64, finished_at: i64) -> Base {
        Base {
            prefix: prefix.into(),
            position: Some(g(0, 1, seq)),
            finished_at,
        }
    }

    #[test]
    fn the_plan_takes_the_newest_backup_before_the_point_and_the_binlogs_after_it() {
        let segments = vec![
            segment(1, 1, vec![run(1, 1, 100, 1000)]),
            segment(2, 1, vec![run(1, 101, 200, 1100)]),
        ];
        let t = Timeline::build(&segments).unwrap();
        let bases = [base("b1", 50, 1051), base("b2", 150, 1151)];
        let progress = Some(Progress {
            checked_at: 1300,
            position: Some(g(0, 1, 200)),
        });
        let p = plan(&bases, &t, progress, Point::Before(1120)).unwrap();
        assert_eq!(p.base, 0, "b2 finished after the point");
        assert_eq!(
            p.steps,
            [
                Step {
                    segment: 0,
                    after: Some(g(0, 1, 50)),
                    last: g(0, 1, 100)
                },
                Step {
                    segment: 1,
                    after: Some(g(0, 1, 100)),
                    last: g(0, 1, 200)
                },
            ]
        );
        assert_eq!(p.stop_before, Some(1120));
        let p = plan(&bases, &t, progress, Point::Before(1152)).unwrap();
        assert_eq!((p.base, p.steps.len()), (1, 1));
        assert_eq!(p.steps[0].after, Some(g(0, 1, 150)));
        // Exactly on the second a backup finished: that backup may hold transactions of
        // that second, so the one before serves.
        assert_eq!(
            plan(&bases, &t, progress, Point::Before(1151))
                .unwrap()
                .base,
            0
        );
        let latest = plan(&bases, &t, progress, Point::Latest).unwrap();
        assert_eq!((latest.base, latest.stop_before), (1, None));
        // Both backups restore to any second after them up to the progress mark.
        assert_eq!(restorable_until(&bases[0], &t, progress), Some(1300));
        assert_eq!(restorable_until(&bases[1], &t, progress), Some(1300));
        // A mark whose position the history lacks proves nothing.
        let ahead = Some(Progress {
            checked_at: 1400,
            position: Some(g(0, 1, 201)),
        });
        assert_eq!(restorable_until(&bases[0], &t, ahead), None);
        let other = Some(Progress {
            checked_at: 1400,
            position: Some(g(0, 2, 200)),
        });
        assert_eq!(restorable_until(&bases[0], &t, other), None);
    }

    #[test]
    fn points_the_archive_does_not_reach_are_refused_with_the_reason() {
        let segments = vec![segment(1, 1, vec![run(1, 1, 100, 1000)])];
        let t = Timeline::build(&segments).unwrap();
        let bases = [base("b1", 50, 1051)];
        let progress = Some(Progress {
            checked_at: 1200,
            position: Some(g(0, 1, 100)),
        });
        assert_eq!(
            plan(&bases, &t, progress, Point::Before(1051)),
            Err(PlanError::BeforeEarliest {
                earliest: 1052,
                prefix: "b1".into()
            })
        );
        let err = plan(&bases, &t, progress, Point::Before(1201)).unwrap_err();
        assert!(err.to_string().contains("complete up to"), "{err}");
        let err = plan(&bases, &Timeline::default(), None, Point::Before(1100)).unwrap_err();
        assert!(err.to_string().contains("no binlogs are archived"), "{err}");
        // A gap after the backup.
        let gapped = Timeline::build(&[
            segment(1, 1, vec![run(1, 1, 60, 1000)]),
            segment(2, 1, vec![run(1, 80, 100, 1080)]),
        ])
        .unwrap();
        let err = plan(&bases, &gapped, progress, Point::Before(1100)).unwrap_err();
        assert!(err.to_string().contains("gap"), "{err}");
    }
}
