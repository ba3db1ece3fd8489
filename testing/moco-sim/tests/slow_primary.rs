//! A primary that answers pings but whose status probes are slow (heavy load, a saturated
//! node) is never failed over: the round that cannot get its status is given up
//! (`ManagerError::PrimarySlow`) and the next one asks again. The simulator's instances answer
//! everything or nothing, so this test wraps its platform to make one instance's status slow.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use moco_cluster::manager::{Manager, ManagerConfig, ManagerError};
use moco_cluster::ports::{Credentials, InstanceSlot, MysqlPort, Observation, Platform, PortError};
use moco_core::Decision;
use moco_core::facts::{ClusterFacts, Flavor, MysqldStatus, Role, ThreadState};
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, Operation, ReplicationSource};
use moco_core::state::ClusterState;
use moco_core::status::ClusteringStatus;
use moco_sim::{SimCluster, SimConfig, WriteTarget};

/// A port whose `status` takes `delay` while `slow` is set; while `applying` is set it also
/// reports a relay log it has not applied (its IO thread running), never finishes applying it
/// (a wait for it runs out of time, as the MySQL port's does), and, while `stop_times_out` is
/// set, its IO thread's stop times out. Everything else is the inner one.
#[derive(Debug)]
struct SlowStatus {
    inner: Arc<dyn MysqlPort>,
    slow: Arc<AtomicBool>,
    delay: Duration,
    applying: Arc<AtomicBool>,
    stop_times_out: Arc<AtomicBool>,
}

fn timed_out(what: &str, limit: Duration) -> PortError {
    PortError::Timeout {
        target: "instance 0".into(),
        what: what.into(),
        seconds: limit.as_secs(),
    }
}

#[async_trait]
impl MysqlPort for SlowStatus {
    async fn status(&self) -> Result<MysqldStatus, PortError> {
        if self.slow.load(Ordering::SeqCst) {
            tokio::time::sleep(self.delay).await;
        }
        let mut status = self.inner.status().await?;
        if self.applying.load(Ordering::SeqCst) {
            let retrieved = status.gtid_executed.union(&unapplied());
            status.replica_status = Some(moco_core::facts::ReplicaStatus {
                source_host: "sim-9.sim.svc".into(),
                source_port: 3306,
                io_running: ThreadState::Yes,
                sql_running: ThreadState::Yes,
                last_io_errno: 0,
                last_io_error: String::new(),
                last_sql_errno: 0,
                last_sql_error: String::new(),
                retrieved_gtid_set: retrieved,
                seconds_behind_source: Some(100),
            });
        }
        Ok(status)
    }
    async fn ping(&self) -> Result<(), PortError> {
        self.inner.ping().await
    }
    async fn executed_gtid(&self) -> Result<GtidSet, PortError> {
        self.inner.executed_gtid().await
    }
    async fn set_super_read_only(&self, kill_after: Duration) -> Result<(), PortError> {
        self.inner.set_super_read_only(kill_after).await
    }
    async fn kill_connections(&self) -> Result<(), PortError> {
        self.inner.kill_connections().await
    }
    async fn wait_for_gtid(&self, gtid: &GtidSet, t: Option<Duration>) -> Result<(), PortError> {
        if self.applying.load(Ordering::SeqCst) {
            let limit = t.unwrap_or(Duration::from_secs(3600));
            tokio::time::sleep(limit).await;
            return Err(timed_out("wait for GTID", limit));
        }
        self.inner.wait_for_gtid(gtid, t).await
    }
    async fn stop_replica_io(&self) -> Result<(), PortError> {
        if self.stop_times_out.load(Ordering::SeqCst) {
            return Err(timed_out("stop replica IO thread", Duration::from_secs(30)));
        }
        if self.applying.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.stop_replica_io().await
    }
    async fn start_replica(&self, sql_only: bool) -> Result<(), PortError> {
        self.inner.start_replica(sql_only).await
    }
    async fn set_replica_semi_sync(&self, enabled: bool) -> Result<(), PortError> {
        self.inner.set_replica_semi_sync(enabled).await
    }
    async fn configure_replication(
        &self,
        source: &ReplicationSource,
        credentials: &Credentials,
        semi_sync: bool,
    ) -> Result<(), PortError> {
        self.inner
            .configure_replication(source, credentials, semi_sync)
            .await
    }
    async fn configure_primary_semi_sync(
        &self,
        count: u32,
        timeout_ms: u64,
    ) -> Result<(), PortError> {
        self.inner
            .configure_primary_semi_sync(count, timeout_ms)
            .await
    }
    async fn set_writable(&self) -> Result<(), PortError> {
        self.inner.set_writable().await
    }
}

