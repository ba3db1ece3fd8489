//! Each crate's `tests/` is one test binary (`tests/integration.rs`, `autotests = false`): a
//! file there without its `mod` line in the root would never be compiled, so its tests could
//! not fail. This checks every crate of the workspace.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The names a root file declares with `mod name;`.
fn declared_modules(root: &str) -> BTreeSet<String> {
    root.lines()
        .filter_map(|line| line.trim().strip_prefix("mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// The modules a crate's `tests/` directory holds: each `*.rs` file but the root, and each
/// directory with a `mod.rs` (shared helpers).
fn test_modules(tests: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for entry in fs::read_dir(tests).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if path.join("mod.rs").is_file() {
                found.insert(stem);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") && stem != "integration" {
            found.insert(stem);
        }
    }
    found
}

#[test]
fn every_test_file_is_a_module_of_its_crates_one_test_binary() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut crates = Vec::new();
    // The crates at the root and those of `testing/`.
    let dirs = fs::read_dir(workspace)
        .unwrap()
        .chain(fs::read_dir(workspace.join("testing")).unwrap());
    for entry in dirs {
        let dir = entry.unwrap().path();
        let tests = dir.join("tests");
        if !dir.join("Cargo.toml").is_file() || !tests.is_dir() {
            continue;
        }
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = dir
            .strip_prefix(workspace)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            manifest.contains("autotests = false")
                && manifest.contains("path = \"tests/integration.rs\""),
            "{name}/Cargo.toml: tests/ must be the one test binary tests/integration.rs"
        );
        let root = fs::read_to_string(tests.join("integration.rs")).unwrap();
        let missing: Vec<_> = test_modules(&tests)
            .difference(&declared_modules(&root))
            .cloned()
            .collect();
        assert!(
            missing.is_empty(),
            "{name}/tests/integration.rs lacks `mod` lines for {missing:?}: they are never compiled"
        );
        crates.push(name);
    }
    // The workspace's crates with integration tests; a crate that loses its tests/ (or a walk
    // that finds none) shows here.
    assert!(crates.len() >= 10, "checked only {crates:?}");
}
