//! Table tests: every file in `tests/fixtures/scenarios/` holds real facts and the expected
//! outcome (state, action, steps as `op:index`, candidates, errant replicas, event reasons,
//! the Available condition). They cover MOCO's `clustering/status_test.go` table and the rules
//! where this engine differs on purpose (see docs/clustering.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use moco_core::facts::ClusterFacts;
use moco_core::status::condition_type;
use moco_core::{Decision, decide};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    description: String,
    facts: ClusterFacts,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    state: String,
    action: Option<String>,
    steps: Option<Vec<String>>,
    candidates: Option<Vec<u32>>,
    errant: Option<Vec<u32>>,
    events: Option<Vec<String>>,
    available: Option<String>,
}

fn step_names(d: &Decision) -> Vec<String> {
    d.steps.iter().map(|s| s.operation.label()).collect()
}

fn check(name: &str, sc: &Scenario) -> Result<(), String> {
    let d = decide(&sc.facts).map_err(|e| format!("decide failed: {e}"))?;
    let mut errors = Vec::new();
    let e = &sc.expect;
    if d.state.as_str() != e.state {
        errors.push(format!("state {} != expected {}", d.state, e.state));
    }
    if let Some(a) = &e.action {
        let got = serde_json::to_value(d.action).unwrap();
        if got.as_str() != Some(a.as_str()) {
            errors.push(format!("action {got} != expected {a}"));
        }
    }
    if let Some(steps) = &e.steps {
        let got = step_names(&d);
        if &got != steps {
            errors.push(format!("steps {got:?} != expected {steps:?}"));
        }
    }
    if let Some(c) = &e.candidates
        && &d.assessment.candidates != c
    {
        errors.push(format!(
            "candidates {:?} != expected {c:?}",
            d.assessment.candidates
        ));
    }
    if let Some(c) = &e.errant
        && &d.assessment.errant != c
    {
        errors.push(format!(
            "errant {:?} != expected {c:?}",
            d.assessment.errant
        ));
    }
    if let Some(ev) = &e.events {
        let got: Vec<&str> = d.events.iter().map(|e| e.reason.as_str()).collect();
        if got != ev.iter().map(String::as_str).collect::<Vec<_>>() {
            errors.push(format!("events {got:?} != expected {ev:?}"));
        }
    }
    if let Some(av) = &e.available {
        let got = d
            .status
            .condition(condition_type::AVAILABLE)
            .map(|c| c.status);
        let got = serde_json::to_value(got).unwrap();
        if got.as_str() != Some(av.as_str()) {
            errors.push(format!("Available {got} != expected {av}"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{name} ({}): {}",
            sc.description,
            errors.join("; ")
        ))
    }
}

#[test]
fn every_scenario_decides_as_expected() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scenarios");
    let mut failures = Vec::new();
    let mut count = 0;
    let mut entries: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).unwrap();
        let sc: Scenario = match serde_json::from_str(&text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{name}: cannot parse: {e}"));
                continue;
            }
        };
        count += 1;
        if let Err(e) = check(&name, &sc) {
            failures.push(e);
        }
    }
    assert!(
        count >= 40,
        "expected the scenario table, found {count} files"
    );
    assert!(
        failures.is_empty(),
        "{} of {count} scenarios failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
