//! Durable file helpers: atomic replacement (temp file, fsync, rename, fsync of the directory),
//! JSON documents, append-only JSON lines, and an advisory lock.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::LocalError;
use moco_adapters::modes;

/// Replaces `path` with `bytes` atomically, with `mode` ([`modes::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), LocalError> {
    modes::write_atomic(path, bytes, mode).map_err(|e| LocalError::io(path, "replace", e))
}

/// Makes every file and directory this process and its children create private to the user
/// (umask `077`), whatever umask the user runs with. Under umask `000`, my.cnf came out
/// world-writable and MariaDB ignored it, so `up` failed far from the cause; the files and
/// directories `moco local` writes also get explicit modes, and this covers the rest (the
/// servers' own files, mariadb-install-db's). Returns the previous umask.
pub fn private_umask() -> u32 {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077)).as_raw_mode()
}

/// Creates `dir` (and missing parents) and gives `dir` itself mode `0700`.
pub fn create_private_dir(dir: &Path) -> Result<(), LocalError> {
    moco_adapters::modes::private_dir(dir).map_err(|e| LocalError::io(dir, "create", e))
}

/// Flushes a directory entry list to disk (after a rename or create).
pub fn sync_dir(dir: &Path) -> Result<(), LocalError> {
    modes::sync_dir(dir).map_err(|e| LocalError::io(dir, "fsync directory", e))
}

/// Writes `value` as pretty JSON to `path` atomically with `mode`.
pub fn write_json<T: Serialize>(path: &Path, value: &T, mode: u32) -> Result<(), LocalError> {
    let mut text = serde_json::to_vec_pretty(value).map_err(|source| LocalError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    text.push(b'\n');
    write_atomic(path, &text, mode)
}

/// Reads a JSON document.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, LocalError> {
    let text = fs::read(path).map_err(|e| LocalError::io(path, "read", e))?;
    serde_json::from_slice(&text).map_err(|source| LocalError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a JSON document, `None` when the file does not exist.
pub fn read_json_opt<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, LocalError> {
    match fs::read(path) {
        Ok(text) => serde_json::from_slice(&text)
            .map(Some)
            .map_err(|source| LocalError::Json {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LocalError::io(path, "read", e)),
    }
}

/// Appends one JSON value as a line (JSON Lines) and flushes it to disk.
pub fn append_json_line<T: Serialize>(path: &Path, value: &T) -> Result<(), LocalError> {
    let mut line = serde_json::to_vec(value).map_err(|source| LocalError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    line.push(b'\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)
        .map_err(|e| LocalError::io(path, "open for append", e))?;
    // One write call with O_APPEND keeps concurrent writers' lines whole.
    file.write_all(&line)
        .map_err(|e| LocalError::io(path, "append", e))?;
    file.sync_data()
        .map_err(|e| LocalError::io(path, "fsync", e))
}

/// An exclusive advisory lock (`flock`) on a lock file, released on drop.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    fn open(path: &Path) -> Result<File, LocalError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map_err(|e| LocalError::io(path, "open lock file", e))
    }

    /// Blocks until the lock on `path` (created if missing) is held.
    pub fn acquire(path: &Path) -> Result<Self, LocalError> {
        let file = Self::open(path)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| LocalError::io(path, "lock", e.into()))?;
        Ok(FileLock { _file: file })
    }

    /// Takes the lock if nobody holds it; `None` when another process does.
    pub fn try_acquire(path: &Path) -> Result<Option<Self>, LocalError> {
        let file = Self::open(path)?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(FileLock { _file: file })),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
            Err(e) => Err(LocalError::io(path, "lock", e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn atomic_write_replaces_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.json");
        write_atomic(&path, b"one", 0o600).unwrap();
        write_atomic(&path, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn json_lines_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        append_json_line(&path, &serde_json::json!({"a": 1})).unwrap();
        append_json_line(&path, &serde_json::json!({"a": 2})).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"a\":2}\n");
    }

    #[test]
    fn try_lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = FileLock::try_acquire(&path).unwrap();
        assert!(held.is_some());
        assert!(FileLock::try_acquire(&path).unwrap().is_none());
        drop(held);
        assert!(FileLock::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn missing_json_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let v: Option<serde_json::Value> = read_json_opt(&dir.path().join("nope")).unwrap();
        assert!(v.is_none());
    }
}
