//! The cluster manager: one loop per cluster that observes every instance, asks `moco-core`
//! what to do, persists the status and executes the planned steps in order.
//!
//! It is crash-only: it keeps no state between rounds that is not in the platform (status,
//! labels, annotations), so it can be stopped at any point and restarted, and the next round
//! continues from what it observes. Every operation it runs comes from the engine; the manager
//! adds timeouts, retries of probes and event recording, no decisions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future;
use moco_core::facts::{ClusterFacts, FACTS_SCHEMA_VERSION, InstanceFacts, MysqldStatus};
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, Operation, ReplicationSource, Step};
use moco_core::pacing::Pacing;
use moco_core::state::ClusterState;
use moco_core::status::{ClusterStatus, ClusteringStatus};
use moco_core::{Action, Decision, FactsError, decide};
use thiserror::Error;
use tokio::sync::{Notify, watch};

mod rotation;

pub use rotation::ROTATION_REASON;

use crate::health::{HealthConfig, InstanceWatch, Liveness};
pub use crate::ports::RoundTiming;
use crate::ports::{
    Clock, ErrorCategory, InstanceSlot, MysqlPort, Observation, Platform, PortError, SystemClock,
};

/// Timing knobs of the loop. Every wait of a round has a limit taken from here or from the
/// engine's plan, so that a round ends within [`Manager::round_limit`] whatever any instance
/// does (issue 35: a manager that stops deciding cannot fail over).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerConfig {
    /// Pause between rounds when nothing changed (MOCO's `--check-interval`).
    pub check_interval: Duration,
    /// Limit of one status probe.
    pub probe_timeout: Duration,
    /// Failed probes in a row before an instance counts as unreachable this round.
    pub probe_attempts: u32,
    /// Pause between two probes of the same instance.
    pub probe_retry_delay: Duration,
    /// Limit of one step the engine sets no time for (a statement, a label, a status write)
    /// and of each platform call (observing, recording an event). A wait without limit in the
    /// plan (the new primary applying its relay log) also waits this long per round, then
    /// the round ends and the next one decides again.
    pub step_timeout: Duration,
    /// Limit of a clone (copying a whole instance), the one step that may take long.
    pub clone_timeout: Duration,
    /// How long a primary that answers pings but not the status probe is waited for (rounds
    /// given up, no failover) before it counts as unreachable like a silent one: a slow
    /// primary rides out a load spike, but one whose status never comes cannot be managed.
    pub slow_primary_limit: Duration,
    /// The continuous health watch: ping interval and the detection window (how long an
    /// instance may stay silent before it counts as unreachable).
    pub health: HealthConfig,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            check_interval: Duration::from_secs(1),
            probe_timeout: Duration::from_millis(1000),
            probe_attempts: 2,
            probe_retry_delay: Duration::from_millis(100),
            step_timeout: Duration::from_secs(30),
            clone_timeout: Duration::from_secs(600),
            slow_primary_limit: Duration::from_secs(15),
            health: HealthConfig::default(),
        }
    }
}

impl ManagerConfig {
    /// The longest one probe of one instance may take: until the instance would count as
    /// silent (at most the detection window) or `probe_timeout`, plus the pauses between
    /// attempts, plus building its port.
    pub fn probe_limit(&self) -> Duration {
        self.health.detection_window.max(self.probe_timeout)
            + self.probe_retry_delay * self.probe_attempts.max(1)
            + self.step_timeout
    }

    /// The longest `step` may take (its own time from the plan plus one statement's).
    pub fn step_limit(&self, step: &Step) -> Duration {
        let secs = |s: u32| Duration::from_secs(u64::from(s));
        match &step.operation {
            Operation::Clone { .. } => self.clone_timeout,
            Operation::SetSuperReadOnly {
                timeout_seconds, ..
            } => secs(*timeout_seconds) + self.step_timeout * 2,
            Operation::WaitForCatchUp {
                timeout_seconds, ..
            } => secs(*timeout_seconds) + self.step_timeout * 2,
            Operation::WaitForGtid {
                timeout_seconds: Some(t),
                ..
            } => secs(*t) + self.step_timeout,
            Operation::WaitForGtid {
                timeout_seconds: None,
                ..
            } => self.step_timeout * 2,
            _ => self.step_timeout,
        }
    }
}

