//! Table tests: every file in `tests/fixtures/scenarios/` holds real facts and the expected
//! outcome, written by hand from MOCO's rules (`tests/fixtures/generate_scenarios.py`). They
//! cover MOCO's `clustering/status_test.go` table and the rules where this engine differs on
//! purpose (see docs/clustering.md).
//!
//! What is compared:
//! - `state` and `action` (required);
//! - `steps` (required, `[]` when none): each step is the whole operation as
//!   [`moco_core::operation::Step`] serializes it (`op`, `index` and every argument; GTID sets
//!   compared as sets, not as text), plus the `type` and `reason` (and `message` when given)
//!   of its `onSuccess` / `onFailure` events. An expected step must name every field of its
//!   operation and nothing else, so that no argument is left unchecked by a serde default;
//! - `events` (required, `[]` when none): the decision's events by type, reason and message;
//! - optionally `candidates`, `errant` (the assessment), `errantReplicaList`,
//!   `semiSyncMembers` and `semiSyncMinAcks` (the status to persist; `null` for absent) and
//!   `available` (the Available condition).
//!
//! Files in `tests/fixtures/scenarios-known-bugs/` have the same format and hold the correct
//! expectation for a case the engine gets wrong: they are decided and reported, and do not
//! fail the test (a malformed file does); the report goes to stderr even when the test passes.
//! One that starts passing is reported too, to be moved.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use moco_core::facts::ClusterFacts;
use moco_core::gtid::GtidSet;
use moco_core::operation::{Event, EventType, Operation, Step};
use moco_core::status::condition_type;
use moco_core::{Decision, decide};
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    description: String,
    facts: ClusterFacts,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    state: String,
    action: String,
    steps: Vec<Value>,
    events: Vec<ExpectedEvent>,
    candidates: Option<Vec<u32>>,
    errant: Option<Vec<u32>>,
    errant_replica_list: Option<Vec<u32>>,
    /// `Some(Value::Null)`: the field must be absent.
    #[serde(default, deserialize_with = "present")]
    semi_sync_members: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    semi_sync_min_acks: Option<Value>,
    available: Option<String>,
}

/// Keeps an explicit `null` apart from a missing key.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A decision-level event: everything is compared.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedEvent {
    #[serde(rename = "type")]
    type_: EventType,
    reason: String,
    message: String,
}

/// The event a step records on success or failure: type and reason, the message if given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepEvent {
    #[serde(rename = "type")]
    type_: EventType,
    reason: String,
    message: Option<String>,
}

struct ExpectedStep {
    operation: Operation,
    on_success: Option<StepEvent>,
    on_failure: Option<StepEvent>,
    raw: Value,
}

/// Why a scenario did not pass: its file is wrong, or the engine decided otherwise.
enum Problem {
    Malformed(String),
    Mismatch(String),
}

/// The first place where two JSON values differ in their object keys (values are not
/// compared): `None` when every object has the same keys at every level.
fn shape_difference(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            if let Some(k) = e.keys().find(|k| !a.contains_key(*k)) {
                return Some(format!("{path}{k}: not a field of this operation"));
            }
            if let Some(k) = a.keys().find(|k| !e.contains_key(*k)) {
                return Some(format!("{path}{k}: missing (every field must be stated)"));
            }
            e.iter()
                .find_map(|(k, v)| shape_difference(v, &a[k], &format!("{path}{k}.")))
        }
        _ => None,
    }
}

fn parse_step(n: usize, v: &Value) -> Result<ExpectedStep, String> {
    let Value::Object(map) = v else {
        return Err(format!("expected step #{n} is not an object: {v}"));
    };
    let mut op: Map<String, Value> = map.clone();
    let event = |key: &str, op: &mut Map<String, Value>| -> Result<Option<StepEvent>, String> {
        op.remove(key)
            .map(|e| {
                serde_json::from_value::<StepEvent>(e)
                    .map_err(|err| format!("expected step #{n}: {key}: {err}"))
            })
            .transpose()
    };
    let on_success = event("onSuccess", &mut op)?;
    let on_failure = event("onFailure", &mut op)?;
    let op = Value::Object(op);
    let operation: Operation = serde_json::from_value(op.clone())
        .map_err(|e| format!("expected step #{n} is not an operation ({e}): {v}"))?;
    let back = serde_json::to_value(&operation).unwrap();
    if let Some(d) = shape_difference(&op, &back, "") {
        return Err(format!("expected step #{n} ({}): {d}", operation.label()));
    }
    Ok(ExpectedStep {
        operation,
        on_success,
        on_failure,
        raw: v.clone(),
    })
}

