//! # moco-sim
//!
//! An in-memory simulated cluster implementing [`moco_cluster::ports::Platform`] and
//! [`moco_cluster::ports::MysqlPort`], for driving the real
//! [`moco_cluster::manager::Manager`] and engine through fault schedules (see
//! `docs/simulation.md`). Test-only: other crates take it as a dev-dependency, so no
//! production build compiles it.
//!
//! The model keeps exact transaction sets and applies the MySQL/MariaDB rules the engine
//! relies on:
//!
//! * every instance has an identity (`server_uuid` / `server_id`), a binary log of
//!   transactions in commit order, `gtid_purged` after a clone, a relay log and
//!   `Retrieved_Gtid_Set` (MariaDB: `Gtid_IO_Pos`), `read_only` / `super_read_only`,
//!   semi-sync primary and replica flags, and at most one replication channel;
//! * a client write is accepted only by a running writable instance; with semi-sync on it is
//!   committed to the binlog and acknowledged only once enough connected semi-sync replicas
//!   received it (AFTER_SYNC, no timeout), and shows as `Rpl_semi_sync_master_wait_sessions`
//!   meanwhile; turning semi-sync off releases such commits, killing the sessions does not
//!   acknowledge them;
//! * replication moves only on [`SimCluster::tick`] (or inside an operation that waits): IO
//!   threads reconnect when they can reach their source, check what MySQL checks on
//!   connection (purged GTIDs, own-UUID GTIDs the source lacks; MariaDB: the start position
//!   must be in the source's binlog) and copy missing transactions; SQL threads apply them;
//! * faults: crashes (with or without the pending tail), restarts (read-only, replication
//!   stopped), partitions between the manager and an instance or between two instances,
//!   hung instances ([`SimCluster::freeze`]: every call waits until the thaw, nothing
//!   replicates, the state is kept), stalled ones ([`SimCluster::stall`]: pings answered,
//!   the probe or every statement waiting), slow replicas, Pod deletion and demotion, data loss,
//!   manager crashes mid-round, errant writes on replicas ([`SimCluster::errant_write`]);
//! * ground truth for the checks: the lineage (the transactions of the primaries' history),
//!   which instances hold data outside it (errant), which of those a round could see, and
//!   every operation the manager applied, checked against it when it took effect
//!   ([`SimCluster::operations`], [`SimCluster::operation_violations`]).
//!
//! Nothing is random: every choice comes from the caller.

#![deny(missing_docs)]

mod cluster;
mod instance;
mod model;
mod platform;
mod records;
mod truth;

pub use cluster::{SIM_EPOCH, SimCluster, SimConfig};
pub use instance::SimInstance;
pub use model::{
    FrozenSpan, OpFault, PORT as INSTANCE_PORT, Promotion, RelayPurge, SimGtid, SpanEnd, Stall,
    WriteOutcome, WriteRecord, WriteState, WriteTarget, host_of as instance_host,
};
pub use records::{AppliedOp, ErrantWrite, SimOp, WipeRecord};
