//! `moco agent`, the sidecar: first start, the probes, the clone service, slow-log rotation
//! and metrics, each on its own listener with the bounds of [`moco_http::limits`].

pub mod clone;
pub mod config;
pub mod credentials;
pub mod metrics;
pub mod peers;
pub mod probes;
pub mod readiness;
pub mod restore;
pub mod rotation;
pub mod start;
pub mod state;
pub mod tls_reload;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum_server::Handle;
use axum_server::accept::DefaultAcceptor;
use axum_server::tls_rustls::RustlsConfig;
use moco_adapters::mysqld::find_program;
use moco_core::moco_accounts::Account;
use moco_http::limits::{PROBE_LIMITS, ServerLimits, limit_requests, limited_server};
use moco_http::listen::bind;
use moco_http::tls::{
    MtlsAcceptor, PeerIdentity, load_identity, mtls_client_config, mtls_server_config,
    spawn_reloader_with,
};

use self::config::AgentArgs;
use self::metrics::{AgentMetrics, metrics_router};
use self::readiness::ReadinessLimits;
use self::state::{AgentState, BackupTools, credentials, on_socket};
use crate::api::CloneStatus;
use crate::client::AgentClient;
use crate::error::AgentError;
use crate::layout::DataVolume;
use crate::pod;

/// The clone port: only clients with a certificate of the cluster's CA get past the
/// handshake, and a backup streams for as long as the data takes, so a connection may stay
/// silent (the client sends nothing while it receives, or while its restore is prepared)
/// for a day. A restore's body is not bounded by `max_body_bytes`: it goes to the tools as
/// it arrives, never into memory.
pub const AGENT_LIMITS: ServerLimits = ServerLimits {
    max_connections: 16,
    max_connections_per_client: 4,
    handshake_timeout: Duration::from_secs(5),
    header_timeout: Duration::from_secs(5),
    request_timeout: Duration::from_secs(24 * 3600),
    max_body_bytes: 64 * 1024,
};

/// How often the certificate is re-read.
const CERT_RELOAD: Duration = Duration::from_secs(60);

/// The certificate files in `--grpc-cert-dir`.
pub fn cert_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"))
}

/// The running agent's addresses.
#[derive(Debug, Clone, Copy)]
pub struct AgentAddrs {
    /// The clone service.
    pub agent: Option<SocketAddr>,
    /// The probes.
    pub probe: Option<SocketAddr>,
    /// The metrics.
    pub metrics: Option<SocketAddr>,
}

/// Builds the shared state from the flags and the environment.
pub fn state(args: &AgentArgs) -> Result<Arc<AgentState>, AgentError> {
    let index = pod::ordinal(&args.pod_name)?;
    let passwords = pod::passwords()?;
    let metrics = Arc::new(AgentMetrics::new(&args.cluster_name, index));
    let (cert, key, ca) = cert_files(&args.grpc_cert_dir);
    let (client, cluster_dns_name) = if cert.exists() {
        let client = AgentClient::new(
            mtls_client_config(&cert, &key, &ca)?,
            Duration::from_secs(30),
        );
        let (chain, _) = load_identity(&cert, &key)?;
        let own = chain
            .first()
            .map(PeerIdentity::from_certificate)
            .unwrap_or_default();
        let name = peers::cluster_dns_name(&own.dns_names, &args.cluster_name);
        if name.is_none() {
            tracing::warn!(
                cert = %cert.display(),
                cluster = %args.cluster_name,
                names = ?own.dns_names,
                "the agent's certificate names no Pod of this cluster (*.moco-<cluster>.<namespace>.svc): \
                 only the controller may pull or push copies"
            );
        }
        (Some(client), name)
    } else {
        (None, None)
    };
    let tools = match (
        find_program(&["mariadb-backup", "mariabackup"]),
        find_program(&["mbstream"]),
    ) {
        (Some(backup), Some(mbstream)) => Some(BackupTools { backup, mbstream }),
        _ => None,
    };
    let call = args.read_timeout;
    let agent = on_socket(
        &args.socket_path,
        &credentials(Account::Agent, &passwords),
        args.connection_timeout,
        call,
    );
    let admin = on_socket(
        &args.socket_path,
        &credentials(Account::Admin, &passwords),
        args.connection_timeout,
        call,
    );
    let mysql_tls = args
        .mysql_tls_ca
        .as_deref()
        .map(moco_adapters::mysql::tls::CaFile::read)
        .transpose()
        .map_err(|e| AgentError::invalid("--mysql-tls-ca", e.to_string()))?;
    Ok(Arc::new(AgentState {
        agent: Arc::new(agent),
        admin: Arc::new(admin),
        passwords: std::sync::RwLock::new(passwords),
        volume: DataVolume::new(&args.data_dir),
        defaults_file: args.defaults_file.clone(),
        mysqld_port: args.mysqld_port,
        mysql_tls,
        socket: args.socket_path.clone(),
        tools,
        client,
        controller_name: args.controller_name.clone(),
        cluster_dns_name,
        readiness: ReadinessLimits {
            max_delay: args.max_delay,
            queueing_wait: args.transaction_queueing_wait,
        },
        metrics,
        clone: Mutex::new(CloneStatus::default()),
        busy: Arc::new(tokio::sync::Semaphore::new(1)),
        log_dir: std::env::temp_dir(),
    }))
}

