//! One Pod's life on a Node, as the kubelet lives it: the sandbox (address, network namespace,
//! hosts file), the volumes, the init containers in order, then the containers with their
//! probes and restarts; status written whenever it changes; on deletion `preStop`, SIGTERM,
//! the grace period, SIGKILL, and the Pod deleted for good. Faults for drills come as the Pod's
//! annotations ([`FAULT_NETWORK`], [`FAULT_FREEZE`], [`FAULT_KILL`]).
//!
//! A single task owns the Pod's state; processes, probes and stops run in tasks of their own
//! that report back through channels, so that no wait blocks another Pod event.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff;
use super::hosts::{self, HostEntry};
use super::ips::IpBook;
use super::launch::{self, NotStarted, ProbeReport};
use super::probe::Kind;
use super::status::{self, Ended, State};
use crate::container::{self, Cgroup, Exit};
use crate::context::Context;
use crate::images::ImageTable;
use crate::net::{self, PodNetwork};
use crate::state::NodeNetwork;
use crate::volumes::PodVolumes;

/// Annotation: `cut` takes the Pod off the network (its veth down); anything else or none
/// puts it back.
pub const FAULT_NETWORK: &str = "pod-runner.moco-rs.test/network";
/// Annotation: `true` freezes every process of the Pod (SIGSTOP-like, by the freezer cgroup);
/// anything else or none thaws them.
pub const FAULT_FREEZE: &str = "pod-runner.moco-rs.test/freeze";
/// Annotation: `CONTAINER` or `CONTAINER@NONCE` kills that container's process (SIGKILL),
/// once per distinct value.
pub const FAULT_KILL: &str = "pod-runner.moco-rs.test/kill";

/// How often volumes (ConfigMaps, Secrets, tokens) are refreshed.
const REFRESH: Duration = Duration::from_secs(2);
/// How often a volume that is not ready is tried again.
const VOLUME_RETRY: Duration = Duration::from_secs(1);
/// The grace period of containers when the runner itself stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// What every worker shares.
#[derive(Debug)]
pub struct Shared {
    /// The runner's context.
    pub ctx: Arc<Context>,
    /// The image table.
    pub images: ImageTable,
    /// Pod addresses.
    pub ips: Mutex<IpBook>,
    /// Every Pod's hosts entry by uid; workers rewrite their hosts file when it changes.
    pub hosts: watch::Sender<BTreeMap<String, HostEntry>>,
}

/// What the runner tells a worker.
#[derive(Debug)]
pub enum Msg {
    /// The Pod as the API server has it now.
    Update(Arc<Pod>),
    /// The Pod is gone from the API server (force-deleted): kill everything now.
    Gone,
}

/// How a worker ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// `deletionTimestamp` set: stop gracefully, then delete the Pod for good.
    Deleted,
    /// The object is gone: kill at once.
    Gone,
    /// The runner stops.
    Shutdown,
}

/// Where a Pod is in its start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Volumes,
    Init(usize),
    Main,
    Terminal,
}

/// One start of a container.
#[derive(Debug)]
struct Run {
    id: u64,
    pid: u32,
    cgroup: Cgroup,
    exited: watch::Receiver<Option<Exit>>,
    started: Instant,
    started_at: Timestamp,
    probes: Option<tokio::task::AbortHandle>,
    stopping: bool,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(p) = &self.probes {
            p.abort();
        }
    }
}

/// A container's life across its starts.
#[derive(Debug, Default)]
struct Slot {
    run: Option<Run>,
    crashes: u32,
    /// When it may start (again); `None`: not planned.
    start_at: Option<Instant>,
    /// It will not run again.
    done: bool,
    /// Its last exit code.
    last_code: Option<i32>,
}

struct Worker {
    shared: Arc<Shared>,
    pod: Arc<Pod>,
    api: Api<Pod>,
    uid: String,
    node: NodeNetwork,
    dir: PathBuf,
    view: status::View,
    written: Option<serde_json::Value>,
    net: Option<PodNetwork>,
    volumes: Option<PodVolumes>,
    volume_message: Option<String>,
    next_volume_try: Instant,
    next_refresh: Instant,
    stage: Stage,
    slots: BTreeMap<String, Slot>,
    next_run: u64,
    exits_tx: mpsc::UnboundedSender<(String, u64, Exit)>,
    exits: mpsc::UnboundedReceiver<(String, u64, Exit)>,
    probes_tx: launch::ProbeSender,
    probes: mpsc::UnboundedReceiver<(String, u64, ProbeReport)>,
    cut: bool,
    frozen: bool,
    kill_done: Option<String>,
    recorder: Recorder,
    hosts_rx: watch::Receiver<BTreeMap<String, HostEntry>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("uid", &self.uid)
            .finish_non_exhaustive()
    }
}

