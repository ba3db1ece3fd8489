//! Generators: one builder per situation the engine must handle (healthy, degraded, incomplete
//! after a switchover, the two failover rounds, errant replicas, switchover requests, empty
//! replicas to clone, and a mix of everything), each writing a [`Ledger`].
//!
//! Proptest supplies a fixed-length byte string and the builders draw every choice from it
//! through [`Dice`]. A zero byte always means "the simplest choice" (no fault, first option),
//! so shrinking the bytes towards zero shrinks the case towards a plain healthy cluster, and
//! every byte string gives valid facts: nothing is filtered out.

use moco_core::facts::{CloneState, Flavor, PodFacts, Role, SemiSyncFacts, ThreadState};
use proptest::prelude::*;

use super::ledger::{Case, Channel, Inst, Kind, Ledger, Origin, PORT, Source, Txns};

/// Bytes per case: more than the largest builder draws.
const RECIPE_LEN: usize = 400;

/// MySQL error 1236: the source no longer has the binlogs the replica asks for.
const ER_BINLOG_GONE: u32 = 1236;
/// MySQL error 1045: access denied.
const ER_ACCESS_DENIED: u32 = 1045;
/// MySQL error 2003: cannot connect.
const ER_CONNECT: u32 = 2003;

/// Draws choices from proptest's bytes; past the end every draw is 0.
pub(super) struct Dice<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Dice<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Dice { bytes, pos: 0 }
    }

    fn byte(&mut self) -> u32 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        u32::from(b)
    }

    /// Uniform in `0..n` (0 when `n <= 1`).
    pub(super) fn below(&mut self, n: u32) -> u32 {
        if n <= 1 {
            return 0;
        }
        let v = self.byte() << 8 | self.byte();
        ((u64::from(v) * u64::from(n)) >> 16) as u32
    }

    /// Uniform in `lo..=hi`.
    pub(super) fn within(&mut self, lo: u64, hi: u64) -> u64 {
        lo + u64::from(self.below(u32::try_from(hi - lo + 1).unwrap_or(u32::MAX)))
    }

    /// True with `percent`% probability; a zero byte is always false.
    pub(super) fn chance(&mut self, percent: u32) -> bool {
        self.byte() * 100 >= (100 - percent.min(100)) * 256
    }

    pub(super) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u32) as usize]
    }

    /// A choice by weight; zero bytes pick the first.
    pub(super) fn weighted<T: Copy>(&mut self, xs: &[(u32, T)]) -> T {
        let total: u32 = xs.iter().map(|(w, _)| w).sum();
        let mut r = self.below(total);
        for &(w, x) in xs {
            if r < w {
                return x;
            }
            r -= w;
        }
        xs[0].1
    }
}

/// Cases of the given kinds (by weight) and sizes.
pub(super) fn cases(
    kinds: &'static [(u32, Kind)],
    sizes: Option<&'static [u32]>,
) -> impl Strategy<Value = Case> {
    prop::collection::vec(any::<u8>(), RECIPE_LEN)
        .prop_map(move |bytes| Case::new(build(kinds, sizes, &bytes)))
}

/// Every kind, about evenly.
pub(super) const ALL: &[(u32, Kind)] = &[
    (10, Kind::Healthy),
    (14, Kind::Degraded),
    (12, Kind::Incomplete),
    (12, Kind::FailedFirstRound),
    (14, Kind::FailedSecondRound),
    (12, Kind::Errant),
    (14, Kind::Switchover),
    (8, Kind::Clone),
    (14, Kind::Misc),
    (10, Kind::Grow),
    (10, Kind::Shrink),
];

/// Every kind that keeps the size it is given: all but growth and shrinking, which add or
/// remove two instances (and stay last in [`ALL`]).
pub(super) const SIZED: &[(u32, Kind)] = ALL.split_at(ALL.len() - 2).0;

/// Builds one case.
pub(super) fn build(kinds: &[(u32, Kind)], sizes: Option<&[u32]>, bytes: &[u8]) -> Ledger {
    let mut d = Dice::new(bytes);
    let kind = d.weighted(kinds);
    let flavor = if d.chance(50) {
        Flavor::Mariadb
    } else {
        Flavor::Mysql
    };
    let n = match (sizes, kind) {
        (Some(sizes), _) => d.pick(sizes),
        (None, Kind::Grow | Kind::Shrink) => d.weighted(&[(50, 3), (50, 5)]),
        (None, Kind::FailedFirstRound | Kind::FailedSecondRound) => d.weighted(&[(45, 3), (55, 5)]),
        (None, Kind::Healthy | Kind::Misc) => d.weighted(&[(50, 3), (30, 5), (20, 1)]),
        (None, _) => d.weighted(&[(55, 3), (45, 5)]),
    };
    let mut l = healthy(&mut d, kind, flavor, n);
    match kind {
        Kind::Healthy => {}
        Kind::Degraded => degraded(&mut d, &mut l),
        Kind::Incomplete => incomplete(&mut d, &mut l),
        Kind::FailedFirstRound => failed(&mut d, &mut l, false),
        Kind::FailedSecondRound => failed(&mut d, &mut l, true),
        Kind::Errant => errant(&mut d, &mut l),
        Kind::Switchover => switchover(&mut d, &mut l),
        Kind::Clone => clone(&mut d, &mut l),
        Kind::Misc => misc(&mut d, &mut l),
        Kind::Grow => grow(&mut d, &mut l),
        Kind::Shrink => shrink(&mut d, &mut l),
    }
    finish(&mut d, &mut l);
    l
}

/// An ordinal other than `not` (which must not be the only one).
fn other(d: &mut Dice<'_>, n: u32, not: u32) -> u32 {
    (not + 1 + d.below(n - 1)) % n
}

/// A non-primary ordinal (`None` for a single instance).
fn replica_of(d: &mut Dice<'_>, l: &Ledger) -> Option<u32> {
    (l.n > 1).then(|| other(d, l.n, l.primary))
}