/// Why a round stopped early.
#[derive(Debug, Error)]
pub enum ManagerError {
    /// The platform could not be read.
    #[error("observing the cluster failed: {0}")]
    Observe(#[source] PortError),
    /// The facts contradict themselves (a platform bug).
    #[error("inconsistent facts: {0}")]
    Facts(#[from] FactsError),
    /// Persisting the status failed.
    #[error("writing the status failed: {0}")]
    Status(#[source] PortError),
    /// A step failed; the remaining steps were not run.
    #[error("step {position} ({operation}) failed: {source}")]
    Step {
        /// Position of the step in the plan.
        position: usize,
        /// The operation, as `op:index`.
        operation: String,
        /// The port's error.
        #[source]
        source: PortError,
    },
    /// The primary is alive (it answers pings) but its status did not arrive within the
    /// detection window: deciding without it would fail over a slow primary, so the round is
    /// given up and the next one asks again.
    #[error("the primary (instance {index}) answers but its status timed out; deciding next round")]
    PrimarySlow {
        /// The primary's ordinal.
        index: u32,
    },
    /// A step exceeded the manager's operation limit.
    #[error("step {position} ({operation}) did not finish within {seconds} s")]
    StepTimeout {
        /// Position of the step in the plan.
        position: usize,
        /// The operation, as `op:index`.
        operation: String,
        /// The limit.
        seconds: u64,
    },
}

impl ManagerError {
    /// The failure's category, a stable metric label: the port error's own category, or
    /// `timeout` / `facts` for the manager's limits and inconsistent facts.
    pub fn category(&self) -> ErrorCategory {
        match self {
            ManagerError::Observe(e) | ManagerError::Status(e) => e.category(),
            ManagerError::Step { source, .. } => source.category(),
            ManagerError::StepTimeout { .. } | ManagerError::PrimarySlow { .. } => {
                ErrorCategory::Timeout
            }
            ManagerError::Facts(_) => ErrorCategory::Facts,
        }
    }
}

/// What one round saw and did.
#[derive(Clone, Debug)]
pub struct RoundReport {
    /// The facts the decision was made on.
    pub facts: ClusterFacts,
    /// The decision.
    pub decision: Decision,
    /// How many steps ran successfully.
    pub steps_done: usize,
    /// The step a rotation of MOCO's passwords took after the round's own steps, if one is
    /// in progress.
    pub rotation: Option<moco_core::rotation::RotationStep>,
}

impl RoundReport {
    /// The decided state.
    pub fn state(&self) -> ClusterState {
        self.decision.state
    }

    /// True when the manager should observe again at once.
    pub fn redo(&self) -> bool {
        self.decision.redo
    }
}

/// The per-cluster loop.
#[derive(Debug)]
pub struct Manager {
    platform: Arc<dyn Platform>,
    config: ManagerConfig,
    wake: Arc<Notify>,
    clock: Arc<dyn Clock>,
    /// SQL ports by ordinal with the address they were built for: one connection pool per
    /// instance, rebuilt only when the instance moves (a Pod rescheduled with a new IP).
    ports: Mutex<HashMap<u32, CachedPort>>,
    /// Instances whose server refuses the admin account, with the refusal last reported: an
    /// event is recorded when a refusal starts or changes, not every round. Only reporting
    /// depends on it; a restarted manager reports once more.
    refused: Mutex<HashMap<u32, String>>,
    /// The readers a rotation last reported waiting for since its last step: reported again
    /// only when the list changes (a backup may hold a rotation for hours; once is enough to
    /// say why).
    rotation_wait: Mutex<Option<String>>,
}

#[derive(Debug)]
struct CachedPort {
    host: String,
    port: u16,
    mysql: Arc<dyn MysqlPort>,
    watch: Arc<InstanceWatch>,
}

/// What a round learned of one instance.
#[derive(Debug)]
enum Probe {
    /// Its status.
    Status(Box<MysqldStatus>),
    /// Gone, refusing, failing, or silent for the whole detection window.
    Unreachable,
    /// It answers but refuses the admin account (see [`PortError::is_account_refused`]):
    /// unreachable for the engine, and reported.
    Refused(PortError),
    /// Answering pings, but its status did not arrive in time.
    Slow,
}

impl Manager {
    /// A manager for the cluster behind `platform`.
    pub fn new(platform: Arc<dyn Platform>, config: ManagerConfig) -> Self {
        Manager {
            platform,
            config,
            wake: Arc::new(Notify::new()),
            clock: Arc::new(SystemClock),
            ports: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
            rotation_wait: Mutex::new(None),
        }
    }

    /// Takes time from `clock` instead of the system clock (the simulator's virtual time).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The SQL port of `slot` and its health watch, built once per instance address.
    async fn instance(
        &self,
        slot: &InstanceSlot,
    ) -> Result<(Arc<dyn MysqlPort>, Arc<InstanceWatch>), PortError> {
        {
            let cache = self.ports.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = cache.get(&slot.index)
                && c.host == slot.host
                && c.port == slot.port
            {
                return Ok((Arc::clone(&c.mysql), Arc::clone(&c.watch)));
            }
        }
        let mysql = self
            .platform_call("build the SQL port", self.platform.mysql(slot))
            .await?;
        let watch = Arc::new(InstanceWatch::start(
            format!("{} ({}:{})", slot.index, slot.host, slot.port),
            Arc::clone(&mysql),
            self.config.health,
            Arc::clone(&self.wake),
        ));
        self.ports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                slot.index,
                CachedPort {
                    host: slot.host.clone(),
                    port: slot.port,
                    mysql: Arc::clone(&mysql),
                    watch: Arc::clone(&watch),
                },
            );
        Ok((mysql, watch))
    }

    /// Drops every SQL port and its health watch, so that the next call builds them with the
    /// credentials the platform gives now (after a rotation published new passwords).
    fn forget_ports(&self) {
        self.ports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// A handle that starts the next round at once (a switchover request, a Pod event).
    pub fn waker(&self) -> Arc<Notify> {
        Arc::clone(&self.wake)
    }

    /// The SQL port of `slot`.
    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError> {
        Ok(self.instance(slot).await?.0)
    }

    /// Asks one instance for its status. An instance the health watch already knows to be
    /// silent gets only a glance (no round waits for it twice). Otherwise the probe may take until
    /// the instance would count as silent (at least `probe_timeout`); errors are retried
    /// `probe_attempts` times, as a refused connection means the process is gone.
    async fn probe(&self, slot: &InstanceSlot) -> Probe {
        let (port, watch) = match self.instance(slot).await {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(%err, index = slot.index, "no SQL port for the instance");
                return Probe::Unreachable;
            }
        };
        if watch.liveness() == Liveness::Unresponsive {
            // Known silent: one short look (a tenth of the ping interval) in case it just came
            // back, instead of waiting for it again; the watch notices a slower recovery.
            let glance = self.config.health.ping_interval / 10;
            return match tokio::time::timeout(glance, port.status()).await {
                Ok(Ok(status)) => {
                    watch.answered();
                    Probe::Status(Box::new(status))
                }
                Ok(Err(err)) if err.is_account_refused() => Probe::Refused(err),
                _ => Probe::Unreachable,
            };
        }
        let deadline = watch
            .answer_deadline()
            .max(tokio::time::Instant::now() + self.config.probe_timeout);
        for attempt in 0..self.config.probe_attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(self.config.probe_retry_delay).await;
            }
            match tokio::time::timeout_at(deadline, port.status()).await {
                Ok(Ok(status)) => {
                    watch.answered();
                    return Probe::Status(Box::new(status));
                }
                Ok(Err(err)) if err.is_account_refused() => return Probe::Refused(err),
                Ok(Err(err)) => tracing::debug!(%err, attempt, "probe failed"),
                Err(_) => {
                    tracing::debug!(index = slot.index, "probe timed out");
                    return match watch.liveness() {
                        Liveness::Unresponsive => Probe::Unreachable,
                        Liveness::Answering
                            if watch.status_age() >= self.config.slow_primary_limit =>
                        {
                            tracing::warn!(
                                index = slot.index,
                                age_s = watch.status_age().as_secs(),
                                "answers pings but no status for too long: unreachable"
                            );
                            Probe::Unreachable
                        }
                        Liveness::Answering => Probe::Slow,
                    };
                }
            }
        }
        Probe::Unreachable
    }

