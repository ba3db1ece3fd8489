//! The simulated servers: exact transaction sets and the MySQL/MariaDB replication rules the
//! engine depends on. Everything here is synchronous and deterministic; the async ports in
//! [`super::cluster`] and [`super::instance`] lock the state and call into it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use moco_core::facts::{
    CloneState, Flavor, MysqldStatus, ReplicaHost, ReplicaStatus, Role, SemiSyncFacts, ThreadState,
};
use moco_core::gtid::{GtidSet, SourceId};
use moco_core::operation::Event;
use moco_core::status::ClusterStatus;
use moco_core::{Decision, facts::ClusterFacts};

pub use super::records::SimGtid;
use super::records::{Truth, WipeRecord};

/// MySQL error 1236: the source cannot serve what the replica asks for.
pub(crate) const ER_SOURCE_FATAL_READING_BINLOG: u32 = 1236;
/// MariaDB error 1950: an out-of-order sequence number under `gtid_strict_mode`.
pub(crate) const ER_GTID_STRICT_OUT_OF_ORDER: u32 = 1950;
/// MySQL error 1062: a row the replica already holds (the SQL thread's most common stop).
pub(crate) const ER_DUP_ENTRY: u32 = 1062;
/// MySQL error 1593: source and replica are the same server.
pub(crate) const ER_SAME_SERVER_ID: u32 = 1593;

/// Who may accept a client write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteTarget {
    /// Through the primary Service: the lowest-ordinal instance labelled `role=primary`.
    Primary,
    /// Straight to one instance (a pooled connection that outlived a role change).
    Instance(u32),
}

/// What happened to a client write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Refused: no endpoint, instance down or read-only.
    Rejected,
    /// Committed and acknowledged to the client.
    Acknowledged(SimGtid),
    /// Committed to the binary log, waiting for semi-sync acknowledgements.
    Pending(SimGtid),
}

/// The fate of one accepted write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteState {
    /// Waiting for semi-sync ACKs (a session counted in `Rpl_semi_sync_master_wait_sessions`).
    Pending,
    /// The client got OK.
    Acknowledged,
    /// The session was killed while waiting: committed locally, the client saw an error.
    Killed,
    /// The server crashed while the session waited: the client saw an error.
    Interrupted,
}

/// The ledger entry of one accepted write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    /// Write number, in acceptance order.
    pub id: u64,
    /// Instance that accepted it.
    pub instance: u32,
    /// Its GTID.
    pub gtid: SimGtid,
    /// What became of it.
    pub state: WriteState,
}

/// Unapplied relay-log transactions an instance dropped (`CHANGE REPLICATION SOURCE` or
/// `RESET REPLICA ALL` delete the relay log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayPurge {
    /// The instance.
    pub instance: u32,
    /// The transactions dropped, in relay-log order.
    pub gtids: Vec<SimGtid>,
    /// Those of them acknowledged to clients at that moment.
    pub acknowledged: Vec<SimGtid>,
    /// Ticks elapsed when it happened.
    pub tick: u64,
}

/// A fault that strikes between two operations of a manager round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpFault {
    /// mysqld of an instance dies (see [`super::SimCluster::crash`]).
    Crash {
        /// The instance.
        instance: u32,
        /// Whether crash recovery keeps the commits waiting for ACKs.
        keep_tail: bool,
    },
    /// The manager can no longer reach an instance.
    CutManager(u32),
    /// An instance is cut from the manager and every other instance.
    Isolate(u32),
    /// mysqld of an instance stops answering (see [`super::SimCluster::freeze`]).
    Freeze(u32),
    /// A frozen mysqld resumes where it was (see [`super::SimCluster::thaw`]).
    Thaw(u32),
    /// An instance's data directory is lost; it restarts empty at once (see
    /// [`super::SimCluster::wipe`]).
    Wipe(u32),
    /// An instance's data directory is lost and its Pod is being re-created: mysqld is down
    /// (empty) until restarted.
    WipeDown(u32),
}

/// A change of `currentPrimaryIndex` the manager persisted, with what the simulator's true
/// data said about it at that moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promotion {
    /// The previous primary.
    pub from: u32,
    /// The new primary.
    pub to: u32,
    /// Ticks elapsed when it happened.
    pub tick: u64,
    /// Acknowledged transactions the new primary neither holds nor has in its relay log.
    pub missing_acknowledged: Vec<SimGtid>,
    /// Why the choice was wrong (empty when it was right): acknowledged transactions the new
    /// primary lacks, or reachable, non-hung, non-frozen, non-errant replicas (instances with
    /// a replication channel) that hold more.
    pub problems: Vec<String>,
    /// The previous primary was frozen at that moment (a hung primary was failed over).
    pub from_frozen: bool,
}

/// One period an instance spent frozen (see [`super::SimCluster::freeze`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrozenSpan {
    /// The instance.
    pub instance: u32,
    /// It was `currentPrimaryIndex` when it froze.
    pub was_primary: bool,
    /// Ticks elapsed when it froze.
    pub tick: u64,
    /// How it ended; `None` while it is still frozen.
    pub end: Option<SpanEnd>,
    /// `State::failover_rounds` when it froze.
    rounds_at_freeze: u64,
}

/// How a [`FrozenSpan`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanEnd {
    /// It was thawed and resumed where it was.
    Thawed {
        /// Ticks elapsed when it resumed.
        tick: u64,
        /// Manager rounds that decided a failover (`Action::Failover`: stopping the IO
        /// threads, or promoting) while it was frozen.
        failover_rounds: u64,
        /// `currentPrimaryIndex` pointed at it when it froze and no longer did when it resumed
        /// (it was failed over while frozen).
        replaced: bool,
    },
    /// The process was killed while frozen (a crash, a Pod re-created, a wiped instance).
    Killed,
}

/// The Pod of one instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodState {
    pub deleting: bool,
    pub demote: bool,
    pub prevent_delete: bool,
    pub role: Option<Role>,
}

/// The replication channel of one instance (present once configured until `RESET REPLICA ALL`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Repl {
    pub source: u32,
    pub io_running: bool,
    pub connected: bool,
    pub sql_running: bool,
    pub io_error: Option<(u32, String)>,
    pub sql_error: Option<(u32, String)>,
    /// Received, not yet applied, in order.
    pub relay: VecDeque<SimGtid>,
    /// `Retrieved_Gtid_Set`: everything received since the relay log was last reset.
    pub retrieved: BTreeSet<SimGtid>,
    /// MariaDB `Gtid_IO_Pos`: where the IO thread resumes.
    pub io_pos: Option<SimGtid>,
}

