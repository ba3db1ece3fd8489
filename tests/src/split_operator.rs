//! `moco controller` whose own namespace (`POD_NAMESPACE`: the password Secrets, the
//! Certificates and the Lease, MOCO's "system namespace") is not the namespace it watches, as
//! in an install (`moco-system` and the users' namespaces). [`crate::operator_host`] runs it
//! with one namespace for both, where nothing could tell an object written to the wrong one.
//!
//! No cluster DNS stands in here (no `unshare`): for tests whose Pods never run mysqld.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moco_adapters::mysql::tls::Authority;

use crate::control_plane::ControlPlane;
use crate::local::{free_port_block, moco_bin};
use crate::operator_host::{install_crds, sample};

/// How long the operator may take to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// A running `moco controller` with a system namespace of its own.
pub struct SplitOperator {
    child: Option<Child>,
    /// `POD_NAMESPACE`.
    pub system: String,
    /// `--watch-namespace`.
    pub watched: String,
    metrics_addr: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for SplitOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitOperator")
            .field("pid", &self.child.as_ref().map(Child::id))
            .field("system", &self.system)
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

impl SplitOperator {
    /// Starts it with the admin kubeconfig and `args` besides; returns once `/metrics`
    /// answers and it leads (its Lease is in `system`).
    pub async fn start(cp: &ControlPlane, system: &str, watched: &str, args: &[&str]) -> Self {
        install_crds(cp).await;
        let dir = tempfile::Builder::new()
            .prefix("moco-split-operator")
            .tempdir()
            .unwrap();
        let certs = dir.path().join("webhook");
        std::fs::create_dir_all(&certs).unwrap();
        let ca = Authority::generate("test webhook CA").unwrap();
        let cert = ca.issue("moco-webhook", &["127.0.0.1".to_owned()]).unwrap();
        std::fs::write(certs.join("tls.crt"), &cert.cert_pem).unwrap();
        std::fs::write(certs.join("tls.key"), &cert.key_pem).unwrap();
        let base = free_port_block(3);
        let addr = |offset: u16| format!("127.0.0.1:{}", base + offset);
        let log = std::fs::File::create(dir.path().join("operator.log")).unwrap();
        let child = Command::new(moco_bin())
            .arg("controller")
            .args(["--watch-namespace", watched])
            .args(["--metrics-addr", &addr(0)])
            .args(["--health-probe-addr", &addr(1)])
            .args(["--webhook-addr", &addr(2)])
            .arg("--cert-dir")
            .arg(&certs)
            .arg("--grpc-cert-dir")
            .arg(dir.path().join("grpc"))
            .args(["--check-interval", "2s", "--zap-encoder", "console"])
            .args(args)
            .env("KUBECONFIG", cp.dir.join("kubeconfig"))
            .env("POD_NAMESPACE", system)
            .env("MOCO_LOG", "info,moco_operator=debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting moco controller: {e}"));
        let mut op = SplitOperator {
            child: Some(child),
            system: system.to_owned(),
            watched: watched.to_owned(),
            metrics_addr: addr(0).parse().unwrap(),
            dir,
        };
        let started = Instant::now();
        loop {
            if let Some(status) = op.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("moco controller exited with {status}:\n{}", op.log());
            }
            if op.metrics().await.is_some() && op.log().contains("leading: reconciling") {
                return op;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "moco controller did not lead within 60 s:\n{}",
                op.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("operator.log")).unwrap_or_default()
    }

    /// The text of `/metrics`, or `None` while it does not answer.
    pub async fn metrics(&self) -> Option<String> {
        match crate::pod::get(self.metrics_addr, "/metrics").await {
            Some((200, body)) => Some(body),
            _ => None,
        }
    }

    /// The value of the sample `name` with exactly `labels`, from `/metrics`.
    pub async fn sample(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        sample(&self.metrics().await?, name, labels)
    }

    /// Stops it: SIGTERM, then SIGKILL after the grace.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for SplitOperator {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!(
                "--- last lines of the operator's log ({}) ---",
                self.watched
            );
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}
