//! The simulator's MySQL/MariaDB semantics, driven through its ports without the manager:
//! what the fault-schedule properties (`sim_faults.rs`) rely on the model to get right.

use std::time::Duration;

use moco_cluster::ports::{Credentials, MysqlPort, PortError};
use moco_core::facts::{Flavor, ThreadState};
use moco_core::operation::ReplicationSource;
use moco_sim::{SimCluster, SimConfig, WriteOutcome, WriteState, WriteTarget};

fn source(index: u32) -> ReplicationSource {
    ReplicationSource::Instance {
        index,
        host: format!("sim-{index}.sim.svc"),
        port: 3306,
    }
}

fn creds() -> Credentials {
    Credentials {
        user: "moco-repl".to_owned(),
        password: "x".to_owned(),
    }
}

/// Instance 0 writable primary with semi-sync waiting for `acks`; the others replicate from it.
async fn cluster(n: u32, flavor: Flavor, acks: u32) -> SimCluster {
    let sim = SimCluster::new(SimConfig::new(n, flavor));
    let p = sim.instance(0);
    p.configure_primary_semi_sync(acks, 86_400_000)
        .await
        .unwrap();
    for i in 1..n {
        sim.instance(i)
            .configure_replication(&source(0), &creds(), true)
            .await
            .unwrap();
    }
    p.set_writable().await.unwrap();
    sim
}

/// Instance 0 commits a transaction no other instance receives, crashes keeping it and
/// restarts; the network heals.
fn commit_unseen_tail(sim: &SimCluster) {
    sim.cut_link(0, 1);
    sim.cut_link(0, 2);
    sim.client_write(WriteTarget::Instance(0));
    sim.crash(0, true);
    sim.restart(0);
    sim.heal_network();
}

/// Instance `i`'s replication status (it must have a channel).
async fn replica_status(sim: &SimCluster, i: u32) -> moco_core::facts::ReplicaStatus {
    sim.instance(i)
        .status()
        .await
        .unwrap()
        .replica_status
        .unwrap()
}

/// Points instance `i` at instance `from` and returns its replica status right after.
async fn replicate(sim: &SimCluster, i: u32, from: u32) -> moco_core::facts::ReplicaStatus {
    sim.instance(i)
        .configure_replication(&source(from), &creds(), true)
        .await
        .unwrap();
    replica_status(sim, i).await
}

fn gtid(o: WriteOutcome) -> moco_sim::SimGtid {
    match o {
        WriteOutcome::Acknowledged(g) | WriteOutcome::Pending(g) => g,
        WriteOutcome::Rejected => panic!("write rejected"),
    }
}

#[tokio::test(start_paused = true)]
async fn semi_sync_acknowledges_after_k_replicas_received() {
    let sim = cluster(5, Flavor::Mysql, 2).await;
    sim.isolate(3);
    sim.isolate(4);
    sim.cut_link(0, 2);
    let g = gtid(sim.client_write(WriteTarget::Instance(0)));
    assert_eq!(sim.pending(0), 1);
    // AFTER_SYNC: the commit is in the binlog (replicas get it) but not in gtid_executed.
    let status = sim.instance(0).status().await.unwrap();
    assert!(status.gtid_executed.is_empty());
    assert_eq!(status.semi_sync.wait_sessions, 1);
    sim.tick();
    assert!(sim.received(1).contains(&g));
    assert_eq!(sim.pending(0), 1, "one ACK of two");
    sim.heal_link(0, 2);
    sim.tick();
    assert_eq!(sim.pending(0), 0);
    assert_eq!(sim.acknowledged(), vec![g]);
    assert!(
        !sim.instance(0)
            .status()
            .await
            .unwrap()
            .gtid_executed
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn killed_or_crashed_sessions_are_not_acknowledged_but_semi_sync_off_is() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.cut_link(0, 1);
    sim.cut_link(0, 2);
    gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.instance(0).kill_connections().await.unwrap();
    gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.crash(0, true);
    sim.restart(0);
    assert!(!sim.is_writable(0), "a restarted server is read-only");
    // Semi-sync off releases a waiting commit: the client gets OK.
    sim.instance(0).set_writable().await.unwrap();
    gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.instance(0)
        .configure_replication(&source(1), &creds(), true)
        .await
        .unwrap();
    let states: Vec<WriteState> = sim.writes().iter().map(|w| w.state).collect();
    assert_eq!(
        states,
        vec![
            WriteState::Killed,
            WriteState::Interrupted,
            WriteState::Acknowledged
        ]
    );
    // Crash recovery with keep_tail kept both unacknowledged commits.
    assert_eq!(sim.executed(0).len(), 3);
}

#[tokio::test(start_paused = true)]
async fn crash_without_tail_loses_only_what_nobody_received() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.cut_link(0, 2);
    let a = gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.tick(); // 1 received a
    sim.cut_link(0, 1);
    let b = gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.crash(0, false);
    sim.restart(0);
    let data = sim.executed(0);
    assert!(data.contains(&a) && !data.contains(&b));
}

