//! File modes: what this crate writes and what the servers it starts create are private to
//! the user, whatever the umask (a world-writable my.cnf is ignored by the server, and under
//! umask 000 `moco local up` failed far from the cause).
//!
//! A floor of its own under [`crate::mysqld`], [`crate::instance`] and `moco-local`'s platform: each
//! of them writes files and starts servers, and none has to reach into another for it.

use std::path::Path;

/// The mode of files mysqld creates, passed as `UMASK` (MySQL and MariaDB read it as the
/// mode, not as a mask): owner read and write.
pub const SERVER_FILE_UMASK: &str = "0600";

/// The mode of directories mysqld creates (`UMASK_DIR`): owner only.
pub const SERVER_DIR_UMASK: &str = "0700";

/// Writes `bytes` to `path` with mode `0600`, whatever the umask: a world-writable my.cnf is
/// ignored by the server, and the files hold paths and ports nobody else needs.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
}

/// Creates `dir` (and missing parents) and gives `dir` mode `0700`, whatever the umask.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Replaces `path` with `bytes` atomically: readers see the old or the new content, never a
/// mix, and the new content survives a crash once this returns (a synced dot file renamed
/// over `path`, then the directory synced). The file gets exactly `mode`.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        // The mode given to open() is filtered by the umask; set it exactly.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Flushes a directory's entry list to disk (after a rename or create).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
