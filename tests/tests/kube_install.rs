//! moco-rs installed as users install it (`scripts/kube.sh install`): cert-manager built from
//! Go modules (its controller, cainjector and webhook, `scripts/kube/build.sh cert-manager`)
//! and installed from its own chart, then the operator with `kubectl apply -k deploy/` or
//! `helm install` of `charts/moco`, running as a Pod of the Pod runner under the manifests'
//! ServiceAccount, so that the real API server enforces its RBAC, calls its webhooks over TLS
//! with the `caBundle` cert-manager injected, and enforces the CRDs' schemas and CEL rules.
//!
//! Each test brings up a control plane of its own (`scripts/kube.sh up --dir <temp>`) rather
//! than using the shared one of `MOCO_KUBE_DIR`: an install is cluster-wide (CRDs, webhooks,
//! ClusterRoles) and its operator watches every namespace, so on the shared control plane it
//! would reconcile the MySQLClusters of the tests that run an operator of their own per
//! namespace (`kube_operator`), and cert-manager would take over the certificate Secrets those
//! tests write. The shared control plane is still asked for (`control_plane`), for the
//! real-server ledger, the skip rule and its `pod-runner`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use moco_tests::control_plane::{ControlPlane, control_plane, is_ready, wait_for};
use moco_tests::local::moco_bin;

