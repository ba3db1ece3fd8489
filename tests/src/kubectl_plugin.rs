//! `kubectl moco` as users run it: the `kubectl-moco` binary of this workspace on `PATH`,
//! found and run by the control plane's real kubectl (kubectl runs any `kubectl-<name>` on
//! `PATH` as `kubectl <name>`; `docs/kubectl-moco.md`, "Install").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::control_plane::ControlPlane;

/// The `kubectl-moco` binary of this workspace, built once per test process beside the
/// running test's profile (`cargo build -p moco-bin --bin kubectl-moco`).
pub fn kubectl_moco_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test executable");
        // <target>/<profile>/deps/<test>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("a test executable in <target>/<profile>/deps")
            .to_path_buf();
        let target_dir = profile_dir
            .parent()
            .expect("a target directory")
            .to_path_buf();
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        crate::local::without_test_env(&mut cmd)
            .current_dir(&workspace)
            .args([
                "build",
                "--quiet",
                "-p",
                "moco-bin",
                "--bin",
                "kubectl-moco",
            ])
            .arg("--target-dir")
            .arg(&target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("running cargo");
        assert!(status.success(), "building kubectl-moco failed: {status}");
        let bin = profile_dir.join("kubectl-moco");
        assert!(
            bin.is_file(),
            "built kubectl-moco but {} is missing",
            bin.display()
        );
        bin
    })
    .clone()
}

/// A `PATH` on which the plugin is installed: a directory of its own holding `kubectl-moco`,
/// then the control plane's binaries (kubectl), then the machine's.
#[derive(Debug)]
pub struct PluginPath {
    dir: tempfile::TempDir,
    cp: ControlPlane,
}

impl PluginPath {
    /// Installs the plugin (a copy of the binary, as `install` would put it) in a new
    /// directory.
    pub fn install(cp: &ControlPlane) -> PluginPath {
        let dir = tempfile::Builder::new()
            .prefix("kubectl-plugins")
            .tempdir()
            .unwrap();
        std::fs::copy(kubectl_moco_bin(), dir.path().join("kubectl-moco")).unwrap();
        PluginPath {
            dir,
            cp: cp.clone(),
        }
    }

    fn path(&self) -> String {
        let system = std::env::var("PATH").unwrap_or_default();
        format!(
            "{}:{}:{system}",
            self.dir.path().display(),
            self.cp.dir.join("bin").display()
        )
    }

    /// Runs the control plane's kubectl with `args` (the admin kubeconfig through
    /// `KUBECONFIG`, as a user's shell would have it) and the plugin on `PATH`.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(self.cp.dir.join("bin/kubectl"))
            .args(args)
            .env("PATH", self.path())
            .env("KUBECONFIG", self.cp.dir.join("kubeconfig"))
            .output()
            .unwrap()
    }

    /// [`Self::kubectl`], panicking with its output unless it succeeded; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}
