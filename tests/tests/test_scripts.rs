//! The test command's shell helpers run under `set -euo pipefail`, where a failing command
//! substitution ends the whole run. On a clean checkout (CI) the target directory does not exist
//! yet; a helper that trips there fails CI in a second without running a test (it did once).

use std::path::Path;
use std::process::Command;

/// Runs `call` in strict bash after sourcing `scripts/lib/<lib>`, from the workspace root.
fn strict_bash(lib: &str, call: &str, target_dir: &Path) -> std::process::Output {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -euo pipefail; source scripts/lib/{lib}; {call}; echo completed"
        ))
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target_dir)
        .output()
        .unwrap()
}

#[test]
fn disk_report_survives_a_missing_target_directory() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("never-built");
    let out = strict_bash("disk.sh", "disk", &missing);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("completed"),
        "disk failed on a clean checkout: {out:?}"
    );
    assert!(
        stdout.contains("disk: nothing in the target directory"),
        "{stdout}"
    );

    // And it reports a size once there is something to measure.
    std::fs::create_dir_all(&missing).unwrap();
    std::fs::write(missing.join("artifact"), vec![0u8; 64 * 1024]).unwrap();
    let out = strict_bash("disk.sh", "disk", &missing);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!stdout.contains("nothing"), "{stdout}");
}
