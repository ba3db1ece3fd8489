//! The counts docs/testing.md states about the suite are the suite's own (issue 45, item 4): a
//! number copied by hand goes stale without failing anything (the scenario table said 102 while
//! 121 existed, the properties 16 while 17 ran). Each claim is read from the document and
//! computed from the files it describes.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
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
