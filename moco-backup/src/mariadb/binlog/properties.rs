//! Properties of the archive's history, against a model of the cluster computed without the
//! timeline: primaries follow each other; each writes transactions, some acknowledged (a
//! replica has them) and, before a failover, some never acknowledged (lost with it). Each
//! primary's binlog is the history it knows; the archiver stores its files in rounds, as
//! `archive.rs` does (a file only when it adds to or changes the history), and may be cut
//! off before the old primary's last files. Whatever the cuts: the timeline holds exactly the
//! history the cluster kept, with no gap, and the read-back runs of every file are exact.

use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use super::events::{Gtid, summarize, tests::file};
use super::timeline::{Run, SEGMENT_FORMAT, Segment, Timeline, runs_of};
use crate::mariadb::physical::ObjectRecord;

/// One primary's term: its server id, transactions acknowledged, transactions never
/// acknowledged (lost at the failover that ends the term), where its binlog files end (as
/// fractions), and how many of its files the archiver stored before the failover.
#[derive(Clone, Debug)]
struct Term {
    server_id: u32,
    acked: u64,
    lost: u64,
    cuts: Vec<u8>,
    archived_before_failover: usize,
}

fn terms() -> impl Strategy<Value = Vec<Term>> {
    prop::collection::vec(
        (
            1u64..40,
            0u64..6,
            prop::collection::vec(0u8..100, 0..5),
            0usize..6,
        ),
        1..5,
    )
    .prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(|(i, (acked, lost, cuts, archived))| Term {
                server_id: i as u32 % 3 + 1,
                acked,
                lost,
                cuts,
                archived_before_failover: archived,
            })
            .collect()
    })
}

/// A model binlog file: its start state and its (commit second, GTID) transactions.
type ModelFile = (Vec<Gtid>, Vec<(u32, Gtid)>);

fn segment(at: u64, server_id: u32, runs: Vec<Run>, start_state: Vec<Gtid>) -> Segment {
    Segment {
        format_version: SEGMENT_FORMAT,
        server_id,
        file: format!("binlog.{at:06}"),
        archived_at_ms: at,
        domain: 0,
        start_state,
        runs,
        object: ObjectRecord {
            key: String::new(),
            size: 0,
            uncompressed_size: 0,
            sha256: String::new(),
        },
    }
}

/// Runs the model; returns whether the case lost transactions that had been archived.
fn check(terms: &[Term]) -> Result<bool, TestCaseError> {
    // The history the cluster keeps, as (seq, server) from 1 on.
    let mut kept: Vec<u32> = Vec::new();
    let mut segments: Vec<Segment> = Vec::new();
    let mut clock = 0u64;
    let mut archived_lost = false;
    for (i, term) in terms.iter().enumerate() {
        let last = i + 1 == terms.len();
        // This primary's binlog: what it received, then its own transactions.
        let mut binlog: Vec<(u32, u64)> = kept
            .iter()
            .enumerate()
            .map(|(s, id)| (*id, s as u64 + 1))
            .collect();
        let own_from = binlog.len();
        let lost = if last { 0 } else { term.lost };
        for k in 0..term.acked + lost {
            binlog.push((term.server_id, kept.len() as u64 + 1 + k));
        }
        // Its files: consecutive pieces ending at the cuts (and at the end).
        let mut ends: Vec<usize> = term
            .cuts
            .iter()
            .map(|c| own_from + (*c as usize * (binlog.len() - own_from)) / 100)
            .filter(|e| *e > 0)
            .collect();
        ends.push(binlog.len());
        ends.sort_unstable();
        ends.dedup();
        let mut start = 0;
        let mut files: Vec<ModelFile> = Vec::new();
        for end in ends {
            let state = if start == 0 {
                Vec::new()
            } else {
                let (server_id, seq) = binlog[start - 1];
                vec![Gtid {
                    domain: 0,
                    server_id,
                    seq,
                }]
            };
            let txns = binlog[start..end]
                .iter()
                .map(|&(server_id, seq)| {
                    (
                        seq as u32,
                        Gtid {
                            domain: 0,
                            server_id,
                            seq,
                        },
                    )
                })
                .collect();
            files.push((state, txns));
            start = end;
        }
        // The archiver: every file in order on the last term; before a failover, only the
        // first few (it is cut off).
        let stored = if last {
            files.len()
        } else {
            term.archived_before_failover.min(files.len())
        };
        for (state, txns) in files.into_iter().take(stored) {
            let bytes = file(&state, &txns);
            let summary =
                summarize(&bytes[..], false).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let (_, runs) = runs_of(&summary).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let covered: u64 = runs.iter().map(|r| r.last_seq - r.first_seq + 1).sum();
            prop_assert_eq!(covered, txns.len() as u64, "runs cover the file");
            let timeline =
                Timeline::build(&segments).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if !runs.is_empty() && timeline.would_change(&runs) {
                clock += 1;
                if runs
                    .iter()
                    .any(|r| r.last_seq > (kept.len() as u64 + term.acked))
                {
                    archived_lost = true;
                }
                segments.push(segment(clock, term.server_id, runs, summary.start_state));
            }
        }
        kept.extend(std::iter::repeat_n(term.server_id, term.acked as usize));
    }
    let timeline = Timeline::build(&segments).map_err(|e| TestCaseError::fail(e.to_string()))?;
    for (i, server) in kept.iter().enumerate() {
        prop_assert_eq!(
            timeline.server_at(i as u64 + 1),
            Some(*server),
            "seq {}",
            i + 1
        );
    }
    prop_assert_eq!(
        timeline.server_at(kept.len() as u64 + 1),
        None,
        "nothing past the kept history"
    );
    prop_assert_eq!(timeline.stretches().len(), 1, "no gap");
    Ok(archived_lost)
}

#[test]
fn the_timeline_is_the_history_the_cluster_kept() {
    let mut runner = TestRunner::new(crate::property_seed::config(
        "the_timeline_is_the_history_the_cluster_kept",
        512,
    ));
    let seen_lost = std::cell::Cell::new(0u32);
    let result = runner.run(&terms(), |terms| {
        if check(&terms)? {
            seen_lost.set(seen_lost.get() + 1);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The case that matters most occurred: archived transactions the failover lost.
    assert!(
        seen_lost.get() > 20,
        "only {} cases archived lost transactions",
        seen_lost.get()
    );
}
