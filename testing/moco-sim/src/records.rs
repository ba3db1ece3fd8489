//! The records of the simulation: a transaction's identity, what the manager applied, errant
//! writes, wiped data directories, and the truth the checks keep. Data only; the model
//! ([`super::model`]) produces them and [`super::truth`] checks against them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use moco_core::facts::Role;

/// One transaction as the simulator knows it, exactly: who originated it and its number.
///
/// `origin` is a server *identity*: on MySQL a `server_uuid` (a re-initialised instance gets a
/// new one), on MariaDB the `server_id` (which an instance keeps). `seq` is the GTID number:
/// per UUID on MySQL, per replication domain on MariaDB (`gtid_strict_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimGtid {
    /// Server identity that committed it first.
    pub origin: u32,
    /// Transaction number.
    pub seq: u64,
}

impl fmt::Display for SimGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.origin, self.seq)
    }
}

/// One operation the manager applied to the simulated cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimOp {
    /// `SET GLOBAL super_read_only=1` finished.
    SetSuperReadOnly(u32),
    /// Client connections killed.
    KillConnections(u32),
    /// A GTID wait finished.
    WaitForGtid(u32),
    /// `STOP REPLICA IO_THREAD`.
    StopReplicaIo(u32),
    /// `START REPLICA` (or only its SQL thread).
    StartReplica {
        /// The instance.
        instance: u32,
        /// `START REPLICA SQL_THREAD`.
        sql_thread_only: bool,
    },
    /// The replica side of semi-sync switched.
    SetReplicaSemiSync(u32),
    /// `CHANGE REPLICATION SOURCE` to `source`, then `START REPLICA`.
    ConfigureReplication {
        /// The instance.
        instance: u32,
        /// Its new source.
        source: u32,
    },
    /// The primary side of semi-sync configured.
    ConfigurePrimarySemiSync(u32),
    /// `RESET REPLICA ALL; SET GLOBAL read_only=0`.
    SetWritable(u32),
    /// A Pod's role label set or removed.
    SetRoleLabel {
        /// The instance.
        instance: u32,
        /// The new label.
        role: Option<Role>,
    },
    /// The prevent-delete annotation set or removed.
    SetPreventDelete(u32),
    /// The demote annotation removed.
    RemoveDemote(u32),
    /// `currentPrimaryIndex` moved.
    SetPrimaryIndex {
        /// The previous primary.
        from: u32,
        /// The new one.
        to: u32,
    },
    /// A clone of `donor` into `instance`.
    Clone {
        /// The recipient.
        instance: u32,
        /// The donor.
        donor: u32,
    },
}

/// An applied operation, with the truth at that moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedOp {
    /// Ticks elapsed.
    pub tick: u64,
    /// What the manager did.
    pub op: SimOp,
    /// Running instances with `read_only=0` (after the operation).
    pub writable: Vec<u32>,
    /// Errant instances (data outside the lineage), before the operation for promotions and
    /// clones, after it otherwise.
    pub errant: Vec<u32>,
    /// Of those, the ones holding a known-errant transaction.
    pub known_errant: Vec<u32>,
    /// `SetWritable`: acknowledged transactions the instance opened does not hold.
    pub missing_acknowledged: Vec<SimGtid>,
    /// `SetWritable`: the instance opened reported no transaction when the round read it.
    pub opened_empty: bool,
    /// What the operation broke (empty when nothing).
    pub problems: Vec<String>,
}

/// A transaction committed straight on an instance, outside the primary's stream (a client
/// that found `read_only` off, a session with `sql_log_bin=1` and `SUPER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrantWrite {
    /// The instance.
    pub instance: u32,
    /// The transaction.
    pub gtid: SimGtid,
    /// Ticks elapsed.
    pub tick: u64,
    /// The instance had a replication channel with its IO thread on (it keeps it).
    pub channel_running: bool,
}

/// A data directory lost ([`crate::SimCluster::wipe`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WipeRecord {
    /// The instance.
    pub instance: u32,
    /// It was `currentPrimaryIndex`.
    pub was_primary: bool,
    /// Ticks elapsed.
    pub tick: u64,
    /// Acknowledged transactions no instance holds or will hold any more after the wipe.
    pub destroyed: Vec<SimGtid>,
}

/// What one status probe of an instance returned in the current round.
#[derive(Clone, Debug)]
pub(crate) struct Read {
    /// The exact transactions behind the reported executed set (MySQL leaves out commits
    /// waiting for ACKs).
    pub reported: BTreeSet<SimGtid>,
    /// It had commits waiting for ACKs (the engine counts it unreachable).
    pub hung: bool,
    /// How many times its data directory had been replaced.
    pub wipes: usize,
}

/// The truth the operation checks use, kept in [`super::model::State`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Truth {
    pub lineage: BTreeSet<SimGtid>,
    /// Per instance: transactions outside the lineage a round could see, once that round's
    /// verdict was persisted.
    pub known: BTreeMap<u32, BTreeSet<SimGtid>>,
    /// What this round learnt, until its status write persists it.
    pub pending_known: Option<BTreeMap<u32, BTreeSet<SimGtid>>>,
    /// Status probes answered since the manager's last `observe`.
    pub reads: BTreeMap<u32, Read>,
    pub ops: Vec<AppliedOp>,
    pub violations: Vec<String>,
    pub errant_writes: Vec<ErrantWrite>,
    pub wipes: Vec<WipeRecord>,
}
