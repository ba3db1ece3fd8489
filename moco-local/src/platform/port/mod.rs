//! [`LocalPlatform`]: the [`Platform`] port for a cluster of local processes; its rules, as
//! pure functions of what it saw, are in `rules.rs`.
//!
//! | Kubernetes                     | here                                                      |
//! |--------------------------------|-----------------------------------------------------------|
//! | MySQLCluster spec              | `cluster.json` ([`Manifest`])                             |
//! | MySQLCluster status            | `status.json`, replaced atomically                        |
//! | Pod exists                     | the instance slot (`instances/<i>/my.cnf`) exists          |
//! | Pod ready                      | mysqld runs and sends its greeting on its UNIX socket     |
//! | labels / annotations           | `pods.json` (under `pods.lock`)                           |
//! | Events                         | `events.jsonl`                                            |
//! | Secret                         | `secret.json` (0600) and `client/<user>.cnf`              |
//! | Services                       | the [`Endpoints`] proxy, fed from the role labels         |
//! | kubelet restarts               | [`LocalPlatform::supervise_once`] (see its rules)         |
//! | moco-agent clone               | [`LocalPlatform::clone_instance`]: mariadb-backup / CLONE |

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use moco_cluster::ports::{
    Credentials, InstanceSlot, MysqlPort, Observation, Platform, PortError, RotationRecord,
    RoundTiming,
};
use moco_core::facts::{ClusterFacts, Flavor, PodFacts, Role};
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, EventType, ReplicationSource};
use moco_core::status::{ClusterStatus, ClusteringStatus};
use moco_core::time::Timestamp;
use moco_core::{Action, Decision};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

mod rules;

use rules::{
    RouteInputs, SwitchRequest, next_readiness, replication_error, restart_args, restart_pause,
    spec_facts, switch_request,
};

use super::clone;
use super::error::LocalError;
use super::files;
use super::layout::Layout;
use super::manifest::Manifest;
use super::pods::{PodsFile, now_ms};
use super::proxy::Endpoints;
use super::secret::Secret;
use super::snapshot::{ClusterSnapshot, EndpointAddrs, InstanceSnapshot, RoundSnapshot};
use super::sql;
use moco_adapters::greeting::socket_greets;
use moco_adapters::mysqld::{LocalMysqld, ServerBinary};

/// Timing of the platform's own work (not of the manager's rounds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalConfig {
    /// Limit of the readiness probe (greeting on the UNIX socket).
    pub ready_probe_timeout: Duration,
    /// How long a (re)started server may take to answer.
    pub boot_timeout: Duration,
    /// SIGTERM grace before SIGKILL when stopping a server.
    pub stop_grace: Duration,
    /// How long a crashed *primary* stays down waiting for the manager to fail over before
    /// the supervisor restarts it as primary anyway (failover may be impossible: one
    /// instance, too few replicas).
    pub primary_restart_grace: Duration,
    /// Upper bound of the pause between failed restarts (doubles from 1 s).
    pub restart_backoff_max: Duration,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            ready_probe_timeout: Duration::from_millis(500),
            boot_timeout: Duration::from_secs(120),
            stop_grace: Duration::from_secs(60),
            primary_restart_grace: Duration::from_secs(20),
            restart_backoff_max: Duration::from_secs(30),
        }
    }
}

/// One line of `events.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// When (RFC 3339).
    pub time: String,
    /// `Normal` / `Warning`.
    #[serde(rename = "type")]
    pub type_: EventType,
    /// CamelCase reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// Supervisor bookkeeping of one instance.
#[derive(Debug, Default)]
struct Supervision {
    /// The process was seen down (the manager was woken for it).
    seen_down: bool,
    /// When the process was first seen down (or its kill hold ended).
    down_since: Option<Instant>,
    /// Failed restarts in a row.
    failures: u32,
    /// No restart before this instant.
    not_before: Option<Instant>,
}

#[derive(Debug, Default)]
struct Observed {
    /// Readiness per instance from the last readiness probe.
    ready: Vec<bool>,
    /// Silent readiness probes in a row, per instance.
    ready_failures: Vec<u32>,
    /// When `ready` was probed.
    ready_at: Option<Instant>,
    /// Whether each instance accepted writes (`read_only` off) in the last round's facts.
    writable: Vec<bool>,
    /// The last round's facts and decision.
    round: Option<(ClusterFacts, Decision)>,
    /// The last round's timing and when it ended (Unix ms).
    timing: Option<RoundSnapshot>,
}

