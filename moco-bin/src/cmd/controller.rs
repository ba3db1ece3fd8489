//! `moco controller`: the process the install manifests run (`deploy/`, `charts/moco/`), with
//! MOCO's `moco-controller` flags.
//!
//! What it serves today:
//!
//! * the admission webhooks of `moco_api::server` over HTTPS on `--webhook-addr`, with the
//!   certificate and key from `--cert-dir` (re-read every minute), facts looked up from the API
//!   server through [`KubeLookup`];
//! * `/healthz` and `/readyz` on `--health-probe-addr` (ready once the certificate is loaded and
//!   the webhook listener is bound, not ready again once shutdown starts);
//! * `/metrics` on `--metrics-addr` in the Prometheus text format.
//!
//! It does not reconcile MySQLClusters yet: no StatefulSets, Services or ConfigMaps are written
//! and the clustering manager does not run against Kubernetes (it runs today in `moco local`).
//! The flags that only configure reconciliation are accepted for compatibility and logged.
//!
//! The servers can be started on their own with any [`ClusterLookup`] ([`Servers::start`]), which
//! is how the tests run them without an API server.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum_server::Handle;
use axum_server::tls_rustls::RustlsAcceptor;
use moco_api::admission::{ClusterLookup, KubeLookup};
use moco_api::labels::{
    PATH_MUTATE_MYSQLCLUSTER, PATH_VALIDATE_BACKUPPOLICY, PATH_VALIDATE_MYSQLCLUSTER,
};
use moco_api::server::{ServerError, WebhookState, router, spawn_reloader, tls_config};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The webhook paths served (and counted in the metrics).
pub const WEBHOOK_PATHS: [&str; 3] = [
    PATH_MUTATE_MYSQLCLUSTER,
    PATH_VALIDATE_BACKUPPOLICY,
    PATH_VALIDATE_MYSQLCLUSTER,
];

/// How often the webhook certificate and key are re-read from `--cert-dir`.
pub const CERT_RELOAD_INTERVAL: Duration = Duration::from_secs(60);

/// How long in-flight requests may take to finish after SIGTERM/SIGINT (the manifests give the
/// pod 10 seconds).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Largest webhook response the metrics middleware reads to classify the answer.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Arguments of `moco controller`: the flags of MOCO's `moco-controller`.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Listen address of the Prometheus metrics endpoint (`/metrics`); `0` disables it.
    #[arg(long, value_name = "ADDR", default_value = ":8080", value_parser = parse_listen_addr)]
    pub metrics_addr: ListenAddr,
    /// Listen address of the health probes (`/healthz`, `/readyz`); `0` disables them.
    #[arg(long, value_name = "ADDR", default_value = ":8081", value_parser = parse_listen_addr)]
    pub health_probe_addr: ListenAddr,
    /// Listen address of the HTTPS admission webhooks.
    #[arg(long, value_name = "ADDR", default_value = ":9443", value_parser = parse_listen_addr)]
    pub webhook_addr: ListenAddr,
    /// Directory with the webhook certificate `tls.crt` and key `tls.key` (re-read every
    /// minute); empty means `$TMPDIR/k8s-webhook-server/serving-certs`, as in MOCO.
    #[arg(long, value_name = "DIR", default_value = "")]
    pub cert_dir: String,
    /// Development logging defaults: console encoder, debug level.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub zap_devel: bool,
    /// Log encoding: `json` (default) or `console`.
    #[arg(long, value_name = "ENCODER", value_parser = parse_zap_encoder)]
    pub zap_encoder: Option<LogEncoder>,
    /// Log level: `debug`, `info` (default), `error`, or an integer > 0 for more verbosity.
    /// The `MOCO_LOG` environment variable (a tracing filter) overrides it.
    #[arg(long, value_name = "LEVEL", value_parser = parse_zap_level)]
    pub zap_log_level: Option<tracing::Level>,
    /// MOCO flags this build accepts without using them (they configure reconciliation, pprof,
    /// leader election or klog); logged at startup.
    #[command(flatten)]
    pub compat: Box<CompatFlags>,
}

