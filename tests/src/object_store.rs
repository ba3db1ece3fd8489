//! What the object-store back-end tests share (`backup_s3`, `backup_azure`): the data they
//! stream, a source that fails mid-upload, and the checks every back-end must pass the same
//! way (a streamed object round trip, a failed upload, a missing bucket named); the raw
//! requests the stores' helpers send where the client would refuse or cannot ([`raw_put`]);
//! a directory bucket.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use moco_backup::{Bucket, BucketError, BucketSpec, ObjectInfo};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Where the tests put their objects: a backup folder of cluster `ns/db`.
pub const KEY: &str = "moco/ns/db/20261123-221500/dump.tar";

/// 20 MiB (four parts or blocks of 5 MiB) of a pattern that is not periodic in a part.
pub fn data() -> Vec<u8> {
    (0..20 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect()
}

/// A reader that fails: "the source broke".
#[derive(Debug)]
pub struct ErrorReader;

impl tokio::io::AsyncRead for ErrorReader {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Err(std::io::Error::other("the source broke")))
    }
}

/// `data` uploads as [`KEY`], streamed: the size is returned, the listing of the cluster's
/// folder holds it alone, and it reads back as written.
pub async fn streams_both_ways(bucket: &Bucket, data: &[u8]) {
    assert_eq!(bucket.upload(KEY, data).await.unwrap(), data.len() as u64);
    assert_eq!(
        bucket.list("moco/ns/db").await.unwrap(),
        [ObjectInfo {
            key: KEY.into(),
            size: data.len() as u64
        }]
    );
    let mut back = Vec::new();
    bucket
        .download(KEY)
        .await
        .unwrap()
        .read_to_end(&mut back)
        .await
        .unwrap();
    assert!(back == data, "the object reads back as written");
}

/// An upload to `moco/ns/db/broken/dump.tar` whose source fails after 11 MiB (two parts or
/// blocks sent) fails with the source's error, which it returns.
pub async fn upload_whose_source_fails(bucket: &Bucket, data: &[u8]) -> BucketError {
    let failing = tokio::io::AsyncReadExt::chain(&data[..11 * 1024 * 1024], ErrorReader);
    let e = bucket
        .upload("moco/ns/db/broken/dump.tar", failing)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("the source broke"), "{e}");
    e
}

/// `spec` with the bucket `name`, which does not exist, opened with `env`: its listing fails
/// naming it (`url`, e.g. `s3://no-such-bucket`).
pub async fn a_missing_bucket_is_named(
    spec: &BucketSpec,
    env: &BTreeMap<String, String>,
    name: &str,
    url: &str,
) {
    let missing = BucketSpec {
        name: name.into(),
        ..spec.clone()
    }
    .open(env)
    .unwrap();
    let e = missing.list("").await.unwrap_err();
    assert!(e.to_string().contains(url), "{e}");
}

/// `pairs` as an environment.
pub fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The bucket of directory `dir` (a `BucketSpec` of its path, no environment).
pub fn directory_bucket(dir: &Path) -> Bucket {
    BucketSpec::from_url(&dir.display().to_string())
        .unwrap()
        .open(&BTreeMap::new())
        .unwrap()
}

/// `PUT path` to the store at `host` (`HOST:PORT`) on a connection of its own, with `headers`
/// (besides `Host`, `Content-Length` and `Connection: close`) and `body`, as written: a bucket
/// or container created without a client, or a key the client would refuse to write (`a//b`,
/// `x/../y`). Returns the whole answer, status line first.
pub async fn raw_put(host: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> String {
    let mut head = format!("PUT {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    answer
}