const LIMIT: Duration = Duration::from_secs(180);
const SYSTEM: &str = "moco-system";
const SERVICE_ACCOUNT: &str = "moco-controller-manager";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `scripts/kube.sh ARGS --dir DIR`, with the shared control plane's `pod-runner` (building one
/// with cargo from inside `cargo test` would wait on its lock) and this workspace's `moco`.
fn kube_sh(shared: &ControlPlane, args: &[&str], dir: &Path) -> Output {
    let runner = std::fs::canonicalize(shared.dir.join("bin/pod-runner")).unwrap();
    Command::new(repo().join("scripts/kube.sh"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env("MOCO_POD_RUNNER", runner)
        .env("MOCO_BIN", moco_bin())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A control plane of one test, taken down when dropped (a failed test's too).
struct Plane {
    shared: ControlPlane,
    dir: tempfile::TempDir,
    cp: ControlPlane,
}

impl Drop for Plane {
    fn drop(&mut self) {
        let out = kube_sh(&self.shared, &["down"], self.dir.path());
        if !out.status.success() {
            eprintln!("kube.sh down: {}", text(&out));
        }
    }
}

impl Plane {
    /// Records `test`, then `kube.sh up --nodes 2` in a temporary directory.
    async fn up(test: &str) -> Option<Self> {
        let shared = control_plane(test).await?;
        let dir = tempfile::Builder::new().prefix("kinst-").tempdir().unwrap();
        let start = Instant::now();
        let out = kube_sh(&shared, &["up", "--nodes", "2"], dir.path());
        assert!(out.status.success(), "kube.sh up: {}", text(&out));
        println!(
            "{test}: kube.sh up in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let kubeconfig = Kubeconfig::read_from(dir.path().join("kubeconfig")).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        let cp = ControlPlane {
            dir: dir.path().to_owned(),
            client: kube::Client::try_from(config).unwrap(),
        };
        Some(Self { shared, dir, cp })
    }

    fn kube_sh(&self, args: &[&str]) -> Output {
        kube_sh(&self.shared, args, self.dir.path())
    }

    /// `kube.sh install` (ARGS after it), which must succeed; returns its output.
    fn install(&self, args: &[&str]) -> String {
        let start = Instant::now();
        let out = self.kube_sh(&[&["install"], args].concat());
        let said = text(&out);
        assert!(out.status.success(), "kube.sh install {args:?}: {said}");
        println!(
            "kube.sh install {args:?} in {:.1} s:\n{said}",
            start.elapsed().as_secs_f64()
        );
        said
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.cp.kubectl(args, None)
    }

    fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.cp.kubectl(args, stdin);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The operator's Pods: Ready, the Deployment's replicas, and under the manifests'
/// ServiceAccount, whose token (read inside the container) the API server authenticates as it.
async fn operator_pods_run_as_the_service_account(p: &Plane) -> Vec<Pod> {
    let pods: Vec<Pod> = wait_for("the operator's two Pods Ready", LIMIT, || async {
        let list = Api::<Pod>::namespaced(p.cp.client.clone(), SYSTEM)
            .list(&ListParams::default().labels("app.kubernetes.io/component=moco-controller"))
            .await
            .unwrap();
        (list.items.len() == 2 && list.items.iter().all(is_ready)).then_some(list.items)
    })
    .await;
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
        let token = p.cp.exec(
            SYSTEM,
            &name,
            "moco-controller",
            &["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"],
        );
        assert!(
            token.status.success(),
            "reading the token: {}",
            text(&token)
        );
        let token = String::from_utf8(token.stdout).unwrap();
        let review = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token.trim()},
        });
        let who = p.kubectl_ok(
            &[
                "create",
                "-f",
                "-",
                "-o",
                "jsonpath={.status.authenticated} {.status.user.username}",
            ],
            Some(&review.to_string()),
        );
        assert_eq!(
            who,
            format!("true system:serviceaccount:{SYSTEM}:{SERVICE_ACCOUNT}"),
            "{name}'s token"
        );
        // With that token: what the ClusterRole grants is allowed, the rest is a 403.
        let env = std::fs::read_to_string(p.dir.path().join("env")).unwrap();
        let server = env
            .lines()
            .find_map(|l| l.strip_prefix("export MOCO_KUBE_API_SERVER="))
            .unwrap();
        let as_operator = |args: &[&str]| {
            Command::new(p.dir.path().join("bin/kubectl"))
                .args(["--kubeconfig", "/dev/null", "--server", server])
                .arg("--certificate-authority")
                .arg(p.dir.path().join("pki/ca.crt"))
                .args(["--token", token.trim()])
                .args(args)
                .output()
                .unwrap()
        };
        let allowed = as_operator(&["get", "mysqlclusters.moco.cybozu.com", "-A"]);
        assert!(allowed.status.success(), "{}", text(&allowed));
        let refused = as_operator(&["get", "nodes"]);
        assert!(!refused.status.success());
        assert!(
            text(&refused).contains("Forbidden")
                && text(&refused)
                    .contains(&format!("system:serviceaccount:{SYSTEM}:{SERVICE_ACCOUNT}")),
            "{}",
            text(&refused)
        );
    }
    // One of them leads: its identity holds the Lease the ClusterRole lets it write.
    let holder = p.kubectl_ok(
        &[
            "-n",
            SYSTEM,
            "get",
            "lease",
            "moco",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    );
    assert!(
        pods.iter()
            .any(|pod| pod.metadata.name.as_deref() == Some(holder.as_str())),
        "Lease moco held by {holder:?}"
    );
    pods
}

/// Every webhook of the operator carries the CA of its serving certificate, as cert-manager's
/// CA injector set it (the manifests leave `caBundle` empty).
async fn ca_bundles_are_injected(p: &Plane) {
    let ca = secret_data(p, SYSTEM, "moco-controller-cert", "ca.crt").await;
    assert!(String::from_utf8_lossy(&ca).contains("BEGIN CERTIFICATE"));
    let validating = Api::<ValidatingWebhookConfiguration>::all(p.cp.client.clone())
        .get("moco-validating-webhook-configuration")
        .await
        .unwrap();
    let mutating = Api::<MutatingWebhookConfiguration>::all(p.cp.client.clone())
        .get("moco-mutating-webhook-configuration")
        .await
        .unwrap();
    let bundles: Vec<_> = validating
        .webhooks
        .unwrap()
        .into_iter()
        .map(|w| (w.name, w.client_config.ca_bundle))
        .chain(
            mutating
                .webhooks
                .unwrap()
                .into_iter()
                .map(|w| (w.name, w.client_config.ca_bundle)),
        )
        .collect();
    // MOCO's four (validating MySQLCluster and BackupPolicy, mutating MySQLCluster and the
    // StatefulSet), and moco-rs's two validating ones (MySQLUser, MySQLDatabase).
    assert_eq!(bundles.len(), 6, "{bundles:?}");
    for (name, bundle) in bundles {
        assert_eq!(
            bundle.map(|b| b.0).as_deref(),
            Some(ca.as_slice()),
            "webhook {name}: caBundle"
        );
    }
}

async fn secret_data(p: &Plane, namespace: &str, name: &str, key: &str) -> Vec<u8> {
    let secret = Api::<Secret>::namespaced(p.cp.client.clone(), namespace)
        .get(name)
        .await
        .unwrap();
    secret.data.unwrap()[key].0.clone()
}

/// The examples' objects: the file's documents, with the `kind` of each.
fn documents(path: &Path) -> Vec<(String, String)> {
    let all = std::fs::read_to_string(path).unwrap();
    all.split("\n---\n")
        .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        .map(|d| {
            let kind = d
                .lines()
                .find_map(|l| l.strip_prefix("kind: "))
                .unwrap()
                .trim()
                .to_owned();
            (kind, d.to_owned())
        })
        .collect()
}

/// The refusals of `docs/examples/invalid/NAME.expected`: `(field, message)` pairs.
fn expected(name: &str) -> Vec<(String, String)> {
    let path = repo().join(format!("docs/examples/invalid/{name}.expected"));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            // FILE:LINE: KIND/NAME: FIELD: MESSAGE
            let mut parts = l.splitn(4, ": ");
            let (_, _, field, message) = (
                parts.next(),
                parts.next(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            // The offline validator names a deletion's operation; the webhook's refusal
            // already says "deleting ... is forbidden".
            let message = message.strip_prefix("DELETE refused: ").unwrap_or(message);
            (field.to_owned(), message.to_owned())
        })
        .collect()
}

/// Who refuses each invalid example: the API server itself (schema, CEL, strict decoding) or
/// the operator's webhook (MOCO's message, through TLS).
const API_SERVER: &[&str] = &[
    "backup-bad-bucket",        // enum and pattern of the CRD schema
    "even-replicas",            // CEL
    "replication-source-added", // CEL transition rule
    "restore-changed",          // CEL transition rule
    "unknown-field",            // strict field validation
    "user-cluster-changed",     // CEL transition rule (MySQLUser)
    "user-name-changed",        // CEL transition rule (MySQLUser)
];

/// `kubectl apply` of each document of `path` but its StorageClasses (see
/// [`storage_classes_first`]). The first refusal, else the last output.
fn apply_documents(p: &Plane, path: &Path) -> Output {
    let mut last = None;
    for (kind, doc) in documents(path) {
        if kind == "StorageClass" {
            continue;
        }
        let out = p.cp.kubectl(&["apply", "-f", "-"], Some(&doc));
        if !out.status.success() {
            return out;
        }
        last = Some(out);
    }
    last.unwrap()
}

/// The StorageClasses the invalid examples give name the control plane's own `standard` (the
/// Pod runner's, whose provisioner may not change): it is given their `allowVolumeExpansion`
/// instead, before anything else, since the webhook reads StorageClasses from its watch cache.
fn storage_classes_first(p: &Plane, dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        for (kind, doc) in documents(&path) {
            if kind == "StorageClass" {
                assert!(doc.contains("name: standard"), "{}", path.display());
                let expand = doc
                    .lines()
                    .any(|l| l.trim() == "allowVolumeExpansion: true");
                p.kubectl_ok(
                    &[
                        "patch",
                        "storageclass",
                        "standard",
                        "-p",
                        &format!("{{\"allowVolumeExpansion\":{expand}}}"),
                    ],
                    None,
                );
            }
        }
    }
}

/// Every valid example is accepted (`kubectl apply --dry-run=server`: through the mutating and
/// validating webhooks), and every invalid one refused through `kubectl apply` (or delete) with
/// its message: by the webhook with MOCO's words, by the API server for the schema and CEL.
fn examples_are_admitted_and_refused(p: &Plane) {
    for ns in ["backup", "bank", "shop"] {
        p.kubectl_ok(&["create", "namespace", ns], None);
    }
    storage_classes_first(p, &repo().join("docs/examples/invalid"));
    let mut valid = 0;
    for entry in std::fs::read_dir(repo().join("docs/examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let out = p.kubectl(&["apply", "--dry-run=server", "-f", path.to_str().unwrap()]);
            assert!(out.status.success(), "{}: {}", path.display(), text(&out));
            valid += 1;
        }
    }
    assert!(valid >= 9, "{valid} valid examples");

    let dir = repo().join("docs/examples/invalid");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".expected").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 19, "{names:?}");
    for name in &names {
        let file = dir.join(format!("{name}.yaml"));
        let old = dir.join(format!("{name}.old.yaml"));
        let out = if name == "backup-policy-in-use" {
            // A deletion: the new objects lack the BackupPolicy the live cluster references.
            p.kubectl_ok(&["apply", "-f", old.to_str().unwrap()], None);
            p.kubectl(&["-n", "backup", "delete", "backuppolicy", "daily"])
        } else if old.exists() {
            // An update of live objects: the old ones applied, then the new ones.
            let live = apply_documents(p, &old);
            assert!(
                live.status.success(),
                "{name}: the old objects: {}",
                text(&live)
            );
            apply_documents(p, &file)
        } else {
            p.kubectl(&["apply", "-f", file.to_str().unwrap()])
        };
        let said = text(&out);
        assert!(!out.status.success(), "{name}: accepted: {said}");
        let by_webhook = said.contains("admission webhook \"v");
        assert_eq!(
            by_webhook,
            !API_SERVER.contains(&name.as_str()),
            "{name}: refused by the webhook? {said}"
        );
        for (field, message) in expected(name) {
            if by_webhook {
                assert!(
                    said.contains(&format!("{field}: {message}")),
                    "{name}: want {field}: {message}\ngot {said}"
                );
            } else {
                // The API server's own words for schema refusals; CEL rules carry MOCO's.
                assert!(said.contains(&field), "{name}: want {field}\ngot {said}");
                if name != "backup-bad-bucket" && name != "unknown-field" {
                    assert!(
                        said.contains(&message),
                        "{name}: want {message}\ngot {said}"
                    );
                }
            }
        }
        println!(
            "{name}: refused{}",
            if by_webhook {
                " by the webhook"
            } else {
                " by the API server"
            }
        );
    }
}

