//! TLS of a local cluster (`moco local up --tls`): a CA made for the cluster, a certificate
//! per instance naming `127.0.0.1` and `localhost` (how everything reaches it), the server
//! options that serve them and refuse plain TCP (`require_secure_transport`), and what each
//! client trusts. The CA's key stays in `tls/ca-key.pem` (0600) so that `moco local scale`
//! can issue a certificate for a new instance.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::error::LocalError;
use super::files;
use super::layout::Layout;
use super::manifest::Manifest;
use moco_adapters::mysql::tls::{Authority, MysqlTls};

/// The names in every instance certificate: the host that the manager, the tools, replication
/// and the endpoints' clients connect to.
const INSTANCE_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// The CA's common name for the cluster `name`; the same every time, so that the CA loaded
/// from its files issues certificates that chain to the one made first.
fn ca_name(manifest: &Manifest) -> String {
    format!("moco local {} CA", manifest.name)
}

fn tls_err(what: impl Into<String>, e: impl std::fmt::Display) -> LocalError {
    LocalError::other(what, e.to_string())
}

/// Makes the cluster's CA (`tls/ca.pem`, `tls/ca-key.pem`).
pub fn create_authority(layout: &Layout, manifest: &Manifest) -> Result<(), LocalError> {
    let ca = Authority::generate(&ca_name(manifest)).map_err(|e| tls_err("tls: CA", e))?;
    files::create_private_dir(&layout.tls_dir())?;
    files::write_atomic(&layout.ca_key(), ca.key_pem().as_bytes(), 0o600)?;
    files::write_atomic(&layout.ca_cert(), ca.cert_pem().as_bytes(), 0o644)
}

fn authority(layout: &Layout, manifest: &Manifest) -> Result<Authority, LocalError> {
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).map_err(|e| LocalError::io(&path, "read", e))
    };
    Authority::load(
        &ca_name(manifest),
        &read(layout.ca_cert())?,
        &read(layout.ca_key())?,
    )
    .map_err(|e| tls_err(layout.ca_key().display().to_string(), e))
}

/// Issues instance `index`'s certificate into `instances/<i>/tls/` (replacing one there).
pub fn issue_instance(layout: &Layout, manifest: &Manifest, index: u32) -> Result<(), LocalError> {
    let ca = authority(layout, manifest)?;
    let names: Vec<String> = INSTANCE_NAMES.iter().map(|n| (*n).to_owned()).collect();
    let issued = ca
        .issue(&format!("{}-{index}", manifest.name), &names)
        .map_err(|e| tls_err(format!("instance {index}: tls"), e))?;
    let dir = layout.instance_tls_dir(index);
    files::create_private_dir(&dir)?;
    files::write_atomic(&dir.join("key.pem"), issued.key_pem.as_bytes(), 0o600)?;
    files::write_atomic(&dir.join("cert.pem"), issued.cert_pem.as_bytes(), 0o644)
}

/// The server options of instance `index`: its certificate, the CA, and no plain TCP.
pub fn server_options(layout: &Layout, index: u32) -> BTreeMap<String, String> {
    let dir = layout.instance_tls_dir(index);
    let path = |p: PathBuf| p.display().to_string();
    BTreeMap::from([
        ("ssl_ca".to_owned(), path(layout.ca_cert())),
        ("ssl_cert".to_owned(), path(dir.join("cert.pem"))),
        ("ssl_key".to_owned(), path(dir.join("key.pem"))),
        ("require_secure_transport".to_owned(), "ON".to_owned()),
    ])
}

/// What the project's own connections trust: the cluster's CA only, when it has TLS.
pub fn client(layout: &Layout, manifest: &Manifest) -> Result<Option<MysqlTls>, LocalError> {
    if !manifest.tls {
        return Ok(None);
    }
    let path = layout.ca_cert();
    let pem = std::fs::read(&path).map_err(|e| LocalError::io(&path, "read", e))?;
    Ok(Some(MysqlTls::new(pem)))
}

/// The CA file that the command-line tools (`mariadb-backup`, `mariadb-binlog`, `mariadb`) and
/// the servers' replication channels verify with, when the cluster has TLS.
pub fn ca_file(layout: &Layout, manifest: &Manifest) -> Option<PathBuf> {
    manifest.tls.then(|| layout.ca_cert())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::manifest::Manifest;

    /// The CA written by `create_authority` is loaded again and issues a certificate that the
    /// CA file verifies; the keys are private; the server options name the files.
    #[test]
    fn authority_and_instance_files() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path());
        let mut manifest = Manifest::example();
        manifest.tls = true;
        create_authority(&layout, &manifest).unwrap();
        issue_instance(&layout, &manifest, 2).unwrap();
        let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(layout.ca_key()), 0o600);
        assert_eq!(mode(layout.instance_tls_dir(2).join("key.pem")), 0o600);
        let cert = std::fs::read_to_string(layout.instance_tls_dir(2).join("cert.pem")).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        let opts = server_options(&layout, 2);
        assert_eq!(opts["require_secure_transport"], "ON");
        assert!(opts["ssl_cert"].ends_with("instances/2/tls/cert.pem"));
        assert!(client(&layout, &manifest).unwrap().is_some());
        assert_eq!(ca_file(&layout, &manifest), Some(layout.ca_cert()));
        manifest.tls = false;
        assert!(client(&layout, &manifest).unwrap().is_none());
        assert_eq!(ca_file(&layout, &manifest), None);
    }
}
