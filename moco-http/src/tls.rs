//! Certificates: PEM files as cert-manager mounts them from a Secret, loaded into rustls (ring
//! provider) and re-read periodically, because cert-manager renews them in place and a restart
//! must not be needed to pick the new ones up. The webhooks use server TLS; the agent's clone
//! service uses mutual TLS, where the client's certificate names who it is ([`PeerIdentity`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate, its key or a CA could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("cannot load {files}: {source}")]
pub struct TlsError {
    /// The files, as the message names them (`TLS certificate X / key Y`, `CA certificate X`).
    pub files: String,
    /// The IO or parse error.
    pub source: std::io::Error,
}

impl TlsError {
    fn new(cert: &Path, key: &Path, message: String) -> Self {
        TlsError::with(
            format!("TLS certificate {} / key {}", cert.display(), key.display()),
            message,
        )
    }

    fn ca(ca: &Path, message: String) -> Self {
        TlsError::with(format!("CA certificate {}", ca.display()), message)
    }

    fn with(files: String, message: String) -> Self {
        TlsError {
            files,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, message),
        }
    }
}

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

/// A certificate chain and its key, read from PEM files.
pub type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// Reads the PEM certificate chain and key. Each problem is named with its file: a file
/// without a certificate used to surface as rustls' "peer sent no certificates".
pub fn load_identity(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
    let fail = |message: String| TlsError::new(cert, key, message);
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
    Ok((chain, private))
}

/// Reads the CA certificates of `ca` (PEM) as trust anchors.
pub fn load_roots(ca: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let fail = |message: String| TlsError::ca(ca, message);
    let mut roots = rustls::RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| fail(e.to_string()))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(fail(
            "no usable CA certificate (BEGIN CERTIFICATE) in the file".to_owned(),
        ));
    }
    Ok(roots)
}

/// The server configuration from the PEM files. ALPN offers HTTP/1.1 only: the servers speak
/// nothing else (see [`crate::limits`]), and a client offered `h2` (Go's, the API server's,
/// would take it) would then send HTTP/2 to an HTTP/1.1 server.
pub fn server_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig, TlsError> {
    install_crypto_provider();
    let (chain, private) = load_identity(cert, key)?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| mismatch(cert, key, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn mismatch(cert: &Path, key: &Path, e: rustls::Error) -> TlsError {
    TlsError::new(
        cert,
        key,
        format!("the certificate and the key do not go together: {e}"),
    )
}

/// A server configuration that requires a client certificate signed by the CA in `ca`
/// (mutual TLS). Which client may do what is decided per request from its
/// [`PeerIdentity`].
pub fn mtls_server_config(
    cert: &Path,
    key: &Path,
    ca: &Path,
) -> Result<rustls::ServerConfig, TlsError> {
    install_crypto_provider();
    let roots = load_roots(ca)?;
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .map_err(|e| TlsError::ca(ca, e.to_string()))?;
    let (chain, private) = load_identity(cert, key)?;
    let mut config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, private)
        .map_err(|e| mismatch(cert, key, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A client configuration that presents `cert`/`key` and trusts only the CA in `ca`.
pub fn mtls_client_config(
    cert: &Path,
    key: &Path,
    ca: &Path,
) -> Result<rustls::ClientConfig, TlsError> {
    install_crypto_provider();
    let roots = load_roots(ca)?;
    let (chain, private) = load_identity(cert, key)?;
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, private)
        .map_err(|e| mismatch(cert, key, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Who is on the other end of a mutual-TLS connection, from its verified certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerIdentity {
    /// The subject's common name (`moco-controller` for the operator).
    pub common_name: Option<String>,
    /// The DNS names of its subject alternative names.
    pub dns_names: Vec<String>,
}

impl PeerIdentity {
    /// The identity in the end-entity certificate `cert` (empty when it does not parse, which
    /// a verified certificate always does).
    pub fn from_certificate(cert: &CertificateDer<'_>) -> Self {
        use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate};
        let Ok((_, parsed)) = X509Certificate::from_der(cert.as_ref()) else {
            return PeerIdentity::default();
        };
        let common_name = parsed
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_owned);
        let dns_names = parsed
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        GeneralName::DNSName(d) => Some((*d).to_owned()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        PeerIdentity {
            common_name,
            dns_names,
        }
    }
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.common_name, self.dns_names.first()) {
            (Some(cn), _) => write!(f, "CN={cn}"),
            (None, Some(dns)) => write!(f, "DNS={dns}"),
            (None, None) => f.write_str("(no name)"),
        }
    }
}

/// axum-server's TLS acceptor for mutual TLS: after the handshake (bounded by `timeout`) the
/// client's [`PeerIdentity`] is added to every request of the connection as an extension. The
/// configuration is read at each connection, so a reload applies to the next one.
#[derive(Clone, Debug)]
pub struct MtlsAcceptor {
    config: RustlsConfig,
    timeout: Duration,
}

impl MtlsAcceptor {
    /// An acceptor over `config` (built with [`mtls_server_config`]).
    pub fn new(config: RustlsConfig, timeout: Duration) -> Self {
        MtlsAcceptor { config, timeout }
    }
}

impl<I, S> axum_server::accept::Accept<I, S> for MtlsAcceptor
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: Send + 'static,
{
    type Stream = tokio_rustls::server::TlsStream<I>;
    type Service = axum::middleware::AddExtension<S, PeerIdentity>;
    type Future = std::pin::Pin<
        Box<
            dyn std::future::Future<Output = std::io::Result<(Self::Stream, Self::Service)>> + Send,
        >,
    >;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config.get_inner());
        let timeout = self.timeout;
        Box::pin(async move {
            let tls = tokio::time::timeout(timeout, acceptor.accept(stream))
                .await
                .map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out")
                })??;
            let peer = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(<[_]>::first)
                .map(PeerIdentity::from_certificate)
                .unwrap_or_default();
            let service = tower_layer_extension(service, peer);
            Ok((tls, service))
        })
    }
}

