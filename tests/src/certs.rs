//! Throwaway certificates as cert-manager would issue them for a cluster: one CA, the agents'
//! certificate (for `localhost` and, as the operator's Certificate names it, every Pod of
//! cluster `db`: `*.moco-db.default.svc`; server and client), the controller's client
//! certificate (CN `moco-controller`), and three that must be refused: the agents' certificate
//! of another cluster of the same CA, another client of the same CA, and a client of another
//! CA.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair,
};

/// The name the operator's agent Certificate gives every Pod of the tests' cluster `db` (the
/// agents' `CLUSTER_NAME`) in namespace `default`: what makes a client one of this cluster's.
pub const AGENT_DNS_NAME: &str = "*.moco-db.default.svc";

/// A directory as the Secrets are mounted: `tls.crt`, `tls.key`, `ca.crt`.
#[derive(Debug, Clone)]
pub struct CertDir(pub PathBuf);

/// The certificates of one test.
#[derive(Debug)]
pub struct TestCerts {
    /// The agents' (`--grpc-cert-dir`).
    pub agent: CertDir,
    /// The controller's.
    pub controller: CertDir,
    /// Same CA: the agents' certificate of cluster `other` (`*.moco-other.default.svc`).
    pub other_cluster: CertDir,
    /// Same CA, CN `intruder`.
    pub intruder: CertDir,
    /// Another CA.
    pub foreign: CertDir,
}

fn check<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}

fn new_ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = check(CertificateParams::new(Vec::<String>::new()), "CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    check(
        CertifiedIssuer::self_signed(params, check(KeyPair::generate(), "CA key")),
        "CA",
    )
}

fn leaf(
    dir: &Path,
    ca: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    common_name: &str,
) -> CertDir {
    check(std::fs::create_dir_all(dir), "cert dir");
    let key = check(KeyPair::generate(), "key");
    let mut params = check(
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()),
        "params",
    );
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = check(params.signed_by(&key, ca), "sign");
    check(std::fs::write(dir.join("tls.crt"), cert.pem()), "tls.crt");
    check(
        std::fs::write(dir.join("tls.key"), key.serialize_pem()),
        "tls.key",
    );
    check(std::fs::write(dir.join("ca.crt"), ca.pem()), "ca.crt");
    CertDir(dir.to_owned())
}

impl TestCerts {
    /// Writes every certificate under `dir`.
    pub fn write(dir: &Path) -> TestCerts {
        let ca = new_ca();
        let other = new_ca();
        TestCerts {
            agent: leaf(
                &dir.join("agent"),
                &ca,
                &["localhost", AGENT_DNS_NAME],
                "moco-agent",
            ),
            other_cluster: leaf(
                &dir.join("other-cluster"),
                &ca,
                &["localhost", "*.moco-other.default.svc"],
                "moco-agent",
            ),
            controller: leaf(&dir.join("controller"), &ca, &[], "moco-controller"),
            intruder: leaf(&dir.join("intruder"), &ca, &[], "intruder"),
            foreign: leaf(&dir.join("foreign"), &other, &[], "moco-controller"),
        }
    }
}

impl CertDir {
    /// A client of the agents presenting this certificate and trusting `ca` (the agents').
    pub fn client(&self, agents: &CertDir) -> moco_agent::client::AgentClient {
        let config = check(
            moco_http::tls::mtls_client_config(
                &self.0.join("tls.crt"),
                &self.0.join("tls.key"),
                &agents.0.join("ca.crt"),
            ),
            "client config",
        );
        moco_agent::client::AgentClient::new(config, std::time::Duration::from_secs(30))
    }
}
