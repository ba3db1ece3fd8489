//! Regression: `moco plan … | head` panicked ("failed printing to stdout: Broken pipe") when
//! the reader closed the pipe first. Output nobody reads is not an error of the command.

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `moco args` with its standard output a pipe closed before it writes; returns its exit
/// code and standard error.
fn with_output_closed(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_moco"))
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_printing_command_survives_a_closed_output() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/facts/healthy.json");
    let cluster = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/examples/three-replicas-anti-affinity.yaml");
    for args in [
        vec!["plan", "--facts", facts.to_str().unwrap()],
        vec!["schema", "facts"],
        vec!["crd"],
        vec!["render", cluster.to_str().unwrap()],
        vec!["validate", cluster.to_str().unwrap()],
    ] {
        let (code, stderr) = with_output_closed(&args);
        assert!(!stderr.contains("panicked"), "moco {args:?}: {stderr}");
        assert_ne!(code, Some(101), "moco {args:?} panicked: {stderr}");
        assert_eq!(code, Some(0), "moco {args:?}: {stderr}");
    }
}
