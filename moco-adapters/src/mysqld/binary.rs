//! Finding the server binary and its helper tools.

use std::path::{Path, PathBuf};

use super::MysqldError;
use crate::failure::{CommandFailed, tail};

/// The environment variable naming the server binary tests and `moco local` use.
pub const MYSQLD_ENV: &str = "MOCO_TEST_MYSQLD";

/// Directories searched after `PATH`: distributions put the server in `sbin`.
const EXTRA_DIRS: &[&str] = &[
    "/usr/sbin",
    "/usr/local/sbin",
    "/usr/local/mysql/bin",
    "/usr/bin",
];

/// Server names, MariaDB first (on MariaDB installs `mysqld` is a symlink to it).
const SERVER_NAMES: &[&str] = &["mariadbd", "mysqld"];

/// The server family of a binary, from its `--version` output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// `mariadbd` (MariaDB).
    Mariadb,
    /// Oracle MySQL `mysqld`.
    Mysql,
}

/// A server binary that answered `--version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerBinary {
    path: PathBuf,
    kind: ServerKind,
    version: String,
}

impl ServerBinary {
    /// Finds the server: `explicit` if given, else `$MOCO_TEST_MYSQLD`, else `mariadbd` or
    /// `mysqld` in `PATH`, `/usr/sbin`, `/usr/local/sbin`, `/usr/local/mysql/bin`.
    pub fn find(explicit: Option<&Path>) -> Result<Self, MysqldError> {
        if let Some(path) = explicit {
            return Self::from_path(path);
        }
        if let Some(path) = std::env::var_os(MYSQLD_ENV).filter(|p| !p.is_empty()) {
            return Self::from_path(Path::new(&path));
        }
        let dirs = search_dirs();
        for name in SERVER_NAMES {
            for dir in &dirs {
                let candidate = dir.join(name);
                if is_executable(&candidate) {
                    return Self::from_path(&candidate);
                }
            }
        }
        Err(MysqldError::NotFound {
            what: SERVER_NAMES.join(" or "),
            searched: dirs,
        })
    }

    /// The family and version, as tests name the server that ran (`Mariadb 10.11.14`).
    pub fn label(&self) -> String {
        format!("{:?} {}", self.kind, self.version)
    }

    /// Uses the binary at `path`, probing `--version` to learn its family.
    pub fn from_path(path: &Path) -> Result<Self, MysqldError> {
        let path = if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir()
                .map_err(|source| {
                    MysqldError::io(path.to_owned(), "resolve relative server path", source)
                })?
                .join(path)
        };
        let output = std::process::Command::new(&path)
            .arg("--version")
            .output()
            .map_err(|source| MysqldError::io(path.clone(), "run --version", source))?;
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() || text.trim().is_empty() {
            return Err(MysqldError::Command(CommandFailed {
                command: format!("{} --version", path.display()),
                status: output.status.to_string(),
                output_tail: tail(&String::from_utf8_lossy(&output.stderr), 10),
            }));
        }
        let kind = if text.contains("MariaDB") {
            ServerKind::Mariadb
        } else {
            ServerKind::Mysql
        };
        Ok(ServerBinary {
            path,
            kind,
            version: parse_version(&text),
        })
    }

    /// A binary that is never run (unit tests of path handling).
    #[cfg(test)]
    pub(crate) fn for_tests(path: &Path, kind: ServerKind) -> Self {
        ServerBinary {
            path: path.to_owned(),
            kind,
            version: String::new(),
        }
    }

    /// The binary.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// MariaDB or MySQL.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// The version number from `--version` (e.g. `10.11.19-MariaDB-0+deb12u1`, `8.4.4`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// A helper program that ships with the server (`mariadb-install-db`, `mariadb-backup`,
    /// `mbstream`): looked up next to the server, in `../bin`, then in `PATH` and the usual
    /// directories.
    pub fn tool(&self, name: &str) -> Result<PathBuf, MysqldError> {
        tool_beside(&self.path, name)
    }
}

/// The helper tool `name` of the server at `server` (see [`ServerBinary::tool`]), without
/// running the server to learn its version: `--version` costs 0.17 s, a twentieth of a 1 GB
/// backup.
pub fn tool_beside(server: &Path, name: &str) -> Result<PathBuf, MysqldError> {
    let mut dirs = Vec::new();
    if let Some(dir) = server.parent() {
        dirs.push(dir.to_owned());
        if let Some(prefix) = dir.parent() {
            dirs.push(prefix.join("bin"));
            dirs.push(prefix.join("scripts"));
        }
    }
    dirs.extend(search_dirs());
    dirs.dedup();
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or(MysqldError::NotFound {
            what: name.to_owned(),
            searched: dirs,
        })
}

/// The first of `names` found as a program in `PATH` or the usual directories.
pub fn find_program(names: &[&str]) -> Option<PathBuf> {
    let dirs = search_dirs();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| is_executable(p))
}

fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for extra in EXTRA_DIRS {
        let extra = PathBuf::from(extra);
        if !dirs.contains(&extra) {
            dirs.push(extra);
        }
    }
    dirs
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for …` / `mysqld  Ver 8.4.4 for Linux …`.
fn parse_version(text: &str) -> String {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "Ver"
            && let Some(v) = words.next()
        {
            return v.to_owned();
        }
    }
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_the_word_after_ver() {
        assert_eq!(
            parse_version(
                "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64"
            ),
            "10.11.19-MariaDB-0+deb12u1"
        );
        assert_eq!(
            parse_version(
                "/usr/sbin/mysqld  Ver 8.4.4 for Linux on x86_64 (MySQL Community Server - GPL)"
            ),
            "8.4.4"
        );
    }

    #[test]
    fn explicit_non_server_path_is_an_error_with_context() {
        let err = ServerBinary::from_path(Path::new("/nonexistent/mysqld")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/mysqld"), "{err}");
        let err = ServerBinary::from_path(Path::new("/bin/false")).unwrap_err();
        assert!(err.to_string().contains("/bin/false --version"), "{err}");
    }

    /// The tool is found beside a server that is never run: here the "server" is a script
    /// that records being run, and it must not be.
    #[test]
    fn a_tool_beside_the_server_is_found_without_running_the_server() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let sbin = dir.path().join("sbin");
        std::fs::create_dir_all(&sbin).unwrap();
        let ran = dir.path().join("ran");
        let server = sbin.join("mariadbd");
        let tool = sbin.join("mariadb-backup-for-this-test");
        let script = format!("#!/bin/sh\ntouch {}\n", ran.display());
        for path in [&server, &tool] {
            std::fs::write(path, &script).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(
            tool_beside(&server, "mariadb-backup-for-this-test").unwrap(),
            tool
        );
        assert!(!ran.exists(), "the server was run");
        let err = tool_beside(&server, "no-such-tool-for-this-test").unwrap_err();
        assert!(
            err.to_string().contains("no-such-tool-for-this-test"),
            "{err}"
        );
    }
}
