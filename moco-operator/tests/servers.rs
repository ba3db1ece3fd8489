//! The servers of `moco controller` started in-process without an API server: webhooks over TLS
//! with a `StaticLookup` and a throwaway certificate, health probes, metrics, their startup
//! errors and their shutdown. (The real binary against an unreachable API server is
//! moco-bin's `controller_server` test.)

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use moco_operator::health::health_router;
use moco_operator::{ControllerError, ListenAddr, Readiness, ServeConfig, Servers};
use moco_testkit::{
    allowed, create_cluster_review, http, https, policy, review, samples, static_lookup,
    write_certificates,
};
use serde_json::{Value, json};
use tokio::net::TcpStream;

const VALIDATE: &str = "/validate-moco-cybozu-com-v1beta2-mysqlcluster";
const MUTATE: &str = "/mutate-moco-cybozu-com-v1beta2-mysqlcluster";
const POLICY: &str = "/validate-moco-cybozu-com-v1beta2-backuppolicy";
const STATEFULSET: &str = "/mutate-apps-v1-statefulset";

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
        webhook_limits: moco_http::limits::WEBHOOK_LIMITS,
        probe_limits: moco_http::limits::PROBE_LIMITS,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_webhooks_health_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let ca = write_certificates(dir.path());
    let servers = Servers::start(&config(dir.path()), static_lookup())
        .await
        .unwrap();
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
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{}",
        r.headers
    );
    let before = samples(&r.body);
    let info = format!(
        "moco_controller_info{{version=\"{}\",namespace=\"moco-system\",reconciliation=\"leader-elected\"}}",
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
    let ok = create_cluster_review("c1", 3);
    assert!(allowed(&https(webhook, &ca, VALIDATE, &ok).await));
    let bad = create_cluster_review("c1", 2);
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
    // The partitioned rollout's hold, answered as a base64 JSON patch.
    let sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "moco-c1", "namespace": "default", "ownerReferences": [
            {"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster", "name": "c1",
             "uid": "u", "controller": true}]},
        "spec": {"replicas": 3, "selector": {}, "serviceName": "moco-c1", "template": {},
                 "updateStrategy": {"type": "RollingUpdate"}}
    });
    let r = https(
        webhook,
        &ca,
        STATEFULSET,
        &review(
            "StatefulSet",
            "statefulsets",
            "CREATE",
            "default",
            "moco-c1",
            sts,
            Value::Null,
        ),
    )
    .await;
    assert!(allowed(&r), "{}", r.body);
    assert_eq!(
        r.json().pointer("/response/patch"),
        Some(&json!(moco_operator::webhook::base64(
            br#"[{"op":"add","path":"/spec/updateStrategy/rollingUpdate","value":{"partition":3}}]"#
        )))
    );
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
    assert_eq!(count(STATEFULSET, "allowed"), Some(1.0));
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
        after
            .keys()
            .all(|k| !k.contains("validate-apps-v1-statefulset")),
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

    // This build's annotations, after MOCO's rules: TLS is fixed at creation, and a bad
    // value is named on create.
    let with_tls = |tls: Option<&str>| {
        let mut c = moco_testkit::cluster("c1", 3);
        if let Some(v) = tls {
            c["metadata"]["annotations"] = json!({"moco-rs/tls": v});
        }
        c
    };
    let update = |new: Value, old: Value| {
        review(
            "MySQLCluster",
            "mysqlclusters",
            "UPDATE",
            "default",
            "c1",
            new,
            old,
        )
    };
    let r = https(
        webhook,
        &ca,
        VALIDATE,
        &update(with_tls(Some("true")), with_tls(None)),
    )
    .await;
    assert!(!allowed(&r));
    assert_eq!(r.json().pointer("/response/status/code"), Some(&json!(422)));
    assert!(
        r.body.contains(
            "MySQLCluster \\\"c1\\\" is invalid: metadata.annotations[\\\"moco-rs/tls\\\"]: cannot change from false to true"
        ),
        "{}",
        r.body
    );
    let same = update(with_tls(Some("true")), with_tls(Some("true")));
    assert!(allowed(&https(webhook, &ca, VALIDATE, &same).await));
    let bad = review(
        "MySQLCluster",
        "mysqlclusters",
        "CREATE",
        "default",
        "c1",
        with_tls(Some("on")),
        Value::Null,
    );
    let r = https(webhook, &ca, VALIDATE, &bad).await;
    assert!(!allowed(&r));
    assert!(r.body.contains("is not a boolean"), "{}", r.body);
    // With a violation of MOCO's rules too, one answer names both.
    let mut both = with_tls(Some("on"));
    both["spec"]["replicas"] = json!(2);
    let both = review(
        "MySQLCluster",
        "mysqlclusters",
        "CREATE",
        "default",
        "c1",
        both,
        Value::Null,
    );
    let r = https(webhook, &ca, VALIDATE, &both).await;
    assert!(!allowed(&r));
    assert_eq!(r.json().pointer("/response/status/code"), Some(&json!(422)));
    assert!(
        r.body.contains("replicas must be a positive odd number")
            && r.body.contains("is not a boolean"),
        "{}",
        r.body
    );

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
    let error = Servers::start(&config(empty.path()), static_lookup())
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
    let error = Servers::start(&cfg, static_lookup()).await.unwrap_err();
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
    let error = Servers::start(&cfg, static_lookup()).await.unwrap_err();
    assert!(
        matches!(error, ControllerError::WebhookDisabled),
        "{error:?}"
    );
    let mut cfg = config(dir.path());
    cfg.metrics_addr = ListenAddr::Disabled;
    cfg.health_addr = ListenAddr::Disabled;
    let servers = Servers::start(&cfg, static_lookup()).await.unwrap();
    assert_eq!(
        (servers.health_addr(), servers.metrics_addr()),
        (None, None)
    );
    servers.shutdown().await.unwrap();
}

