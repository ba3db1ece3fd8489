//! What the engine should decide, computed from the ledger with this file's own simple code
//! (counts per origin), written from `docs/clustering.md` and never from the engine's
//! `Decision::assessment`. When the engine and this file disagree, one of them is wrong.

use moco_core::facts::{Flavor, ThreadState};
use moco_core::state::ClusterState;

use crate::ledger::{Inst, Ledger, Origin, PORT, Source, Txns};

/// A non-primary with semi-sync sessions waiting for acknowledgements: a hung former primary.
/// It counts as unreachable everywhere but in the errant check.
pub fn hung(l: &Ledger, i: u32) -> bool {
    let inst = l.inst(i);
    i != l.primary && inst.reachable && inst.semi.wait_sessions > 0
}

/// Reachable and not hung: what the engine may ask and use.
pub fn usable_mysqld(l: &Ledger, i: u32) -> Option<&Inst> {
    let inst = l.inst(i);
    (inst.reachable && !hung(l, i)).then_some(inst)
}

/// True when `exec` holds a transaction `reference` lacks whose origin is not the server
/// `identity`.
fn foreign_beyond(exec: &Txns, reference: &Txns, identity: Origin) -> bool {
    exec.beyond(reference).any(|o| !o.same_server(identity))
}

/// The primary can be asked about errant transactions: it answers and has data.
fn primary_can_judge(l: &Ledger) -> bool {
    let p = l.inst(l.primary);
    p.reachable && !p.executed.is_empty()
}

/// The errant instances: against the primary's executed set when it can be asked (an
/// unreachable instance keeps its remembered verdict), otherwise the remembered list.
pub fn errant(l: &Ledger) -> Vec<u32> {
    let p = l.inst(l.primary);
    if primary_can_judge(l) {
        l.others()
            .into_iter()
            .filter(|&i| {
                let inst = l.inst(i);
                if inst.reachable {
                    foreign_beyond(&inst.executed, &p.executed, p.identity)
                } else {
                    l.remembered_errant.contains(&i)
                }
            })
            .collect()
    } else {
        let mut list: Vec<u32> = l
            .remembered_errant
            .iter()
            .copied()
            .filter(|&i| i != l.primary)
            .collect();
        list.sort_unstable();
        list.dedup();
        list
    }
}

pub fn hung_list(l: &Ledger) -> Vec<u32> {
    (0..l.n).filter(|&i| hung(l, i)).collect()
}

/// The channel replicates from the primary's host and port.
fn from_primary(l: &Ledger, inst: &Inst) -> bool {
    inst.channel
        .as_ref()
        .is_some_and(|c| c.source == Source::Instance(l.primary) && c.port == PORT)
}

/// MOCO's ok replica (a switchover candidate): reachable, not hung, Pod ready, fenced,
/// replicating from the primary with both threads running, not errant.
pub fn ok_replica(l: &Ledger, errant: &[u32], i: u32) -> bool {
    let Some(inst) = usable_mysqld(l, i) else {
        return false;
    };
    i != l.primary
        && inst.pod.exists
        && inst.pod.ready
        && inst.super_read_only
        && !errant.contains(&i)
        && from_primary(l, inst)
        && inst
            .channel
            .as_ref()
            .is_some_and(|c| c.io == ThreadState::Yes && c.sql == ThreadState::Yes)
}

pub fn candidates(l: &Ledger) -> Vec<u32> {
    let errant = errant(l);
    (0..l.n).filter(|&i| ok_replica(l, &errant, i)).collect()
}

/// The primary answers with an empty executed set while a reachable replica has data that is
/// not the primary's own (MySQL: the primary's UUID; MariaDB: any), and no commit waits.
pub fn lost_data(l: &Ledger) -> bool {
    let p = l.inst(l.primary);
    p.reachable
        && p.executed.is_empty()
        && p.semi.wait_sessions == 0
        && l.others().into_iter().any(|i| {
            usable_mysqld(l, i).is_some_and(|inst| match l.flavor {
                Flavor::Mysql => inst.executed.0.keys().any(|o| !o.same_server(p.identity)),
                Flavor::Mariadb => !inst.executed.is_empty(),
            })
        })
}

/// A replica lags more than `maxDelaySecondsForPodDeletion` (hung ones included: they answer).
pub fn prevent_deletion(l: &Ledger) -> bool {
    l.max_delay > 0
        && l.others().into_iter().any(|i| {
            let inst = l.inst(i);
            inst.reachable
                && inst
                    .channel
                    .as_ref()
                    .and_then(|c| c.lag)
                    .is_some_and(|lag| lag > l.max_delay)
        })
}

fn required_acks(l: &Ledger) -> u32 {
    match l.flavor {
        Flavor::Mysql => l.n / 2,
        Flavor::Mariadb => (l.n / 2).min(1),
    }
}

