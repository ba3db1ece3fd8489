//! `moco controller` as a process of this machine against the real control plane
//! ([`crate::control_plane`]): the CRDs applied as a user applies them, the operator started
//! with the admin kubeconfig, watching one namespace (`--watch-namespace`, so that the tests
//! running at once on one control plane each have an operator of their own), stopped by pid
//! when dropped, and its `/metrics` read. Its own namespace (`POD_NAMESPACE`) is the watched
//! one, or one apart as in an install ([`Options::system`]).
//!
//! What stands in for what a cluster would give the operator's Pod:
//!
//! * **cluster DNS**: the clustering manager dials each instance by its Pod's DNS name
//!   (`moco-<name>-<i>.moco-<name>.<ns>.svc`), which this machine does not resolve. The
//!   operator therefore runs in a mount namespace of its own (`unshare --mount`) whose
//!   `/etc/hosts` is a file of the test that a task keeps naming every Pod of the namespace
//!   with its address, as the Pod runner does for Pods (`docs/testing.md`). Pod addresses are
//!   reachable from this machine through the control plane's bridge. Tests whose Pods never
//!   run mysqld may go without ([`Options::without_dns`]).
//! * **cert-manager**: its `Certificate` CRD is created (cert-manager's own, from the Go module
//!   cache) when the control plane has none, so that the operator's Certificates are accepted;
//!   no cert-manager controller runs: [`issue_agent_certificate`] writes the Secret it would
//!   issue for the agents, and the operator's `--grpc-cert-dir` holds the client certificate
//!   it would issue for the operator, both of one CA ([`crate::agent_pki`]), so that the
//!   operator can call the agents (a clone).
//! * **the webhooks** are served (the process needs a certificate for them) but not
//!   registered with the API server, except the StatefulSet webhook of the partitioned
//!   rollout when asked ([`Options::statefulset_webhook`]): registered for the watched
//!   namespace alone, at the process's address, while it runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use moco_adapters::mysql::tls::Authority;

pub use crate::agent_pki::issue_agent_certificate;
use crate::agent_pki::write_controller_certificate;
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

/// How to start a [`OperatorHost`]: the namespace it watches and what else differs between
/// tests.
#[derive(Debug, Clone)]
pub struct Options {
    watched: String,
    system: Option<String>,
    dns: bool,
    args: Vec<String>,
    statefulset_webhook: bool,
    pre_stop_seconds: Option<u32>,
}

/// The mysqld preStop sleep of the drills' Pods (`--mysqld-pre-stop-seconds`): long enough
/// for the writers to follow the EndpointSlice away from a stopping Pod, short of MOCO's 20 s,
/// which only a drill that deletes a primary's Pod needs ([`Options::moco_pre_stop`]): every
/// other restart of a Pod (a rollout's, a kill's) would otherwise wait on it.
pub const DRILL_PRE_STOP_SECONDS: u32 = 3;

impl Options {
    /// Watching `namespace`, which is also its own, with the stand-in for cluster DNS and no
    /// arguments besides.
    pub fn watching(namespace: &str) -> Options {
        Options {
            watched: namespace.to_owned(),
            system: None,
            dns: true,
            args: Vec::new(),
            statefulset_webhook: false,
            pre_stop_seconds: Some(DRILL_PRE_STOP_SECONDS),
        }
    }

    /// The operator's own preStop sleep (MOCO's 20 s): for a drill that deletes a primary's
    /// Pod and needs the switchover to finish within it.
    pub fn moco_pre_stop(mut self) -> Options {
        self.pre_stop_seconds = None;
        self
    }

    /// The API server calls its StatefulSet webhook (`/mutate-apps-v1-statefulset`) for the
    /// watched namespace: the partitioned rollout holds each Pod-template change.
    pub fn statefulset_webhook(mut self) -> Options {
        self.statefulset_webhook = true;
        self
    }

    /// Its own namespace (`POD_NAMESPACE`: the password Secrets, the Certificates, the Lease;
    /// MOCO's "system namespace") apart from the watched one, as in an install, where an
    /// object written to the wrong one shows.
    pub fn system(mut self, namespace: &str) -> Options {
        self.system = Some(namespace.to_owned());
        self
    }

    /// No stand-in for cluster DNS (no `unshare`): for tests whose Pods never run mysqld.
    pub fn without_dns(mut self) -> Options {
        self.dns = false;
        self
    }

    /// `args` after the usual ones (in place of any given before).
    pub fn args(mut self, args: &[&str]) -> Options {
        self.args = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }
}

/// A running `moco controller`.
pub struct OperatorHost {
    child: Option<Child>,
    /// The namespace it watches (`--watch-namespace`).
    pub namespace: String,
    /// Its own namespace (`POD_NAMESPACE`): [`OperatorHost::namespace`] unless started with
    /// [`Options::system`].
    pub system: String,
    /// `/metrics`.
    pub metrics_addr: SocketAddr,
    options: Options,
    dir: tempfile::TempDir,
    hosts_writer: Option<tokio::task::JoinHandle<()>>,
    /// The control plane, and the MutatingWebhookConfiguration registered for this process.
    webhook: Option<(ControlPlane, String)>,
}

