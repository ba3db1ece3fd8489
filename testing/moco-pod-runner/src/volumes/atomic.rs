//! The kubelet's AtomicWriter (`pkg/volume/util/atomic_writer.go`): a set of files projected
//! into a volume directory so that readers never see half of an update.
//!
//! ```text
//! VOLUME/..2024_05_01_12_00_00.123456789/   the files (mode 0755 dir, files at their mode)
//! VOLUME/..data -> ..2024_05_01_12_00_00.123456789
//! VOLUME/key    -> ..data/key               one symlink per top-level name
//! ```
//!
//! An update writes a new timestamped directory, points `..data_tmp` at it and renames that
//! over `..data` (one atomic step), adds and removes the top-level symlinks, then removes the
//! old directory. A payload whose files' contents are all unchanged (and that drops no path)
//! writes nothing, as the kubelet's does (it compares contents, not modes).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;

/// The symlink naming the current timestamped directory.
pub const DATA_DIR: &str = "..data";
/// The symlink renamed over [`DATA_DIR`].
const NEW_DATA_DIR: &str = "..data_tmp";
const MAX_FILE_NAME: usize = 255;
const MAX_PATH: usize = 4096;

/// One file of a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// Its content.
    pub data: Vec<u8>,
    /// Its permission bits (`mode` or `defaultMode`).
    pub mode: u32,
    /// Its owner, when the kubelet would chown it (projected tokens of a Pod with one
    /// `runAsUser`); otherwise the runner's.
    pub fs_user: Option<u32>,
}

/// A volume's files by their path relative to the volume.
pub type Payload = BTreeMap<String, FileProjection>;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A payload path the writer refuses (absolute, with `..`, starting with `..`, too long).
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// A filesystem operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// What it was done to.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Checks a payload path as the kubelet's `validatePath` does and returns it cleaned
/// (`a//b/./c` → `a/b/c`): not empty, relative, no `..` element, not starting with `..`, names
/// of at most 255 bytes, at most 4096 bytes in all.
pub fn clean_path(path: &str) -> Result<String, &'static str> {
    if path.is_empty() {
        return Err("must not be empty");
    }
    if path.starts_with('/') {
        return Err("must be a relative path");
    }
    if path.len() > MAX_PATH {
        return Err("must be at most 4096 characters");
    }
    let items: Vec<&str> = path.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err("must not contain '..'");
        }
        if item.len() > MAX_FILE_NAME {
            return Err("file names must be at most 255 characters");
        }
    }
    let cleaned: Vec<&str> = items
        .into_iter()
        .filter(|i| !i.is_empty() && *i != ".")
        .collect();
    let Some(first) = cleaned.first() else {
        return Err("must name a file");
    };
    // The kubelet checks the first element before cleaning; checking after closes `./..x`.
    if first.starts_with("..") {
        return Err("must not start with '..'");
    }
    Ok(cleaned.join("/"))
}

fn clean_payload(payload: &Payload) -> Result<BTreeMap<String, &FileProjection>, WriteError> {
    payload
        .iter()
        .map(|(path, file)| {
            clean_path(path)
                .map(|p| (p, file))
                .map_err(|reason| WriteError::InvalidPath {
                    path: path.clone(),
                    reason,
                })
        })
        .collect()
}

/// The top-level names of a payload: one user-visible symlink each.
fn top_level_names<'a>(paths: impl Iterator<Item = &'a String>) -> BTreeSet<&'a str> {
    paths
        .map(|p| p.split('/').next().unwrap_or(p.as_str()))
        .collect()
}

/// Every path of the payload and every directory above one: what must not be removed.
fn payload_paths(payload: &BTreeMap<String, &FileProjection>) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for path in payload.keys() {
        let mut p = path.as_str();
        loop {
            all.insert(p.to_owned());
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => break,
            }
        }
    }
    all
}

/// Every path under `dir`, relative, files and directories (symlinks not followed).
fn walk_relative(dir: &Path) -> io::Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        for entry in fs::read_dir(&abs)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if entry.file_type()?.is_dir() {
                stack.push((entry.path(), rel_child.clone()));
            }
            out.insert(rel_child);
        }
    }
    Ok(out)
}