impl Repl {
    /// The SQL thread stops on an error that starting it again does not cure.
    pub(crate) fn fail_sql(&mut self) {
        self.sql_running = false;
        self.sql_error = Some((
            ER_DUP_ENTRY,
            "Could not execute Write_rows_v1 event on table app.t; Duplicate entry '1' for key 'PRIMARY'".to_owned(),
        ));
    }
}

/// One mysqld and its data directory.
#[derive(Clone, Debug)]
pub(crate) struct Inst {
    pub index: u32,
    pub ident: u32,
    pub up: bool,
    /// Everything durable: `purged ∪ binlog` (pending commits included).
    pub data: BTreeSet<SimGtid>,
    /// The binary log, in commit order.
    pub binlog: Vec<SimGtid>,
    /// Transactions present without binary log (cloned data): `gtid_purged`.
    pub purged: BTreeSet<SimGtid>,
    /// Commits waiting for semi-sync ACKs: (gtid, write id).
    pub pending: Vec<(SimGtid, u64)>,
    pub read_only: bool,
    pub super_read_only: bool,
    pub semi_master: bool,
    pub wait_count: u32,
    pub semi_slave: bool,
    pub repl: Option<Repl>,
    pub clone_state: Option<CloneState>,
    pub slow: Option<u32>,
    /// SIGSTOPped (or its node dead, or a network black hole): it answers nothing, serves and
    /// receives no replication and accepts no writes, but keeps its whole state.
    pub frozen: bool,
    /// Answers pings but leaves some statements waiting (see [`Stall`]).
    pub stall: Stall,
    /// The SQL thread stops with an error as soon as it starts (a row the replica already
    /// holds, a full disk): every start fails the same way until healed.
    pub sql_fails: bool,
    pub pod: PodState,
    /// MariaDB `gtid_slave_pos` (domain 0): the last transaction the SQL thread applied, or the
    /// binlog position `CHANGE MASTER` started from (the adapter sets it to
    /// `@@gtid_binlog_pos` first), or a clone's position. Local commits do not move it.
    pub slave_pos: Option<SimGtid>,
}

/// What a running instance leaves unanswered while its process still answers pings: a server
/// whose statements wait on a lock (issue 35: a MariaDB primary's binlog lock held behind
/// commits that wait for acknowledgements no replica can give).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stall {
    /// Everything is answered.
    #[default]
    None,
    /// The status probe waits; every other statement is answered.
    Probe,
    /// The probe is answered; every other statement waits (a fence behind stuck commits).
    Commands,
    /// Every statement waits, the probe too; only pings are answered.
    Statements,
}

impl Inst {
    fn fresh(index: u32, ident: u32, flavor: Flavor) -> Self {
        Inst {
            index,
            ident,
            up: true,
            data: BTreeSet::new(),
            binlog: Vec::new(),
            purged: BTreeSet::new(),
            pending: Vec::new(),
            read_only: true,
            super_read_only: true,
            semi_master: false,
            wait_count: 1,
            semi_slave: flavor == Flavor::Mariadb,
            repl: None,
            clone_state: None,
            slow: None,
            frozen: false,
            stall: Stall::None,
            sql_fails: false,
            pod: PodState::default(),
            slave_pos: None,
        }
    }

    /// What `@@gtid_executed` shows on MySQL: durable data without the commits still waiting
    /// for ACKs (AFTER_SYNC adds them to `gtid_executed` only after the wait).
    pub(crate) fn committed(&self) -> BTreeSet<SimGtid> {
        let mut out = self.data.clone();
        for (g, _) in &self.pending {
            out.remove(g);
        }
        out
    }

    /// Data plus relay log: what this instance holds or will hold.
    pub(crate) fn received(&self) -> BTreeSet<SimGtid> {
        let mut out = self.data.clone();
        if let Some(r) = &self.repl {
            out.extend(r.retrieved.iter().copied());
            out.extend(r.relay.iter().copied());
        }
        out
    }

    fn max_seq(&self) -> u64 {
        self.data.iter().map(|g| g.seq).max().unwrap_or(0)
    }

    /// The GTID of the next transaction this server commits: per `server_uuid` on MySQL, the
    /// domain's next sequence number on MariaDB.
    pub(crate) fn next_gtid(&self, flavor: Flavor) -> SimGtid {
        let seq = match flavor {
            Flavor::Mysql => {
                self.data
                    .iter()
                    .filter(|g| g.origin == self.ident)
                    .map(|g| g.seq)
                    .max()
                    .unwrap_or(0)
                    + 1
            }
            Flavor::Mariadb => self.max_seq() + 1,
        };
        SimGtid {
            origin: self.ident,
            seq,
        }
    }

    /// MariaDB `@@gtid_binlog_pos` for domain 0: the transaction with the highest number.
    fn mariadb_pos(&self) -> Option<SimGtid> {
        self.data.iter().copied().max_by_key(|g| (g.seq, g.origin))
    }
}

/// The whole simulated cluster.
#[derive(Debug)]
pub(crate) struct State {
    pub flavor: Flavor,
    pub server_id_base: u32,
    pub max_delay_seconds: u64,
    pub insts: Vec<Inst>,
    /// `spec.replicas` when it is below the instances still running (a shrink under way).
    pub spec_replicas: Option<u32>,
    pub next_ident: u32,
    pub mgr_cut: BTreeSet<u32>,
    pub links_cut: BTreeSet<(u32, u32)>,
    pub status: ClusterStatus,
    pub events: Vec<Event>,
    pub writes: Vec<WriteRecord>,
    pub violations: Vec<String>,
    pub promotions: Vec<Promotion>,
    pub relay_purges: Vec<RelayPurge>,
    pub last_round: Option<(ClusterFacts, Decision)>,
    pub ticks: u64,
    pub kill_after: Option<u32>,
    pub killed: bool,
    /// A fault to inject before the n-th next manager operation.
    pub fault_at: Option<(u32, OpFault)>,
    /// Break the model on purpose (tests of the tests): ignore semi-sync on the primary.
    pub ignore_semi_sync: bool,
    /// Every period an instance spent frozen, in the order they began.
    pub frozen_spans: Vec<FrozenSpan>,
    /// Manager rounds so far that decided `Action::Failover`.
    pub failover_rounds: u64,
    /// The lineage, what rounds could see, and every applied operation.
    pub truth: Truth,
}

