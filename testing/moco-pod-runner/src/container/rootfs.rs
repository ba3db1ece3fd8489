//! The container's view of the filesystem, made inside `container-init` in its own mount
//! namespace: an overlay over the host's root (writes land in the container's `upper/`, never
//! on the host), fresh `/proc`, `/sys`, `/tmp`, `/run` and `/dev/shm`, the host's `/dev`, the
//! volumes, `/etc/hosts` and `/etc/hostname`; then `pivot_root` into it.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{chdir, pivot_root};

use super::{BindMount, ContainerError, ContainerSpec, StepContext};

/// How many symbolic links one path may go through, as the kernel's limit.
const MAX_LINKS: usize = 40;

/// Makes the view in `spec.root/merged` and returns that directory. Runs in a fresh mount
/// namespace: nothing mounted here is seen by the host.
pub(super) fn make(spec: &ContainerSpec) -> Result<PathBuf, ContainerError> {
    // Private, so that none of the mounts below propagates back to the host's namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .step(|| "making / private in the container's mount namespace".to_owned())?;

    let upper = spec.root.join("upper");
    let work = spec.root.join("work");
    let merged = spec.root.join("merged");
    for dir in [&upper, &work, &merged] {
        fs::create_dir_all(dir).step(|| format!("making {}", dir.display()))?;
        // The overlay's options are separated by `,` and its layers by `:`.
        if dir.to_string_lossy().contains([',', ':']) {
            return Err(ContainerError::Step {
                step: format!("mounting the overlay with {}", dir.display()),
                source: std::io::Error::other("the path holds ',' or ':'"),
            });
        }
    }
    let options = format!(
        "lowerdir=/,upperdir={},workdir={}",
        upper.display(),
        work.display()
    );
    mount(
        Some("overlay"),
        &merged,
        Some("overlay"),
        MsFlags::empty(),
        Some(options.as_str()),
    )
    .step(|| format!("mounting overlay at {} ({options})", merged.display()))?;

    let nosuid_nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    fresh(
        &merged,
        "/proc",
        "proc",
        nosuid_nodev | MsFlags::MS_NOEXEC,
        None,
    )?;
    bind(&merged, Path::new("/dev"), Path::new("/dev"), false)?;
    fresh(
        &merged,
        "/dev/shm",
        "tmpfs",
        nosuid_nodev,
        Some("mode=1777"),
    )?;
    fresh(
        &merged,
        "/sys",
        "sysfs",
        nosuid_nodev | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
        None,
    )?;
    fresh(&merged, "/tmp", "tmpfs", nosuid_nodev, Some("mode=1777"))?;
    fresh(&merged, "/run", "tmpfs", nosuid_nodev, Some("mode=755"))?;

    for dir in &spec.dirs {
        let inside = resolve(&merged, &dir.path)?;
        fs::create_dir_all(&inside)
            .step(|| format!("making the image's {}", dir.path.display()))?;
        fs::set_permissions(&inside, fs::Permissions::from_mode(dir.mode))
            .step(|| format!("setting the mode of the image's {}", dir.path.display()))?;
    }
    // In order: a later volume may sit inside an earlier one.
    for BindMount {
        source,
        target,
        read_only,
    } in &spec.mounts
    {
        bind(&merged, source, target, *read_only)?;
    }
    bind(&merged, &spec.hosts, Path::new("/etc/hosts"), false)?;
    let hostname = resolve(&merged, Path::new("/etc/hostname"))?;
    fs::write(&hostname, format!("{}\n", spec.hostname))
        .step(|| format!("writing {}", hostname.display()))?;
    Ok(merged)
}

/// Makes `merged` the root: the old root is stacked on it by `pivot_root(".", ".")` and
/// detached, so that no host mount stays reachable (or busy) from the container.
pub(super) fn enter(merged: &Path) -> Result<(), ContainerError> {
    chdir(merged).step(|| format!("chdir to {}", merged.display()))?;
    pivot_root(".", ".").step(|| format!("pivot_root into {}", merged.display()))?;
    umount2(".", MntFlags::MNT_DETACH).step(|| "detaching the host's root".to_owned())?;
    chdir("/").step(|| "chdir to the new /".to_owned())
}

