//! `pod-runner run`: the runner's main loop. It registers the Nodes, then runs side by side
//! until SIGTERM or SIGINT: the Node heartbeats ([`crate::node`]), the scheduler
//! ([`crate::schedule`]), the provisioner ([`crate::provision`]) and the Pod worker
//! ([`crate::pod`]). On the signal every part is told to stop and the runner waits for all of
//! them, so that no container outlives it (the Pod worker stops them).

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::context::Context;
use crate::state::NetworkState;

/// `pod-runner run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The runner's state directory (network-up made its network.json).
    #[arg(long)]
    pub state_dir: PathBuf,
    /// A kubeconfig with the runner's credentials (a cluster admin).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The API server's address on the bridge (IP:PORT), given to Pods as
    /// KUBERNETES_SERVICE_HOST/PORT.
    #[arg(long)]
    pub api_server: SocketAddr,
    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// The default StorageClass, made at start unless it exists.
    #[arg(long, default_value = "standard")]
    pub storage_class: String,
    /// moco-rs's `moco` binary, which MOCO's images map to (default: `moco` beside this
    /// binary, where cargo puts both).
    #[arg(long, env = "MOCO_BIN")]
    pub moco: Option<PathBuf>,
    /// Debian's mysqld exporter, which the mysqld_exporter images map to.
    #[arg(
        long,
        env = "MOCO_MYSQLD_EXPORTER",
        default_value = "/usr/bin/prometheus-mysqld-exporter"
    )]
    pub mysqld_exporter: PathBuf,
    /// The directory holding cert-manager's programs (`cert-manager-controller`,
    /// `-cainjector`, `-webhook`), which its images map to; they are looked up when such a
    /// container starts (scripts/kube.sh passes DIR/bin, where `install` links them).
    #[arg(long, env = "MOCO_KUBE_BIN")]
    pub kube_bin: Option<PathBuf>,
}

