//! `hostPath`: the host's path itself, checked (or made) as its `type` says, as the kubelet's
//! hostPath plugin does.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a host path does not do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPathError {
    /// What is wrong.
    pub reason: String,
    /// Whether it is missing (it may appear later) rather than of the wrong kind.
    pub missing: bool,
}

fn describe(ft: fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_file() {
        "a file"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "something else"
    }
}

/// Checks `path` against `type_`, making it for the `*OrCreate` types:
/// `DirectoryOrCreate` (0755, parents too), `FileOrCreate` (an empty 0644 file; its parent must
/// exist), `Directory`, `File`, `Socket`, `CharDevice`, `BlockDevice`. An empty or unset type
/// checks nothing; a missing path is then made a directory, as containerd does for a missing
/// bind-mount source.
pub fn ensure(path: &Path, type_: Option<&str>) -> Result<(), HostPathError> {
    let io = |e: io::Error| HostPathError {
        reason: e.to_string(),
        missing: false,
    };
    let type_ = type_.unwrap_or_default();
    let found = match fs::metadata(path) {
        Ok(m) => Some(m.file_type()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let expect = |want: &str, ok: fn(&fs::FileType) -> bool| match found {
        Some(ft) if ok(&ft) => Ok(()),
        Some(ft) => Err(HostPathError {
            reason: format!("is {}, not {want} (type {type_})", describe(ft)),
            missing: false,
        }),
        None => Err(HostPathError {
            reason: format!("does not exist (type {type_})"),
            missing: true,
        }),
    };
    match type_ {
        "" => {
            if found.is_none() {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(path)
                    .map_err(io)?;
            }
            Ok(())
        }
        "DirectoryOrCreate" => {
            if found.is_none() {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(path)
                    .map_err(io)?;
                return Ok(());
            }
            expect("a directory", fs::FileType::is_dir)
        }
        "FileOrCreate" => {
            if found.is_none() {
                fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o644)
                    .open(path)
                    .map_err(|e| HostPathError {
                        missing: e.kind() == io::ErrorKind::NotFound,
                        reason: format!("cannot be created: {e}"),
                    })?;
                return Ok(());
            }
            expect("a file", fs::FileType::is_file)
        }
        "Directory" => expect("a directory", fs::FileType::is_dir),
        "File" => expect("a file", fs::FileType::is_file),
        "Socket" => expect("a socket", FileTypeExt::is_socket),
        "CharDevice" => expect("a character device", FileTypeExt::is_char_device),
        "BlockDevice" => expect("a block device", FileTypeExt::is_block_device),
        other => Err(HostPathError {
            reason: format!("unknown type {other:?}"),
            missing: false,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_honoured() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("a/b");
        ensure(&d, Some("DirectoryOrCreate")).unwrap();
        assert!(d.is_dir());
        ensure(&d, Some("Directory")).unwrap();
        let f = tmp.path().join("a/f");
        ensure(&f, Some("FileOrCreate")).unwrap();
        assert!(f.is_file());
        ensure(&f, Some("File")).unwrap();
        let e = ensure(&f, Some("Directory")).unwrap_err();
        assert!(!e.missing);
        assert!(e.reason.contains("a file"), "{}", e.reason);
        let e = ensure(&tmp.path().join("none"), Some("Directory")).unwrap_err();
        assert!(e.missing);
        let e = ensure(&tmp.path().join("no/parent"), Some("FileOrCreate")).unwrap_err();
        assert!(e.missing);
        assert!(ensure(&d, Some("DirectoryOrCreat")).is_err());
        let plain = tmp.path().join("plain");
        ensure(&plain, None).unwrap();
        assert!(plain.is_dir());
        ensure(&f, Some("")).unwrap();
    }
}