/// The simulated cluster, with instance `slow_index`'s status made slow on demand.
#[derive(Debug)]
struct Wrapped {
    sim: SimCluster,
    slow_index: u32,
    slow: Arc<AtomicBool>,
    delay: Duration,
    applying: Arc<AtomicBool>,
    stop_times_out: Arc<AtomicBool>,
}

#[async_trait]
impl Platform for Wrapped {
    async fn observe(&self) -> Result<Observation, PortError> {
        self.sim.observe().await
    }
    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError> {
        let inner = self.sim.mysql(slot).await?;
        if slot.index != self.slow_index {
            return Ok(inner);
        }
        Ok(Arc::new(SlowStatus {
            inner,
            slow: Arc::clone(&self.slow),
            delay: self.delay,
            applying: Arc::clone(&self.applying),
            stop_times_out: Arc::clone(&self.stop_times_out),
        }))
    }
    async fn credentials(&self, account: Account) -> Result<Credentials, PortError> {
        self.sim.credentials(account).await
    }
    async fn external_credentials(&self) -> Result<Credentials, PortError> {
        self.sim.external_credentials().await
    }
    async fn set_role_label(&self, index: u32, role: Option<Role>) -> Result<(), PortError> {
        self.sim.set_role_label(index, role).await
    }
    async fn set_prevent_delete(&self, index: u32, enabled: bool) -> Result<(), PortError> {
        self.sim.set_prevent_delete(index, enabled).await
    }
    async fn remove_demote(&self, index: u32) -> Result<(), PortError> {
        self.sim.remove_demote(index).await
    }
    async fn clear_switchover_request(
        &self,
        index: u32,
        refusal: Option<&str>,
    ) -> Result<(), PortError> {
        self.sim.clear_switchover_request(index, refusal).await
    }
    async fn write_status(&self, status: &ClusteringStatus) -> Result<(), PortError> {
        self.sim.write_status(status).await
    }
    async fn record_event(&self, event: &Event) -> Result<(), PortError> {
        self.sim.record_event(event).await
    }
    async fn clone_instance(
        &self,
        index: u32,
        donor: &ReplicationSource,
        boot_timeout: Duration,
    ) -> Result<(), PortError> {
        self.sim.clone_instance(index, donor, boot_timeout).await
    }
    async fn observed(&self, facts: &ClusterFacts, decision: &Decision) {
        self.sim.observed(facts, decision).await
    }
}

/// What a test turns on in instance 0's port (see [`SlowStatus`]).
struct Switches {
    slow: Arc<AtomicBool>,
    applying: Arc<AtomicBool>,
    stop_times_out: Arc<AtomicBool>,
}

/// A 3-instance cluster of `flavor` brought to Healthy by a manager (default configuration)
/// whose port of instance 0 takes `delay` for a status once `slow` is switched on.
async fn healthy(flavor: Flavor, delay: Duration) -> (SimCluster, Manager, Switches) {
    let sim = SimCluster::new(SimConfig::new(3, flavor));
    let switches = Switches {
        slow: Arc::default(),
        applying: Arc::default(),
        stop_times_out: Arc::default(),
    };
    let platform = Arc::new(Wrapped {
        sim: sim.clone(),
        slow_index: 0,
        slow: Arc::clone(&switches.slow),
        delay,
        applying: Arc::clone(&switches.applying),
        stop_times_out: Arc::clone(&switches.stop_times_out),
    });
    let manager = Manager::new(platform as Arc<dyn Platform>, ManagerConfig::default())
        .with_clock(Arc::new(sim.clone()));
    for _ in 0..12 {
        sim.tick();
        if let Ok(r) = manager.run_once().await
            && r.state() == ClusterState::Healthy
        {
            break;
        }
    }
    (sim, manager, switches)
}

#[tokio::test(start_paused = true)]
async fn a_primary_with_slow_status_but_live_pings_is_not_failed_over() {
    let window = ManagerConfig::default().health.detection_window;
    // Longer than the window: a round cannot wait for it.
    let (sim, manager, Switches { slow, .. }) = healthy(Flavor::Mysql, window * 2).await;
    assert_eq!(sim.status().current_primary_index, 0);
    sim.client_write(WriteTarget::Primary);
    sim.tick();

    slow.store(true, Ordering::SeqCst);
    let mut slow_rounds = 0;
    for _ in 0..5 {
        sim.tick();
        match manager.run_once().await {
            Err(ManagerError::PrimarySlow { index: 0 }) => slow_rounds += 1,
            Err(e) => panic!("unexpected round failure: {e}"),
            Ok(r) => assert!(
                !r.decision
                    .steps
                    .iter()
                    .any(|s| matches!(s.operation, Operation::StopReplicaIoThread { .. })),
                "a failover started against a slow primary: {:?}",
                r.decision.steps
            ),
        }
    }
    assert!(
        slow_rounds >= 4,
        "the slow primary's rounds were not given up ({slow_rounds})"
    );
    assert_eq!(sim.status().current_primary_index, 0);
    assert!(!sim.events().iter().any(|e| e.reason == "FailOver"));

    // Fast again: decided normally, still Healthy with the same primary.
    slow.store(false, Ordering::SeqCst);
    sim.tick();
    let r = manager.run_once().await.unwrap();
    assert_eq!(r.state(), ClusterState::Healthy);
    assert_eq!(sim.status().current_primary_index, 0);
}

