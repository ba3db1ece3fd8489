//! The `moco local` manager process: the cluster manager, the role-following endpoints, the
//! restart supervisor and the `state.json` snapshot, until shutdown; then every instance is
//! stopped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use moco_cluster::health::{DEFAULT_DETECTION_WINDOW, HealthConfig};
use moco_cluster::manager::{Manager, ManagerConfig};
use moco_cluster::ports::Platform;
use moco_core::pacing::Pacing;
use tokio::sync::watch;

use super::error::LocalError;
use super::files::{self, FileLock};
use super::layout::Layout;
use super::manifest::Manifest;
use super::port::{LocalConfig, LocalPlatform};
use super::proxy::{Endpoints, ProxyConfig};
use super::servers::stop_servers;
use moco_adapters::mysqld::{LocalMysqld, process_alive};

/// Options of the manager process.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Pause between rounds when nothing changes.
    pub check_interval: Duration,
    /// How long an instance may stay silent before it counts as unreachable (see
    /// [`moco_cluster::health`]).
    pub detection_window: Duration,
    /// Platform timing.
    pub local: LocalConfig,
    /// Endpoint tuning.
    pub proxy: ProxyConfig,
    /// How often the restart rules run.
    pub supervise_interval: Duration,
    /// Stop every instance when the manager stops.
    pub stop_instances_on_exit: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            check_interval: Duration::from_secs(1),
            detection_window: DEFAULT_DETECTION_WINDOW,
            local: LocalConfig::default(),
            proxy: ProxyConfig::default(),
            supervise_interval: Duration::from_millis(200),
            stop_instances_on_exit: true,
        }
    }
}

/// A started manager: the endpoints, and the generation of platform and loops serving the
/// cluster's current size (replaced when `moco local scale` changes `cluster.json`).
#[derive(Debug)]
pub struct RunningCluster {
    current: Arc<tokio::sync::Mutex<Generation>>,
    endpoints: Arc<Endpoints>,
    watcher: tokio::task::JoinHandle<()>,
    watcher_stop: watch::Sender<bool>,
    stop_instances_on_exit: bool,
    _lock: FileLock,
}

/// The pid in `manager.pid` when that manager still runs (it holds `manager.lock`); `0`
/// when a manager holds the lock but its pid is unknown.
pub fn running_manager(layout: &Layout) -> Result<Option<u32>, LocalError> {
    if !layout.manager_lock().exists() {
        return Ok(None);
    }
    let lock = FileLock::try_acquire(&layout.manager_lock())?;
    if lock.is_some() {
        return Ok(None);
    }
    let pid = std::fs::read_to_string(layout.manager_pid())
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    Ok(pid.filter(|p| process_alive(*p)).or(Some(0)))
}

/// One platform (one size of the cluster) and its loops.
#[derive(Debug)]
struct Generation {
    platform: Arc<LocalPlatform>,
    /// Stops every loop at once (a manager round under way is cut short).
    shutdown: watch::Sender<bool>,
    /// Stops the manager loop between rounds (and the others at once).
    drain: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Generation {
    /// Starts every instance of the platform that does not run, routes the endpoints from it
    /// and starts its loops.
    async fn start(
        platform: Arc<LocalPlatform>,
        endpoints: &Arc<Endpoints>,
        options: &RunOptions,
    ) -> Result<Generation, LocalError> {
        platform.start_all().await?;
        // Readiness first: routing from a platform that has probed nothing would take every
        // backend away and close the endpoints' client connections (a new generation keeps
        // them: the primary stays routed).
        platform.refresh_readiness().await;
        platform.attach_endpoints(Arc::clone(endpoints));
        let manager = Arc::new(Manager::new(
            Arc::clone(&platform) as Arc<dyn Platform>,
            ManagerConfig {
                check_interval: options.check_interval,
                health: HealthConfig {
                    detection_window: options.detection_window,
                    ..HealthConfig::default()
                },
                ..ManagerConfig::default()
            },
        ));
        platform.set_waker(manager.waker());
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (drain, drain_rx) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(manager_loop(
                Arc::clone(&manager),
                Arc::clone(&platform),
                options.check_interval,
                shutdown_rx.clone(),
                drain_rx,
            )),
            tokio::spawn(supervisor_loop(
                Arc::clone(&platform),
                options.supervise_interval,
                shutdown_rx.clone(),
            )),
            tokio::spawn(readiness_loop(
                Arc::clone(&platform),
                options.supervise_interval,
                shutdown_rx,
            )),
        ];
        Ok(Generation {
            platform,
            shutdown,
            drain,
            tasks,
        })
    }

