//! A container's `volumeMounts` as bind mounts, with the kubelet's `subPath` rules
//! (`makeMounts`, `SafeMakeDir`, `PrepareSafeSubpath`).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::VolumeMount;

/// A `subPath` or `subPathExpr` that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPathError {
    /// `subPath` or `subPathExpr`.
    pub field: &'static str,
    /// The value (expanded for `subPathExpr`).
    pub value: String,
    /// Why.
    pub reason: String,
}

/// The mount's sub path: `subPath`, or `subPathExpr` expanded with the container's environment
/// (every variable it names must be set and not empty, as the kubelet requires); `None` when
/// neither is set. The result must be relative and free of `..` elements.
pub fn sub_path(
    mount: &VolumeMount,
    env: &[(String, String)],
) -> Result<Option<String>, SubPathError> {
    let (field, value) = match (&mount.sub_path_expr, &mount.sub_path) {
        (Some(expr), _) if !expr.is_empty() => {
            let mut missing = Vec::new();
            let expanded = crate::env::expand_with(expr, |name| {
                let value = crate::env::lookup(env, name).unwrap_or_default();
                if value.is_empty() && !missing.iter().any(|m| m == name) {
                    missing.push(name.to_owned());
                }
                Some(value.to_owned())
            });
            if !missing.is_empty() {
                missing.sort();
                return Err(SubPathError {
                    field: "subPathExpr",
                    value: expr.clone(),
                    reason: format!("missing value for {}", missing.join(", ")),
                });
            }
            ("subPathExpr", expanded)
        }
        (_, Some(path)) if !path.is_empty() => ("subPath", path.clone()),
        _ => return Ok(None),
    };
    check_sub_path(&value).map_err(|reason| SubPathError {
        field,
        value: value.clone(),
        reason: reason.to_owned(),
    })?;
    Ok(Some(value))
}

/// The kubelet's checks of a sub path: not absolute, no `..` element.
pub fn check_sub_path(path: &str) -> Result<(), &'static str> {
    if path.starts_with('/') {
        return Err("must not be an absolute path");
    }
    if path.split('/').any(|item| item == "..") {
        return Err("must not contain '..'");
    }
    Ok(())
}

/// Where `sub` is in the volume whose directory is `root`, made as directories (with the mode of
/// `root`, like the kubelet) where missing, every symlink resolved and the result checked to be
/// inside `root`. For an atomic-writer volume this is the current file itself (through `..data`
/// into its timestamped directory), so a later update does not show through, as with the
/// kubelet.
pub fn resolve_sub_path(root: &Path, sub: &str) -> io::Result<PathBuf> {
    let base = fs::canonicalize(root)?;
    let perm = fs::metadata(&base)?.permissions().mode() & 0o7777;
    let escapes = |p: &Path| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is outside the volume", p.display()),
        )
    };
    let mut current = base.clone();
    for component in Path::new(sub).components() {
        let name = match component {
            Component::Normal(name) => name,
            Component::CurDir => continue,
            _ => return Err(escapes(Path::new(sub))),
        };
        let next = current.join(name);
        match fs::symlink_metadata(&next) {
            Ok(_) => {
                current = fs::canonicalize(&next)?;
                if !current.starts_with(&base) {
                    return Err(escapes(&current));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::DirBuilder::new().mode(perm).create(&next)?;
                fs::set_permissions(&next, fs::Permissions::from_mode(perm))?;
                current = next;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(current)
}

/// The mount's target: `mountPath`, made absolute as the kubelet does on Linux.
pub fn container_path(mount_path: &str) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in Path::new(mount_path).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mount(sub: Option<&str>, expr: Option<&str>) -> VolumeMount {
        VolumeMount {
            name: "v".into(),
            mount_path: "/m".into(),
            sub_path: sub.map(Into::into),
            sub_path_expr: expr.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn sub_paths_are_checked() {
        let env = vec![
            ("POD_NAME".to_owned(), "mysql-0".to_owned()),
            ("E".to_owned(), String::new()),
        ];
        assert_eq!(sub_path(&mount(None, None), &env), Ok(None));
        assert_eq!(sub_path(&mount(Some(""), None), &env), Ok(None));
        assert_eq!(
            sub_path(&mount(Some("a/b"), None), &env),
            Ok(Some("a/b".into()))
        );
        assert_eq!(
            sub_path(&mount(None, Some("logs/$(POD_NAME)")), &env),
            Ok(Some("logs/mysql-0".into()))
        );
        let e = sub_path(&mount(Some("../x"), None), &env).unwrap_err();
        assert_eq!(e.field, "subPath");
        assert_eq!(e.reason, "must not contain '..'");
        let e = sub_path(&mount(Some("/etc"), None), &env).unwrap_err();
        assert_eq!(e.reason, "must not be an absolute path");
        let e = sub_path(&mount(None, Some("$(NOPE)/$(E)")), &env).unwrap_err();
        assert_eq!(e.field, "subPathExpr");
        assert_eq!(e.reason, "missing value for E, NOPE");
        let env2 = vec![("X".to_owned(), "..".to_owned())];
        let e = sub_path(&mount(None, Some("$(X)/y")), &env2).unwrap_err();
        assert_eq!((e.field, e.value.as_str()), ("subPathExpr", "../y"));
        assert!(check_sub_path("a/..b").is_ok());
    }

    #[test]
    fn missing_sub_paths_are_made_with_the_volume_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o2777)).unwrap();
        let p = resolve_sub_path(&root, "a/b").unwrap();
        assert!(p.is_dir());
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o7777, 0o2777);
        assert_eq!(p, fs::canonicalize(&root).unwrap().join("a/b"));
        // Again: already there.
        assert_eq!(resolve_sub_path(&root, "a/b").unwrap(), p);
    }

    #[test]
    fn symlinks_are_resolved_but_must_stay_inside() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        fs::create_dir_all(root.join("..2024_01_01_00_00_00.1")).unwrap();
        fs::write(root.join("..2024_01_01_00_00_00.1/my.cnf"), "x").unwrap();
        std::os::unix::fs::symlink("..2024_01_01_00_00_00.1", root.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/my.cnf", root.join("my.cnf")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), root.join("out")).unwrap();
        let p = resolve_sub_path(&root, "my.cnf").unwrap();
        assert_eq!(
            p,
            fs::canonicalize(&root)
                .unwrap()
                .join("..2024_01_01_00_00_00.1/my.cnf")
        );
        let e = resolve_sub_path(&root, "out/x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(!tmp.path().join("x").exists());
    }

    #[test]
    fn mount_paths_are_absolute_and_clean() {
        assert_eq!(
            container_path("/var/lib/mysql"),
            Path::new("/var/lib/mysql")
        );
        assert_eq!(container_path("var/lib/"), Path::new("/var/lib"));
        assert_eq!(container_path("/a/../b/./c"), Path::new("/b/c"));
    }
}
