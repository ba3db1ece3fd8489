//! A real S3-compatible server on loopback for the backup tests: moto's, from PyPI.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A moto server on a free loopback port, killed when dropped.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto's S3 server (`MOCO_MOTO_SERVER`, which `scripts/test.sh` installs, else
/// `moto_server` in `PATH`) and records the test in the real-server ledger. Without it the
/// test fails, unless `MOCO_SKIP_OBJECT_STORES=1` (then `None`).
pub fn moto(test: &str) -> Option<Moto> {
    let program = std::env::var("MOCO_MOTO_SERVER").unwrap_or_else(|_| "moto_server".to_owned());
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = match Command::new(&program)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            if std::env::var_os("MOCO_SKIP_OBJECT_STORES").is_some_and(|v| v == "1") {
                println!("SKIPPED {test} (MOCO_SKIP_OBJECT_STORES=1): {program}: {e}");
                return None;
            }
            panic!(
                "{test}: cannot run {program} ({e}); scripts/test.sh installs it \
                 (MOCO_MOTO_SERVER), or set MOCO_SKIP_OBJECT_STORES=1 to skip"
            );
        }
    };
    if let Some(ledger) = std::env::var_os("MOCO_REAL_SERVER_LEDGER") {
        std::fs::write(
            std::path::Path::new(&ledger).join(test),
            "\tmoto 5.2.5 (S3)\n",
        )
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto never listened on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Moto { child, port })
}

/// Creates a bucket (moto does not check signatures).
pub async fn create_bucket(port: u16, name: &str) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(
        format!(
            "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
