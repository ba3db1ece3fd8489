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
    /// `tmpdir`, if set (the first entry of a `:`-separated list).
    pub tmpdir: Option<PathBuf>,
}

/// Values collected while reading a my.cnf and the files it includes (later lines win).
#[derive(Default)]
struct Collected {
    datadir: Option<PathBuf>,
    pid_file: Option<PathBuf>,
    port: Option<u16>,
    bind_address: Option<String>,
    socket: Option<PathBuf>,
    log_error: Option<PathBuf>,
    user: Option<String>,
    tmpdir: Option<PathBuf>,
}

/// How deep `!include` may nest (the servers stop at 10 as well).
const MAX_INCLUDE_DEPTH: usize = 10;

impl MycnfSettings {
    /// Parses my.cnf text; `source` names the file in errors. `!include FILE` and
    /// `!includedir DIR` (its `*.cnf` files, sorted) are followed as the server does, so
    /// settings in a per-instance snippet (`user`, `bind_address`) are seen; write those
    /// files before parsing.
    pub fn parse(text: &str, source: &Path) -> Result<Self, MysqldError> {
        let mut c = Collected::default();
        collect(text, source, &mut c, 0)?;
        let missing = |key: &str| MysqldError::Config {
            path: source.to_owned(),
            message: format!("no `{key}` in the [mysqld]/[mariadbd] group"),
        };
        let datadir = c.datadir.ok_or_else(|| missing("datadir"))?;
        if !datadir.is_absolute() {
            return Err(MysqldError::Config {
                path: source.to_owned(),
                message: format!("datadir {} must be absolute", datadir.display()),
            });
        }
        let resolve = |p: PathBuf| {
            if p.is_absolute() { p } else { datadir.join(p) }
        };
        let pid_file = resolve(c.pid_file.ok_or_else(|| missing("pid_file"))?);
        Ok(MycnfSettings {
            pid_file,
            port: c.port.unwrap_or(3306),
            bind_address: c.bind_address,
            socket: c.socket.map(resolve),
            log_error: c.log_error.map(resolve),
            user: c.user,
            tmpdir: c.tmpdir,
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

fn collect(text: &str, source: &Path, c: &mut Collected, depth: usize) -> Result<(), MysqldError> {
    let mut in_server_group = false;
    for (number, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(directive) = line.strip_prefix('!') {
            include(directive, source, c, depth)?;
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
            "datadir" => c.datadir = Some(PathBuf::from(value)),
            "pid_file" => c.pid_file = Some(PathBuf::from(value)),
            "port" => {
                c.port = Some(value.parse::<u16>().map_err(|_| MysqldError::Config {
                    path: source.to_owned(),
                    message: format!("line {}: port {value:?} is not a TCP port", number + 1),
                })?)
            }
            "bind_address" => c.bind_address = Some(value),
            "socket" => c.socket = Some(PathBuf::from(value)),
            "log_error" if !value.is_empty() => c.log_error = Some(PathBuf::from(value)),
            "user" => c.user = Some(value),
            "tmpdir" if !value.is_empty() => {
                c.tmpdir = Some(PathBuf::from(value.split(':').next().unwrap_or(&value)))
            }
            _ => {}
        }
    }
    Ok(())
}

fn include(
    directive: &str,
    source: &Path,
    c: &mut Collected,
    depth: usize,
) -> Result<(), MysqldError> {
    let (word, arg) = directive
        .split_once(char::is_whitespace)
        .unwrap_or((directive, ""));
    let target = PathBuf::from(arg.trim());
    if depth >= MAX_INCLUDE_DEPTH {
        return Err(MysqldError::Config {
            path: source.to_owned(),
            message: format!("!{word} nested more than {MAX_INCLUDE_DEPTH} deep"),
        });
    }
    let files = match word {
        "include" => vec![target],
        "includedir" => {
            // A missing directory is skipped, as the servers do.
            let Ok(entries) = std::fs::read_dir(&target) else {
                return Ok(());
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "cnf"))
                .collect();
            files.sort();
            files
        }
        _ => return Ok(()),
    };
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|source| MysqldError::io(file.clone(), "read included my.cnf", source))?;
        collect(&text, &file, c, depth + 1)?;
    }
    Ok(())
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
tmpdir=/d/tmp:/e/tmp
!includedir /nonexistent/moco/conf.d
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
        assert_eq!(s.tmpdir, Some(PathBuf::from("/d/tmp")));
    }

    #[test]
    fn includes_are_followed_and_later_values_win() {
        let tmp = tempfile::tempdir().unwrap();
        let conf_d = tmp.path().join("conf.d");
        std::fs::create_dir(&conf_d).unwrap();
        std::fs::write(conf_d.join("b.cnf"), "[mariadbd]\nuser = root\nport = 3\n").unwrap();
        std::fs::write(
            conf_d.join("a.cnf"),
            "[mariadbd]\nport = 2\nbind_address = 127.0.0.9\n",
        )
        .unwrap();
        std::fs::write(conf_d.join("ignored.txt"), "[mariadbd]\nport = 9\n").unwrap();
        let text = format!(
            "[mariadbd]\ndatadir=/d\npid_file=/p\nport=1\n!includedir {}\n!includedir /nonexistent\n",
            conf_d.display()
        );
        let s = MycnfSettings::parse(&text, Path::new("/m.cnf")).unwrap();
        assert_eq!(s.port, 3);
        assert_eq!(s.user.as_deref(), Some("root"));
        assert_eq!(s.probe_host(), "127.0.0.9");
        let err =
            MycnfSettings::parse("!include /nonexistent/x.cnf\n", Path::new("/m.cnf")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/x.cnf"), "{err}");
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