/// Flags of MOCO's `moco-controller` that this build accepts for compatibility and does not use:
/// reconciliation is not implemented yet.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Accepted for compatibility with MOCO, unused by this build")]
pub struct CompatFlags {
    /// MOCO: listen address of the pprof endpoints. Accepted; this build serves no pprof.
    #[arg(long, value_name = "ADDR", default_value = "")]
    pub pprof_addr: String,
    /// MOCO: name of the leader-election Lease. Accepted; this build elects no leader, every
    /// replica serves the webhooks and nothing reconciles.
    #[arg(long, value_name = "ID", default_value = "moco")]
    pub leader_election_id: String,
    /// MOCO: directory of the gRPC client certificate for moco-agent. Accepted, unused.
    #[arg(long, value_name = "DIR", default_value = "/grpc-cert")]
    pub grpc_cert_dir: PathBuf,
    /// MOCO: image of the moco-agent sidecar. Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "IMAGE")]
    pub agent_image: Option<String>,
    /// MOCO: image of the moco-backup container. Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "IMAGE")]
    pub backup_image: Option<String>,
    /// MOCO: image of the fluent-bit sidecar. Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "IMAGE")]
    pub fluent_bit_image: Option<String>,
    /// MOCO: image of the mysqld_exporter sidecar. Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "IMAGE")]
    pub mysqld_exporter_image: Option<String>,
    /// MOCO: annotation keys synced from volumeClaimTemplates to PVCs (comma-separated,
    /// repeatable). Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub pvc_sync_annotation_keys: Vec<String>,
    /// MOCO: label keys synced from volumeClaimTemplates to PVCs (comma-separated,
    /// repeatable). Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub pvc_sync_label_keys: Vec<String>,
    /// MOCO: interval of cluster maintenance (Go duration: `1m`, `30s`, `1h30m`). Accepted,
    /// unused until reconciliation exists.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_go_duration)]
    pub check_interval: Duration,
    /// MOCO: maximum concurrent reconciles. Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_concurrent_reconciles: u32,
    /// MOCO: my.cnf ConfigMaps kept per cluster. Accepted, unused until reconciliation exists.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub mysql_configmap_history_limit: i32,
    /// MOCO: minimum interval between StatefulSet partition updates (Go duration). Accepted,
    /// unused until reconciliation exists.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_go_duration)]
    pub partition_update_interval: Duration,
    /// MOCO: do not inject the default securityContext (`--flag` or `--flag=true|false`).
    /// Accepted, unused until reconciliation exists.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value = "false",
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub disable_default_security_context: bool,
    /// MOCO: maximum queries per second to the API server (burst 1.5×). Accepted, unused: the
    /// webhooks issue at most one list per request.
    #[arg(long, value_name = "QPS", default_value_t = 20)]
    pub apiserver_qps_throttle: u32,
    /// MOCO: level at which zap captures stack traces. Accepted, ignored.
    #[arg(long, value_name = "LEVEL")]
    pub zap_stacktrace_level: Option<String>,
    /// MOCO: zap time encoding. Accepted, ignored (timestamps are RFC 3339).
    #[arg(long, value_name = "ENCODING")]
    pub zap_time_encoding: Option<String>,
    /// MOCO: klog verbosity (client-go logs). Accepted, ignored: there is no klog here.
    #[arg(short = 'v', long = "v", value_name = "LEVEL")]
    pub klog_verbosity: Option<u32>,
    /// MOCO: klog per-file verbosity. Accepted, ignored.
    #[arg(long, value_name = "SPEC")]
    pub vmodule: Option<String>,
    /// MOCO: klog stack trace location. Accepted, ignored.
    #[arg(long = "log_backtrace_at", value_name = "FILE:N")]
    pub log_backtrace_at: Option<String>,
}

/// A listen address as MOCO's flags take it: `:8080` (every interface), `host:port`,
/// `[v6]:port`, or `0` (disabled; for `--metrics-addr` and `--health-probe-addr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// Not served.
    Disabled,
    /// Every interface (IPv6 and IPv4 where available, IPv4 otherwise).
    AllInterfaces(u16),
    /// An IP literal.
    Socket(SocketAddr),
    /// A host name, resolved when binding.
    Host(String, u16),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Disabled => f.write_str("0 (disabled)"),
            ListenAddr::AllInterfaces(port) => write!(f, ":{port}"),
            ListenAddr::Socket(addr) => write!(f, "{addr}"),
            ListenAddr::Host(host, port) => write!(f, "{host}:{port}"),
        }
    }
}