impl std::fmt::Debug for OperatorHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorHost")
            .field("pid", &self.child.as_ref().map(Child::id))
            .field("namespace", &self.namespace)
            .field("system", &self.system)
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
        OperatorHost::start_with(cp, Options::watching(namespace).args(args)).await
    }

    /// Starts `moco controller` as `options` say, with the control plane's admin kubeconfig,
    /// throwaway webhook certificates, the client certificate of the process's agent CA in
    /// `--grpc-cert-dir` ([`crate::agent_pki`]) and a 2-second clustering check interval;
    /// returns once `/metrics` answers and it holds its leader Lease.
    pub async fn start_with(cp: &ControlPlane, options: Options) -> OperatorHost {
        install_crds(cp).await;
        let namespace = options.watched.clone();
        let system = options.system.clone().unwrap_or_else(|| namespace.clone());
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
        let grpc_certs = dir.path().join("grpc");
        write_controller_certificate(&grpc_certs);
        let mut command = if options.dns {
            let hosts = dir.path().join("hosts");
            std::fs::copy("/etc/hosts", &hosts).unwrap();
            // `unshare` and `sh` exec the next program: the child's pid is the operator's.
            let script = format!("mount --bind {} /etc/hosts && exec \"$@\"", hosts.display());
            let mut c = Command::new("unshare");
            c.args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
                "sh",
            ])
            .arg(moco_bin());
            c
        } else {
            Command::new(moco_bin())
        };
        let hosts_writer = options.dns.then(|| {
            tokio::spawn(write_hosts(
                cp.client.clone(),
                namespace.clone(),
                dir.path().join("hosts"),
            ))
        });
        let base = free_port_block(3);
        let addr = |offset: u16| format!("127.0.0.1:{}", base + offset);
        let log = std::fs::File::create(dir.path().join("operator.log")).unwrap();
        command
            .arg("controller")
            .args(["--watch-namespace", &namespace])
            .args(["--metrics-addr", &addr(0)])
            .args(["--health-probe-addr", &addr(1)])
            .args(["--webhook-addr", &addr(2)])
            .arg("--cert-dir")
            .arg(&webhook_certs)
            .arg("--grpc-cert-dir")
            .arg(&grpc_certs)
            .args(["--check-interval", "2s", "--zap-encoder", "console"])
            .args(
                options
                    .pre_stop_seconds
                    .map(|s| format!("--mysqld-pre-stop-seconds={s}")),
            )
            .args(&options.args)
            .env("KUBECONFIG", cp.dir.join("kubeconfig"))
            .env("POD_NAMESPACE", &system)
            .env("MOCO_LOG", "info,moco_operator=debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
        let mut host = OperatorHost {
            child: Some(child),
            namespace: namespace.clone(),
            system,
            metrics_addr: addr(0).parse().unwrap(),
            options,
            dir,
            hosts_writer,
            webhook: None,
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
                if host.options.statefulset_webhook {
                    host.webhook = Some(register_statefulset_webhook(
                        cp,
                        &namespace,
                        &addr(2),
                        ca.cert_pem(),
                    ));
                }
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

    /// What it was started with, for starting it again ([`Options::args`] changes the
    /// arguments).
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Its `--grpc-cert-dir`, holding its client certificate for the agents.
    pub fn grpc_cert_dir(&self) -> PathBuf {
        self.dir.path().join("grpc")
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

    /// Its process id while it runs (for a benchmark's reading of `/proc`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills it (SIGKILL: a crashed or evicted operator, nothing finished on the way out) and
    /// waits for it to be gone; the StatefulSet webhook registration stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops it: SIGTERM, then SIGKILL after the grace; waits for it to be gone. The
    /// StatefulSet webhook registered for it goes first: with `failurePolicy: Fail`, every
    /// later write of the namespace's StatefulSets (their deletion's finalizers included)
    /// would be refused.
    pub fn stop(&mut self) {
        if let Some((cp, name)) = self.webhook.take() {
            let _ = cp.kubectl(
                &[
                    "delete",
                    "mutatingwebhookconfiguration",
                    &name,
                    "--ignore-not-found",
                ],
                None,
            );
        }
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
        if let Some(writer) = &self.hosts_writer {
            writer.abort();
        }
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

/// Registers the operator's StatefulSet webhook at `addr` (TLS, certificate of `ca_pem`) for
/// `namespace` alone; returns the control plane and the configuration's name.
fn register_statefulset_webhook(
    cp: &ControlPlane,
    namespace: &str,
    addr: &str,
    ca_pem: &str,
) -> (ControlPlane, String) {
    let name = format!("moco-statefulset-{namespace}");
    let config = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "mstatefulset.kb.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "url": format!("https://{addr}/mutate-apps-v1-statefulset"),
                "caBundle": moco_operator::webhook::base64(ca_pem.as_bytes()),
            },
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "objectSelector": {"matchLabels": {"app.kubernetes.io/created-by": "moco"}},
            "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["statefulsets"]}]
        }]
    });
    cp.apply(namespace, &config.to_string());
    (cp.clone(), name)
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