    /// Stops the loops: at once (`cut`), or letting a manager round under way finish.
    async fn stop(self, cut: bool) -> Arc<LocalPlatform> {
        let mut tasks = self.tasks.into_iter();
        if !cut {
            let _ = self.drain.send(true);
            // The manager loop (first) finishes its round; the others hold no operation.
            if let Some(manager) = tasks.next() {
                let _ = manager.await;
            }
        }
        let _ = self.shutdown.send(true);
        for task in tasks {
            let _ = task.await;
        }
        self.platform
    }
}

impl RunningCluster {
    /// Takes the manager lock, starts every instance that does not run, binds the endpoints
    /// and starts the manager loop, the supervisor, the snapshot writer and the watch on
    /// `cluster.json` (a new size starts a new generation; the endpoints and their client
    /// connections stay).
    pub async fn start(layout: &Layout, options: RunOptions) -> Result<RunningCluster, LocalError> {
        let manifest = Manifest::load(layout)?;
        let Some(lock) = FileLock::try_acquire(&layout.manager_lock())? else {
            let pid = std::fs::read_to_string(layout.manager_pid()).unwrap_or_default();
            return Err(LocalError::other(
                layout.root().display().to_string(),
                format!("a manager is already running (pid {})", pid.trim()),
            ));
        };
        files::write_atomic(
            &layout.manager_pid(),
            format!("{}\n", std::process::id()).as_bytes(),
            0o644,
        )?;
        let platform = Arc::new(LocalPlatform::open(layout, options.local.clone())?);
        // Bind first: a taken endpoint port must fail before any server is started.
        let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let endpoints = Arc::new(
            Endpoints::bind(
                loopback(manifest.primary_port()),
                loopback(manifest.replica_port()),
                options.proxy,
            )
            .await?,
        );
        let generation = Generation::start(platform, &endpoints, &options).await?;
        let current = Arc::new(tokio::sync::Mutex::new(generation));
        let (watcher_stop, watcher_rx) = watch::channel(false);
        let watcher = tokio::spawn(size_watch(
            layout.clone(),
            Arc::clone(&current),
            Arc::clone(&endpoints),
            options.clone(),
            watcher_rx,
        ));
        Ok(RunningCluster {
            current,
            endpoints,
            watcher,
            watcher_stop,
            stop_instances_on_exit: options.stop_instances_on_exit,
            _lock: lock,
        })
    }

