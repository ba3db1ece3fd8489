//! The webhooks over real TLS through the one webhook server ([`Servers`]): a throwaway CA and
//! server certificate in the cert dir, the server on a loopback port, and AdmissionReview JSON as
//! the API server sends it, posted with rustls.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use moco_operator::webhook::WebhookState;
use moco_operator::{ListenAddr, ServeConfig, Servers};
use moco_testkit::{self, https, static_lookup, write_certificates};
use rustls::pki_types::CertificateDer;
use serde_json::{Value, json};

struct Server {
    addr: SocketAddr,
    ca: CertificateDer<'static>,
    servers: Servers,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn stop(self) {
        check(self.servers.shutdown().await, "shutdown");
    }
}

fn check<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// The servers with the webhooks only, answering from fixed facts; with a fixed random source
/// (`serverIDBase` 42) unless `os_random`.
async fn start(os_random: bool) -> Server {
    let dir = check(tempfile::tempdir(), "tempdir");
    let ca = write_certificates(dir.path());
    let lookup = static_lookup();
    let config = ServeConfig {
        namespace: "moco-system".into(),
        webhook_addr: ListenAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 0))),
        health_addr: ListenAddr::Disabled,
        metrics_addr: ListenAddr::Disabled,
        cert_dir: dir.path().to_owned(),
        cert_reload_interval: Duration::from_secs(60),
        webhook_limits: moco_http::limits::WEBHOOK_LIMITS,
        probe_limits: moco_http::limits::PROBE_LIMITS,
    };
    let servers = if os_random {
        Servers::start(&config, lookup).await
    } else {
        let state = WebhookState::with_random(lookup, Arc::new(|| 41));
        Servers::start_with(&config, state).await
    };
    let servers = check(servers, "server did not start");
    Server {
        addr: servers.webhook_addr(),
        ca,
        servers,
        _dir: dir,
    }
}

/// POSTs `body` to `path` over TLS (SNI localhost) and returns status and JSON body.
async fn post(server: &Server, path: &str, body: &Value) -> (u16, Value) {
    let response = https(
        server.addr,
        &server.ca,
        &format!("{path}?timeout=10s"),
        &body.to_string(),
    )
    .await;
    let json = if response.body.is_empty() {
        Value::Null
    } else {
        check(serde_json::from_str(&response.body), "response JSON")
    };
    (response.status, json)
}

fn cluster(name: &str, replicas: i64, extra: Value) -> Value {
    let mut c = json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": name, "namespace": "default", "uid": "7d3f2c1a-0000-4000-8000-000000000001", "generation": 1},
        "spec": {
            "replicas": replicas,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.8"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"}, "spec": {"resources": {"requests": {"storage": "10Gi"}}}}]
        }
    });
    if let (Some(spec), Some(extra)) = (
        c.pointer_mut("/spec").and_then(Value::as_object_mut),
        extra.as_object(),
    ) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    c
}

fn policy(name: &str, schedule: &str) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "BackupPolicy",
        "metadata": {"name": name, "namespace": "backup"},
        "spec": {
            "schedule": schedule,
            "jobConfig": {"serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"}, "workVolume": {"emptyDir": {}}}
        }
    })
}

/// An AdmissionReview as the API server posts it (argument order: name, then namespace).
fn review(
    kind: &str,
    resource: &str,
    operation: &str,
    name: &str,
    namespace: &str,
    object: Value,
    old: Value,
) -> Value {
    check(
        serde_json::from_str(&moco_testkit::review(
            kind, resource, operation, namespace, name, object, old,
        )),
        "review JSON",
    )
}

