//! The real `moco controller` binary as the Deployment runs it, against a kubeconfig whose API
//! server does not answer: the webhooks serve, lookups fail (the real `KubeLookup`), SIGTERM
//! stops it. (The servers in-process are moco-operator's `servers` test.)

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use moco_testkit::{
    allowed, create_cluster_review, http, https, policy, review, samples, write_certificates,
};
use serde_json::{Value, json};
use tokio::net::TcpStream;

const VALIDATE: &str = "/validate-moco-cybozu-com-v1beta2-mysqlcluster";
const POLICY: &str = "/validate-moco-cybozu-com-v1beta2-backuppolicy";

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
            .any(|l| l.contains("admission webhooks on every replica")
                && l.contains(
                    "reconciliation and clustering on the replica holding the leader Lease"
                )),
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
    let ok = create_cluster_review("c1", 3);
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