    /// The platform of the current generation.
    pub async fn platform(&self) -> Arc<LocalPlatform> {
        Arc::clone(&self.current.lock().await.platform)
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &Arc<Endpoints> {
        &self.endpoints
    }

    /// Stops the loops and the endpoints, then (if configured) every instance.
    pub async fn stop(self) -> Result<(), LocalError> {
        let _ = self.watcher_stop.send(true);
        let _ = self.watcher.await;
        let Ok(current) = Arc::try_unwrap(self.current) else {
            return Err(LocalError::other("manager", "the size watch did not stop"));
        };
        let platform = current.into_inner().stop(true).await;
        if let Ok(endpoints) = Arc::try_unwrap(self.endpoints) {
            endpoints.shutdown().await;
        }
        let result = if self.stop_instances_on_exit {
            platform.stop_all().await
        } else {
            Ok(())
        };
        let _ = std::fs::remove_file(platform.layout().manager_pid());
        result
    }
}

/// Watches `cluster.json` and the status: when the size differs from the running
/// platform's, or a shrink's leaving instances may go, the current generation stops (between
/// rounds), the leaving instances are retired ([`super::scale::retire_leaving`]) and a
/// generation for the new size starts with the same endpoints. A new generation that cannot
/// start (an instance does not come up) is retried with the old platform in the meantime, so
/// the cluster is never left without a manager.
async fn size_watch(
    layout: Layout,
    current: Arc<tokio::sync::Mutex<Generation>>,
    endpoints: Arc<Endpoints>,
    options: RunOptions,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(options.supervise_interval) => {}
            _ = stop.changed() => return,
        }
        let Ok(manifest) = Manifest::load(&layout) else {
            continue;
        };
        let mut generation = current.lock().await;
        let running = generation.platform.manifest().clone();
        let resized =
            (manifest.replicas, manifest.shrinking_to) != (running.replicas, running.shrinking_to);
        let retire = !resized && super::scale::releasable(&layout, &running).is_some();
        if !resized && !retire {
            continue;
        }
        tracing::info!(
            from = running.spec_replicas(),
            to = manifest.spec_replicas(),
            retire,
            "the cluster's size changed: restarting the manager for the new size"
        );
        let placeholder = Arc::clone(&generation.platform);
        let old = std::mem::replace(
            &mut *generation,
            Generation {
                platform: placeholder,
                shutdown: watch::channel(false).0,
                drain: watch::channel(false).0,
                tasks: Vec::new(),
            },
        );
        let old_platform = old.stop(false).await;
        if retire {
            let servers: Vec<(u32, Arc<LocalMysqld>)> = (0..running.replicas)
                .filter_map(|i| old_platform.server(i).map(|s| (i, Arc::clone(s))))
                .collect();
            if let Err(e) =
                super::scale::retire_leaving(&layout, &running, &servers, options.local.stop_grace)
                    .await
            {
                tracing::error!(error = %e, "retiring the leaving instances failed; trying again later");
            }
        }
        let next = match LocalPlatform::open(&layout, options.local.clone()) {
            Ok(p) => Generation::start(Arc::new(p), &endpoints, &options).await,
            Err(e) => Err(e),
        };
        *generation = match next {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(error = %e, "the manager for the new size did not start; going on with the old one");
                match Generation::start(old_platform, &endpoints, &options).await {
                    Ok(g) => g,
                    Err(e) => {
                        tracing::error!(error = %e, "the old manager did not start again");
                        return;
                    }
                }
            }
        };
    }
}

/// The manager's rounds until `shutdown` (which cuts a round short, as a crash would) or
/// `drain` (which lets a round under way finish: a new generation takes over from it).
async fn manager_loop(
    manager: Arc<Manager>,
    platform: Arc<LocalPlatform>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
    mut drain: watch::Receiver<bool>,
) {
    let waker = manager.waker();
    let mut pacing = Pacing::new();
    loop {
        if *shutdown.borrow() {
            return;
        }
        if *drain.borrow() {
            return;
        }
        let round = tokio::select! {
            r = manager.run_once() => r,
            _ = shutdown.changed() => return,
        };
        let (pause, error) = match round {
            Ok(report) => (pacing.after(&report.decision, interval), None),
            Err(err) => {
                tracing::warn!(%err, "round failed");
                (pacing.after_failure(interval), Some(err.to_string()))
            }
        };
        if let Err(e) = platform.write_snapshot(error) {
            tracing::warn!(error = %e, "writing state.json failed");
        }
        if pause.is_zero() {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = waker.notified() => {}
            _ = shutdown.changed() => return,
            _ = drain.changed() => return,
        }
    }
}

