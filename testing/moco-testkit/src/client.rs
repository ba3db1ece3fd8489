//! One HTTP/1.1 request per connection, written by hand: the servers are checked on the wire,
//! not through a client library that might paper over what they send.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::check;

/// An HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The status line and headers, lower-cased.
    pub headers: String,
    /// The body as text.
    pub body: String,
}

impl Response {
    /// The body as JSON (panics if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// A plain-HTTP request without a body.
pub async fn http(addr: SocketAddr, method: &str, path: &str) -> Response {
    let stream = check(TcpStream::connect(addr).await, "connect");
    exchange(stream, method, path, "").await
}

/// A JSON POST over TLS with SNI `localhost`, trusting only `ca`.
pub async fn https(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    path: &str,
    body: &str,
) -> Response {
    moco_http::tls::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    check(roots.add(ca.clone()), "root store");
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = check(TcpStream::connect(addr).await, "connect");
    let name = check(ServerName::try_from("localhost"), "server name");
    let tls = check(
        TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await,
        "TLS handshake with the webhook certificate",
    );
    exchange(tls, "POST", path, body).await
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    method: &str,
    path: &str,
    body: &str,
) -> Response {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    check(stream.write_all(request.as_bytes()).await, "write request");
    let mut raw = Vec::new();
    // The server closes after the response (Connection: close); a missing TLS close_notify
    // after the body is fine.
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