fn type_name(t: EventType) -> &'static str {
    match t {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

fn show_event(e: Option<&Event>) -> String {
    match e {
        None => "none".into(),
        Some(e) => format!("{} {} {:?}", type_name(e.type_), e.reason, e.message),
    }
}

fn step_event_matches(expected: Option<&StepEvent>, got: Option<&Event>) -> bool {
    match (expected, got) {
        (None, None) => true,
        (Some(e), Some(g)) => {
            e.type_ == g.type_
                && e.reason == g.reason
                && e.message.as_ref().is_none_or(|m| *m == g.message)
        }
        _ => false,
    }
}

/// The differing fields of two serialized operations, GTID sets compared as sets.
fn field_differences(expected: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            let mut keys: Vec<&String> = e.keys().chain(g.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = format!("{path}{k}");
                match (e.get(k), g.get(k)) {
                    (Some(a), Some(b)) if k == "gtid" => {
                        let same = match (a.as_str(), b.as_str()) {
                            (Some(x), Some(y)) => GtidSet::parse(x).ok() == GtidSet::parse(y).ok(),
                            _ => a == b,
                        };
                        if !same {
                            out.push(format!("{sub}: expected {a}, got {b}"));
                        }
                    }
                    (Some(a), Some(b)) => field_differences(a, b, &format!("{sub}."), out),
                    (Some(a), None) => out.push(format!("{sub}: expected {a}, got nothing")),
                    (None, Some(b)) => out.push(format!("{sub}: not expected, got {b}")),
                    (None, None) => {}
                }
            }
        }
        _ if expected != got => out.push(format!(
            "{}: expected {expected}, got {got}",
            path.trim_end_matches('.')
        )),
        _ => {}
    }
}

/// A step as compact JSON with `op` and `index` first (serde_json sorts the other keys).
fn show_step(v: &Value) -> String {
    let Value::Object(map) = v else {
        return v.to_string();
    };
    let mut parts: Vec<String> = ["op", "index"]
        .iter()
        .filter_map(|k| map.get(*k).map(|x| format!("\"{k}\":{x}")))
        .collect();
    parts.extend(
        map.iter()
            .filter(|(k, _)| *k != "op" && *k != "index")
            .map(|(k, x)| format!("\"{k}\":{x}")),
    );
    format!("{{{}}}", parts.join(","))
}

fn compare_steps(expected: &[ExpectedStep], got: &[Step]) -> Option<String> {
    let same = |e: &ExpectedStep, g: &Step| {
        e.operation == g.operation
            && step_event_matches(e.on_success.as_ref(), g.on_success.as_ref())
            && step_event_matches(e.on_failure.as_ref(), g.on_failure.as_ref())
    };
    let first =
        (0..expected.len().max(got.len())).find(|&i| match (expected.get(i), got.get(i)) {
            (Some(e), Some(g)) => !same(e, g),
            _ => true,
        })?;
    let labels = |v: Vec<String>| format!("[{}]", v.join(", "));
    let mut out = format!(
        "steps differ at #{first}\n      expected steps: {}\n      got steps:      {}",
        labels(expected.iter().map(|e| e.operation.label()).collect()),
        labels(got.iter().map(|g| g.operation.label()).collect()),
    );
    match (expected.get(first), got.get(first)) {
        (Some(e), Some(g)) => {
            out.push_str(&format!(
                "\n      expected #{first}: {}\n      got #{first}:      {}",
                show_step(&e.raw),
                show_step(&serde_json::to_value(g).unwrap())
            ));
            let mut diffs = Vec::new();
            field_differences(
                &serde_json::to_value(&e.operation).unwrap(),
                &serde_json::to_value(&g.operation).unwrap(),
                "",
                &mut diffs,
            );
            if !step_event_matches(e.on_success.as_ref(), g.on_success.as_ref()) {
                diffs.push(format!(
                    "onSuccess: expected {}, got {}",
                    e.raw
                        .get("onSuccess")
                        .map_or("none".into(), Value::to_string),
                    show_event(g.on_success.as_ref())
                ));
            }
            if !step_event_matches(e.on_failure.as_ref(), g.on_failure.as_ref()) {
                diffs.push(format!(
                    "onFailure: expected {}, got {}",
                    e.raw
                        .get("onFailure")
                        .map_or("none".into(), Value::to_string),
                    show_event(g.on_failure.as_ref())
                ));
            }
            for d in diffs {
                out.push_str(&format!("\n        {d}"));
            }
        }
        (Some(e), None) => {
            out.push_str(&format!("\n      missing #{first}: {}", show_step(&e.raw)));
        }
        (None, Some(g)) => out.push_str(&format!(
            "\n      unexpected #{first}: {}",
            show_step(&serde_json::to_value(g).unwrap())
        )),
        (None, None) => {}
    }
    Some(out)
}

