//! Running the process: connect to the API server, start the [`Servers`], serve until told to
//! stop or until a server fails. What stops it is the caller's choice (the binary waits for
//! SIGTERM/SIGINT), so this runs the same under a test.

use std::future::Future;

use moco_api::admission::KubeLookup;

use crate::config::{ControllerArgs, ServeConfig};
use crate::error::ControllerError;
use crate::operator::{OperatorConfig, run_operator};
use crate::servers::Servers;
use moco_http::listen::ListenAddr;
use moco_http::tls::install_crypto_provider;

/// Serves with facts looked up from the API server until `shutdown` completes (then stops the
/// servers gracefully and returns `Ok`) or a server fails (then stops the others and returns
/// that failure).
pub async fn run(
    config: &ServeConfig,
    operator: OperatorConfig,
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
    let mut servers = Servers::start(config, KubeLookup::new(client.clone())).await?;
    let (stop_operator, operator_stopped) = tokio::sync::watch::channel(false);
    let operator_task = tokio::spawn(run_operator(
        client,
        operator,
        servers.metrics().cluster.clone(),
        operator_stopped,
    ));
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
    // Reconciliation and clustering stop first: no manager acts after the webhooks are gone.
    let _ = stop_operator.send(true);
    if let Err(e) = operator_task.await {
        tracing::warn!(error = %e, "the operator task failed");
    }
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
        "moco controller starting: admission webhooks on every replica; MySQLCluster \
         reconciliation and clustering on the replica holding the leader Lease"
    );
    let r = &args.reconciler;
    tracing::info!(
        leader_election_id = %r.leader_election_id,
        watch_namespace = if r.watch_namespace.is_empty() { "(every namespace)" } else { r.watch_namespace.as_str() },
        check_interval = ?r.check_interval,
        max_concurrent_reconciles = r.max_concurrent_reconciles,
        mysql_configmap_history_limit = r.mysql_configmap_history_limit,
        disable_default_security_context = r.disable_default_security_context,
        mysqld_pre_stop_seconds = r.pre_stop.mysqld_pre_stop_seconds,
        agent_image = r.agent_image.as_deref().unwrap_or(crate::render::DEFAULT_AGENT_IMAGE),
        backup_image = r.backup_image.as_deref().unwrap_or(crate::render::DEFAULT_BACKUP_IMAGE),
        fluent_bit_image = r.fluent_bit_image.as_deref().unwrap_or(crate::render::DEFAULT_FLUENT_BIT_IMAGE),
        mysqld_exporter_image = r.mysqld_exporter_image.as_deref().unwrap_or(crate::render::DEFAULT_MYSQLD_EXPORTER_IMAGE),
        pvc_sync_annotation_keys = ?r.pvc_sync_annotation_keys,
        partition_update_interval = ?r.partition_update_interval,
        pvc_sync_label_keys = ?r.pvc_sync_label_keys,
        "reconciler settings"
    );
    let compat = &args.compat;
    tracing::info!(
        grpc_cert_dir = %r.grpc_cert_dir.display(),
        apiserver_qps_throttle = compat.apiserver_qps_throttle,
        "MOCO flags accepted for compatibility and unused by this build (no moco agent, no \
         client-side throttling yet)"
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