/// Mounts a new filesystem of `fstype` at `target` inside `merged`.
fn fresh(
    merged: &Path,
    target: &str,
    fstype: &str,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), ContainerError> {
    let at = resolve(merged, Path::new(target))?;
    fs::create_dir_all(&at).step(|| format!("making {}", at.display()))?;
    mount(Some(fstype), &at, Some(fstype), flags, data)
        .step(|| format!("mounting {fstype} at {target}"))
}

/// Binds host path `source` at `target` inside `merged` (recursively: mounts below `source`
/// come along), read-only when asked. The target is made when missing, a directory or an
/// empty file as the source is; it is made in the overlay, so on the container's layer only.
fn bind(
    merged: &Path,
    source: &Path,
    target: &Path,
    read_only: bool,
) -> Result<(), ContainerError> {
    let what = || format!("binding {} at {}", source.display(), target.display());
    let meta = fs::metadata(source).step(what)?;
    let at = resolve(merged, target)?;
    if meta.is_dir() {
        fs::create_dir_all(&at).step(what)?;
    } else {
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).step(what)?;
        }
        if fs::symlink_metadata(&at).is_err() {
            fs::File::create(&at).step(what)?;
        }
    }
    mount(
        Some(source),
        &at,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .step(what)?;
    if read_only {
        // A bind's remount must repeat the flags it keeps (nosuid, nodev, …), or it is
        // refused where they are locked and clears them where they are not.
        let kept = statvfs(&at).map(|s| kept_flags(s.flags())).step(what)?;
        mount(
            None::<&str>,
            &at,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | kept,
            None::<&str>,
        )
        .step(|| format!("making {} read-only", target.display()))?;
    }
    Ok(())
}

fn kept_flags(flags: FsFlags) -> MsFlags {
    let mut kept = MsFlags::empty();
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if flags.contains(fs) {
            kept |= ms;
        }
    }
    kept
}

/// `path` as the container will see it, as a host path inside `root`: symbolic links are
/// followed inside `root` (an absolute link restarts from `root`, `..` stops at it), so
/// that a link in the image (`/var/run` → `/run`) never leads a mount or a write onto the
/// host. The part that does not exist yet is kept as written.
pub(super) fn resolve(root: &Path, path: &Path) -> Result<PathBuf, ContainerError> {
    let mut inside = PathBuf::new();
    let mut rest: VecDeque<OsString> = VecDeque::new();
    push_front(&mut rest, path);
    let mut links = 0;
    while let Some(name) = rest.pop_front() {
        match name.to_str() {
            Some("" | ".") => continue,
            Some("..") => {
                inside.pop();
                continue;
            }
            Some("/") => {
                inside.clear();
                continue;
            }
            _ => {}
        }
        let candidate = root.join(&inside).join(&name);
        match fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(ContainerError::Step {
                        step: format!("resolving {} in {}", path.display(), root.display()),
                        source: std::io::Error::from(nix::errno::Errno::ELOOP),
                    });
                }
                let target = fs::read_link(&candidate)
                    .step(|| format!("reading the link {}", candidate.display()))?;
                if target.is_absolute() {
                    inside.clear();
                }
                push_front(&mut rest, &target);
            }
            _ => inside.push(&name),
        }
    }
    Ok(root.join(inside))
}

/// Puts `path`'s components at the front of `rest`, in order.
fn push_front(rest: &mut VecDeque<OsString>, path: &Path) {
    for c in path.components().rev() {
        let name = match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => continue,
            Component::ParentDir => OsString::from(".."),
            Component::Normal(n) => n.to_owned(),
        };
        rest.push_front(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_keeps_links_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("run")).unwrap();
        std::os::unix::fs::symlink("/run", root.join("varrun")).unwrap();
        std::os::unix::fs::symlink("../../../etc", root.join("up")).unwrap();
        assert_eq!(
            resolve(root, Path::new("/varrun/mysqld/x")).unwrap(),
            root.join("run/mysqld/x")
        );
        assert_eq!(
            resolve(root, Path::new("/up/hosts")).unwrap(),
            root.join("etc/hosts")
        );
        assert_eq!(
            resolve(root, Path::new("/a/../../b")).unwrap(),
            root.join("b")
        );
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        assert!(resolve(root, Path::new("/loop/x")).is_err());
    }
}