/// Whether any file of the payload is missing from `old` or differs in content.
fn should_write(payload: &BTreeMap<String, &FileProjection>, old: &Path) -> bool {
    payload
        .iter()
        .any(|(path, file)| match fs::read(old.join(path)) {
            Ok(on_disk) => on_disk != file.data,
            Err(_) => true,
        })
}

/// A new `..YYYY_MM_DD_HH_MM_SS.N` directory in `dir`, mode 0755 whatever the umask.
fn new_timestamp_dir(dir: &Path) -> Result<PathBuf, WriteError> {
    let now = Timestamp::now();
    let stamp = now.strftime("%Y_%m_%d_%H_%M_%S").to_string();
    let mut suffix = u64::from(now.subsec_nanosecond().unsigned_abs());
    loop {
        let path = dir.join(format!("..{stamp}.{suffix}"));
        match fs::create_dir(&path) {
            Ok(()) => {
                fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                    .map_err(io_err(&path))?;
                return Ok(path);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => suffix += 1,
            Err(e) => return Err(io_err(&path)(e)),
        }
    }
}

fn write_payload_to_dir(
    payload: &BTreeMap<String, &FileProjection>,
    dir: &Path,
) -> Result<(), WriteError> {
    for (path, file) in payload {
        let full = dir.join(path);
        if let Some(parent) = full.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .map_err(io_err(parent))?;
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(file.mode & 0o7777)
            .open(&full)
            .map_err(io_err(&full))?;
        f.write_all(&file.data).map_err(io_err(&full))?;
        drop(f);
        // The umask narrowed the mode at creation; the payload's mode is what counts.
        fs::set_permissions(&full, fs::Permissions::from_mode(file.mode & 0o7777))
            .map_err(io_err(&full))?;
        if let Some(uid) = file.fs_user {
            std::os::unix::fs::chown(&full, Some(uid), None).map_err(io_err(&full))?;
        }
    }
    Ok(())
}

fn create_user_visible(dir: &Path, names: &BTreeSet<&str>) -> Result<(), WriteError> {
    for name in names {
        let visible = dir.join(name);
        match fs::symlink_metadata(&visible) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::os::unix::fs::symlink(Path::new(DATA_DIR).join(name), &visible)
                    .map_err(io_err(&visible))?;
            }
            Err(e) => return Err(io_err(&visible)(e)),
        }
    }
    Ok(())
}