/// Silent readiness probes in a row before a running instance is not ready (about 1.2 s with
/// the 500 ms probe limit and the background loop's 200 ms pause).
pub const READINESS_FAILURES: u32 = 2;

/// Readiness older than this is probed again by `observe` itself (no background refresh
/// running, or it is stuck).
const READINESS_MAX_AGE: Duration = Duration::from_secs(1);

/// The [`Platform`] of a local cluster directory.
#[derive(Debug)]
pub struct LocalPlatform {
    layout: Layout,
    manifest: Manifest,
    /// `secret.json` as last read or written (a rotation replaces it).
    secret: Mutex<Secret>,
    binary: ServerBinary,
    config: LocalConfig,
    servers: Vec<Arc<LocalMysqld>>,
    /// The manager's SQL port of each instance, rebuilt when a rotation publishes new
    /// passwords.
    ports: Mutex<Vec<Arc<dyn MysqlPort>>>,
    /// Set while the platform itself stops or re-creates an instance (clone, re-init,
    /// restart), so the supervisor leaves it alone.
    busy: Vec<Arc<AtomicBool>>,
    supervision: Mutex<Vec<Supervision>>,
    /// The switchover request (`switchover_to`, demote flags) last seen in `pods.json`.
    last_request: Mutex<Option<SwitchRequest>>,
    observed: Mutex<Observed>,
    status: Mutex<ClusterStatus>,
    endpoints: Mutex<Option<Arc<Endpoints>>>,
    waker: Mutex<Option<Arc<Notify>>>,
    manager_pid: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn port_err(target: String, e: LocalError) -> PortError {
    PortError::Failed {
        target,
        message: e.to_string(),
    }
}

impl LocalPlatform {
    /// Opens the cluster in `layout` (its manifest must be in the `Ready` phase).
    pub fn open(layout: &Layout, config: LocalConfig) -> Result<LocalPlatform, LocalError> {
        let manifest = Manifest::load(layout)?;
        if manifest.phase != super::manifest::Phase::Ready {
            return Err(LocalError::other(
                layout.root().display().to_string(),
                "the cluster was never fully created (`up` failed); remove it with `moco local down --wipe`",
            ));
        }
        let secret = Secret::load(layout)?;
        let binary = manifest.server_binary()?;
        let mut servers = Vec::new();
        let mut ports = Vec::new();
        let mut busy = Vec::new();
        for index in 0..manifest.replicas {
            let server = LocalMysqld::open(binary.clone(), &layout.instance_dir(index))
                .map_err(|e| LocalError::other(format!("instance {index}"), e.to_string()))?;
            servers.push(Arc::new(server));
            ports.push(sql::port(&manifest, layout, index, &secret)?);
            busy.push(Arc::new(AtomicBool::new(false)));
        }
        let status: ClusterStatus = files::read_json_opt(&layout.status())?.unwrap_or_default();
        let supervision = (0..manifest.replicas)
            .map(|_| Supervision::default())
            .collect();
        Ok(LocalPlatform {
            layout: layout.clone(),
            manifest,
            secret: Mutex::new(secret),
            binary,
            config,
            servers,
            ports: Mutex::new(ports),
            busy,
            supervision: Mutex::new(supervision),
            last_request: Mutex::new(None),
            observed: Mutex::new(Observed::default()),
            status: Mutex::new(status),
            endpoints: Mutex::new(None),
            waker: Mutex::new(None),
            manager_pid: std::process::id(),
        })
    }

    /// The cluster directory layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The server binary.
    pub fn binary(&self) -> &ServerBinary {
        &self.binary
    }

    /// The launcher handle of instance `index`.
    pub fn server(&self, index: u32) -> Option<&Arc<LocalMysqld>> {
        self.servers.get(index as usize)
    }

    /// The secret, as last read or written.
    pub fn secret(&self) -> Secret {
        lock(&self.secret).clone()
    }

    /// The manager's SQL port of instance `index`.
    fn port_of(&self, index: u32) -> Option<Arc<dyn MysqlPort>> {
        lock(&self.ports).get(index as usize).cloned()
    }

