//! Rules of the workspace's layout that the compiler does not keep (issue 46): the modules
//! `docs/design.md` calls pure stay pure. The renderer builds every Kubernetes object from a
//! checked input, and the backup formats say what MOCO's backups hold; neither may reach a
//! server, the API server or the MySQL adapter, so both are tested without any and embed the
//! vocabulary of `moco-core` and `moco-api` alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::docs_claims::workspace;

/// The first component of every path `text` names outside comments: of each `use`
/// declaration (`use a::b;`, `pub use a::{b, c};`, `use ::a::b;`, over several lines), and of
/// each path written out in an expression or a type (`moco_adapters::mysql::f(…)`), unless its
/// first component is a name a `use` brought in (`fmt::Display` after `use std::fmt;`) or a
/// module the file declares (`mod volume { … }`), a primitive type (`u32::MAX`) or a method's
/// turbofish (`.parse::<u32>()`).
fn roots(text: &str) -> BTreeSet<String> {
    const PRIMITIVES: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "str", "char", "bool",
    ];
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (mut out, mut imported, mut rest) = (BTreeSet::new(), BTreeSet::new(), String::new());
    let mut remaining = code.as_str();
    while !remaining.is_empty() {
        let line_end = remaining.find('\n').map_or(remaining.len(), |i| i + 1);
        let line = remaining[..line_end].trim_start();
        let declaration = ["pub(crate) use ", "pub use ", "use "]
            .iter()
            .find_map(|p| line.strip_prefix(p));
        match declaration {
            Some(_) => {
                let end = remaining.find(';').map_or(remaining.len(), |i| i + 1);
                let statement = remaining[..end].trim_start();
                let path =
                    statement[statement.find("use ").unwrap_or(0) + 4..].trim_start_matches("::");
                out.insert(path.chars().take_while(|c| is_ident(*c)).collect());
                imported.extend(
                    path.split(|c: char| !is_ident(c))
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned),
                );
                remaining = &remaining[end..];
            }
            None => {
                // A module declared here (`mod volume { … }`) is a name of this file's own.
                if let Some(module) = ["pub(crate) mod ", "pub mod ", "mod "]
                    .iter()
                    .find_map(|p| line.strip_prefix(p))
                {
                    imported.insert(module.chars().take_while(|c| is_ident(*c)).collect());
                }
                rest.push_str(&remaining[..line_end]);
                remaining = &remaining[line_end..];
            }
        }
    }
    for (at, _) in rest.match_indices("::") {
        let before = &rest[..at];
        let start = before.rfind(|c: char| !is_ident(c)).map_or(0, |i| i + 1);
        let root = &before[start..];
        let preceded = &before[..start];
        if root.is_empty()
            || preceded.ends_with("::")
            || preceded.ends_with('.')
            || !root
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            || imported.contains(root)
            || PRIMITIVES.contains(&root)
        {
            continue;
        }
        out.insert(root.to_owned());
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Crates and roots a pure module may name: the standard library, the data crates, the
/// vocabulary crates, and its own crate's modules.
const PURE: &[&str] = &[
    "std",
    "core",
    "alloc",
    "crate",
    "super",
    "self",
    "serde",
    "serde_json",
    "k8s_openapi",
    "moco_core",
    "moco_api",
    "thiserror",
    "sha2",
];

/// The pure modules, as `docs/design.md` lists them: (directory, the module-local names its
/// files also import, e.g. a sibling module named without `super::`).
const PURE_MODULES: &[&str] = &["moco-operator/src/render", "moco-backup/src/mysql/format"];

#[test]
fn the_renderer_and_the_backup_formats_name_only_the_vocabulary_crates() {
    let root = workspace();
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    let mut offending = Vec::new();
    let mut files_read = 0;
    for module in PURE_MODULES {
        assert!(
            design.contains(&format!("`{module}/`")),
            "docs/design.md does not list `{module}/` among the pure modules"
        );
        let mut files = Vec::new();
        rust_files(&root.join(module), &mut files);
        // A module's own submodules may be named without `super::` (`use checked::…` in
        // `render/mod.rs`).
        let own: BTreeSet<String> = files
            .iter()
            .filter_map(|f| f.file_stem())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        for file in files {
            files_read += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            // Tests may use what they like: only the module's own code is held to the rule.
            let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
            for name in roots(code) {
                if !PURE.contains(&name.as_str()) && !own.contains(&name) {
                    offending.push(format!(
                        "{}: {name}",
                        file.strip_prefix(&root).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(files_read > 15, "the scan read too few files: {files_read}");
    assert!(
        offending.is_empty(),
        "pure modules name crates outside the vocabulary (docs/design.md, \"Pure modules\"):\n{}",
        offending.join("\n")
    );
}

#[test]
fn the_root_scan_finds_imports_and_full_paths() {
    let found = roots(
        "use moco_core::x;\npub use ::serde::Y;\nuse k8s_openapi::api::{\n    apps::v1::StatefulSet,\n    core::v1::Pod,\n};\nuse std::fmt;\n// use kube::z;\nlet a = moco_adapters::mysql::f(std::mem::take(&mut b), u32::MAX, s.parse::<u8>());\nlet t: Vec<x::Y> = fmt::Display::fmt(mysql_async::Conn::new());\nmod volume {\n    pub const TMP: &str = \"tmp\";\n}\nlet v = volume::TMP;\n",
    );
    let want: BTreeSet<String> = [
        "moco_core",
        "serde",
        "k8s_openapi",
        "std",
        "moco_adapters",
        "mysql_async",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(found, want);
}
