//! The HTTP side of `moco controller` without an API server: the servers started in-process
//! with a `StaticLookup` (webhooks over TLS with a throwaway certificate, health probes,
//! metrics), their startup errors, and the real binary against an unreachable API server,
//! stopped by SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../src/cmd/controller.rs"]
mod controller;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller::{ControllerError, ListenAddr, Readiness, ServeConfig, Servers, health_router};
use moco_api::admission::StaticLookup;
use moco_core::validate::{ClusterReference, StorageClassFacts};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const VALIDATE: &str = "/validate-moco-cybozu-com-v1beta2-mysqlcluster";
const MUTATE: &str = "/mutate-moco-cybozu-com-v1beta2-mysqlcluster";
const POLICY: &str = "/validate-moco-cybozu-com-v1beta2-backuppolicy";

/// A throwaway CA and a server certificate for localhost written as `tls.crt`/`tls.key`.
fn write_certificates(dir: &Path) -> CertificateDer<'static> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(dir.join("tls.crt"), leaf.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    ca.der().clone()
}

struct Response {
    status: u16,
    headers: String,
    body: String,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    method: &str,
    path: &str,
    body: &str,
) -> Response {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    // A missing TLS close_notify after the response is fine.
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head:?}"));
    Response {
        status,
        headers: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

async fn http(addr: SocketAddr, method: &str, path: &str) -> Response {
    exchange(TcpStream::connect(addr).await.unwrap(), method, path, "").await
}

async fn https(addr: SocketAddr, ca: &CertificateDer<'static>, path: &str, body: &str) -> Response {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS handshake with the webhook certificate");
    exchange(tls, "POST", path, body).await
}

fn review(
    kind: &str,
    resource: &str,
    operation: &str,
    namespace: &str,
    name: &str,
    object: Value,
    old: Value,
) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{operation}-{name}"),
            "kind": {"group": "moco.cybozu.com", "version": "v1beta2", "kind": kind},
            "resource": {"group": "moco.cybozu.com", "version": "v1beta2", "resource": resource},
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
    .to_string()
}

fn cluster(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": name, "namespace": "default", "uid": "7d3f2c1a-0000-4000-8000-000000000001"},
        "spec": {
            "replicas": replicas,
            "serverIDBase": 42,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.8"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"}, "spec": {"resources": {"requests": {"storage": "10Gi"}}}}]
        }
    })
}

fn policy(name: &str) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "BackupPolicy",
        "metadata": {"name": name, "namespace": "backup"},
        "spec": {
            "schedule": "@daily",
            "jobConfig": {"serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"}, "workVolume": {"emptyDir": {}}}
        }
    })
}

fn allowed(response: &Response) -> bool {
    assert_eq!(response.status, 200, "{}", response.body);
    response
        .json()
        .pointer("/response/allowed")
        .and_then(Value::as_bool)
        .expect("response.allowed")
}

/// The samples of a Prometheus text exposition, checked for well-formedness: every sample's
/// family has HELP and TYPE lines, every value is a number.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut typed = Vec::new();
    let mut helped = Vec::new();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.push(rest.split_whitespace().next().unwrap().to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            typed.push(parts.next().unwrap().to_owned());
            assert!(matches!(parts.next(), Some("gauge" | "counter")), "{line}");
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
            let family = series.split('{').next().unwrap();
            assert!(typed.iter().any(|t| t == family), "no TYPE for {line}");
            assert!(helped.iter().any(|t| t == family), "no HELP for {line}");
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
            assert!(
                out.insert(series.to_owned(), value).is_none(),
                "duplicate {series}"
            );
        }
    }
    out
}

fn loopback() -> ListenAddr {
    ListenAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 0)))
}

fn config(cert_dir: &Path) -> ServeConfig {
    ServeConfig {
        namespace: "moco-system".into(),
        webhook_addr: loopback(),
        health_addr: loopback(),
        metrics_addr: loopback(),
        cert_dir: cert_dir.to_owned(),
        cert_reload_interval: Duration::from_secs(60),
    }
}

