//! The configuration of the in-cluster process: the flags of MOCO's `moco-controller` (the
//! operator's contract with its install manifests, so that the Deployment args are MOCO's), and
//! [`ServeConfig`], what the servers need from them.

use std::path::PathBuf;
use std::time::Duration;

use moco_core::validate::duration::parse_std_duration;
use moco_http::flags::{LogEncoder, parse_go_bool, parse_zap_encoder, parse_zap_level};

use crate::error::ControllerError;
use moco_http::limits::{PROBE_LIMITS, ServerLimits, WEBHOOK_LIMITS};
use moco_http::listen::{ListenAddr, parse_listen_addr};

/// How often the webhook certificate and key are re-read from `--cert-dir`.
pub const CERT_RELOAD_INTERVAL: Duration = Duration::from_secs(60);

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
    /// The reconciler's flags (MOCO's names and defaults).
    #[command(flatten)]
    pub reconciler: Box<ReconcilerFlags>,
    /// MOCO flags this build accepts without using them (pprof, the client-side throttle,
    /// klog); logged at startup.
    #[command(flatten)]
    pub compat: Box<CompatFlags>,
}

/// The flags of MOCO's `moco-controller` that configure reconciliation and clustering.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Reconciliation and clustering")]
pub struct ReconcilerFlags {
    /// Name of the leader-election Lease in the controller's namespace: one replica
    /// reconciles and runs clustering, the others serve webhooks only.
    #[arg(long, value_name = "ID", default_value = "moco")]
    pub leader_election_id: String,
    /// Image of the moco-agent sidecar (and of the `copy-moco-init` init container).
    #[arg(long, value_name = "IMAGE")]
    pub agent_image: Option<String>,
    /// Image of the backup and restore Jobs.
    #[arg(long, value_name = "IMAGE")]
    pub backup_image: Option<String>,
    /// Image of the slow-log sidecar.
    #[arg(long, value_name = "IMAGE")]
    pub fluent_bit_image: Option<String>,
    /// Image of the mysqld_exporter sidecar.
    #[arg(long, value_name = "IMAGE")]
    pub mysqld_exporter_image: Option<String>,
    /// Annotation keys whose values are copied from volumeClaimTemplates to the PVCs
    /// (comma-separated, repeatable).
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub pvc_sync_annotation_keys: Vec<String>,
    /// Label keys whose values are copied from volumeClaimTemplates to the PVCs
    /// (comma-separated, repeatable).
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub pvc_sync_label_keys: Vec<String>,
    /// Interval of the clustering checks of each cluster (Go duration: `1m`, `30s`, `1h30m`).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_std_duration)]
    pub check_interval: Duration,
    /// The least time between two partition updates of the partitioned rollout, across
    /// every cluster (Go duration; 0: none).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_std_duration)]
    pub partition_update_interval: Duration,
    /// Clusters reconciled at once.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_concurrent_reconciles: u32,
    /// my.cnf (and slow-log) ConfigMaps kept per cluster, the current one included.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub mysql_configmap_history_limit: i32,
    /// The mysqld container's preStop sleep.
    #[command(flatten)]
    pub pre_stop: PreStopFlag,
    /// Do not inject the default securityContext (`--flag` or `--flag=true|false`).
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
    /// Reconcile and run clustering only for the MySQLClusters of this namespace, and watch
    /// only it; empty (the default) means every namespace, as MOCO does. Beyond MOCO: several
    /// operators can then share one API server, each with a namespace of its own (the tests
    /// on the real control plane run one per test this way). The controller's own namespace
    /// (`POD_NAMESPACE`) still holds its Secrets and Certificates.
    #[arg(long, value_name = "NAMESPACE", default_value = "")]
    pub watch_namespace: String,
    /// Directory of the client certificate the controller presents to the agents (`tls.crt`,
    /// `tls.key`, and `ca.crt` to check them with), re-read for every clone.
    #[arg(long, value_name = "DIR", default_value = "/grpc-cert")]
    pub grpc_cert_dir: PathBuf,
    /// The reconciler version new and edited clusters are rendered with. Hidden: only the
    /// upgrade test sets it, to 2, a version that exists for that test alone
    /// (`render::version`).
    #[arg(
        long,
        value_name = "N",
        hide = true,
        default_value_t = crate::render::version::LATEST_RECONCILER_VERSION,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::render::version::HIGHEST_KNOWN))
    )]
    pub latest_reconciler_version: u32,
}

/// Flags of MOCO's `moco-controller` that this build accepts for compatibility and does not use.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Accepted for compatibility with MOCO, unused by this build")]
pub struct CompatFlags {
    /// MOCO: listen address of the pprof endpoints. Accepted; this build serves no pprof.
    #[arg(long, value_name = "ADDR", default_value = "")]
    pub pprof_addr: String,
    /// MOCO: maximum queries per second to the API server (burst 1.5×). Accepted, unused.
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
    /// What one client may hold of the webhook server.
    pub webhook_limits: ServerLimits,
    /// What one client may hold of the health and metrics servers.
    pub probe_limits: ServerLimits,
}

impl ControllerArgs {
    /// The log format the zap flags ask for: `--zap-encoder`, else console with `--zap-devel`,
    /// else JSON.
    pub fn log_encoder(&self) -> LogEncoder {
        self.zap_encoder.unwrap_or(if self.zap_devel {
            LogEncoder::Console
        } else {
            LogEncoder::Json
        })
    }

    /// The default log level the zap flags ask for: `--zap-log-level`, else debug with
    /// `--zap-devel`, else info.
    pub fn log_level(&self) -> tracing::Level {
        self.zap_log_level.unwrap_or(if self.zap_devel {
            tracing::Level::DEBUG
        } else {
            tracing::Level::INFO
        })
    }
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
            webhook_limits: WEBHOOK_LIMITS,
            probe_limits: PROBE_LIMITS,
        }
    }
}

/// The namespace from the value of `POD_NAMESPACE`.
pub fn pod_namespace(value: Option<std::ffi::OsString>) -> Result<String, ControllerError> {
    match value.and_then(|v| v.into_string().ok()) {
        Some(ns) if !ns.trim().is_empty() => Ok(ns.trim().to_owned()),
        _ => Err(ControllerError::MissingNamespace),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

/// `--mysqld-pre-stop-seconds`, shared by `moco controller` and `moco render` (which renders
/// what the controller would).
#[derive(Debug, Clone, clap::Args)]
pub struct PreStopFlag {
    /// Seconds the mysqld container's preStop hook holds a stopping Pod's server up before
    /// it is told to stop: the time Services have to stop routing to the Pod, and a switchover
    /// away from a deleted primary's Pod has to finish (its read-only wait is 10 s). Beyond
    /// MOCO, whose 20 is fixed; changing it changes every cluster's Pod template, so their Pods
    /// roll.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = crate::render::pod_template::DEFAULT_PRE_STOP_SECONDS,
        value_parser = clap::value_parser!(u32).range(1..=3600)
    )]
    pub mysqld_pre_stop_seconds: u32,
}
