//! The S3 back-end against a real S3-compatible server on loopback (moto's, which
//! `scripts/test.sh` installs): a multipart upload streamed, listed, read back and deleted, and
//! a failed upload that leaves no object. Without the server the test fails, unless
//! `MOCO_SKIP_OBJECT_STORES=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moco_backup::{BucketSpec, ObjectInfo};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A moto server on a free loopback port, killed when dropped.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto(test: &str) -> Option<Moto> {
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
async fn create_bucket(port: u16, name: &str) {
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

#[tokio::test]
async fn s3_objects_stream_both_ways_and_a_failed_upload_leaves_nothing() {
    let test = "moco-backup s3_objects_stream_both_ways_and_a_failed_upload_leaves_nothing";
    let Some(server) = moto(test) else {
        return;
    };
    create_bucket(server.port, "moco-test").await;
    let spec = BucketSpec {
        endpoint: Some(format!("http://127.0.0.1:{}", server.port)),
        region: Some("us-east-1".into()),
        path_style: true,
        name: "$(BUCKET)".into(),
        ..BucketSpec::from_url("s3://placeholder").unwrap()
    };
    let env: BTreeMap<String, String> = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("BUCKET", "moco-test"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let bucket = spec.open(&env).unwrap();

    // 20 MiB: four parts of 5 MiB, streamed.
    let data: Vec<u8> = (0..20 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    let key = "moco/ns/db/20261123-221500/dump.tar";
    assert_eq!(
        bucket.upload(key, &data[..]).await.unwrap(),
        data.len() as u64
    );
    assert_eq!(
        bucket.list("moco/ns/db").await.unwrap(),
        [ObjectInfo {
            key: key.into(),
            size: data.len() as u64
        }]
    );
    let mut back = Vec::new();
    bucket
        .download(key)
        .await
        .unwrap()
        .read_to_end(&mut back)
        .await
        .unwrap();
    assert!(back == data, "the object reads back as written");

    // The source fails after two parts: the multipart upload is aborted, nothing is listed.
    let failing = tokio::io::AsyncReadExt::chain(&data[..11 * 1024 * 1024], ErrorReader);
    let e = bucket
        .upload("moco/ns/db/broken/dump.tar", failing)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("the source broke"), "{e}");
    assert_eq!(bucket.list("moco/ns/db/broken").await.unwrap(), []);

    bucket.delete(key).await.unwrap();
    assert_eq!(bucket.list("").await.unwrap(), []);

    // A bucket that does not exist is named in the error.
    let missing = BucketSpec {
        name: "no-such-bucket".into(),
        ..spec.clone()
    }
    .open(&env)
    .unwrap();
    let e = missing.list("").await.unwrap_err();
    assert!(e.to_string().contains("s3://no-such-bucket"), "{e}");
}

/// A reader that fails.
struct ErrorReader;

impl tokio::io::AsyncRead for ErrorReader {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Err(std::io::Error::other("the source broke")))
    }
}