/// The MySQLUser webhook asks the API server (SubjectAccessReviews, under the operator's
/// ClusterRole) whether the requester may do what the object asks the operator to do for them:
/// a tenant who may write MySQLUsers but not read a Secret cannot have the operator read it,
/// and sets `allowPrivilegedGrants` only with the verb `escalate` on mysqlusers (as RBAC's own
/// `escalate` on roles). Requests made as that tenant (`kubectl --as`).
fn requesters_are_asked(p: &Plane) {
    let ns = "shop";
    p.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&format!(
            r#"
apiVersion: v1
kind: Secret
metadata: {{name: own-password, namespace: {ns}}}
stringData: {{password: own}}
---
apiVersion: v1
kind: Secret
metadata: {{name: foreign-password, namespace: {ns}}}
stringData: {{password: foreign}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: accounts-editor, namespace: {ns}}}
rules:
- apiGroups: ["moco-rs.io"]
  resources: ["mysqlusers"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["own-password"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: accounts-editor, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: accounts-editor}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: tenant}}]
"#
        )),
    );
    let user = |name: &str, secret: &str, privileged: bool| {
        let grants = if privileged {
            "allowPrivilegedGrants: true\n  grants: [{privileges: [SUPER], \"on\": \"*.*\"}]"
        } else {
            "grants: [{privileges: [SELECT], \"on\": \"orders.*\"}]"
        };
        format!(
            "apiVersion: moco-rs.io/v1alpha1\nkind: MySQLUser\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             spec:\n  clusterName: orders\n  passwordSecretKeyRef: {{name: {secret}, key: password}}\n  {grants}\n"
        )
    };
    let as_tenant = |yaml: &str| {
        p.cp.kubectl(
            &["--as=tenant", "apply", "--dry-run=server", "-f", "-"],
            Some(yaml),
        )
    };
    let out = as_tenant(&user("plain", "own-password", false));
    assert!(out.status.success(), "{}", text(&out));
    let out = as_tenant(&user("borrowed", "foreign-password", false));
    assert!(!out.status.success());
    assert!(
        text(&out).contains(&format!(
            "spec.passwordSecretKeyRef.name: \"tenant\" may not get secrets \"foreign-password\" in namespace {ns}"
        )),
        "{}",
        text(&out)
    );
    let out = as_tenant(&user("root-like", "own-password", true));
    assert!(!out.status.success());
    assert!(
        text(&out).contains(&format!(
            "spec.allowPrivilegedGrants: \"tenant\" may not escalate mysqlusers.moco-rs.io \"root-like\" in namespace {ns}"
        )),
        "{}",
        text(&out)
    );
    // Given the verb, the tenant may set the opt-in.
    p.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&format!(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: accounts-escalate, namespace: {ns}}}
