//! The two failures every adapter of this crate and the in-pod agent report the same way, so
//! that each error enum holds them instead of writing them again: an operation on a file,
//! directory or program that failed ([`IoError`]), and a program that exited with a failure
//! ([`CommandFailed`], whose output ends with [`tail`] or [`file_tail`]). A floor under
//! [`crate::mysqld`], [`crate::instance`] and `moco-local`'s platform.

use std::path::PathBuf;

/// A file, directory or process operation that failed, with the path it concerned.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {source}", path = path.display())]
pub struct IoError {
    /// The file, directory or program.
    pub path: PathBuf,
    /// The operation (`read`, `create`, `spawn`, …).
    pub what: &'static str,
    /// The OS error.
    pub source: std::io::Error,
}

impl IoError {
    /// The failure of `what` on `path`.
    pub fn new(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> Self {
        IoError {
            path: path.into(),
            what,
            source,
        }
    }
}

/// A program (a tool beside the server, or the server itself) that exited with a failure.
#[derive(Debug, thiserror::Error)]
#[error("`{command}` failed ({status}):\n{output_tail}")]
pub struct CommandFailed {
    /// The command line (no passwords).
    pub command: String,
    /// Its exit status, or "timed out after N s".
    pub status: String,
    /// The end of its output (and of the server's log).
    pub output_tail: String,
}

/// The last `lines` lines of `text`, for error messages.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last 15 lines of the file at `path` (empty when it cannot be read).
pub fn file_tail(path: &std::path::Path) -> String {
    tail(&std::fs::read_to_string(path).unwrap_or_default(), 15)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages the error enums showed before they shared these types.
    #[test]
    fn messages_name_the_path_and_the_command() {
        let e = IoError::new("/data/my.cnf", "read", std::io::Error::other("denied"));
        assert_eq!(e.to_string(), "read /data/my.cnf: denied");
        assert_eq!(
            std::error::Error::source(&e).map(ToString::to_string),
            Some("denied".to_owned())
        );
        let c = CommandFailed {
            command: "mariadb-install-db --datadir=/d".to_owned(),
            status: "exit status: 1".to_owned(),
            output_tail: "no space".to_owned(),
        };
        assert_eq!(
            c.to_string(),
            "`mariadb-install-db --datadir=/d` failed (exit status: 1):\nno space"
        );
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