/// Lives `pod` on `node` until it is deleted, gone, or the runner stops.
pub async fn run(
    shared: Arc<Shared>,
    pod: Arc<Pod>,
    node: NodeNetwork,
    mut rx: mpsc::Receiver<Msg>,
    shutdown: CancellationToken,
) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let namespace = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(shared.ctx.client.clone(), &namespace);
    let recorder = Recorder::new(
        shared.ctx.client.clone(),
        Reporter {
            controller: "kubelet".into(),
            instance: Some(node.name.clone()),
        },
    );
    let (exits_tx, exits) = mpsc::unbounded_channel();
    let (probes_tx, probes) = mpsc::unbounded_channel();
    let spec = pod.spec.clone().unwrap_or_default();
    let init_names: Vec<&Container> = spec.init_containers.iter().flatten().collect();
    let view = status::View {
        phase: "Pending",
        pod_ip: None,
        host_ip: node.address,
        start_time: Timestamp::now(),
        sandbox_ready: false,
        initialized: init_names.is_empty(),
        init: init_names
            .iter()
            .map(|c| {
                status::Container::waiting(
                    &c.name,
                    c.image.as_deref().unwrap_or(""),
                    "PodInitializing",
                )
            })
            .collect(),
        containers: spec
            .containers
            .iter()
            .map(|c| {
                let reason = if init_names.is_empty() {
                    "ContainerCreating"
                } else {
                    "PodInitializing"
                };
                status::Container::waiting(&c.name, c.image.as_deref().unwrap_or(""), reason)
            })
            .collect(),
        reason: None,
        message: None,
    };
    let now = Instant::now();
    let mut w = Worker {
        dir: shared.ctx.state_dir.join("pods").join(&uid),
        hosts_rx: shared.hosts.subscribe(),
        shared,
        pod,
        api,
        uid,
        node,
        view,
        written: None,
        net: None,
        volumes: None,
        volume_message: None,
        next_volume_try: now,
        next_refresh: now + REFRESH,
        stage: Stage::Volumes,
        slots: BTreeMap::new(),
        next_run: 1,
        exits_tx,
        exits,
        probes_tx,
        probes,
        cut: false,
        frozen: false,
        kill_done: None,
        recorder,
    };
    let end = w.live(&mut rx, &shutdown).await;
    w.finish(end, &mut rx).await;
}

impl Worker {
    fn name(&self) -> String {
        self.pod.name_any()
    }

    fn key(&self) -> String {
        format!(
            "{}/{}/{}",
            self.node.name,
            self.pod.namespace().unwrap_or_default(),
            self.name()
        )
    }

    fn containers(&self) -> Vec<Container> {
        self.pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default()
    }