fn response(v: &Value) -> (bool, String, i64) {
    (
        v.pointer("/response/allowed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        v.pointer("/response/status/message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        v.pointer("/response/status/code")
            .and_then(Value::as_i64)
            .unwrap_or(0),
    )
}

fn base64_decode(s: &str) -> Vec<u8> {
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.chars().filter(|c| *c != '=') {
        let Some(v) = alphabet.find(c) else {
            panic!("not base64: {s}")
        };
        bits = (bits << 6) | v as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_over_tls() {
    let server = start(false).await;
    let validate = "/validate-moco-cybozu-com-v1beta2-mysqlcluster";
    let mutate = "/mutate-moco-cybozu-com-v1beta2-mysqlcluster";
    let policy_path = "/validate-moco-cybozu-com-v1beta2-backuppolicy";

    // Mutating CREATE: finalizer added, serverIDBase = (41 & 0x3FFFFFFF) + 1.
    let (status, body) = post(
        &server,
        mutate,
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "CREATE",
            "c1",
            "default",
            cluster("c1", 3, json!({})),
            Value::Null,
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body.pointer("/apiVersion"),
        Some(&json!("admission.k8s.io/v1"))
    );
    assert_eq!(body.pointer("/kind"), Some(&json!("AdmissionReview")));
    assert_eq!(body.pointer("/response/uid"), Some(&json!("uid-CREATE-c1")));
    assert!(response(&body).0);
    assert_eq!(
        body.pointer("/response/patchType"),
        Some(&json!("JSONPatch"))
    );
    let patch_text = base64_decode(
        body.pointer("/response/patch")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    let patch: Value = check(serde_json::from_slice(&patch_text), "patch JSON");
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/metadata/finalizers", "value": ["moco.cybozu.com/mysqlcluster"]},
            {"op": "add", "path": "/spec/serverIDBase", "value": 42}
        ])
    );
    // Existing finalizers and serverIDBase: append only the finalizer.
    let mut c = cluster("c2", 3, json!({"serverIDBase": 7}));
    if let Some(meta) = c.pointer_mut("/metadata").and_then(Value::as_object_mut) {
        meta.insert("finalizers".into(), json!(["example.com/keep"]));
    }
    let (_, body) = post(
        &server,
        mutate,
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "CREATE",
            "c2",
            "default",
            c,
            Value::Null,
        ),
    )
    .await;
    let patch: Value = check(
        serde_json::from_slice(&base64_decode(
            body.pointer("/response/patch")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )),
        "patch",
    );
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/finalizers/-", "value": "moco.cybozu.com/mysqlcluster"}])
    );

    // Validating CREATE: accepted, then rejected with every violation named.
    let ok = cluster("c1", 3, json!({"serverIDBase": 42}));
    let (_, body) = post(
        &server,
        validate,
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "CREATE",
            "c1",
            "default",
            ok.clone(),
            Value::Null,
        ),
    )
    .await;
    assert_eq!(response(&body), (true, String::new(), 0));
    let bad = cluster(
        "c1",
        2,
        json!({"serverIDBase": 42, "logRotationSchedule": "every minute"}),
    );
    let (_, body) = post(
        &server,
        validate,
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "CREATE",
            "c1",
            "default",
            bad,
            Value::Null,
        ),
    )
    .await;
    let (allowed, message, code) = response(&body);
    assert!(!allowed);
    assert_eq!(code, 422);
    assert!(
        message.starts_with("MySQLCluster \"c1\" is invalid: "),
        "{message}"
    );
    assert!(message.contains("spec.logRotationSchedule: logRotationSchedule \"every minute\" is not a valid cron schedule"), "{message}");
    assert!(
        message.contains("spec.replicas: replicas must be a positive odd number, got 2"),
        "{message}"
    );

    // Validating UPDATE: a decrease is a shrink (MOCO refuses it); growth on a non-expandable
    // default class refused.
    let bigger = cluster("c1", 5, json!({"serverIDBase": 42}));
    let (_, body) = post(
        &server,
        validate,
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "UPDATE",
            "c1",
            "default",
            ok.clone(),
            bigger.clone(),
        ),
    )
    .await;
    assert!(response(&body).0, "scale in: {body}");
    let (_, body) = post(
        &server,
        validate,
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "UPDATE",
            "c1",
            "default",
            bigger.clone(),
            ok.clone(),
        ),
    )
    .await;
    assert!(response(&body).0, "scale out: {body}");
    let mut grown = ok.clone();
    if let Some(storage) =
        grown.pointer_mut("/spec/volumeClaimTemplates/0/spec/resources/requests/storage")
    {
        *storage = json!("20Gi");
    }
    let (_, body) = post(
        &server,
        validate,
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "UPDATE",
            "c1",
            "default",
            grown,
            ok.clone(),
        ),
    )
    .await;
    let (allowed, message, _) = response(&body);
    assert!(!allowed);
    assert!(
        message
            .contains("but the default storage class \"standard\" does not allow volume expansion"),
        "{message}"
    );

    // BackupPolicy: schedule on CREATE, DELETE refused while referenced, allowed otherwise.
    let (_, body) = post(
        &server,
        policy_path,
        &review(
            "BackupPolicy",
            "backuppolicies",
            "CREATE",
            "daily",
            "backup",
            policy("daily", "@daily"),
            Value::Null,
        ),
    )
    .await;
    assert!(response(&body).0);
    let (_, body) = post(
        &server,
        policy_path,
        &review(
            "BackupPolicy",
            "backuppolicies",
            "UPDATE",
            "daily",
            "backup",
            policy("daily", "61 * * * *"),
            policy("daily", "@daily"),
        ),
    )
    .await;
    let (allowed, message, _) = response(&body);
    assert!(!allowed);
    assert!(message.contains("spec.schedule: schedule \"61 * * * *\" is not a valid cron schedule: minute field \"61\": end of range (61) above maximum (59)"), "{message}");
    let (_, body) = post(
        &server,
        policy_path,
        &review(
            "BackupPolicy",
            "backuppolicies",
            "DELETE",
            "daily",
            "backup",
            Value::Null,
            policy("daily", "@daily"),
        ),
    )
    .await;
    let (allowed, message, code) = response(&body);
    assert!(!allowed);
    assert_eq!(code, 403);
    assert!(
        message.contains("still referenced by spec.backupPolicyName of MySQLCluster source"),
        "{message}"
    );
    let (_, body) = post(
        &server,
        policy_path,
        &review(
            "BackupPolicy",
            "backuppolicies",
            "DELETE",
            "weekly",
            "backup",
            Value::Null,
            policy("weekly", "@weekly"),
        ),
    )
    .await;
    assert!(response(&body).0);

    // Malformed input: a review without a request is answered, not dropped.
    let (status, body) = post(
        &server,
        validate,
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(!response(&body).0);
    // Unknown paths are not served.
    let (status, _) = post(&server, "/validate-apps-v1-statefulset", &json!({})).await;
    assert_eq!(status, 404);

    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_from_the_cert_dir_with_os_randomness() {
    let server = start(true).await;
    let (status, body) = post(
        &server,
        "/mutate-moco-cybozu-com-v1beta2-mysqlcluster",
        &review(
            "MySQLCluster",
            "mysqlclusters",
            "CREATE",
            "c1",
            "default",
            cluster("c1", 1, json!({})),
            Value::Null,
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert!(response(&body).0);
    let patch: Value = check(
        serde_json::from_slice(&base64_decode(
            body.pointer("/response/patch")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )),
        "patch",
    );
    let base = patch
        .pointer("/1/value")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    assert!((1..=1 << 30).contains(&base), "serverIDBase {base}");
    let (status, _) = post(&server, "/healthz", &json!({})).await;
    assert_eq!(status, 405, "/healthz answers GET only");
    server.stop().await;
}

/// `moco-rs/tls-issuer` may name a ClusterIssuer only: an `Issuer/...` resolves in the
/// controller's namespace, where the Certificate lives, so a tenant could have the operator's
/// own issuers (the agents' CA among them) sign a key that is then copied into the tenant's
/// namespace (issue 29). The webhook refuses it at apply time, naming the annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_issuer_must_be_a_cluster_issuer() {
    let server = start(false).await;
    let validate = "/validate-moco-cybozu-com-v1beta2-mysqlcluster";
    let with_issuer = |issuer: &str| {
        let mut c = cluster("c1", 3, json!({"serverIDBase": 1}));
        c["metadata"]["annotations"] = json!({"moco-rs/tls": "true", "moco-rs/tls-issuer": issuer});
        review(
            "MySQLCluster",
            "mysqlclusters",
            "CREATE",
            "c1",
            "default",
            c,
            Value::Null,
        )
    };
    for issuer in [
        "Issuer/moco-grpc-issuer",
        "Issuer/moco-selfsigned-issuer",
        "Issuer/corp-ca",
    ] {
        let (status, body) = post(&server, validate, &with_issuer(issuer)).await;
        assert_eq!(status, 200);
        let (allowed, message, code) = response(&body);
        assert!(!allowed, "{issuer} must be refused");
        assert_eq!(code, 422, "{message}");
        assert!(
            message.contains("metadata.annotations[\"moco-rs/tls-issuer\"]")
                && message.contains("ClusterIssuer/<name>"),
            "{issuer}: {message}"
        );
    }
    let (_, body) = post(&server, validate, &with_issuer("ClusterIssuer/corp-ca")).await;
    assert!(response(&body).0, "{body}");
    server.stop().await;
}
