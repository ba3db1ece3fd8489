//! `moco validate` on the examples, the invalid examples (each with its expected output) and
//! update/delete scenarios.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples")
}

fn validate(dir: &Path, args: &[&str]) -> Output {
    match Command::new(env!("CARGO_BIN_EXE_moco"))
        .current_dir(dir)
        .arg("validate")
        .args(args)
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("cannot run moco: {e}"),
    }
}

fn yaml_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && !n.ends_with(".old.yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn examples_are_accepted() {
    let dir = examples();
    let files = yaml_files(&dir);
    let required = [
        "single-instance.yaml",
        "three-replicas-anti-affinity.yaml",
        "custom-mycnf.yaml",
        "replication-from-external.yaml",
        "loadbalancer-primary.yaml",
        "backup-s3.yaml",
        "restore-point-in-time.yaml",
        "accounts.yaml",
    ];
    for r in required {
        assert!(files.iter().any(|f| f == r), "missing example {r}");
    }
    for file in &files {
        let out = validate(&dir, &[file]);
        assert!(
            out.status.success(),
            "{file} rejected:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn invalid_examples_are_rejected_with_the_expected_message() {
    let dir = examples().join("invalid");
    let files = yaml_files(&dir);
    assert!(files.len() >= 15, "{files:?}");
    // moco-rs's own kinds are checked too: their webhooks' rules and their CRD's CEL rules.
    for case in [
        "user-moco-account.yaml",
        "user-privileged-grant.yaml",
        "database-system-schema.yaml",
        "user-cluster-changed.yaml",
        "user-name-changed.yaml",
        "user-bad-host.yaml",
        "database-bad-collation.yaml",
    ] {
        assert!(
            files.iter().any(|f| f == case),
            "missing invalid example {case}"
        );
    }
    for file in &files {
        let case = file.trim_end_matches(".yaml");
        let expected = match std::fs::read_to_string(dir.join(format!("{case}.expected"))) {
            Ok(t) => t,
            Err(e) => panic!("{case}.expected: {e}"),
        };
        assert!(!expected.trim().is_empty(), "{case}.expected is empty");
        let old = format!("{case}.old.yaml");
        let mut args = vec![file.as_str()];
        if dir.join(&old).exists() {
            args.extend(["--old", old.as_str()]);
        }
        let out = validate(&dir, &args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{case}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            expected,
            "{case}: output differs from {case}.expected"
        );
    }
}

#[test]
fn update_checks_match_objects_by_namespace_and_name() {
    let dir = examples().join("invalid");
    // Against an old object of another name: a create, so the added source is not seen.
    let out = validate(
        &dir,
        &[
            "replication-source-added.yaml",
            "--old",
            "restore-changed.old.yaml",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Keeping the same object is a valid update.
    let out = validate(
        &dir,
        &[
            "replication-source-added.old.yaml",
            "--old",
            "replication-source-added.old.yaml",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The old file of the in-use policy deleted nothing when the policy stays.
    let out = validate(
        &dir,
        &[
            "backup-policy-in-use.old.yaml",
            "--old",
            "backup-policy-in-use.old.yaml",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn storage_growth_without_storage_classes_is_a_warning() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let source = examples().join("invalid/storage-growth-not-expandable.yaml");
    let text = std::fs::read_to_string(source).unwrap_or_default();
    // Drop the StorageClass document.
    let cluster_only = text.split("\n---\n").nth(1).unwrap_or_default();
    std::fs::write(dir.path().join("new.yaml"), cluster_only).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(
        examples().join("invalid/storage-growth-not-expandable.old.yaml"),
        dir.path().join("old.yaml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = validate(dir.path(), &["new.yaml", "--old", "old.yaml"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("grows from 10Gi to 20Gi; volume expansion support not checked"),
        "{stderr}"
    );
    // With an expandable default class it is accepted silently.
    let expandable = text.replace("allowVolumeExpansion: false", "allowVolumeExpansion: true");
    std::fs::write(dir.path().join("new.yaml"), expandable).unwrap_or_else(|e| panic!("{e}"));
    let out = validate(dir.path(), &["new.yaml", "--old", "old.yaml"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not checked"));
}

#[test]
fn reads_standard_input() {
    let text =
        std::fs::read_to_string(examples().join("invalid/even-replicas.yaml")).unwrap_or_default();
    let child = Command::new(env!("CARGO_BIN_EXE_moco"))
        .args(["validate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = child.unwrap_or_else(|e| panic!("{e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "-:1: MySQLCluster/bad: spec.replicas: replicas must be a positive odd number\n"
    );
}

#[test]
fn unreadable_input_is_an_error() {
    let out = validate(&examples(), &["no-such-file.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read no-such-file.yaml"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("broken.yaml"), "kind: [unclosed\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let out = validate(dir.path(), &["broken.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.yaml: not valid YAML"));
}