fn pod(role: Role) -> PodFacts {
    PodFacts {
        exists: true,
        ready: true,
        deleting: false,
        demote: false,
        prevent_delete: false,
        role_label: Some(role),
    }
}

/// A healthy cluster: a writable primary with semi-sync, every replica read-only and
/// replicating from it with both threads running, possibly a little behind.
fn healthy(d: &mut Dice<'_>, kind: Kind, flavor: Flavor, n: u32) -> Ledger {
    let base = d.pick(&[100, 1, 1000]);
    // A grown cluster's primary is one of the instances it had before, or sometimes the first
    // new one (a failover promoted a learner that held the most).
    let primary = match kind {
        Kind::Grow if d.chance(10) => n - 2,
        Kind::Grow => d.below(n - 2),
        _ => d.below(n),
    };
    let mut history = Txns::default();
    if n > 1 && d.chance(40) {
        // An earlier primary's writes, replicated everywhere.
        history.set(Origin::server(other(d, n, primary)), d.within(1, 8));
    }
    if d.chance(15) {
        history.set(Origin::Outsider(0), d.within(1, 5));
    }
    let writes = d.within(1, 30);
    let own = Origin::server(primary);
    let own1 = Origin::Server {
        index: primary,
        stream: 1,
    };
    let mut executed = history;
    executed.set(own, writes);
    if d.chance(20) {
        executed.set(own1, d.within(1, 3));
    }
    let max_delay = if d.chance(30) { d.within(5, 60) } else { 0 };
    let insts = (0..n)
        .map(|i| {
            if i == primary {
                primary_inst(flavor, n, i, &executed)
            } else {
                replica_inst(d, flavor, n, i, primary, &executed)
            }
        })
        .collect();
    Ledger {
        kind,
        flavor,
        n,
        spec: n,
        base,
        primary,
        max_delay,
        reclone_errant: false,
        external: false,
        offline: false,
        restore: false,
        restored: false,
        cloned: false,
        insts,
        remembered_errant: Vec::new(),
        switchover_to: None,
        made_errant: Vec::new(),
        order: (0..n).collect(),
        members: None,
        min_acks: None,
    }
}

/// The primary's second GTID stream (a MySQL tag, a MariaDB domain).
fn own1_of(primary: u32) -> Origin {
    Origin::Server {
        index: primary,
        stream: 1,
    }
}

fn primary_inst(flavor: Flavor, n: u32, i: u32, executed: &Txns) -> Inst {
    Inst {
        pod: pod(Role::Primary),
        reachable: true,
        identity: Origin::server(i),
        executed: executed.clone(),
        purged: Txns::default(),
        read_only: false,
        super_read_only: false,
        semi: SemiSyncFacts {
            source_enabled: n > 1,
            replica_enabled: false,
            wait_for_replica_count: (flavor == Flavor::Mysql).then_some(n / 2),
            source_timeout_ms: Some(86_400_000),
            wait_sessions: 0,
            source_clients: Some(n - 1),
        },
        channel: None,
        replica_hosts: Vec::new(),
        clone_state: None,
    }
}

fn replica_inst(
    d: &mut Dice<'_>,
    flavor: Flavor,
    n: u32,
    i: u32,
    primary: u32,
    primary_executed: &Txns,
) -> Inst {
    let own = Origin::server(primary);
    let writes = primary_executed.get(own);
    let behind = if d.chance(50) {
        u64::from(d.below(writes.min(4) as u32))
    } else {
        0
    };
    let mut executed = primary_executed.clone();
    executed.set(own, writes - behind);
    let mut retrieved = Txns::default();
    retrieved.set(own, writes - behind + d.within(0, behind));
    if behind == 0 && d.chance(12) {
        // Ahead of the primary's snapshot on the primary's own streams (it committed more
        // after it was observed, MOCO #419): not errant.
        let stream = if primary_executed.get(own1_of(primary)) > 0 && d.chance(50) {
            own1_of(primary)
        } else {
            own
        };
        let ahead = primary_executed.get(stream) + d.within(1, 2);
        executed.set(stream, ahead);
        retrieved.set(stream, ahead);
    }
    Inst {
        pod: pod(Role::Replica),
        reachable: true,
        identity: Origin::server(i),
        executed,
        purged: Txns::default(),
        read_only: true,
        super_read_only: true,
        semi: SemiSyncFacts {
            source_enabled: false,
            replica_enabled: true,
            wait_for_replica_count: (flavor == Flavor::Mysql).then_some(n / 2),
            source_timeout_ms: Some(86_400_000),
            wait_sessions: 0,
            source_clients: Some(0),
        },
        channel: Some(Channel {
            source: Source::Instance(primary),
            port: PORT,
            io: ThreadState::Yes,
            sql: ThreadState::Yes,
            last_io_errno: 0,
            retrieved,
            lag: Some(u64::from(d.below(4))),
        }),
        replica_hosts: Vec::new(),
        clone_state: None,
    }
}

/// What can go wrong with one replica.
#[derive(Clone, Copy, Debug)]
enum ReplicaFault {
    Unreachable,
    PodUnready,
    IoStopped,
    IoFailed,
    IoConnecting,
    AccessDenied,
    SqlStopped,
    WrongSource,
    WrongPort,
    FromReplica,
    Writable,
    NotSuperReadOnly,
    Errant,
    Hung,
    Empty,
    NoChannel,
    SemiSyncOff,
    SourceSideOn,
    Lagging,
    Behind,
    LabelMissing,
    LabelWrong,
    PreventDelete,
}

