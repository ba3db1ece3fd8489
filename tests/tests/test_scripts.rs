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

/// The environment of this process without the variables the test command refuses, so that
/// a developer's shell cannot decide the outcome.
fn without_weakening(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        let weakening = ["PROPTEST_", "SIM_", "INSTA_", "MOCO_SOAK_", "MOCO_SKIP_"]
            .iter()
            .any(|p| name.starts_with(p))
            || name == "UPDATE_GOLDEN"
            || name == "MOCO_REAL_SERVER_LEDGER";
        if weakening {
            command.env_remove(&name);
        }
    }
    command
}

/// `scripts/test.sh` refuses, before it installs or builds anything, every variable that would
/// let it pass while proving less (issue 45), naming it; without them its guard lets it run.
#[test]
fn the_test_command_refuses_variables_that_weaken_the_proof() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    // Were the guard missing or late, the script must not install, build or test anything
    // (it would run this test again): every such tool is a stub that fails, and the rest of
    // the toolchain is not on PATH.
    let stubs = scratch.path().join("stubs");
    std::fs::create_dir(&stubs).unwrap();
    for tool in [
        "apt-get", "apt", "sudo", "pip", "pip3", "python3", "npm", "node", "cargo", "go", "rustup",
    ] {
        let stub = stubs.join(tool);
        std::fs::write(&stub, "#!/bin/sh\necho \"stub $0 ran\" >&2\nexit 97\n").unwrap();
        std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let path = format!("{}:/usr/bin:/bin", stubs.display());
    for (name, value) in [
        ("PROPTEST_CASES", "1"),
        ("PROPTEST_MAX_SHRINK_ITERS", "0"),
        ("SIM_STRICT", "0"),
        ("SIM_SEED", "7"),
        ("UPDATE_GOLDEN", "1"),
        ("INSTA_UPDATE", "always"),
        ("INSTA_FORCE_PASS", "1"),
        ("MOCO_SOAK_CYCLES", "1"),
        ("MOCO_SKIP_REAL_SERVER", "1"),
        ("MOCO_SKIP_KUBE", "1"),
        ("MOCO_SKIP_OBJECT_STORES", "1"),
        ("MOCO_REAL_SERVER_LEDGER", "/tmp/elsewhere"),
    ] {
        let out = without_weakening(&mut Command::new("bash"))
            .arg("scripts/test.sh")
            .current_dir(workspace)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", scratch.path().join("target"))
            .env(name, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        assert!(
            stderr.contains("refusing to run") && stderr.contains(&format!("  {name} (")),
            "{name}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{name}: it ran something: {out:?}");
    }
    let out = without_weakening(&mut Command::new("bash"))
        .arg("-c")
        .arg("set -euo pipefail; source scripts/lib/guard.sh; refuse_weakening_env; echo completed")
        .current_dir(workspace)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("completed"),
        "{out:?}"
    );
}
