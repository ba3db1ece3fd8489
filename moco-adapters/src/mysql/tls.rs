//! TLS for the project's MySQL connections, and the certificate authority that issues the
//! servers' certificates where nobody else does (`moco local`; cert-manager on Kubernetes).
//!
//! A connection with [`MysqlTls`] trusts only the given CA, never the system's roots, and
//! checks that the server's certificate names the host it connected to (or the name given):
//! MOCO #544 is a server with `require_secure_transport=ON` that MOCO could not talk to at
//! all; verifying the server is what makes the encryption worth having.

use std::fmt;

use mysql_async::SslOpts;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// What went wrong making or reading a certificate.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {message}")]
pub struct TlsError {
    /// What was being made or read (`CA certificate`, `server certificate for 127.0.0.1`).
    pub what: String,
    /// The reason.
    pub message: String,
}

impl TlsError {
    fn new(what: impl Into<String>, e: impl fmt::Display) -> Self {
        TlsError {
            what: what.into(),
            message: e.to_string(),
        }
    }
}

/// How a connection verifies its server.
#[derive(Clone, PartialEq, Eq)]
pub struct MysqlTls {
    /// The CA certificate(s), PEM: the only roots trusted.
    pub ca_pem: Vec<u8>,
    /// The name the server's certificate must carry, when it is not the host connected to
    /// (a Pod reached by IP whose certificate names its DNS name).
    pub server_name: Option<String>,
}

impl fmt::Debug for MysqlTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlTls")
            .field("ca_pem", &format!("{} bytes", self.ca_pem.len()))
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// A CA file and what it holds: command-line tools (`mariadb-backup`, `mariadb-binlog`) and
/// replication channels get the path, the project's own connections the contents.
#[derive(Clone, Debug)]
pub struct CaFile {
    /// Where the CA is.
    pub path: std::path::PathBuf,
    /// Trusting it, names checked.
    pub tls: MysqlTls,
}

impl CaFile {
    /// Reads the CA at `path`.
    pub fn read(path: &std::path::Path) -> Result<CaFile, TlsError> {
        let pem = std::fs::read(path).map_err(|e| TlsError::new(path.display().to_string(), e))?;
        Ok(CaFile {
            path: path.to_owned(),
            tls: MysqlTls::new(pem),
        })
    }
}

impl MysqlTls {
    /// Trusts `ca_pem` only and checks the host connected to.
    pub fn new(ca_pem: impl Into<Vec<u8>>) -> Self {
        MysqlTls {
            ca_pem: ca_pem.into(),
            server_name: None,
        }
    }

    /// Checks `name` instead of the host connected to.
    pub fn with_server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// The client's TLS settings: this CA only, names checked.
    pub(crate) fn ssl_opts(&self) -> SslOpts {
        let opts = SslOpts::default()
            .with_root_certs(vec![self.ca_pem.clone().into()])
            .with_disable_built_in_roots(true);
        match &self.server_name {
            Some(name) => opts.with_danger_tls_hostname_override(Some(name.clone())),
            None => opts,
        }
    }
}

/// A server certificate and its key, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl fmt::Debug for Issued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Issued")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// A certificate authority kept as its certificate and key (PEM), re-created from them to
/// issue more certificates later (an instance added by `moco local scale`).
pub struct Authority {
    name: String,
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    key_pem: String,
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The CA's parameters, the same every time for one `name`: an issuer re-created from them and
/// the key signs certificates that chain to the certificate made the first time.
fn ca_params(name: &str) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new())
        .map_err(|e| TlsError::new("CA certificate", e))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

impl Authority {
    /// A new CA called `name` (its certificate's common name).
    pub fn generate(name: &str) -> Result<Authority, TlsError> {
        let key = KeyPair::generate().map_err(|e| TlsError::new("CA key", e))?;
        let key_pem = key.serialize_pem();
        let cert = ca_params(name)?
            .self_signed(&key)
            .map_err(|e| TlsError::new("CA certificate", e))?;
        Ok(Authority {
            name: name.to_owned(),
            issuer: Issuer::new(ca_params(name)?, key),
            cert_pem: cert.pem(),
            key_pem,
        })
    }

    /// The CA made by [`Authority::generate`] with `name`, from its certificate and key.
    pub fn load(name: &str, cert_pem: &str, key_pem: &str) -> Result<Authority, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| TlsError::new("CA key", e))?;
        Ok(Authority {
            name: name.to_owned(),
            issuer: Issuer::new(ca_params(name)?, key),
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
        })
    }

    /// The CA's certificate, PEM: what clients trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's key, PEM: keep it private.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A server certificate for `names` (DNS names or IP addresses, as the clients reach the
    /// server), usable by the server and, for replication, as a client.
    pub fn issue(&self, common_name: &str, names: &[String]) -> Result<Issued, TlsError> {
        let what = || format!("server certificate for {}", names.join(", "));
        let key = KeyPair::generate().map_err(|e| TlsError::new(what(), e))?;
        let mut params =
            CertificateParams::new(names.to_vec()).map_err(|e| TlsError::new(what(), e))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| TlsError::new(what(), e))?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA loaded from its PEM files issues again; a key that is not PEM is an error that
    /// names the key; the Debug forms keep keys out of logs.
    #[test]
    fn an_authority_round_trips_through_pem() {
        let ca = Authority::generate("moco local CA test").unwrap();
        let again = Authority::load("moco local CA test", ca.cert_pem(), ca.key_pem()).unwrap();
        let issued = again
            .issue(
                "instance-0",
                &["127.0.0.1".to_owned(), "localhost".to_owned()],
            )
            .unwrap();
        assert!(issued.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!format!("{issued:?}").contains("PRIVATE KEY"));
        assert!(!format!("{again:?}").contains("PRIVATE KEY"));
        let e = Authority::load("x", ca.cert_pem(), "not a key").unwrap_err();
        assert_eq!(e.what, "CA key");
    }
}