async fn supervisor_loop(
    platform: Arc<LocalPlatform>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        platform.supervise_once();
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Probes readiness in the background (the kubelet's readiness probes): a frozen server's
/// silent socket delays this loop, never a manager round.
async fn readiness_loop(
    platform: Arc<LocalPlatform>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = platform.refresh_readiness() => {}
            _ = shutdown.changed() => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Stops every instance of a cluster whose manager does not run (by pid, as recorded in
/// each instance's pid file).
pub async fn stop_instances(layout: &Layout, grace: Duration) -> Result<(), LocalError> {
    let manifest = Manifest::load(layout)?;
    let present: Vec<u32> = (0..manifest.replicas)
        .filter(|i| layout.mycnf(*i).is_file())
        .collect();
    if present.is_empty() {
        return Ok(());
    }
    let binary = manifest.server_binary()?;
    let mut servers = Vec::new();
    for index in present {
        let server = LocalMysqld::open(binary.clone(), &layout.instance_dir(index))
            .map_err(|e| LocalError::other(format!("instance {index}"), e.to_string()))?;
        servers.push((index, Arc::new(server)));
    }
    let status: moco_core::status::ClusterStatus =
        files::read_json_opt(&layout.status())?.unwrap_or_default();
    stop_servers(&servers, status.current_primary_index, grace).await
}

/// The launcher handle of instance `index`, from another process than the manager.
fn open_instance(
    layout: &Layout,
    manifest: &Manifest,
    index: u32,
) -> Result<LocalMysqld, LocalError> {
    manifest.check_index(index)?;
    LocalMysqld::open(manifest.server_binary()?, &layout.instance_dir(index))
        .map_err(|e| LocalError::other(format!("instance {index}"), e.to_string()))
}

/// SIGKILLs instance `index`'s server (a simulated crash) and waits until it is gone.
/// Returns `false` when it was not running.
pub async fn kill_instance(
    layout: &Layout,
    manifest: &Manifest,
    index: u32,
) -> Result<bool, LocalError> {
    open_instance(layout, manifest, index)?
        .kill()
        .await
        .map_err(|e| LocalError::other(format!("instance {index}: kill"), e.to_string()))
}

/// What [`freeze_instance`] does to a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freeze {
    /// SIGSTOP: it stops answering, as a hung process, a dead node or a network cut look.
    Freeze,
    /// SIGCONT: it runs again.
    Thaw,
}

/// Freezes or thaws instance `index`'s server; returns its pid, `None` when it does not run.
pub fn freeze_instance(
    layout: &Layout,
    manifest: &Manifest,
    index: u32,
    what: Freeze,
) -> Result<Option<u32>, LocalError> {
    let server = open_instance(layout, manifest, index)?;
    let result = match what {
        Freeze::Freeze => server.freeze(),
        Freeze::Thaw => server.thaw(),
    };
    result.map_err(|e| LocalError::other(format!("instance {index}"), e.to_string()))
}

/// True when `pid`'s command line is a `moco local` manager (`moco local up|resume|run`).
fn is_manager_process(pid: u32) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    args.windows(2)
        .any(|w| w[0] == "local" && matches!(w[1].as_str(), "up" | "resume" | "run"))
}

fn signal(pid: u32, sig: rustix::process::Signal) -> Result<(), LocalError> {
    let target = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| LocalError::other(format!("pid {pid}"), "not a valid process id"))?;
    match rustix::process::kill_process(target, sig) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(LocalError::other(
            format!("manager pid {pid}"),
            format!("signal: {e}"),
        )),
    }
}

/// Stops a running manager (SIGTERM; SIGKILL after `timeout`) and waits until its lock is
/// released. Returns its pid, or `None` when no manager ran.
pub async fn stop_manager(layout: &Layout, timeout: Duration) -> Result<Option<u32>, LocalError> {
    let Some(pid) = running_manager(layout)? else {
        return Ok(None);
    };
    if pid == 0 || !is_manager_process(pid) {
        return Err(LocalError::other(
            layout.manager_lock().display().to_string(),
            format!(
                "held by a process that is not a moco local manager (manager.pid says {pid}); not signalling it"
            ),
        ));
    }
    signal(pid, rustix::process::Signal::TERM)?;
    let mut deadline = tokio::time::Instant::now() + timeout;
    let mut killed = false;
    loop {
        if FileLock::try_acquire(&layout.manager_lock())?.is_some() || !process_alive(pid) {
            return Ok(Some(pid));
        }
        if tokio::time::Instant::now() >= deadline {
            if killed {
                return Err(LocalError::Timeout {
                    what: format!("stopping the manager (pid {pid})"),
                    seconds: timeout.as_secs() + 10,
                    detail: None,
                });
            }
            tracing::warn!(pid, "the manager ignored SIGTERM; sending SIGKILL");
            signal(pid, rustix::process::Signal::KILL)?;
            killed = true;
            deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