rules:
- apiGroups: ["moco-rs.io"]
  resources: ["mysqlusers"]
  verbs: ["escalate"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: accounts-escalate, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: accounts-escalate}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: tenant}}]
"#
        )),
    );
    let out = as_tenant(&user("root-like", "own-password", true));
    assert!(out.status.success(), "{}", text(&out));
    println!("requesters asked: a foreign Secret and the opt-in without escalate refused");
}

#[tokio::test]
async fn kustomize_install_runs_the_operator_under_its_rbac_with_webhooks_over_tls_and_the_crds_rules()
 {
    let Some(p) = Plane::up("install_kustomize").await else {
        return;
    };
    let said = p.install(&[]);
    assert!(said.contains("kubectl apply -k deploy/"), "{said}");
    assert!(said.contains("cert-manager issues certificates"), "{said}");

    operator_pods_run_as_the_service_account(&p).await;
    ca_bundles_are_injected(&p).await;
    examples_are_admitted_and_refused(&p);
    requesters_are_asked(&p);

    // The examples left MySQLCluster default/bad: the operator's Certificate for its agents
    // (`moco-agent-default.bad`, of its CA Issuer) is issued by cert-manager, and the operator
    // copies the Secret into the cluster's namespace.
    wait_for("the agents' Certificate of default/bad", LIMIT, || async {
        p.kubectl(&["-n", SYSTEM, "get", "certificate", "moco-agent-default.bad"])
            .status
            .success()
            .then_some(())
    })
    .await;
    p.kubectl_ok(
        &[
            "-n",
            SYSTEM,
            "wait",
            "certificate/moco-agent-default.bad",
            "--for=condition=Ready",
            "--timeout=120s",
        ],
        None,
    );
    let copied = wait_for("Secret default/moco-bad-grpc", LIMIT, || async {
        Api::<Secret>::namespaced(p.cp.client.clone(), "default")
            .get_opt("moco-bad-grpc")
            .await
            .unwrap()
    })
    .await;
    let issued = secret_data(&p, SYSTEM, "moco-agent-default.bad", "tls.crt").await;
    assert_eq!(copied.data.unwrap()["tls.crt"].0, issued);

    // Bad input, each named: a second install, a missing helm, a control plane that is down.
    let again = p.kube_sh(&["install"]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("already installed"),
        "{}",
        text(&again)
    );
    let helm = p.dir.path().join("bin/helm");
    let aside = p.dir.path().join("bin/helm.aside");
    std::fs::rename(&helm, &aside).unwrap();
    let no_helm = p.kube_sh(&["install", "--helm"]);
    std::fs::rename(&aside, &helm).unwrap();
    assert!(!no_helm.status.success());
    assert!(text(&no_helm).contains("no helm in"), "{}", text(&no_helm));
    let down = p.kube_sh(&["down"]);
    assert!(down.status.success(), "{}", text(&down));
    let not_up = p.kube_sh(&["install"]);
    assert!(!not_up.status.success());
    assert!(
        text(&not_up).contains("is not running") && text(&not_up).contains("up --dir"),
        "{}",
        text(&not_up)
    );
}

