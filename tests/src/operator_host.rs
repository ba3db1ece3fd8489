//! `moco controller` as a process of this machine against the real control plane
//! ([`crate::control_plane`]): the CRDs applied as a user applies them, the operator started
//! with the admin kubeconfig, watching one namespace (`--watch-namespace`, so that the tests
//! running at once on one control plane each have an operator of their own), stopped by pid
//! when dropped, and its `/metrics` read.
//!
//! What stands in for what a cluster would give the operator's Pod:
//!
//! * **cluster DNS**: the clustering manager dials each instance by its Pod's DNS name
//!   (`moco-<name>-<i>.moco-<name>.<ns>.svc`), which this machine does not resolve. The
//!   operator therefore runs in a mount namespace of its own (`unshare --mount`) whose
//!   `/etc/hosts` is a file of the test that a task keeps naming every Pod of the namespace
//!   with its address, as the Pod runner does for Pods (`docs/testing.md`). Pod addresses are
//!   reachable from this machine through the control plane's bridge.
//! * **cert-manager**: its `Certificate` CRD is created (cert-manager's own, from the Go module
//!   cache) when the control plane has none, so that the operator's Certificates are accepted;
//!   no cert-manager controller runs, and [`issue_agent_certificate`] writes the Secret it
//!   would issue for the agents.
//! * **the webhooks** are served (the process needs a certificate for them) but not
//!   registered with the API server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use moco_adapters::mysql::tls::Authority;

use crate::control_plane::ControlPlane;
use crate::local::{free_port_block, moco_bin};

/// The cert-manager release whose `Certificate` CRD is created when the Go module cache has
/// none (any cached release is used first).
pub const CERT_MANAGER_VERSION: &str = "v1.21.2";
/// How long the operator may take to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

static CRDS: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();

/// Applies `deploy/crds/` with `kubectl apply --server-side` and creates cert-manager's
/// `Certificate` CRD if the control plane has none; once per test process.
pub async fn install_crds(cp: &ControlPlane) {
    CRDS.get_or_init(|| async {
        let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
        let out = cp.kubectl(
            &["apply", "--server-side", "-f", crds.to_str().unwrap()],
            None,
        );
        assert!(
            out.status.success(),
            "kubectl apply --server-side -f deploy/crds: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let certificates = "certificates.cert-manager.io";
        let present = cp.kubectl(&["get", "crd", certificates], None);
        if !present.status.success() {
            let file = cert_manager_crd("cert-manager.io_certificates.yaml");
            let out = cp.kubectl(&["create", "-f", file.to_str().unwrap()], None);
            let stderr = String::from_utf8_lossy(&out.stderr);
            // Another test process may have created it in between.
            assert!(
                out.status.success() || stderr.contains("AlreadyExists"),
                "kubectl create -f {}: {stderr}",
                file.display()
            );
        }
        // Polled through the API: `kubectl wait` on a CRD created a moment before fails at
        // once while its status has no conditions yet (`.status.conditions accessor error`).
        let crds: Api<CustomResourceDefinition> = Api::all(cp.client.clone());
        for crd in [
            "mysqlclusters.moco.cybozu.com",
            "backuppolicies.moco.cybozu.com",
            certificates,
        ] {
            crate::control_plane::wait_for(
                &format!("CRD {crd} established"),
                Duration::from_secs(60),
                || async {
                    let c = crds.get_opt(crd).await.ok()??;
                    c.status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(())
                },
            )
            .await;
        }
    })
    .await;
}

/// A CRD file of cert-manager's release in the Go module cache (downloaded into it with
/// `go mod download` when no release is there).
fn cert_manager_crd(file: &str) -> PathBuf {
    let go = |args: &[&str]| {
        let out = Command::new("go")
            .args(args)
            .env("GOFLAGS", "-mod=mod")
            .output()
            .unwrap_or_else(|e| panic!("go {args:?}: {e}"));
        assert!(
            out.status.success(),
            "go {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let cache = PathBuf::from(go(&["env", "GOMODCACHE"])).join("github.com/cert-manager");
    let mut releases: Vec<PathBuf> = std::fs::read_dir(&cache)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("cert-manager@v1."))
                        && p.join("deploy/crds").join(file).is_file()
                })
                .collect()
        })
        .unwrap_or_default();
    releases.sort();
    if let Some(newest) = releases.pop() {
        return newest.join("deploy/crds").join(file);
    }
    let module = format!("github.com/cert-manager/cert-manager@{CERT_MANAGER_VERSION}");
    let json = go(&["mod", "download", "-json", &module]);
    let dir = serde_json::from_str::<serde_json::Value>(&json)
        .ok()
        .and_then(|v| v["Dir"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("go mod download {module}: no Dir in {json}"));
    dir.join("deploy/crds").join(file)
}

