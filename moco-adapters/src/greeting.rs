//! The MySQL protocol's greeting: the first packet a server sends once it accepts clients.
//!
//! One reader, a floor of its own under [`crate::mysqld`] (readiness on TCP),
//! [`crate::instance`] (a restored copy's first start, on the socket) and `moco-local`'s
//! platform (its readiness, on the socket), so that none of them reaches into another
//! for it.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// `ER_HOST_NOT_PRIVILEGED`: no account may log in from the client's host. A MySQL server sends
/// it instead of a greeting to a TCP client from a host no account names (a fresh
/// `--initialize-insecure` datadir has `root@localhost` only): it is up and deciding who may
/// log in, which is what readiness asks.
const HOST_NOT_PRIVILEGED: u16 = 1130;

/// Reads the first packet from `stream`: protocol version 10 means the server accepts
/// clients, and so does [`HOST_NOT_PRIVILEGED`]; another error packet (e.g. "too many
/// connections") is reported as text.
pub async fn read_greeting<S: AsyncRead + Unpin>(stream: &mut S) -> Result<(), String> {
    let mut header = [0u8; 4];
    stream
        .read_exact(&mut header)
        .await
        .map_err(|e| format!("read greeting: {e}"))?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0u8; len.min(512)];
    stream
        .read_exact(&mut payload)
        .await
        .map_err(|e| format!("read greeting: {e}"))?;
    match payload.first() {
        Some(10) => Ok(()),
        Some(0xff) if payload.get(1..3) == Some(&HOST_NOT_PRIVILEGED.to_le_bytes()[..]) => Ok(()),
        Some(0xff) => Err(format!(
            "server error: {}",
            String::from_utf8_lossy(payload.get(3..).unwrap_or_default())
        )),
        other => Err(format!("unexpected greeting byte {other:?}")),
    }
}

/// True when a server answers with a protocol greeting on its UNIX socket within `limit`.
/// (The socket keeps these probes out of the server's per-host connection-error counters,
/// which a TCP probe that hangs up after the greeting would raise.)
pub async fn socket_greets(socket: &Path, limit: Duration) -> bool {
    let attempt = async {
        let mut stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        read_greeting(&mut stream).await
    };
    matches!(tokio::time::timeout(limit, attempt).await, Ok(Ok(())))
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt as _;

    use super::*;

    /// A packet as a server frames it: three bytes of length, a sequence number, the payload.
    fn packet(payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).unwrap().to_le_bytes();
        let mut bytes = vec![len[0], len[1], len[2], 0];
        bytes.extend_from_slice(payload);
        bytes
    }

    #[tokio::test]
    async fn a_greeting_is_told_from_an_error_packet_and_from_other_bytes() {
        let read = |bytes: Vec<u8>| async move { read_greeting(&mut bytes.as_slice()).await };
        read(packet(b"\x0a11.4.5-MariaDB\0")).await.unwrap();
        let err = read(packet(b"\xff\x10\x04Too many connections"))
            .await
            .unwrap_err();
        assert_eq!(err, "server error: Too many connections");
        // MySQL's answer to a host no account names: up, and deciding who may log in.
        read(packet(
            b"\xff\x6a\x04Host '127.0.0.1' is not allowed to connect",
        ))
        .await
        .unwrap();
        let err = read(packet(b"HTTP/1.1 400")).await.unwrap_err();
        assert!(
            err.starts_with("unexpected greeting byte Some(72)"),
            "{err}"
        );
        // A connection closed inside the header or the payload.
        assert!(
            read(vec![5, 0])
                .await
                .unwrap_err()
                .starts_with("read greeting")
        );
        assert!(
            read(vec![5, 0, 0, 0, 10])
                .await
                .unwrap_err()
                .starts_with("read greeting")
        );
    }

    #[tokio::test]
    async fn a_socket_greets_only_when_a_server_sends_its_greeting_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("mysqld.sock");
        let limit = Duration::from_secs(5);
        // Nobody listens.
        assert!(!socket_greets(&socket, limit).await);

        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let server = tokio::spawn(async move {
            for reply in [
                packet(b"\x0a8.4.3\0"),
                packet(b"\xff\x10\x04Too many connections"),
            ] {
                let (mut s, _) = listener.accept().await.unwrap();
                s.write_all(&reply).await.unwrap();
            }
            // A server that accepts and says nothing.
            let (_silent, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        assert!(socket_greets(&socket, limit).await);
        assert!(!socket_greets(&socket, limit).await);
        let started = std::time::Instant::now();
        assert!(!socket_greets(&socket, Duration::from_millis(200)).await);
        assert!(started.elapsed() < Duration::from_secs(4));
        server.abort();
    }
}