/// Parses a listen address (see [`ListenAddr`]).
pub fn parse_listen_addr(text: &str) -> Result<ListenAddr, String> {
    let t = text.trim();
    if t.is_empty() || t == "0" {
        return Ok(ListenAddr::Disabled);
    }
    if let Ok(addr) = SocketAddr::from_str(t) {
        return Ok(ListenAddr::Socket(addr));
    }
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(format!(
            "{text:?}: expected HOST:PORT or :PORT (e.g. :8080), or 0 to disable"
        ));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{text:?}: {port:?} is not a port number"))?;
    if host.is_empty() {
        return Ok(ListenAddr::AllInterfaces(port));
    }
    if host.contains(':') || host.starts_with('[') {
        return Err(format!(
            "{text:?}: an IPv6 address must be written in brackets, e.g. [::1]:8080"
        ));
    }
    Ok(ListenAddr::Host(host.to_owned(), port))
}

/// Parses a Go duration (`300ms`, `1.5h`, `2h45m`, `0`); negative durations are refused.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.starts_with('-') {
        return Err(format!("{text:?}: a negative duration is not allowed"));
    }
    if t.is_empty() {
        return Err(format!(
            "{text:?}: expected a duration like 30s, 1m or 1h30m"
        ));
    }
    let mut rest = t;
    let mut seconds = 0.0_f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{text:?}: expected a duration like 30s, 1m or 1h30m"))?;
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("{text:?}: missing unit after {number}")),
            other => {
                return Err(format!(
                    "{text:?}: unknown unit {other:?} (use ns, us, ms, s, m or h)"
                ));
            }
        };
        seconds += value * scale;
        rest = after;
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// Parses a Go boolean (`strconv.ParseBool`: `1 t T TRUE true True 0 f F FALSE false False`).
pub fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{text:?}: expected true or false")),
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEncoder {
    /// One JSON object per line (MOCO's production default).
    Json,
    /// Human-readable lines.
    Console,
}

/// Parses `--zap-encoder`.
pub fn parse_zap_encoder(text: &str) -> Result<LogEncoder, String> {
    match text {
        "json" => Ok(LogEncoder::Json),
        "console" => Ok(LogEncoder::Console),
        _ => Err(format!("{text:?}: expected json or console")),
    }
}

/// Parses `--zap-log-level`: `debug`, `info`, `error`, or an integer > 0 (1 is debug, more is
/// trace).
pub fn parse_zap_level(text: &str) -> Result<tracing::Level, String> {
    match text.to_ascii_lowercase().as_str() {
        "debug" => Ok(tracing::Level::DEBUG),
        "info" => Ok(tracing::Level::INFO),
        "error" => Ok(tracing::Level::ERROR),
        other => match other.parse::<u32>() {
            Ok(1) => Ok(tracing::Level::DEBUG),
            Ok(n) if n > 1 => Ok(tracing::Level::TRACE),
            _ => Err(format!(
                "{text:?}: expected debug, info, error or an integer > 0"
            )),
        },
    }
}

/// Errors of `moco controller`.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// `POD_NAMESPACE` is not set.
    #[error(
        "the environment variable POD_NAMESPACE is not set (or empty); moco controller needs the \
         namespace it runs in (the Deployment sets it from metadata.namespace)"
    )]
    MissingNamespace,
    /// No Kubernetes client configuration was found.
    #[error(
        "cannot configure a Kubernetes client: no in-cluster service account \
         (KUBERNETES_SERVICE_HOST) and no usable kubeconfig (KUBECONFIG or ~/.kube/config): {0}"
    )]
    KubeClient(#[source] kube::Error),
    /// `--webhook-addr` was `0`.
    #[error("--webhook-addr cannot be disabled: the webhooks are what this controller serves")]
    WebhookDisabled,
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A listener could not be bound.
    #[error("cannot listen on {flag} {addr}: {source}")]
    Bind {
        /// The flag naming the address.
        flag: &'static str,
        /// The address as given (or as resolved).
        addr: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// The webhook certificate could not be loaded.
    #[error("webhook certificate from --cert-dir {dir}: {source}")]
    Certificate {
        /// The certificate directory.
        dir: PathBuf,
        /// The load error (names the files).
        source: ServerError,
    },
    /// A server failed while running.
    #[error("{server} server on {addr}: {source}")]
    Serve {
        /// Which server (`webhook`, `health probe`, `metrics`).
        server: &'static str,
        /// Its address.
        addr: SocketAddr,
        /// The IO error.
        source: std::io::Error,
    },
    /// A server stopped although no shutdown was requested.
    #[error("{server} server on {addr} stopped unexpectedly")]
    Stopped {
        /// Which server.
        server: &'static str,
        /// Its address.
        addr: SocketAddr,
    },
    /// A server task panicked or was cancelled.
    #[error("a server task ended abnormally: {0}")]
    Task(String),
}

/// The namespace from the value of `POD_NAMESPACE`.
pub fn pod_namespace(value: Option<std::ffi::OsString>) -> Result<String, ControllerError> {
    match value.and_then(|v| v.into_string().ok()) {
        Some(ns) if !ns.trim().is_empty() => Ok(ns.trim().to_owned()),
        _ => Err(ControllerError::MissingNamespace),
    }
}

/// Addresses and certificates of the servers.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The controller's namespace (`POD_NAMESPACE`), reported in `moco_controller_info`.
    pub namespace: String,
    /// HTTPS webhooks.
    pub webhook_addr: ListenAddr,
    /// `/healthz` and `/readyz`.
    pub health_addr: ListenAddr,
    /// `/metrics`.
    pub metrics_addr: ListenAddr,
    /// Directory with `tls.crt` and `tls.key`.
    pub cert_dir: PathBuf,
    /// How often the certificate is re-read.
    pub cert_reload_interval: Duration,
}

