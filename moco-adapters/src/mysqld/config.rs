//! The few my.cnf settings the launcher needs to find a server's files and port.
//!
//! The launcher takes my.cnf *text* (whoever generates it owns its content) and reads back only
//! what it must know to manage the process: where the data, pid file and socket live and which
//! address to probe. Everything else is left to the server.

use std::path::{Path, PathBuf};

use super::MysqldError;

/// Option groups a MySQL or MariaDB server reads (`[mysqld]`, `[mariadbd]`, …).
const SERVER_GROUPS: &[&str] = &["mysqld", "mariadbd", "server", "mariadb"];

/// Settings read from the `[mysqld]`-family groups of a my.cnf.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MycnfSettings {
    /// `datadir` (absolute).
    pub datadir: PathBuf,
    /// `pid_file`, resolved against `datadir` when relative.
    pub pid_file: PathBuf,
    /// `port` (3306 when absent).
    pub port: u16,
    /// `bind_address`, if set.
    pub bind_address: Option<String>,
    /// `socket`, resolved against `datadir` when relative.
    pub socket: Option<PathBuf>,
    /// `log_error`, resolved against `datadir` when relative.
    pub log_error: Option<PathBuf>,
    /// `user`, if set (a server started as root needs one).
    pub user: Option<String>,
}

impl MycnfSettings {
    /// Parses my.cnf text; `source` names the file in errors.
    pub fn parse(text: &str, source: &Path) -> Result<Self, MysqldError> {
        let mut in_server_group = false;
        let mut datadir = None;
        let mut pid_file = None;
        let mut port = None;
        let mut bind_address = None;
        let mut socket = None;
        let mut log_error = None;
        let mut user = None;
        for (number, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('!') {
                // !include / !includedir: the launcher only reads the main file.
                continue;
            }
            if let Some(group) = line.strip_prefix('[') {
                let name = group.trim_end_matches(']').trim().to_ascii_lowercase();
                in_server_group = SERVER_GROUPS.contains(&name.as_str());
                continue;
            }
            if !in_server_group {
                continue;
            }
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim(), unquote(v.trim())),
                None => (line, String::new()),
            };
            let key = key.replace('-', "_").to_ascii_lowercase();
            let key = key.strip_prefix("loose_").unwrap_or(&key).to_owned();
            match key.as_str() {
                "datadir" => datadir = Some(PathBuf::from(value)),
                "pid_file" => pid_file = Some(PathBuf::from(value)),
                "port" => {
                    port = Some(value.parse::<u16>().map_err(|_| MysqldError::Config {
                        path: source.to_owned(),
                        message: format!("line {}: port {value:?} is not a TCP port", number + 1),
                    })?)
                }
                "bind_address" => bind_address = Some(value),
                "socket" => socket = Some(PathBuf::from(value)),
                "log_error" if !value.is_empty() => log_error = Some(PathBuf::from(value)),
                "user" => user = Some(value),
                _ => {}
            }
        }
        let missing = |key: &str| MysqldError::Config {
            path: source.to_owned(),
            message: format!("no `{key}` in the [mysqld]/[mariadbd] group"),
        };
        let datadir = datadir.ok_or_else(|| missing("datadir"))?;
        if !datadir.is_absolute() {
            return Err(MysqldError::Config {
                path: source.to_owned(),
                message: format!("datadir {} must be absolute", datadir.display()),
            });
        }
        let resolve = |p: PathBuf| {
            if p.is_absolute() { p } else { datadir.join(p) }
        };
        let pid_file = resolve(pid_file.ok_or_else(|| missing("pid_file"))?);
        Ok(MycnfSettings {
            pid_file,
            port: port.unwrap_or(3306),
            bind_address,
            socket: socket.map(resolve),
            log_error: log_error.map(resolve),
            user,
            datadir,
        })
    }

    /// The address a client on this host uses to reach the server: `bind_address` unless it
    /// is a wildcard, else `127.0.0.1`.
    pub fn probe_host(&self) -> String {
        match self.bind_address.as_deref() {
            None | Some("" | "*" | "0.0.0.0" | "::" | "0.0.0.0,::") => "127.0.0.1".to_owned(),
            Some(other) => other.split(',').next().unwrap_or(other).trim().to_owned(),
        }
    }
}

fn unquote(value: &str) -> String {
    // An unquoted value ends at a `#` comment.
    let value = if value.starts_with('"') || value.starts_with('\'') {
        value
    } else {
        value.split(" #").next().unwrap_or(value).trim()
    };
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return value[1..value.len() - 1].to_owned();
        }
    }
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_server_groups_only_and_resolves_relative_paths() {
        let text = "\
[client]
port=1
socket=/tmp/client.sock
[mariadbd]
user = root
datadir=/d/data
pid-file = mysqld.pid
loose-port=13306   # comment
socket=\"/d/mysqld.sock\"
log_error=error.log
bind_address=127.0.0.2
!includedir /etc/mysql/conf.d
[mysqldump]
port=2
";
        let s = MycnfSettings::parse(text, Path::new("/d/my.cnf")).unwrap();
        assert_eq!(s.datadir, PathBuf::from("/d/data"));
        assert_eq!(s.pid_file, PathBuf::from("/d/data/mysqld.pid"));
        assert_eq!(s.port, 13306);
        assert_eq!(s.socket, Some(PathBuf::from("/d/mysqld.sock")));
        assert_eq!(s.log_error, Some(PathBuf::from("/d/data/error.log")));
        assert_eq!(s.user.as_deref(), Some("root"));
        assert_eq!(s.probe_host(), "127.0.0.2");
    }

    #[test]
    fn missing_or_bad_settings_are_errors_naming_the_file() {
        let err = MycnfSettings::parse("[mysqld]\npid_file=/p\n", Path::new("/x.cnf")).unwrap_err();
        assert!(
            err.to_string().contains("/x.cnf") && err.to_string().contains("datadir"),
            "{err}"
        );
        let err = MycnfSettings::parse("[mysqld]\ndatadir=rel\npid_file=/p\n", Path::new("/x.cnf"))
            .unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
        let err = MycnfSettings::parse(
            "[mysqld]\ndatadir=/d\npid_file=/p\nport=99999\n",
            Path::new("/x.cnf"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 4"), "{err}");
        let s = MycnfSettings::parse(
            "[server]\ndatadir=/d\npid_file=/p\nbind-address=0.0.0.0\n",
            Path::new("/x"),
        )
        .unwrap();
        assert_eq!((s.port, s.probe_host().as_str()), (3306, "127.0.0.1"));
    }
}