    /// Routes the endpoints from the role labels from now on.
    pub fn attach_endpoints(&self, endpoints: Arc<Endpoints>) {
        *lock(&self.endpoints) = Some(endpoints);
        self.refresh_routes();
    }

    /// Lets the platform start a manager round at once (after a restart or a request).
    pub fn set_waker(&self, waker: Arc<Notify>) {
        *lock(&self.waker) = Some(waker);
    }

    fn wake(&self) {
        if let Some(w) = lock(&self.waker).as_ref() {
            w.notify_one();
        }
    }

    fn instance_addr(&self, index: u32) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.manifest.instance_port(index)))
    }

    /// Recomputes the endpoints' routes: labelled and ready instances only, as a Service
    /// selects Ready Pods by label. The primary endpoint also requires the instance to be
    /// `status.currentPrimaryIndex` and writable (MOCO's readiness of a primary): between the
    /// switchover's or failover's commit point and the round that opens the new primary, new
    /// clients wait for it instead of reaching a read-only instance. Once routed, the primary
    /// stays routed while it keeps its label and readiness, so one inconclusive observation
    /// does not cut its clients.
    fn refresh_routes(&self) {
        let Some(endpoints) = lock(&self.endpoints).clone() else {
            return;
        };
        let pods = match PodsFile::load(&self.layout) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "reading pods.json for routing failed");
                return;
            }
        };
        let (ready, writable) = {
            let o = lock(&self.observed);
            (o.ready.clone(), o.writable.clone())
        };
        let seen = RouteInputs {
            replicas: self.manifest.replicas,
            ready: &ready,
            writable: &writable,
            primary: lock(&self.status).current_primary_index,
            routed: endpoints.routes().primary.map(|b| b.index),
            pods: &pods,
        };
        endpoints.set_routes(seen.routes(|index| self.instance_addr(index)));
    }

    /// The pid of instance `index`'s server, if it runs.
    pub fn pid(&self, index: u32) -> Option<u32> {
        self.server(index).and_then(|s| s.running_pid())
    }

    /// Probes every instance's readiness (concurrently) and routes accordingly. The local
    /// manager runs it in the background every few hundred milliseconds, so that rounds do
    /// not wait for the greeting of a frozen server.
    ///
    /// Like a kubelet's `failureThreshold`, a running instance turns not ready only after
    /// [`READINESS_FAILURES`] silent probes in a row, so a stall shorter than that keeps its
    /// clients; one whose process is gone turns not ready at once.
    pub async fn refresh_readiness(&self) -> Vec<bool> {
        let probes = futures::future::join_all((0..self.manifest.replicas).map(|i| async move {
            match self.pid(i) {
                None => None,
                Some(_) => Some(
                    socket_greets(&self.layout.socket(i), self.config.ready_probe_timeout).await,
                ),
            }
        }))
        .await;
        let readiness = {
            let mut o = lock(&self.observed);
            let was = o.ready.clone();
            let readiness = next_readiness(&probes, &was, &mut o.ready_failures);
            o.ready = readiness.clone();
            o.ready_at = Some(Instant::now());
            readiness
        };
        self.refresh_routes();
        readiness
    }

    /// True when instance `index` runs and answers.
    pub async fn is_ready(&self, index: u32) -> bool {
        if self.pid(index).is_none() {
            return false;
        }
        socket_greets(&self.layout.socket(index), self.config.ready_probe_timeout).await
    }

    fn record_local(&self, event: &Event) {
        let record = EventRecord {
            time: Timestamp(i64::try_from(now_ms() / 1000).unwrap_or(0)).to_string(),
            type_: event.type_,
            reason: event.reason.clone(),
            message: event.message.clone(),
        };
        match event.type_ {
            EventType::Normal => {
                tracing::info!(reason = %event.reason, message = %event.message, "event")
            }
            EventType::Warning => {
                tracing::warn!(reason = %event.reason, message = %event.message, "event")
            }
        }
        if let Err(e) = files::append_json_line(&self.layout.events(), &record) {
            tracing::warn!(error = %e, "recording an event failed");
        }
    }

    /// Starts every instance that does not run and is not held down by `moco local kill`
    /// (initialising a wiped datadir first) and waits until all answer. Used when the manager starts; crashed instances later are the
    /// supervisor's job.
    pub async fn start_all(&self) -> Result<(), LocalError> {
        let pods = PodsFile::load(&self.layout)?;
        let now = now_ms();
        let starts = (0..self.manifest.replicas).map(|index| {
            let held = pods.get(index).kill_hold.is_some_and(|h| h.active(now));
            async move {
                if self.pid(index).is_some() || held {
                    return Ok(());
                }
                self.start_instance(index, &[]).await.map(|_| ())
            }
        });
        for result in futures::future::join_all(starts).await {
            result?;
        }
        Ok(())
    }

    /// Drops the pooled connections to instance `index` after its accounts were made anew
    /// (re-initialised, or copied from the donor): the health watch keeps pinging through the
    /// same pool, and a ping that logged in while the accounts were being created keeps the
    /// privileges of that moment (none), which failed the manager's next probe with error
    /// 1227 and a false `AccountRefused`.
    async fn forget_connections(&self, index: u32) {
        if let Some(port) = self.port_of(index) {
            port.forget_connections().await;
        }
    }

    /// Starts instance `index` with `args`, re-creating its datadir and users first when it
    /// was wiped (then without `args`), and waits until it answers. Returns `true` when it
    /// was re-initialised.
    async fn start_instance(&self, index: u32, args: &[String]) -> Result<bool, LocalError> {
        let server = self
            .servers
            .get(index as usize)
            .ok_or(LocalError::NoSuchInstance {
                index,
                replicas: self.manifest.replicas,
            })?;
        if !server.is_initialized() {
            tracing::info!(index, "datadir is empty: initialising it");
            super::servers::initialize_instance(
                &self.layout,
                &self.manifest,
                &self.secret(),
                server,
            )
            .await?;
            self.forget_connections(index).await;
            return Ok(true);
        }
        server
            .start_and_wait(args, self.config.boot_timeout)
            .await
            .map_err(|e| LocalError::other(format!("instance {index}: start"), e.to_string()))?;
        Ok(false)
    }

    /// Stops every instance (replicas first, the primary last), SIGTERM then SIGKILL after
    /// the grace period.
    pub async fn stop_all(&self) -> Result<(), LocalError> {
        let primary = lock(&self.status).current_primary_index;
        let servers: Vec<(u32, Arc<LocalMysqld>)> = (0..self.manifest.replicas)
            .zip(self.servers.iter().cloned())
            .collect();
        super::servers::stop_servers(&servers, primary, self.config.stop_grace).await
    }

    /// One pass of the restart rules (call it every few hundred milliseconds):
    ///
    /// 1. An instance that runs, or that the platform is working on (clone), is left alone.
    /// 2. An instance under a `moco local kill` hold stays down until the hold ends
    ///    (`--down-for`) or is lifted (`moco local start N`).
    /// 3. A crashed *replica* is restarted at once; MariaDB gets `--init-rpl-role=SLAVE`, which
    ///    rolls back transactions at the binlog tail that were never acknowledged.
    /// 4. A crashed *primary* (per `status.currentPrimaryIndex`) of a multi-instance cluster
    ///    is left down while the manager fails over; once the primary index moved it is a
    ///    replica (rule 3). If the index has not moved after
    ///    [`LocalConfig::primary_restart_grace`] (no failover possible) it is restarted as it
    ///    was. A single-instance cluster's primary is restarted at once.
    /// 5. A failed restart is retried with a doubling pause (1 s up to
    ///    [`LocalConfig::restart_backoff_max`]); a wiped datadir is re-initialised first.
    /// 6. A *running* instance whose datadir was deleted is killed (event `DatadirDeleted`),
    ///    so that rules 3–5 bring it back re-initialised and the engine clones it.
    ///
    /// It also starts a manager round at once when a switchover request appears in
    /// `pods.json` (written by `moco local switchover` in another process).
    pub fn supervise_once(self: &Arc<Self>) {
        let pods = PodsFile::load(&self.layout).unwrap_or_default();
        let request = switch_request(&pods);
        let changed = {
            let mut last = lock(&self.last_request);
            let changed = last.as_ref().is_some_and(|l| *l != request);
            *last = Some(request.clone());
            changed
        };
        if changed && (request.0.is_some() || !request.1.is_empty()) {
            self.wake();
        }
        let primary = lock(&self.status).current_primary_index;
        let now = Instant::now();
        let mut sup = lock(&self.supervision);
        for index in 0..self.manifest.replicas {
            let i = index as usize;
            let (Some(busy), Some(state)) = (self.busy.get(i), sup.get_mut(i)) else {
                continue;
            };
            if busy.load(Ordering::SeqCst) {
                continue;
            }
            if let Some(pid) = self.pid(index) {
                if self.server(index).is_some_and(|s| !s.is_initialized())
                    && busy
                        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    // Its datadir was deleted under it: the process keeps its open files but
                    // can never serve again. Kill it; rule 3 or 4 then restarts it on a
                    // re-initialised datadir and the engine clones it.
                    let this = Arc::clone(self);
                    tokio::spawn(async move { this.stop_wiped(index, pid).await });
                } else {
                    *state = Supervision::default();
                }
                continue;
            }
            if !state.seen_down {
                // A process died: observe now, as MOCO's Pod watcher triggers a round,
                // instead of waiting for the check interval.
                state.seen_down = true;
                self.wake();
            }
            let hold = pods.get(index).kill_hold;
            if hold.as_ref().is_some_and(|h| h.active(now_ms())) {
                state.down_since = None;
                continue;
            }
            let down_since = *state.down_since.get_or_insert(now);
            if state.not_before.is_some_and(|t| now < t) {
                continue;
            }
            let is_primary = index == primary;
            let Some(args) = restart_args(
                is_primary,
                &self.manifest,
                now.duration_since(down_since),
                self.config.primary_restart_grace,
            ) else {
                continue;
            };
            // Claim the instance; a clone that claimed it in the meantime wins.
            if busy
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                continue;
            }
            let this = Arc::clone(self);
            let had_hold = hold.is_some();
            tokio::spawn(async move {
                this.restart_crashed(index, args, is_primary, had_hold)
                    .await;
            });
        }
    }

    /// Kills instance `index` (pid `pid`), whose datadir is gone, and says so.
    async fn stop_wiped(&self, index: u32, pid: u32) {
        let datadir = self.layout.datadir(index);
        let result = match self.server(index) {
            Some(server) => server.kill().await.map_err(|e| e.to_string()),
            None => Ok(false),
        };
        let event = match result {
            Ok(_) => Event::warning(
                "DatadirDeleted",
                format!(
                    "instance {index}: its data directory {} was deleted while it ran (pid {pid}); stopped it to re-initialise it, after which it is cloned from a healthy instance",
                    datadir.display()
                ),
            ),
            Err(e) => Event::warning(
                "DatadirDeleted",
                format!(
                    "instance {index}: its data directory {} was deleted while it ran (pid {pid}), and stopping it failed: {e}; stop it by hand (`kill -9 {pid}`)",
                    datadir.display()
                ),
            ),
        };
        self.record_local(&event);
        if let Some(busy) = self.busy.get(index as usize) {
            busy.store(false, Ordering::SeqCst);
        }
        self.wake();
    }

    async fn restart_crashed(
        &self,
        index: u32,
        args: Vec<String>,
        as_primary: bool,
        had_hold: bool,
    ) {
        let started = Instant::now();
        let result = self.start_instance(index, &args).await;
        let i = index as usize;
        match result {
            Ok(reinitialised) => {
                if had_hold {
                    let _ = PodsFile::update(&self.layout, |p| {
                        if let Some(meta) = p.instances.get_mut(&index) {
                            meta.kill_hold = None;
                        }
                    });
                }
                let how = if reinitialised {
                    " from an empty datadir (re-initialised)".to_owned()
                } else if args.is_empty() {
                    String::new()
                } else {
                    format!(" with {}", args.join(" "))
                };
                let role = if as_primary { "primary" } else { "replica" };
                self.record_local(&Event::normal(
                    "InstanceRestarted",
                    format!(
                        "instance {index} ({role}) restarted{how} in {} ms",
                        started.elapsed().as_millis()
                    ),
                ));
                if let Some(s) = lock(&self.supervision).get_mut(i) {
                    *s = Supervision::default();
                }
                self.wake();
            }
            Err(e) => {
                let failures = {
                    let mut sup = lock(&self.supervision);
                    let Some(s) = sup.get_mut(i) else {
                        return;
                    };
                    s.failures += 1;
                    let pause = restart_pause(s.failures, self.config.restart_backoff_max);
                    s.not_before = Some(Instant::now() + pause);
                    s.failures
                };
                self.record_local(&Event::warning(
                    "InstanceRestartFailed",
                    format!("instance {index}: restart failed ({failures} in a row): {e}"),
                ));
            }
        }
        if let Some(b) = self.busy.get(i) {
            b.store(false, Ordering::SeqCst);
        }
    }

    /// Writes `state.json` from the last round (or only `last_error` when the round failed
    /// before deciding).
    pub fn write_snapshot(&self, last_error: Option<String>) -> Result<(), LocalError> {
        let observed = lock(&self.observed);
        let pods = PodsFile::load(&self.layout).unwrap_or_default();
        let status = lock(&self.status).clone();
        let now = now_ms();
        let (state, action, candidates, errant, facts) = match &observed.round {
            Some((facts, decision)) => (
                Some(decision.state),
                decision.action,
                decision.assessment.candidates.clone(),
                decision.assessment.errant.clone(),
                Some(facts),
            ),
            None => (None, Action::None, vec![], vec![], None),
        };
        let instances = (0..self.manifest.replicas)
            .map(|index| {
                let mysqld = facts
                    .and_then(|f| f.instances.iter().find(|i| i.index == index))
                    .and_then(|i| i.mysqld.as_ref());
                let meta = pods.get(index);
                let replica = mysqld.and_then(|m| m.replica_status.as_ref());
                let error = replica.and_then(replication_error);
                InstanceSnapshot {
                    index,
                    role: meta.role.map_or("none", Role::as_str).to_owned(),
                    port: self.manifest.instance_port(index),
                    pid: self.pid(index),
                    reachable: mysqld.is_some(),
                    ready: observed.ready.get(index as usize).copied().unwrap_or(false),
                    executed_gtids: mysqld
                        .map(|m| m.gtid_executed.to_string())
                        .unwrap_or_default(),
                    lag: if index == status.current_primary_index {
                        None
                    } else {
                        replica.and_then(|r| r.seconds_behind_source)
                    },
                    errant: errant.contains(&index),
                    read_only: mysqld.map(|m| m.read_only),
                    source: replica.map(|r| format!("{}:{}", r.source_host, r.source_port)),
                    replication_error: error,
                    held_down: meta.kill_hold.as_ref().is_some_and(|h| h.active(now)),
                }
            })
            .collect();
        let snapshot = ClusterSnapshot {
            updated_at: Timestamp(i64::try_from(now / 1000).unwrap_or(0)).to_string(),
            updated_at_ms: now,
            manager_pid: self.manager_pid,
            state,
            action,
            current_primary_index: status.current_primary_index,
            candidates,
            endpoints: EndpointAddrs {
                primary: format!("127.0.0.1:{}", self.manifest.primary_port()),
                replica: format!("127.0.0.1:{}", self.manifest.replica_port()),
            },
            conditions: status.conditions.clone(),
            flavor: match self.manifest.flavor {
                Flavor::Mariadb => "mariadb".to_owned(),
                Flavor::Mysql => "mysql".to_owned(),
            },
            instances,
            last_error,
            last_round: observed.timing,
        };
        drop(observed);
        snapshot.save(&self.layout)
    }

    /// Claims instance `index` for exclusive work (a clone), waiting while the supervisor
    /// restarts it: two owners would start mariadbd on a datadir being restored (found by
    /// the clone benchmark: `mariadb-backup --prepare` failed on a locked ibdata1).
    async fn mark_busy(&self, index: u32) -> Result<BusyGuard, PortError> {
        let flag = self
            .busy
            .get(index as usize)
            .ok_or_else(|| PortError::Failed {
                target: format!("instance {index}"),
                message: "no such instance".to_owned(),
            })?;
        let deadline = Instant::now() + self.config.boot_timeout;
        while flag
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            if Instant::now() >= deadline {
                return Err(PortError::Timeout {
                    target: format!("instance {index}"),
                    what: "waiting for a restart to finish before cloning".to_owned(),
                    seconds: self.config.boot_timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(BusyGuard(Arc::clone(flag)))
    }
}

/// Clears a busy flag when the work ends, however it ends.
struct BusyGuard(Arc<AtomicBool>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[async_trait]
impl Platform for LocalPlatform {
    async fn observe(&self) -> Result<Observation, PortError> {
        let root = self.layout.root().display().to_string();
        let status: ClusterStatus = files::read_json_opt(&self.layout.status())
            .map_err(|e| port_err(root.clone(), e))?
            .unwrap_or_default();
        *lock(&self.status) = status.clone();
        let pods = PodsFile::load(&self.layout).map_err(|e| port_err(root.clone(), e))?;
        let cached = {
            let o = lock(&self.observed);
            o.ready_at
                .filter(|at| at.elapsed() < READINESS_MAX_AGE)
                .map(|_| o.ready.clone())
        };
        let readiness = match cached {
            Some(ready) => {
                self.refresh_routes();
                ready
            }
            None => self.refresh_readiness().await,
        };
        let instances = (0..self.manifest.replicas)
            .zip(readiness)
            .map(|(index, ready)| {
                let meta = pods.get(index);
                InstanceSlot {
                    index,
                    host: "127.0.0.1".to_owned(),
                    port: self.manifest.instance_port(index),
                    pod: PodFacts {
                        // An instance the platform is restarting, re-initialising or cloning
                        // is a Pod being re-created: the engine plans nothing meanwhile (as for
                        // a missing Pod), so it never fences a server whose accounts are being
                        // created (found by the deleted-datadir drill: the fence raced the
                        // re-initialisation and made it fail).
                        exists: self.layout.mycnf(index).is_file()
                            && !self
                                .busy
                                .get(index as usize)
                                .is_some_and(|b| b.load(Ordering::SeqCst)),
                        ready,
                        deleting: false,
                        demote: meta.demote,
                        prevent_delete: meta.prevent_delete,
                        role_label: meta.role,
                    },
                }
            })
            .collect();
        Ok(Observation {
            spec: spec_facts(&self.manifest),
            status,
            instances,
            // A request for an instance that is leaving is not one the engine may follow.
            switchover_to: pods
                .switchover_to
                .filter(|&t| t < self.manifest.spec_replicas()),
        })
    }

    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError> {
        self.port_of(slot.index).ok_or_else(|| PortError::Failed {
            target: format!("instance {}", slot.index),
            message: format!(
                "no such instance (the cluster has {})",
                self.manifest.replicas
            ),
        })
    }

    async fn credentials(&self, account: Account) -> Result<Credentials, PortError> {
        Ok(lock(&self.secret).credentials(account))
    }

    async fn external_credentials(&self) -> Result<Credentials, PortError> {
        Err(PortError::Failed {
            target: self.layout.root().display().to_string(),
            message: "a local cluster has no external replication source".to_owned(),
        })
    }

    async fn set_role_label(&self, index: u32, role: Option<Role>) -> Result<(), PortError> {
        PodsFile::update(&self.layout, |p| {
            p.instances.entry(index).or_default().role = role;
        })
        .map_err(|e| port_err(format!("instance {index}"), e))?;
        self.refresh_routes();
        Ok(())
    }

    async fn set_prevent_delete(&self, index: u32, enabled: bool) -> Result<(), PortError> {
        PodsFile::update(&self.layout, |p| {
            p.instances.entry(index).or_default().prevent_delete = enabled;
        })
        .map(|_| ())
        .map_err(|e| port_err(format!("instance {index}"), e))
    }

    async fn remove_demote(&self, index: u32) -> Result<(), PortError> {
        PodsFile::update(&self.layout, |p| {
            if let Some(meta) = p.instances.get_mut(&index) {
                meta.demote = false;
            }
        })
        .map(|_| ())
        .map_err(|e| port_err(format!("instance {index}"), e))
    }

    async fn clear_switchover_request(
        &self,
        index: u32,
        refusal: Option<&str>,
    ) -> Result<(), PortError> {
        PodsFile::update(&self.layout, |p| {
            if p.switchover_to == Some(index) {
                p.switchover_to = None;
                if let Some(reason) = refusal {
                    p.switchover_refused = Some((index, reason.to_owned()));
                }
            }
        })
        .map(|_| ())
        .map_err(|e| port_err(self.layout.pods().display().to_string(), e))
    }

    async fn write_status(&self, status: &ClusteringStatus) -> Result<(), PortError> {
        let path = self.layout.status();
        let target = || path.display().to_string();
        let mut stored: ClusterStatus = files::read_json_opt(&path)
            .map_err(|e| port_err(target(), e))?
            .unwrap_or_default();
        status.merge_into(&mut stored);
        files::write_json(&path, &stored, 0o644).map_err(|e| port_err(target(), e))?;
        *lock(&self.status) = stored;
        self.refresh_routes();
        // A `switchover --to N` request is done once N is the primary.
        let primary = status.current_primary_index;
        PodsFile::update(&self.layout, |p| {
            if p.switchover_to == Some(primary) {
                p.switchover_to = None;
            }
        })
        .map_err(|e| port_err(self.layout.pods().display().to_string(), e))?;
        if let Err(e) = self.write_snapshot(None) {
            tracing::warn!(error = %e, "writing state.json failed");
        }
        Ok(())
    }

    async fn record_event(&self, event: &Event) -> Result<(), PortError> {
        self.record_local(event);
        Ok(())
    }

    async fn clone_instance(
        &self,
        index: u32,
        donor: &ReplicationSource,
        boot_timeout: Duration,
    ) -> Result<(), PortError> {
        let target = format!("instance {index}");
        let _busy = self.mark_busy(index).await?;
        let server = self
            .server(index)
            .cloned()
            .ok_or_else(|| PortError::Failed {
                target: target.clone(),
                message: "no such instance".to_owned(),
            })?;
        // The engine picked the donor (a healthy replica when there is one).
        let donor_index = match donor {
            ReplicationSource::Instance { index, .. } => *index,
            ReplicationSource::External { host, port } => {
                return Err(PortError::Failed {
                    target,
                    message: format!(
                        "a local cluster cannot clone from an external source ({host}:{port})"
                    ),
                });
            }
        };
        let donor_server = self
            .server(donor_index)
            .cloned()
            .ok_or_else(|| PortError::Failed {
                target: target.clone(),
                message: format!("donor instance {donor_index} does not exist"),
            })?;
        let started = Instant::now();
        let secret = self.secret();
        let job = clone::CloneJob {
            layout: &self.layout,
            manifest: &self.manifest,
            secret: &secret,
            binary: &self.binary,
            target_index: index,
            target: &server,
            donor_index,
            donor: &donor_server,
            donor_port: self.port_of(donor_index),
            stop_grace: self.config.stop_grace,
            boot_timeout: boot_timeout.max(self.config.boot_timeout),
        };
        clone::run(job).await.map_err(|e| port_err(target, e))?;
        self.forget_connections(index).await;
        self.record_local(&Event::normal(
            "CloneCompleted",
            format!(
                "instance {index} was copied from instance {donor_index} in {} ms",
                started.elapsed().as_millis()
            ),
        ));
        Ok(())
    }

    async fn rotation(&self) -> Result<Option<RotationRecord>, PortError> {
        self.read_rotation()
    }

    async fn publish_rotation(&self, _record: &RotationRecord) -> Result<(), PortError> {
        self.publish()
    }

    async fn record_channel_moved(&self, index: u32) -> Result<(), PortError> {
        self.channel_moved(index)
    }

    async fn finish_rotation(&self) -> Result<(), PortError> {
        self.finish()
    }

    async fn round_finished(&self, timing: &RoundTiming) {
        lock(&self.observed).timing = Some(RoundSnapshot {
            ended_at_ms: now_ms(),
            took_ms: u64::try_from(timing.took.as_millis()).unwrap_or(u64::MAX),
            limit_ms: u64::try_from(timing.limit.as_millis()).unwrap_or(u64::MAX),
        });
    }

    async fn observed(&self, facts: &ClusterFacts, decision: &Decision) {
        {
            let mut o = lock(&self.observed);
            o.writable = (0..self.manifest.replicas)
                .map(|index| {
                    facts
                        .instances
                        .iter()
                        .find(|i| i.index == index)
                        .and_then(|i| i.mysqld.as_ref())
                        .is_some_and(|m| !m.read_only)
                })
                .collect();
            o.round = Some((facts.clone(), decision.clone()));
        }
        self.refresh_routes();
        // `moco local status` shows the decision before its steps run, not a round late.
        if let Err(e) = self.write_snapshot(None) {
            tracing::warn!(error = %e, "writing state.json failed");
        }
    }
}

mod rotation;

#[cfg(test)]
mod tests;