    /// Observes the platform and every instance (concurrently).
    pub async fn gather(&self) -> Result<(Observation, ClusterFacts), ManagerError> {
        let view = self
            .platform_call("observe the cluster", self.platform.observe())
            .await
            .map_err(ManagerError::Observe)?;
        // The primary is probed first, then the others together: a replica's received set
        // is then read after the primary's executed set, so a replica that keeps up holds
        // all of it (the engine lets a learner join, and trusts a raised wait count, only
        // then). Probed together, a replica read a moment earlier always looks behind a
        // primary under writes.
        let primary_index = view.status.current_primary_index;
        let mut primary_probe = match view.instances.iter().find(|s| s.index == primary_index) {
            Some(slot) => Some(self.probe_slot(slot).await),
            None => None,
        };
        let others = view
            .instances
            .iter()
            .filter(|s| s.index != primary_index)
            .map(|slot| self.probe_slot(slot));
        let mut others = future::join_all(others).await.into_iter();
        let probes: Vec<Probe> = view
            .instances
            .iter()
            .map(|slot| {
                if slot.index == primary_index {
                    primary_probe.take().unwrap_or(Probe::Unreachable)
                } else {
                    others.next().unwrap_or(Probe::Unreachable)
                }
            })
            .collect();
        let mut statuses = Vec::with_capacity(view.instances.len());
        for (slot, probe) in view.instances.iter().zip(probes) {
            self.report_refusal(slot.index, &probe).await;
            statuses.push(match probe {
                Probe::Status(s) => Some(*s),
                Probe::Unreachable | Probe::Refused(_) => None,
                // A slow replica counts as unreachable this round: that only delays its own
                // configuration. A slow primary does not: that would fail it over.
                Probe::Slow if slot.index == view.status.current_primary_index => {
                    return Err(ManagerError::PrimarySlow { index: slot.index });
                }
                Probe::Slow => None,
            });
        }
        let instances = view
            .instances
            .iter()
            .zip(statuses)
            .map(|(slot, mysqld)| InstanceFacts {
                index: slot.index,
                host: slot.host.clone(),
                port: slot.port,
                pod: slot.pod.clone(),
                mysqld,
            })
            .collect();
        let facts = ClusterFacts {
            schema_version: FACTS_SCHEMA_VERSION,
            spec: view.spec.clone(),
            status: view.status.clone(),
            now: self.clock.now(),
            instances,
            switchover_to: view.switchover_to,
        };
        Ok((view, facts))
    }

