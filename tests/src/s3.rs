//! A real S3-compatible server for the backup tests, moto's from PyPI: on loopback, or on the
//! control plane's bridge where Pods reach it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moco_backup::{Bucket, BucketSpec};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::object_store::{env, raw_put};

/// A store server that would not start: `None` (skip) under `MOCO_SKIP_OBJECT_STORES=1`,
/// else the test fails saying how to get it (`install_env`, which `scripts/test.sh` sets).
pub fn missing_store<T>(
    test: &str,
    program: &str,
    install_env: &str,
    e: &std::io::Error,
) -> Option<T> {
    if std::env::var_os("MOCO_SKIP_OBJECT_STORES").is_some_and(|v| v == "1") {
        println!("SKIPPED {test} (MOCO_SKIP_OBJECT_STORES=1): {program}: {e}");
        return None;
    }
    panic!(
        "{test}: cannot run {program} ({e}); scripts/test.sh installs it \
         ({install_env}), or set MOCO_SKIP_OBJECT_STORES=1 to skip"
    );
}

/// The version of the moto whose server is `program` (its script's interpreter is asked), or
/// why it is unknown.
fn moto_version(program: &str) -> String {
    let path = if program.contains('/') {
        Some(std::path::PathBuf::from(program))
    } else {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(program))
                .find(|c| c.is_file())
        })
    };
    let interpreter = path
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| Some(text.lines().next()?.strip_prefix("#!")?.trim().to_owned()));
    let Some(interpreter) = interpreter else {
        return "moto (version unknown: no interpreter line)".to_owned();
    };
    match Command::new(&interpreter)
        .args(["-c", "import moto; print(moto.__version__)"])
        .output()
    {
        Ok(out) if out.status.success() => {
            format!("moto {} (S3)", String::from_utf8_lossy(&out.stdout).trim())
        }
        other => format!("moto (version unknown: {interpreter}: {other:?})"),
    }
}

/// A moto server on a free port, killed when dropped.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    /// Its port.
    pub port: u16,
    /// `http://HOST:PORT`.
    pub endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto's S3 server (`MOCO_MOTO_SERVER`, which `scripts/test.sh` installs, else
/// `moto_server` in `PATH`) on loopback and records the test in the real-server ledger.
/// Without it the test fails, unless `MOCO_SKIP_OBJECT_STORES=1` (then `None`).
pub fn moto(test: &str) -> Option<Moto> {
    moto_on(test, "127.0.0.1")
}

/// moto on the host's address on the control plane's bridge (the API server's), which Pods
/// reach; the test fails without it.
pub fn bridge_moto(cp: &crate::control_plane::ControlPlane, test: &str) -> Moto {
    let text = std::fs::read_to_string(cp.dir.join("kubeconfig")).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .expect("the kubeconfig names its server");
    let ip = server.rsplit_once(':').unwrap().0;
    moto_on(test, ip).expect("moto's S3 server (scripts/test.sh installs it)")
}