#[tokio::test(start_paused = true)]
async fn read_only_waits_for_stuck_commits_then_kills_them() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.isolate(1);
    sim.isolate(2);
    gtid(sim.client_write(WriteTarget::Instance(0)));
    let start = tokio::time::Instant::now();
    sim.instance(0)
        .set_super_read_only(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(start.elapsed() >= Duration::from_secs(10));
    assert!(!sim.is_writable(0));
    assert_eq!(sim.writes()[0].state, WriteState::Killed);
    assert!(matches!(
        sim.client_write(WriteTarget::Instance(0)),
        WriteOutcome::Rejected
    ));
}

#[tokio::test(start_paused = true)]
async fn wait_for_gtid_ticks_until_applied_or_times_out() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.set_slow(1, Some(1));
    for _ in 0..5 {
        sim.client_write(WriteTarget::Instance(0));
    }
    sim.tick();
    let goal = sim.instance(0).executed_gtid().await.unwrap();
    let r = sim.instance(1);
    r.wait_for_gtid(&goal, Some(Duration::from_secs(50)))
        .await
        .unwrap();
    // A replica that cannot reach its source never gets there.
    sim.client_write(WriteTarget::Instance(0));
    sim.cut_link(0, 2);
    sim.tick();
    let goal = sim.instance(0).executed_gtid().await.unwrap();
    let err = sim
        .instance(2)
        .wait_for_gtid(&goal, Some(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PortError::Timeout { seconds: 5, .. }),
        "{err}"
    );
}

