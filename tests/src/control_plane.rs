//! The real control plane of the test command: `scripts/kube.sh up --dir DIR` starts etcd,
//! kube-apiserver, kube-controller-manager and the Pod runner, and `scripts/test.sh` exports
//! `MOCO_KUBE_DIR=DIR` for the tests. Each test works in a namespace of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Names the directory `scripts/kube.sh up --dir` made.
pub const DIR_ENV: &str = "MOCO_KUBE_DIR";
/// Set to `1` to skip the control-plane tests on a machine without one.
pub const SKIP_ENV: &str = "MOCO_SKIP_KUBE";

/// A running control plane.
#[derive(Clone)]
pub struct ControlPlane {
    /// The directory `kube.sh up` made.
    pub dir: PathBuf,
    /// A cluster-admin client.
    pub client: kube::Client,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The control plane of [`DIR_ENV`], after recording `test` in the real-server ledger. Without
/// one the test fails, unless [`SKIP_ENV`] is `1` (then `None`).
pub async fn control_plane(test: &str) -> Option<ControlPlane> {
    let Some(dir) = std::env::var_os(DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
    else {
        if std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1") {
            println!("SKIPPED {test} ({SKIP_ENV}=1): no control plane");
            return None;
        }
        panic!(
            "{test}: no control plane: run `scripts/kube.sh up --dir DIR` and set {DIR_ENV}=DIR \
             (scripts/test.sh does), or set {SKIP_ENV}=1 to skip"
        );
    };
    let kubeconfig = dir.join("kubeconfig");
    let config = Kubeconfig::read_from(&kubeconfig)
        .unwrap_or_else(|e| panic!("{test}: reading {}: {e}", kubeconfig.display()));
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{test}: {}: {e}", kubeconfig.display()));
    let client = kube::Client::try_from(config).unwrap_or_else(|e| panic!("{test}: client: {e}"));
    let version = client.apiserver_version().await.unwrap_or_else(|e| {
        panic!(
            "{test}: the API server of {} does not answer: {e}",
            dir.display()
        )
    });
    println!(
        "{test}: on kube-apiserver {} ({})",
        version.git_version,
        dir.display()
    );
    moco_testkit::ledger::record(test, &format!("kube-apiserver {}", version.git_version));
    Some(ControlPlane { dir, client })
}

static NAMESPACES: AtomicU32 = AtomicU32::new(0);

impl ControlPlane {
    /// `kubectl` with the admin kubeconfig.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        use std::io::Write;
        let mut child = Command::new(self.dir.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// `kubectl apply -f -` of `yaml` in `namespace`; panics with kubectl's words on failure.
    pub fn apply(&self, namespace: &str, yaml: &str) {
        let out = self.kubectl(&["-n", namespace, "apply", "-f", "-"], Some(yaml));
        assert!(
            out.status.success(),
            "kubectl apply: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new namespace named after `prefix`.
    pub async fn namespace(&self, prefix: &str) -> String {
        let n = NAMESPACES.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}
        }))
        .unwrap();
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        name
    }

    /// Deletes a namespace (the namespace controller deletes what is in it, the runner stops
    /// its Pods).
    pub async fn delete_namespace(&self, name: &str) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await;
    }

    /// The runner's state directory.
    pub fn runner_state(&self) -> PathBuf {
        self.dir.join("runner")
    }

    /// The host directory behind a bound claim (the PV's `hostPath`).
    pub async fn claim_dir(&self, namespace: &str, claim: &str) -> PathBuf {
        let pvc = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
            .get(claim)
            .await
            .unwrap();
        let pv_name = pvc
            .spec
            .and_then(|s| s.volume_name)
            .expect("the claim is bound");
        let pv = Api::<PersistentVolume>::all(self.client.clone())
            .get(&pv_name)
            .await
            .unwrap();
        let path = pv
            .spec
            .and_then(|s| s.host_path)
            .map(|h| h.path)
            .expect("a hostPath PV");
        PathBuf::from(path)
    }

    /// A Pod, if it exists.
    pub async fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .unwrap()
    }

    /// Runs `argv` inside a running container (`pod-runner exec`, the runner's stand-in for
    /// `kubectl exec`).
    pub fn exec(&self, namespace: &str, pod: &str, container: &str, argv: &[&str]) -> Output {
        Command::new(self.dir.join("bin/pod-runner"))
            .arg("exec")
            .arg("--state-dir")
            .arg(self.runner_state())
            .arg(format!("{namespace}/{pod}"))
            .arg(container)
            .arg("--")
            .args(argv)
            .output()
            .unwrap()
    }
}

/// Whether a Pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The restart count of a container of a Pod.
pub fn restarts(pod: &Pod, container: &str) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == container))
        .map_or(0, |c| c.restart_count)
}

/// Polls `check` every 250 ms until it gives a value; panics naming `what` after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            println!("{what}: after {:.1} s", start.elapsed().as_secs_f64());
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A directory for a test's hostPath volumes, made world-writable (containers may run as
/// other users) and removed by the caller.
pub fn host_dir(name: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new().prefix(name).tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// Whether `path` exists (for polling).
pub fn exists(path: &Path) -> bool {
    path.exists()
}
