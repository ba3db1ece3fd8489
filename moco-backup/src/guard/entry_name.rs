//! Names that come from inside a bucket's objects (an xbstream's chunk paths, a tarball's
//! members) and become local paths when the object is unpacked. Whoever can write to the
//! bucket chooses them, so only a plain relative path is let through: `../x`, `/etc/x`,
//! `a//b` or `./x` would leave the directory being filled or alias another entry.
//!
//! Names read from the bucket's own JSON (a segment's `file`) are never turned into paths at
//! all; this check is for the formats whose entries must be unpacked under their names.

/// Longest name accepted (Linux's `PATH_MAX`).
pub const MAX_NAME: usize = 4096;

/// Why a name may not become a local path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("entry {name:?}: {reason}")]
pub struct UnsafeName {
    /// The name (lossily decoded when it is not UTF-8).
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Checks that `name` is a relative path of plain components: not empty, no leading `/`, no
/// empty, `.` or `..` component, no control character, at most [`MAX_NAME`] bytes. Joined to
/// a directory, such a name stays inside it (as long as nothing inside is a symlink).
pub fn check_relative(name: &[u8]) -> Result<&str, UnsafeName> {
    let refuse = |reason| UnsafeName {
        name: String::from_utf8_lossy(name).into_owned(),
        reason,
    };
    let text = std::str::from_utf8(name).map_err(|_| refuse("not UTF-8"))?;
    if text.is_empty() {
        return Err(refuse("empty"));
    }
    if text.len() > MAX_NAME {
        return Err(refuse("longer than 4096 bytes"));
    }
    if text.starts_with('/') {
        return Err(refuse("an absolute path"));
    }
    if text.chars().any(char::is_control) {
        return Err(refuse("contains a control character"));
    }
    for part in text.split('/') {
        match part {
            "" => return Err(refuse("an empty path component")),
            "." | ".." => return Err(refuse("a `.` or `..` path component")),
            _ => {}
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::path::{Component, Path};

    use super::*;

    #[test]
    fn plain_relative_names_pass_and_others_are_named() {
        for good in [
            "ibdata1",
            "db/t.ibd",
            "mysql/innodb_index_stats.ibd",
            "t@0020x.frm",
            "a.b/..c/d..",
        ] {
            assert_eq!(check_relative(good.as_bytes()), Ok(good));
        }
        for (bad, reason) in [
            ("", "empty"),
            ("/etc/passwd", "an absolute path"),
            ("../x", "a `.` or `..` path component"),
            ("db/../../x", "a `.` or `..` path component"),
            ("./x", "a `.` or `..` path component"),
            ("db/.", "a `.` or `..` path component"),
            ("a//b", "an empty path component"),
            ("dir/", "an empty path component"),
            ("a\nb", "contains a control character"),
        ] {
            let e = check_relative(bad.as_bytes()).unwrap_err();
            assert_eq!(e.reason, reason, "{bad:?}");
            assert!(e.to_string().starts_with("entry "), "{e}");
        }
        assert_eq!(check_relative(b"\xff").unwrap_err().reason, "not UTF-8");
        assert!(check_relative("x".repeat(MAX_NAME + 1).as_bytes()).is_err());
    }

    proptest::proptest! {
        /// Whatever the bytes, a name that passes has only plain components: joined to a
        /// directory, it names something inside it.
        #[test]
        fn a_name_that_passes_never_leaves_its_directory(
            name in proptest::collection::vec(
                proptest::sample::select(b"ab./\\\0\n\xc3".to_vec()), 0..24)
        ) {
            if let Ok(text) = check_relative(&name) {
                let joined = Path::new("/scratch").join(text);
                proptest::prop_assert!(joined.starts_with("/scratch"));
                proptest::prop_assert!(Path::new(text)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_))));
            }
        }
    }
}