const REPLICA_FAULTS: &[ReplicaFault] = &[
    ReplicaFault::Unreachable,
    ReplicaFault::PodUnready,
    ReplicaFault::IoStopped,
    ReplicaFault::IoFailed,
    ReplicaFault::IoConnecting,
    ReplicaFault::AccessDenied,
    ReplicaFault::SqlStopped,
    ReplicaFault::WrongSource,
    ReplicaFault::WrongPort,
    ReplicaFault::FromReplica,
    ReplicaFault::Writable,
    ReplicaFault::NotSuperReadOnly,
    ReplicaFault::Errant,
    ReplicaFault::Hung,
    ReplicaFault::Empty,
    ReplicaFault::NoChannel,
    ReplicaFault::SemiSyncOff,
    ReplicaFault::SourceSideOn,
    ReplicaFault::Lagging,
    ReplicaFault::Behind,
    ReplicaFault::LabelMissing,
    ReplicaFault::LabelWrong,
    ReplicaFault::PreventDelete,
];

fn random_replica_fault(d: &mut Dice<'_>, l: &mut Ledger) {
    if let Some(i) = replica_of(d, l) {
        let fault = d.pick(REPLICA_FAULTS);
        replica_fault(d, l, i, fault);
    }
}

fn channel_mut(l: &mut Ledger, i: u32) -> Option<&mut Channel> {
    l.inst_mut(i).channel.as_mut()
}

fn replica_fault(d: &mut Dice<'_>, l: &mut Ledger, i: u32, fault: ReplicaFault) {
    match fault {
        ReplicaFault::Unreachable => l.inst_mut(i).reachable = false,
        ReplicaFault::PodUnready => l.inst_mut(i).pod.ready = false,
        ReplicaFault::IoStopped => set_io(l, i, ThreadState::No, 0),
        ReplicaFault::IoFailed => set_io(l, i, ThreadState::No, ER_CONNECT),
        ReplicaFault::IoConnecting => set_io(l, i, ThreadState::Connecting, 0),
        ReplicaFault::AccessDenied => set_io(l, i, ThreadState::Connecting, ER_ACCESS_DENIED),
        ReplicaFault::SqlStopped => stop_sql(d, l, i),
        ReplicaFault::WrongSource => {
            if let Some(c) = channel_mut(l, i) {
                c.source = Source::Elsewhere;
            }
        }
        ReplicaFault::WrongPort => {
            if let Some(c) = channel_mut(l, i) {
                c.port = PORT + 1;
            }
        }
        ReplicaFault::FromReplica => {
            let j = other(d, l.n, i);
            if let Some(c) = channel_mut(l, i) {
                c.source = Source::Instance(j);
            }
        }
        ReplicaFault::Writable => l.inst_mut(i).open(),
        ReplicaFault::NotSuperReadOnly => {
            let mysql = l.flavor == Flavor::Mysql;
            let inst = l.inst_mut(i);
            inst.super_read_only = false;
            inst.read_only = mysql;
        }
        ReplicaFault::Errant => make_errant(d, l, i),
        ReplicaFault::Hung => make_hung(d, l, i),
        ReplicaFault::Empty => make_empty(d, l, i),
        ReplicaFault::NoChannel => l.inst_mut(i).channel = None,
        ReplicaFault::SemiSyncOff => l.inst_mut(i).semi.replica_enabled = false,
        ReplicaFault::SourceSideOn => l.inst_mut(i).semi.source_enabled = true,
        ReplicaFault::Lagging => {
            let lag = l.max_delay + d.within(1, 30);
            if let Some(c) = channel_mut(l, i) {
                c.lag = Some(lag);
            }
        }
        ReplicaFault::Behind => fall_behind(d, l, i),
        ReplicaFault::LabelMissing => l.inst_mut(i).pod.role_label = None,
        ReplicaFault::LabelWrong => l.inst_mut(i).pod.role_label = Some(Role::Primary),
        ReplicaFault::PreventDelete => l.inst_mut(i).pod.prevent_delete = true,
    }
}

fn set_io(l: &mut Ledger, i: u32, io: ThreadState, errno: u32) {
    if let Some(c) = channel_mut(l, i) {
        c.io = io;
        c.last_io_errno = errno;
    }
}

/// Stops the SQL thread with a few received transactions not applied yet.
fn stop_sql(d: &mut Dice<'_>, l: &mut Ledger, i: u32) {
    let inst = l.inst_mut(i);
    let Some(c) = inst.channel.as_mut() else {
        return;
    };
    c.sql = ThreadState::No;
    // Move the applier back on the origin the channel fetched most of.
    if let Some((&o, &r)) = c.retrieved.0.iter().max_by_key(|&(_, &r)| r) {
        let applied = r.saturating_sub(d.within(0, 3)).max(1);
        if inst.executed.get(o) >= applied {
            inst.executed.set(o, applied);
        }
    }
}

/// Received less of the primary's writes (both fetched and applied).
fn fall_behind(d: &mut Dice<'_>, l: &mut Ledger, i: u32) {
    let own = Origin::server(l.primary);
    let inst = l.inst_mut(i);
    let k = d.within(1, 4);
    let executed = inst.executed.get(own).saturating_sub(k).max(1);
    if inst.executed.get(own) > 0 {
        inst.executed.set(own, executed);
    }
    if let Some(c) = inst.channel.as_mut() {
        if c.retrieved.get(own) > 0 {
            c.retrieved.set(own, executed);
        }
        c.lag = Some(k * 7);
    }
}

/// Gives instance `i` transactions the primary never had: a stray writer, its own writes on
/// either stream, or more of an earlier primary's writes than the primary holds.
fn make_errant(d: &mut Dice<'_>, l: &mut Ledger, i: u32) {
    let primary = l.primary;
    let old = l
        .inst(primary)
        .executed
        .0
        .keys()
        .copied()
        .find(|o| matches!(o, Origin::Server { index, .. } if *index != primary));
    let origin = match (d.below(4), old) {
        (0, _) => Origin::Outsider(1 + d.below(3)),
        (1, _) => Origin::Server {
            index: i,
            stream: 1,
        },
        (2, Some(old)) => old,
        _ => Origin::server(i),
    };
    let k = d.within(1, 3);
    let floor = l.inst(primary).executed.get(origin);
    let inst = l.inst_mut(i);
    let have = inst.executed.get(origin).max(floor);
    inst.executed.set(origin, have + k);
    l.made_errant.push(i);
}

