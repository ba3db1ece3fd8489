//! [`SimCluster`]: the simulated cluster, its fault controls and its clock (its [`Platform`]
//! side is in `platform.rs`, its SQL ports in `instance.rs`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use moco_core::Decision;
use moco_core::facts::{ClusterFacts, Flavor, Role};
use moco_core::operation::Event;
use moco_core::status::ClusterStatus;
use moco_core::time::Timestamp;
use tokio::sync::Notify;

use super::model::{
    FrozenSpan, OpFault, PORT, Promotion, RelayPurge, SimGtid, Stall, State, WriteOutcome,
    WriteRecord, WriteState, WriteTarget, host_of,
};
use super::records::{AppliedOp, ErrantWrite, WipeRecord};
use moco_cluster::manager::{Manager, ManagerConfig};
use moco_cluster::ports::{Clock, Platform, PortError};

/// Shape of a simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Number of instances (`spec.replicas`).
    pub replicas: u32,
    /// Server family, which decides GTID formats and replication rules.
    pub flavor: Flavor,
    /// `spec.serverIDBase`.
    pub server_id_base: u32,
    /// `spec.maxDelaySecondsForPodDeletion` (0 disables it).
    pub max_delay_seconds_for_pod_deletion: u64,
}

impl SimConfig {
    /// `replicas` instances of `flavor`, server ids from 1000, no deletion delay limit.
    pub fn new(replicas: u32, flavor: Flavor) -> Self {
        SimConfig {
            replicas,
            flavor,
            server_id_base: 1000,
            max_delay_seconds_for_pod_deletion: 0,
        }
    }
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    killed: Arc<Notify>,
    /// Notified when a fault changes (a thaw, a crash, a cut): calls waiting on a frozen
    /// instance look again.
    changed: Notify,
    /// How many SQL ports the platform handed out (a manager should build one per instance).
    ports_built: std::sync::atomic::AtomicU64,
    /// Every round's timing, as the manager reported it.
    rounds: Mutex<Vec<moco_cluster::ports::RoundTiming>>,
}

/// An in-memory cluster of simulated mysqld instances, deterministic: nothing happens unless
/// a caller asks (a client write, a [`tick`](SimCluster::tick), a fault, a port call).
///
/// Clones share the same cluster. It implements [`Platform`]; [`crate::SimInstance`]
/// implements [`moco_cluster::ports::MysqlPort`]. Operations that wait (read-only with
/// pending commits, GTID waits) advance the simulation one tick per simulated second with
/// `tokio::time`, so they are meant to run on a runtime with paused time. Instance indexes out of range are ignored by the fault
/// controls.
#[derive(Clone, Debug)]
pub struct SimCluster {
    shared: Arc<Shared>,
}