fn lookup() -> StaticLookup {
    StaticLookup {
        storage_classes: vec![StorageClassFacts {
            name: "standard".into(),
            allow_volume_expansion: false,
            is_default: true,
        }],
        clusters: BTreeMap::from([(
            "backup".to_owned(),
            vec![ClusterReference {
                cluster_name: "source".into(),
                backup_policy_name: Some("daily".into()),
            }],
        )]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_webhooks_health_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let ca = write_certificates(dir.path());
    let servers = Servers::start(&config(dir.path()), lookup()).await.unwrap();
    let webhook = servers.webhook_addr();
    let health = servers.health_addr().expect("health enabled");
    let metrics = servers.metrics_addr().expect("metrics enabled");
    assert_ne!(webhook.port(), 0);

    // Health probes.
    let r = http(health, "GET", "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = http(health, "GET", "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    assert_eq!(http(health, "GET", "/metrics").await.status, 404);

    // Metrics before any request: the info gauge and zeroed counters.
    let r = http(metrics, "GET", "/metrics").await;
    assert_eq!(r.status, 200);
    assert!(
        r.headers
            .contains("content-type: text/plain; version=0.0.4"),
        "{}",
        r.headers
    );
    let before = samples(&r.body);
    let info = format!(
        "moco_controller_info{{version=\"{}\",namespace=\"moco-system\",reconciliation=\"none\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(before.get(&info), Some(&1.0), "{}", r.body);
    for path in [VALIDATE, MUTATE, POLICY] {
        for result in ["allowed", "denied", "error"] {
            let series = format!(
                "moco_controller_webhook_requests_total{{path=\"{path}\",result=\"{result}\"}}"
            );
            assert_eq!(before.get(&series), Some(&0.0), "{series}");
        }
    }

    // Webhooks over TLS, the StaticLookup answering the BackupPolicy deletion.
    let ok = review(
        "MySQLCluster",
        "mysqlclusters",
        "CREATE",
        "default",
        "c1",
        cluster("c1", 3),
        Value::Null,
    );
    assert!(allowed(&https(webhook, &ca, VALIDATE, &ok).await));
    let bad = review(
        "MySQLCluster",
        "mysqlclusters",
        "CREATE",
        "default",
        "c1",
        cluster("c1", 2),
        Value::Null,
    );
    let r = https(webhook, &ca, VALIDATE, &bad).await;
    assert!(!allowed(&r));
    assert!(
        r.body.contains("replicas must be a positive odd number"),
        "{}",
        r.body
    );
    let r = https(webhook, &ca, MUTATE, &ok).await;
    assert!(allowed(&r));
    assert_eq!(
        r.json().pointer("/response/patchType"),
        Some(&json!("JSONPatch"))
    );
    let delete = |name: &str| {
        review(
            "BackupPolicy",
            "backuppolicies",
            "DELETE",
            "backup",
            name,
            Value::Null,
            policy(name),
        )
    };
    let r = https(webhook, &ca, POLICY, &delete("daily")).await;
    assert!(!allowed(&r));
    assert!(r.body.contains("MySQLCluster source"), "{}", r.body);
    assert!(allowed(
        &https(webhook, &ca, POLICY, &delete("weekly")).await
    ));
    let r = https(webhook, &ca, VALIDATE, "{not json").await;
    assert!(
        (400..500).contains(&r.status),
        "undecodable review: {}",
        r.status
    );
    // Not a webhook path: not counted.
    assert_eq!(
        https(webhook, &ca, "/validate-apps-v1-statefulset", "{}")
            .await
            .status,
        404
    );

    let after = samples(&http(metrics, "GET", "/metrics").await.body);
    let count = |path: &str, result: &str| {
        after
            .get(&format!(
                "moco_controller_webhook_requests_total{{path=\"{path}\",result=\"{result}\"}}"
            ))
            .copied()
    };
    assert_eq!(count(VALIDATE, "allowed"), Some(1.0));
    assert_eq!(count(VALIDATE, "denied"), Some(1.0));
    assert_eq!(count(VALIDATE, "error"), Some(1.0));
    assert_eq!(count(MUTATE, "allowed"), Some(1.0));
    assert_eq!(count(POLICY, "allowed"), Some(1.0));
    assert_eq!(count(POLICY, "denied"), Some(1.0));
    assert_eq!(count(MUTATE, "denied"), Some(0.0));
    let by_code = |code: u16, path: &str| {
        after
            .get(&format!(
                "controller_runtime_webhook_requests_total{{code=\"{code}\",webhook=\"{path}\"}}"
            ))
            .copied()
    };
    assert_eq!(by_code(200, VALIDATE), Some(2.0));
    assert_eq!(by_code(200, POLICY), Some(2.0));
    assert!(
        after.keys().all(|k| !k.contains("statefulset")),
        "unknown paths are not counted"
    );
    let error_code = after
        .iter()
        .find(|(k, _)| {
            k.starts_with("controller_runtime_webhook_requests_total{code=\"4")
                && k.contains(VALIDATE)
        })
        .map(|(_, v)| *v);
    assert_eq!(error_code, Some(1.0), "{after:?}");

    // Shutdown stops every listener.
    servers.shutdown().await.unwrap();
    for addr in [webhook, health, metrics] {
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "{addr} still listening"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_webhook_server() {
    let readiness = Arc::new(Readiness::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = health_router(readiness.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let r = http(addr, "GET", "/readyz").await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("webhook server is not serving"));
    assert_eq!(
        http(addr, "GET", "/healthz").await.status,
        200,
        "alive while not ready"
    );
    readiness.set_webhook_serving(true);
    assert_eq!(http(addr, "GET", "/readyz").await.status, 200);
    readiness.set_shutting_down();
    assert_eq!(http(addr, "GET", "/readyz").await.status, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_errors_name_what_is_wrong() {
    // No certificate in --cert-dir.
    let empty = tempfile::tempdir().unwrap();
    let error = Servers::start(&config(empty.path()), lookup())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ControllerError::Certificate { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("--cert-dir") && message.contains("tls.crt"),
        "{message}"
    );

    // A port already taken.
    let dir = tempfile::tempdir().unwrap();
    write_certificates(dir.path());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(dir.path());
    cfg.metrics_addr = ListenAddr::Socket(taken.local_addr().unwrap());
    let error = Servers::start(&cfg, lookup()).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "cannot listen on --metrics-addr {}",
            taken.local_addr().unwrap()
        )),
        "{message}"
    );

    // The webhooks cannot be switched off; metrics and health can.
    let mut cfg = config(dir.path());
    cfg.webhook_addr = ListenAddr::Disabled;
    let error = Servers::start(&cfg, lookup()).await.unwrap_err();
    assert!(
        matches!(error, ControllerError::WebhookDisabled),
        "{error:?}"
    );
    let mut cfg = config(dir.path());
    cfg.metrics_addr = ListenAddr::Disabled;
    cfg.health_addr = ListenAddr::Disabled;
    let servers = Servers::start(&cfg, lookup()).await.unwrap();
    assert_eq!(
        (servers.health_addr(), servers.metrics_addr()),
        (None, None)
    );
    servers.shutdown().await.unwrap();
}

const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: unreachable
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
contexts:
- name: unreachable
  context:
    cluster: unreachable
    user: test
current-context: unreachable
users:
- name: test
  user:
    token: not-a-real-token
";

/// The binary as the Deployment runs it (ports on loopback), with a kubeconfig whose API server
/// does not answer: the webhooks serve, lookups fail (the real `KubeLookup`), SIGTERM stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let ca = write_certificates(dir.path());
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_moco"))
        .args([
            "controller",
            "--leader-election-id=moco",
            "--metrics-addr=127.0.0.1:0",
            "--health-probe-addr=127.0.0.1:0",
            "--webhook-addr=127.0.0.1:0",
            &format!("--cert-dir={}", dir.path().display()),
            "--grpc-cert-dir=/grpc-cert",
        ])
        .env("POD_NAMESPACE", "moco-system")
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("MOCO_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let serving = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no serving line; log so far: {log:#?}"));
        log.push(line.clone());
        let Ok(entry) = serde_json::from_str::<Value>(&line) else {
            panic!("not a JSON log line: {line}");
        };
        if entry.pointer("/fields/message") == Some(&json!("serving the admission webhooks")) {
            break entry;
        }
    };
    assert!(
        log.iter()
            .any(|l| l.contains("serves the admission webhooks only")
                && l.contains("reconciliation of MySQLClusters on Kubernetes")
                && l.contains("moco local")),
        "{log:#?}"
    );
    let addr = |field: &str| -> SocketAddr {
        serving
            .pointer(&format!("/fields/{field}"))
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{field} in {serving}"))
    };
    let (webhook, health, metrics) = (addr("webhook"), addr("health"), addr("metrics"));

    assert_eq!(http(health, "GET", "/readyz").await.status, 200);
    let ok = review(
        "MySQLCluster",
        "mysqlclusters",
        "CREATE",
        "default",
        "c1",
        cluster("c1", 3),
        Value::Null,
    );
    assert!(allowed(&https(webhook, &ca, VALIDATE, &ok).await));
    // Deleting a BackupPolicy needs the MySQLClusters of the namespace: the API server does not
    // answer, so the webhook refuses with the lookup's error, counted as an error.
    let delete = review(
        "BackupPolicy",
        "backuppolicies",
        "DELETE",
        "backup",
        "daily",
        Value::Null,
        policy("daily"),
    );
    let r = https(webhook, &ca, POLICY, &delete).await;
    assert!(!allowed(&r));
    assert!(
        r.body
            .contains("cannot list MySQLClusters in namespace backup"),
        "{}",
        r.body
    );
    let m = samples(&http(metrics, "GET", "/metrics").await.body);
    assert_eq!(
        m.get(&format!(
            "moco_controller_webhook_requests_total{{path=\"{POLICY}\",result=\"error\"}}"
        )),
        Some(&1.0)
    );

    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running 15s after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(2)) {
        log.push(line);
    }
    assert!(status.success(), "exit {status:?}; log: {log:#?}");
    assert!(log.iter().any(|l| l.contains("\"stopped\"")), "{log:#?}");
    assert!(TcpStream::connect(health).await.is_err());
}
