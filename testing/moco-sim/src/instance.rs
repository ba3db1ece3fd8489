//! [`SimInstance`]: the [`MysqlPort`] of one simulated mysqld.

use std::time::Duration;

use async_trait::async_trait;
use moco_core::facts::{Flavor, MysqldStatus};
use moco_core::gtid::GtidSet;
use moco_core::operation::ReplicationSource;
use tokio::time::Instant;

use super::cluster::{SimCluster, reach};
use super::model::{PORT, host_of};
use super::records::SimOp;
use moco_cluster::ports::{Credentials, MysqlPort, PortError};

/// How long a wait without limit may advance the simulation before giving up (the manager's
/// own operation timeout usually stops it first).
const UNLIMITED_WAIT: Duration = Duration::from_secs(3600);

/// The SQL port of one simulated instance. Every call fails with
/// [`PortError::Unreachable`] while mysqld is down or cut from the manager, and waits while
/// it is frozen ([`SimCluster::freeze`]) until it is thawed, crashes or is cut: the caller's
/// timeouts decide how long to wait, as with a SIGSTOPped mysqld.
#[derive(Clone, Debug)]
pub struct SimInstance {
    cluster: SimCluster,
    index: u32,
}

impl SimCluster {
    /// The SQL port of instance `index`.
    pub fn instance(&self, index: u32) -> SimInstance {
        SimInstance::new(self.clone(), index)
    }
}

impl SimInstance {
    pub(crate) fn new(cluster: SimCluster, index: u32) -> Self {
        SimInstance { cluster, index }
    }

    /// The ordinal.
    pub fn index(&self) -> u32 {
        self.index
    }

    fn target(&self) -> String {
        format!("instance {} ({}:{PORT})", self.index, host_of(self.index))
    }

    /// Runs `f` on the state once the instance answers (not frozen) and is reachable, then
    /// re-checks the cluster.
    async fn with_reachable(
        &self,
        context: &str,
        op: SimOp,
        f: impl FnOnce(&mut super::model::State),
    ) -> Result<(), PortError> {
        self.cluster.wait_while_frozen(self.index).await;
        let mut st = self.cluster.lock();
        reach(&st, self.index)?;
        f(&mut st);
        st.refresh();
        st.check_split_brain(&format!("{context}:{}", self.index));
        st.applied(op);
        Ok(())
    }
}

#[async_trait]
impl MysqlPort for SimInstance {
    async fn status(&self) -> Result<MysqldStatus, PortError> {
        self.cluster.wait_while_probe_stalled(self.index).await;
        let mut st = self.cluster.lock();
        reach(&st, self.index)?;
        let status = st
            .mysqld_status(self.index)
            .ok_or_else(|| PortError::Failed {
                target: self.target(),
                message: "no such instance".to_owned(),
            })?;
        st.note_read(self.index);
        Ok(status)
    }

    /// `COM_PING`: only whether the server answers, no status.
    async fn ping(&self) -> Result<(), PortError> {
        self.cluster.wait_while_silent(self.index).await;
        reach(&self.cluster.lock(), self.index)
    }

    async fn executed_gtid(&self) -> Result<GtidSet, PortError> {
        self.cluster.wait_while_frozen(self.index).await;
        let st = self.cluster.lock();
        reach(&st, self.index)?;
        Ok(st.reported_executed(self.index))
    }

