//! How a Job's connections to a cluster with TLS (`moco-rs/tls`) verify its servers: the SQL
//! connections trust the CA of `--mysql-tls-ca` only, and `mariadb-binlog` gets the same file
//! with the name check on. Without the flag, everything connects as before.

use std::path::{Path, PathBuf};

use moco_adapters::mysql::ConnectOptions;
use moco_adapters::mysql::tls::CaFile;

use super::JobError;

/// The CA the servers are verified with, when the cluster has TLS.
#[derive(Clone, Debug, Default)]
pub struct ServerTls {
    ca: Option<CaFile>,
}

impl ServerTls {
    /// Reads `--mysql-tls-ca`; an unreadable file is an error naming the flag.
    pub fn from_flag(path: Option<&Path>) -> Result<Self, JobError> {
        let ca = path
            .map(CaFile::read)
            .transpose()
            .map_err(|e| JobError::input("--mysql-tls-ca", e.to_string()))?;
        Ok(ServerTls { ca })
    }

    /// `options`, verifying the server with the CA when there is one.
    pub fn apply(&self, options: ConnectOptions) -> ConnectOptions {
        match &self.ca {
            Some(ca) => options.with_tls(ca.tls.clone()),
            None => options,
        }
    }

    /// The CA file for `mariadb-binlog` and `mariadb`, when there is one.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.ca.as_ref().map(|ca| ca.path.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_ca_names_the_flag_and_no_flag_changes_nothing() {
        let e = ServerTls::from_flag(Some(Path::new("/nonexistent/ca.crt")))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--mysql-tls-ca: /nonexistent/ca.crt"), "{e}");
        let none = ServerTls::from_flag(None).unwrap();
        assert!(none.ca_file().is_none());
        let creds = moco_cluster::ports::Credentials {
            user: "u".into(),
            password: "p".into(),
        };
        let options = none.apply(ConnectOptions::new("h", 1, &creds));
        assert!(options.tls.is_none());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, "PEM").unwrap();
        let some = ServerTls::from_flag(Some(&path)).unwrap();
        assert_eq!(some.ca_file(), Some(path));
        let options = some.apply(ConnectOptions::new("h", 1, &creds));
        assert_eq!(options.tls.unwrap().ca_pem, b"PEM");
    }
}