impl ServeConfig {
    /// The configuration the flags describe.
    pub fn from_args(args: &ControllerArgs, namespace: String) -> Self {
        ServeConfig {
            namespace,
            webhook_addr: args.webhook_addr.clone(),
            health_addr: args.health_probe_addr.clone(),
            metrics_addr: args.metrics_addr.clone(),
            cert_dir: cert_dir(&args.cert_dir),
            cert_reload_interval: CERT_RELOAD_INTERVAL,
        }
    }
}

/// `--cert-dir`, or controller-runtime's default when empty.
pub fn cert_dir(flag: &str) -> PathBuf {
    if flag.is_empty() {
        std::env::temp_dir()
            .join("k8s-webhook-server")
            .join("serving-certs")
    } else {
        PathBuf::from(flag)
    }
}

/// How a webhook request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WebhookResult {
    /// Answered with `allowed: true`.
    Allowed,
    /// Answered with `allowed: false` by a rule.
    Denied,
    /// Not decided: no AdmissionReview in the answer (undecodable request), or a refusal because
    /// a lookup failed (status code 5xx).
    Error,
}

impl WebhookResult {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookResult::Allowed => "allowed",
            WebhookResult::Denied => "denied",
            WebhookResult::Error => "error",
        }
    }

    const ALL: [WebhookResult; 3] = [
        WebhookResult::Allowed,
        WebhookResult::Denied,
        WebhookResult::Error,
    ];
}

/// The controller's metrics.
#[derive(Debug)]
pub struct Metrics {
    namespace: String,
    by_result: Mutex<BTreeMap<(&'static str, WebhookResult), u64>>,
    by_code: Mutex<BTreeMap<(&'static str, u16), u64>>,
}

impl Metrics {
    /// Metrics of a controller running in `namespace`; the webhook counters start at zero.
    pub fn new(namespace: &str) -> Self {
        let by_result = WEBHOOK_PATHS
            .iter()
            .flat_map(|p| WebhookResult::ALL.iter().map(move |r| ((*p, *r), 0)))
            .collect();
        Metrics {
            namespace: namespace.to_owned(),
            by_result: Mutex::new(by_result),
            by_code: Mutex::new(BTreeMap::new()),
        }
    }

    /// Counts one request to a webhook path; other paths are not counted.
    pub fn record(&self, path: &str, result: WebhookResult, code: u16) {
        let Some(path) = WEBHOOK_PATHS.iter().find(|p| **p == path) else {
            return;
        };
        *self
            .by_result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((path, result))
            .or_default() += 1;
        *self
            .by_code
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((path, code))
            .or_default() += 1;
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP moco_controller_info Build and mode of the moco-rs controller; always 1. \
             reconciliation=\"none\": this build serves the admission webhooks only.\n\
             # TYPE moco_controller_info gauge\n",
        );
        out.push_str(&format!(
            "moco_controller_info{{version=\"{}\",namespace=\"{}\",reconciliation=\"none\"}} 1\n",
            escape_label(env!("CARGO_PKG_VERSION")),
            escape_label(&self.namespace)
        ));
        out.push_str(
            "# HELP moco_controller_webhook_requests_total Admission requests by webhook path and \
             result (allowed, denied, error).\n\
             # TYPE moco_controller_webhook_requests_total counter\n",
        );
        for ((path, result), n) in self
            .by_result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            out.push_str(&format!(
                "moco_controller_webhook_requests_total{{path=\"{}\",result=\"{}\"}} {n}\n",
                escape_label(path),
                result.as_str()
            ));
        }
        out.push_str(
            "# HELP controller_runtime_webhook_requests_total Total number of admission requests \
             by HTTP status code.\n\
             # TYPE controller_runtime_webhook_requests_total counter\n",
        );
        for ((path, code), n) in self
            .by_code
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            out.push_str(&format!(
                "controller_runtime_webhook_requests_total{{code=\"{code}\",webhook=\"{}\"}} {n}\n",
                escape_label(path)
            ));
        }
        out
    }
}