    async fn set_super_read_only(&self, kill_after: Duration) -> Result<(), PortError> {
        self.cluster.gate().await;
        let start = Instant::now();
        let i = self.index;
        loop {
            // A frozen server neither finishes the statement nor lets the kill through.
            self.cluster.wait_while_frozen(i).await;
            {
                let mut st = self.cluster.lock();
                reach(&st, i)?;
                let waiting = st.inst(i).is_some_and(|x| !x.pending.is_empty());
                // The global read lock waits for commits stuck in the semi-sync wait; after
                // `kill_after` the clients are killed, which lets those commits finish.
                if waiting && start.elapsed() >= kill_after {
                    st.kill_connections(i);
                }
                if st.inst(i).is_some_and(|x| x.pending.is_empty()) {
                    if let Some(x) = st.inst_mut(i) {
                        x.read_only = true;
                        x.super_read_only = true;
                    }
                    st.refresh();
                    st.check_split_brain(&format!("setSuperReadOnly:{i}"));
                    st.applied(SimOp::SetSuperReadOnly(i));
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.cluster.tick();
        }
    }

    async fn kill_connections(&self) -> Result<(), PortError> {
        self.cluster.gate().await;
        let i = self.index;
        self.with_reachable("killConnections", SimOp::KillConnections(i), |st| {
            st.kill_connections(i);
        })
        .await
    }

    async fn wait_for_gtid(
        &self,
        gtid: &GtidSet,
        timeout: Option<Duration>,
    ) -> Result<(), PortError> {
        self.cluster.gate().await;
        let start = Instant::now();
        let limit = timeout.unwrap_or(UNLIMITED_WAIT);
        let i = self.index;
        loop {
            // A frozen server does not answer, not even its own timeout.
            self.cluster.wait_while_frozen(i).await;
            {
                let mut st = self.cluster.lock();
                reach(&st, i)?;
                if st.has_executed(i, gtid) {
                    st.applied(SimOp::WaitForGtid(i));
                    return Ok(());
                }
            }
            if start.elapsed() >= limit {
                let what = match self.cluster.flavor() {
                    Flavor::Mysql => format!("WAIT_FOR_EXECUTED_GTID_SET('{gtid}')"),
                    Flavor::Mariadb => format!("MASTER_GTID_WAIT('{}')", gtid.mariadb_position()),
                };
                return Err(PortError::Timeout {
                    target: self.target(),
                    what,
                    seconds: limit.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.cluster.tick();
        }
    }

    async fn stop_replica_io(&self) -> Result<(), PortError> {
        self.cluster.gate().await;
        let i = self.index;
        self.with_reachable("stopReplicaIo", SimOp::StopReplicaIo(i), |st| {
            if let Some(r) = st.inst_mut(i).and_then(|x| x.repl.as_mut()) {
                r.io_running = false;
                r.connected = false;
            }
        })
        .await
    }

    async fn start_replica(&self, sql_thread_only: bool) -> Result<(), PortError> {
        self.cluster.gate().await;
        let i = self.index;
        self.cluster.wait_while_frozen(i).await;
        let mut st = self.cluster.lock();
        reach(&st, i)?;
        if st.inst(i).is_some_and(|x| x.repl.is_none()) {
            return Err(PortError::Sql {
                target: self.target(),
                what: "START REPLICA".to_owned(),
                code: 1200,
                message: "The server is not configured as replica; fix in config file or with CHANGE REPLICATION SOURCE TO".to_owned(),
            });
        }
        st.start_replica(i, sql_thread_only);
        st.applied(SimOp::StartReplica {
            instance: i,
            sql_thread_only,
        });
        Ok(())
    }

    async fn set_replica_semi_sync(&self, enabled: bool) -> Result<(), PortError> {
        self.cluster.gate().await;
        let i = self.index;
        self.with_reachable("setReplicaSemiSync", SimOp::SetReplicaSemiSync(i), |st| {
            if let Some(x) = st.inst_mut(i) {
                x.semi_slave = enabled;
                x.semi_master = false;
            }
        })
        .await
    }

    async fn configure_replication(
        &self,
        source: &ReplicationSource,
        _credentials: &Credentials,
        semi_sync: bool,
    ) -> Result<(), PortError> {
        self.cluster.gate().await;
        let ReplicationSource::Instance { index: from, .. } = source else {
            return Err(PortError::Failed {
                target: self.target(),
                message: "replication from an external source is not simulated".to_owned(),
            });
        };
        let from = *from;
        let i = self.index;
        self.cluster.wait_while_frozen(i).await;
        let mut st = self.cluster.lock();
        reach(&st, i)?;
        if st.inst(from).is_none() {
            return Err(PortError::Sql {
                target: self.target(),
                what: "CHANGE REPLICATION SOURCE TO".to_owned(),
                code: 2005,
                message: format!("unknown source host for instance {from}"),
            });
        }
        st.configure_replication(i, from, semi_sync);
        st.applied(SimOp::ConfigureReplication {
            instance: i,
            source: from,
        });
        Ok(())
    }

    async fn configure_primary_semi_sync(
        &self,
        wait_for_replica_count: u32,
        _timeout_ms: u64,
    ) -> Result<(), PortError> {
        self.cluster.gate().await;
        let i = self.index;
        self.with_reachable(
            "configurePrimarySemiSync",
            SimOp::ConfigurePrimarySemiSync(i),
            |st| {
                if let Some(x) = st.inst_mut(i) {
                    x.semi_slave = false;
                    x.semi_master = true;
                    x.wait_count = wait_for_replica_count.max(1);
                }
            },
        )
        .await
    }

    async fn set_writable(&self) -> Result<(), PortError> {
        self.cluster.gate().await;
        let i = self.index;
        self.with_reachable("setWritable", SimOp::SetWritable(i), |st| {
            st.set_writable(i);
        })
        .await
    }
}