/// A former primary that still waits for acknowledgements: semi-sync primary side on with
/// waiting sessions, maybe still writable and holding its unacknowledged commits.
fn make_hung(d: &mut Dice<'_>, l: &mut Ledger, i: u32) {
    let inst = l.inst_mut(i);
    inst.semi.wait_sessions = u64::from(1 + d.below(3));
    inst.semi.source_enabled = true;
    if d.chance(50) {
        inst.open();
    }
    if d.chance(40) {
        inst.channel = None;
    }
    if d.chance(50) {
        // Unacknowledged commits of its own, beyond anything the primary holds.
        let own = Origin::server(i);
        let floor = l.inst(l.primary).executed.get(own);
        let inst = l.inst_mut(i);
        let have = inst.executed.get(own).max(floor);
        inst.executed.set(own, have + d.within(1, 3));
        l.made_errant.push(i);
    }
}

/// A re-initialised instance: no data; a MySQL one has a new server_uuid.
fn make_empty(d: &mut Dice<'_>, l: &mut Ledger, i: u32) {
    let flavor = l.flavor;
    let inst = l.inst_mut(i);
    inst.executed = Txns::default();
    inst.purged = Txns::default();
    if flavor == Flavor::Mysql {
        inst.identity = Origin::Outsider(20 + i);
    }
    inst.fence();
    inst.pod.role_label = None;
    inst.channel = match d.below(3) {
        0 => None,
        1 => inst.channel.take().map(|mut c| {
            // Replication from the start failed: the primary purged what it needs.
            c.io = ThreadState::No;
            c.last_io_errno = ER_BINLOG_GONE;
            c.retrieved = Txns::default();
            c.lag = None;
            c
        }),
        _ => inst.channel.take().map(|mut c| {
            c.retrieved = Txns::default();
            c.lag = None;
            c
        }),
    };
    l.made_errant.retain(|&x| x != i);
}

/// What can go wrong with the primary while it runs.
#[derive(Clone, Copy, Debug)]
enum PrimaryFault {
    PodUnready,
    ReadOnly,
    SemiSyncOff,
    WaitCountWrong,
    LeftoverChannel,
    PreventDelete,
    LabelMissing,
    NoClients,
}

const PRIMARY_FAULTS: &[PrimaryFault] = &[
    PrimaryFault::PodUnready,
    PrimaryFault::ReadOnly,
    PrimaryFault::SemiSyncOff,
    PrimaryFault::WaitCountWrong,
    PrimaryFault::LeftoverChannel,
    PrimaryFault::PreventDelete,
    PrimaryFault::LabelMissing,
    PrimaryFault::NoClients,
];

fn primary_fault(d: &mut Dice<'_>, l: &mut Ledger) {
    let fault = d.pick(PRIMARY_FAULTS);
    let p = l.primary;
    let n = l.n;
    let inst = l.inst_mut(p);
    match fault {
        PrimaryFault::PodUnready => inst.pod.ready = false,
        PrimaryFault::ReadOnly => inst.fence(),
        PrimaryFault::SemiSyncOff => inst.semi.source_enabled = false,
        PrimaryFault::WaitCountWrong => {
            if let Some(c) = inst.semi.wait_for_replica_count.as_mut() {
                *c += 1;
            }
        }
        PrimaryFault::LeftoverChannel => leftover_channel(d, inst, (n > 1).then(|| (p + 1) % n)),
        PrimaryFault::PreventDelete => inst.pod.prevent_delete = true,
        PrimaryFault::LabelMissing => inst.pod.role_label = None,
        PrimaryFault::NoClients => inst.semi.source_clients = Some(0),
    }
}

/// A channel the new primary still has to its former source, possibly with received
/// transactions not applied yet (they must be applied before it opens).
/// `old` is `None` when the former source is no instance any more (a scaled-down cluster).
fn leftover_channel(d: &mut Dice<'_>, inst: &mut Inst, old: Option<u32>) {
    let mut retrieved = inst.executed.clone();
    if d.chance(50) {
        let origin = old.map_or(Origin::Outsider(9), Origin::server);
        retrieved.add(origin, d.within(1, 3));
    }
    inst.channel = Some(Channel {
        source: old.map_or(Source::Elsewhere, Source::Instance),
        port: PORT,
        io: d.pick(&[ThreadState::Yes, ThreadState::No, ThreadState::Connecting]),
        sql: ThreadState::Yes,
        last_io_errno: 0,
        retrieved,
        lag: Some(0),
    });
}

/// A running cluster with some replicas (and sometimes the primary) in trouble.
fn degraded(d: &mut Dice<'_>, l: &mut Ledger) {
    let faults = if l.n > 1 { 1 + d.below(l.n - 1) } else { 0 };
    for _ in 0..faults {
        random_replica_fault(d, l);
    }
    if l.n == 1 || d.chance(25) {
        primary_fault(d, l);
    }
}

