//! The set of servers of the process (metrics, health probes, webhooks), started in the order
//! that makes `/readyz` truthful and stopped together, so that one failing stops the process
//! instead of leaving a pod that looks alive but does not answer admission requests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum_server::Handle;
use axum_server::accept::DefaultAcceptor;
use axum_server::tls_rustls::RustlsAcceptor;
use moco_api::admission::ClusterLookup;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::config::ServeConfig;
use crate::error::ControllerError;
use crate::health::{Readiness, health_router};
use crate::metrics::{Metrics, metrics_router};
use crate::webhook::{WebhookState, webhook_router};
use moco_http::limits::{ServerLimits, limit_requests, limited_server};
use moco_http::listen::bind;
use moco_http::tls::{CERT_FILE, KEY_FILE, spawn_reloader, tls_config};

/// How long in-flight requests may take to finish once shutdown starts (the manifests give the
/// pod 10 seconds).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What a server task reports when it ends: which server, where, and how.
type TaskEnd = (&'static str, SocketAddr, std::io::Result<()>);

/// The running servers.
#[derive(Debug)]
pub struct Servers {
    webhook_addr: SocketAddr,
    health_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    readiness: Arc<Readiness>,
    webhook_handle: Handle<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<TaskEnd>,
    reloader: JoinHandle<()>,
    metrics: Arc<Metrics>,
}

impl Servers {
    /// Starts the servers with the webhooks answering from `lookup` and the operating system's
    /// random numbers (see [`Servers::start_with`]).
    pub async fn start<L: ClusterLookup>(
        config: &ServeConfig,
        lookup: L,
    ) -> Result<Self, ControllerError> {
        Self::start_with(config, WebhookState::new(lookup)).await
    }

    /// Starts the metrics and health servers, loads the certificate, then serves the webhooks
    /// with `webhooks`; `/readyz` turns ready when the webhook server is listening. On error,
    /// whatever was started is stopped.
    pub async fn start_with<L: ClusterLookup>(
        config: &ServeConfig,
        webhooks: WebhookState<L>,
    ) -> Result<Self, ControllerError> {
        let readiness = Arc::new(Readiness::new());
        let metrics = Arc::new(Metrics::new(&config.namespace));
        let (stop, _) = watch::channel(false);
        // Dropping the JoinSet on an early return aborts the servers already started.
        let mut tasks = JoinSet::new();

        let metrics_addr = match bind("--metrics-addr", &config.metrics_addr).await? {
            Some((listener, addr)) => {
                let router = metrics_router(metrics.clone());
                let limits = &config.probe_limits;
                spawn_http(&mut tasks, "metrics", addr, listener, router, limits, &stop);
                Some(addr)
            }
            None => None,
        };
        let health_addr = match bind("--health-probe-addr", &config.health_addr).await? {
            Some((listener, addr)) => {
                let router = health_router(readiness.clone());
                let limits = &config.probe_limits;
                spawn_http(
                    &mut tasks,
                    "health probe",
                    addr,
                    listener,
                    router,
                    limits,
                    &stop,
                );
                Some(addr)
            }
            None => None,
        };

        let cert = config.cert_dir.join(CERT_FILE);
        let key = config.cert_dir.join(KEY_FILE);
        let tls = tls_config(&cert, &key)
            .await
            .map_err(|source| ControllerError::Certificate {
                dir: config.cert_dir.clone(),
                source,
            })?;
        let Some((listener, webhook_addr)) = bind("--webhook-addr", &config.webhook_addr).await?
        else {
            return Err(ControllerError::WebhookDisabled);
        };
        let webhook_handle = Handle::new();
        let limits = &config.webhook_limits;
        let tls_acceptor =
            RustlsAcceptor::new(tls.clone()).handshake_timeout(limits.handshake_timeout);
        let server = limited_server(listener, tls_acceptor, limits).handle(webhook_handle.clone());
        let app = limit_requests(webhook_router(Arc::new(webhooks), metrics.clone()), limits);
        tasks.spawn(async move {
            let result = server.serve(app.into_make_service()).await;
            ("webhook", webhook_addr, result)
        });
        let reloader = spawn_reloader(tls, cert, key, config.cert_reload_interval);
        let mut servers = Servers {
            webhook_addr,
            health_addr,
            metrics_addr,
            readiness,
            webhook_handle,
            stop,
            tasks,
            reloader,
            metrics,
        };
        if servers.webhook_handle.listening().await.is_none() {
            let error = servers.failed().await;
            servers.reloader.abort();
            return Err(error);
        }
        servers.readiness.set_webhook_serving(true);
        Ok(servers)
    }

    /// The metrics the servers expose (reconcile adds to them).
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Where the webhooks are served.
    pub fn webhook_addr(&self) -> SocketAddr {
        self.webhook_addr
    }

    /// Where the health probes are served, unless disabled.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health_addr
    }

    /// Where the metrics are served, unless disabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Waits until a server stops on its own and says why (never returns while all serve).
    pub async fn failed(&mut self) -> ControllerError {
        let error = match self.tasks.join_next().await {
            Some(Ok((server, addr, Err(source)))) => ControllerError::Serve {
                server,
                addr,
                source,
            },
            Some(Ok((server, addr, Ok(())))) => ControllerError::Stopped { server, addr },
            Some(Err(e)) => ControllerError::Task(e.to_string()),
            None => std::future::pending().await,
        };
        self.readiness.set_webhook_serving(false);
        error
    }

    /// Stops serving: `/readyz` fails at once, in-flight requests get [`SHUTDOWN_GRACE`] to
    /// finish (servers still busy a second later are aborted). Returns the first error a
    /// server reported.
    pub async fn shutdown(mut self) -> Result<(), ControllerError> {
        self.readiness.set_shutting_down();
        self.stop.send_replace(true);
        self.webhook_handle.graceful_shutdown(Some(SHUTDOWN_GRACE));
        self.reloader.abort();
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE + Duration::from_secs(1);
        let mut first_error = None;
        loop {
            let end = match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                Ok(Some(end)) => end,
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(
                        servers = self.tasks.len(),
                        "servers still busy after the grace period; aborting them"
                    );
                    self.tasks.abort_all();
                    break;
                }
            };
            let error = match end {
                Ok((_, _, Ok(()))) => continue,
                Ok((server, addr, Err(source))) => ControllerError::Serve {
                    server,
                    addr,
                    source,
                },
                Err(e) => ControllerError::Task(e.to_string()),
            };
            first_error.get_or_insert(error);
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Serves `router` over plain HTTP on `listener` with `limits` until `stop` turns true;
/// requests in flight then get [`SHUTDOWN_GRACE`].
fn spawn_http(
    tasks: &mut JoinSet<TaskEnd>,
    server: &'static str,
    addr: SocketAddr,
    listener: TcpListener,
    router: Router,
    limits: &ServerLimits,
    stop: &watch::Sender<bool>,
) {
    let mut stopped = stop.subscribe();
    let handle = Handle::new();
    let http = limited_server(listener, DefaultAcceptor::new(), limits).handle(handle.clone());
    let app = limit_requests(router, limits);
    tokio::spawn(async move {
        let _ = stopped.wait_for(|stop| *stop).await;
        handle.graceful_shutdown(Some(SHUTDOWN_GRACE));
    });
    tasks.spawn(async move {
        let result = http.serve(app.into_make_service()).await;
        (server, addr, result)
    });
}