fn moto_on(test: &str, host: &str) -> Option<Moto> {
    let program = std::env::var("MOCO_MOTO_SERVER").unwrap_or_else(|_| "moto_server".to_owned());
    // Chosen as the servers' ports are, so that no other test of this process is given it.
    let port = moco_adapters::mysqld::free_port().unwrap_or_else(|e| panic!("{e}"));
    let child = match Command::new(&program)
        .args(["-H", host, "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return missing_store(test, &program, "MOCO_MOTO_SERVER", &e),
    };
    moco_testkit::ledger::record(test, &moto_version(&program));
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect((host, port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "moto never listened on {host}:{port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Moto {
        child,
        port,
        endpoint: format!("http://{host}:{port}"),
    })
}

/// Creates a bucket on moto at `port` on loopback (moto does not check signatures).
pub async fn create_bucket(port: u16, name: &str) {
    create_bucket_at(&format!("http://127.0.0.1:{port}"), name).await;
}

/// Creates bucket `name` at `endpoint` (`http://HOST:PORT`).
pub async fn create_bucket_at(endpoint: &str, name: &str) {
    let host = endpoint.strip_prefix("http://").unwrap();
    let answer = raw_put(host, &format!("/{name}"), &[], b"").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// Puts `body` as `key` of `bucket` on moto at `port` on loopback with a raw request, so that
/// the key reaches the store as written (object_store refuses to write `a//b` or `x/../y`; S3
/// stores them).
pub async fn put_object_raw(port: u16, bucket: &str, key: &str, body: &[u8]) {
    let host = format!("127.0.0.1:{port}");
    let answer = raw_put(&host, &format!("/{bucket}/{key}"), &[], body).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{key}: {answer}");
}

/// Moto's test credentials, as a Job's environment holds them.
pub fn moto_env() -> BTreeMap<String, String> {
    env(&[
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ])
}

/// The bucket of `url` (`s3://NAME`) at `endpoint` (`http://HOST:PORT`) as a Job names it
/// for moto: path style, a region.
pub fn moto_spec(endpoint: &str, url: &str) -> BucketSpec {
    BucketSpec {
        endpoint: Some(endpoint.to_owned()),
        region: Some("us-east-1".into()),
        path_style: true,
        ..BucketSpec::from_url(url).unwrap()
    }
}

/// Creates bucket `name` on moto at `port` and opens it as a Job would: path style, a region,
/// moto's test credentials.
pub async fn moto_bucket(port: u16, name: &str) -> Bucket {
    open_bucket(&format!("http://127.0.0.1:{port}"), name).await
}

/// A MOCO JobConfig for bucket `bucket` on moto at `endpoint` (`http://HOST:PORT`), its Jobs
/// run as ServiceAccount `account`: moto's test credentials in their environment, path style,
/// a region, an `emptyDir` work volume.
pub fn moto_job_config(account: &str, bucket: &str, endpoint: &str) -> serde_json::Value {
    serde_json::json!({
        "serviceAccountName": account,
        "env": [
            {"name": "AWS_ACCESS_KEY_ID", "value": "test"},
            {"name": "AWS_SECRET_ACCESS_KEY", "value": "test"}
        ],
        "bucketConfig": {"bucketName": bucket, "endpointURL": endpoint,
                         "region": "us-east-1", "usePathStyle": true},
        "workVolume": {"emptyDir": {}}
    })
}

/// Creates bucket `name` at `endpoint` (`http://HOST:PORT`) and opens it as a Job would.
pub async fn open_bucket(endpoint: &str, name: &str) -> Bucket {
    create_bucket_at(endpoint, name).await;
    moto_spec(endpoint, &format!("s3://{name}"))
        .open(&moto_env())
        .unwrap()
}

/// A TCP proxy in front of an object store that goes down on cue: after `cut_after` bytes
/// from clients it drops every connection and stops listening (connections are refused)
/// until [`FlakyProxy::set_up`] brings it back on the same port: a store unreachable
/// mid-upload.
#[derive(Debug)]
pub struct FlakyProxy {
    /// Its port on 127.0.0.1.
    pub port: u16,
    up: tokio::sync::watch::Sender<bool>,
    /// Set once the cut happened.
    pub cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FlakyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FlakyProxy {
    /// Proxies to `127.0.0.1:target`.
    pub async fn start(target: u16, cut_after: u64) -> FlakyProxy {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        // Below the ephemeral range: it is bound again after a cut, when a client's source
        // port must not have taken it.
        let port = moco_adapters::mysqld::free_port().unwrap_or_else(|e| panic!("{e}"));
        let first = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let (up, mut up_rx) = tokio::sync::watch::channel(true);
        let cut = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (down_tx, _) = tokio::sync::broadcast::channel::<()>(4);
        let (c, up_tx) = (cut.clone(), up.clone());
        let task = tokio::spawn(async move {
            let mut listener = Some(first);
            loop {
                let Some(l) = &listener else {
                    // Down: wait to be brought back, then listen on the same port again.
                    if up_rx.wait_for(|u| *u).await.is_err() {
                        return;
                    }
                    listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                        .await
                        .ok();
                    continue;
                };
                let accepted = tokio::select! {
                    a = l.accept() => a,
                    _ = up_rx.wait_for(|u| !*u) => {
                        listener = None;
                        continue;
                    }
                };
                let Ok((client, _)) = accepted else {
                    return;
                };
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                    continue;
                };
                let (c, sent, down_tx, up_tx) =
                    (c.clone(), sent.clone(), down_tx.clone(), up_tx.clone());
                let mut down = down_tx.subscribe();
                tokio::spawn(async move {
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let upstream = async {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = match cr.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            let total = sent.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                            if total > cut_after && !c.swap(true, Ordering::SeqCst) {
                                let _ = up_tx.send(false);
                                let _ = down_tx.send(());
                                return;
                            }
                            if sw.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    };
                    let downstream = tokio::io::copy(&mut sr, &mut cw);
                    tokio::select! {
                        _ = upstream => {}
                        _ = downstream => {}
                        _ = down.recv() => {}
                    }
                });
            }
        });
        FlakyProxy {
            port,
            up,
            cut,
            task,
        }
    }

    /// Brings the store back (or takes it down).
    pub fn set_up(&self, up: bool) {
        let _ = self.up.send(up);
    }
}
