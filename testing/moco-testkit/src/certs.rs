//! A throwaway CA and a webhook serving certificate, as cert-manager would mount them.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::CertificateDer;

use super::check;

/// Writes a server certificate for `localhost` (and the webhook Service's name) signed by a new
/// CA as `tls.crt`/`tls.key` in `dir`; returns the CA certificate to trust.
pub fn write_certificates(dir: &Path) -> CertificateDer<'static> {
    let mut ca_params = check(CertificateParams::new(Vec::<String>::new()), "CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = check(
        CertifiedIssuer::self_signed(ca_params, check(KeyPair::generate(), "CA key")),
        "CA",
    );
    let key = check(KeyPair::generate(), "leaf key");
    let leaf_params = check(
        CertificateParams::new(vec![
            "localhost".to_owned(),
            "moco-webhook-service.moco-system.svc".to_owned(),
        ]),
        "leaf params",
    );
    let leaf = check(leaf_params.signed_by(&key, &ca), "leaf");
    check(
        std::fs::write(dir.join("tls.crt"), leaf.pem()),
        "write tls.crt",
    );
    check(
        std::fs::write(dir.join("tls.key"), key.serialize_pem()),
        "write tls.key",
    );
    ca.der().clone()
}
