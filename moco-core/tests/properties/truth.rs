//! What the engine should decide, computed from the ledger with this file's own simple code
//! (counts per origin), written from `docs/clustering.md` and never from the engine's
//! `Decision::assessment`. When the engine and this file disagree, one of them is wrong.

use moco_core::facts::{Flavor, ThreadState};
use moco_core::state::ClusterState;

use super::ledger::{Inst, Ledger, Origin, PORT, Source, Txns};

/// A non-primary with semi-sync sessions waiting for acknowledgements: a hung former primary.
/// It counts as unreachable everywhere but in the errant check.
pub(super) fn hung(l: &Ledger, i: u32) -> bool {
    let inst = l.inst(i);
    i != l.primary && inst.reachable && inst.semi.wait_sessions > 0
}

/// Reachable and not hung: what the engine may ask and use.
pub(super) fn usable_mysqld(l: &Ledger, i: u32) -> Option<&Inst> {
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
pub(super) fn errant(l: &Ledger) -> Vec<u32> {
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

pub(super) fn hung_list(l: &Ledger) -> Vec<u32> {
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
pub(super) fn ok_replica(l: &Ledger, errant: &[u32], i: u32) -> bool {
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

pub(super) fn candidates(l: &Ledger) -> Vec<u32> {
    let errant = errant(l);
    (0..l.n).filter(|&i| ok_replica(l, &errant, i)).collect()
}

/// The primary answers with an empty executed set while a reachable replica has data that is
/// not the primary's own (MySQL: the primary's UUID; MariaDB: any), and no commit waits.
pub(super) fn lost_data(l: &Ledger) -> bool {
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
pub(super) fn prevent_deletion(l: &Ledger) -> bool {
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

/// MOCO's `floor(k/2)` ACKs for `k` instances; MariaDB waits for at most one.
pub(super) fn acks_for(l: &Ledger, k: u32) -> u32 {
    match l.flavor {
        Flavor::Mysql => k / 2,
        Flavor::Mariadb => (k / 2).min(1),
    }
}

fn required_acks(l: &Ledger) -> u32 {
    acks_for(l, l.spec)
}

/// Replicas needed before an empty primary opens (every instance of `spec.replicas` counts
/// here; any instance listed may answer).
pub(super) fn quorum(l: &Ledger) -> u32 {
    l.spec - required_acks(l)
}

/// An instance past `spec.replicas`: the cluster shrinks and it leaves.
pub(super) fn leaving(l: &Ledger, i: u32) -> bool {
    i >= l.spec
}

/// The leaving instances may stop counting as members (docs/clustering.md, "Shrinking"): the
/// primary stays; every leaving instance's Pod is gone, or it answers with no IO thread
/// running (stopped, or no channel); and at least the new size's count of remaining replicas
/// (not errant, answering) hold everything the primary executed, applied or in their relay
/// logs.
pub(super) fn released(l: &Ledger) -> bool {
    if leaving(l, l.primary) {
        return false;
    }
    let silent = (l.spec..l.n).all(|i| {
        !l.inst(i).pod.exists
            || usable_mysqld(l, i).is_some_and(|inst| {
                inst.channel
                    .as_ref()
                    .is_none_or(|c| c.io == ThreadState::No)
            })
    });
    let p = l.inst(l.primary);
    let errant = errant(l);
    let holding = (0..l.spec)
        .filter(|&i| i != l.primary && !errant.contains(&i))
        .filter_map(|i| usable_mysqld(l, i))
        .filter(|inst| inst.received().contains(&p.executed))
        .count() as u32;
    silent && holding >= acks_for(l, l.spec)
}

/// A learner (ordinal at or past the recorded members) that may join: it answers, is not
/// errant, replicates from the primary with its IO thread running and has everything the
/// primary executed (applied or in its relay log).
pub(super) fn joins(l: &Ledger, errant: &[u32], i: u32) -> bool {
    let Some(inst) = usable_mysqld(l, i) else {
        return false;
    };
    let p = l.inst(l.primary);
    let Some(ch) = inst.channel.as_ref() else {
        return false;
    };
    !errant.contains(&i)
        && from_primary(l, inst)
        && ch.io == ThreadState::Yes
        && inst.executed.union(&ch.retrieved).contains(&p.executed)
}

/// The members after this round: the recorded number (every instance listed when none is
/// recorded), then learners in ordinal order while each one joins (the primary, a learner
/// promoted by a failover, has joined), or the new size once the
/// leaving instances are [`released`]. Nothing changes while the primary cannot be asked. An
/// intermediate cluster's members are its size.
pub(super) fn members(l: &Ledger) -> u32 {
    if l.external {
        return l.spec;
    }
    let mut m = l.members.unwrap_or(l.n);
    if usable_mysqld(l, l.primary).is_none() {
        return m;
    }
    let errant = errant(l);
    while m < l.spec && (m == l.primary || joins(l, &errant, m)) {
        m += 1;
    }
    if m > l.spec && released(l) {
        m = l.spec;
    }
    m
}

/// The wait count the primary should run with: the members' count, and no more than the new
/// size's while instances leave.
pub(super) fn wait_count(l: &Ledger) -> u32 {
    if l.external {
        0
    } else {
        acks_for(l, members(l).min(l.spec))
    }
}

/// What the primary runs with (0: semi-sync off; MariaDB reports no count and waits for one).
pub(super) fn running_count(inst: &Inst) -> u32 {
    match (inst.semi.source_enabled, inst.semi.wait_for_replica_count) {
        (false, _) => 0,
        (true, Some(k)) => k,
        (true, None) => 1,
    }
}

/// The fewest ACKs an acknowledged commit may have had, after this round. Written as the
/// rules in docs/clustering.md say it: start from the record (the members' count when none),
/// take the writable primary's running count if lower, drop to the new wait count if that is
/// lower, else rise to what the members holding all of the primary's executed set prove, but
/// never above the new wait count.
pub(super) fn min_acks(l: &Ledger) -> u32 {
    let recorded_members = l.members.unwrap_or(l.n);
    let mut floor = l.min_acks.unwrap_or(acks_for(l, recorded_members));
    if l.external {
        return floor;
    }
    let p = usable_mysqld(l, l.primary);
    let running = p.filter(|p| !p.read_only).map(running_count);
    if let Some(k) = running
        && k < floor
    {
        floor = k;
    }
    let want = wait_count(l);
    if want < floor {
        return want;
    }
    if let (Some(p), Some(k)) = (p, running)
        && k > floor
    {
        let m = members(l);
        let errant = errant(l);
        let mut holding = 0;
        for i in l.others() {
            if i >= m || errant.contains(&i) {
                continue;
            }
            if let Some(inst) = usable_mysqld(l, i) {
                let received = match &inst.channel {
                    Some(c) => inst.executed.union(&c.retrieved),
                    None => inst.executed.clone(),
                };
                if received.contains(&p.executed) {
                    holding += 1;
                }
            }
        }
        floor = floor.max(k.min(holding).min(want));
    }
    floor
}

/// `status.semiSyncMembers` and `status.semiSyncMinAcks` as the round records them: the
/// members always, the floor only while it is below what the members need. An intermediate
/// cluster keeps whatever was recorded.
pub(super) fn recorded(l: &Ledger) -> (Option<u32>, Option<u32>) {
    if l.external {
        return (
            (l.members.is_some() || l.n > l.spec).then_some(l.spec),
            l.min_acks,
        );
    }
    let m = members(l);
    let floor = min_acks(l);
    (Some(m), (floor != acks_for(l, m)).then_some(floor))
}

/// Every instance is a member, the primary runs the wanted count and every answering replica
/// has its semi-sync flag on.
fn settled(l: &Ledger) -> bool {
    if l.external {
        return true;
    }
    let p = l.inst(l.primary);
    members(l) == l.spec
        && l.n == l.spec
        && running_count(p) == wait_count(l)
        && l.others()
            .into_iter()
            .filter_map(|i| usable_mysqld(l, i))
            .all(|inst| inst.semi.replica_enabled)
}

/// Members other than the primary a failover needs: each acknowledged commit is on
/// `min_acks` of them. `None` when commits may have been acknowledged by nobody.
pub(super) fn failover_quorum(l: &Ledger) -> Option<u32> {
    let m = members(l);
    let floor = min_acks(l);
    let others = if l.primary < m { m - 1 } else { m };
    (floor > 0).then(|| others.saturating_sub(floor) + 1)
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
        .filter(|&id| id >= l.base && id < l.base + l.spec)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len() as u32
}

/// Replicas a failover could use: not errant, reachable, not hung, replicating, with data.
pub(super) fn usable_for_failover(l: &Ledger, errant: &[u32]) -> u32 {
    let m = members(l);
    l.others()
        .into_iter()
        .filter(|&i| i < m && !errant.contains(&i))
        .filter_map(|i| usable_mysqld(l, i))
        .filter(|inst| inst.channel.is_some() && !inst.executed.is_empty())
        .count() as u32
}

/// The state, by the table of `docs/clustering.md` (first match wins).
pub(super) fn state(l: &Ledger) -> ClusterState {
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
    let settled = open && settled(l);
    if all_ready && open && !lost && ok == l.n - 1 && seen_replicas(l) == l.spec - 1 && settled {
        return ClusterState::Healthy;
    }
    // Learners are not needed for a commit: only members count towards Degraded (of a
    // shrinking cluster, half of its new size).
    let m = members(l);
    let half = m.min(l.spec) / 2;
    let ok_members = l
        .others()
        .into_iter()
        .filter(|&i| i < m && ok_replica(l, &errant, i))
        .count() as u32;
    if p.pod.exists
        && p.pod.ready
        && open
        && !lost
        && seen_replicas(l) >= half
        && ok_members >= half
        && (ok_members != l.spec - 1 || !settled)
    {
        return ClusterState::Degraded;
    }
    if !p.reachable || lost {
        let usable = usable_for_failover(l, &errant);
        return match failover_quorum(l) {
            Some(need) if usable >= need => ClusterState::Failed,
            _ => ClusterState::Lost,
        };
    }
    ClusterState::Incomplete
}

/// The switchover target in a Healthy or Degraded cluster: a requested target other than
/// the primary must be a candidate (a request names its target, so another one is never
/// chosen instead); without one, a deleting or demoted primary goes to the lowest-ordinal
/// candidate.
pub(super) fn switch_target(l: &Ledger) -> Option<u32> {
    let p = l.inst(l.primary);
    let requested = l.switchover_to.filter(|&t| t != l.primary);
    if !(p.pod.deleting || p.pod.demote || requested.is_some() || leaving(l, l.primary)) {
        return None;
    }
    let candidates = candidates(l);
    match requested {
        Some(t) => (candidates.contains(&t) && !lags_as_target(l, t)).then_some(t),
        None => candidates.into_iter().find(|&c| !leaving(l, c)),
    }
}

/// A requested target further behind the primary than MOCO gives a primary to turn
/// read-only (10 s) is refused.
pub(super) fn lags_as_target(l: &Ledger, t: u32) -> bool {
    l.inst(t)
        .channel
        .as_ref()
        .and_then(|c| c.lag)
        .is_some_and(|lag| lag > 10)
}

/// The plan the engine must make, as far as this file models it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expect {
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

pub(super) fn expect(l: &Ledger) -> Expect {
    let s = state(l);
    if s == ClusterState::Offline {
        return Expect::Quiet;
    }
    if (0..l.spec).any(|i| !l.inst(i).pod.exists) {
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
pub(super) fn running_io(l: &Ledger) -> Vec<u32> {
    l.others()
        .into_iter()
        .filter(|&i| usable_mysqld(l, i).is_some_and(Inst::io_running))
        .collect()
}

/// Failover replicas: not errant, reachable, not hung, with a replication channel.
pub(super) fn eligible(l: &Ledger) -> Vec<u32> {
    let errant = errant(l);
    l.others()
        .into_iter()
        .filter(|i| !errant.contains(i))
        .filter(|&i| usable_mysqld(l, i).is_some_and(|inst| inst.channel.is_some()))
        .collect()
}

/// The most advanced eligible replica: its received set holds every other eligible
/// replica's; among equal sets the one that executed most, then the lowest ordinal.
pub(super) fn most_advanced(l: &Ledger) -> Option<u32> {
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
pub(super) fn errant_against(l: &Ledger, target: u32, set: &Txns) -> Vec<u32> {
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
pub(super) fn donor(l: &Ledger, target: u32) -> u32 {
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
pub(super) fn clones(l: &Ledger) -> Vec<u32> {
    let p = l.inst(l.primary);
    if !p.reachable || p.executed.is_empty() {
        return Vec::new();
    }
    let errant = errant(l);
    let replay = l.flavor == Flavor::Mariadb && p.purged.is_empty();
    l.others()
        .into_iter()
        .filter(|&i| !leaving(l, i))
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
pub(super) fn opens_primary(l: &Ledger) -> bool {
    let p = l.inst(l.primary);
    expect(l) == Expect::Configure
        && p.reachable
        && !l.external
        && p.read_only
        && !empty_primary_held(l)
}

/// An empty primary waits until `quorum` replicas answer (none of them has data, or the state
/// would be Failed): only then can no acknowledged commit exist elsewhere.
pub(super) fn empty_primary_held(l: &Ledger) -> bool {
    let p = l.inst(l.primary);
    p.executed.is_empty() && l.spec > 1 && answering(l) < quorum(l)
}

/// Replicas whose mysqld answers.
pub(super) fn answering(l: &Ledger) -> u32 {
    l.others()
        .into_iter()
        .filter(|&i| usable_mysqld(l, i).is_some())
        .count() as u32
}
