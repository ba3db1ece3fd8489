//! A rotation of MOCO's passwords driven by the real manager over the simulated cluster, with
//! the servers' password checks modelled beside it (the simulator's instances check none):
//! each instance holds, per account, the passwords it accepts; a change on the primary reaches
//! every instance (replication), and the platform stores the rotation as the Kubernetes and
//! local platforms do.
//!
//! The manager is **restarted after every step it takes** (a new `Manager` over the same
//! platform: nothing of the rotation lives in the manager), and once between re-pointing a
//! channel and recording it (the platform's write fails). After every round: every reader's
//! password (the platform's current set, each replica's channel) is accepted by every
//! instance, so no reader ever fails on a credential (a backup Job that read the old passwords
//! runs for a few rounds after the others moved; the wait for it is reported once). At the end: the new passwords are the
//! drawn ones, and no instance accepts an old one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use moco_cluster::manager::{Manager, ManagerConfig};
use moco_cluster::ports::{
    Credentials, InstanceSlot, MysqlPort, Observation, PasswordPair, Platform, PortError,
    RotationRecord,
};
use moco_core::Decision;
use moco_core::facts::{ClusterFacts, Flavor, MysqldStatus, Role};
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, ReplicationSource};
use moco_core::rotation::RotationPhase;
use moco_core::state::ClusterState;
use moco_core::status::ClusteringStatus;
use moco_sim::{SimCluster, SimConfig};

const ACCOUNTS: [&str; 3] = ["moco-admin", "moco-repl", "moco-writable"];

/// The servers' passwords and the platform's store.
#[derive(Debug, Default)]
struct World {
    /// Per instance, per account, the passwords it accepts.
    accepted: Vec<BTreeMap<String, BTreeSet<String>>>,
    /// The passwords the platform gives its readers.
    current: BTreeMap<String, String>,
    /// The rotation in progress.
    record: Option<RotationRecord>,
    /// Per replica, the `moco-repl` password its channel was configured with.
    channels: BTreeMap<u32, String>,
    /// Fail the next `record_channel_moved` (the manager dies between the two).
    fail_next_record: bool,
    /// A backup Job started before the rotation: the passwords it read, and how many more
    /// times it is reported running.
    job: Option<(BTreeMap<String, String>, u32)>,
    /// The messages of the rotation's events.
    rotation_events: Vec<String>,
    /// Calls that changed something, in order.
    log: Vec<String>,
}

fn lock(world: &Mutex<World>) -> std::sync::MutexGuard<'_, World> {
    world.lock().unwrap()
}

#[derive(Debug)]
struct Port {
    inner: Arc<dyn MysqlPort>,
    index: u32,
    world: Arc<Mutex<World>>,
}

fn refused(what: &str) -> PortError {
    PortError::Sql {
        target: "sim".into(),
        what: what.into(),
        code: 1045,
        message: "Access denied".into(),
    }
}