/// Writes the Secret cert-manager would issue for the agents of cluster `namespace/name`
/// (`moco-agent-<namespace>.<name>` in the operator's namespace `system`), which the
/// operator copies into the cluster's namespace for the Pods.
pub async fn issue_agent_certificate(cp: &ControlPlane, system: &str, namespace: &str, name: &str) {
    let ca = Authority::generate("test agent CA").unwrap();
    let issued = ca
        .issue("moco-agent", &[format!("*.moco-{name}.{namespace}.svc")])
        .unwrap();
    let secret_name = format!("moco-agent-{namespace}.{name}");
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": secret_name, "namespace": system},
        "type": "kubernetes.io/tls",
        "stringData": {
            "ca.crt": ca.cert_pem(),
            "tls.crt": issued.cert_pem,
            "tls.key": issued.key_pem,
        }
    }))
    .unwrap();
    Api::<Secret>::namespaced(cp.client.clone(), system)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("creating Secret {system}/{secret_name}: {e}"));
}

/// A running `moco controller`.
pub struct OperatorHost {
    child: Option<Child>,
    /// The namespace it watches, which is also its own (`POD_NAMESPACE`).
    pub namespace: String,
    /// `/metrics`.
    pub metrics_addr: SocketAddr,
    dir: tempfile::TempDir,
    hosts_writer: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for OperatorHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorHost")
            .field("pid", &self.child.as_ref().map(Child::id))
            .field("namespace", &self.namespace)
            .field("metrics", &self.metrics_addr)
            .finish_non_exhaustive()
    }
}

/// The lines of a hosts file naming every Pod of `namespace` that has an address and a
/// subdomain, as cluster DNS would, after the machine's own `/etc/hosts`.
async fn hosts_file(client: &kube::Client, namespace: &str, base: &str) -> Option<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .ok()?;
    let mut text = base.to_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    for pod in &pods.items {
        let (Some(name), Some(spec), Some(ip)) = (
            pod.metadata.name.as_deref(),
            pod.spec.as_ref(),
            pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()),
        ) else {
            continue;
        };
        let Some(subdomain) = spec.subdomain.as_deref() else {
            continue;
        };
        let fqdn = format!("{name}.{subdomain}.{namespace}.svc");
        text.push_str(&format!("{ip}\t{fqdn} {fqdn}.cluster.local\n"));
    }
    Some(text)
}

