//! Probes and lifecycle hooks as the kubelet runs them: httpGet and tcpSocket from the host
//! to the Pod's address, exec inside the container; results counted against the probe's
//! thresholds.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::{
    ContainerPort, ExecAction, HTTPGetAction, LifecycleHandler, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The three kinds, which differ in what a result does and in where they start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Holds liveness and readiness back until it succeeds; failing kills the container.
    Startup,
    /// Failing kills the container.
    Liveness,
    /// Gates `ready`.
    Readiness,
}

/// A probe's timing, with the API's defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Before the first run, from the container's start.
    pub initial_delay: Duration,
    /// Between runs.
    pub period: Duration,
    /// For one run.
    pub timeout: Duration,
    /// Consecutive successes that make the result a success.
    pub success_threshold: u32,
    /// Consecutive failures that make the result a failure.
    pub failure_threshold: u32,
}

impl Timing {
    /// The probe's fields, defaulted as the API server does (period 10 s, timeout 1 s,
    /// thresholds 1 and 3).
    pub fn of(probe: &Probe) -> Self {
        let secs = |v: Option<i32>, default: u64| {
            Duration::from_secs(v.and_then(|v| u64::try_from(v).ok()).unwrap_or(default))
        };
        let count = |v: Option<i32>, default: u32| {
            v.and_then(|v| u32::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        Self {
            initial_delay: secs(probe.initial_delay_seconds, 0),
            period: secs(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: secs(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }
    }
}

/// A probe's result over consecutive runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracker {
    ok_in_a_row: u32,
    failed_in_a_row: u32,
    /// The current result: readiness and startup start failed, liveness starts succeeded.
    pub passing: bool,
}

impl Tracker {
    /// A new tracker for `kind`.
    pub fn new(kind: Kind) -> Self {
        Self {
            ok_in_a_row: 0,
            failed_in_a_row: 0,
            passing: kind == Kind::Liveness,
        }
    }

    /// Failed runs in a row.
    pub fn failed_in_a_row(&self) -> u32 {
        self.failed_in_a_row
    }

    /// Counts one run; returns whether the result changed.
    pub fn observe(&mut self, ok: bool, timing: &Timing) -> bool {
        if ok {
            self.ok_in_a_row += 1;
            self.failed_in_a_row = 0;
        } else {
            self.failed_in_a_row += 1;
            self.ok_in_a_row = 0;
        }
        let before = self.passing;
        if self.ok_in_a_row >= timing.success_threshold {
            self.passing = true;
        } else if self.failed_in_a_row >= timing.failure_threshold {
            self.passing = false;
        }
        before != self.passing
    }
}

/// Where a probe or hook acts.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The Pod's address (httpGet and tcpSocket default to it).
    pub pod_ip: Ipv4Addr,
    /// The container's ports, for named ports.
    pub ports: &'a [ContainerPort],
    /// A process of the container (exec enters its namespaces).
    pub pid: u32,
    /// The `pod-runner` binary.
    pub exe: &'a Path,
}

/// Runs a probe once: `Ok` or why it failed.
pub async fn run(probe: &Probe, target: &Target<'_>, timeout: Duration) -> Result<(), String> {
    if let Some(exec) = &probe.exec {
        return run_exec(exec, target, timeout).await;
    }
    if let Some(http) = &probe.http_get {
        return run_http(http, target, timeout).await;
    }
    if let Some(tcp) = &probe.tcp_socket {
        return run_tcp(tcp, target, timeout).await;
    }
    if probe.grpc.is_some() {
        return Err("gRPC probes are not run by the Pod runner".into());
    }
    Err("the probe has no handler".into())
}

/// Runs a lifecycle hook (`preStop`, `postStart`) once.
pub async fn run_hook(
    hook: &LifecycleHandler,
    target: &Target<'_>,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(exec) = &hook.exec {
        return run_exec(exec, target, timeout).await;
    }
    if let Some(http) = &hook.http_get {
        return run_http(http, target, timeout).await;
    }
    if let Some(tcp) = &hook.tcp_socket {
        return run_tcp(tcp, target, timeout).await;
    }
    if let Some(sleep) = &hook.sleep {
        let secs = u64::try_from(sleep.seconds).unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(secs).min(timeout)).await;
        return Ok(());
    }
    Err("the hook has no handler".into())
}

async fn run_exec(exec: &ExecAction, target: &Target<'_>, timeout: Duration) -> Result<(), String> {
    let argv = exec.command.clone().unwrap_or_default();
    if argv.is_empty() {
        return Err("exec with no command".into());
    }
    let out = crate::container::exec(target.exe, target.pid, &argv, timeout)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.output);
    let text = text.trim();
    match out.code {
        Some(0) => Ok(()),
        _ if out.timed_out => Err(format!("command timed out after {timeout:?}")),
        Some(code) if text.is_empty() => Err(format!("command exited {code}")),
        Some(code) => Err(format!("command exited {code}: {}", tail(text))),
        None => Err(format!("command killed by a signal {}", tail(text))),
    }
}

fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(400);
    let start = (start..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    &s[start..]
}

/// The port a probe names: a number, or a container port's name.
pub fn resolve_port(port: &IntOrString, ports: &[ContainerPort]) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("port {n} is out of range")),
        IntOrString::String(name) => {
            if let Ok(n) = name.parse::<u16>() {
                return Ok(n);
            }
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| format!("the container has no port named {name:?}"))
        }
    }
}

