//! The webhook certificate: PEM files as cert-manager mounts them from the Secret, loaded into
//! rustls (ring provider) and re-read periodically, because cert-manager renews them in place
//! and a restart must not be needed to pick the new ones up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

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
    let config = server_config(cert, key)?;
    Ok(RustlsConfig::from_config(Arc::new(config)))
}

/// The server configuration from the PEM files. ALPN offers HTTP/1.1 only: the servers speak
/// nothing else (see [`crate::limits`]), and a client offered `h2` (Go's, the API server's,
/// would take it) would then send HTTP/2 to an HTTP/1.1 server. Each problem is named with
/// its file: a file without a certificate used to surface as rustls' "peer sent no
/// certificates".
pub fn server_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig, TlsError> {
    install_crypto_provider();
    let fail = |message: String| TlsError {
        cert: cert.to_owned(),
        key: key.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, message),
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| fail(format!("{}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(fail(format!(
            "{}: no PEM certificate (BEGIN CERTIFICATE) in the file",
            cert.display()
        )));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => fail(format!(
            "{}: no PEM private key (BEGIN PRIVATE KEY) in the file",
            key.display()
        )),
        other => fail(format!("{}: {other}", key.display())),
    })?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            fail(format!(
                "the certificate and the key do not go together: {e}"
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
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
            match server_config(&cert, &key) {
                Ok(fresh) => config.reload_from_config(Arc::new(fresh)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reload the webhook certificate; keeping the previous one")
                }
            }
        }
    })
}
