//! Who owns a volume's files: the kubelet's `SetVolumeOwnership` for `fsGroup` and
//! `FsUserFrom` for projected tokens.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

const RW_MASK: u32 = 0o660;
const RO_MASK: u32 = 0o440;
const EXEC_MASK: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// `fsGroupChangePolicy: OnRootMismatch`: skip the walk when the root already fits.
pub const ON_ROOT_MISMATCH: &str = "OnRootMismatch";

/// The mode the kubelet gives an entry of an `fsGroup` volume: group read (and write unless
/// the volume is read-only) added; directories also get group search and setgid, so that what
/// the containers make inside stays in the group.
pub fn fs_group_mode(mode: u32, is_dir: bool, read_only: bool) -> u32 {
    let mut mask = if read_only { RO_MASK } else { RW_MASK };
    if is_dir {
        mask |= SETGID | EXEC_MASK;
    }
    (mode & 0o7777) | mask
}

/// Whether `root` lacks what `fsGroup` asks (its group, the group bits, setgid): the kubelet's
/// `requiresPermissionChange`, used by `OnRootMismatch`.
pub fn requires_change(root: &Path, fs_group: u32, read_only: bool) -> io::Result<bool> {
    let meta = fs::metadata(root)?;
    if meta.gid() != fs_group || !meta.is_dir() {
        return Ok(true);
    }
    let wanted = (if read_only { RO_MASK } else { RW_MASK }) | EXEC_MASK;
    let mode = meta.mode();
    Ok(mode & wanted != wanted || mode & SETGID == 0)
}

/// Makes everything under `root` (itself included) group-owned by `fs_group` with the modes of
/// [`fs_group_mode`]; symlinks get the group but no chmod (that would change their targets).
/// With `policy` [`ON_ROOT_MISMATCH`] nothing is done when the root already fits.
pub fn set_volume_ownership(
    root: &Path,
    fs_group: u32,
    read_only: bool,
    policy: Option<&str>,
) -> io::Result<()> {
    if policy == Some(ON_ROOT_MISMATCH) && !requires_change(root, fs_group, read_only)? {
        return Ok(());
    }
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path)?;
        std::os::unix::fs::lchown(&path, None, Some(fs_group))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = fs_group_mode(meta.mode(), meta.is_dir(), read_only);
        if mode != meta.mode() & 0o7777 {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
        }
        if meta.is_dir() {
            for entry in fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// The owner the kubelet gives projected service account tokens (`FsUserFrom`): the
/// effective `runAsUser` when every init and regular container has one and they are all the
/// same; otherwise none.
pub fn fs_user_from(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let pod_user = spec.security_context.as_ref().and_then(|s| s.run_as_user);
    let mut fs_user = None;
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        let user = c
            .security_context
            .as_ref()
            .and_then(|s| s.run_as_user)
            .or(pod_user)?;
        match fs_user {
            None => fs_user = Some(user),
            Some(u) if u != user => return None,
            Some(_) => {}
        }
    }
    fs_user
}

/// The Pod's `securityContext.fsGroup`.
pub fn fs_group_of(pod: &Pod) -> Option<i64> {
    pod.spec.as_ref()?.security_context.as_ref()?.fs_group
}

/// The Pod's `securityContext.fsGroupChangePolicy`.
pub fn fs_group_policy_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .security_context
        .as_ref()?
        .fs_group_change_policy
        .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, SecurityContext};

    #[test]
    fn modes_follow_the_kubelet_masks() {
        assert_eq!(fs_group_mode(0o644, false, true), 0o644);
        assert_eq!(fs_group_mode(0o400, false, true), 0o440);
        assert_eq!(fs_group_mode(0o600, false, true), 0o640); // a token with fsGroup
        assert_eq!(fs_group_mode(0o600, false, false), 0o660);
        assert_eq!(fs_group_mode(0o755, true, true), 0o2755);
        assert_eq!(fs_group_mode(0o700, true, false), 0o2770);
    }

    #[test]
    fn ownership_walks_the_tree_and_skips_symlink_targets() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("v");
        fs::create_dir_all(root.join("d")).unwrap();
        fs::write(root.join("d/f"), "x").unwrap();
        fs::set_permissions(root.join("d/f"), fs::Permissions::from_mode(0o400)).unwrap();
        fs::set_permissions(root.join("d"), fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink("d/f", root.join("l")).unwrap();
        let gid = fs::metadata(tmp.path()).unwrap().gid();
        set_volume_ownership(&root, gid, false, None).unwrap();
        assert_eq!(
            fs::metadata(root.join("d/f")).unwrap().mode() & 0o7777,
            0o660
        );
        assert_eq!(
            fs::metadata(root.join("d")).unwrap().mode() & 0o7777,
            0o2770
        );
        assert_eq!(fs::metadata(&root).unwrap().gid(), gid);
        assert!(!requires_change(&root, gid, false).unwrap());
        // OnRootMismatch with a fitting root leaves the rest alone.
        fs::set_permissions(root.join("d/f"), fs::Permissions::from_mode(0o400)).unwrap();
        set_volume_ownership(&root, gid, false, Some(ON_ROOT_MISMATCH)).unwrap();
        assert_eq!(
            fs::metadata(root.join("d/f")).unwrap().mode() & 0o7777,
            0o400
        );
    }

    fn pod(pod_user: Option<i64>, users: &[Option<i64>]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                security_context: Some(PodSecurityContext {
                    run_as_user: pod_user,
                    ..Default::default()
                }),
                containers: users
                    .iter()
                    .map(|u| Container {
                        security_context: Some(SecurityContext {
                            run_as_user: *u,
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn fs_user_needs_one_user_for_every_container() {
        assert_eq!(fs_user_from(&pod(Some(10000), &[None, None])), Some(10000));
        assert_eq!(
            fs_user_from(&pod(Some(10000), &[Some(10000), None])),
            Some(10000)
        );
        assert_eq!(fs_user_from(&pod(None, &[Some(1), Some(1)])), Some(1));
        assert_eq!(fs_user_from(&pod(None, &[Some(1), None])), None);
        assert_eq!(fs_user_from(&pod(Some(1), &[Some(2)])), Some(2));
        assert_eq!(fs_user_from(&pod(Some(1), &[Some(2), None])), None);
        assert_eq!(fs_user_from(&pod(Some(1), &[])), None);
    }
}