fn host_of(host: Option<&String>, target: &Target<'_>) -> Result<IpAddr, String> {
    match host {
        None => Ok(IpAddr::V4(target.pod_ip)),
        Some(h) if h.is_empty() => Ok(IpAddr::V4(target.pod_ip)),
        Some(h) => h
            .parse()
            .map_err(|_| format!("host {h:?}: only addresses are probed here (no DNS)")),
    }
}

async fn run_tcp(
    tcp: &TCPSocketAction,
    target: &Target<'_>,
    timeout: Duration,
) -> Result<(), String> {
    let addr = SocketAddr::new(
        host_of(tcp.host.as_ref(), target)?,
        resolve_port(&tcp.port, target.ports)?,
    );
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("dial tcp {addr}: {e}")),
        Err(_) => Err(format!("dial tcp {addr}: timed out after {timeout:?}")),
    }
}

async fn run_http(
    http: &HTTPGetAction,
    target: &Target<'_>,
    timeout: Duration,
) -> Result<(), String> {
    let addr = SocketAddr::new(
        host_of(http.host.as_ref(), target)?,
        resolve_port(&http.port, target.ports)?,
    );
    if http
        .scheme
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("https"))
    {
        return Err("HTTPS probes are not run by the Pod runner".into());
    }
    let path = http
        .path
        .clone()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/".into());
    let attempt = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("dial tcp {addr}: {e}"))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| format!("GET http://{addr}{path}: {e}"))?;
        tokio::spawn(conn);
        let mut req = http::Request::get(path.as_str())
            .header(http::header::HOST, addr.to_string())
            .header(http::header::USER_AGENT, "kube-probe/1.36");
        for h in http.http_headers.iter().flatten() {
            req = req.header(h.name.as_str(), h.value.as_str());
        }
        let req = req
            .body(Empty::<bytes::Bytes>::new())
            .map_err(|e| format!("GET {path}: {e}"))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("GET http://{addr}{path}: {e}"))?;
        let status = resp.status();
        // Read (and drop) the body so that the server sees a complete exchange.
        let _ = resp.into_body().collect().await;
        if (200..400).contains(&status.as_u16()) {
            Ok(())
        } else {
            Err(format!(
                "HTTP probe failed with statuscode: {}",
                status.as_u16()
            ))
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "GET http://{addr}{path}: timed out after {timeout:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(success: u32, failure: u32) -> Timing {
        Timing {
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    #[test]
    fn results_flip_only_after_their_thresholds() {
        let t = timing(2, 3);
        let mut r = Tracker::new(Kind::Readiness);
        assert!(!r.passing);
        assert!(!r.observe(true, &t));
        assert!(r.observe(true, &t) && r.passing);
        assert!(!r.observe(false, &t) && !r.observe(false, &t) && r.passing);
        assert!(!r.observe(true, &t)); // a success resets the failures
        assert!(!r.observe(false, &t) && !r.observe(false, &t));
        assert!(r.observe(false, &t) && !r.passing);
        let mut l = Tracker::new(Kind::Liveness);
        assert!(l.passing);
        let mut s = Tracker::new(Kind::Startup);
        assert!(!s.passing);
        assert!(!l.observe(true, &t));
        assert!(!s.observe(false, &t));
    }

    #[test]
    fn defaults_are_the_api_servers() {
        let t = Timing::of(&Probe::default());
        assert_eq!(
            t,
            Timing {
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
            }
        );
    }

    #[test]
    fn thresholds_below_one_take_the_defaults_and_others_are_kept() {
        let zero = Timing::of(&Probe {
            success_threshold: Some(0),
            failure_threshold: Some(0),
            ..Probe::default()
        });
        assert_eq!((zero.success_threshold, zero.failure_threshold), (1, 3));
        let set = Timing::of(&Probe {
            success_threshold: Some(2),
            failure_threshold: Some(1),
            ..Probe::default()
        });
        assert_eq!((set.success_threshold, set.failure_threshold), (2, 1));
    }

    #[test]
    fn named_ports_resolve_and_unknown_ones_say_so() {
        let ports = vec![ContainerPort {
            name: Some("health".into()),
            container_port: 9081,
            ..ContainerPort::default()
        }];
        assert_eq!(
            resolve_port(&IntOrString::String("health".into()), &ports),
            Ok(9081)
        );
        assert_eq!(resolve_port(&IntOrString::Int(80), &ports), Ok(80));
        assert!(
            resolve_port(&IntOrString::String("nope".into()), &ports)
                .unwrap_err()
                .contains("nope")
        );
    }

    #[tokio::test]
    async fn http_and_tcp_probes_see_the_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = vec![0u8; 4096];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    let code = if req.starts_with("GET /ok ") {
                        "200 OK"
                    } else {
                        "503 Service Unavailable"
                    };
                    let _ = s
                        .write_all(
                            format!("HTTP/1.1 {code}\r\ncontent-length: 0\r\n\r\n").as_bytes(),
                        )
                        .await;
                });
            }
        });
        let exe = Path::new("/nonexistent");
        let target = Target {
            pod_ip: Ipv4Addr::LOCALHOST,
            ports: &[],
            pid: 0,
            exe,
        };
        let get = |path: &str| Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::Int(i32::from(port)),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        assert_eq!(
            run(&get("/ok"), &target, Duration::from_secs(2)).await,
            Ok(())
        );
        let e = run(&get("/bad"), &target, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(e.contains("503"), "{e}");
        let tcp = |port: i32| Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(port),
                ..TCPSocketAction::default()
            }),
            ..Probe::default()
        };
        assert_eq!(
            run(&tcp(i32::from(port)), &target, Duration::from_secs(2)).await,
            Ok(())
        );
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(
            run(&tcp(i32::from(closed)), &target, Duration::from_secs(2))
                .await
                .is_err()
        );
    }
}