/// Why the runner stopped other than by a signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No tokio runtime.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// network.json missing or unreadable (network-up not run?).
    #[error("cannot read {path} (did `pod-runner network-up` run?): {source}")]
    ReadState {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// network.json is not a network description.
    #[error("{path} is not a network description: {source}")]
    ParseState {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No client could be made from the kubeconfig.
    #[error("a client from kubeconfig {path}: {source}")]
    Client {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The runner's own binary could not be found (containers start through it).
    #[error("cannot find the pod-runner binary itself: {0}")]
    Exe(#[source] std::io::Error),
    /// Installing a signal handler failed.
    #[error("cannot handle {signal}: {source}")]
    Signal {
        /// SIGTERM or SIGINT.
        signal: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The Nodes could not be registered, or their heartbeat stopped.
    #[error(transparent)]
    Node(#[from] crate::node::NodeError),
    /// The scheduler failed.
    #[error(transparent)]
    Schedule(#[from] crate::schedule::ScheduleError),
    /// The provisioner failed.
    #[error(transparent)]
    Provision(#[from] crate::provision::ProvisionError),
    /// The Pod worker failed.
    #[error(transparent)]
    Pod(#[from] crate::pod::PodError),
    /// A part ended on its own before any signal (a bug: each runs until told to stop).
    #[error("the {0} task ended before the runner was told to stop")]
    Ended(&'static str),
    /// A part panicked.
    #[error("the {part} task panicked: {source}")]
    Panicked {
        /// Which.
        part: &'static str,
        /// The join error.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// `pod-runner run`: logs to stderr (RUST_LOG, `info` by default), runs until SIGTERM/SIGINT.
pub fn main(args: RunArgs) -> Result<(), RunError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A second initialisation (tests) is harmless: keep the first.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    runtime.block_on(run(args))
}

/// Reads network.json, as `network-up` wrote it.
pub fn read_network(state_dir: &Path) -> Result<NetworkState, RunError> {
    let path = NetworkState::path(state_dir);
    let text = std::fs::read(&path).map_err(|source| RunError::ReadState {
        path: path.clone(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|source| RunError::ParseState { path, source })
}

async fn client(path: &Path) -> Result<kube::Client, RunError> {
    let kubeconfig_error = |source| RunError::Kubeconfig {
        path: path.to_owned(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(kubeconfig_error)?;
    kube::Client::try_from(config).map_err(|source| RunError::Client {
        path: path.to_owned(),
        source,
    })
}

async fn run(args: RunArgs) -> Result<(), RunError> {
    // Handlers first: a signal during registration stops the runner cleanly too.
    let mut sigterm = signal(tokio::signal::unix::SignalKind::terminate(), "SIGTERM")?;
    let mut sigint = signal(tokio::signal::unix::SignalKind::interrupt(), "SIGINT")?;

    let network = read_network(&args.state_dir)?;
    let exe = std::env::current_exe().map_err(RunError::Exe)?;
    let programs = crate::pod::Programs {
        moco: args.moco.unwrap_or_else(|| exe.with_file_name("moco")),
        mysqld_exporter: args.mysqld_exporter,
        kube_bin: args.kube_bin,
    };
    for (what, path) in [
        ("moco", &programs.moco),
        ("mysqld exporter", &programs.mysqld_exporter),
    ] {
        if !path.is_file() {
            warn!(path = %path.display(), "no {what} binary there: containers of the images mapped to it will fail to start");
        }
    }
    let ctx = Arc::new(Context {
        client: client(&args.kubeconfig).await?,
        state_dir: args.state_dir,
        network,
        exe,
        api_server: args.api_server,
        cluster_domain: args.cluster_domain,
        storage_class: args.storage_class,
    });
    info!(
        nodes = ctx.network.nodes.len(),
        bridge = %ctx.network.bridge,
        api_server = %ctx.api_server,
        "pod-runner starting"
    );

    tokio::select! {
        registered = async {
            crate::node::register_all(&ctx).await?;
            crate::provision::ensure_storage_class(&ctx).await?;
            Ok::<(), RunError>(())
        } => registered?,
        _ = sigterm.recv() => return Ok(()),
        _ = sigint.recv() => return Ok(()),
    }

    let shutdown = CancellationToken::new();
    let mut tasks: JoinSet<Result<(), RunError>> = JoinSet::new();
    let mut parts = Parts::new();
    spawn(
        &mut tasks,
        &mut parts,
        "node heartbeat",
        crate::node::run(ctx.clone(), shutdown.clone()),
    );
    spawn(
        &mut tasks,
        &mut parts,
        "scheduler",
        crate::schedule::run(ctx.clone(), shutdown.clone()),
    );
    spawn(
        &mut tasks,
        &mut parts,
        "provisioner",
        crate::provision::run(ctx.clone(), shutdown.clone()),
    );
    // The Pod worker last: on the shutdown it stops every container, and the wait below
    // waits for that.
    spawn(
        &mut tasks,
        &mut parts,
        "Pod worker",
        crate::pod::run(ctx.clone(), programs, shutdown.clone()),
    );
    info!("running: Nodes, scheduler, provisioner, Pods");

    let mut failure = None;
    tokio::select! {
        _ = sigterm.recv() => info!("SIGTERM: stopping"),
        _ = sigint.recv() => info!("SIGINT: stopping"),
        Some(joined) = tasks.join_next_with_id() => {
            let e = ended(joined, &parts);
            error!("{e}: stopping the rest");
            failure = Some(e);
        }
    }
    shutdown.cancel();
    while let Some(joined) = tasks.join_next_with_id().await {
        match joined {
            Ok((_, Ok(()))) => {}
            Ok((id, Err(e))) => warn!("the {} stopped with an error: {e}", part(&parts, id)),
            Err(e) => warn!("the {} panicked while stopping: {e}", part(&parts, e.id())),
        }
    }
    info!("stopped");
    failure.map_or(Ok(()), Err)
}

fn signal(
    kind: tokio::signal::unix::SignalKind,
    name: &'static str,
) -> Result<tokio::signal::unix::Signal, RunError> {
    tokio::signal::unix::signal(kind).map_err(|source| RunError::Signal {
        signal: name,
        source,
    })
}

type Parts = HashMap<tokio::task::Id, &'static str>;

fn spawn<F, E>(
    tasks: &mut JoinSet<Result<(), RunError>>,
    parts: &mut Parts,
    part: &'static str,
    f: F,
) where
    F: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<RunError>,
{
    let handle = tasks.spawn(async move { f.await.map_err(Into::into) });
    parts.insert(handle.id(), part);
}

fn part(parts: &Parts, id: tokio::task::Id) -> &'static str {
    parts.get(&id).copied().unwrap_or("runner")
}

/// A task that finished before the shutdown: always a failure of the runner.
fn ended(
    joined: Result<(tokio::task::Id, Result<(), RunError>), tokio::task::JoinError>,
    parts: &Parts,
) -> RunError {
    match joined {
        Ok((id, Ok(()))) => RunError::Ended(part(parts, id)),
        Ok((_, Err(e))) => e,
        Err(source) => RunError::Panicked {
            part: part(parts, source.id()),
            source,
        },
    }
}
