//! Golden tests of the my.cnf generator.
//!
//! Every `tests/fixtures/mycnf/<case>.json` is a `MycnfInput`; the generated text must equal
//! `<case>.cnf` byte for byte (the ConfigMap name hashes it). The MySQL cases are MOCO's own
//! golden cases (`pkg/mycnf/testdata`) as of the reference version; the MariaDB ones were
//! reviewed by hand and started with mariadbd (`resources_mariadb.rs`).
//!
//! `UPDATE_GOLDEN=1 cargo test -p moco-core --test integration resources_mycnf::` rewrites the
//! `.cnf` files; review the diff before committing it.

use std::fs;
use std::path::{Path, PathBuf};

use moco_core::facts::Flavor;
use moco_core::resources::mycnf::{MycnfInput, generate_mycnf, mycnf_config_map_name};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mycnf")
}

fn cases() -> Vec<(String, MycnfInput)> {
    let mut cases: Vec<(String, MycnfInput)> = fs::read_dir(fixture_dir())
        .unwrap_or_else(|e| panic!("reading fixtures: {e}"))
        .filter_map(|entry| {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.extension()? != "json" {
                return None;
            }
            let name = path.file_stem()?.to_string_lossy().into_owned();
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let input: MycnfInput =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}.json: {e}"));
            Some((name, input))
        })
        .collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    cases
}

#[test]
fn generated_text_matches_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let cases = cases();
    assert!(cases.len() >= 10, "fixtures missing: {}", cases.len());
    let mut failures = Vec::new();
    for (name, input) in &cases {
        let got = generate_mycnf(input).unwrap_or_else(|e| panic!("{name}: {e}"));
        let path = fixture_dir().join(format!("{name}.cnf"));
        if update {
            fs::write(&path, &got).unwrap_or_else(|e| panic!("{name}: {e}"));
            eprintln!("wrote {}", path.display());
            continue;
        }
        let want = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}.cnf: {e}"));
        if got != want {
            failures.push(format!("--- {name}.cnf\n{}", first_difference(&want, &got)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn first_difference(want: &str, got: &str) -> String {
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        if w != g {
            return format!("line {}: want {w:?}, got {g:?}", i + 1);
        }
    }
    format!(
        "lengths differ: want {} lines, got {}",
        want.lines().count(),
        got.lines().count()
    )
}

#[test]
fn mysql_cases_cover_moco_golden_set() {
    let names: Vec<String> = cases()
        .into_iter()
        .filter(|(_, i)| i.flavor == Flavor::Mysql)
        .map(|(n, _)| n)
        .collect();
    for moco_case in ["nil", "normalize", "loose", "bufsize", "opaque"] {
        assert!(names.iter().any(|n| n == moco_case), "missing {moco_case}");
    }
}

#[test]
fn config_map_name_hashes_the_whole_text() {
    let nil = fs::read_to_string(fixture_dir().join("nil.cnf")).unwrap_or_else(|e| panic!("{e}"));
    // FNV-1a of nil.cnf, computed independently (Python).
    assert_eq!(mycnf_config_map_name("test", &nil), "moco-test.e15970f0");
    let mut changed = nil.clone();
    changed.push('\n');
    assert_ne!(
        mycnf_config_map_name("test", &changed),
        mycnf_config_map_name("test", &nil)
    );
}