/// Escapes a Prometheus label value.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Readiness of the controller: ready once the webhook certificate is loaded and its listener
/// serves, not ready once shutdown starts.
#[derive(Debug, Default)]
pub struct Readiness {
    webhook_serving: AtomicBool,
    shutting_down: AtomicBool,
}

impl Readiness {
    /// Not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.webhook_serving.load(Ordering::SeqCst) && !self.shutting_down.load(Ordering::SeqCst)
    }

    /// Marks the webhook server as serving.
    pub fn set_webhook_serving(&self, serving: bool) {
        self.webhook_serving.store(serving, Ordering::SeqCst);
    }

    /// Marks the start of shutdown.
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }
}

/// `/healthz` (the process serves) and `/readyz` (see [`Readiness`]).
pub fn health_router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(readiness): State<Arc<Readiness>>| async move {
                if readiness.is_ready() {
                    (StatusCode::OK, "ok")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: the webhook server is not serving",
                    )
                }
            }),
        )
        .with_state(readiness)
}

/// `/metrics` in the Prometheus text format.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(metrics): State<Arc<Metrics>>| async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    metrics.render(),
                )
            }),
        )
        .with_state(metrics)
}

/// The webhooks of `moco_api::server::router`, counted in `metrics`.
pub fn webhook_router<L: ClusterLookup>(lookup: L, metrics: Arc<Metrics>) -> Router {
    router(Arc::new(WebhookState::new(lookup))).layer(axum::middleware::from_fn_with_state(
        metrics,
        count_webhook_request,
    ))
}

async fn count_webhook_request(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if !WEBHOOK_PATHS.contains(&path.as_str()) {
        return response;
    }
    let status = response.status();
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_RESPONSE_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!(path, error = %e, "cannot read the webhook response");
            metrics.record(&path, WebhookResult::Error, 500);
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let result = classify(status, &bytes);
    metrics.record(&path, result, status.as_u16());
    tracing::debug!(
        path,
        status = status.as_u16(),
        result = result.as_str(),
        "admission request"
    );
    Response::from_parts(parts, Body::from(bytes))
}

/// Allowed/denied from the AdmissionReview in a successful response. A response that is not an
/// AdmissionReview, or a refusal with a 5xx status (a failed lookup), is an error.
fn classify(status: StatusCode, body: &[u8]) -> WebhookResult {
    if !status.is_success() {
        return WebhookResult::Error;
    }
    let Ok(review) = serde_json::from_slice::<serde_json::Value>(body) else {
        return WebhookResult::Error;
    };
    let code = review
        .pointer("/response/status/code")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    match review
        .pointer("/response/allowed")
        .and_then(serde_json::Value::as_bool)
    {
        Some(true) => WebhookResult::Allowed,
        Some(false) if code >= 500 => WebhookResult::Error,
        Some(false) => WebhookResult::Denied,
        None => WebhookResult::Error,
    }
}