    /// Probes one instance; a missing Pod is unreachable.
    async fn probe_slot(&self, slot: &InstanceSlot) -> Probe {
        if slot.pod.exists {
            self.probe(slot).await
        } else {
            Probe::Unreachable
        }
    }

    /// One observe → decide → act round. It ends within [`Manager::round_limit`] of the
    /// plan it made, whatever any instance or the platform does; its duration is logged and
    /// handed to [`Platform::round_finished`].
    pub async fn run_once(&self) -> Result<RoundReport, ManagerError> {
        let started = tokio::time::Instant::now();
        let mut limit = self.observe_limit();
        let result = self.round(&mut limit).await;
        let timing = RoundTiming {
            took: started.elapsed(),
            limit,
            ok: result.is_ok(),
        };
        if timing.took > timing.limit {
            // Only a blocked runtime thread can do this: every wait above has a limit.
            tracing::error!(
                took_ms = timing.took.as_millis() as u64,
                limit_ms = timing.limit.as_millis() as u64,
                "a round outlasted its limit"
            );
        } else if timing.took > self.config.step_timeout {
            tracing::info!(
                took_ms = timing.took.as_millis() as u64,
                limit_ms = timing.limit.as_millis() as u64,
                ok = timing.ok,
                "a long round"
            );
        } else {
            tracing::debug!(
                took_ms = timing.took.as_millis() as u64,
                limit_ms = timing.limit.as_millis() as u64,
                ok = timing.ok,
                "round finished"
            );
        }
        self.bounded(self.platform.round_finished(&timing)).await;
        result
    }

    /// The longest a round may take before it has decided: observing the platform, probing
    /// the primary, then the others together, and the platform's hook.
    fn observe_limit(&self) -> Duration {
        self.config.step_timeout * 2 + self.config.probe_limit() * 2
    }