impl SimCluster {
    /// A new cluster: every instance up, empty, read-only, nothing configured,
    /// `currentPrimaryIndex = 0`. A manager bootstraps it like a fresh MySQLCluster.
    pub fn new(config: SimConfig) -> Self {
        let state = State::new(
            config.replicas,
            config.flavor,
            config.server_id_base,
            config.max_delay_seconds_for_pod_deletion,
        );
        SimCluster {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                killed: Arc::new(Notify::new()),
                changed: Notify::new(),
                ports_built: std::sync::atomic::AtomicU64::new(0),
                rounds: Mutex::new(Vec::new()),
            }),
        }
    }

    pub(crate) fn count_port_built(&self) {
        self.shared
            .ports_built
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many times [`Platform::mysql`] was called.
    pub fn ports_built(&self) -> u64 {
        self.shared
            .ports_built
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A manager for this cluster that takes its time from the simulation ([`SIM_EPOCH`] plus
    /// one second per tick), so a run's facts and status timestamps replay exactly.
    pub fn manager(&self, config: ManagerConfig) -> Manager {
        Manager::new(Arc::new(self.clone()) as Arc<dyn Platform>, config)
            .with_clock(Arc::new(self.clone()))
    }

    /// Wakes the calls waiting on a frozen instance, after a fault changed.
    fn changed(&self) {
        self.shared.changed.notify_waiters();
    }

    /// Waits while instance `i` is frozen and still reachable (a crash or a cut ends the
    /// wait: the caller's reach check then fails). Woken by every fault change, and looks
    /// again after each second of (virtual) time in any case.
    /// Waits while a statement other than the probe sent to `i` would get no answer (frozen,
    /// or its commands stalled).
    pub(crate) async fn wait_while_frozen(&self, i: u32) {
        self.wait_while(|st| {
            (st.frozen(i)
                || st
                    .inst(i)
                    .is_some_and(|x| matches!(x.stall, Stall::Commands | Stall::Statements)))
                && reach(st, i).is_ok()
        })
        .await;
    }

    /// Waits while a ping to `i` would get no answer (frozen only).
    pub(crate) async fn wait_while_silent(&self, i: u32) {
        self.wait_while(|st| st.frozen(i) && reach(st, i).is_ok())
            .await;
    }

    /// Waits while `i`'s status probe would get no answer (frozen, or its probe stalled).
    pub(crate) async fn wait_while_probe_stalled(&self, i: u32) {
        self.wait_while(|st| {
            (st.frozen(i)
                || st
                    .inst(i)
                    .is_some_and(|x| matches!(x.stall, Stall::Probe | Stall::Statements)))
                && reach(st, i).is_ok()
        })
        .await;
    }

    /// Waits while `blocked` holds, looking again at every fault change and after each second
    /// of (virtual) time.
    pub(crate) async fn wait_while(&self, blocked: impl Fn(&State) -> bool) {
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !blocked(&self.lock()) {
                return;
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            }
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `spec.replicas`: the size the cluster is asked to have.
    pub fn replicas(&self) -> u32 {
        self.lock().spec_replicas()
    }

    /// The instances running, leaving ones included.
    pub fn instance_count(&self) -> u32 {
        self.lock().replicas()
    }

    /// Raises `spec.replicas` to `n`: new, empty instances start.
    pub fn grow(&self, n: u32) {
        self.lock().grow(n);
    }

    /// Lowers `spec.replicas` to `n`: the instances past it leave once the engine lets them
    /// (the platform removes them at the start of a later round).
    pub fn shrink(&self, n: u32) {
        self.lock().shrink(n);
    }

    /// The server family.
    pub fn flavor(&self) -> Flavor {
        self.lock().flavor
    }

    // ---- clients and time -------------------------------------------------------------

    /// A client write. Accepted only by a running, writable instance; acknowledged at once
    /// when semi-sync is off there, otherwise once enough semi-sync replicas received it
    /// (AFTER_SYNC: it is committed to the binlog either way).
    pub fn client_write(&self, target: WriteTarget) -> WriteOutcome {
        self.lock().client_write(target)
    }

    /// One replication step: IO threads reconnect and copy what they miss, semi-sync ACKs
    /// are counted, SQL threads apply their relay logs (slow replicas a few transactions).
    pub fn tick(&self) {
        self.lock().tick();
    }

    /// `n` ticks.
    pub fn tick_n(&self, n: u32) {
        let mut st = self.lock();
        for _ in 0..n {
            st.tick();
        }
    }

    // ---- faults -------------------------------------------------------------------------

    /// mysqld of instance `i` dies. With `keep_tail`, crash recovery commits the transactions
    /// that were waiting for ACKs (they may look errant later); without, the ones no replica
    /// received are lost.
    pub fn crash(&self, i: u32, keep_tail: bool) {
        self.lock().crash(i, keep_tail);
        self.changed();
    }

    /// mysqld of instance `i` starts again (read-only, replication stopped).
    pub fn restart(&self, i: u32) {
        self.lock().restart(i);
    }

    /// True when mysqld of instance `i` runs.
    pub fn is_up(&self, i: u32) -> bool {
        self.lock().up(i)
    }

    /// The manager can no longer reach instance `i` (clients and other instances still can).
    pub fn cut_manager(&self, i: u32) {
        {
            let mut st = self.lock();
            if i < st.replicas() {
                st.mgr_cut.insert(i);
            }
        }
        self.changed();
    }

    /// Undoes [`cut_manager`](Self::cut_manager).
    pub fn heal_manager(&self, i: u32) {
        self.lock().mgr_cut.remove(&i);
    }

    /// Instances `a` and `b` can no longer reach each other.
    pub fn cut_link(&self, a: u32, b: u32) {
        let mut st = self.lock();
        if a != b && a < st.replicas() && b < st.replicas() {
            st.links_cut.insert((a.min(b), a.max(b)));
            st.refresh();
            st.check_split_brain("cut link");
        }
    }

    /// Undoes [`cut_link`](Self::cut_link).
    pub fn heal_link(&self, a: u32, b: u32) {
        let mut st = self.lock();
        st.links_cut.remove(&(a.min(b), a.max(b)));
        st.refresh();
        st.check_split_brain("heal link");
    }

    /// Instance `i` is cut from the manager and from every other instance.
    pub fn isolate(&self, i: u32) {
        self.lock().isolate(i);
        self.changed();
    }

    /// mysqld of instance `i` stops answering without dying: a SIGSTOPped process, a dead
    /// node, a network black hole — on Kubernetes they look the same. Every call on it (the
    /// manager's pings and probes included) waits until [`thaw`](Self::thaw), a crash or a
    /// cut; it accepts no client write (the client times out; nothing is committed), serves
    /// its replicas nothing new and receives nothing, acknowledges nothing, and keeps its
    /// whole state (binlog, commits waiting for ACKs, `read_only`, replication settings, open
    /// replication connections). Ignored unless mysqld runs. A crash, a re-created Pod or
    /// [`wipe`](Self::wipe) ends the freeze (the process is gone).
    pub fn freeze(&self, i: u32) {
        self.lock().freeze(i);
        self.changed();
    }

    /// A frozen instance resumes exactly where it was: a thawed ex-primary may still be
    /// writable with commits waiting for ACKs. Pending calls on it go on.
    pub fn thaw(&self, i: u32) {
        self.lock().thaw(i);
        self.changed();
    }

    /// Instance `i` keeps answering pings but leaves statements waiting as `stall` says, until
    /// stalled again with [`Stall::None`] or healed ([`SimCluster::heal_all`]).
    pub fn stall(&self, i: u32, stall: Stall) {
        if let Some(x) = self.lock().inst_mut(i) {
            x.stall = stall;
        }
        self.changed();
    }

    /// True while instance `i` is frozen.
    pub fn is_frozen(&self, i: u32) -> bool {
        self.lock().frozen(i)
    }

    /// Every period an instance spent frozen, in the order they began.
    pub fn frozen_spans(&self) -> Vec<FrozenSpan> {
        self.lock().frozen_spans.clone()
    }

    /// `fault` strikes right before the manager's `n`-th next operation (0: the next one),
    /// between two steps of a plan.
    pub fn fault_at_operation(&self, n: u32, fault: OpFault) {
        self.lock().fault_at = Some((n, fault));
    }

    /// Drops a fault set by [`fault_at_operation`](Self::fault_at_operation) that has not
    /// struck; true when there was one.
    pub fn clear_operation_fault(&self) -> bool {
        self.lock().fault_at.take().is_some()
    }

    /// Every network fault is repaired.
    pub fn heal_network(&self) {
        {
            let mut st = self.lock();
            st.mgr_cut.clear();
            st.links_cut.clear();
            st.refresh();
            st.check_split_brain("heal network");
        }
        self.changed();
    }

    /// Instance `i` applies at most `per_tick` transactions per tick (`None`: no limit).
    pub fn set_slow(&self, i: u32, per_tick: Option<u32>) {
        if let Some(x) = self.lock().inst_mut(i) {
            x.slow = per_tick;
        }
    }

    /// While `fails`, instance `i`'s SQL thread stops with an error (a duplicate key) at once,
    /// and whenever it is started again.
    pub fn fail_sql_thread(&self, i: u32, fails: bool) {
        let mut st = self.lock();
        if let Some(x) = st.inst_mut(i) {
            x.sql_fails = fails;
            if let Some(r) = x.repl.as_mut().filter(|r| fails && r.sql_running) {
                r.fail_sql();
            }
        }
        st.refresh();
    }

    /// Puts `moco.cybozu.com/demote: "true"` on the Pod of instance `i`.
    pub fn request_demote(&self, i: u32) {
        if let Some(x) = self.lock().inst_mut(i) {
            x.pod.demote = true;
        }
    }

    /// Gives the Pod of instance `i` a deletionTimestamp; mysqld keeps running (preStop)
    /// until [`finish_pod_deletion`](Self::finish_pod_deletion).
    pub fn delete_pod(&self, i: u32) {
        if let Some(x) = self.lock().inst_mut(i) {
            x.pod.deleting = true;
        }
    }

    /// The deleted Pod of instance `i` is gone and re-created: mysqld stops (its binlog is
    /// durable) and starts again in a Pod without labels or annotations.
    pub fn finish_pod_deletion(&self, i: u32) {
        let mut st = self.lock();
        if !st.inst(i).is_some_and(|x| x.pod.deleting) {
            return;
        }
        st.crash(i, true);
        st.restart(i);
        if let Some(x) = st.inst_mut(i) {
            x.pod = Default::default();
        }
        drop(st);
        self.changed();
    }

    /// An administrator kills every client session of instance `i` (`KILL CONNECTION`):
    /// commits waiting for ACKs stay committed and are not acknowledged.
    pub fn kill_client_sessions(&self, i: u32) {
        let mut st = self.lock();
        st.kill_connections(i);
        st.check_split_brain("kill client sessions");
    }

    /// Re-initialises instance `i`: a new empty data directory (MySQL: a new `server_uuid`;
    /// MariaDB: the same `server_id`, an empty GTID state) in a new Pod, as after deleting its
    /// PVC and Pod, or losing the disk. Works on the primary too.
    pub fn wipe(&self, i: u32) {
        self.lock().wipe(i);
        self.changed();
    }

    /// An operator moves `status.currentPrimaryIndex` to instance `i` by hand (a status
    /// patch), as after a data loss the engine rightly refuses to decide: the lineage becomes
    /// what `i` holds or will hold. No promotion is recorded (the manager did not make it).
    pub fn force_primary(&self, i: u32) {
        let mut st = self.lock();
        if i < st.replicas() && st.status.current_primary_index != i {
            st.status.current_primary_index = i;
            st.promote_lineage(i);
        }
    }

    /// A transaction committed straight on instance `i`, outside the primary's stream — a
    /// client that found `read_only` off, a session with `sql_log_bin=1` and `SUPER` — while
    /// its replication channel stays as it is (running or not). Not a client write of the
    /// cluster: not in the ledger. `None` when mysqld is down or frozen.
    pub fn errant_write(&self, i: u32) -> Option<SimGtid> {
        self.lock().errant_write(i)
    }

    /// Repairs every fault: network, slow replicas, failing SQL threads (stopped ones stay
    /// stopped until started), frozen instances (they resume where they were), crashed
    /// instances, pending Pod deletions. Leaves data, demote requests and hung
    /// sessions alone.
    pub fn heal_all(&self) {
        {
            let mut st = self.lock();
            st.mgr_cut.clear();
            st.links_cut.clear();
            let n = st.replicas();
            for i in 0..n {
                if let Some(x) = st.inst_mut(i) {
                    x.slow = None;
                    x.stall = Stall::None;
                    x.sql_fails = false;
                }
                if st.inst(i).is_some_and(|x| x.pod.deleting) {
                    st.crash(i, true);
                    st.restart(i);
                    if let Some(x) = st.inst_mut(i) {
                        x.pod = Default::default();
                    }
                }
                if !st.up(i) {
                    st.restart(i);
                }
            }
            // Last: each thaw can only add instances able to acknowledge, so the check it runs
            // sees no state the healed cluster would not have.
            for i in 0..n {
                st.thaw(i);
            }
            st.refresh();
            st.check_split_brain("heal all");
        }
        self.changed();
    }

    /// The manager "crashes" at its `n`-th next operation (0: the next one): that call never
    /// returns and [`manager_killed`](Self::manager_killed) is notified, so the caller can
    /// drop the round's future, as a process crash would.
    pub fn kill_manager_after(&self, n: u32) {
        let mut st = self.lock();
        st.kill_after = Some(n);
        st.killed = false;
    }

    /// Notified when a kill set by [`kill_manager_after`](Self::kill_manager_after) fires.
    pub fn manager_killed(&self) -> Arc<Notify> {
        Arc::clone(&self.shared.killed)
    }

    /// Clears a pending or fired kill, for the next manager.
    pub fn clear_manager_kill(&self) {
        let mut st = self.lock();
        st.kill_after = None;
        st.killed = false;
    }

    /// Breaks the model on purpose: semi-sync never holds a commit back. Only for checking
    /// that the properties of a test suite can fail.
    pub fn break_semi_sync(&self, broken: bool) {
        self.lock().ignore_semi_sync = broken;
    }

    // ---- inspection -----------------------------------------------------------------------

    /// Every accepted write and its fate.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.lock().writes.clone()
    }

    /// The transactions acknowledged to clients.
    pub fn acknowledged(&self) -> Vec<SimGtid> {
        self.lock()
            .writes
            .iter()
            .filter(|w| w.state == WriteState::Acknowledged)
            .map(|w| w.gtid)
            .collect()
    }

    /// What instance `i` committed (MySQL `gtid_executed`, exactly).
    pub fn executed(&self, i: u32) -> BTreeSet<SimGtid> {
        self.lock()
            .inst(i)
            .map(super::model::Inst::committed)
            .unwrap_or_default()
    }

    /// What instance `i` holds or will hold: its data plus its relay log.
    pub fn received(&self, i: u32) -> BTreeSet<SimGtid> {
        self.lock()
            .inst(i)
            .map(super::model::Inst::received)
            .unwrap_or_default()
    }

    /// Number of commits waiting for ACKs on instance `i`.
    pub fn pending(&self, i: u32) -> usize {
        self.lock().inst(i).map_or(0, |x| x.pending.len())
    }

    /// True when instance `i` is writable (`read_only=0`).
    pub fn is_writable(&self, i: u32) -> bool {
        self.lock().inst(i).is_some_and(|x| x.up && !x.read_only)
    }

    /// True when the manager can reach instance `i`.
    pub fn manager_reaches(&self, i: u32) -> bool {
        self.lock().manager_reaches(i)
    }

    /// Instances that are writable and would acknowledge a write now.
    pub fn writable_ackers(&self) -> Vec<u32> {
        self.lock().writable_ackers()
    }

    /// A transaction instance `i` holds that primary `p` never had, from another server.
    pub fn errant_against(&self, i: u32, p: u32) -> Option<SimGtid> {
        self.lock().errant_against(i, p)
    }

    /// Split-brain moments seen so far (two writable instances able to acknowledge).
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// Every operation the manager applied, with the truth at that moment.
    pub fn operations(&self) -> Vec<AppliedOp> {
        self.lock().truth.ops.clone()
    }

    /// The operations applied after the first `n`.
    pub fn operations_since(&self, n: usize) -> Vec<AppliedOp> {
        self.lock().truth.ops.iter().skip(n).cloned().collect()
    }

    /// Operations that broke a rule (see [`crate::AppliedOp`]): an instance holding a
    /// known-errant transaction promoted, labelled, used as a source or donor; an instance
    /// made writable while another one the manager could fence, or that can acknowledge, is
    /// writable.
    pub fn operation_violations(&self) -> Vec<String> {
        self.lock().truth.violations.clone()
    }

    /// The transactions of the primaries' history (see `docs/simulation.md`).
    pub fn lineage(&self) -> BTreeSet<SimGtid> {
        self.lock().truth.lineage.clone()
    }

    /// Instance `i`'s transactions outside the lineage: non-empty when it is errant.
    pub fn out_of_lineage(&self, i: u32) -> BTreeSet<SimGtid> {
        self.lock().out_of_lineage(i)
    }

    /// Of those, the ones a round could see (the engine must treat `i` as errant).
    pub fn known_errant(&self, i: u32) -> BTreeSet<SimGtid> {
        self.lock().known_errant(i)
    }

    /// Every errant write ([`errant_write`](Self::errant_write)).
    pub fn errant_writes(&self) -> Vec<ErrantWrite> {
        self.lock().truth.errant_writes.clone()
    }

    /// Every lost data directory ([`wipe`](Self::wipe) and wipes striking mid-round).
    pub fn wipes(&self) -> Vec<WipeRecord> {
        self.lock().truth.wipes.clone()
    }

    /// Every change of `currentPrimaryIndex`, judged against the true data.
    pub fn promotions(&self) -> Vec<Promotion> {
        self.lock().promotions.clone()
    }

    /// Unapplied relay-log transactions dropped by `CHANGE REPLICATION SOURCE` or
    /// `RESET REPLICA ALL`.
    pub fn relay_purges(&self) -> Vec<RelayPurge> {
        self.lock().relay_purges.clone()
    }

    /// Events recorded by the manager.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }

    /// The persisted status.
    pub fn status(&self) -> ClusterStatus {
        self.lock().status.clone()
    }

    /// The role label of instance `i`.
    pub fn role_label(&self, i: u32) -> Option<Role> {
        self.lock().inst(i).and_then(|x| x.pod.role)
    }

    /// True while the Pod of instance `i` carries the demote annotation.
    pub fn demote_requested(&self, i: u32) -> bool {
        self.lock().inst(i).is_some_and(|x| x.pod.demote)
    }

    /// The timing of every round so far, in order (see [`moco_cluster::ports::RoundTiming`]).
    pub fn round_timings(&self) -> Vec<moco_cluster::ports::RoundTiming> {
        self.shared
            .rounds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn note_round(&self, timing: &moco_cluster::ports::RoundTiming) {
        self.shared
            .rounds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(*timing);
    }

    /// The facts and decision of the manager's last round.
    pub fn last_round(&self) -> Option<(ClusterFacts, Decision)> {
        self.lock().last_round.clone()
    }

    /// Ticks so far.
    pub fn ticks(&self) -> u64 {
        self.lock().ticks
    }

    /// A readable dump of every instance.
    pub fn describe(&self) -> String {
        self.lock().describe()
    }

    // ---- helpers for the ports ----------------------------------------------------------

    /// Counts one manager operation; hangs forever when a kill fires.
    pub(crate) async fn gate(&self) {
        let (hang, struck) = {
            let mut st = self.lock();
            let struck = match st.fault_at {
                Some((0, fault)) => {
                    st.fault_at = None;
                    st.inject(fault);
                    true
                }
                Some((n, fault)) => {
                    st.fault_at = Some((n - 1, fault));
                    false
                }
                None => false,
            };
            let hang = match st.kill_after {
                Some(0) => {
                    st.kill_after = None;
                    st.killed = true;
                    true
                }
                Some(n) => {
                    st.kill_after = Some(n - 1);
                    false
                }
                None => st.killed,
            };
            (hang, struck)
        };
        if struck {
            self.changed();
        }
        if hang {
            self.shared.killed.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

/// The error of an instance the manager cannot reach.
pub(crate) fn reach(st: &State, i: u32) -> Result<(), PortError> {
    let target = format!("instance {i} ({}:{PORT})", host_of(i));
    match st.inst(i) {
        None => Err(PortError::Failed {
            target,
            message: "no such instance in the simulated cluster".to_owned(),
        }),
        Some(x) if !x.up => Err(PortError::Unreachable {
            target,
            message: "connection refused: mysqld is down".to_owned(),
        }),
        Some(_) if st.mgr_cut.contains(&i) => Err(PortError::Unreachable {
            target,
            message: "connect timed out: network partition between the manager and the instance"
                .to_owned(),
        }),
        Some(_) => Ok(()),
    }
}

/// Simulated wall time starts here (2026-01-01T00:00:00Z) and advances one second per tick,
/// so the timestamps a run records are the same on every replay.
pub const SIM_EPOCH: i64 = 1_767_225_600;

impl Clock for SimCluster {
    fn now(&self) -> Timestamp {
        let ticks = i64::try_from(self.lock().ticks).unwrap_or(i64::MAX);
        Timestamp(SIM_EPOCH.saturating_add(ticks))
    }
}
