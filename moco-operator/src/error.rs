//! Errors of the in-cluster process. Each names the flag, file or address to fix, because the
//! reader is someone looking at a crash-looping pod's log.

use std::net::SocketAddr;
use std::path::PathBuf;

moco_core::error_category! {
    /// What kind of failure a reconcile round met: a stable, low-cardinality name for the
    /// `category` label of `moco_controller_reconcile_total` and for the retry policy (the
    /// message itself varies).
    pub enum ErrorCategory {
        /// Something the user can fix in the cluster or the objects it names; retried slowly.
        Input => "input",
        /// The API server failed or was unreachable.
        Api => "api",
        /// Another writer changed the object first.
        Conflict => "conflict",
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
    /// A listener could not be bound.
    #[error(transparent)]
    Bind(#[from] moco_http::listen::BindError),
    /// The webhook certificate could not be loaded.
    #[error("webhook certificate from --cert-dir {dir}: {source}")]
    Certificate {
        /// The certificate directory.
        dir: PathBuf,
        /// The load error (names the files).
        source: TlsError,
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

pub use moco_http::tls::TlsError;

#[cfg(test)]
mod tests {
    use super::*;

    /// `moco_controller_reconcile_total`'s `category` values: dashboards key on them.
    #[test]
    fn categories_are_the_metric_labels() {
        let labels = [
            ErrorCategory::Input,
            ErrorCategory::Api,
            ErrorCategory::Conflict,
        ]
        .map(|c| c.to_string());
        assert_eq!(labels, ["input", "api", "conflict"]);
    }
}