#[async_trait]
impl MysqlPort for Port {
    async fn status(&self) -> Result<MysqldStatus, PortError> {
        self.inner.status().await
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
        self.inner.wait_for_gtid(gtid, t).await
    }
    async fn stop_replica_io(&self) -> Result<(), PortError> {
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
        {
            let mut w = lock(&self.world);
            let accepted = w.accepted.iter().all(|i| {
                i.get("moco-repl")
                    .is_some_and(|s| s.contains(&credentials.password))
            });
            if !accepted {
                return Err(refused("a channel with a password the source refuses"));
            }
            w.channels.insert(self.index, credentials.password.clone());
            w.log.push(format!("channel {}", self.index));
        }
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
    async fn accepts(&self, user: &str, password: &str) -> Result<bool, PortError> {
        let w = lock(&self.world);
        Ok(w.accepted[self.index as usize]
            .get(user)
            .is_some_and(|s| s.contains(password)))
    }
    async fn add_new_passwords(&self, pairs: &[PasswordPair]) -> Result<(), PortError> {
        let mut w = lock(&self.world);
        for i in 0..w.accepted.len() {
            for p in pairs {
                w.accepted[i].insert(
                    p.account.clone(),
                    BTreeSet::from([p.old.clone(), p.new.clone()]),
                );
            }
        }
        w.log.push("add".into());
        Ok(())
    }
    async fn drop_old_passwords(&self, pairs: &[PasswordPair]) -> Result<(), PortError> {
        let mut w = lock(&self.world);
        for i in 0..w.accepted.len() {
            for p in pairs {
                w.accepted[i].insert(p.account.clone(), BTreeSet::from([p.new.clone()]));
            }
        }
        w.log.push("drop".into());
        Ok(())
    }
}

#[derive(Debug)]
struct Rotating {
    sim: SimCluster,
    world: Arc<Mutex<World>>,
}

#[async_trait]
impl Platform for Rotating {
    async fn observe(&self) -> Result<Observation, PortError> {
        self.sim.observe().await
    }
    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError> {
        Ok(Arc::new(Port {
            inner: self.sim.mysql(slot).await?,
            index: slot.index,
            world: Arc::clone(&self.world),
        }))
    }
    async fn credentials(&self, account: Account) -> Result<Credentials, PortError> {
        let w = lock(&self.world);
        Ok(Credentials {
            user: account.name().to_owned(),
            password: w.current.get(account.name()).cloned().unwrap_or_default(),
        })
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
        if event.reason == "PasswordRotation" {
            lock(&self.world)
                .rotation_events
                .push(event.message.clone());
        }
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
    async fn rotation(&self) -> Result<Option<RotationRecord>, PortError> {
        Ok(lock(&self.world).record.clone())
    }
    async fn publish_rotation(&self, record: &RotationRecord) -> Result<(), PortError> {
        let mut w = lock(&self.world);
        for p in &record.pairs {
            w.current.insert(p.account.clone(), p.new.clone());
        }
        if let Some(r) = w.record.as_mut() {
            r.phase = RotationPhase::Published;
        }
        w.log.push("publish".into());
        Ok(())
    }
    async fn record_channel_moved(&self, index: u32) -> Result<(), PortError> {
        let mut w = lock(&self.world);
        if std::mem::take(&mut w.fail_next_record) {
            return Err(PortError::Failed {
                target: "store".into(),
                message: "the manager died before recording the channel".into(),
            });
        }
        if let Some(r) = w.record.as_mut() {
            r.channels_moved.insert(index);
        }
        Ok(())
    }
    async fn move_readers(&self, _record: &RotationRecord) -> Result<Vec<String>, PortError> {
        let mut w = lock(&self.world);
        match w.job.as_mut() {
            Some((_, 0)) => {
                w.job = None;
                w.log.push("job ended".into());
                Ok(Vec::new())
            }
            Some((_, left)) => {
                *left -= 1;
                Ok(vec![JOB_WAIT.to_owned()])
            }
            None => Ok(Vec::new()),
        }
    }
    async fn finish_rotation(&self) -> Result<(), PortError> {
        let mut w = lock(&self.world);
        w.record = None;
        w.log.push("finish".into());
        Ok(())
    }
}

/// What the platform says of the running backup Job.
const JOB_WAIT: &str = "the Job backup-1 (running since before the rotation)";

fn passwords(tag: &str) -> BTreeMap<String, String> {
    ACCOUNTS
        .iter()
        .map(|a| ((*a).to_owned(), format!("{a}-{tag}")))
        .collect()
}

/// Every reader's password is accepted by every instance: the platform's current set, and
/// each replica channel's `moco-repl` password.
fn readers_accepted(w: &World) -> Result<(), String> {
    for (i, accepted) in w.accepted.iter().enumerate() {
        for (account, password) in &w.current {
            if !accepted.get(account).is_some_and(|s| s.contains(password)) {
                return Err(format!(
                    "instance {i} refuses the current password of {account}"
                ));
            }
        }
        for (account, password) in w.job.iter().flat_map(|(read, _)| read) {
            if !accepted.get(account).is_some_and(|s| s.contains(password)) {
                return Err(format!(
                    "instance {i} refuses the running Job's password of {account}"
                ));
            }
        }
        for (replica, password) in &w.channels {
            if !accepted
                .get("moco-repl")
                .is_some_and(|s| s.contains(password))
            {
                return Err(format!(
                    "instance {i} refuses the channel password of replica {replica}"
                ));
            }
        }
    }
    Ok(())
}

/// A simulated 3-instance MariaDB cluster whose servers accept `old`, and its platform.
fn cluster(old: &BTreeMap<String, String>) -> (SimCluster, Arc<Mutex<World>>, Arc<dyn Platform>) {
    let sim = SimCluster::new(SimConfig::new(3, Flavor::Mariadb));
    let world = Arc::new(Mutex::new(World {
        accepted: (0..3)
            .map(|_| {
                old.iter()
                    .map(|(a, p)| (a.clone(), BTreeSet::from([p.clone()])))
                    .collect()
            })
            .collect(),
        current: old.clone(),
        ..World::default()
    }));
    let platform: Arc<dyn Platform> = Arc::new(Rotating {
        sim: sim.clone(),
        world: Arc::clone(&world),
    });
    (sim, world, platform)
}

/// Rounds of `manager` until the cluster is Healthy.
async fn healthy(sim: &SimCluster, manager: &Manager) {
    for _ in 0..12 {
        sim.tick();
        if let Ok(r) = manager.run_once().await
            && r.state() == ClusterState::Healthy
        {
            return;
        }
    }
    panic!("the simulated cluster never became Healthy");
}

/// A rotation from `old` to `new`, drawn and not begun.
fn drawn(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> RotationRecord {
    RotationRecord {
        phase: RotationPhase::Drawn,
        channels_moved: BTreeSet::new(),
        pairs: ACCOUNTS
            .iter()
            .map(|a| PasswordPair {
                account: (*a).to_owned(),
                old: old[*a].clone(),
                new: new[*a].clone(),
            })
            .collect(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_manager_restarted_after_every_step_finishes_the_rotation_and_no_reader_is_refused() {
    let old = passwords("old");
    let (sim, world, platform) = cluster(&old);
    let new_manager = || {
        Manager::new(Arc::clone(&platform), ManagerConfig::default())
            .with_clock(Arc::new(sim.clone()))
    };
    let mut manager = new_manager();
    healthy(&sim, &manager).await;
    // The channels the bring-up configured use the old password.
    assert_eq!(lock(&world).channels.len(), 2, "{:?}", lock(&world).log);

    let new = passwords("new");
    {
        let mut w = lock(&world);
        w.record = Some(drawn(&old, &new));
        w.fail_next_record = true;
        // A backup started before, still running for a few rounds once the others moved.
        w.job = Some((old.clone(), 6));
        w.log.clear();
    }
    let mut steps = Vec::new();
    let mut restarts = 0;
    for round in 0..40 {
        sim.tick();
        let logged = lock(&world).log.len();
        let report = manager.run_once().await;
        readers_accepted(&lock(&world))
            .unwrap_or_else(|e| panic!("round {round}: {e}; steps {steps:?}"));
        let step = report.ok().and_then(|r| r.rotation);
        if let Some(s) = &step {
            steps.push(format!("{s:?}"));
        }
        if step.as_ref().is_some_and(|s| !s.is_wait())
            || lock(&world).log[logged..]
                .iter()
                .any(|l| l.starts_with("channel"))
        {
            // Killed after the step: a new manager over the same platform.
            manager = new_manager();
            restarts += 1;
        }
        if lock(&world).record.is_none() {
            break;
        }
    }
    let w = lock(&world);
    assert!(w.record.is_none(), "not finished: {steps:#?}");
    assert_eq!(w.current, new, "the new passwords are the drawn ones");
    for (i, accepted) in w.accepted.iter().enumerate() {
        for (account, set) in accepted {
            assert_eq!(
                set,
                &BTreeSet::from([new[account].clone()]),
                "instance {i}, {account}"
            );
        }
    }
    for (replica, password) in &w.channels {
        assert_eq!(password, &new["moco-repl"], "replica {replica}'s channel");
    }
    // Every step happened, the failed record once retried (a channel configured twice).
    let channels = w.log.iter().filter(|l| l.starts_with("channel")).count();
    assert_eq!(channels, 3, "{:?}", w.log);
    for needle in ["add", "publish", "job ended", "drop", "finish"] {
        assert!(
            w.log.iter().any(|l| l == needle),
            "no {needle} in {:?}",
            w.log
        );
    }
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("Wait") && s.contains("died before recording")),
        "the failed step came back as a wait: {steps:#?}"
    );
    assert!(restarts >= 6, "{restarts} restarts: {steps:#?}");
    // The wait for the Job was said once (the list did not change while it ran).
    let waits: Vec<&String> = w
        .rotation_events
        .iter()
        .filter(|m| m.starts_with("waiting"))
        .collect();
    assert_eq!(
        waits,
        [&format!(
            "waiting until no reader holds the old passwords: {JOB_WAIT}"
        )],
        "{:#?}",
        w.rotation_events
    );
}

/// Two rotations one after the other by one manager (never restarted), each held by a backup
/// Job for a few rounds: each says once what it waits for, though the words are the same (a
/// step in between forgets the last report).
#[tokio::test(start_paused = true)]
async fn each_rotation_says_once_what_it_waits_for() {
    let first = passwords("first");
    let (sim, world, platform) = cluster(&first);
    let manager = Manager::new(Arc::clone(&platform), ManagerConfig::default())
        .with_clock(Arc::new(sim.clone()));
    healthy(&sim, &manager).await;
    for (old, new) in [
        (first.clone(), passwords("second")),
        (passwords("second"), passwords("third")),
    ] {
        {
            let mut w = lock(&world);
            w.record = Some(drawn(&old, &new));
            w.job = Some((old.clone(), 6));
        }
        for _ in 0..40 {
            sim.tick();
            let _ = manager.run_once().await;
            readers_accepted(&lock(&world)).unwrap_or_else(|e| panic!("{e}"));
            if lock(&world).record.is_none() {
                break;
            }
        }
        assert!(lock(&world).record.is_none(), "{:?}", lock(&world).log);
        assert_eq!(lock(&world).current, new);
    }
    let w = lock(&world);
    let waits = w
        .rotation_events
        .iter()
        .filter(|m| m.starts_with("waiting"))
        .count();
    assert_eq!(waits, 2, "{:#?}", w.rotation_events);
}