    /// The longest a round that made `decision` may take: [`Manager::observe_limit`], the
    /// status write and the events, and each step's limit with its event
    /// ([`ManagerConfig::step_limit`]).
    pub fn round_limit(&self, decision: &Decision) -> Duration {
        let c = &self.config;
        let events = u32::try_from(decision.events.len()).unwrap_or(u32::MAX);
        let steps: Duration = decision
            .steps
            .iter()
            .map(|s| c.step_limit(s) + c.step_timeout)
            .sum();
        self.observe_limit() + c.step_timeout * events.saturating_add(1) + steps
    }

    /// Runs a platform call with the step limit; one that does not finish is given up (its
    /// effect, a metric or a snapshot, is not worth a stalled round).
    async fn bounded<F: std::future::Future<Output = ()>>(&self, fut: F) {
        if tokio::time::timeout(self.config.step_timeout, fut)
            .await
            .is_err()
        {
            tracing::warn!(
                limit_s = self.config.step_timeout.as_secs(),
                "a platform call did not finish in time"
            );
        }
    }

    async fn round(&self, limit: &mut Duration) -> Result<RoundReport, ManagerError> {
        let (view, facts) = self.gather().await?;
        let decision = decide(&facts)?;
        *limit = self.round_limit(&decision);
        self.bounded(self.platform.observed(&facts, &decision))
            .await;
        let mut persisted = view.status.clone();
        if decision.status != persisted {
            self.platform_call(
                "write the status",
                self.platform
                    .write_status(&ClusteringStatus::of(&decision.status)),
            )
            .await
            .map_err(ManagerError::Status)?;
            persisted = decision.status.clone();
        }
        for event in &decision.events {
            self.record(event, None).await;
        }
        if decision.action != Action::None {
            let steps: Vec<String> = decision.steps.iter().map(|s| s.operation.label()).collect();
            tracing::info!(state = %decision.state, action = ?decision.action, steps = %steps.join(" "), "executing plan");
        }
        let mut steps_done = 0;
        let mut position = 0;
        let view = &view;
        let observed = &facts;
        while position < decision.steps.len() {
            // Consecutive IO-thread stops act on distinct replicas and nothing orders them:
            // they run together. A stop can take a second against a silent source (MariaDB's
            // semi-sync replica asks the source to end its dump thread), and fencing every
            // replica at once also ends the old primary's acknowledgements sooner.
            let batch = decision.steps[position..]
                .iter()
                .take_while(|s| matches!(s.operation, Operation::StopReplicaIoThread { .. }))
                .count()
                .max(1);
            let runs = decision.steps[position..position + batch]
                .iter()
                .map(|step| {
                    let persisted = persisted.clone();
                    let limit = self.config.step_limit(step);
                    async move {
                        let mut persisted = persisted;
                        tokio::time::timeout(
                            limit,
                            self.execute(view, observed, step, &mut persisted),
                        )
                        .await
                        .map(|r| r.map(|()| persisted))
                    }
                });
            let results = future::join_all(runs).await;
            for (offset, result) in results.into_iter().enumerate() {
                let step = &decision.steps[position + offset];
                let operation = step.operation.label();
                let error = match result {
                    Ok(Ok(next)) => {
                        persisted = next;
                        None
                    }
                    Ok(Err(PortError::Timeout { .. })) if unlimited_wait(step) => {
                        // The plan waits without limit; the round does not. The next round
                        // decides again and, if nothing else changed, waits again.
                        tracing::info!(step = %operation, slice_s = self.config.step_timeout.as_secs(),
                            "still applying the relay log; deciding again");
                        return Ok(RoundReport {
                            facts,
                            decision,
                            steps_done,
                            rotation: None,
                        });
                    }
                    Ok(Err(source)) => Some(ManagerError::Step {
                        position: position + offset,
                        operation,
                        source,
                    }),
                    Err(_) => Some(ManagerError::StepTimeout {
                        position: position + offset,
                        operation,
                        seconds: self.config.step_limit(step).as_secs(),
                    }),
                };
                if let Some(err) = error {
                    let detail = err.to_string();
                    tracing::warn!(error = %detail, "plan stopped");
                    if let Some(ev) = &step.on_failure {
                        self.record(ev, Some(&detail)).await;
                    } else {
                        let ev = Event::warning("OperationFailed", "an operation failed");
                        self.record(&ev, Some(&detail)).await;
                    }
                    return Err(err);
                }
                if let Some(ev) = &step.on_success {
                    self.record(ev, None).await;
                }
                steps_done += 1;
            }
            position += batch;
        }
        let rotation = self.rotate(view, observed, &decision).await;
        Ok(RoundReport {
            facts,
            decision,
            steps_done,
            rotation,
        })
    }

