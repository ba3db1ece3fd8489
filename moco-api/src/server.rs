//! The HTTPS server of the admission webhooks, on MOCO's paths:
//! `/validate-moco-cybozu-com-v1beta2-mysqlcluster`, `/mutate-moco-cybozu-com-v1beta2-mysqlcluster`
//! and `/validate-moco-cybozu-com-v1beta2-backuppolicy` (plus `/healthz`).
//!
//! TLS is rustls with the ring provider; the certificate and key are PEM files (as mounted from
//! the cert-manager Secret) and are re-read periodically so renewed certificates are picked up.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use serde_json::Value;

use crate::admission::{
    ClusterLookup, mutate_mysqlcluster, validate_backuppolicy, validate_mysqlcluster,
};
use crate::labels::{
    PATH_MUTATE_MYSQLCLUSTER, PATH_VALIDATE_BACKUPPOLICY, PATH_VALIDATE_MYSQLCLUSTER,
};

/// Errors of the webhook server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The certificate or key could not be loaded.
    #[error("cannot load TLS certificate {cert} / key {key}: {source}")]
    Tls {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// The IO or parse error.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("webhook server on {addr}: {source}")]
    Serve {
        /// Listen address.
        addr: SocketAddr,
        /// The IO error.
        source: std::io::Error,
    },
}

/// Source of the random numbers the mutating webhook needs for `serverIDBase`.
pub type RandomSource = Arc<dyn Fn() -> u32 + Send + Sync>;

/// Shared state of the handlers.
pub struct WebhookState<L> {
    lookup: L,
    random: RandomSource,
}

impl<L> std::fmt::Debug for WebhookState<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookState").finish_non_exhaustive()
    }
}

impl<L: ClusterLookup> WebhookState<L> {
    /// State with the operating system's random numbers.
    pub fn new(lookup: L) -> Self {
        Self::with_random(lookup, Arc::new(os_random))
    }

    /// State with a given random source (tests).
    pub fn with_random(lookup: L, random: RandomSource) -> Self {
        WebhookState { lookup, random }
    }
}

/// A random `u32` from the operating system; falls back to clock-derived bits if the OS source
/// is unavailable (the value only needs to be unlikely to collide).
pub fn os_random() -> u32 {
    getrandom::u32().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
            .unwrap_or(0);
        nanos.wrapping_mul(0x9E37_79B9)
    })
}

type Review = AdmissionReview<DynamicObject>;

/// The router serving the three webhook paths and `/healthz`.
pub fn router<L: ClusterLookup>(state: Arc<WebhookState<L>>) -> Router {
    Router::new()
        .route(PATH_VALIDATE_MYSQLCLUSTER, post(validate_cluster::<L>))
        .route(PATH_MUTATE_MYSQLCLUSTER, post(mutate_cluster::<L>))
        .route(PATH_VALIDATE_BACKUPPOLICY, post(validate_policy::<L>))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(state)
}

async fn validate_cluster<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Json<Review> {
    Json(validate_mysqlcluster(&state.lookup, review).await)
}

async fn mutate_cluster<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Json<Value> {
    Json(patch_as_base64(&mutate_mysqlcluster(
        review,
        (state.random)(),
    )))
}

/// The review as JSON with `response.patch` encoded as a base64 string, the encoding Go's
/// `[]byte` uses on the wire (kube serializes the bytes as a number array).
pub fn patch_as_base64(review: &Review) -> Value {
    let mut value = serde_json::to_value(review).unwrap_or(Value::Null);
    if let Some(patch) = value.pointer_mut("/response/patch") {
        let bytes: Vec<u8> = patch
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .filter_map(|b| u8::try_from(b).ok())
                    .collect()
            })
            .unwrap_or_default();
        *patch = Value::String(base64(&bytes));
    }
    value
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

async fn validate_policy<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Json<Review> {
    Json(validate_backuppolicy(&state.lookup, review).await)
}

/// Loads the PEM certificate chain and key into a rustls configuration (ring provider).
pub async fn tls_config(cert: &Path, key: &Path) -> Result<RustlsConfig, ServerError> {
    // Installing fails only if a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    RustlsConfig::from_pem_file(cert, key)
        .await
        .map_err(|source| ServerError::Tls {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        })
}

/// Re-reads the certificate and key every `interval` (cert-manager renews them in place).
/// Failed reloads keep the previous certificate.
pub fn spawn_reloader(
    config: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            if let Err(e) = config.reload_from_pem_file(&cert, &key).await {
                tracing::warn!(error = %e, cert = %cert.display(), "cannot reload the webhook certificate");
            }
        }
    })
}

/// Serves `router` over HTTPS on `addr` until `handle` is shut down.
pub async fn serve(
    addr: SocketAddr,
    config: RustlsConfig,
    router: Router,
    handle: Handle<SocketAddr>,
) -> Result<(), ServerError> {
    axum_server::bind_rustls(addr, config)
        .handle(handle)
        .serve(router.into_make_service())
        .await
        .map_err(|source| ServerError::Serve { addr, source })
}

/// Runs the webhooks the way the controller does: `tls.crt` and `tls.key` from `cert_dir` (the
/// cert-manager Secret mounted there, MOCO's `--cert-dir`), re-read every minute, served on
/// `addr` (MOCO's `--webhook-addr`, `:9443`) until `handle` is shut down.
pub async fn run<L: ClusterLookup>(
    addr: SocketAddr,
    cert_dir: &Path,
    lookup: L,
    handle: Handle<SocketAddr>,
) -> Result<(), ServerError> {
    let cert = cert_dir.join("tls.crt");
    let key = cert_dir.join("tls.key");
    let config = tls_config(&cert, &key).await?;
    let reloader = spawn_reloader(config.clone(), cert, key, Duration::from_secs(60));
    let result = serve(
        addr,
        config,
        router(Arc::new(WebhookState::new(lookup))),
        handle,
    )
    .await;
    reloader.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }
}