/// Replicas needed to fail over without losing an acknowledged commit.
pub fn quorum(l: &Ledger) -> u32 {
    l.n - required_acks(l)
}

/// Distinct server ids of this cluster among the replicas the primary reports.
fn seen_replicas(l: &Ledger) -> u32 {
    let p = l.inst(l.primary);
    if !p.reachable {
        return 0;
    }
    let mut ids: Vec<u32> = p
        .replica_hosts
        .iter()
        .copied()
        .filter(|&id| id >= l.base && id < l.base + l.n)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len() as u32
}

/// Replicas a failover could use: not errant, reachable, not hung, replicating, with data.
pub fn usable_for_failover(l: &Ledger, errant: &[u32]) -> u32 {
    l.others()
        .into_iter()
        .filter(|i| !errant.contains(i))
        .filter_map(|i| usable_mysqld(l, i))
        .filter(|inst| inst.channel.is_some() && !inst.executed.is_empty())
        .count() as u32
}

/// The state, by the table of `docs/clustering.md` (first match wins).
pub fn state(l: &Ledger) -> ClusterState {
    if l.offline {
        return ClusterState::Offline;
    }
    let p = l.inst(l.primary);
    if l.external && !l.cloned {
        let cloning = !p.reachable
            || match p.clone_state {
                Some(s) => s != moco_core::facts::CloneState::Completed,
                None => p.executed.is_empty(),
            };
        if cloning {
            return ClusterState::Cloning;
        }
    }
    if l.restore && !l.restored {
        return ClusterState::Restoring;
    }
    let errant = errant(l);
    let open = p.reachable
        && if l.external {
            p.super_read_only
        } else {
            !p.read_only
        };
    let lost = lost_data(l);
    let ok = l
        .others()
        .into_iter()
        .filter(|&i| ok_replica(l, &errant, i))
        .count() as u32;
    let all_ready = l.insts.iter().all(|i| i.pod.exists && i.pod.ready);
    if all_ready && open && !lost && ok == l.n - 1 && seen_replicas(l) == l.n - 1 {
        return ClusterState::Healthy;
    }
    let half = l.n / 2;
    if p.pod.exists
        && p.pod.ready
        && open
        && !lost
        && seen_replicas(l) >= half
        && ok >= half
        && ok != l.n - 1
    {
        return ClusterState::Degraded;
    }
    if !p.reachable || lost {
        return if l.n > 1 && usable_for_failover(l, &errant) >= quorum(l) {
            ClusterState::Failed
        } else {
            ClusterState::Lost
        };
    }
    ClusterState::Incomplete
}

/// The switchover target in a Healthy or Degraded cluster: a requested target other than
/// the primary must be a candidate (a request names its target, so another one is never
/// chosen instead); without one, a deleting or demoted primary goes to the lowest-ordinal
/// candidate.
pub fn switch_target(l: &Ledger) -> Option<u32> {
    let p = l.inst(l.primary);
    let requested = l.switchover_to.filter(|&t| t != l.primary);
    if !(p.pod.deleting || p.pod.demote || requested.is_some()) {
        return None;
    }
    let candidates = candidates(l);
    match requested {
        Some(t) => candidates.contains(&t).then_some(t),
        None => candidates.first().copied(),
    }
}

/// The plan the engine must make, as far as this file models it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Offline, Lost or Healthy without a switchover: at most label and annotation repairs.
    Quiet,
    /// Pods missing, restoring or cloning: nothing clustering-related.
    Wait,
    /// Switchover to `target`.
    Switchover { target: u32 },
    /// First failover round: stop these IO threads (ascending), promote nobody.
    StopIo { replicas: Vec<u32> },
    /// Second failover round: promote `target` once it applied `set`.
    Promote {
        target: u32,
        start_sql: bool,
        set: Txns,
        errant: Vec<u32>,
    },
    /// Second failover round with incomparable received sets: refuse.
    Refuse,
    /// Configure (Degraded without a switchover, Incomplete).
    Configure,
}

pub fn expect(l: &Ledger) -> Expect {
    let s = state(l);
    if s == ClusterState::Offline {
        return Expect::Quiet;
    }
    if l.insts.iter().any(|i| !i.pod.exists) {
        return Expect::Wait;
    }
    match s {
        ClusterState::Offline | ClusterState::Lost => Expect::Quiet,
        ClusterState::Restoring | ClusterState::Cloning => Expect::Wait,
        ClusterState::Healthy | ClusterState::Degraded => match switch_target(l) {
            Some(target) if !prevent_deletion(l) => Expect::Switchover { target },
            _ if s == ClusterState::Degraded => Expect::Configure,
            _ => Expect::Quiet,
        },
        ClusterState::Failed => failover(l),
        ClusterState::Incomplete => Expect::Configure,
    }
}