/// Issue 12, item 9: a certificate file holding garbage was reported as rustls' "peer sent no
/// certificates". Each problem names its file and what is missing; a reload that finds
/// garbage keeps the previous certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_certificate_files_are_named_and_a_bad_reload_keeps_the_old_one() {
    use moco_http::tls::{server_config, spawn_reloader, tls_config};
    let dir = tempfile::tempdir().unwrap();
    write_certificates(dir.path());
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let good = tls_config(&cert, &key).await.unwrap();

    let garbage = dir.path().join("garbage.crt");
    std::fs::write(&garbage, "this is not a certificate\n").unwrap();
    let e = server_config(&garbage, &key).unwrap_err().to_string();
    assert!(e.contains("garbage.crt: no PEM certificate"), "{e}");
    assert!(!e.contains("peer sent"), "{e}");
    let e = server_config(&cert, &garbage).unwrap_err().to_string();
    assert!(e.contains("garbage.crt: no PEM private key"), "{e}");
    // A key that belongs to another certificate.
    let other = tempfile::tempdir().unwrap();
    write_certificates(other.path());
    let e = server_config(&cert, &other.path().join("tls.key"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not go together"), "{e}");

    // The reloader meets garbage: the served configuration stays the one loaded before.
    let before = good.get_inner();
    assert_eq!(before.alpn_protocols, vec![b"http/1.1".to_vec()]);
    let reloader = spawn_reloader(
        good.clone(),
        garbage,
        key.clone(),
        Duration::from_millis(10),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    reloader.abort();
    assert!(
        Arc::ptr_eq(&before, &good.get_inner()),
        "a bad reload replaced the certificate"
    );
    // A good reload does replace it.
    let reloader = spawn_reloader(good.clone(), cert, key, Duration::from_millis(10));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while Arc::ptr_eq(&before, &good.get_inner()) {
        assert!(std::time::Instant::now() < deadline, "never reloaded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    reloader.abort();
}

/// The servers speak HTTP/1.1 only, so ALPN must not offer `h2`: a client that prefers it
/// (Go's HTTP client, which the API server uses) gets HTTP/1.1 and its request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpn_offers_http_1_1_only() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let dir = tempfile::tempdir().unwrap();
    let ca = write_certificates(dir.path());
    let mut cfg = config(dir.path());
    cfg.metrics_addr = ListenAddr::Disabled;
    cfg.health_addr = ListenAddr::Disabled;
    let servers = Servers::start(&cfg, static_lookup()).await.unwrap();
    moco_http::tls::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let mut client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(servers.webhook_addr())
        .await
        .unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    servers.shutdown().await.unwrap();
}