/// Just after a switchover or failover moved the index: the new primary is still read-only
/// and may still replicate from the old one; replicas may still point at the old primary; the
/// old primary may be fenced, still writable, hung or gone.
fn incomplete(d: &mut Dice<'_>, l: &mut Ledger) {
    if l.n == 1 {
        l.inst_mut(0).fence();
        return;
    }
    if d.chance(12) {
        empty_start(d, l);
        return;
    }
    let old = l.primary;
    let new = other(d, l.n, old);
    l.primary = new;
    // The new primary caught up with the old one (it received everything).
    let all = l
        .insts
        .iter()
        .fold(Txns::default(), |acc, i| acc.union(&i.received()));
    {
        let inst = l.inst_mut(new);
        inst.executed = all.clone();
        inst.fence();
        inst.semi.source_enabled = false;
        inst.semi.replica_enabled = true;
        if let Some(c) = inst.channel.as_mut() {
            c.retrieved = all.clone();
            c.io = d.pick(&[ThreadState::Yes, ThreadState::No]);
            c.lag = Some(0);
        }
    }
    if d.chance(25) {
        // ... but it has not applied all of it yet.
        let inst = l.inst_mut(new);
        let o = Origin::server(old);
        let got = inst.executed.get(o);
        if got > 1 {
            inst.executed.set(o, got - 1);
        }
    }
    let old_inst = l.inst_mut(old);
    old_inst.channel = None;
    match d.weighted(&[(55, 0), (15, 1), (10, 2), (20, 3)]) {
        0 => old_inst.fence(),
        1 => {} // still writable: it must be fenced before the new primary opens
        2 => make_hung(d, l, old),
        _ => l.inst_mut(old).reachable = false,
    }
    for i in 0..l.n {
        if i != new
            && i != old
            && d.chance(35)
            && let Some(c) = channel_mut(l, i)
        {
            c.source = Source::Instance(new);
        }
    }
    if d.chance(30) {
        random_replica_fault(d, l);
    }
    if d.chance(15) {
        // Another writable instance: every one must be fenced before the primary opens.
        let i = other(d, l.n, new);
        l.inst_mut(i).open();
    }
}

/// Failover situations: the primary is gone (or lost its data). In the first round replicas'
/// IO threads still run; in the second every reachable replica's IO thread is stopped and
/// their received sets differ, so the most advanced is often not the lowest ordinal.
fn failed(d: &mut Dice<'_>, l: &mut Ledger, second_round: bool) {
    let p = l.primary;
    if l.n == 1 {
        l.inst_mut(p).reachable = false;
        return;
    }
    lose_primary(d, l);
    let quorum = l.n - required_acks(l.n, l.flavor);
    // Replicas that may be made unusable without losing the quorum (sometimes more: Lost).
    let mut budget = (l.n - 1).saturating_sub(quorum);
    if d.chance(12) {
        budget += 1 + d.below(2);
    }
    let own = Origin::server(p);
    let writes = l
        .insts
        .iter()
        .map(|i| i.received().get(own))
        .max()
        .unwrap_or(1);
    let spread = d.pick(&[0u64, 1, 2, 4]);
    for i in l.others() {
        spread_received(d, l, i, own, writes, spread);
        if d.chance(25) {
            stop_sql(d, l, i);
        }
        if budget > 0 && d.chance(45) {
            budget -= 1;
            unusable(d, l, i);
        } else if d.chance(12) {
            foreign_extra(d, l, i);
        } else if d.chance(10) {
            l.inst_mut(i).pod.ready = false;
        }
    }
    if d.chance(15) {
        // Two replicas with different foreign transactions: nobody holds everything.
        for i in l.others().into_iter().take(2) {
            foreign_extra(d, l, i);
        }
    }
    if d.chance(15) {
        // A stale or odd remembered list: the primary's own ordinal is ignored.
        l.remembered_errant.push(p);
    }
    settle_io(d, l, second_round);
}

/// The primary stops answering; rarely it answers with its data gone (lost data).
fn lose_primary(d: &mut Dice<'_>, l: &mut Ledger) {
    let p = l.primary;
    let flavor = l.flavor;
    let inst = l.inst_mut(p);
    if d.chance(8) {
        inst.executed = Txns::default();
        if flavor == Flavor::Mysql {
            inst.identity = Origin::Outsider(20 + p);
        }
        if d.chance(50) {
            inst.fence();
        }
    } else {
        inst.reachable = false;
        inst.pod.ready = d.chance(50);
    }
    inst.pod.deleting = d.chance(10);
}

/// Replica `i` received `writes − x` of the primary's writes, `x ≤ spread`, and applied some.
fn spread_received(
    d: &mut Dice<'_>,
    l: &mut Ledger,
    i: u32,
    own: Origin,
    writes: u64,
    spread: u64,
) {
    let got = writes.saturating_sub(d.within(0, spread)).max(1);
    let inst = l.inst_mut(i);
    let Some(c) = inst.channel.as_mut() else {
        return;
    };
    c.retrieved.set(own, got);
    let applied = if d.chance(50) {
        got
    } else {
        got.saturating_sub(d.within(0, 2)).max(1)
    };
    inst.executed.set(own, applied);
    if applied < got && d.chance(30) {
        c.sql = ThreadState::No;
    }
}

/// Makes replica `i` unusable for a failover: gone, hung, remembered errant, empty, or with no
/// channel. Unusable ones may hold more than anyone: they must still not be promoted.
fn unusable(d: &mut Dice<'_>, l: &mut Ledger, i: u32) {
    match d.weighted(&[(15, 0), (20, 1), (40, 2), (10, 3), (15, 4)]) {
        0 => l.inst_mut(i).reachable = false,
        1 => {
            make_hung(d, l, i);
            let own = Origin::server(l.primary);
            l.inst_mut(i).executed.add(own, 2);
        }
        2 => {
            l.remembered_errant.push(i);
            if d.chance(60) {
                let own = Origin::server(l.primary);
                let inst = l.inst_mut(i);
                inst.executed.add(own, 3);
                if let Some(c) = inst.channel.as_mut() {
                    c.retrieved.add(own, 3);
                }
            }
        }
        3 => make_empty(d, l, i),
        _ => l.inst_mut(i).channel = None,
    }
}

/// A transaction from elsewhere that the primary never showed anyone (not known as errant
/// while the primary cannot be asked), which can make received sets incomparable.
fn foreign_extra(d: &mut Dice<'_>, l: &mut Ledger, i: u32) {
    let origin = if d.chance(50) {
        Origin::Outsider(5 + i)
    } else {
        Origin::Server {
            index: i,
            stream: 1,
        }
    };
    l.inst_mut(i).executed.add(origin, 1);
}