/// Replicas whose IO thread the first failover round stops: every reachable, non-hung
/// non-primary whose IO thread runs or connects (errant ones too).
pub fn running_io(l: &Ledger) -> Vec<u32> {
    l.others()
        .into_iter()
        .filter(|&i| usable_mysqld(l, i).is_some_and(Inst::io_running))
        .collect()
}

/// Failover replicas: not errant, reachable, not hung, with a replication channel.
pub fn eligible(l: &Ledger) -> Vec<u32> {
    let errant = errant(l);
    l.others()
        .into_iter()
        .filter(|i| !errant.contains(i))
        .filter(|&i| usable_mysqld(l, i).is_some_and(|inst| inst.channel.is_some()))
        .collect()
}

/// The most advanced eligible replica: its received set holds every other eligible
/// replica's; among equal sets the one that executed most, then the lowest ordinal.
pub fn most_advanced(l: &Ledger) -> Option<u32> {
    let eligible = eligible(l);
    let holds_all = |i: u32| {
        let mine = l.inst(i).received();
        eligible
            .iter()
            .all(|&j| mine.contains(&l.inst(j).received()))
    };
    let mut best: Option<u32> = None;
    for &i in &eligible {
        if !holds_all(i) {
            continue;
        }
        let better = match best {
            None => true,
            Some(b) => l.inst(i).executed.total() > l.inst(b).executed.total(),
        };
        if better {
            best = Some(i);
        }
    }
    best
}

fn failover(l: &Ledger) -> Expect {
    let running = running_io(l);
    if !running.is_empty() {
        return Expect::StopIo { replicas: running };
    }
    let Some(target) = most_advanced(l) else {
        return Expect::Refuse;
    };
    let inst = l.inst(target);
    let set = inst.received();
    Expect::Promote {
        target,
        start_sql: inst
            .channel
            .as_ref()
            .is_some_and(|c| c.sql != ThreadState::Yes),
        errant: errant_against(l, target, &set),
        set,
    }
}

/// The errant list to persist with a promotion of `target` holding `set`: instances that can
/// be asked are judged against `set` (ignoring the target's own transactions); the others keep
/// the verdict they had.
pub fn errant_against(l: &Ledger, target: u32, set: &Txns) -> Vec<u32> {
    let before = errant(l);
    let identity = l.inst(target).identity;
    (0..l.n)
        .filter(|&i| i != target)
        .filter(|&i| match usable_mysqld(l, i) {
            Some(inst) => foreign_beyond(&inst.executed, set, identity),
            None => before.contains(&i),
        })
        .collect()
}

/// The clone donor for `target`: the ok replica with data and the least lag (unknown lag
/// counts as the most), lowest ordinal on ties; the primary when there is none.
pub fn donor(l: &Ledger, target: u32) -> u32 {
    let errant = errant(l);
    l.others()
        .into_iter()
        .filter(|&i| i != target && ok_replica(l, &errant, i))
        .filter(|&i| !l.inst(i).executed.is_empty())
        .min_by_key(|&i| {
            let lag = l.inst(i).channel.as_ref().and_then(|c| c.lag);
            (lag.unwrap_or(u64::MAX), i)
        })
        .unwrap_or(l.primary)
}

/// The replicas a configure round must clone: errant ones when re-cloning is on, and empty
/// ones whose replication cannot start from the primary's binlogs (no channel, unless MariaDB
/// can replay every binlog; or a channel that failed with error 1236).
pub fn clones(l: &Ledger) -> Vec<u32> {
    let p = l.inst(l.primary);
    if !p.reachable || p.executed.is_empty() {
        return Vec::new();
    }
    let errant = errant(l);
    let replay = l.flavor == Flavor::Mariadb && p.purged.is_empty();
    l.others()
        .into_iter()
        .filter(|&i| {
            let Some(inst) = usable_mysqld(l, i) else {
                return false;
            };
            if errant.contains(&i) {
                return l.reclone_errant;
            }
            let broken = inst
                .channel
                .as_ref()
                .is_some_and(|c| c.last_io_errno == 1236);
            inst.executed.is_empty() && (broken || (inst.channel.is_none() && !replay))
        })
        .collect()
}

/// The primary must be opened by this plan.
pub fn opens_primary(l: &Ledger) -> bool {
    let p = l.inst(l.primary);
    expect(l) == Expect::Configure
        && p.reachable
        && !l.external
        && p.read_only
        && !empty_primary_held(l)
}

/// An empty primary waits until `quorum` replicas answer (none of them has data, or the state
/// would be Failed): only then can no acknowledged commit exist elsewhere.
pub fn empty_primary_held(l: &Ledger) -> bool {
    let p = l.inst(l.primary);
    let answering = l
        .others()
        .into_iter()
        .filter(|&i| usable_mysqld(l, i).is_some())
        .count() as u32;
    p.executed.is_empty() && l.n > 1 && answering < quorum(l)
}