/// Keeps `path` up to date with [`hosts_file`], writing in place (the operator's `/etc/hosts`
/// is a bind mount of this very inode).
async fn write_hosts(client: kube::Client, namespace: String, path: PathBuf) {
    let base = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let mut last = String::new();
    loop {
        if let Some(text) = hosts_file(&client, &namespace, &base).await
            && text != last
        {
            use std::io::Write as _;
            let written = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()));
            if written.is_ok() {
                last = text;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

impl OperatorHost {
    /// Starts `moco controller` in `namespace` (its own and the one it watches) with the
    /// control plane's admin kubeconfig, a 2-second clustering check interval and `args`
    /// besides; returns once `/metrics` answers and it holds its leader Lease.
    pub async fn start(cp: &ControlPlane, namespace: &str, args: &[&str]) -> OperatorHost {
        install_crds(cp).await;
        let dir = tempfile::Builder::new()
            .prefix("moco-operator-host")
            .tempdir()
            .unwrap();
        let webhook_certs = dir.path().join("webhook");
        std::fs::create_dir_all(&webhook_certs).unwrap();
        let ca = Authority::generate("test webhook CA").unwrap();
        let cert = ca
            .issue(
                "moco-webhook",
                &["127.0.0.1".to_owned(), "localhost".to_owned()],
            )
            .unwrap();
        std::fs::write(webhook_certs.join("tls.crt"), &cert.cert_pem).unwrap();
        std::fs::write(webhook_certs.join("tls.key"), &cert.key_pem).unwrap();
        let hosts = dir.path().join("hosts");
        std::fs::copy("/etc/hosts", &hosts).unwrap();
        let hosts_writer = tokio::spawn(write_hosts(
            cp.client.clone(),
            namespace.to_owned(),
            hosts.clone(),
        ));
        let base = free_port_block(3);
        let addr = |offset: u16| format!("127.0.0.1:{}", base + offset);
        let log = std::fs::File::create(dir.path().join("operator.log")).unwrap();
        let mut command = vec![
            moco_bin().to_str().unwrap().to_owned(),
            "controller".into(),
            "--watch-namespace".into(),
            namespace.into(),
            "--metrics-addr".into(),
            addr(0),
            "--health-probe-addr".into(),
            addr(1),
            "--webhook-addr".into(),
            addr(2),
            "--cert-dir".into(),
            webhook_certs.to_str().unwrap().into(),
            "--grpc-cert-dir".into(),
            dir.path().join("grpc").to_str().unwrap().into(),
            "--check-interval".into(),
            "2s".into(),
            "--zap-encoder".into(),
            "console".into(),
        ];
        command.extend(args.iter().map(|a| (*a).to_owned()));
        // `unshare` and `sh` exec the next program: the child's pid is the operator's.
        let script = format!("mount --bind {} /etc/hosts && exec \"$@\"", hosts.display());
        let child = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
                "sh",
            ])
            .args(&command)
            .env("KUBECONFIG", cp.dir.join("kubeconfig"))
            .env("POD_NAMESPACE", namespace)
            .env("MOCO_LOG", "info,moco_operator=debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
        let mut host = OperatorHost {
            child: Some(child),
            namespace: namespace.to_owned(),
            metrics_addr: format!("127.0.0.1:{base}").parse().unwrap(),
            dir,
            hosts_writer,
        };
        let started = Instant::now();
        loop {
            if let Some(status) = host
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("moco controller exited with {status}:\n{}", host.log());
            }
            if host.metrics().await.is_some() && host.log().contains("leading: reconciling") {
                println!(
                    "moco controller for {namespace}: leading after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                return host;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "moco controller did not lead within 60 s:\n{}",
                host.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("operator.log")).unwrap_or_default()
    }

    /// The text of `/metrics`, or `None` while it does not answer.
    pub async fn metrics(&self) -> Option<String> {
        match crate::pod::get(self.metrics_addr, "/metrics").await {
            Some((200, body)) => Some(body),
            _ => None,
        }
    }

    /// The value of the sample `name` with exactly `labels`, from `/metrics`.
    pub async fn sample(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        sample(&self.metrics().await?, name, labels)
    }

    /// Stops it: SIGTERM, then SIGKILL after the grace; waits for it to be gone.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for OperatorHost {
    fn drop(&mut self) {
        self.stop();
        self.hosts_writer.abort();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(80).collect();
            eprintln!(
                "--- last lines of the operator's log ({}) ---",
                self.namespace
            );
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// The value of sample `name{labels}` (exactly those labels, in any order) in the OpenMetrics
/// text `text`.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<&str, &str> = labels.iter().copied().collect();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, set) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let have: BTreeMap<&str, &str> = set
                .split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k, v.strip_prefix('"')?.strip_suffix('"')?))
                })
                .collect();
            (have == want).then(|| value.parse().ok()).flatten()
        })
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn samples_are_found_by_name_and_exact_labels() {
        let text = "# TYPE a counter\na_total{name=\"db\",namespace=\"ns\"} 3\na_total{name=\"db\",namespace=\"other\"} 5\nb 1.5\n# EOF\n";
        assert_eq!(
            sample(text, "a_total", &[("namespace", "ns"), ("name", "db")]),
            Some(3.0)
        );
        assert_eq!(sample(text, "a_total", &[("name", "db")]), None);
        assert_eq!(sample(text, "b", &[]), Some(1.5));
        assert_eq!(sample(text, "a", &[]), None);
    }
}