fn compare_events(expected: &[ExpectedEvent], got: &[Event]) -> Option<String> {
    let same = |e: &ExpectedEvent, g: &Event| {
        e.type_ == g.type_ && e.reason == g.reason && e.message == g.message
    };
    let first =
        (0..expected.len().max(got.len())).find(|&i| match (expected.get(i), got.get(i)) {
            (Some(e), Some(g)) => !same(e, g),
            _ => true,
        })?;
    let show_expected = expected.get(first).map_or("none".into(), |e| {
        format!("{} {} {:?}", type_name(e.type_), e.reason, e.message)
    });
    Some(format!(
        "events differ at #{first} (expected {}, got {})\n      expected: {show_expected}\n      got:      {}",
        expected.len(),
        got.len(),
        show_event(got.get(first))
    ))
}

fn check(sc: &Scenario) -> Result<(), Problem> {
    let e = &sc.expect;
    let expected_steps: Vec<ExpectedStep> = e
        .steps
        .iter()
        .enumerate()
        .map(|(n, v)| parse_step(n, v))
        .collect::<Result<_, _>>()
        .map_err(Problem::Malformed)?;
    let d: Decision =
        decide(&sc.facts).map_err(|err| Problem::Mismatch(format!("decide failed: {err}")))?;
    let mut errors = Vec::new();
    if d.state.as_str() != e.state {
        errors.push(format!("state {} != expected {}", d.state, e.state));
    }
    if d.action.as_str() != e.action {
        errors.push(format!(
            "action {} != expected {}",
            d.action.as_str(),
            e.action
        ));
    }
    if let Some(diff) = compare_steps(&expected_steps, &d.steps) {
        errors.push(diff);
    }
    if let Some(diff) = compare_events(&e.events, &d.events) {
        errors.push(diff);
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
    if let Some(c) = &e.errant_replica_list
        && &d.status.errant_replica_list != c
    {
        errors.push(format!(
            "status.errantReplicaList {:?} != expected {c:?}",
            d.status.errant_replica_list
        ));
    }
    for (name, want, got) in [
        (
            "semiSyncMembers",
            &e.semi_sync_members,
            d.status.semi_sync_members,
        ),
        (
            "semiSyncMinAcks",
            &e.semi_sync_min_acks,
            d.status.semi_sync_min_acks,
        ),
    ] {
        if let Some(want) = want
            && &serde_json::to_value(got).unwrap() != want
        {
            errors.push(format!("status.{name} {got:?} != expected {want}"));
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
        Err(Problem::Mismatch(format!("    {}", errors.join("\n    "))))
    }
}

/// The scenario files of `dir` (none when it does not exist), by name.
fn scenario_files(dir: &str) -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let Ok(read) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut entries: Vec<(String, PathBuf)> = read
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    entries.sort();
    entries
}

/// Decides every scenario of `dir`: (name, description, outcome).
fn run(dir: &str) -> Vec<(String, String, Result<(), Problem>)> {
    scenario_files(dir)
        .into_iter()
        .map(|(name, path)| {
            let text = fs::read_to_string(&path).unwrap();
            match serde_json::from_str::<Scenario>(&text) {
                Ok(sc) => {
                    let outcome = check(&sc);
                    (name, sc.description, outcome)
                }
                Err(e) => (
                    name,
                    String::new(),
                    Err(Problem::Malformed(format!("cannot parse: {e}"))),
                ),
            }
        })
        .collect()
}

#[test]
fn every_scenario_decides_as_expected() {
    let results = run("tests/fixtures/scenarios");
    let count = results.len();
    let failures: Vec<String> = results
        .into_iter()
        .filter_map(|(name, desc, outcome)| match outcome {
            Ok(()) => None,
            Err(Problem::Malformed(m)) => Some(format!("{name}: malformed scenario: {m}")),
            Err(Problem::Mismatch(m)) => Some(format!("{name} ({desc}):\n{m}")),
        })
        .collect();
    assert!(
        count >= 80,
        "expected the scenario table, found {count} files"
    );
    assert!(
        failures.is_empty(),
        "{} of {count} scenarios failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Known engine bugs: reported, never failing, unless a file is malformed or also listed as
/// a passing scenario.
#[test]
fn known_bugs_are_reported() {
    let passing: Vec<String> = scenario_files("tests/fixtures/scenarios")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut malformed = Vec::new();
    let mut report = String::new();
    for (name, desc, outcome) in run("tests/fixtures/scenarios-known-bugs") {
        if passing.contains(&name) {
            malformed.push(format!("{name}: also in scenarios/"));
        }
        match outcome {
            Ok(()) => report.push_str(&format!(
                "known bug {name} now decides as expected: move it to tests/fixtures/scenarios/\n"
            )),
            Err(Problem::Mismatch(m)) => {
                report.push_str(&format!("known bug {name} ({desc}):\n{m}\n"));
            }
            Err(Problem::Malformed(m)) => malformed.push(format!("{name}: {m}")),
        }
    }
    // Straight to stderr: the test harness captures `eprintln!` of passing tests, and a known
    // bug must stay visible.
    std::io::stderr().write_all(report.as_bytes()).unwrap();
    assert!(
        malformed.is_empty(),
        "malformed known-bug scenarios:\n{}",
        malformed.join("\n")
    );
}
