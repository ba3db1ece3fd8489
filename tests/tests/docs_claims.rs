//! The counts docs/testing.md states about the suite are the suite's own (issue 45, item 4): a
//! number copied by hand goes stale without failing anything (the scenario table said 102 while
//! 121 existed, the properties 16 while 17 ran). Each claim is read from the document and
//! computed from the files it describes.

use std::path::{Path, PathBuf};

/// The workspace's root (also `layout.rs`'s).
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(workspace().join(relative))
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The number (digits, `,` or `_` between them) that follows the one occurrence of `prefix`.
fn number_after(text: &str, prefix: &str) -> u64 {
    let found: Vec<_> = text.match_indices(prefix).collect();
    assert_eq!(found.len(), 1, "{prefix:?} occurs {} times", found.len());
    let rest = &text[found[0].0 + prefix.len()..];
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '_')
        .filter(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {prefix:?}: {:?}", &rest[..40]))
}

/// The properties of moco-core's engine and the cases they run by default: each `#[test]` of
/// `properties.rs` calls `check("name", CASES, ...)`.
fn properties() -> (u64, u64) {
    let text = read("moco-core/tests/properties.rs");
    let tests = text.matches("#[test]").count() as u64;
    let cases = text
        .split("check(")
        .skip(1)
        .filter_map(|call| {
            let after_name = call.trim_start().strip_prefix('"')?.split_once('"')?.1;
            let number: String = after_name
                .trim_start()
                .strip_prefix(',')?
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '_')
                .filter(char::is_ascii_digit)
                .collect();
            number.parse::<u64>().ok()
        })
        .sum();
    (tests, cases)
}

#[test]
fn the_testing_documents_counts_are_the_suites() {
    let doc = read("docs/testing.md");
    let scenarios = std::fs::read_dir(workspace().join("moco-core/tests/fixtures/scenarios"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count() as u64;
    assert_eq!(
        number_after(&doc, "`moco-core/tests/fixtures/scenarios/*.json` ("),
        scenarios,
        "docs/testing.md: the scenario count"
    );
    let (properties, cases) = properties();
    assert!(properties > 10 && cases > 50_000, "{properties} {cases}");
    assert_eq!(
        number_after(&doc, "(proptest, "),
        properties,
        "docs/testing.md: the engine's properties"
    );
    // Stated to the thousand.
    assert_eq!(
        number_after(&doc, " properties, ~"),
        (cases + 500) / 1000 * 1000,
        "docs/testing.md: the properties' cases ({cases})"
    );
}

/// The Rust files of the workspace (not `target/`, not the fuzz crate), relative to its root.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "fuzz" | ".git" | "node_modules") {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path.strip_prefix(workspace()).unwrap().to_owned());
        }
    }
}

/// The conditions of the `assert!`s in `text` that put an upper bound on a measured time: the
/// first argument reads an `elapsed()`, a `took`, a `pause` or a pause's `length()` and
/// compares it with `<` or `<=`.
fn time_bounds(text: &str) -> usize {
    let mut found = 0;
    let mut rest = text;
    while let Some(at) = rest.find("assert!(") {
        let body = &rest[at + "assert!(".len()..];
        let (mut depth, mut end) = (1usize, body.len());
        for (i, c) in body.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 1 => {
                    end = i;
                    break;
                }
                _ => {}
            }
            if depth == 0 {
                end = i;
                break;
            }
        }
        let condition = &body[..end];
        let measured = ["elapsed()", "took", "pause", ".length()"]
            .iter()
            .any(|m| condition.contains(m));
        let bounded = condition
            .match_indices('<')
            .any(|(i, _)| !condition[i + 1..].starts_with('<') && !condition[..i].ends_with('<'));
        if measured && bounded {
            found += 1;
        }
        rest = &body[end..];
    }
    found
}

/// docs/benchmarks.md says speed targets are met in benchmarks, never in timed tests. Every
/// upper bound a test puts on a measured time is listed in docs/testing.md ("Upper bounds on
/// time in tests") with what it separates, file by file: a new one fails here until it is
/// listed, so that a speed target cannot slip into a test unread.
#[test]
fn every_upper_bound_on_time_in_a_test_is_listed_with_its_reason() {
    assert!(
        read("docs/benchmarks.md").contains("never in timed tests"),
        "docs/benchmarks.md no longer makes the claim this test checks"
    );
    let mut files = Vec::new();
    rust_files(&workspace(), &mut files);
    let mut in_code = std::collections::BTreeMap::new();
    // This file's own examples of what the scan finds are not bounds.
    files.retain(|f| !f.ends_with("tests/tests/docs_claims.rs"));
    for file in files {
        let count = time_bounds(&read(&file.to_string_lossy()));
        if count > 0 {
            in_code.insert(file.to_string_lossy().into_owned(), count);
        }
    }
    let doc = read("docs/testing.md");
    let section = doc
        .split("## Upper bounds on time in tests")
        .nth(1)
        .expect("docs/testing.md: no section \"Upper bounds on time in tests\"");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut in_doc = std::collections::BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if let [_, file, count, ..] = cells.as_slice()
            && let (Some(file), Ok(count)) = (
                file.strip_prefix('`').and_then(|f| f.strip_suffix('`')),
                count.parse::<usize>(),
            )
        {
            in_doc.insert(file.to_owned(), count);
        }
    }
    assert!(in_code.len() > 10, "the scan found too little: {in_code:?}");
    assert_eq!(
        in_doc, in_code,
        "docs/testing.md, \"Upper bounds on time in tests\": the table (left) and the tests \
         (right) differ"
    );
}

