//! What a tarball from the bucket may leave in the work dir once `tar` has unpacked it: files
//! and directories only. GNU tar already refuses `..` and strips a leading `/`, and the
//! extraction names its one top directory (`dump`, `binlog`), but a symlink or a hard link
//! is a legal member: `dump/x.tsv.zst -> /var/run/secrets/…/token` would have `mysqlsh` load
//! a file of the Job's Pod into a table. MOCO's tarballs hold none, so any is refused.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// An entry of an unpacked tarball that is not a plain file or directory.
#[derive(Debug, thiserror::Error)]
pub enum UnpackedError {
    /// Not a plain file or directory.
    #[error("entry {entry:?} is {kind}; a backup's tarball holds only files and directories")]
    Entry {
        /// The entry, relative to the directory unpacked into.
        entry: String,
        /// What it is (`a symbolic link`, `a hard link`, …).
        kind: &'static str,
    },
    /// The tree could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Checks every entry under `top` (a directory a tarball was unpacked into `base`; entries
/// are named relative to `base`), without following a symlink. A missing `top` is fine: the
/// tarball had nothing under it, which the step reading it reports.
pub fn check_tree(base: &Path, top: &Path) -> Result<(), UnpackedError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UnpackedError::Io { path, source }
    };
    let mut stack = match std::fs::symlink_metadata(top) {
        Ok(_) => vec![top.to_path_buf()],
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(top)(e)),
    };
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        let kind = meta.file_type();
        let refused = if kind.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(io(&path))? {
                stack.push(entry.map_err(io(&path))?.path());
            }
            None
        } else if kind.is_symlink() {
            Some("a symbolic link")
        } else if kind.is_file() && meta.nlink() > 1 {
            Some("a hard link")
        } else if kind.is_file() {
            None
        } else if kind.is_fifo() || kind.is_socket() {
            Some("a pipe or socket")
        } else {
            Some("a device")
        };
        if let Some(kind) = refused {
            return Err(UnpackedError::Entry {
                entry: path
                    .strip_prefix(base)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
                kind,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_pass_links_are_named() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path().join("binlog");
        std::fs::create_dir_all(top.join("sub")).unwrap();
        std::fs::write(top.join("binlog.000001"), b"x").unwrap();
        std::fs::write(top.join("sub/f"), b"y").unwrap();
        check_tree(root.path(), &top).unwrap();
        check_tree(root.path(), &root.path().join("absent")).unwrap();

        std::fs::hard_link(top.join("sub/f"), top.join("h")).unwrap();
        let e = check_tree(root.path(), &top).unwrap_err().to_string();
        assert!(e.contains("is a hard link"), "{e}");
        std::fs::remove_file(top.join("h")).unwrap();

        std::os::unix::fs::symlink("/etc", top.join("sub/l")).unwrap();
        let e = check_tree(root.path(), &top).unwrap_err().to_string();
        assert_eq!(
            e,
            "entry \"binlog/sub/l\" is a symbolic link; a backup's tarball holds only files \
             and directories"
        );
    }
}
