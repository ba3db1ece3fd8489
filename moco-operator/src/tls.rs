//! The webhook certificate: PEM files as cert-manager mounts them from the Secret, loaded into
//! rustls (ring provider) and re-read periodically, because cert-manager renews them in place
//! and a restart must not be needed to pick the new ones up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;

use crate::error::TlsError;

/// The certificate file in `--cert-dir`.
pub const CERT_FILE: &str = "tls.crt";

/// The key file in `--cert-dir`.
pub const KEY_FILE: &str = "tls.key";

/// Installs the ring provider as rustls' process-wide default; kube's client and the webhook
/// server need one. Installing again is harmless.
pub fn install_crypto_provider() {
    // Fails only if a provider is already installed, which is what we want anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Loads the PEM certificate chain and key into a rustls configuration.
pub async fn tls_config(cert: &Path, key: &Path) -> Result<RustlsConfig, TlsError> {
    install_crypto_provider();
    RustlsConfig::from_pem_file(cert, key)
        .await
        .map_err(|source| TlsError {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        })
}

/// Re-reads the certificate and key every `interval`. A failed reload keeps the previous
/// certificate (a half-written renewal must not take the webhooks down).
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
