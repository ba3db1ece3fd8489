//! The signals the long-running subcommands (`moco controller`, the `moco local` manager) stop
//! on, and the hangup a detached manager must survive.

use tokio::signal::unix::{SignalKind, signal};

/// Completes on SIGINT or SIGTERM (on SIGINT only if SIGTERM cannot be listened for).
pub(crate) async fn shutdown() {
    let name = match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    };
    tracing::info!(signal = name, "signal received");
}

/// Makes SIGHUP harmless for the rest of the process: a detached manager outlives the terminal
/// that started it. Once tokio has a handler for a signal it keeps it installed, so the default
/// action (terminate) never applies again. Must be called inside the runtime.
pub(crate) fn ignore_hangup() {
    if let Err(e) = signal(SignalKind::hangup()) {
        tracing::warn!(error = %e, "cannot ignore SIGHUP");
    }
}