/// Binds `addr` (`flag` names it in errors); `None` when disabled.
async fn bind(
    flag: &'static str,
    addr: &ListenAddr,
) -> Result<Option<TcpListener>, ControllerError> {
    let bind_error = |addr: String, source| ControllerError::Bind { flag, addr, source };
    let listener = match addr {
        ListenAddr::Disabled => return Ok(None),
        ListenAddr::Socket(a) => TcpListener::bind(a)
            .await
            .map_err(|e| bind_error(a.to_string(), e))?,
        ListenAddr::Host(host, port) => TcpListener::bind((host.as_str(), *port))
            .await
            .map_err(|e| bind_error(format!("{host}:{port}"), e))?,
        ListenAddr::AllInterfaces(port) => {
            // `[::]` accepts IPv4 too on dual-stack hosts; IPv4-only hosts get 0.0.0.0.
            match TcpListener::bind((Ipv6Addr::UNSPECIFIED, *port)).await {
                Ok(l) => l,
                Err(_) => TcpListener::bind((Ipv4Addr::UNSPECIFIED, *port))
                    .await
                    .map_err(|e| bind_error(format!(":{port}"), e))?,
            }
        }
    };
    Ok(Some(listener))
}

fn local_addr(
    flag: &'static str,
    requested: &ListenAddr,
    listener: &TcpListener,
) -> Result<SocketAddr, ControllerError> {
    listener
        .local_addr()
        .map_err(|source| ControllerError::Bind {
            flag,
            addr: requested.to_string(),
            source,
        })
}

/// What a server task reports when it ends.
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
    reloader: tokio::task::JoinHandle<()>,
}

impl Servers {
    /// Starts the metrics and health servers, loads the certificate, then serves the webhooks
    /// with `lookup`; `/readyz` turns ready when the webhook server is listening. On error,
    /// whatever was started is stopped.
    pub async fn start<L: ClusterLookup>(
        config: &ServeConfig,
        lookup: L,
    ) -> Result<Self, ControllerError> {
        let readiness = Arc::new(Readiness::new());
        let metrics = Arc::new(Metrics::new(&config.namespace));
        let (stop, _) = watch::channel(false);
        // Dropping the JoinSet on an early return aborts the servers already started.
        let mut tasks = JoinSet::new();

        let metrics_addr = match bind("--metrics-addr", &config.metrics_addr).await? {
            Some(listener) => {
                let addr = local_addr("--metrics-addr", &config.metrics_addr, &listener)?;
                spawn_http(
                    &mut tasks,
                    "metrics",
                    addr,
                    listener,
                    metrics_router(metrics.clone()),
                    &stop,
                );
                Some(addr)
            }
            None => None,
        };
        let health_addr = match bind("--health-probe-addr", &config.health_addr).await? {
            Some(listener) => {
                let addr = local_addr("--health-probe-addr", &config.health_addr, &listener)?;
                spawn_http(
                    &mut tasks,
                    "health probe",
                    addr,
                    listener,
                    health_router(readiness.clone()),
                    &stop,
                );
                Some(addr)
            }
            None => None,
        };

        let cert = config.cert_dir.join("tls.crt");
        let key = config.cert_dir.join("tls.key");
        let tls = tls_config(&cert, &key)
            .await
            .map_err(|source| ControllerError::Certificate {
                dir: config.cert_dir.clone(),
                source,
            })?;
        let Some(listener) = bind("--webhook-addr", &config.webhook_addr).await? else {
            return Err(ControllerError::WebhookDisabled);
        };
        let webhook_addr = local_addr("--webhook-addr", &config.webhook_addr, &listener)?;
        let webhook_handle = Handle::new();
        let server = axum_server::Server::<SocketAddr>::from_listener(listener)
            .acceptor(RustlsAcceptor::new(tls.clone()))
            .handle(webhook_handle.clone());
        let app = webhook_router(lookup, metrics);
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
        };
        if servers.webhook_handle.listening().await.is_none() {
            let error = servers.failed().await;
            servers.reloader.abort();
            return Err(error);
        }
        servers.readiness.set_webhook_serving(true);
        Ok(servers)
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

/// Serves `router` over plain HTTP on `listener` until `stop` turns true.
fn spawn_http(
    tasks: &mut JoinSet<TaskEnd>,
    server: &'static str,
    addr: SocketAddr,
    listener: TcpListener,
    router: Router,
    stop: &watch::Sender<bool>,
) {
    let mut stopped = stop.subscribe();
    tasks.spawn(async move {
        let result = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })
            .await;
        (server, addr, result)
    });
}

/// Runs `moco controller` until SIGTERM or SIGINT.
pub fn run(args: &ControllerArgs) -> Result<ExitCode, ControllerError> {
    init_logging(args);
    announce(args);
    let namespace = pod_namespace(std::env::var_os("POD_NAMESPACE"))?;
    if matches!(args.webhook_addr, ListenAddr::Disabled) {
        return Err(ControllerError::WebhookDisabled);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ControllerError::Runtime)?;
    runtime.block_on(serve_until_signal(args, namespace))
}

