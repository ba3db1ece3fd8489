//! The API server as every side of the operator reaches it: the namespaces watched, retries of
//! transient errors, label selectors. The operator's reconcile and clustering, and the
//! `kubectl moco` plugin through the same platform, use these.

use std::future::Future;
use std::time::Duration;

use kube::api::Api;

/// The namespaces the operator watches: every one (MOCO's only choice), or one
/// (`--watch-namespace`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    #[default]
    All,
    /// This namespace alone.
    Namespace(String),
}

impl Scope {
    /// `--watch-namespace`: empty means every namespace.
    pub fn from_flag(namespace: &str) -> Self {
        match namespace.trim() {
            "" => Scope::All,
            ns => Scope::Namespace(ns.to_owned()),
        }
    }

    /// The API of the namespaced resource `K` in this scope.
    pub fn api<K>(&self, client: kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match self {
            Scope::All => Api::all(client),
            Scope::Namespace(ns) => Api::namespaced(client, ns),
        }
    }
}

/// Attempts per API call before its error is returned (a reconcile round then ends, and the
/// controller requeues it with its own backoff).
pub const ATTEMPTS: u32 = 4;
/// The first retry delay; doubled for each further attempt.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// Whether `error` may pass on its own: a conflict, throttling, a server error, or a failed
/// connection.
pub fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 409 || status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Whether `error` is the API server's 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 404)
}

/// Runs `op` until it succeeds, fails for good, or [`ATTEMPTS`] are used up.
pub async fn retry<T, F, Fut>(mut op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e) if attempt < ATTEMPTS && is_transient(&e) => {
                tracing::debug!(error = %e, attempt, "retrying a transient API error");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// `k=v,k=v` for a label selector.
pub fn label_selector(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
