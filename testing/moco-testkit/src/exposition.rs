//! Reading the metrics exposition back, checking its form on the way.

use std::collections::BTreeMap;

/// The samples of an OpenMetrics text exposition by series (`name{labels}`), checked for
/// well-formedness: every sample's family has HELP and TYPE lines (a counter's samples are
/// its family name plus `_total`), every type is a gauge or a counter, every value is a
/// number, no series appears twice, and the text ends with `# EOF`.
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut typed: Vec<(String, String)> = Vec::new();
    let mut helped = Vec::new();
    let mut out = BTreeMap::new();
    let mut eof = false;
    for line in text.lines() {
        assert!(!eof, "a line after # EOF: {line}");
        if line == "# EOF" {
            eof = true;
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split_whitespace().next().unwrap_or_default();
            helped.push(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let name = parts.next().unwrap_or_default().to_owned();
            let kind = parts.next().unwrap_or_default().to_owned();
            assert!(matches!(kind.as_str(), "gauge" | "counter"), "{line}");
            typed.push((name, kind));
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
            let name = series.split('{').next().unwrap_or_default();
            let family = typed
                .iter()
                .find(|(family, kind)| {
                    name == family
                        || (kind == "counter" && name.strip_suffix("_total") == Some(family))
                })
                .map(|(family, _)| family.clone())
                .unwrap_or_else(|| panic!("no TYPE for {line}"));
            assert!(helped.contains(&family), "no HELP for {line}");
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
            assert!(
                out.insert(series.to_owned(), value).is_none(),
                "duplicate {series}"
            );
        }
    }
    assert!(eof, "no # EOF at the end:\n{text}");
    out
}