async fn serve_until_signal(
    args: &ControllerArgs,
    namespace: String,
) -> Result<ExitCode, ControllerError> {
    // kube's rustls needs a process-wide provider; installing fails only if one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = kube::Client::try_default()
        .await
        .map_err(ControllerError::KubeClient)?;
    let probe = client.clone();
    tokio::spawn(async move {
        match probe.apiserver_version().await {
            Ok(info) => tracing::info!(version = %info.git_version, "connected to the API server"),
            Err(e) => tracing::warn!(
                error = %e,
                "cannot reach the API server yet; webhooks needing lookups will deny until it answers"
            ),
        }
    });
    let config = ServeConfig::from_args(args, namespace);
    let mut servers = Servers::start(&config, KubeLookup::new(client)).await?;
    tracing::info!(
        namespace = %config.namespace,
        webhook = %servers.webhook_addr(),
        health = %servers.health_addr().map_or_else(|| "disabled".to_owned(), |a| a.to_string()),
        metrics = %servers.metrics_addr().map_or_else(|| "disabled".to_owned(), |a| a.to_string()),
        cert_dir = %config.cert_dir.display(),
        "serving the admission webhooks"
    );
    enum Outcome {
        Signal,
        Failed(ControllerError),
    }
    let outcome = tokio::select! {
        () = wait_for_signal() => Outcome::Signal,
        error = servers.failed() => Outcome::Failed(error),
    };
    match outcome {
        Outcome::Signal => {
            tracing::info!("signal received; shutting down");
            servers.shutdown().await?;
            tracing::info!("stopped");
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Failed(error) => {
            tracing::error!(error = %error, "a server failed; shutting down");
            if let Err(e) = servers.shutdown().await {
                tracing::warn!(error = %e, "while shutting down");
            }
            Err(error)
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Logging to standard error: JSON at info unless `--zap-devel`, `--zap-encoder`,
/// `--zap-log-level` or `MOCO_LOG` say otherwise.
fn init_logging(args: &ControllerArgs) {
    let default_level = args.zap_log_level.unwrap_or(if args.zap_devel {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    });
    let encoder = args.zap_encoder.unwrap_or(if args.zap_devel {
        LogEncoder::Console
    } else {
        LogEncoder::Json
    });
    let filter = tracing_subscriber::EnvFilter::try_from_env("MOCO_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(default_level.as_str().to_ascii_lowercase())
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match encoder {
        LogEncoder::Json => builder.json().try_init(),
        LogEncoder::Console => builder.with_ansi(false).try_init(),
    };
}

/// The startup notes: what this build does, and the flags it accepts without using.
fn announce(args: &ControllerArgs) {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        "moco controller starting. This build serves the admission webhooks only: reconciliation \
         of MySQLClusters on Kubernetes (StatefulSets, Services, ConfigMaps, the clustering \
         manager) is not implemented yet; the clustering engine runs today in `moco local`"
    );
    tracing::info!(
        leader_election_id = %args.compat.leader_election_id,
        grpc_cert_dir = %args.compat.grpc_cert_dir.display(),
        check_interval = ?args.compat.check_interval,
        max_concurrent_reconciles = args.compat.max_concurrent_reconciles,
        mysql_configmap_history_limit = args.compat.mysql_configmap_history_limit,
        partition_update_interval = ?args.compat.partition_update_interval,
        disable_default_security_context = args.compat.disable_default_security_context,
        apiserver_qps_throttle = args.compat.apiserver_qps_throttle,
        agent_image = args.compat.agent_image.as_deref().unwrap_or(""),
        backup_image = args.compat.backup_image.as_deref().unwrap_or(""),
        fluent_bit_image = args.compat.fluent_bit_image.as_deref().unwrap_or(""),
        mysqld_exporter_image = args.compat.mysqld_exporter_image.as_deref().unwrap_or(""),
        pvc_sync_annotation_keys = ?args.compat.pvc_sync_annotation_keys,
        pvc_sync_label_keys = ?args.compat.pvc_sync_label_keys,
        "reconciler flags accepted for compatibility with MOCO and unused by this build; no \
         leader election either, since every replica only serves webhooks"
    );
    if !args.compat.pprof_addr.is_empty() {
        tracing::info!(pprof_addr = %args.compat.pprof_addr, "--pprof-addr ignored: this build serves no pprof endpoints");
    }
    let klog_or_zap_ignored = [
        (
            "--zap-stacktrace-level",
            args.compat.zap_stacktrace_level.is_some(),
        ),
        (
            "--zap-time-encoding",
            args.compat.zap_time_encoding.is_some(),
        ),
        ("--v", args.compat.klog_verbosity.is_some()),
        ("--vmodule", args.compat.vmodule.is_some()),
        ("--log_backtrace_at", args.compat.log_backtrace_at.is_some()),
    ];
    for (flag, given) in klog_or_zap_ignored {
        if given {
            tracing::info!(
                flag,
                "logging flag of MOCO accepted and ignored by this build"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("0", Duration::ZERO),
            ("1m", Duration::from_secs(60)),
            ("30s", Duration::from_secs(30)),
            ("5s", Duration::from_secs(5)),
            ("100ms", Duration::from_millis(100)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5h", Duration::from_secs(5400)),
            ("2m0s", Duration::from_secs(120)),
            ("+10s", Duration::from_secs(10)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), Ok(want), "{text}");
        }
        for bad in ["", "10", "-1s", "1x", "s", "1m-", "1..5s", "ms"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn listen_addrs() {
        assert_eq!(
            parse_listen_addr(":8080"),
            Ok(ListenAddr::AllInterfaces(8080))
        );
        assert_eq!(parse_listen_addr("0"), Ok(ListenAddr::Disabled));
        assert_eq!(parse_listen_addr(""), Ok(ListenAddr::Disabled));
        assert_eq!(
            parse_listen_addr("127.0.0.1:9443"),
            Ok(ListenAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 9443))))
        );
        assert_eq!(
            parse_listen_addr("[::1]:8081"),
            Ok(ListenAddr::Socket(SocketAddr::from((
                Ipv6Addr::LOCALHOST,
                8081
            ))))
        );
        assert_eq!(
            parse_listen_addr("localhost:8081"),
            Ok(ListenAddr::Host("localhost".into(), 8081))
        );
        for bad in ["8080", ":http", ":70000", "::1:80", "[::1]80"] {
            assert!(parse_listen_addr(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn go_bools_and_zap_values() {
        assert_eq!(parse_go_bool("True"), Ok(true));
        assert_eq!(parse_go_bool("0"), Ok(false));
        assert!(parse_go_bool("yes").is_err());
        assert_eq!(parse_zap_level("error"), Ok(tracing::Level::ERROR));
        assert_eq!(parse_zap_level("1"), Ok(tracing::Level::DEBUG));
        assert_eq!(parse_zap_level("5"), Ok(tracing::Level::TRACE));
        assert!(parse_zap_level("0").is_err());
        assert!(parse_zap_level("warn").is_err());
        assert_eq!(parse_zap_encoder("console"), Ok(LogEncoder::Console));
        assert!(parse_zap_encoder("text").is_err());
    }

    #[test]
    fn namespace_from_the_environment_value() {
        assert_eq!(
            pod_namespace(Some("moco-system".into())).ok().as_deref(),
            Some("moco-system")
        );
        for missing in [None, Some("".into()), Some("  ".into())] {
            assert!(matches!(
                pod_namespace(missing),
                Err(ControllerError::MissingNamespace)
            ));
        }
    }

    #[test]
    fn responses_are_classified_by_allowed() {
        let allowed = br#"{"response":{"uid":"u","allowed":true}}"#;
        let denied = br#"{"response":{"uid":"u","allowed":false}}"#;
        assert_eq!(classify(StatusCode::OK, allowed), WebhookResult::Allowed);
        assert_eq!(classify(StatusCode::OK, denied), WebhookResult::Denied);
        let failed = br#"{"response":{"uid":"u","allowed":false,"status":{"code":500}}}"#;
        assert_eq!(classify(StatusCode::OK, failed), WebhookResult::Error);
        assert_eq!(classify(StatusCode::OK, b"not json"), WebhookResult::Error);
        assert_eq!(
            classify(StatusCode::UNPROCESSABLE_ENTITY, allowed),
            WebhookResult::Error
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let metrics = Metrics::new("a\"b\\c\nd");
        let text = metrics.render();
        assert!(text.contains(r#"namespace="a\"b\\c\nd""#), "{text}");
    }
}