#[tokio::test]
async fn helm_install_runs_the_chart_and_cert_manager_issues_self_signed_and_ca_chains() {
    let Some(p) = Plane::up("install_helm").await else {
        return;
    };
    let said = p.install(&["--helm"]);
    assert!(said.contains("helm install moco charts/moco"), "{said}");
    let releases = Command::new(p.dir.path().join("bin/helm"))
        .arg("--kubeconfig")
        .arg(p.dir.path().join("kubeconfig"))
        .args(["-n", SYSTEM, "list", "-o", "json"])
        .output()
        .unwrap();
    let releases: serde_json::Value = serde_json::from_slice(&releases.stdout).unwrap();
    assert_eq!(releases[0]["name"], "moco", "{releases}");
    assert_eq!(releases[0]["status"], "deployed", "{releases}");

    operator_pods_run_as_the_service_account(&p).await;
    ca_bundles_are_injected(&p).await;
    let invalid = repo().join("docs/examples/invalid/missing-mysqld-container.yaml");
    let refused = p.kubectl(&["apply", "-f", invalid.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("admission webhook \"vmysqlcluster.kb.io\" denied the request")
            && text(&refused).contains(
                "spec.podTemplate.spec.containers: containers must include a container named \"mysqld\""
            ),
        "{}",
        text(&refused)
    );
    let valid = repo().join("docs/examples/single-instance.yaml");
    p.kubectl_ok(
        &["apply", "--dry-run=server", "-f", valid.to_str().unwrap()],
        None,
    );

    // cert-manager: a self-signed ClusterIssuer signs a CA, a CA ClusterIssuer signs with it
    // (its Secret in cert-manager's cluster resource namespace); and MOCO's own chain, a
    // self-signed Issuer, a CA Certificate and a CA Issuer in one namespace, signs a leaf.
    p.kubectl_ok(&["create", "namespace", "certs"], None);
    p.kubectl_ok(
        &["apply", "-f", "-"],
        Some(
            r#"
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: cluster-ca, namespace: cert-manager}
spec:
  isCA: true
  commonName: cluster CA
  secretName: cluster-ca
  issuerRef: {name: selfsigned, kind: ClusterIssuer}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: cluster-ca}
spec: {ca: {secretName: cluster-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: from-cluster-ca, namespace: certs}
spec:
  commonName: from-cluster-ca
  dnsNames: [from-cluster-ca.certs.svc]
  secretName: from-cluster-ca
  issuerRef: {name: cluster-ca, kind: ClusterIssuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: certs}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: grpc-ca, namespace: certs}
spec:
  isCA: true
  commonName: MOCO gRPC CA
  duration: 87600h0m0s
  renewBefore: 720h0m0s
  secretName: grpc-ca
  issuerRef: {name: selfsigned, kind: Issuer}
  usages: [digital signature, key encipherment, cert sign]
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: grpc, namespace: certs}
spec: {ca: {secretName: grpc-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: agent, namespace: certs}
spec:
  commonName: moco-agent
  dnsNames: ["*.moco-db.certs.svc"]
  secretName: agent
  issuerRef: {name: grpc, kind: Issuer}
  usages: [digital signature, key encipherment, server auth, client auth]
"#,
        ),
    );
    for (ns, cert) in [("certs", "from-cluster-ca"), ("certs", "agent")] {
        let out = p.kubectl(&[
            "-n",
            ns,
            "wait",
            &format!("certificate/{cert}"),
            "--for=condition=Ready",
            "--timeout=120s",
        ]);
        assert!(out.status.success(), "{cert}: {}", text(&out));
    }
    let tmp = tempfile::tempdir().unwrap();
    for (secret, ca_secret, ca_ns) in [
        ("from-cluster-ca", "cluster-ca", "cert-manager"),
        ("agent", "grpc-ca", "certs"),
    ] {
        let leaf = tmp.path().join(format!("{secret}.crt"));
        let ca = tmp.path().join(format!("{secret}-ca.crt"));
        std::fs::write(&leaf, secret_data(&p, "certs", secret, "tls.crt").await).unwrap();
        std::fs::write(&ca, secret_data(&p, ca_ns, ca_secret, "tls.crt").await).unwrap();
        // The leaf's Secret names its CA, and the CA's certificate verifies the leaf.
        assert_eq!(
            secret_data(&p, "certs", secret, "ca.crt").await,
            std::fs::read(&ca).unwrap()
        );
        let verify = Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(&ca)
            .arg(&leaf)
            .output()
            .unwrap();
        assert!(verify.status.success(), "{secret}: {}", text(&verify));
    }
    // cert-manager's own webhook refuses what its API forbids (a 1024-bit RSA key).
    let weak = p.cp.kubectl(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: weak, namespace: certs}\n\
             spec: {secretName: weak, commonName: weak, issuerRef: {name: grpc}, privateKey: {algorithm: RSA, size: 1024}}\n",
        ),
    );
    assert!(!weak.status.success());
    assert!(
        text(&weak).contains("admission webhook \"webhook.cert-manager.io\" denied the request"),
        "{}",
        text(&weak)
    );
}

/// `install` where nothing was brought up, and the options it refuses, each named.
#[test]
fn install_refuses_a_directory_never_brought_up_and_helm_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(repo().join("scripts/kube.sh"))
            .args(args)
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["install"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("was not started by `scripts/kube.sh up`"),
        "{}",
        text(&out)
    );
    let out = run(&["up", "--helm"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--helm is an option of install only"),
        "{}",
        text(&out)
    );
    // Nothing was started or written by either.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // A directory up did not make: refused before anything is removed (up would remove
    // DIR/bin, DIR/pki and their siblings of an earlier run).
    let theirs = dir.path().join("bin");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("keep"), "not kube.sh's").unwrap();
    let out = run(&["up"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("is not empty and was not made by `scripts/kube.sh up`"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("keep")).unwrap(),
        "not kube.sh's"
    );
    assert!(!dir.path().join(".moco-kube-dir").exists());
}