fn tower_layer_extension<S>(
    service: S,
    peer: PeerIdentity,
) -> axum::middleware::AddExtension<S, PeerIdentity> {
    use tower_layer::Layer as _;
    axum::Extension(peer).layer(service)
}

/// Re-reads the certificate and key every `interval`. A failed reload keeps the previous
/// certificate (a half-written renewal must not take the webhooks down).
pub fn spawn_reloader(
    config: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    spawn_reloader_with(config, interval, move || server_config(&cert, &key))
}

/// Rebuilds the configuration with `load` every `interval`; a failure keeps the previous one.
pub fn spawn_reloader_with<F>(
    config: RustlsConfig,
    interval: Duration,
    load: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Result<rustls::ServerConfig, TlsError> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            match load() {
                Ok(fresh) => config.reload_from_config(Arc::new(fresh)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reload the TLS certificate; keeping the previous one")
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name that decides what a client may do comes from its certificate: the subject's
    /// common name, and the DNS names.
    #[test]
    fn peer_identity_reads_the_common_name_and_dns_names() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "moco-controller");
        let cert = params.self_signed(&key).unwrap();
        let peer = PeerIdentity::from_certificate(cert.der());
        assert_eq!(peer.common_name.as_deref(), Some("moco-controller"));
        assert_eq!(peer.dns_names, ["a.example"]);
        assert_eq!(peer.to_string(), "CN=moco-controller");
        let garbage = CertificateDer::from(vec![1u8, 2, 3]);
        assert_eq!(
            PeerIdentity::from_certificate(&garbage),
            PeerIdentity::default()
        );
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, "not a certificate").unwrap();
        let e = load_roots(&ca).unwrap_err();
        assert!(e.to_string().contains("ca.crt"), "{e}");
        // A CA is named as a CA, not as a certificate and key pair.
        assert!(
            e.to_string().starts_with("cannot load CA certificate "),
            "{e}"
        );
        assert!(!e.to_string().contains("key"), "{e}");
    }
}
