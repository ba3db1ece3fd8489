//! Benchmark: the webhook server under a flood of slow clients (issue 12, item 2).
//!
//! Starts the servers in this process with the production limits
//! (`moco_http::limits::WEBHOOK_LIMITS`), measures RSS with a few real admission requests,
//! then opens `CLIENTS` TLS connections that each send a header declaring a 2,000,000-byte body
//! and 1,900,000 bytes of it, and hold: first from one address, then twice from 30. It reports how many were admitted, the RSS while they
//! hold, how long until the server closed them all, the RSS after, and whether real requests
//! are answered during and after the flood. Numbers go to `docs/benchmarks.md`.
//!
//! Run: `cargo run --release -p moco-tests --bin webhook_flood [CLIENTS]` (default 300).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_api::labels::PATH_VALIDATE_MYSQLCLUSTER;
use moco_http::limits::{PROBE_LIMITS, WEBHOOK_LIMITS};
use moco_operator::webhook::WebhookState;
use moco_operator::{ListenAddr, ServeConfig, Servers};
use moco_testkit::{create_cluster_review, https, static_lookup, write_certificates};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

const DECLARED: usize = 2_000_000;
const SENT: usize = 1_900_000;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// One admission request; false when it was refused or failed (the test client panics on a
/// refused handshake, which the task boundary turns into `false`).
async fn review_ok(addr: SocketAddr, ca: &CertificateDer<'static>) -> bool {
    let ca = ca.clone();
    let request = tokio::spawn(async move {
        let path = format!("{PATH_VALIDATE_MYSQLCLUSTER}?timeout=10s");
        let body = create_cluster_review("bench", 3);
        https(addr, &ca, &path, &body).await.status == 200
    });
    matches!(
        tokio::time::timeout(Duration::from_secs(20), request).await,
        Ok(Ok(true))
    )
}

/// One slow client: returns whether the server admitted it (handshake done, body sent), and
/// when it was closed.
async fn slow_client(
    from: u8,
    addr: SocketAddr,
    connector: TlsConnector,
    started: Instant,
) -> (bool, Option<Duration>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from(([127, 0, 0, from], 0)))
        .unwrap();
    let Ok(tcp) = socket.connect(addr).await else {
        return (false, None);
    };
    let name = ServerName::try_from("localhost").unwrap();
    let Ok(Ok(mut tls)) =
        tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp)).await
    else {
        return (false, Some(started.elapsed()));
    };
    let header = format!(
        "POST {PATH_VALIDATE_MYSQLCLUSTER} HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: {DECLARED}\r\n\r\n"
    );
    if tls.write_all(header.as_bytes()).await.is_err()
        || tls.write_all(&vec![b' '; SENT]).await.is_err()
    {
        return (false, Some(started.elapsed()));
    }
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(300), tls.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (true, Some(started.elapsed())),
            Ok(Ok(_)) => {}
            Err(_) => return (true, None),
        }
    }
}

async fn run(clients: usize) {
    let dir = tempfile::tempdir().unwrap();
    let ca = write_certificates(dir.path());
    let config = ServeConfig {
        namespace: "bench".into(),
        webhook_addr: ListenAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 0))),
        health_addr: ListenAddr::Disabled,
        metrics_addr: ListenAddr::Disabled,
        cert_dir: dir.path().to_owned(),
        cert_reload_interval: Duration::from_secs(60),
        webhook_limits: WEBHOOK_LIMITS,
        probe_limits: PROBE_LIMITS,
    };
    let servers = Servers::start_with(
        &config,
        WebhookState::with_random(static_lookup(), Arc::new(|| 7)),
    )
    .await
    .unwrap();
    let addr = servers.webhook_addr();
    for _ in 0..20 {
        assert!(review_ok(addr, &ca).await);
    }
    let baseline = rss_mib();
    println!("limits: {WEBHOOK_LIMITS:?}");
    println!("RSS after 20 reviews: {baseline:.1} MiB");

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let client_config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(client_config));
    // From one address, then from 30 (127.0.0.2–31; the reviews come from 127.0.0.1), twice
    // to see whether memory keeps growing.
    for (round, sources) in [(1, 1), (2, 30), (3, 30)] {
        flood(round, clients, sources, addr, &ca, &connector, baseline).await;
    }
    servers.shutdown().await.unwrap();
}

/// One flood of `clients` slow clients, reported.
async fn flood(
    round: u32,
    clients: usize,
    sources: u8,
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    connector: &TlsConnector,
    baseline: f64,
) {
    let started = Instant::now();
    let flood: Vec<_> = (0..clients)
        .map(|i| {
            let from = 2 + u8::try_from(i % usize::from(sources)).unwrap();
            tokio::spawn(slow_client(from, addr, connector.clone(), started))
        })
        .collect();
    // Sample RSS while the admitted clients hold their bodies.
    let mut peak = baseline;
    let sample_until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < sample_until {
        peak = peak.max(rss_mib());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let during = review_ok(addr, ca).await;
    println!(
        "flood {round}: {clients} slow clients from {sources} addresses: peak RSS {peak:.1} MiB; a review during the flood answered: {during}"
    );
    let mut admitted = 0;
    let mut last_closed = Duration::ZERO;
    let mut open = 0;
    for f in flood {
        let (ok, closed) = f.await.unwrap();
        admitted += usize::from(ok);
        match closed {
            Some(t) => last_closed = last_closed.max(t),
            None => open += 1,
        }
    }
    println!(
        "flood {round}: admitted {admitted}, refused {}; all closed by the server after {:.1} s ({open} still open)",
        clients - admitted,
        last_closed.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after_ok = review_ok(addr, ca).await;
    println!(
        "flood {round}: RSS 2 s after: {:.1} MiB; a review afterwards answered: {after_ok}",
        rss_mib()
    );
}

fn main() {
    let clients = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(clients));
}
