//! `moco plan` and `moco schema` as a user runs them.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn moco() -> Command {
    Command::new(env!("CARGO_BIN_EXE_moco"))
}

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/facts")
}

#[test]
fn each_example_plans_to_its_state() {
    for (file, state) in [
        ("healthy.json", "Healthy"),
        ("degraded.json", "Degraded"),
        ("failed.json", "Failed"),
        ("lost.json", "Lost"),
        ("incomplete.json", "Incomplete"),
        ("cloning.json", "Cloning"),
        ("restoring.json", "Restoring"),
        ("offline.json", "Offline"),
        ("switchover.json", "Healthy"),
        ("mariadb-failover.json", "Failed"),
    ] {
        let out = moco()
            .args(["plan", "--facts"])
            .arg(examples().join(file))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["state"], state, "{file}");
        assert!(v["status"]["conditions"].is_array(), "{file}");
        assert!(v["steps"].is_array(), "{file}");
    }
}

#[test]
fn switchover_example_plans_the_switchover_steps() {
    let out = moco()
        .args(["plan", "--compact", "--facts"])
        .arg(examples().join("switchover.json"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ops: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["op"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "setSuperReadOnly",
            "killConnections",
            "waitForCatchUp",
            "setPrimaryIndex",
            "removeDemoteAnnotation"
        ]
    );
    assert_eq!(v["steps"][3]["onSuccess"]["reason"], "SwitchOver");
}

fn plan_stdin(input: &str) -> (bool, String) {
    let mut child = moco()
        .args(["plan", "--facts", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn healthy() -> serde_json::Value {
    let text = std::fs::read_to_string(examples().join("healthy.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn malformed_facts_name_the_json_path() {
    let mut f = healthy();
    f["instances"][1]["mysqld"]["gtidExecuted"] = "not-a-gtid".into();
    let (ok, err) = plan_stdin(&f.to_string());
    assert!(!ok);
    assert!(err.contains("instances[1].mysqld.gtidExecuted"), "{err}");

    let mut f = healthy();
    f["spec"]["replicas"] = "three".into();
    let (ok, err) = plan_stdin(&f.to_string());
    assert!(!ok);
    assert!(err.contains("spec.replicas"), "{err}");

    let (ok, err) = plan_stdin("{");
    assert!(!ok);
    assert!(err.contains("invalid facts"), "{err}");
}

#[test]
fn inconsistent_facts_name_the_json_path() {
    let mut f = healthy();
    f["status"]["currentPrimaryIndex"] = 3.into();
    let (ok, err) = plan_stdin(&f.to_string());
    assert!(!ok);
    assert!(err.contains("status.currentPrimaryIndex"), "{err}");

    let mut f = healthy();
    f["instances"][2]["index"] = 1.into();
    let (ok, err) = plan_stdin(&f.to_string());
    assert!(!ok);
    assert!(err.contains("instances[2].index"), "{err}");
    assert!(err.contains("appears twice"), "{err}");
}

#[test]
fn missing_file_is_a_clear_error() {
    let out = moco()
        .args(["plan", "--facts", "/nonexistent/facts.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/facts.json"), "{err}");
}

#[test]
fn schemas_describe_facts_and_decision() {
    for (which, field) in [("facts", "instances"), ("decision", "steps")] {
        let out = moco().args(["schema", which]).output().unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["properties"][field].is_object(), "{which}: {v}");
    }
    let out = moco().args(["schema", "nope"]).output().unwrap();
    assert!(!out.status.success());
}

/// Issue 12, item 4: `moco plan --facts /dev/zero` and an endless pipe into `moco validate -`
/// read until memory ran out. Both stop at 16 MiB with an error naming the input.
#[test]
fn endless_input_is_refused_at_the_size_limit() {
    let out = moco()
        .args(["plan", "--facts", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read facts from /dev/zero: larger than 16 MiB"),
        "{err}"
    );

    let mut child = moco()
        .args(["validate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let chunk = vec![b'#'; 1 << 20];
        // The command stops reading at the limit; the broken pipe ends this loop.
        for _ in 0..64 {
            if stdin.write_all(&chunk).is_err() {
                return true;
            }
        }
        false
    });
    let out = child.wait_with_output().unwrap();
    assert!(feeder.join().unwrap(), "validate read all 64 MiB");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read -: larger than 16 MiB"), "{err}");
}