/// First round: IO threads mostly running (at least one that the failover must stop).
/// Second round: every reachable replica's IO thread stopped.
fn settle_io(d: &mut Dice<'_>, l: &mut Ledger, second_round: bool) {
    let mut running = false;
    for i in l.others() {
        let inst = l.inst_mut(i);
        let hung = inst.semi.wait_sessions > 0;
        let Some(c) = inst.channel.as_mut() else {
            continue;
        };
        if c.last_io_errno == ER_BINLOG_GONE {
            continue;
        }
        if second_round && !hung {
            c.io = ThreadState::No;
            c.last_io_errno = if d.chance(30) { ER_CONNECT } else { 0 };
        } else {
            c.io = d.weighted(&[
                (75, ThreadState::Yes),
                (15, ThreadState::Connecting),
                (10, ThreadState::No),
            ]);
            running |= c.io != ThreadState::No && inst.reachable && !hung;
        }
    }
    if !second_round && !running {
        let first = l.others().into_iter().find(|&i| {
            let inst = l.inst(i);
            inst.reachable && inst.semi.wait_sessions == 0 && inst.channel.is_some()
        });
        if let Some(c) = first.and_then(|i| channel_mut(l, i)) {
            c.io = ThreadState::Yes;
            c.last_io_errno = 0;
        }
    }
}

/// No transaction anywhere and a read-only primary (a first start, or a primary that lost
/// its data while every replica did too), with as many replicas answering as an empty primary
/// needs before it opens, one fewer, or any number: the threshold differs by flavour.
fn empty_start(d: &mut Dice<'_>, l: &mut Ledger) {
    for inst in &mut l.insts {
        inst.executed = Txns::default();
        if let Some(c) = inst.channel.as_mut() {
            c.retrieved = Txns::default();
        }
    }
    let p = l.primary;
    l.inst_mut(p).fence();
    let need = l.spec - required_acks(l.spec, l.flavor);
    let answering = match d.below(3) {
        0 => need.saturating_sub(1),
        1 => need,
        _ => d.below(l.n),
    };
    let mut others: Vec<u32> = (0..l.n).filter(|&i| i != p).collect();
    // Which replicas are away is drawn too.
    for k in (1..others.len()).rev() {
        others.swap(k, d.below(u32::try_from(k).unwrap_or(0) + 1) as usize);
    }
    for &i in others.iter().skip(answering as usize) {
        l.inst_mut(i).reachable = false;
    }
}

fn required_acks(n: u32, flavor: Flavor) -> u32 {
    match flavor {
        Flavor::Mysql => n / 2,
        Flavor::Mariadb => (n / 2).min(1),
    }
}

/// Errant replicas that still replicate (their IO thread runs), sometimes with a stale
/// remembered list, sometimes with re-cloning enabled.
fn errant(d: &mut Dice<'_>, l: &mut Ledger) {
    if l.n == 1 {
        return;
    }
    let count = 1 + d.below(l.n - 1);
    for _ in 0..count {
        let i = other(d, l.n, l.primary);
        make_errant(d, l, i);
        if d.chance(25) {
            set_io(l, i, ThreadState::Connecting, 0);
        }
    }
    l.reclone_errant = d.chance(30);
    if d.chance(25) {
        let i = other(d, l.n, l.primary);
        l.remembered_errant.push(i);
    }
    if d.chance(30) {
        random_replica_fault(d, l);
    }
    if d.chance(20) {
        primary_fault(d, l);
    }
}

/// A switchover is asked for: the primary's Pod is being deleted or carries the demote
/// annotation, or `switchoverTo` names a target (a candidate, an errant or broken replica, the
/// primary itself, or no instance at all).
fn switchover(d: &mut Dice<'_>, l: &mut Ledger) {
    if l.n > 1 && d.chance(40) {
        random_replica_fault(d, l);
        if d.chance(30) {
            random_replica_fault(d, l);
        }
    }
    if l.n > 1 && d.chance(25) {
        let i = other(d, l.n, l.primary);
        make_errant(d, l, i);
    }
    let p = l.primary;
    // 0: demote, 1: Pod deleting, 2: a requested target, 3: both, 4: nothing asked.
    let mode = d.weighted(&[(30, 0), (12, 1), (38, 2), (12, 3), (8, 4)]);
    let pod = &mut l.inst_mut(p).pod;
    pod.demote = mode == 0 || mode == 3;
    pod.deleting = mode == 1;
    if mode == 2 || mode == 3 {
        let errant = l.made_errant.first().copied();
        // Targets outside the cluster are refused by `check_facts` (naming `switchoverTo`), so
        // they are not generated; `decide`'s unit tests cover the refusal.
        l.switchover_to = Some(match d.weighted(&[(78, 0), (10, 1), (12, 3)]) {
            0 => d.below(l.n),
            1 => p,
            _ => errant.unwrap_or(p),
        });
    }
    if l.max_delay > 0 && l.n > 1 && d.chance(35) {
        let i = other(d, l.n, p);
        replica_fault(d, l, i, ReplicaFault::Lagging);
    }
}

/// Empty replicas that need a clone, and healthy replicas with different lags to clone from.
fn clone(d: &mut Dice<'_>, l: &mut Ledger) {
    if l.n == 1 {
        return;
    }
    let empties = if l.n == 5 { 1 + d.below(2) } else { 1 };
    for _ in 0..empties {
        let i = other(d, l.n, l.primary);
        make_empty(d, l, i);
    }
    let p = l.primary;
    if l.flavor == Flavor::Mariadb && d.chance(60) {
        // The primary purged binlogs, so an empty MariaDB replica cannot replay them.
        l.inst_mut(p).purged.set(Origin::server(p), 1);
    }
    for i in l.others() {
        if let Some(c) = channel_mut(l, i) {
            c.lag = if d.chance(10) {
                None
            } else {
                Some(u64::from(d.below(12)))
            };
        }
    }
    if d.chance(30) {
        random_replica_fault(d, l);
    }
    if d.chance(15) {
        let i = other(d, l.n, p);
        make_errant(d, l, i);
        l.reclone_errant = d.chance(50);
    }
}