    /// A platform call within the step limit; one that does not finish is a timeout of `what`.
    async fn platform_call<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T, PortError>>,
    ) -> Result<T, PortError> {
        let limit = self.config.step_timeout;
        tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
            Err(PortError::Timeout {
                target: "platform".to_owned(),
                what: what.to_owned(),
                seconds: limit.as_secs(),
            })
        })
    }

    /// Records an `AccountRefused` warning when instance `index` starts (or changes how it
    /// goes on) refusing the admin account, and forgets it once the instance answers again.
    /// An instance that stays unreachable keeps its last report.
    async fn report_refusal(&self, index: u32, probe: &Probe) {
        let message = match probe {
            Probe::Refused(err) => refusal_message(index, err),
            Probe::Status(_) => {
                self.refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&index);
                return;
            }
            Probe::Unreachable | Probe::Slow => return,
        };
        let new = self
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(index, message.clone())
            .as_ref()
            != Some(&message);
        if new {
            tracing::error!(index, "{message}");
            self.record(&Event::warning(ACCOUNT_REFUSED_REASON, message), None)
                .await;
        }
    }

    async fn record(&self, event: &Event, detail: Option<&str>) {
        let mut event = event.clone();
        if let Some(d) = detail {
            event.message = format!("{}: {d}", event.message);
        }
        let recorded = self
            .platform_call("record an event", self.platform.record_event(&event))
            .await;
        if let Err(err) = recorded {
            tracing::warn!(%err, reason = %event.reason, "recording an event failed");
        }
    }

    fn slot(view: &Observation, index: u32) -> Result<&InstanceSlot, PortError> {
        view.instances
            .iter()
            .find(|s| s.index == index)
            .ok_or_else(|| PortError::Failed {
                target: format!("instance {index}"),
                message: "no such instance slot".to_owned(),
            })
    }

    async fn port(&self, view: &Observation, index: u32) -> Result<Arc<dyn MysqlPort>, PortError> {
        self.mysql(Self::slot(view, index)?).await
    }

    async fn execute(
        &self,
        view: &Observation,
        observed: &ClusterFacts,
        step: &Step,
        persisted: &mut ClusterStatus,
    ) -> Result<(), PortError> {
        let p = &self.platform;
        match &step.operation {
            Operation::SetPreventDelete { index, enabled } => {
                p.set_prevent_delete(*index, *enabled).await
            }
            Operation::SetSuperReadOnly {
                index,
                timeout_seconds,
            } => {
                self.port(view, *index)
                    .await?
                    .set_super_read_only(Duration::from_secs(u64::from(*timeout_seconds)))
                    .await
            }
            Operation::KillConnections { index } => {
                self.port(view, *index).await?.kill_connections().await
            }
            Operation::WaitForCatchUp {
                index,
                source,
                timeout_seconds,
            } => {
                let goal = self.port(view, *source).await?.executed_gtid().await?;
                let limit = Duration::from_secs(u64::from(*timeout_seconds));
                self.port(view, *index)
                    .await?
                    .wait_for_gtid(&goal, Some(limit))
                    .await
            }
            Operation::WaitForGtid {
                index,
                gtid,
                timeout_seconds,
            } => {
                // Without a limit from the plan, one slice per round (see `unlimited_wait`).
                let limit = timeout_seconds.map_or(self.config.step_timeout, |s| {
                    Duration::from_secs(u64::from(s))
                });
                self.port(view, *index)
                    .await?
                    .wait_for_gtid(gtid, Some(limit))
                    .await
            }
            Operation::SetPrimaryIndex {
                index,
                errant_replica_list,
                ..
            } => {
                let mut next = persisted.clone();
                next.current_primary_index = *index;
                next.errant_replica_list = errant_replica_list.clone();
                next.errant_replicas = u32::try_from(errant_replica_list.len()).unwrap_or(u32::MAX);
                p.write_status(&ClusteringStatus::of(&next)).await?;
                *persisted = next;
                Ok(())
            }
            Operation::RemoveDemoteAnnotation { index } => p.remove_demote(*index).await,
            Operation::ClearSwitchoverRequest { index, refusal } => {
                p.clear_switchover_request(*index, refusal.as_deref()).await
            }
            Operation::StopReplicaIoThread { index } => {
                self.port(view, *index).await?.stop_replica_io().await
            }
            Operation::StartReplica { index } => {
                self.port(view, *index).await?.start_replica(false).await
            }
            Operation::SetReplicaSemiSync { index, enabled } => {
                self.port(view, *index)
                    .await?
                    .set_replica_semi_sync(*enabled)
                    .await
            }
            Operation::StartReplicaSqlThread { index } => {
                self.port(view, *index).await?.start_replica(true).await
            }
            Operation::SetRoleLabel { index, role } => p.set_role_label(*index, *role).await,
            Operation::ConfigureReplication {
                index,
                source,
                semi_sync,
            } => {
                let credentials = match source {
                    ReplicationSource::Instance { .. } => p.credentials(Account::Repl).await?,
                    ReplicationSource::External { .. } => p.external_credentials().await?,
                };
                self.port(view, *index)
                    .await?
                    .configure_replication(source, &credentials, *semi_sync)
                    .await
            }
            Operation::ConfigurePrimarySemiSync {
                index,
                wait_for_replica_count,
                timeout_ms,
            } => {
                self.port(view, *index)
                    .await?
                    .configure_primary_semi_sync(*wait_for_replica_count, *timeout_ms)
                    .await
            }
            Operation::SetWritable { index } => {
                let port = self.port(view, *index).await?;
                let seen = observed
                    .instances
                    .iter()
                    .find(|i| i.index == *index)
                    .and_then(|i| i.mysqld.as_ref());
                if let Some(seen) = seen {
                    same_instance(*index, seen, &port.status().await?)?;
                }
                port.set_writable().await
            }
            Operation::Clone {
                index,
                donor,
                boot_timeout_seconds,
            } => {
                let limit = Duration::from_secs(u64::from(*boot_timeout_seconds));
                p.clone_instance(*index, donor, limit).await
            }
        }
    }

    /// Runs rounds until `shutdown` turns true: at once again after a round that changed
    /// something (a plan decided again and again is paused, see [`Pacing`]), after
    /// `check_interval` otherwise, or when woken.
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        let mut pacing = Pacing::new();
        loop {
            if *shutdown.borrow() {
                return;
            }
            let interval = self.config.check_interval;
            let pause = match self.run_once().await {
                // A rotation step changed what the next round sees: it follows at once.
                Ok(report) if report.rotation.as_ref().is_some_and(|r| !r.is_wait()) => {
                    Duration::ZERO
                }
                Ok(report) => pacing.after(&report.decision, interval),
                Err(err) => {
                    tracing::warn!(%err, "round failed");
                    self.platform.round_failed(err.category()).await;
                    pacing.after_failure(interval)
                }
            };
            if pause.is_zero() {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = self.wake.notified() => {}
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// True for a wait the plan sets no limit for: the manager waits one slice per round.
fn unlimited_wait(step: &Step) -> bool {
    matches!(
        step.operation,
        Operation::WaitForGtid {
            timeout_seconds: None,
            ..
        }
    )
}

/// Refuses to open an instance that is no longer the one the round observed: its data
/// directory replaced (a new MySQL `server_uuid`) or transactions it had are gone. The plan was
/// made for the observed instance; opening a replacement would let an empty server accept
/// writes next to replicas holding the acknowledged history (simulator bug 6).
/// Reason of the event recorded when an instance refuses the operator's account.
pub const ACCOUNT_REFUSED_REASON: &str = "AccountRefused";

/// What a person must know when instance `index` refuses the admin account: which account,
/// the server's words, and what to do. The manager cannot repair it, since repairing needs
/// the very account that is refused.
fn refusal_message(index: u32, err: &PortError) -> String {
    format!(
        "instance {index} refuses the operator's account {}: {err}. The account was dropped, \
         locked, given another password or stripped of privileges outside the operator; \
         until it is restored with the password in the cluster's password Secret, the \
         operator cannot manage this instance (no switchover or failover through it)",
        Account::Admin.name()
    )
}

fn same_instance(index: u32, seen: &MysqldStatus, now: &MysqldStatus) -> Result<(), PortError> {
    let target = format!("instance {index}");
    if seen.server_uuid.is_some() && now.server_uuid != seen.server_uuid {
        return Err(PortError::Failed {
            target,
            message: format!(
                "refusing to open it for writes: its server_uuid changed since this round observed it ({} → {}); its data directory was replaced",
                seen.server_uuid.as_deref().unwrap_or("?"),
                now.server_uuid.as_deref().unwrap_or("none")
            ),
        });
    }
    let missing = seen.gtid_executed.subtract(&now.gtid_executed);
    if !missing.is_empty() {
        return Err(PortError::Failed {
            target,
            message: format!(
                "refusing to open it for writes: transactions it held when this round observed it are gone ({missing}); its data directory was replaced"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(uuid: Option<&str>, executed: &str) -> MysqldStatus {
        let facts: ClusterFacts =
            serde_json::from_str(include_str!("../../../docs/examples/facts/healthy.json"))
                .unwrap();
        let mut s = facts.instances[0].mysqld.clone().unwrap();
        s.server_uuid = uuid.map(str::to_owned);
        s.gtid_executed = moco_core::gtid::GtidSet::parse(executed).unwrap();
        s
    }

    /// The limits the liveness bound is made of, by hand from their documented rule: a step's
    /// own time from the plan plus one statement's (two for the steps that send two), a clone's
    /// own limit, a wait without limit one slice of two statements.
    #[test]
    fn each_step_is_limited_by_its_own_time_and_a_statement() {
        let c = ManagerConfig::default();
        let limit = |op| c.step_limit(&Step::new(op)).as_secs();
        let gtid = moco_core::gtid::GtidSet::new();
        assert_eq!(
            limit(Operation::SetSuperReadOnly {
                index: 0,
                timeout_seconds: 10
            }),
            10 + 60
        );
        assert_eq!(
            limit(Operation::WaitForCatchUp {
                index: 1,
                source: 0,
                timeout_seconds: 50
            }),
            50 + 60
        );
        assert_eq!(
            limit(Operation::WaitForGtid {
                index: 1,
                gtid: gtid.clone(),
                timeout_seconds: Some(50)
            }),
            50 + 30
        );
        assert_eq!(
            limit(Operation::WaitForGtid {
                index: 1,
                gtid,
                timeout_seconds: None
            }),
            60
        );
        assert_eq!(
            limit(Operation::Clone {
                index: 1,
                donor: ReplicationSource::Instance {
                    index: 0,
                    host: "h".into(),
                    port: 3306
                },
                boot_timeout_seconds: 3600
            }),
            600
        );
        assert_eq!(limit(Operation::KillConnections { index: 0 }), 30);
        // A probe: the detection window (1.5 s) over the probe timeout, two pauses of 100 ms,
        // and building the port.
        assert_eq!(c.probe_limit(), Duration::from_millis(1500 + 200 + 30_000));
    }

    const A: &str = "00000000-0000-0000-0000-000000000001";
    const B: &str = "00000000-0000-0000-0000-000000000009";

    #[test]
    fn an_instance_replaced_since_the_round_is_not_opened() {
        let seen = status(Some(A), &format!("{A}:1-5"));
        // Still the same server, with more transactions (it applied its relay log): opened.
        assert!(same_instance(1, &seen, &status(Some(A), &format!("{A}:1-7"))).is_ok());
        // A wiped MySQL datadir: a new server_uuid.
        let e = same_instance(1, &seen, &status(Some(B), "")).unwrap_err();
        assert!(e.to_string().contains("server_uuid changed"), "{e}");
        // A wiped MariaDB server keeps its server_id: its history is gone.
        let maria = |set: &str| {
            let mut s = status(None, "");
            s.gtid_executed = moco_core::gtid::GtidSet::from_mariadb(set).unwrap();
            s
        };
        let e = same_instance(2, &maria("0-1000-5"), &maria("")).unwrap_err();
        assert!(e.to_string().contains("are gone"), "{e}");
        assert!(same_instance(2, &maria("0-1000-5"), &maria("0-1000-6")).is_ok());
    }
}