/// The host name of instance `index`.
/// The host name other instances reach instance `index` at (what replication sources name).
pub fn host_of(index: u32) -> String {
    format!("sim-{index}.sim.svc")
}

/// The SQL port of every instance.
pub const PORT: u16 = 3306;

/// The `server_uuid` number of MySQL identity `ident`.
pub(crate) fn uuid_of(ident: u32) -> u128 {
    0x51e0_0000_0000_4000_8000_0000_0000_0000u128 + u128::from(ident) + 1
}

/// `server_uuid` text.
pub(crate) fn uuid_text(ident: u32) -> String {
    let hex = format!("{:032x}", uuid_of(ident));
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl State {
    pub(crate) fn new(replicas: u32, flavor: Flavor, server_id_base: u32, max_delay: u64) -> Self {
        State {
            flavor,
            server_id_base,
            max_delay_seconds: max_delay,
            insts: (0..replicas).map(|i| Inst::fresh(i, i, flavor)).collect(),
            spec_replicas: None,
            next_ident: replicas,
            mgr_cut: BTreeSet::new(),
            links_cut: BTreeSet::new(),
            status: ClusterStatus::default(),
            events: Vec::new(),
            writes: Vec::new(),
            violations: Vec::new(),
            promotions: Vec::new(),
            relay_purges: Vec::new(),
            last_round: None,
            ticks: 0,
            kill_after: None,
            killed: false,
            fault_at: None,
            ignore_semi_sync: false,
            frozen_spans: Vec::new(),
            failover_rounds: 0,
            truth: Truth::default(),
        }
    }

    pub(crate) fn replicas(&self) -> u32 {
        u32::try_from(self.insts.len()).unwrap_or(u32::MAX)
    }

    /// `spec.replicas`: the instances unless some are leaving.
    pub(crate) fn spec_replicas(&self) -> u32 {
        self.spec_replicas.unwrap_or_else(|| self.replicas())
    }

    /// `spec.replicas` is lowered to `n`: the instances past it keep running until the
    /// engine records that they no longer count ([`State::remove_leaving`]).
    pub(crate) fn shrink(&mut self, n: u32) {
        self.spec_replicas = Some(n.clamp(1, self.replicas()));
    }

    /// The platform's part of a shrink: once the status lets it
    /// (`ClusterStatus::leaving_may_go`), the instances past `spec.replicas` are removed with
    /// their data, as a StatefulSet scaled down removes its highest Pods. True when it did.
    pub(crate) fn remove_leaving(&mut self) -> bool {
        let n = self.spec_replicas();
        if self.replicas() <= n || !self.status.leaving_may_go(n) {
            return false;
        }
        self.insts.truncate(n as usize);
        self.spec_replicas = None;
        true
    }

    /// `spec.replicas` is raised to `n`: new, empty instances start (as a StatefulSet adds
    /// Pods with new volumes).
    pub(crate) fn grow(&mut self, n: u32) {
        self.spec_replicas = None;
        while self.replicas() < n {
            let index = self.replicas();
            // MariaDB names transactions by server_id, which follows the ordinal.
            let ident = match self.flavor {
                Flavor::Mariadb => index,
                Flavor::Mysql => {
                    let id = self.next_ident;
                    self.next_ident += 1;
                    id
                }
            };
            self.insts.push(Inst::fresh(index, ident, self.flavor));
        }
    }

    pub(crate) fn inst(&self, i: u32) -> Option<&Inst> {
        self.insts.get(i as usize)
    }

    pub(crate) fn inst_mut(&mut self, i: u32) -> Option<&mut Inst> {
        self.insts.get_mut(i as usize)
    }

    /// Converts exact transactions to what the server reports: every GTID on MySQL,
    /// `gtid_binlog_state` (the last number per server id) on MariaDB.
    pub(crate) fn report<'a>(&self, set: impl IntoIterator<Item = &'a SimGtid>) -> GtidSet {
        let mut by_origin: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for g in set {
            by_origin.entry(g.origin).or_default().push(g.seq);
        }
        let mut out = GtidSet::new();
        for (origin, mut seqs) in by_origin {
            match self.flavor {
                Flavor::Mysql => {
                    seqs.sort_unstable();
                    let source = SourceId::Uuid {
                        uuid: uuid_of(origin),
                        tag: String::new(),
                    };
                    let mut run: Option<(u64, u64)> = None;
                    for s in seqs {
                        run = match run {
                            Some((a, b)) if s <= b + 1 => Some((a, b.max(s))),
                            Some((a, b)) => {
                                out.insert_interval(source.clone(), a, b);
                                Some((s, s))
                            }
                            None => Some((s, s)),
                        };
                    }
                    if let Some((a, b)) = run {
                        out.insert_interval(source, a, b);
                    }
                }
                Flavor::Mariadb => {
                    let max = seqs.into_iter().max().unwrap_or(0);
                    out.insert_interval(
                        SourceId::MariaDb {
                            domain: 0,
                            server_id: self.server_id_base + origin,
                        },
                        1,
                        max,
                    );
                }
            }
        }
        out
    }

    pub(crate) fn link_ok(&self, a: u32, b: u32) -> bool {
        !self.links_cut.contains(&(a.min(b), a.max(b)))
    }

    pub(crate) fn up(&self, i: u32) -> bool {
        self.inst(i).is_some_and(|x| x.up)
    }

    /// mysqld of instance `i` runs but is frozen.
    pub(crate) fn frozen(&self, i: u32) -> bool {
        self.inst(i).is_some_and(|x| x.up && x.frozen)
    }

    /// The manager can open a connection to instance `i`.
    pub(crate) fn manager_reaches(&self, i: u32) -> bool {
        self.up(i) && !self.mgr_cut.contains(&i)
    }

    /// ACKs a commit on `p` waits for.
    fn needed_acks(&self, p: &Inst) -> usize {
        match self.flavor {
            Flavor::Mysql => p.wait_count.max(1) as usize,
            Flavor::Mariadb => 1,
        }
    }

    /// Semi-sync replicas connected to `p` right now (`Rpl_semi_sync_master_clients`: a
    /// frozen replica's connection stays open); with `live`, only those that could send an
    /// ACK now (not frozen).
    pub(crate) fn semi_clients(&self, p: u32, live: bool) -> usize {
        self.insts
            .iter()
            .filter(|r| r.index != p && r.up && r.semi_slave && !(live && r.frozen))
            .filter(|r| {
                r.repl
                    .as_ref()
                    .is_some_and(|c| c.source == p && c.io_running && c.connected)
            })
            .count()
    }

    /// Instances that accept writes and would acknowledge them now. A frozen instance
    /// acknowledges nothing while frozen; thawing it re-runs the split-brain check.
    pub(crate) fn writable_ackers(&self) -> Vec<u32> {
        self.insts
            .iter()
            .filter(|p| p.up && !p.read_only && !p.frozen)
            .filter(|p| {
                !p.semi_master
                    || self.ignore_semi_sync
                    || self.semi_clients(p.index, true) >= self.needed_acks(p)
            })
            .map(|p| p.index)
            .collect()
    }

    /// Records a violation when two writable instances could acknowledge writes.
    pub(crate) fn check_split_brain(&mut self, context: &str) {
        let ackers = self.writable_ackers();
        if ackers.len() > 1 {
            let msg = format!(
                "tick {}: after {context}: instances {ackers:?} are writable and can acknowledge writes at the same time",
                self.ticks
            );
            self.violations.push(msg);
        }
    }

    /// Re-evaluates every replication connection (IO threads reconnect on their own).
    pub(crate) fn refresh(&mut self) {
        let n = self.replicas();
        for i in 0..n {
            let Some(repl) = self.inst(i).and_then(|x| x.repl.as_ref()) else {
                continue;
            };
            if !repl.io_running {
                continue;
            }
            let src = repl.source;
            let can = self.up(i) && self.up(src) && self.link_ok(i, src);
            let connected = repl.connected;
            // A frozen replica or source keeps an open connection (nothing flows through it)
            // and cannot open a new one; a crash or a cut still drops it.
            let frozen = self.frozen(i) || self.frozen(src);
            let outcome = if !can {
                Some(Ok(false))
            } else if frozen {
                None
            } else if !connected {
                Some(self.handshake(i, src).map(|()| true))
            } else {
                None
            };
            if let Some(Some(r)) = self.inst_mut(i).map(|x| x.repl.as_mut()) {
                match outcome {
                    Some(Ok(c)) => r.connected = c,
                    Some(Err(e)) => {
                        r.connected = false;
                        r.io_running = false;
                        r.io_error = Some(e);
                    }
                    None => {}
                }
            }
        }
        self.settle_acks();
    }

    /// What the source checks when a replica connects.
    fn handshake(&self, i: u32, src: u32) -> Result<(), (u32, String)> {
        if i == src {
            return Err((
                ER_SAME_SERVER_ID,
                "Fatal error: The replica I/O thread stops because source and replica have equal server ids".to_owned(),
            ));
        }
        let (Some(r), Some(s)) = (self.inst(i), self.inst(src)) else {
            return Err((2003, "no such source".to_owned()));
        };
        match self.flavor {
            Flavor::Mysql => {
                let have = r.received();
                if let Some(g) = s.purged.iter().find(|g| !have.contains(g)) {
                    return Err((
                        ER_SOURCE_FATAL_READING_BINLOG,
                        format!(
                            "Got fatal error 1236 from source when reading data from binary log: 'Cannot replicate because the source purged required binary logs' (missing {g})"
                        ),
                    ));
                }
                if let Some(g) = have
                    .iter()
                    .find(|g| g.origin == s.ident && !s.data.contains(g))
                {
                    return Err((
                        ER_SOURCE_FATAL_READING_BINLOG,
                        format!(
                            "Got fatal error 1236 from source when reading data from binary log: 'Replica has more GTIDs than the source has, using the source's SERVER_UUID' ({g})"
                        ),
                    ));
                }
                Ok(())
            }
            Flavor::Mariadb => {
                let pos = r.repl.as_ref().and_then(|c| c.io_pos);
                mariadb_start(s, pos).map(|_| ())
            }
        }
    }

    /// Copies what the source has and the replica lacks into the relay log.
    fn fetch(&mut self, i: u32) {
        let Some((src, pos)) = self.inst(i).and_then(|x| {
            let r = x.repl.as_ref()?;
            (x.up && !x.frozen && r.io_running && r.connected).then_some((r.source, r.io_pos))
        }) else {
            return;
        };
        if self.frozen(src) {
            return;
        }
        let Some(s) = self.inst(src) else { return };
        let flavor = self.flavor;
        let incoming: Result<Vec<SimGtid>, (u32, String)> = match flavor {
            Flavor::Mysql => {
                let have = self.inst(i).map(Inst::received).unwrap_or_default();
                Ok(s.binlog
                    .iter()
                    .filter(|g| !have.contains(g))
                    .copied()
                    .collect())
            }
            Flavor::Mariadb => mariadb_start(s, pos).map(|start| s.binlog[start..].to_vec()),
        };
        let Some(Some(r)) = self.inst_mut(i).map(|x| x.repl.as_mut()) else {
            return;
        };
        match incoming {
            Ok(list) => {
                for g in list {
                    r.relay.push_back(g);
                    r.retrieved.insert(g);
                    r.io_pos = Some(g);
                }
            }
            Err(e) => {
                r.io_running = false;
                r.connected = false;
                r.io_error = Some(e);
            }
        }
    }

    /// The SQL thread applies the relay log (at most `slow` transactions).
    fn apply(&mut self, i: u32) {
        let flavor = self.flavor;
        let Some(x) = self.inst_mut(i) else { return };
        if !x.up || x.frozen {
            return;
        }
        let limit = x.slow.unwrap_or(u32::MAX);
        let mut applied = 0u32;
        let mut max_seq = x.max_seq();
        let Some(r) = x.repl.as_mut() else { return };
        if !r.sql_running {
            return;
        }
        while applied < limit {
            let Some(g) = r.relay.pop_front() else { break };
            if x.data.contains(&g) {
                continue;
            }
            if flavor == Flavor::Mariadb && g.seq <= max_seq {
                r.relay.push_front(g);
                r.sql_running = false;
                r.sql_error = Some((
                    ER_GTID_STRICT_OUT_OF_ORDER,
                    format!(
                        "An attempt was made to binlog GTID {g} which would create an out-of-order sequence number with existing GTID sequence {max_seq}, and gtid strict mode is enabled"
                    ),
                ));
                break;
            }
            x.data.insert(g);
            x.binlog.push(g);
            if flavor == Flavor::Mariadb {
                x.slave_pos = Some(g);
            }
            max_seq = max_seq.max(g.seq);
            applied += 1;
        }
    }

    /// Acknowledges pending commits that enough semi-sync replicas received; releases them
    /// all when semi-sync is off on their server. A frozen server answers no client: its
    /// commits wait until it resumes. (ACKs a frozen replica sent before it froze count.)
    pub(crate) fn settle_acks(&mut self) {
        let n = self.replicas();
        let mut acked: Vec<(u32, SimGtid)> = Vec::new();
        for p in 0..n {
            let Some(inst) = self.inst(p) else { continue };
            if inst.pending.is_empty() || !inst.up || inst.frozen {
                continue;
            }
            let need = self.needed_acks(inst);
            let off = !inst.semi_master || self.ignore_semi_sync;
            for (g, _) in &inst.pending {
                let acks = self
                    .insts
                    .iter()
                    .filter(|r| r.index != p && r.up && r.semi_slave)
                    .filter(|r| {
                        r.repl.as_ref().is_some_and(|c| {
                            c.source == p
                                && c.io_running
                                && c.connected
                                && (c.retrieved.contains(g) || r.data.contains(g))
                        })
                    })
                    .count();
                if off || acks >= need {
                    acked.push((p, *g));
                }
            }
        }
        for (p, g) in acked {
            let mut id = None;
            if let Some(inst) = self.inst_mut(p)
                && let Some(pos) = inst.pending.iter().position(|(x, _)| *x == g)
            {
                id = Some(inst.pending.remove(pos).1);
            }
            if let Some(id) = id {
                self.set_write_state(id, WriteState::Acknowledged);
            }
        }
    }

    fn set_write_state(&mut self, id: u64, state: WriteState) {
        if let Some(w) = self.writes.iter_mut().find(|w| w.id == id) {
            w.state = state;
        }
    }

    /// One step of replication: reconnect, fetch, acknowledge, apply.
    pub(crate) fn tick(&mut self) {
        self.ticks += 1;
        self.refresh();
        let n = self.replicas();
        for i in 0..n {
            self.fetch(i);
        }
        self.settle_acks();
        for i in 0..n {
            self.apply(i);
        }
        self.check_split_brain("tick");
    }

    /// A client write.
    pub(crate) fn client_write(&mut self, target: WriteTarget) -> WriteOutcome {
        let index = match target {
            WriteTarget::Instance(i) => Some(i),
            WriteTarget::Primary => self
                .insts
                .iter()
                .find(|x| x.pod.role == Some(Role::Primary))
                .map(|x| x.index),
        };
        let flavor = self.flavor;
        let id = u64::try_from(self.writes.len()).unwrap_or(u64::MAX);
        let Some(x) = index.and_then(|i| self.inst_mut(i)) else {
            return WriteOutcome::Rejected;
        };
        // A frozen server does not answer: the client times out, nothing is committed.
        if !x.up || x.read_only || x.frozen {
            return WriteOutcome::Rejected;
        }
        let g = x.next_gtid(flavor);
        x.data.insert(g);
        x.binlog.push(g);
        let instance = x.index;
        x.pending.push((g, id));
        self.writes.push(WriteRecord {
            id,
            instance,
            gtid: g,
            state: WriteState::Pending,
        });
        self.note_commit(instance, g);
        self.settle_acks();
        self.check_split_brain("client write");
        match self.writes.iter().find(|w| w.id == id).map(|w| w.state) {
            Some(WriteState::Acknowledged) => WriteOutcome::Acknowledged(g),
            _ => WriteOutcome::Pending(g),
        }
    }

    /// The server process dies. Waiting sessions get an error. Without `keep_tail`, the
    /// pending commits no other server received are lost (their binlog write never reached
    /// the disk); with it, crash recovery commits them.
    pub(crate) fn crash(&mut self, i: u32, keep_tail: bool) {
        let Some(x) = self.inst(i) else { return };
        if !x.up {
            return;
        }
        let pending = x.pending.clone();
        let held_elsewhere = |g: &SimGtid| {
            self.insts
                .iter()
                .any(|o| o.index != i && o.received().contains(g))
        };
        let dropped: Vec<SimGtid> = if keep_tail {
            Vec::new()
        } else {
            pending
                .iter()
                .map(|(g, _)| *g)
                .filter(|g| !held_elsewhere(g))
                .collect()
        };
        for (_, id) in &pending {
            self.set_write_state(*id, WriteState::Interrupted);
        }
        self.end_frozen_span(i, SpanEnd::Killed);
        if let Some(x) = self.inst_mut(i) {
            x.up = false;
            x.frozen = false;
            x.pending.clear();
            for g in &dropped {
                x.data.remove(g);
            }
            x.binlog.retain(|g| !dropped.contains(g));
            if let Some(r) = x.repl.as_mut() {
                r.connected = false;
            }
        }
        self.refresh();
        self.check_split_brain("crash");
    }

    /// mysqld starts again: read-only, replication threads stopped (`skip_replica_start`),
    /// semi-sync primary side off, relay log kept (`relay_log_recovery=OFF`).
    pub(crate) fn restart(&mut self, i: u32) {
        let flavor = self.flavor;
        let Some(x) = self.inst_mut(i) else { return };
        if x.up {
            return;
        }
        x.up = true;
        x.read_only = true;
        x.super_read_only = true;
        x.semi_master = false;
        x.wait_count = 1;
        x.semi_slave = flavor == Flavor::Mariadb;
        if let Some(r) = x.repl.as_mut() {
            r.io_running = false;
            r.sql_running = false;
            r.connected = false;
            r.io_error = None;
            r.sql_error = None;
        }
        self.refresh();
        self.check_split_brain("restart");
    }

    /// The data directory is replaced by an empty one (PVC re-created; the primary's too):
    /// MySQL gets a new `server_uuid`, MariaDB keeps its `server_id` with an empty GTID state.
    /// mysqld runs again at once, read-only, in a Pod without labels. Records which
    /// acknowledged writes no instance holds any more.
    pub(crate) fn wipe(&mut self, i: u32) {
        if self.inst(i).is_none() {
            return;
        }
        let held_before = self.acknowledged_held();
        let flavor = self.flavor;
        let ident = match flavor {
            Flavor::Mysql => {
                let id = self.next_ident;
                self.next_ident += 1;
                id
            }
            Flavor::Mariadb => i,
        };
        let pending: Vec<u64> = self
            .inst(i)
            .map(|x| x.pending.iter().map(|(_, id)| *id).collect())
            .unwrap_or_default();
        for id in pending {
            self.set_write_state(id, WriteState::Interrupted);
        }
        self.end_frozen_span(i, SpanEnd::Killed);
        if let Some(x) = self.inst_mut(i) {
            let slow = x.slow;
            *x = Inst::fresh(i, ident, flavor);
            x.slow = slow;
        }
        self.forget_known(i);
        let held_after = self.acknowledged_held();
        let record = WipeRecord {
            instance: i,
            was_primary: self.status.current_primary_index == i,
            tick: self.ticks,
            destroyed: held_before.difference(&held_after).copied().collect(),
        };
        self.truth.wipes.push(record);
        self.refresh();
        self.check_split_brain("wipe");
    }

    /// Acknowledged transactions some instance holds or will hold.
    fn acknowledged_held(&self) -> BTreeSet<SimGtid> {
        let held: BTreeSet<SimGtid> = self.insts.iter().flat_map(Inst::received).collect();
        self.writes
            .iter()
            .filter(|w| w.state == WriteState::Acknowledged && held.contains(&w.gtid))
            .map(|w| w.gtid)
            .collect()
    }

    /// Cuts instance `i` from the manager and every other instance.
    pub(crate) fn isolate(&mut self, i: u32) {
        let n = self.replicas();
        if i >= n {
            return;
        }
        self.mgr_cut.insert(i);
        for j in (0..n).filter(|&j| j != i) {
            self.links_cut.insert((i.min(j), i.max(j)));
        }
        self.refresh();
        self.check_split_brain("isolate");
    }

    /// Applies a fault injected between two manager operations.
    pub(crate) fn inject(&mut self, fault: OpFault) {
        match fault {
            OpFault::Crash {
                instance,
                keep_tail,
            } => self.crash(instance, keep_tail),
            OpFault::CutManager(i) => {
                if i < self.replicas() {
                    self.mgr_cut.insert(i);
                }
            }
            OpFault::Isolate(i) => self.isolate(i),
            OpFault::Freeze(i) => self.freeze(i),
            OpFault::Thaw(i) => self.thaw(i),
            OpFault::Wipe(i) => self.wipe(i),
            OpFault::WipeDown(i) => {
                self.wipe(i);
                self.crash(i, false);
            }
        }
    }

    /// mysqld of instance `i` stops answering, keeping its whole state (a running, unfrozen
    /// instance only).
    pub(crate) fn freeze(&mut self, i: u32) {
        if !self.up(i) || self.frozen(i) {
            return;
        }
        let was_primary = self.status.current_primary_index == i;
        let tick = self.ticks;
        if let Some(x) = self.inst_mut(i) {
            x.frozen = true;
        }
        let rounds_at_freeze = self.failover_rounds;
        self.frozen_spans.push(FrozenSpan {
            instance: i,
            was_primary,
            tick,
            end: None,
            rounds_at_freeze,
        });
        self.refresh();
        self.check_split_brain("freeze");
    }

    /// A frozen mysqld resumes exactly where it was.
    pub(crate) fn thaw(&mut self, i: u32) {
        if !self.frozen(i) {
            return;
        }
        let replaced = self.status.current_primary_index != i;
        let (tick, rounds) = (self.ticks, self.failover_rounds);
        if let Some(span) = self
            .frozen_spans
            .iter()
            .rev()
            .find(|s| s.instance == i && s.end.is_none())
        {
            let failover_rounds = rounds.saturating_sub(span.rounds_at_freeze);
            let end = SpanEnd::Thawed {
                tick,
                failover_rounds,
                replaced: span.was_primary && replaced,
            };
            self.end_frozen_span(i, end);
        }
        if let Some(x) = self.inst_mut(i) {
            x.frozen = false;
        }
        self.refresh();
        self.check_split_brain("thaw");
    }

    fn end_frozen_span(&mut self, i: u32, end: SpanEnd) {
        if let Some(span) = self
            .frozen_spans
            .iter_mut()
            .rev()
            .find(|s| s.instance == i && s.end.is_none())
        {
            span.end = Some(end);
        }
    }

    /// `KILL CONNECTION` for every client: waiting commits stay committed, unacknowledged.
    pub(crate) fn kill_connections(&mut self, i: u32) {
        let ids: Vec<u64> = match self.inst_mut(i) {
            Some(x) => x.pending.drain(..).map(|(_, id)| id).collect(),
            None => Vec::new(),
        };
        for id in ids {
            self.set_write_state(id, WriteState::Killed);
        }
    }

    /// `SHOW`-style status of instance `i`.
    pub(crate) fn mysqld_status(&self, i: u32) -> Option<MysqldStatus> {
        let x = self.inst(i)?;
        let executed = match self.flavor {
            Flavor::Mysql => self.report(&x.committed()),
            Flavor::Mariadb => self.report(&x.data),
        };
        let replica_status = x.repl.as_ref().map(|r| {
            let source = self.inst(r.source);
            ReplicaStatus {
                source_host: host_of(r.source),
                source_port: PORT,
                io_running: match (r.io_running, r.connected) {
                    (true, true) => ThreadState::Yes,
                    (true, false) => ThreadState::Connecting,
                    _ => ThreadState::No,
                },
                sql_running: if r.sql_running {
                    ThreadState::Yes
                } else {
                    ThreadState::No
                },
                last_io_errno: r.io_error.as_ref().map_or(0, |e| e.0),
                last_io_error: r.io_error.as_ref().map(|e| e.1.clone()).unwrap_or_default(),
                last_sql_errno: r.sql_error.as_ref().map_or(0, |e| e.0),
                last_sql_error: r
                    .sql_error
                    .as_ref()
                    .map(|e| e.1.clone())
                    .unwrap_or_default(),
                retrieved_gtid_set: match self.flavor {
                    Flavor::Mysql => self.report(&r.retrieved),
                    Flavor::Mariadb => self.report(r.io_pos.iter()),
                },
                seconds_behind_source: if !r.sql_running
                    || (r.relay.is_empty() && !(r.io_running && r.connected))
                    || source.is_none()
                {
                    None
                } else {
                    Some(r.relay.len() as u64)
                },
            }
        });
        let replica_hosts = self
            .insts
            .iter()
            .filter(|r| r.index != i && r.up)
            .filter(|r| {
                r.repl
                    .as_ref()
                    .is_some_and(|c| c.source == i && c.io_running && c.connected)
            })
            .map(|r| ReplicaHost {
                server_id: self.server_id_base + r.index,
                host: host_of(r.index),
                port: PORT,
            })
            .collect();
        let clients = u32::try_from(self.semi_clients(i, false)).unwrap_or(u32::MAX);
        Some(MysqldStatus {
            flavor: self.flavor,
            version: match self.flavor {
                Flavor::Mysql => "8.4.0-sim".to_owned(),
                Flavor::Mariadb => "10.11.0-MariaDB-sim".to_owned(),
            },
            server_id: self.server_id_base + i,
            server_uuid: (self.flavor == Flavor::Mysql).then(|| uuid_text(x.ident)),
            gtid_executed: executed,
            gtid_purged: self.report(&x.purged),
            read_only: x.read_only,
            super_read_only: x.super_read_only,
            semi_sync: SemiSyncFacts {
                source_enabled: x.semi_master,
                replica_enabled: x.semi_slave,
                wait_for_replica_count: (self.flavor == Flavor::Mysql).then_some(x.wait_count),
                source_timeout_ms: Some(moco_core::SEMI_SYNC_TIMEOUT_MS),
                wait_sessions: x.pending.len() as u64,
                source_clients: Some(clients),
            },
            replica_status,
            replica_hosts,
            clone_state: x.clone_state,
        })
    }

    /// The executed set as the server reports it.
    pub(crate) fn reported_executed(&self, i: u32) -> GtidSet {
        match (self.flavor, self.inst(i)) {
            (Flavor::Mysql, Some(x)) => self.report(&x.committed()),
            (Flavor::Mariadb, Some(x)) => self.report(&x.data),
            (_, None) => GtidSet::new(),
        }
    }

    /// `WAIT_FOR_EXECUTED_GTID_SET` (MySQL: every GTID executed). MariaDB, as the adapter
    /// does it: done when the goal is within the reported `gtid_binlog_state`; otherwise, with
    /// a replication channel, `MASTER_GTID_WAIT` on the highest sequence number, which compares
    /// with `gtid_slave_pos` (what the SQL thread applied: local commits do not count), and
    /// without one, polling the binlog state.
    pub(crate) fn has_executed(&self, i: u32, goal: &GtidSet) -> bool {
        match self.flavor {
            Flavor::Mysql => goal.is_subset(&self.reported_executed(i)),
            Flavor::Mariadb => {
                if goal.is_subset(&self.reported_executed(i)) {
                    return true;
                }
                let want = goal
                    .sources()
                    .filter_map(|s| goal.intervals(s).last().map(|&(_, b)| b))
                    .max()
                    .unwrap_or(0);
                self.inst(i)
                    .is_some_and(|x| x.repl.is_some() && x.slave_pos.map_or(0, |g| g.seq) >= want)
            }
        }
    }

    /// `STOP REPLICA; CHANGE REPLICATION SOURCE …; START REPLICA` with the semi-sync flags.
    /// The relay log is purged by the CHANGE (unapplied transactions are dropped) and the
    /// primary side of semi-sync is turned off, which releases waiting commits.
    pub(crate) fn configure_replication(&mut self, i: u32, source: u32, semi_sync: bool) {
        let flavor = self.flavor;
        self.record_relay_purge(i);
        if let Some(x) = self.inst_mut(i) {
            let pos = match flavor {
                Flavor::Mariadb => x.mariadb_pos(),
                Flavor::Mysql => None,
            };
            x.semi_slave = semi_sync;
            x.semi_master = false;
            if flavor == Flavor::Mariadb {
                x.slave_pos = pos;
            }
            x.repl = Some(Repl {
                source,
                io_running: true,
                connected: false,
                sql_running: true,
                io_pos: pos,
                ..Repl::default()
            });
        }
        self.refresh();
        self.check_split_brain("configureReplication");
    }

    /// `START REPLICA` (or `START REPLICA SQL_THREAD`). MySQL keeps the relay log and the IO
    /// thread asks for what the replica neither executed nor retrieved. MariaDB with
    /// `MASTER_USE_GTID` starts a stopped IO thread from the applied position
    /// (`gtid_slave_pos`) and discards the relay log (see orchestrator #1260 and #1363).
    pub(crate) fn start_replica(&mut self, i: u32, sql_thread_only: bool) {
        let flavor = self.flavor;
        let io_starts = !sql_thread_only
            && self
                .inst(i)
                .and_then(|x| x.repl.as_ref())
                .is_some_and(|r| !r.io_running);
        if io_starts && flavor == Flavor::Mariadb {
            self.record_relay_purge(i);
        }
        if let Some(x) = self.inst_mut(i) {
            let pos = x.slave_pos;
            let sql_fails = x.sql_fails;
            if let Some(r) = x.repl.as_mut() {
                r.sql_running = true;
                r.sql_error = None;
                if sql_fails {
                    r.fail_sql();
                }
                if io_starts {
                    if flavor == Flavor::Mariadb {
                        r.relay.clear();
                        r.retrieved.clear();
                        r.io_pos = pos;
                    }
                    r.io_running = true;
                    r.connected = false;
                    r.io_error = None;
                }
            }
        }
        self.refresh();
        self.check_split_brain(&format!("startReplica:{i}"));
    }

    /// `STOP REPLICA; RESET REPLICA ALL; SET GLOBAL read_only=0`: the relay log (with any
    /// unapplied transaction) and the channel are gone (`SHOW REPLICA STATUS` is empty).
    pub(crate) fn set_writable(&mut self, i: u32) {
        self.record_relay_purge(i);
        if let Some(x) = self.inst_mut(i) {
            x.repl = None;
            x.read_only = false;
            x.super_read_only = false;
        }
        self.refresh();
        self.check_split_brain("setWritable");
    }

    /// Clone: the recipient gets the donor's committed data (as `gtid_purged`, no binlog).
    pub(crate) fn clone_from(&mut self, i: u32, donor: u32) {
        let flavor = self.flavor;
        let Some(copy) = self.inst(donor).map(Inst::committed) else {
            return;
        };
        let pending: Vec<u64> = self
            .inst(i)
            .map(|x| x.pending.iter().map(|(_, id)| *id).collect())
            .unwrap_or_default();
        for id in pending {
            self.set_write_state(id, WriteState::Interrupted);
        }
        if let Some(x) = self.inst_mut(i) {
            let (ident, slow, pod) = (x.ident, x.slow, x.pod.clone());
            *x = Inst::fresh(i, ident, flavor);
            x.slow = slow;
            x.pod = pod;
            if flavor == Flavor::Mariadb {
                x.slave_pos = copy.iter().copied().max_by_key(|g| (g.seq, g.origin));
            }
            x.data = copy.clone();
            x.purged = copy;
            x.clone_state = Some(CloneState::Completed);
        }
        self.forget_known(i);
        self.refresh();
        self.check_split_brain("clone");
    }

    /// Notes the unapplied relay-log transactions instance `i` is about to drop.
    fn record_relay_purge(&mut self, i: u32) {
        let Some(x) = self.inst(i) else { return };
        let Some(r) = x.repl.as_ref() else { return };
        let gtids: Vec<SimGtid> = r
            .relay
            .iter()
            .filter(|g| !x.data.contains(g))
            .copied()
            .collect();
        if gtids.is_empty() {
            return;
        }
        let acknowledged = gtids
            .iter()
            .filter(|g| {
                self.writes
                    .iter()
                    .any(|w| w.gtid == **g && w.state == WriteState::Acknowledged)
            })
            .copied()
            .collect();
        let tick = self.ticks;
        self.relay_purges.push(RelayPurge {
            instance: i,
            gtids,
            acknowledged,
            tick,
        });
    }

    /// `instance i` holds a transaction the primary `p` never had, from another server
    /// (the engine's errant rule on exact data).
    pub(crate) fn errant_against(&self, i: u32, p: u32) -> Option<SimGtid> {
        let (x, prim) = (self.inst(i)?, self.inst(p)?);
        x.data
            .iter()
            .find(|g| !prim.data.contains(g) && g.origin != prim.ident)
            .copied()
    }

    /// Judges a change of the primary against the true data: the acknowledged transactions
    /// the new primary lacks, and every problem found.
    pub(crate) fn judge_promotion(&self, from: u32, to: u32) -> (Vec<SimGtid>, Vec<String>) {
        let mut problems = Vec::new();
        let mut missing = Vec::new();
        let Some(target) = self.inst(to) else {
            return (missing, vec![format!("instance {to} does not exist")]);
        };
        let have = target.received();
        for w in &self.writes {
            if w.state == WriteState::Acknowledged && !have.contains(&w.gtid) {
                missing.push(w.gtid);
                problems.push(format!(
                    "acknowledged write #{} ({}) accepted by instance {} is missing on the new primary {to}",
                    w.id, w.gtid, w.instance
                ));
            }
        }
        for j in &self.insts {
            // The engine's eligibility rule (MOCO's): a non-primary (the old primary is never
            // a candidate, even when it still has a channel: promoted, never opened),
            // reachable (answering: not frozen), not hung, with a replication channel. A restarted ex-primary without one is not a candidate, and whatever it
            // holds that nobody else does was never acknowledged (checked above).
            if j.index == to
                || j.index == from
                || !self.manager_reaches(j.index)
                || j.frozen
                || !j.pending.is_empty()
                || j.repl.is_none()
            {
                continue;
            }
            if self.errant_against(j.index, from).is_some() {
                continue;
            }
            let more: Vec<String> = j
                .received()
                .difference(&have)
                .map(ToString::to_string)
                .collect();
            if !more.is_empty() {
                problems.push(format!(
                    "instance {} (reachable replica, not errant) holds {} that the new primary {to} lacks",
                    j.index,
                    more.join(",")
                ));
            }
        }
        (missing, problems)
    }

    /// A one-line-per-instance dump for failure messages.
    pub(crate) fn describe(&self) -> String {
        let mut out = format!(
            "tick {} primaryIndex={} cut(manager)={:?} cut(links)={:?}\n",
            self.ticks, self.status.current_primary_index, self.mgr_cut, self.links_cut
        );
        for x in &self.insts {
            let repl = x.repl.as_ref().map_or("-".to_owned(), |r| {
                format!(
                    "src={} io={}{} sql={} relay={} err={:?}/{:?}",
                    r.source,
                    if r.io_running { "on" } else { "off" },
                    if r.connected { "+" } else { "" },
                    r.sql_running,
                    r.relay.len(),
                    r.io_error.as_ref().map(|e| e.0),
                    r.sql_error.as_ref().map(|e| e.0),
                )
            });
            let data: Vec<String> = x.data.iter().map(ToString::to_string).collect();
            out.push_str(&format!(
                "  [{}] ident={} up={}{} ro={} semi(m={} k={} s={}) pending={} role={:?} pod(del={} demote={}) repl({repl}) data={{{}}}\n",
                x.index,
                x.ident,
                x.up,
                if x.frozen { " FROZEN" } else { "" },
                x.read_only,
                x.semi_master,
                x.wait_count,
                x.semi_slave,
                x.pending.len(),
                x.pod.role,
                x.pod.deleting,
                x.pod.demote,
                data.join(",")
            ));
        }
        out
    }
}

/// MariaDB: where a replica at `pos` starts reading the source's binlog, or error 1236.
fn mariadb_start(s: &Inst, pos: Option<SimGtid>) -> Result<usize, (u32, String)> {
    let clone_point = s.purged.iter().copied().max_by_key(|g| (g.seq, g.origin));
    match pos {
        None if s.purged.is_empty() => Ok(0),
        Some(p) if Some(p) == clone_point => Ok(0),
        Some(p) => match s.binlog.iter().position(|g| *g == p) {
            Some(k) => Ok(k + 1),
            None => Err((
                ER_SOURCE_FATAL_READING_BINLOG,
                format!(
                    "Got fatal error 1236 from master when reading data from binary log: 'Error: connecting slave requested to start from GTID {p}, which is not in the master's binlog'"
                ),
            )),
        },
        None => Err((
            ER_SOURCE_FATAL_READING_BINLOG,
            "Got fatal error 1236 from master when reading data from binary log: 'Could not find GTID state requested by slave in any binlog files'".to_owned(),
        )),
    }
}