#[test]
fn the_time_bound_scan_reads_conditions_not_messages() {
    assert_eq!(time_bounds("assert!(t.elapsed() < LIMIT, \"late\");"), 1);
    assert_eq!(
        time_bounds("assert!(\n    took <= at_most,\n    \"{took:?} < {x:?}\"\n);"),
        1
    );
    assert_eq!(time_bounds("assert!(x < y, \"{:?}\", t.elapsed());"), 0);
    assert_eq!(time_bounds("assert!(took >= at_least);"), 0);
    assert_eq!(time_bounds("assert!(value << 4 == took);"), 0);
    assert_eq!(
        time_bounds("assert!(f(a, b) && pause.length() < BOUND);"),
        1
    );
}

/// The workspace paths a backquoted token of `text` names: a token whose first component is a
/// top-level directory of the workspace (`moco-core/src/decide.rs`, `docs/`), with `{a,b}`
/// alternatives expanded. Placeholders (`<name>`), globs and URLs are not paths.
fn named_paths(text: &str, top: &std::collections::BTreeSet<String>) -> Vec<String> {
    fn expand(token: &str) -> Vec<String> {
        let Some(open) = token.find('{') else {
            return vec![token.to_owned()];
        };
        let Some(close) = token[open..].find('}').map(|c| open + c) else {
            return vec![token.to_owned()];
        };
        token[open + 1..close]
            .split(',')
            .flat_map(|alt| expand(&format!("{}{alt}{}", &token[..open], &token[close + 1..])))
            .collect()
    }
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.contains('/') && !t.contains(char::is_whitespace))
        .filter(|t| !t.contains(['*', '<', '>', '$', ':']))
        .filter(|t| t.split('/').next().is_some_and(|first| top.contains(first)))
        .flat_map(expand)
        .collect()
}

/// A file the design documents name that has moved sends a newcomer to a place that is not
/// there (issue 46: `docs/design.md` named `manager.rs` and `platform.rs` after both became
/// folders). Every workspace path in `docs/*.md` and the README exists (a crate of `testing/`
/// named without it counts as a path, so a moved crate's old paths fail); a `tests/…` path may
/// be a crate's own (`moco-operator/tests/…`) when the text is about that crate.
#[test]
fn every_path_the_documents_name_exists() {
    let root = workspace();
    let top: std::collections::BTreeSet<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "target")
        .collect();
    // The crates of `testing/`: a path that names one without `testing/` is stale.
    let testing: Vec<String> = std::fs::read_dir(root.join("testing"))
        .unwrap()
        .map(|e| format!("testing/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    let crates: Vec<String> = top
        .iter()
        .cloned()
        .chain(testing.iter().cloned())
        .filter(|dir| root.join(dir).join("Cargo.toml").is_file())
        .collect();
    let mut top = top;
    top.extend(testing.iter().map(|t| t["testing/".len()..].to_owned()));
    let mut documents: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    documents.push(root.join("README.md"));
    let (mut checked, mut missing) = (0, Vec::new());
    for document in &documents {
        let relative = document.strip_prefix(&root).unwrap().to_string_lossy();
        for path in named_paths(&read(&relative), &top) {
            checked += 1;
            let path = path.trim_end_matches('/');
            let exists = root.join(path).exists()
                || (path.starts_with("tests/")
                    && crates.iter().any(|c| root.join(c).join(path).exists()));
            if !exists {
                missing.push(format!("{relative}: {path}"));
            }
        }
    }
    assert!(checked > 300, "the scan found too few paths: {checked}");
    assert!(
        missing.is_empty(),
        "paths the documents name that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_path_scan_expands_alternatives_and_skips_what_is_not_a_path() {
    let top = ["moco-core".to_owned(), "docs".to_owned()].into();
    assert_eq!(
        named_paths(
            "see `moco-core/src/plan/{a,b}.rs`, `moco-rs/tls`, `docs/` and `moco-core/<name>.rs`",
            &top
        ),
        [
            "moco-core/src/plan/a.rs",
            "moco-core/src/plan/b.rs",
            "docs/"
        ]
    );
}