/// Runs the agent until `shutdown` resolves; `ready` gets the bound addresses once every
/// listener is up.
pub async fn run(
    args: &AgentArgs,
    shutdown: impl Future<Output = ()>,
    ready: Option<tokio::sync::oneshot::Sender<AgentAddrs>>,
) -> Result<(), AgentError> {
    let schedule = moco_core::validate::cron::parse_standard(&args.log_rotation_schedule)
        .map_err(|e| AgentError::invalid("--log-rotation-schedule", e.to_string()))?;
    let state = state(args)?;
    start::load_clone_result(&state);

    let mut handles = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    let plain =
        |listener, router: Router, limits: &ServerLimits, handles: &mut Vec<Handle<SocketAddr>>| {
            let handle = Handle::new();
            handles.push(handle.clone());
            let server = limited_server(listener, DefaultAcceptor::new(), limits).handle(handle);
            let app = limit_requests(router, limits);
            async move { server.serve(app.into_make_service()).await }
        };
    let mut addrs = AgentAddrs {
        agent: None,
        probe: None,
        metrics: None,
    };
    if let Some((listener, addr)) = bind("--probe-address", &args.probe_address).await? {
        let router = probes::probe_router(state.clone());
        tasks.spawn(plain(listener, router, &PROBE_LIMITS, &mut handles));
        addrs.probe = Some(addr);
    }
    if let Some((listener, addr)) = bind("--metrics-address", &args.metrics_address).await? {
        let router = metrics_router(state.metrics.clone());
        tasks.spawn(plain(listener, router, &PROBE_LIMITS, &mut handles));
        addrs.metrics = Some(addr);
    }
    let (cert, key, ca) = cert_files(&args.grpc_cert_dir);
    let tls = RustlsConfig::from_config(Arc::new(mtls_server_config(&cert, &key, &ca)?));
    let reloader = spawn_reloader_with(tls.clone(), CERT_RELOAD, move || {
        mtls_server_config(&cert, &key, &ca)
    });
    if let Some((listener, addr)) = bind("--address", &args.address).await? {
        let handle = Handle::new();
        handles.push(handle.clone());
        let acceptor = MtlsAcceptor::new(tls, AGENT_LIMITS.handshake_timeout);
        let server = limited_server(listener, acceptor, &AGENT_LIMITS).handle(handle);
        let routes = clone::clone_router(state.clone())
            .merge(restore::restore_router(state.clone()))
            .merge(credentials::credentials_router(state.clone()));
        let app = limit_requests(routes, &AGENT_LIMITS);
        tasks.spawn(async move { server.serve(app.into_make_service()).await });
        addrs.agent = Some(addr);
    }

    let starter = {
        let state = state.clone();
        tokio::spawn(async move {
            match start::first_start(&state).await {
                Ok(outcome) => tracing::info!(?outcome, "first start checked"),
                Err(e) => tracing::error!(error = %e, "first start failed"),
            }
            if let Err(e) = start::seed_copy(&state).await {
                tracing::error!(error = %e, "seeding the copy failed");
                clone::fail_clone(&state, &e.to_string());
            }
        })
    };
    let rotator = tokio::spawn(rotation::run(
        rotation::Rotation {
            log: args.slow_log.clone(),
            schedule,
            max_size: args.log_rotation_size,
        },
        state.agent.clone(),
        state.metrics.clone(),
    ));
    let tls_reloader = args.mysql_tls_ca.as_ref().map(|ca| {
        let dir = ca.parent().map(Path::to_path_buf).unwrap_or_default();
        tokio::spawn(tls_reload::run(
            dir,
            args.mysql_tls_check_interval,
            state.admin.clone(),
        ))
    });
    let role_keeper = tokio::spawn(crate::role::keep_replica_role(
        state.agent.clone(),
        args.conf_dir.join("my.cnf"),
    ));
    if let Some(tx) = ready {
        let _ = tx.send(addrs);
    }
    tracing::info!(?addrs, "agent serving");
    let outcome = tokio::select! {
        () = shutdown => Ok(()),
        Some(ended) = tasks.join_next() => Err(AgentError::invalid(
            "server",
            format!("a listener stopped: {ended:?}"),
        )),
    };
    for h in handles {
        h.graceful_shutdown(Some(Duration::from_secs(5)));
    }
    starter.abort();
    rotator.abort();
    role_keeper.abort();
    reloader.abort();
    if let Some(t) = tls_reloader {
        t.abort();
    }
    while tasks.join_next().await.is_some() {}
    outcome
}
