//! Running the process: connect to the API server, start the [`Servers`], serve until told to
//! stop or until a server fails. What stops it is the caller's choice (the binary waits for
//! SIGTERM/SIGINT), so this runs the same under a test.

use std::future::Future;

use moco_api::admission::KubeLookup;

use crate::config::{ControllerArgs, ServeConfig};
use crate::error::ControllerError;
use crate::listen::ListenAddr;
use crate::servers::Servers;
use crate::tls::install_crypto_provider;

/// Serves with facts looked up from the API server until `shutdown` completes (then stops the
/// servers gracefully and returns `Ok`) or a server fails (then stops the others and returns
/// that failure).
pub async fn run(
    config: &ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ControllerError> {
    if matches!(config.webhook_addr, ListenAddr::Disabled) {
        return Err(ControllerError::WebhookDisabled);
    }
    install_crypto_provider();
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
    let mut servers = Servers::start(config, KubeLookup::new(client)).await?;
    let disabled_or = |addr: Option<std::net::SocketAddr>| {
        addr.map_or_else(|| "disabled".to_owned(), |a| a.to_string())
    };
    tracing::info!(
        namespace = %config.namespace,
        webhook = %servers.webhook_addr(),
        health = %disabled_or(servers.health_addr()),
        metrics = %disabled_or(servers.metrics_addr()),
        cert_dir = %config.cert_dir.display(),
        "serving the admission webhooks"
    );
    let failure = tokio::select! {
        () = shutdown => None,
        error = servers.failed() => Some(error),
    };
    match failure {
        None => {
            tracing::info!("shutting down");
            servers.shutdown().await?;
            tracing::info!("stopped");
            Ok(())
        }
        Some(error) => {
            tracing::error!(error = %error, "a server failed; shutting down");
            if let Err(e) = servers.shutdown().await {
                tracing::warn!(error = %e, "while shutting down");
            }
            Err(error)
        }
    }
}

/// Logs the startup notes: what this build does, and the MOCO flags it accepts without using.
pub fn announce(args: &ControllerArgs) {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        "moco controller starting. This build serves the admission webhooks only: reconciliation \
         of MySQLClusters on Kubernetes (StatefulSets, Services, ConfigMaps, the clustering \
         manager) is not implemented yet; the clustering engine runs today in `moco local`"
    );
    let compat = &args.compat;
    tracing::info!(
        leader_election_id = %compat.leader_election_id,
        grpc_cert_dir = %compat.grpc_cert_dir.display(),
        check_interval = ?compat.check_interval,
        max_concurrent_reconciles = compat.max_concurrent_reconciles,
        mysql_configmap_history_limit = compat.mysql_configmap_history_limit,
        partition_update_interval = ?compat.partition_update_interval,
        disable_default_security_context = compat.disable_default_security_context,
        apiserver_qps_throttle = compat.apiserver_qps_throttle,
        agent_image = compat.agent_image.as_deref().unwrap_or(""),
        backup_image = compat.backup_image.as_deref().unwrap_or(""),
        fluent_bit_image = compat.fluent_bit_image.as_deref().unwrap_or(""),
        mysqld_exporter_image = compat.mysqld_exporter_image.as_deref().unwrap_or(""),
        pvc_sync_annotation_keys = ?compat.pvc_sync_annotation_keys,
        pvc_sync_label_keys = ?compat.pvc_sync_label_keys,
        "reconciler flags accepted for compatibility with MOCO and unused by this build; no \
         leader election either, since every replica only serves webhooks"
    );
    if !compat.pprof_addr.is_empty() {
        tracing::info!(pprof_addr = %compat.pprof_addr, "--pprof-addr ignored: this build serves no pprof endpoints");
    }
    let klog_or_zap_ignored = [
        (
            "--zap-stacktrace-level",
            compat.zap_stacktrace_level.is_some(),
        ),
        ("--zap-time-encoding", compat.zap_time_encoding.is_some()),
        ("--v", compat.klog_verbosity.is_some()),
        ("--vmodule", compat.vmodule.is_some()),
        ("--log_backtrace_at", compat.log_backtrace_at.is_some()),
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