    fn init_containers(&self) -> Vec<Container> {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.clone())
            .unwrap_or_default()
    }

    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    fn grace(&self) -> Duration {
        let secs = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    fn event(&self, warning: bool, reason: &str, note: String) {
        let recorder = self.recorder.clone();
        let reference = self.pod.object_ref(&());
        let event = KubeEvent {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            // The recorder merges events of one action into a series that keeps the first
            // note; the kubelet's events are told apart by their message, so the message
            // (cut to the field's 128 characters) is the action here.
            action: note.chars().take(128).collect(),
            note: Some(note),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &reference).await {
                tracing::debug!(error = %e, "publishing an event");
            }
        });
    }

    /// The Pod's life until it must end.
    async fn live(&mut self, rx: &mut mpsc::Receiver<Msg>, shutdown: &CancellationToken) -> End {
        // A Pod that already ended (the runner restarted) only waits for its deletion.
        if let Some(phase @ ("Succeeded" | "Failed")) =
            self.pod.status.as_ref().and_then(|s| s.phase.as_deref())
        {
            tracing::info!(pod = %self.key(), phase, "already finished");
            self.stage = Stage::Terminal;
            self.written = self
                .pod
                .status
                .as_ref()
                .and_then(|s| serde_json::to_value(s).ok());
            return self.wait_for_end(rx, shutdown).await;
        }
        if let Some(end) = self.check_deleted() {
            return end;
        }
        if let Err(e) = self.make_sandbox() {
            tracing::warn!(pod = %self.key(), error = %e, "sandbox");
            self.event(true, "FailedCreatePodSandBox", e.clone());
            self.view.reason = Some("FailedCreatePodSandBox".into());
            self.view.message = Some(e);
        }
        self.sync_status().await;
        loop {
            self.advance().await;
            self.sync_status().await;
            if self.stage == Stage::Terminal {
                self.release_sandbox().await;
                return self.wait_for_end(rx, shutdown).await;
            }
            let deadline = self.next_deadline();
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return End::Shutdown,
                msg = rx.recv() => match msg {
                    None | Some(Msg::Gone) => return End::Gone,
                    Some(Msg::Update(pod)) => {
                        self.pod = pod;
                        if let Some(end) = self.check_deleted() {
                            return end;
                        }
                        self.apply_faults();
                    }
                },
                Some((name, run, exit)) = self.exits.recv() => self.on_exit(&name, run, exit),
                Some((name, run, report)) = self.probes.recv() => self.on_probe(&name, run, report),
                Ok(()) = self.hosts_rx.changed() => self.write_hosts(),
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    fn check_deleted(&self) -> Option<End> {
        self.pod
            .metadata
            .deletion_timestamp
            .is_some()
            .then_some(End::Deleted)
    }

    async fn wait_for_end(
        &mut self,
        rx: &mut mpsc::Receiver<Msg>,
        shutdown: &CancellationToken,
    ) -> End {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return End::Shutdown,
                msg = rx.recv() => match msg {
                    None | Some(Msg::Gone) => return End::Gone,
                    Some(Msg::Update(pod)) => {
                        self.pod = pod;
                        if let Some(end) = self.check_deleted() {
                            return end;
                        }
                    }
                },
            }
        }
    }

    fn next_deadline(&self) -> Instant {
        let mut d = Instant::now() + REFRESH;
        if self.stage == Stage::Volumes {
            d = d.min(self.next_volume_try);
        } else {
            d = d.min(self.next_refresh);
        }
        for s in self.slots.values() {
            if let (Some(at), None, false) = (s.start_at, &s.run, s.done) {
                d = d.min(at);
            }
        }
        d
    }

    // ---- sandbox -------------------------------------------------------------------------

    fn make_sandbox(&mut self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("making {}: {e}", self.dir.display()))?;
        let ip = self
            .shared
            .ips
            .lock()
            .map_err(|_| "the address book is poisoned".to_owned())?
            .allocate(self.node.pod_cidr, &self.key())
            .map_err(|e| e.to_string())?;
        self.view.pod_ip = Some(ip);
        let pod_net = net::add_pod(&self.shared.ctx.network, ip).map_err(|e| e.to_string())?;
        self.net = Some(pod_net);
        let entry = HostEntry {
            namespace: self.pod.namespace().unwrap_or_default(),
            hostname: crate::env::pod_hostname(&self.pod),
            subdomain: self
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.subdomain.clone())
                .filter(|s| !s.is_empty()),
            ip,
        };
        let uid = self.uid.clone();
        self.shared.hosts.send_modify(|m| {
            m.insert(uid, entry);
        });
        self.write_hosts();
        self.view.sandbox_ready = true;
        self.apply_faults();
        Ok(())
    }

    fn hosts_path(&self) -> PathBuf {
        self.dir.join("hosts")
    }

    /// Rewrites the hosts file in place: it is bind-mounted by inode, so a rename would leave
    /// running containers with the old file.
    fn write_hosts(&mut self) {
        let all: Vec<HostEntry> = self
            .hosts_rx
            .borrow_and_update()
            .values()
            .cloned()
            .collect();
        let Some(own) = all.iter().find(|e| Some(e.ip) == self.view.pod_ip).cloned() else {
            return;
        };
        let text = hosts::render(&own, &all, &self.shared.ctx.cluster_domain);
        let path = self.hosts_path();
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            return;
        }
        if let Err(e) = std::fs::write(&path, text) {
            tracing::warn!(pod = %self.key(), error = %e, "writing the hosts file");
        }
    }

    async fn release_sandbox(&mut self) {
        let uid = self.uid.clone();
        self.shared.hosts.send_modify(|m| {
            m.remove(&uid);
        });
        if let Some(ip) = self.view.pod_ip {
            if let Err(e) = net::remove_pod(&self.shared.ctx.network, ip) {
                tracing::warn!(pod = %self.key(), error = %e, "removing the Pod's network");
            }
            if let Ok(mut book) = self.shared.ips.lock() {
                book.release(ip);
            }
        }
        self.net = None;
        if let Some(v) = self.volumes.take()
            && let Err(e) = v.remove()
        {
            tracing::warn!(pod = %self.key(), error = %e, "removing volumes");
        }
    }

    // ---- faults --------------------------------------------------------------------------

    fn apply_faults(&mut self) {
        let annotations = self.pod.annotations().clone();
        let want_cut = annotations.get(FAULT_NETWORK).map(String::as_str) == Some("cut");
        if want_cut != self.cut
            && let Some(n) = &self.net
        {
            let r = if want_cut {
                net::cut(n)
            } else {
                net::restore(n)
            };
            match r {
                Ok(()) => {
                    tracing::info!(pod = %self.key(), cut = want_cut, "network fault");
                    self.cut = want_cut;
                }
                Err(e) => tracing::warn!(pod = %self.key(), error = %e, "network fault"),
            }
        }
        let want_frozen = annotations.get(FAULT_FREEZE).map(String::as_str) == Some("true");
        if want_frozen != self.frozen {
            for (name, slot) in &self.slots {
                if let Some(run) = &slot.run {
                    let r = if want_frozen {
                        run.cgroup.freeze()
                    } else {
                        run.cgroup.thaw()
                    };
                    if let Err(e) = r {
                        tracing::warn!(pod = %self.key(), container = %name, error = %e, "freeze fault");
                    }
                }
            }
            tracing::info!(pod = %self.key(), frozen = want_frozen, "freeze fault");
            self.frozen = want_frozen;
        }
        if let Some(kill) = annotations.get(FAULT_KILL)
            && self.kill_done.as_deref() != Some(kill.as_str())
        {
            let container = kill.split('@').next().unwrap_or_default();
            if let Some(run) = self.slots.get(container).and_then(|s| s.run.as_ref()) {
                tracing::info!(pod = %self.key(), container, pid = run.pid, "kill fault");
                signal(run.pid, nix::sys::signal::Signal::SIGKILL);
                self.kill_done = Some(kill.clone());
            }
        }
    }

    // ---- starting ------------------------------------------------------------------------

    /// Starts whatever is due at this stage.
    async fn advance(&mut self) {
        let now = Instant::now();
        if self.stage == Stage::Volumes && now >= self.next_volume_try && self.net.is_some() {
            self.try_volumes().await;
        }
        if self.stage != Stage::Volumes && self.stage != Stage::Terminal && now >= self.next_refresh
        {
            self.next_refresh = now + REFRESH;
            if let Some(v) = self.volumes.as_mut()
                && let Err(e) = v.refresh(&self.shared.ctx.client, &self.pod).await
            {
                tracing::debug!(pod = %self.pod.name_any(), error = %e, "refreshing volumes");
            }
        }
        loop {
            match self.stage {
                Stage::Init(i) => {
                    let inits = self.init_containers();
                    let Some(c) = inits.get(i) else {
                        self.stage = Stage::Main;
                        self.view.initialized = true;
                        for c in &mut self.view.containers {
                            if matches!(&c.state, State::Waiting { reason, .. } if reason == "PodInitializing")
                            {
                                c.state = State::Waiting {
                                    reason: "ContainerCreating".into(),
                                    message: None,
                                };
                            }
                        }
                        continue;
                    };
                    let slot = self.slots.entry(c.name.clone()).or_default();
                    if slot.done && slot.last_code == Some(0) {
                        self.stage = Stage::Init(i + 1);
                        continue;
                    }
                    if slot.done {
                        self.stage = Stage::Terminal;
                        self.view.phase = "Failed";
                        self.view.reason = Some("Failed".into());
                        self.view.message = Some(format!("init container {} failed", c.name));
                        continue;
                    }
                    self.start_if_due(c, true).await;
                    return;
                }
                Stage::Main => {
                    for c in self.containers() {
                        self.start_if_due(&c, false).await;
                    }
                    self.view.phase = self.main_phase();
                    if matches!(self.view.phase, "Succeeded" | "Failed") {
                        self.stage = Stage::Terminal;
                    }
                    return;
                }
                Stage::Volumes | Stage::Terminal => return,
            }
        }
    }

    async fn try_volumes(&mut self) {
        let dir = self.dir.join("volumes");
        match crate::volumes::prepare(&self.shared.ctx.client, &self.pod, &dir, &BTreeMap::new())
            .await
        {
            Ok(v) => {
                self.volumes = Some(v);
                self.volume_message = None;
                self.stage = Stage::Init(0);
            }
            Err(e) => {
                let message = e.to_string();
                if self.volume_message.as_deref() != Some(message.as_str()) {
                    tracing::info!(pod = %self.key(), error = %message, "volumes not ready");
                    self.event(true, "FailedMount", message.clone());
                    self.volume_message = Some(message);
                }
                self.next_volume_try = Instant::now() + VOLUME_RETRY;
            }
        }
    }

    fn main_phase(&self) -> &'static str {
        let containers = self.containers();
        let slots: Vec<Option<&Slot>> =
            containers.iter().map(|c| self.slots.get(&c.name)).collect();
        if slots
            .iter()
            .any(|s| s.is_none_or(|s| s.run.is_none() && s.last_code.is_none()))
        {
            return "Pending";
        }
        let all_done = slots.iter().all(|s| s.is_some_and(|s| s.done));
        if !all_done {
            return "Running";
        }
        if slots
            .iter()
            .any(|s| s.is_some_and(|s| s.last_code != Some(0)))
        {
            "Failed"
        } else {
            "Succeeded"
        }
    }

    fn status_of(&mut self, name: &str, init: bool) -> Option<&mut status::Container> {
        let list = if init {
            &mut self.view.init
        } else {
            &mut self.view.containers
        };
        list.iter_mut().find(|c| c.name == name)
    }

    async fn start_if_due(&mut self, c: &Container, init: bool) {
        let now = Instant::now();
        let slot = self.slots.entry(c.name.clone()).or_default();
        if slot.run.is_some() || slot.done || slot.start_at.is_some_and(|at| at > now) {
            return;
        }
        let run_id = self.next_run;
        self.next_run += 1;
        match self.start(c, run_id).await {
            Ok(run) => {
                let slot = self.slots.entry(c.name.clone()).or_default();
                slot.start_at = None;
                let first = slot.last_code.is_none();
                let started_at = run.started_at;
                let has_startup = c.startup_probe.is_some();
                let id = format!("moco-pod-runner://{}-{}-{}", self.uid, c.name, run.id);
                slot.run = Some(run);
                if let Some(st) = self.status_of(&c.name, init) {
                    if !first {
                        st.restart_count += 1;
                    }
                    st.container_id = Some(id);
                    st.state = State::Running { started_at };
                    st.started = !has_startup;
                    st.ready = false;
                }
                self.event(false, "Started", format!("Started container {}", c.name));
            }
            Err(NotStarted::Image(m)) => {
                self.not_started(c, init, "ErrImagePull", "ImagePullBackOff", m)
            }
            Err(NotStarted::Config(m)) => {
                let reason = "CreateContainerConfigError";
                self.not_started(c, init, reason, reason, m);
            }
            Err(NotStarted::Start(m)) => {
                // As a runtime reports a failed exec: the run ended with 128 at once.
                let now = Timestamp::now();
                self.event(true, "Failed", format!("container {}: {m}", c.name));
                self.ended(
                    &c.name,
                    init,
                    Ended {
                        exit_code: 128,
                        signal: None,
                        reason: "StartError".into(),
                        message: Some(m),
                        started_at: None,
                        finished_at: now,
                        container_id: None,
                    },
                    Duration::ZERO,
                );
            }
        }
    }

    /// A start that could not even be tried: wait (with back-off) and try again.
    fn not_started(
        &mut self,
        c: &Container,
        init: bool,
        first: &str,
        again: &str,
        message: String,
    ) {
        let slot = self.slots.entry(c.name.clone()).or_default();
        let delay = backoff::delay(slot.crashes.max(1));
        slot.crashes += 1;
        slot.start_at = Some(Instant::now() + delay);
        let reason = if slot.crashes == 1 { first } else { again };
        if let Some(st) = self.status_of(&c.name, init) {
            st.state = State::Waiting {
                reason: reason.to_owned(),
                message: Some(message.clone()),
            };
        }
        self.event(true, "Failed", format!("container {}: {message}", c.name));
    }

    async fn start(&mut self, c: &Container, run_id: u64) -> Result<Run, NotStarted> {
        let env = crate::env::resolve(
            &self.shared.ctx.client,
            &self.pod,
            c,
            self.shared.ctx.api_server,
        )
        .await
        .map_err(|e| NotStarted::Config(e.to_string()))?;
        let volume_mounts = match &self.volumes {
            Some(v) => v
                .mounts(&self.pod, c, &env)
                .map_err(|e| NotStarted::Config(e.to_string()))?,
            None => vec![],
        };
        let Some(n) = &self.net else {
            return Err(NotStarted::Start("the Pod has no network namespace".into()));
        };
        let cgroup = Cgroup::for_container(&self.shared.ctx.network.bridge, &self.uid, &c.name);
        let log = launch::log_path(&self.shared.ctx.state_dir, &self.pod, &c.name, run_id);
        let spec = launch::spec(launch::Inputs {
            pod: &self.pod,
            container: c,
            env,
            volume_mounts,
            images: &self.shared.images,
            netns: n.netns_path(),
            hosts: self.hosts_path(),
            root: self
                .dir
                .join("containers")
                .join(format!("{}-{run_id}", c.name)),
            log: log.clone(),
            cgroup: cgroup.relative().to_owned(),
        })?;
        let mut running = container::start(&self.shared.ctx.exe, &spec)
            .await
            .map_err(|e| NotStarted::Start(e.to_string()))?;
        let pid = running.pid();
        if self.frozen
            && let Err(e) = cgroup.freeze()
        {
            tracing::warn!(pod = %self.key(), error = %e, "freezing a new container");
        }
        let (exit_tx, exited) = watch::channel(None);
        let exits = self.exits_tx.clone();
        let name = c.name.clone();
        tokio::spawn(async move {
            let exit = running.wait().await;
            let _ = exit_tx.send(Some(exit));
            let _ = exits.send((name, run_id, exit));
        });
        let probes = (!self.is_init(&c.name)).then(|| {
            let ip = self.view.pod_ip.unwrap_or(self.node.address);
            tokio::spawn(launch::probe_loop(
                Arc::new(c.clone()),
                ip,
                pid,
                self.shared.ctx.exe.clone(),
                run_id,
                self.probes_tx.clone(),
            ))
            .abort_handle()
        });
        self.write_pid(&c.name, Some(pid));
        tracing::info!(pod = %self.key(), container = %c.name, pid, run = run_id, log = %log.display(), "started");
        Ok(Run {
            id: run_id,
            pid,
            cgroup,
            exited,
            started: Instant::now(),
            started_at: Timestamp::now(),
            probes,
            stopping: false,
        })
    }

    /// Keeps `pod-runner exec`'s pointer to the container's main process.
    fn write_pid(&self, container: &str, pid: Option<u32>) {
        let ns = self.pod.namespace().unwrap_or_default();
        let file = super::exec::pid_file(&self.shared.ctx.state_dir, &ns, &self.name(), container);
        let result = match pid {
            Some(pid) => file
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&file, pid.to_string())),
            None => std::fs::remove_file(&file).or_else(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            }),
        };
        if let Err(e) = result {
            tracing::warn!(file = %file.display(), error = %e, "exec pointer");
        }
    }

    fn is_init(&self, name: &str) -> bool {
        self.view.init.iter().any(|c| c.name == name)
    }

    // ---- ends of runs ----------------------------------------------------------------------

    fn on_exit(&mut self, name: &str, run_id: u64, exit: Exit) {
        let init = self.is_init(name);
        let fallback = self
            .containers()
            .into_iter()
            .chain(self.init_containers())
            .find(|c| c.name == name)
            .is_some_and(|c| falls_back_to_logs(&c));
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        let Some(run) = slot.run.take_if(|r| r.id == run_id) else {
            return;
        };
        let ran = run.started.elapsed();
        let code = exit.kube_code();
        let log = launch::log_path(&self.shared.ctx.state_dir, &self.pod, name, run_id);
        let ended = Ended {
            exit_code: code,
            signal: exit.signal,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            message: (code != 0 && fallback)
                .then(|| launch::log_tail(&log))
                .flatten(),
            started_at: Some(run.started_at),
            finished_at: Timestamp::now(),
            container_id: Some(format!(
                "moco-pod-runner://{}-{}-{}",
                self.uid, name, run.id
            )),
        };
        tracing::info!(pod = %self.key(), container = name, code, ?ran, "exited");
        self.write_pid(name, None);
        drop(run);
        self.ended(name, init, ended, ran);
    }

    /// A run ended: restart it (after its back-off) or leave it ended, by the restart policy.
    fn ended(&mut self, name: &str, init: bool, ended: Ended, ran: Duration) {
        let policy = self.restart_policy();
        let code = ended.exit_code;
        let restart = match (init, policy.as_str()) {
            (_, "Never") => false,
            (true, _) => code != 0,
            (false, "OnFailure") => code != 0,
            _ => true,
        };
        let deleting = self.pod.metadata.deletion_timestamp.is_some();
        let restart = restart && !deleting;
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        slot.last_code = Some(code);
        let mut waiting = None;
        if restart {
            if ran >= backoff::RESET_AFTER {
                slot.crashes = 0;
            }
            let delay = backoff::delay(slot.crashes);
            slot.crashes += 1;
            slot.start_at = Some(Instant::now() + delay);
            if !delay.is_zero() {
                waiting = Some(format!(
                    "back-off {}s restarting failed container={name}",
                    delay.as_secs()
                ));
            }
        } else {
            slot.done = true;
        }
        let pod = self.pod.name_any();
        if let Some(st) = self.status_of(name, init) {
            st.ready = false;
            st.started = false;
            if restart {
                st.last = Some(ended.clone());
                st.state = match &waiting {
                    Some(m) => State::Waiting {
                        reason: "CrashLoopBackOff".into(),
                        message: Some(m.clone()),
                    },
                    None => State::Terminated(ended),
                };
            } else {
                st.state = State::Terminated(ended);
            }
        }
        if let Some(m) = waiting {
            self.event(true, "BackOff", format!("{m} pod={pod}"));
        }
    }

    fn on_probe(&mut self, name: &str, run_id: u64, report: ProbeReport) {
        let current = self
            .slots
            .get(name)
            .and_then(|s| s.run.as_ref())
            .is_some_and(|r| r.id == run_id && !r.stopping);
        if !current {
            return;
        }
        match report {
            ProbeReport::Started => {
                if let Some(st) = self.status_of(name, false) {
                    st.started = true;
                }
            }
            ProbeReport::Ready(ready) => {
                if let Some(st) = self.status_of(name, false) {
                    st.ready = ready;
                }
            }
            ProbeReport::Unhealthy(kind, why) => {
                self.event(
                    true,
                    "Unhealthy",
                    format!("{} probe failed: {why}", kind_name(kind)),
                );
            }
            ProbeReport::Failed(kind, why) => {
                let c = self.containers().into_iter().find(|c| c.name == name);
                let grace = c
                    .as_ref()
                    .and_then(|c| match kind {
                        Kind::Liveness => c.liveness_probe.as_ref(),
                        Kind::Startup => c.startup_probe.as_ref(),
                        Kind::Readiness => None,
                    })
                    .and_then(|p| p.termination_grace_period_seconds)
                    .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
                    .unwrap_or_else(|| self.grace());
                self.event(
                    false,
                    "Killing",
                    format!(
                        "Container {name} failed {} probe ({why}), will be restarted",
                        kind_name(kind)
                    ),
                );
                let stop = c.and_then(|c| {
                    let run = self.slots.get(name)?.run.as_ref()?;
                    Some(stop_of(run, &c, self))
                });
                if let Some(stop) = stop {
                    if let Some(run) = self.slots.get_mut(name).and_then(|s| s.run.as_mut()) {
                        run.stopping = true;
                    }
                    tokio::spawn(stop_run(stop, grace));
                }
            }
        }
    }

    // ---- status ----------------------------------------------------------------------------

    async fn sync_status(&mut self) {
        let gates: Vec<String> = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.readiness_gates.as_ref())
            .map(|g| g.iter().map(|g| g.condition_type.clone()).collect())
            .unwrap_or_default();
        let built = status::build(
            &self.view,
            self.pod.status.as_ref(),
            &gates,
            Timestamp::now(),
        );
        let Ok(value) = serde_json::to_value(&built) else {
            return;
        };
        if self.written.as_ref() == Some(&value) {
            return;
        }
        let patch = serde_json::json!({ "status": value });
        match self
            .api
            .patch_status(&self.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(pod) => {
                self.pod = Arc::new(pod);
                self.written = Some(value);
            }
            Err(e) => tracing::warn!(pod = %self.key(), error = %e, "writing status"),
        }
    }

    // ---- the end ---------------------------------------------------------------------------

    async fn finish(&mut self, end: End, rx: &mut mpsc::Receiver<Msg>) {
        tracing::info!(pod = %self.key(), ?end, "stopping");
        let grace = match end {
            End::Deleted => self.grace(),
            End::Gone => Duration::ZERO,
            End::Shutdown => SHUTDOWN_GRACE,
        };
        let mut stops = Vec::new();
        let containers: Vec<Container> = self
            .init_containers()
            .into_iter()
            .chain(self.containers())
            .collect();
        for c in &containers {
            let stop = match self.slots.get(&c.name).and_then(|s| s.run.as_ref()) {
                Some(run) => stop_of(run, c, self),
                None => continue,
            };
            if end == End::Deleted {
                self.event(false, "Killing", format!("Stopping container {}", c.name));
            }
            stops.push(tokio::spawn(stop_run(stop, grace)));
        }
        // Waits for every stop; a Pod force-deleted meanwhile is killed at once.
        let all = futures::future::join_all(stops);
        tokio::pin!(all);
        loop {
            tokio::select! {
                _ = &mut all => break,
                msg = rx.recv(), if end == End::Deleted => {
                    if matches!(msg, None | Some(Msg::Gone)) {
                        for s in self.slots.values() {
                            if let Some(run) = &s.run {
                                let _ = run.cgroup.kill_all();
                            }
                        }
                    }
                }
            }
        }
        for s in self.slots.values_mut() {
            if let Some(run) = s.run.take()
                && let Err(e) = run.cgroup.remove()
            {
                tracing::debug!(error = %e, "removing a cgroup");
            }
        }
        self.release_sandbox().await;
        let ns = self.pod.namespace().unwrap_or_default();
        let exec_dir = self
            .shared
            .ctx
            .state_dir
            .join("exec")
            .join(ns)
            .join(self.name());
        let _ = std::fs::remove_dir_all(exec_dir);
        if end == End::Deleted {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(self.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match self.api.delete(&self.name(), &params).await {
                Ok(_) => tracing::info!(pod = %self.key(), "deleted"),
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => tracing::warn!(pod = %self.key(), error = %e, "deleting"),
            }
        }
        if end != End::Shutdown {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Startup => "Startup",
        Kind::Liveness => "Liveness",
        Kind::Readiness => "Readiness",
    }
}

/// What stopping one run needs, detached from the worker.
struct Stop {
    pid: u32,
    cgroup: Cgroup,
    exited: watch::Receiver<Option<Exit>>,
    pre_stop: Option<k8s_openapi::api::core::v1::LifecycleHandler>,
    pod_ip: std::net::Ipv4Addr,
    ports: Vec<k8s_openapi::api::core::v1::ContainerPort>,
    exe: PathBuf,
}

fn stop_of(run: &Run, c: &Container, w: &Worker) -> Stop {
    Stop {
        pid: run.pid,
        cgroup: run.cgroup.clone(),
        exited: run.exited.clone(),
        pre_stop: c.lifecycle.as_ref().and_then(|l| l.pre_stop.clone()),
        pod_ip: w.view.pod_ip.unwrap_or(w.node.address),
        ports: c.ports.clone().unwrap_or_default(),
        exe: w.shared.ctx.exe.clone(),
    }
}

/// `preStop`, SIGTERM, the rest of the grace period, SIGKILL of every process; returns once
/// the main process is gone.
async fn stop_run(mut stop: Stop, grace: Duration) {
    let deadline = Instant::now() + grace;
    if let (Some(hook), false) = (&stop.pre_stop, grace.is_zero()) {
        let target = super::probe::Target {
            pod_ip: stop.pod_ip,
            ports: &stop.ports,
            pid: stop.pid,
            exe: &stop.exe,
        };
        if let Err(e) = super::probe::run_hook(hook, &target, grace).await {
            tracing::info!(pid = stop.pid, error = %e, "preStop hook failed");
        }
    }
    if !grace.is_zero() {
        signal(stop.pid, nix::sys::signal::Signal::SIGTERM);
        let _ = tokio::time::timeout_at(deadline, stop.exited.wait_for(Option::is_some)).await;
    }
    if stop.exited.borrow().is_none() {
        let cgroup = stop.cgroup.clone();
        match tokio::task::spawn_blocking(move || cgroup.kill_all()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(pid = stop.pid, error = %e, "killing a container"),
            Err(e) => tracing::warn!(pid = stop.pid, error = %e, "killing a container"),
        }
        let _ = tokio::time::timeout(
            Duration::from_secs(30),
            stop.exited.wait_for(Option::is_some),
        )
        .await;
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let Ok(pid) = i32::try_from(pid) else { return };
    if let Err(e) = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig) {
        tracing::debug!(pid, ?sig, error = %e, "signal");
    }
}

/// The kubelet's `terminationMessagePolicy: FallbackToLogsOnError`: a container that fails
/// leaves the end of its log as its termination message. With the default policy (`File`) the
/// message is what the container wrote to its `terminationMessagePath`, which the runner does
/// not provide: no message.
fn falls_back_to_logs(container: &Container) -> bool {
    container.termination_message_policy.as_deref() == Some("FallbackToLogsOnError")
}