/// Projects `payload` into `dir` (which exists) atomically; `set_perms` runs on the volume
/// after the new files are written and before they become visible (the kubelet's fsGroup
/// ownership change). Returns whether anything was written.
pub fn write(
    dir: &Path,
    payload: &Payload,
    set_perms: &dyn Fn(&Path) -> io::Result<()>,
) -> Result<bool, WriteError> {
    let payload = clean_payload(payload)?;
    let names = top_level_names(payload.keys());
    let data_link = dir.join(DATA_DIR);
    let old_ts = match fs::read_link(&data_link) {
        Ok(target) => Some(dir.join(target)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&data_link)(e)),
    };

    let mut to_remove = BTreeSet::new();
    if let Some(old) = &old_ts {
        let existing = match walk_relative(old) {
            Ok(paths) => paths,
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => return Err(io_err(old)(e)),
        };
        let keep = payload_paths(&payload);
        to_remove = existing.difference(&keep).cloned().collect();
        if !should_write(&payload, old) && to_remove.is_empty() {
            // Up to date; the visible links may still be missing (kubernetes#121472).
            create_user_visible(dir, &names)?;
            return Ok(false);
        }
    }

    let ts = new_timestamp_dir(dir)?;
    let ts_name = ts.file_name().map(PathBuf::from).unwrap_or_default();
    let staged =
        write_payload_to_dir(&payload, &ts).and_then(|()| set_perms(dir).map_err(io_err(dir)));
    if let Err(e) = staged {
        let _ = fs::remove_dir_all(&ts);
        return Err(e);
    }

    let new_link = dir.join(NEW_DATA_DIR);
    // A crash between symlink and rename leaves it behind.
    let _ = fs::remove_file(&new_link);
    if let Err(e) = std::os::unix::fs::symlink(&ts_name, &new_link) {
        let _ = fs::remove_dir_all(&ts);
        return Err(io_err(&new_link)(e));
    }
    if let Err(e) = fs::rename(&new_link, &data_link) {
        let _ = fs::remove_file(&new_link);
        let _ = fs::remove_dir_all(&ts);
        return Err(io_err(&data_link)(e));
    }

    create_user_visible(dir, &names)?;
    for path in to_remove.iter().filter(|p| !p.contains('/')) {
        let visible = dir.join(path);
        match fs::remove_file(&visible) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&visible)(e)),
        }
    }
    if let Some(old) = old_ts.filter(|old| *old != ts) {
        match fs::remove_dir_all(&old) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&old)(e)),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn file(data: &str, mode: u32) -> FileProjection {
        FileProjection {
            data: data.as_bytes().to_vec(),
            mode,
            fs_user: None,
        }
    }

    fn no_perms(_: &Path) -> io::Result<()> {
        Ok(())
    }

    fn ts_dirs(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("..") && n != DATA_DIR)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn clean_path_follows_the_kubelet_rules() {
        assert_eq!(clean_path("a//b/./c").unwrap(), "a/b/c");
        assert_eq!(clean_path("..a"), Err("must not start with '..'"));
        assert_eq!(clean_path("./..data"), Err("must not start with '..'"));
        assert_eq!(clean_path("a/../b"), Err("must not contain '..'"));
        assert_eq!(clean_path("/abs"), Err("must be a relative path"));
        assert_eq!(clean_path(""), Err("must not be empty"));
        assert_eq!(clean_path("./"), Err("must name a file"));
        assert!(clean_path(&"x".repeat(256)).is_err());
        assert!(clean_path("a/..b").is_ok()); // only the first element is reserved
    }

    #[test]
    fn first_write_makes_data_link_and_visible_links() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let payload = Payload::from([
            ("a".to_owned(), file("A", 0o644)),
            ("sub/b".to_owned(), file("B", 0o400)),
        ]);
        assert!(write(dir, &payload, &no_perms).unwrap());
        let ts = fs::read_link(dir.join(DATA_DIR)).unwrap();
        let ts = ts.to_string_lossy().into_owned();
        assert!(ts.starts_with("..20"), "{ts}");
        assert_eq!(fs::read_link(dir.join("a")).unwrap(), Path::new("..data/a"));
        assert_eq!(
            fs::read_link(dir.join("sub")).unwrap(),
            Path::new("..data/sub")
        );
        assert_eq!(fs::read_to_string(dir.join("sub/b")).unwrap(), "B");
        assert_eq!(fs::metadata(dir.join("a")).unwrap().mode() & 0o7777, 0o644);
        assert_eq!(
            fs::metadata(dir.join("sub/b")).unwrap().mode() & 0o7777,
            0o400
        );
        assert_eq!(fs::metadata(dir.join(&ts)).unwrap().mode() & 0o7777, 0o755);
    }

    #[test]
    fn modes_ignore_the_umask() {
        let tmp = tempfile::tempdir().unwrap();
        let payload = Payload::from([("w".to_owned(), file("x", 0o666))]);
        write(tmp.path(), &payload, &no_perms).unwrap();
        assert_eq!(
            fs::metadata(tmp.path().join("w")).unwrap().mode() & 0o7777,
            0o666
        );
    }

    #[test]
    fn rewrite_swaps_data_removes_old_dir_and_dropped_links() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let one = Payload::from([
            ("a".to_owned(), file("1", 0o644)),
            ("gone".to_owned(), file("g", 0o644)),
        ]);
        write(dir, &one, &no_perms).unwrap();
        let first = ts_dirs(dir);
        assert_eq!(first.len(), 1);

        let two = Payload::from([
            ("a".to_owned(), file("2", 0o644)),
            ("new".to_owned(), file("n", 0o644)),
        ]);
        assert!(write(dir, &two, &no_perms).unwrap());
        let second = ts_dirs(dir);
        assert_eq!(second.len(), 1, "old dir removed: {second:?}");
        assert_ne!(first, second);
        assert_eq!(
            fs::read_link(dir.join(DATA_DIR)).unwrap(),
            Path::new(&second[0])
        );
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "2");
        assert_eq!(fs::read_to_string(dir.join("new")).unwrap(), "n");
        assert!(fs::symlink_metadata(dir.join("gone")).is_err());
        assert!(fs::symlink_metadata(dir.join(NEW_DATA_DIR)).is_err());
    }

    #[test]
    fn unchanged_payload_writes_nothing_but_restores_links() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let p = Payload::from([("a".to_owned(), file("1", 0o644))]);
        assert!(write(dir, &p, &no_perms).unwrap());
        let before = ts_dirs(dir);
        let called = std::cell::Cell::new(false);
        let perms = |_: &Path| {
            called.set(true);
            Ok(())
        };
        assert!(!write(dir, &p, &perms).unwrap());
        assert!(!called.get());
        assert_eq!(ts_dirs(dir), before);
        fs::remove_file(dir.join("a")).unwrap();
        assert!(!write(dir, &p, &no_perms).unwrap());
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "1");
        // Dropping a path is a change even when the rest is equal.
        assert!(write(dir, &Payload::new(), &no_perms).unwrap());
        assert!(fs::symlink_metadata(dir.join("a")).is_err());
    }

    #[test]
    fn set_perms_runs_before_the_swap_and_a_failure_leaves_the_old_set() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write(
            dir,
            &Payload::from([("a".to_owned(), file("1", 0o644))]),
            &no_perms,
        )
        .unwrap();
        let fail = |_: &Path| Err(io::Error::other("no"));
        let err = write(
            dir,
            &Payload::from([("a".to_owned(), file("2", 0o644))]),
            &fail,
        );
        assert!(err.is_err());
        assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "1");
        assert_eq!(ts_dirs(dir).len(), 1, "the failed new dir is removed");
    }

    #[test]
    fn invalid_paths_are_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let p = Payload::from([("../x".to_owned(), file("1", 0o644))]);
        assert!(matches!(
            write(tmp.path(), &p, &no_perms),
            Err(WriteError::InvalidPath { .. })
        ));
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn fs_user_owns_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let me = fs::metadata(tmp.path()).unwrap().uid();
        let p = Payload::from([(
            "token".to_owned(),
            FileProjection {
                data: b"t".to_vec(),
                mode: 0o600,
                fs_user: Some(me),
            },
        )]);
        write(tmp.path(), &p, &no_perms).unwrap();
        assert_eq!(fs::metadata(tmp.path().join("token")).unwrap().uid(), me);
    }

    /// Readers racing many rewrites: a file read through its visible link is always a whole
    /// generation's and never goes back; a set read through one resolution of `..data` is
    /// always one generation's. A read may find nothing when the old directory is removed
    /// while the path is being resolved through it (so with the kubelet too): it is retried.
    #[test]
    fn readers_see_the_old_or_the_new_set() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        let gen_payload = |g: u32| {
            Payload::from([
                ("a".to_owned(), file(&format!("{g}"), 0o644)),
                ("b".to_owned(), file(&format!("{g}"), 0o644)),
            ])
        };
        write(&dir, &gen_payload(0), &no_perms).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let dir = dir.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut last = 0u32;
                    let mut pairs = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        match fs::read_to_string(dir.join("a")) {
                            Ok(a) => {
                                let a: u32 = a.parse().unwrap();
                                assert!(a >= last, "went back from {last} to {a}");
                                last = a;
                            }
                            Err(e) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
                        }
                        let Ok(ts) = fs::read_link(dir.join(DATA_DIR)) else {
                            panic!("..data missing");
                        };
                        let a = fs::read_to_string(dir.join(&ts).join("a"));
                        let b = fs::read_to_string(dir.join(&ts).join("b"));
                        if let (Ok(a), Ok(b)) = (a, b) {
                            assert_eq!(a, b, "mixed set");
                            pairs += 1;
                        }
                    }
                    pairs
                })
            })
            .collect();
        for g in 1..200 {
            assert!(write(&dir, &gen_payload(g), &no_perms).unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(fs::read_to_string(dir.join("b")).unwrap(), "199");
        assert_eq!(ts_dirs(&dir).len(), 1);
    }
}
