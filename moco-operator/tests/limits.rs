//! Slow and greedy clients against the real servers (issue 12, item 2): idle, half-sent header
//! and half-sent body connections are closed, a connection flood is refused beyond the limit,
//! an oversized body is refused, and the servers answer normally afterwards. The limits are
//! shortened here so that each wait takes seconds; the defaults are in
//! `moco_http::limits`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_api::labels::PATH_VALIDATE_MYSQLCLUSTER;
use moco_http::limits::ServerLimits;
use moco_operator::webhook::WebhookState;
use moco_operator::{ListenAddr, ServeConfig, Servers};
use moco_testkit::{create_cluster_review, http, https, static_lookup, write_certificates};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Far beyond any limit below: a connection still open then was never going to close.
const DEADLINE: Duration = Duration::from_secs(60);

const SHORT: ServerLimits = ServerLimits {
    max_connections: 4,
    max_connections_per_client: 3,
    handshake_timeout: Duration::from_secs(1),
    header_timeout: Duration::from_secs(1),
    request_timeout: Duration::from_secs(2),
    max_body_bytes: 64 * 1024,
};

struct Running {
    servers: Servers,
    ca: CertificateDer<'static>,
    _dir: tempfile::TempDir,
}

fn loopback() -> ListenAddr {
    ListenAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 0)))
}

async fn start(webhook_limits: ServerLimits, probe_limits: ServerLimits) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let ca = write_certificates(dir.path());
    let config = ServeConfig {
        namespace: "moco-system".into(),
        webhook_addr: loopback(),
        health_addr: loopback(),
        metrics_addr: loopback(),
        cert_dir: dir.path().to_owned(),
        cert_reload_interval: Duration::from_secs(60),
        webhook_limits,
        probe_limits,
    };
    let state = WebhookState::with_random(static_lookup(), Arc::new(|| 41));
    let servers = Servers::start_with(&config, state).await.unwrap();
    Running {
        servers,
        ca,
        _dir: dir,
    }
}

/// A TCP connection to `addr` from the loopback address `127.0.0.<from>` (Linux routes all of
/// 127/8 to the loopback interface): a distinct client to the server.
async fn tcp_from(from: u8, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from(([127, 0, 0, from], 0)))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

async fn tls(addr: SocketAddr, ca: &CertificateDer<'static>) -> TlsStream<TcpStream> {
    tls_from(1, addr, ca).await
}

async fn tls_from(
    from: u8,
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
) -> TlsStream<TcpStream> {
    moco_http::tls::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tcp_from(from, addr).await;
    TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Reads until the server closes the connection; returns what it sent and how long that took.
/// Panics if it is still open after [`DEADLINE`].
async fn until_closed<S: AsyncRead + Unpin>(mut stream: S, what: &str) -> (String, Duration) {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + DEADLINE).into(), stream.read(&mut buf)).await {
            Err(_) => panic!("{what}: the connection is still open after {DEADLINE:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

fn review_request(body_len: usize) -> String {
    format!(
        "POST {PATH_VALIDATE_MYSQLCLUSTER} HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
    )
}

#[tokio::test]
async fn idle_and_half_sent_requests_are_closed() {
    let r = start(SHORT, SHORT).await;
    let webhook = r.servers.webhook_addr();

    // Connected, no TLS handshake.
    let raw = tcp_from(1, webhook).await;
    let (_, took) = until_closed(raw, "no handshake").await;
    println!("no handshake: closed after {took:?}");

    // Handshake done, then nothing.
    let idle = tls(webhook, &r.ca).await;
    let (_, took) = until_closed(idle, "idle after the handshake").await;
    println!("idle: closed after {took:?}");

    // Half a header.
    let mut half = tls(webhook, &r.ca).await;
    half.write_all(b"POST /validate HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    until_closed(half, "half a header").await;

    // The whole header, a tenth of the declared body.
    let mut slow = tls(webhook, &r.ca).await;
    slow.write_all(review_request(10_000).as_bytes())
        .await
        .unwrap();
    slow.write_all(&[b' '; 1_000]).await.unwrap();
    let (answer, took) = until_closed(slow, "half a body").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    println!("half a body: 408 and closed after {took:?}");

    // A keep-alive connection that answered a request is closed once idle.
    let review = create_cluster_review("idle", 3);
    let mut kept = tls(webhook, &r.ca).await;
    kept.write_all(format!("{}{review}", review_request(review.len())).as_bytes())
        .await
        .unwrap();
    let (answer, _) = until_closed(kept, "idle after a request").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // The plain-HTTP servers: idle and half-header connections close too.
    for addr in [
        r.servers.health_addr().unwrap(),
        r.servers.metrics_addr().unwrap(),
    ] {
        until_closed(TcpStream::connect(addr).await.unwrap(), "idle probe").await;
        let mut half = TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        until_closed(half, "half a probe").await;
    }
    r.servers.shutdown().await.unwrap();
}

/// A connection the server refuses: closed before it sent anything.
async fn refused(stream: TcpStream, what: &str) {
    let (got, took) = until_closed(stream, what).await;
    assert!(got.is_empty(), "{what}: {got}");
    assert!(took < Duration::from_secs(30), "{what}: {took:?}");
}

#[tokio::test]
async fn a_connection_flood_is_refused_beyond_the_limits_and_service_resumes() {
    let limits = ServerLimits {
        header_timeout: Duration::from_secs(60),
        request_timeout: Duration::from_secs(60),
        ..SHORT
    };
    let r = start(limits, limits).await;
    let webhook = r.servers.webhook_addr();
    // One client takes its three places; its fourth connection is refused.
    let mut held = Vec::new();
    for _ in 0..limits.max_connections_per_client {
        held.push(tls_from(1, webhook, &r.ca).await);
    }
    refused(
        tcp_from(1, webhook).await,
        "a fourth connection from one client",
    )
    .await;
    // Another client still gets in, up to the total of four; a third client does not.
    held.push(tls_from(2, webhook, &r.ca).await);
    refused(tcp_from(3, webhook).await, "a connection over the total").await;
    // The health server counts the same way.
    let health = r.servers.health_addr().unwrap();
    let mut probes = Vec::new();
    for _ in 0..limits.max_connections_per_client {
        probes.push(tcp_from(1, health).await);
    }
    // The server counts connections as it accepts them: let it see the held ones first.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let mut extra = tcp_from(1, health).await;
        extra
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let (got, _) = until_closed(extra, "a probe over the limit").await;
        if got.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "never refused: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    drop(held);
    drop(probes);
    // Closed connections give their places back.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let review = create_cluster_review("after", 3);
        let path = format!("{PATH_VALIDATE_MYSQLCLUSTER}?timeout=10s");
        let answer = https(webhook, &r.ca, &path, &review).await;
        let probe = http(health, "GET", "/healthz").await;
        if answer.status == 200 && probe.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "service did not resume");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    r.servers.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_oversized_body_is_refused() {
    let r = start(SHORT, SHORT).await;
    let mut big = tls(r.servers.webhook_addr(), &r.ca).await;
    let body = vec![b' '; SHORT.max_body_bytes + 1];
    big.write_all(review_request(body.len()).as_bytes())
        .await
        .unwrap();
    // The server may answer before the whole body is sent.
    let _ = big.write_all(&body).await;
    let (answer, _) = until_closed(big, "an oversized body").await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    r.servers.shutdown().await.unwrap();
}
