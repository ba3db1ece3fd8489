//! mysqld's certificate renewed in place: cert-manager renews it well before it expires, the
//! kubelet replaces the mounted files, but mysqld reads them only at start. Without a reload a
//! Pod that runs longer than the certificate's lifetime (90 days by default) would present an
//! expired certificate, and every verifying connection (the manager, the replicas, the Jobs)
//! would be refused. The agent watches the files and has the server read them again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moco_adapters::mysql::{MysqlInstance, sql};
use mysql_async::prelude::Queryable;

use crate::error::AgentError;

/// The files mysqld serves TLS with, as cert-manager's Secret names them.
const FILES: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

/// The contents of the TLS files in `dir`, to compare with a later read; `None` while one is
/// missing (the kubelet swaps them all at once, so a partial read does not last).
pub fn fingerprint(dir: &Path) -> Option<Vec<Vec<u8>>> {
    FILES
        .iter()
        .map(|name| std::fs::read(dir.join(name)).ok())
        .collect()
}

/// Has `server` read its TLS files again.
pub async fn reload(server: &MysqlInstance) -> Result<(), AgentError> {
    let dialect = server.server_info().await?.dialect;
    let statement = sql::reload_tls(dialect);
    let mut conn = server.conn().await?;
    conn.query_drop(statement)
        .await
        .map_err(|e| AgentError::Remote {
            target: server.target().to_owned(),
            message: format!("{statement}: {e}"),
        })
}

/// Checks `dir` every `every` and reloads when the files changed since the last successful
/// reload (or the agent's start); a failed reload is tried again at the next check.
pub async fn run(dir: PathBuf, every: Duration, server: Arc<MysqlInstance>) {
    let mut served = fingerprint(&dir);
    loop {
        tokio::time::sleep(every).await;
        let now = fingerprint(&dir);
        if now.is_none() || now == served {
            continue;
        }
        match reload(&server).await {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "mysqld reloaded its renewed TLS certificate");
                served = now;
            }
            Err(e) => tracing::warn!(error = %e, "reloading mysqld's TLS certificate failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_changes_with_any_file_and_waits_for_all_three() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(fingerprint(dir.path()), None);
        for name in FILES {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        let first = fingerprint(dir.path()).unwrap();
        assert_eq!(fingerprint(dir.path()), Some(first.clone()));
        for name in FILES {
            std::fs::write(dir.path().join(name), "renewed").unwrap();
            assert_ne!(fingerprint(dir.path()).unwrap(), first, "{name}");
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        std::fs::remove_file(dir.path().join("tls.key")).unwrap();
        assert_eq!(fingerprint(dir.path()), None);
    }
}
