//! Where an archiving round reads the primary's closed binlog files: beside the server (the
//! `moco local` manager process, which shares its disk), or through the server with
//! `mariadb-binlog --read-from-remote-server --raw` (the backup Job, which runs in a Pod of
//! its own). The raw copy is the file as the server wrote it, so the archive and its replay
//! are the same either way.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use moco_adapters::instance::clone::{log_handle, write_private};
use moco_cluster::ports::Credentials;
use moco_core::option_file::{quote_value, tls_client_options};
use tokio::process::Command;

/// How a round gets at the closed binlog files.
#[derive(Clone, Debug)]
pub enum BinlogFiles {
    /// On this machine: in the directory given, else in that of `@@log_bin_basename`.
    Local(Option<PathBuf>),
    /// Through the server.
    Remote(RemoteFetch),
}

/// Fetching binlog files through the server they are on.
#[derive(Clone)]
pub struct RemoteFetch {
    /// `mariadb-binlog`.
    pub tool: PathBuf,
    /// Where fetched files are kept while they are stored (each is removed afterwards).
    pub scratch: PathBuf,
    /// The server's host.
    pub host: String,
    /// Its SQL port.
    pub port: u16,
    /// An account with `REPLICATION SLAVE` (`moco-backup`).
    pub credentials: Credentials,
    /// With TLS, the CA file the server is verified with.
    pub ssl_ca: Option<PathBuf>,
}

impl std::fmt::Debug for RemoteFetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFetch")
            .field("tool", &self.tool)
            .field("scratch", &self.scratch)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.credentials.user)
            .finish_non_exhaustive()
    }
}

/// The arguments that copy binlog file `name` from the server into `scratch`, the option file
/// (with the password) first, as the tool requires.
pub fn fetch_args(fetch: &RemoteFetch, options: &Path, name: &str) -> Vec<String> {
    vec![
        format!("--defaults-extra-file={}", options.display()),
        "--read-from-remote-server".into(),
        "--raw".into(),
        format!("--host={}", fetch.host),
        format!("--port={}", fetch.port),
        "--protocol=tcp".into(),
        format!("--user={}", fetch.credentials.user),
        // A directory prefix: the file keeps its name under it.
        format!("--result-file={}/", fetch.scratch.display()),
        name.to_owned(),
    ]
}

impl RemoteFetch {
    /// Copies the closed file `name` into the scratch directory; returns its path there.
    pub async fn fetch(&self, name: &str) -> Result<PathBuf, String> {
        if name.contains('/') || name.starts_with('.') {
            return Err(format!("{name:?} is not a binlog file name"));
        }
        std::fs::create_dir_all(&self.scratch)
            .map_err(|e| format!("{}: {e}", self.scratch.display()))?;
        let options = self.scratch.join("fetch.cnf");
        write_private(
            &options,
            &format!(
                "[client]\npassword={}\n{}",
                quote_value(&self.credentials.password),
                tls_client_options(self.ssl_ca.as_deref())
            ),
        )
        .map_err(|e| e.to_string())?;
        let log = self.scratch.join("fetch.log");
        let status = Command::new(&self.tool)
            .args(fetch_args(self, &options, name))
            .stdin(Stdio::null())
            .stdout(log_handle(&log).map_err(|e| e.to_string())?)
            .stderr(log_handle(&log).map_err(|e| e.to_string())?)
            .kill_on_drop(true)
            .status()
            .await
            .map_err(|e| format!("{}: {e}", self.tool.display()))?;
        let _ = std::fs::remove_file(&options);
        let path = self.scratch.join(name);
        if !status.success() || !path.is_file() {
            let _ = std::fs::remove_file(&path);
            return Err(format!(
                "fetching {name} from {}:{} failed ({status}): {}",
                self.host,
                self.port,
                crate::guard::tool_output::log_excerpt(&log)
            ));
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_stays_off_the_command_line() {
        let fetch = RemoteFetch {
            tool: "mariadb-binlog".into(),
            scratch: "/work/binlog".into(),
            host: "moco-db-0.moco-db.ns.svc".into(),
            port: 3306,
            credentials: Credentials {
                user: "moco-backup".into(),
                password: "s3cret".into(),
            },
            ssl_ca: None,
        };
        let args = fetch_args(&fetch, Path::new("/work/binlog/fetch.cnf"), "binlog.000007");
        assert_eq!(args[0], "--defaults-extra-file=/work/binlog/fetch.cnf");
        assert!(args.iter().all(|a| !a.contains("s3cret")), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("binlog.000007"));
        assert!(args.contains(&"--result-file=/work/binlog/".to_owned()));
        assert!(format!("{fetch:?}").find("s3cret").is_none());
    }
}