/// MariaDB: an errant write on a replica keeps its channel; the primary's next transaction
/// then stops the replica's applier (1950, out of order), and `MASTER_GTID_WAIT` compares with
/// `gtid_slave_pos`, which local commits do not move: waiting for the primary's position times
/// out, while a goal within the replica's own binlog state is reached at once.
#[tokio::test(start_paused = true)]
async fn mariadb_errant_write_keeps_the_channel_and_gtid_slave_pos() {
    let sim = cluster(3, Flavor::Mariadb, 1).await;
    let errant = sim.errant_write(1).unwrap();
    assert!(sim.errant_writes()[0].channel_running);
    assert_eq!(
        sim.out_of_lineage(1).into_iter().collect::<Vec<_>>(),
        vec![errant]
    );
    let g = gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.tick();
    let r = replica_status(&sim, 1).await;
    assert_eq!(r.io_running, ThreadState::Yes);
    assert_eq!(r.last_sql_errno, 1950);
    assert!(sim.received(1).contains(&g) && !sim.executed(1).contains(&g));
    assert!(
        sim.out_of_lineage(0).is_empty(),
        "the primary's commits are the history"
    );
    let goal = sim.instance(0).executed_gtid().await.unwrap();
    let err = sim
        .instance(1)
        .wait_for_gtid(&goal, Some(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(matches!(err, PortError::Timeout { .. }), "{err}");
    let own = sim.instance(1).executed_gtid().await.unwrap();
    sim.instance(1)
        .wait_for_gtid(&own, Some(Duration::from_secs(1)))
        .await
        .unwrap();
    // Replica 2 applied the primary's transaction: its gtid_slave_pos reached it.
    sim.instance(2)
        .wait_for_gtid(&goal, Some(Duration::from_secs(1)))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn unreachable_instances_fail_every_call() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.cut_manager(1);
    assert!(matches!(
        sim.instance(1).status().await,
        Err(PortError::Unreachable { .. })
    ));
    assert!(sim.instance(1).stop_replica_io().await.is_err());
    // Clients and replication still reach it.
    let g = gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.tick();
    assert!(sim.received(1).contains(&g));
    sim.crash(2, true);
    assert!(matches!(
        sim.instance(2).kill_connections().await,
        Err(PortError::Unreachable { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn mysql_connection_checks() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.client_write(WriteTarget::Instance(0));
    sim.tick();
    // 1 takes over; 0 keeps a tail of its own UUID that 1 never saw, then replicates from 1.
    // MySQL only refuses a replica holding GTIDs of the *source's* UUID the source lacks, so
    // the errant tail does not stop replication: the engine has to find it.
    sim.instance(1).stop_replica_io().await.unwrap();
    sim.instance(1).set_writable().await.unwrap();
    commit_unseen_tail(&sim);
    sim.instance(0)
        .configure_replication(&source(1), &creds(), true)
        .await
        .unwrap();
    let s = sim.instance(0).status().await.unwrap();
    assert_eq!(
        s.replica_status.as_ref().unwrap().io_running,
        ThreadState::Yes,
        "errant transactions of another UUID do not stop MySQL replication"
    );
    // A clone of 1 becomes a source whose gtid_purged a lagging replica lacks: 1236.
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.cut_link(0, 2);
    sim.client_write(WriteTarget::Instance(0));
    sim.tick();
    sim.wipe(1);
    moco_cluster::ports::Platform::clone_instance(&sim, 1, &source(0), Duration::from_secs(60))
        .await
        .unwrap();
    let s1 = sim.instance(1).status().await.unwrap();
    assert!(!s1.gtid_purged.is_empty());
    sim.instance(1).set_writable().await.unwrap();
    sim.heal_network();
    let r = replicate(&sim, 2, 1).await;
    assert_eq!(r.io_running, ThreadState::No);
    assert_eq!(r.last_io_errno, 1236, "{}", r.last_io_error);
}

#[tokio::test(start_paused = true)]
async fn mariadb_position_must_be_in_the_sources_binlog() {
    let sim = cluster(3, Flavor::Mariadb, 1).await;
    sim.client_write(WriteTarget::Instance(0));
    sim.tick();
    // 0 writes a tail nobody receives, then 1 takes over and writes the same sequence number.
    commit_unseen_tail(&sim);
    sim.instance(1).stop_replica_io().await.unwrap();
    sim.instance(1).set_writable().await.unwrap();
    sim.instance(1)
        .configure_primary_semi_sync(1, 1)
        .await
        .unwrap();
    sim.client_write(WriteTarget::Instance(1));
    let r = replicate(&sim, 0, 1).await;
    assert_eq!(r.last_io_errno, 1236, "{}", r.last_io_error);
    assert!(r.last_io_error.contains("not in the master's binlog"));
    // The state as MariaDB reports it: the last sequence number per server id.
    let s0 = sim.instance(0).status().await.unwrap();
    assert_eq!(s0.gtid_executed.to_string(), "0-1000-2");
    let s1 = sim.instance(1).status().await.unwrap();
    assert_eq!(s1.gtid_executed.to_string(), "0-1000-1,0-1001-2");
}

#[tokio::test(start_paused = true)]
async fn relay_log_survives_restart_and_start_replica_on_mysql_only() {
    for flavor in [Flavor::Mysql, Flavor::Mariadb] {
        let sim = cluster(3, flavor, 1).await;
        sim.set_slow(1, Some(1));
        for _ in 0..3 {
            sim.client_write(WriteTarget::Instance(0));
        }
        sim.tick();
        assert_eq!(sim.executed(1).len(), 1);
        assert_eq!(sim.received(1).len(), 3);
        sim.crash(1, true);
        sim.restart(1);
        let r = replica_status(&sim, 1).await;
        assert!(r.sql_running == ThreadState::No && r.io_running == ThreadState::No);
        assert_eq!(sim.received(1).len(), 3, "relay_log_recovery=OFF keeps it");
        sim.cut_link(0, 1);
        sim.instance(1).start_replica(false).await.unwrap();
        let kept = sim.received(1).len();
        match flavor {
            Flavor::Mysql => assert_eq!(kept, 3, "START REPLICA keeps the relay log"),
            Flavor::Mariadb => {
                assert_eq!(kept, 1, "START SLAVE restarts from gtid_slave_pos");
                assert_eq!(sim.relay_purges().len(), 1);
            }
        }
        // CHANGE always deletes it.
        sim.crash(1, true);
        sim.restart(1);
        sim.instance(1)
            .configure_replication(&source(0), &creds(), true)
            .await
            .unwrap();
        assert_eq!(sim.received(1).len(), sim.executed(1).len());
    }
}

#[tokio::test(start_paused = true)]
async fn set_writable_forgets_the_channel_and_its_relay_log() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    sim.set_slow(1, Some(1));
    sim.client_write(WriteTarget::Instance(0));
    sim.client_write(WriteTarget::Instance(0));
    sim.tick();
    sim.instance(1).set_writable().await.unwrap();
    let s = sim.instance(1).status().await.unwrap();
    assert!(s.replica_status.is_none());
    assert_eq!(
        sim.received(1).len(),
        1,
        "the unapplied transaction is gone"
    );
    assert_eq!(sim.relay_purges().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn split_brain_is_recorded() {
    let sim = cluster(3, Flavor::Mysql, 1).await;
    assert!(sim.violations().is_empty());
    // A second writable primary with semi-sync off acknowledges on its own.
    sim.instance(2).set_writable().await.unwrap();
    assert_eq!(sim.writable_ackers(), vec![0, 2]);
    assert!(
        sim.violations()[0].contains("[0, 2]"),
        "{:?}",
        sim.violations()
    );
}

/// The manager of a simulated run takes its time from the simulation: facts and condition
/// timestamps are the simulated epoch plus one second per tick, never wall time.
#[tokio::test(start_paused = true)]
async fn manager_rounds_carry_simulated_time() {
    use moco_cluster::manager::ManagerConfig;
    use moco_sim::SIM_EPOCH;

    let sim = SimCluster::new(SimConfig::new(3, Flavor::Mariadb));
    let manager = sim.manager(ManagerConfig::default());
    sim.tick_n(7);
    let report = manager.run_once().await.unwrap();
    assert_eq!(report.facts.now.0, SIM_EPOCH + 7);
    let ticks = i64::try_from(sim.ticks()).unwrap();
    for c in &sim.status().conditions {
        assert!(
            (SIM_EPOCH..=SIM_EPOCH + ticks).contains(&c.last_transition_time.0),
            "{c:?} is not simulated time"
        );
    }
    assert!(!sim.status().conditions.is_empty());
}

/// The manager builds one SQL port (one connection pool) per instance and reuses it in every
/// later round and operation.
#[tokio::test(start_paused = true)]
async fn manager_reuses_one_port_per_instance() {
    use moco_cluster::manager::ManagerConfig;

    let sim = SimCluster::new(SimConfig::new(3, Flavor::Mysql));
    let manager = sim.manager(ManagerConfig::default());
    for _ in 0..6 {
        let _ = manager.run_once().await;
        sim.tick();
    }
    assert!(
        sim.status().conditions.iter().any(|c| c.type_ == "Healthy"),
        "the rounds ran"
    );
    assert_eq!(sim.ports_built(), 3);
}

/// A frozen instance answers nothing — pings, probes and operations wait until it thaws —
/// accepts no writes, serves and receives no replication, acknowledges nothing, and keeps its
/// whole state; thawed, it goes on where it was. A crash ends the wait with an error.
#[tokio::test(start_paused = true)]
async fn frozen_instances_hang_and_resume_where_they_were() {
    use moco_sim::SpanEnd;
    use tokio::time::timeout;

    let sim = cluster(3, Flavor::Mysql, 1).await;
    let g1 = gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.tick();
    // A commit waiting for its ACK when the primary freezes.
    let g2 = gtid(sim.client_write(WriteTarget::Instance(0)));
    assert_eq!(sim.pending(0), 1);
    sim.freeze(0);
    assert!(sim.is_frozen(0));
    let p = sim.instance(0);
    let long = Duration::from_secs(30);
    assert!(timeout(long, p.ping()).await.is_err(), "ping waits");
    assert!(timeout(long, p.status()).await.is_err(), "status waits");
    assert!(
        timeout(long, p.set_super_read_only(Duration::ZERO))
            .await
            .is_err()
    );
    assert!(timeout(long, p.executed_gtid()).await.is_err());
    assert_eq!(
        sim.client_write(WriteTarget::Instance(0)),
        WriteOutcome::Rejected
    );
    sim.tick_n(3);
    assert!(
        !sim.received(1).contains(&g2),
        "a frozen source serves nothing"
    );
    assert_eq!(sim.pending(0), 1, "its commit still waits");
    assert!(sim.writable_ackers().is_empty(), "it acknowledges nothing");
    // Its replicas' IO threads stay connected to it (nothing flows).
    let r = replica_status(&sim, 1).await;
    assert_eq!(r.io_running, ThreadState::Yes);

    // A call under way answers as soon as it thaws; the state is as it was.
    let waiting = tokio::spawn({
        let p = p.clone();
        async move { p.status().await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!waiting.is_finished());
    let before = tokio::time::Instant::now();
    sim.thaw(0);
    let s = waiting.await.unwrap().unwrap();
    assert!(
        before.elapsed() < Duration::from_millis(10),
        "woken at once"
    );
    assert!(!s.read_only && s.semi_sync.source_enabled);
    assert_eq!(s.semi_sync.wait_sessions, 1);
    assert!(sim.is_writable(0));
    sim.tick();
    assert!(sim.received(1).contains(&g2));
    assert_eq!(sim.pending(0), 0, "acknowledged once a replica received it");
    assert_eq!(sim.acknowledged(), vec![g1, g2]);
    let spans = sim.frozen_spans();
    assert_eq!(spans.len(), 1);
    assert!(spans[0].was_primary);
    assert!(matches!(
        spans[0].end,
        Some(SpanEnd::Thawed {
            replaced: false,
            failover_rounds: 0,
            ..
        })
    ));

    // A frozen replica receives nothing and applies nothing; its ACK is missing.
    sim.freeze(1);
    sim.freeze(2);
    let g3 = gtid(sim.client_write(WriteTarget::Instance(0)));
    sim.tick_n(2);
    assert!(!sim.received(1).contains(&g3));
    assert_eq!(sim.pending(0), 1);
    sim.thaw(1);
    sim.tick();
    assert_eq!(sim.pending(0), 0);

    // A crash ends a wait on a frozen instance: the caller gets an error.
    let waiting = tokio::spawn({
        let r = sim.instance(2);
        async move { r.stop_replica_io().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    sim.crash(2, true);
    assert!(matches!(
        waiting.await.unwrap(),
        Err(PortError::Unreachable { .. })
    ));
    assert!(!sim.is_frozen(2));
    assert_eq!(sim.frozen_spans()[2].end, Some(SpanEnd::Killed));
}