/// How far a new instance of a growing cluster got.
#[derive(Clone, Copy, Debug)]
enum NewInstance {
    /// Empty, not replicating yet (waiting for its clone).
    Empty,
    /// Its Pod or mysqld is still starting.
    Starting,
    /// Replicating asynchronously from the primary, with everything.
    CaughtUp,
    /// Replicating asynchronously, still behind.
    Behind,
    /// Caught up, but its semi-sync flag is on (a restart left it so).
    FlagOn,
    /// Behind, with its semi-sync flag on: a learner that must not be counted as acknowledging.
    FlagOnBehind,
}

/// A cluster that had `n − 2` instances (its members) and now has `n`: the new ones in any
/// stage of joining, the primary still running the old count (or already the raised one),
/// sometimes a fault on an old replica, a lower remembered floor, or a dead primary.
fn grow(d: &mut Dice<'_>, l: &mut Ledger) {
    let old = l.n - 2;
    let p = l.primary;
    l.members = Some(old);
    let executed = l.inst(p).executed.clone();
    let raised = d.chance(15);
    {
        let flavor = l.flavor;
        let inst = l.inst_mut(p);
        // A raised count is the one for the first learner joined (old + 1 members).
        let count = if raised { old + 1 } else { old } / 2;
        let count = if flavor == Flavor::Mariadb {
            count.min(1)
        } else {
            count
        };
        inst.semi.source_enabled = count > 0;
        inst.semi.wait_for_replica_count = (flavor == Flavor::Mysql).then_some(count.max(1));
        inst.semi.source_clients = Some(old - 1);
    }
    // Sometimes every new instance already joined in an earlier round (recorded members n),
    // running with the flag: only the primary's count is left to raise.
    let all_joined = d.chance(25);
    if all_joined {
        l.members = Some(l.n);
    }
    for i in old..l.n {
        if i == p {
            continue;
        }
        let stage = if all_joined {
            NewInstance::FlagOn
        } else {
            d.weighted(&[
                (30, NewInstance::Empty),
                (12, NewInstance::Starting),
                (28, NewInstance::CaughtUp),
                (20, NewInstance::Behind),
                (10, NewInstance::FlagOn),
                (8, NewInstance::FlagOnBehind),
            ])
        };
        let own = Origin::server(p);
        let inst = l.inst_mut(i);
        inst.pod.role_label = None;
        inst.semi.replica_enabled =
            matches!(stage, NewInstance::FlagOn | NewInstance::FlagOnBehind);
        match stage {
            NewInstance::Empty => {
                inst.executed = Txns::default();
                inst.channel = None;
            }
            NewInstance::Starting => {
                inst.reachable = false;
                inst.pod.ready = false;
            }
            NewInstance::CaughtUp | NewInstance::FlagOn => {
                inst.executed = executed.clone();
                if let Some(c) = inst.channel.as_mut() {
                    c.retrieved = executed.clone();
                    c.io = ThreadState::Yes;
                }
            }
            NewInstance::Behind | NewInstance::FlagOnBehind => {
                let have = executed.get(own);
                inst.executed
                    .set(own, have.saturating_sub(1 + u64::from(d.below(3))));
                if let Some(c) = inst.channel.as_mut() {
                    c.retrieved = inst.executed.clone();
                }
            }
        }
    }
    if d.chance(20) {
        // An old replica has a problem of its own.
        let i = other(d, old.max(2), p);
        if i < old {
            let fault = d.pick(REPLICA_FAULTS);
            replica_fault(d, l, i, fault);
        }
    }
    if d.chance(15) {
        let lower = d.below(old / 2 + 1);
        l.min_acks = Some(lower);
    }
    if d.chance(15) {
        let inst = l.inst_mut(p);
        inst.reachable = false;
    }
}

/// How far a leaving instance of a shrinking cluster got.
#[derive(Clone, Copy, Debug)]
enum Leaving {
    /// Still replicating with the semi-sync flag, labelled (the shrink was just asked for).
    Running,
    /// Its IO thread stopped and its label removed (the first shrink round ran).
    Stopped,
    /// Its mysqld does not answer; the Pod exists.
    Unreachable,
    /// Its Pod is gone (the platform removed it).
    Gone,
    /// Stopped, behind the primary.
    StoppedBehind,
}

/// A cluster of `n` instances whose `spec.replicas` dropped to `n − 2`: the leaving instances
/// in any stage, the primary anywhere (a leaving one too), running the old count or the
/// lowered one, the record at the old size, the new one or absent; sometimes a remaining
/// replica behind, or a dead primary.
fn shrink(d: &mut Dice<'_>, l: &mut Ledger) {
    let spec = l.n - 2;
    l.spec = spec;
    let p = l.primary;
    l.members = d.weighted(&[(60, Some(l.n)), (25, Some(spec)), (15, None)]);
    let executed = l.inst(p).executed.clone();
    if d.chance(50) {
        // The first shrink round lowered the count (and recorded the floor).
        let flavor = l.flavor;
        let count = if flavor == Flavor::Mariadb {
            (spec / 2).min(1)
        } else {
            spec / 2
        };
        let inst = l.inst_mut(p);
        inst.semi.source_enabled = count > 0;
        inst.semi.wait_for_replica_count = (flavor == Flavor::Mysql).then_some(count.max(1));
        if d.chance(70) {
            l.min_acks = Some(count);
        }
    }
    let own = Origin::server(p);
    for i in spec..l.n {
        if i == p {
            continue;
        }
        let stage = d.weighted(&[
            (30, Leaving::Running),
            (35, Leaving::Stopped),
            (12, Leaving::Unreachable),
            (10, Leaving::Gone),
            (13, Leaving::StoppedBehind),
        ]);
        let inst = l.inst_mut(i);
        match stage {
            Leaving::Running => {}
            Leaving::Stopped | Leaving::StoppedBehind => {
                inst.pod.role_label = None;
                if let Some(c) = inst.channel.as_mut() {
                    c.io = ThreadState::No;
                    c.lag = None;
                }
                if matches!(stage, Leaving::StoppedBehind) {
                    let have = executed.get(own);
                    inst.executed.set(own, have.saturating_sub(1));
                    if let Some(c) = inst.channel.as_mut() {
                        c.retrieved = inst.executed.clone();
                    }
                }
            }
            Leaving::Unreachable => inst.reachable = false,
            Leaving::Gone => {
                inst.reachable = false;
                inst.pod.exists = false;
                inst.pod.ready = false;
                inst.pod.role_label = None;
            }
        }
    }
    if d.chance(30) && spec > 1 {
        // A remaining replica has not received the primary's last commit yet.
        let i = other(d, spec, p.min(spec - 1));
        if i != p {
            let have = executed.get(own);
            let inst = l.inst_mut(i);
            inst.executed.set(own, have.saturating_sub(1));
            if let Some(c) = inst.channel.as_mut() {
                c.retrieved = inst.executed.clone();
            }
        }
    }
    if d.chance(12) {
        // No remaining replica is ready: only leaving ones could take over.
        for i in 0..spec {
            if i != p {
                l.inst_mut(i).pod.ready = false;
            }
        }
    }
    if d.chance(15) {
        l.inst_mut(p).reachable = false;
    }
}