/// Issue 35: a primary whose status never comes while it answers pings (before the fix, a
/// MariaDB primary whose replicas left with commits queued on the binlog lock) cannot be
/// managed. Its rounds are given up for `slow_primary_limit`, then it counts as unreachable
/// like a silent one and is failed over, so the manager goes on deciding.
#[tokio::test(start_paused = true)]
async fn a_primary_whose_status_never_comes_is_failed_over_after_the_slow_limit() {
    let limit = ManagerConfig::default().slow_primary_limit;
    // Never within a round.
    let (sim, manager, Switches { slow, .. }) =
        healthy(Flavor::Mariadb, Duration::from_secs(3600)).await;
    assert_eq!(sim.status().current_primary_index, 0);
    sim.client_write(WriteTarget::Primary);
    sim.tick_n(2);

    slow.store(true, Ordering::SeqCst);
    let since = tokio::time::Instant::now();
    let mut failed_over_after = None;
    for _ in 0..40 {
        sim.tick();
        let _ = manager.run_once().await;
        if sim.status().current_primary_index != 0 {
            failed_over_after = Some(since.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let after = failed_over_after.unwrap_or_else(|| {
        panic!(
            "a primary whose status never came was never failed over: {:?}\n{:?}",
            sim.last_round()
                .map(|(f, d)| (f.instances, d.state, d.steps)),
            sim.events()
        )
    });
    assert!(
        after >= limit,
        "failed over after {after:?}, before the slow limit {limit:?}"
    );
    assert!(
        sim.events().iter().any(|e| e.reason == "FailOver"),
        "{:?}",
        sim.events()
    );
}

/// A transaction of another server that the primary received but never applies.
fn unapplied() -> GtidSet {
    GtidSet::from_mariadb("9-9-1").unwrap()
}

/// Issue 35: a primary that applies its relay log without end does not hold a round for ever.
/// The plan waits without limit (MOCO's rule); the manager waits one slice per round, ends the
/// round without an error or an event, and decides again. A step of the plan that runs out of
/// its own time is still an error.
#[tokio::test(start_paused = true)]
async fn a_wait_without_limit_takes_one_slice_per_round_and_a_timed_out_step_is_an_error() {
    let slice = ManagerConfig::default().step_timeout;
    let (
        sim,
        manager,
        Switches {
            applying,
            stop_times_out,
            ..
        },
    ) = healthy(Flavor::Mariadb, Duration::ZERO).await;
    sim.client_write(WriteTarget::Primary);
    sim.tick_n(2);

    applying.store(true, Ordering::SeqCst);
    // A replica down: the cluster is configured again (a Healthy one plans nothing).
    sim.crash(2, true);
    for _ in 0..3 {
        sim.tick();
        let started = tokio::time::Instant::now();
        let r = manager
            .run_once()
            .await
            .unwrap_or_else(|e| panic!("a wait without limit failed the round: {e}"));
        let waits = r.decision.steps.iter().any(|s| {
            matches!(
                s.operation,
                Operation::WaitForGtid {
                    timeout_seconds: None,
                    ..
                }
            )
        });
        assert!(
            waits,
            "no wait without limit planned: {:?}",
            r.decision.steps
        );
        let took = started.elapsed();
        assert!(took >= slice && took < slice * 2, "{took:?}");
    }
    assert!(
        !sim.events().iter().any(|e| e.reason == "OperationFailed"),
        "{:?}",
        sim.events()
    );

    // A step with a time of its own that runs out is an error, with its event.
    stop_times_out.store(true, Ordering::SeqCst);
    sim.tick();
    match manager.run_once().await {
        Err(ManagerError::Step { .. }) => {}
        other => panic!(
            "a timed-out stop was not an error: {:?}",
            other.map(|r| r.decision.steps)
        ),
    }
    assert!(
        sim.events().iter().any(|e| e.reason == "OperationFailed"),
        "{:?}",
        sim.events()
    );
}