/// Anything: random faults anywhere, including those no other builder makes (missing Pods,
/// a lost or wiped primary, offline, restore, an intermediate primary).
fn misc(d: &mut Dice<'_>, l: &mut Ledger) {
    let faults = d.below(5);
    for _ in 0..faults {
        match d.below(12) {
            4 => fresh_primary(d, l),
            0 => primary_fault(d, l),
            1 => {
                let i = d.below(l.n);
                let inst = l.inst_mut(i);
                inst.pod.exists = false;
                inst.pod.ready = false;
                inst.pod.role_label = None;
                inst.reachable = false;
            }
            2 => lose_primary(d, l),
            3 => {
                let i = d.below(l.n);
                if i != l.primary {
                    l.remembered_errant.push(i);
                }
            }
            _ => random_replica_fault(d, l),
        }
    }
    match d.weighted(&[(88, 0), (4, 1), (4, 2), (4, 3)]) {
        1 => l.offline = true,
        2 => {
            l.restore = true;
            l.restored = d.chance(50);
        }
        3 => intermediate(d, l),
        _ => {}
    }
}

/// The primary shows no transaction while replicas hold some of its own first ones (MySQL's
/// AFTER_SYNC semi-sync adds a commit to `gtid_executed` only once acknowledged), sometimes
/// with a commit still waiting for its acknowledgement: lost data only where the rules say.
fn fresh_primary(d: &mut Dice<'_>, l: &mut Ledger) {
    let p = l.primary;
    let own = Origin::server(p);
    for inst in &mut l.insts {
        inst.executed.0.retain(|o, _| o.same_server(own));
        if let Some(c) = inst.channel.as_mut() {
            c.retrieved.0.retain(|o, _| o.same_server(own));
        }
    }
    let inst = l.inst_mut(p);
    inst.executed = Txns::default();
    if d.chance(40) {
        inst.semi.wait_sessions = u64::from(1 + d.below(2));
    }
}

/// An intermediate primary: read-only, replicating from the external source.
fn intermediate(d: &mut Dice<'_>, l: &mut Ledger) {
    l.external = true;
    l.cloned = d.chance(50);
    let p = l.primary;
    let inst = l.inst_mut(p);
    if d.chance(80) {
        inst.fence();
    }
    inst.clone_state = d.pick(&[
        None,
        Some(CloneState::Completed),
        Some(CloneState::InProgress),
        Some(CloneState::Failed),
    ]);
    inst.channel = Some(Channel {
        source: Source::External,
        port: PORT,
        io: d.pick(&[ThreadState::Yes, ThreadState::No]),
        sql: ThreadState::Yes,
        last_io_errno: 0,
        retrieved: inst.executed.clone(),
        lag: Some(0),
    });
}

/// The primary's `SHOW REPLICAS` (every replica whose IO thread is connected to it), its
/// semi-sync client count, and the order the instances are listed in.
fn finish(d: &mut Dice<'_>, l: &mut Ledger) {
    let p = l.primary;
    let base = l.base;
    let mut hosts: Vec<u32> = l
        .insts
        .iter()
        .enumerate()
        .filter(|&(j, _)| j as u32 != p)
        .filter(|(_, inst)| {
            inst.channel.as_ref().is_some_and(|c| {
                c.source == Source::Instance(p) && c.port == PORT && c.io == ThreadState::Yes
            })
        })
        .map(|(j, _)| base + j as u32)
        .collect();
    if d.chance(10) {
        hosts.push(base + 40); // a server of another cluster
    }
    if d.chance(5) && !hosts.is_empty() {
        hosts.push(hosts[0]);
    }
    let connected = u32::try_from(hosts.len()).unwrap_or(0);
    let inst = l.inst_mut(p);
    inst.replica_hosts = hosts;
    if inst.semi.source_clients.is_some_and(|c| c > 0) {
        inst.semi.source_clients = Some(connected);
    }
    if l.kind != Kind::Healthy && d.chance(15) {
        // Stale prevent-delete annotations: repaired in ordinal order, whatever the listing.
        for _ in 0..=d.below(3) {
            let i = d.below(l.n);
            l.inst_mut(i).pod.prevent_delete = true;
        }
    }
    l.remembered_errant.sort_unstable();
    l.remembered_errant.dedup();
    l.made_errant.sort_unstable();
    l.made_errant.dedup();
    if d.chance(60) {
        shuffle(d, &mut l.order);
    }
}

/// Fisher–Yates with the dice.
pub(super) fn shuffle(d: &mut Dice<'_>, xs: &mut [u32]) {
    for k in (1..xs.len()).rev() {
        let j = d.below(k as u32 + 1) as usize;
        xs.swap(k, j);
    }
}
