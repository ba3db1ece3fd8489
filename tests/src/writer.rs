//! A client of a MySQLCluster on the real control plane that goes where a Service sends it.
//!
//! There is no kube-proxy on the test control plane (the Service range leads nowhere), so
//! [`ServiceRoute`] plays its part: it reads the Service's EndpointSlices through the API
//! server, as kube-proxy does, and offers the ready endpoints; Pod addresses are reachable
//! from this machine over the control plane's bridge. [`Writer`] inserts ids 1, 2, … into
//! `moco_test.t` at the address the route names and records the ids whose INSERT returned OK
//! (acknowledged), with when. The route's history is kept, so that a drill can say when the
//! Service started naming the new primary after a fault, and that it never named two.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use mysql_async::prelude::Queryable;
use tokio::sync::watch;

use crate::local::connect;

/// How often the EndpointSlices are read (kube-proxy watches; a poll this short is as good
/// for the times measured here, which are seconds).
const POLL: Duration = Duration::from_millis(100);
/// How long one INSERT may take before the writer gives up on its connection.
const INSERT_LIMIT: Duration = Duration::from_secs(5);
/// How long a connection attempt may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(2);

/// One ready endpoint of a Service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// The Pod's address and the Service's `mysql` port on it.
    pub addr: SocketAddr,
    /// The Pod the endpoint names (`targetRef`).
    pub pod: Option<String>,
}

/// When each set of ready endpoints was seen.
type History = Arc<Mutex<Vec<(Instant, Vec<Endpoint>)>>>;

/// The ready endpoints of a Service, as kube-proxy would route to them, followed through the
/// API server.
#[derive(Debug)]
pub struct ServiceRoute {
    /// The Service.
    pub service: String,
    rx: watch::Receiver<Vec<Endpoint>>,
    history: History,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ServiceRoute {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The ready endpoints of `slices`: addresses whose `ready` condition is not false (unset
/// means ready, as the API says), on the port named `port_name` (else the first port).
pub fn ready_endpoints(slices: &[EndpointSlice], port_name: &str) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for slice in slices {
        let ports = slice.ports.clone().unwrap_or_default();
        let port = ports
            .iter()
            .find(|p| p.name.as_deref() == Some(port_name))
            .or_else(|| ports.first())
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok());
        let Some(port) = port else { continue };
        for ep in &slice.endpoints {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            if !ready {
                continue;
            }
            for a in &ep.addresses {
                if let Ok(ip) = a.parse::<IpAddr>() {
                    out.push(Endpoint {
                        addr: SocketAddr::new(ip, port),
                        pod: ep.target_ref.as_ref().and_then(|r| r.name.clone()),
                    });
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

impl ServiceRoute {
    /// Follows the EndpointSlices of Service `namespace/service` (label
    /// `kubernetes.io/service-name`), port `mysql`.
    pub fn follow(client: &kube::Client, namespace: &str, service: &str) -> ServiceRoute {
        let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
        let selector = format!("kubernetes.io/service-name={service}");
        let (tx, rx) = watch::channel(Vec::new());
        let history = Arc::new(Mutex::new(Vec::new()));
        let h = Arc::clone(&history);
        let task = tokio::spawn(async move {
            let params = ListParams::default().labels(&selector);
            loop {
                if let Ok(list) = api.list(&params).await {
                    let now = ready_endpoints(&list.items, "mysql");
                    if *tx.borrow() != now {
                        h.lock().unwrap().push((Instant::now(), now.clone()));
                        let _ = tx.send(now);
                    }
                }
                tokio::time::sleep(POLL).await;
            }
        });
        ServiceRoute {
            service: service.to_owned(),
            rx,
            history,
            task,
        }
    }

    /// The ready endpoints now.
    pub fn current(&self) -> Vec<Endpoint> {
        self.rx.borrow().clone()
    }

    /// The one ready endpoint, if exactly one is ready.
    pub fn single(&self) -> Option<Endpoint> {
        let now = self.current();
        (now.len() == 1).then(|| now[0].clone())
    }

    /// A receiver of every change.
    pub fn subscribe(&self) -> watch::Receiver<Vec<Endpoint>> {
        self.rx.clone()
    }

    /// Every change so far, with when it was seen.
    pub fn history(&self) -> Vec<(Instant, Vec<Endpoint>)> {
        self.history.lock().unwrap().clone()
    }

    /// The most endpoints ever ready at once.
    pub fn most_at_once(&self) -> usize {
        self.history()
            .iter()
            .map(|(_, e)| e.len())
            .max()
            .unwrap_or(0)
    }

    /// When the route first named exactly `pod` alone at or after `since`.
    pub fn first_alone_since(&self, pod: &str, since: Instant) -> Option<Instant> {
        let history = self.history();
        // The state at `since` counts when it already names the Pod.
        let before = history.iter().rev().find(|(t, _)| *t <= since);
        if let Some((_, e)) = before
            && names_alone(e, pod)
        {
            return Some(since);
        }
        history
            .iter()
            .find(|(t, e)| *t > since && names_alone(e, pod))
            .map(|(t, _)| *t)
    }

    /// Waits until `pred` holds of the ready endpoints; panics naming `what` after `limit`.
    pub async fn wait(
        &self,
        what: &str,
        limit: Duration,
        pred: impl Fn(&[Endpoint]) -> bool,
    ) -> Vec<Endpoint> {
        let mut rx = self.subscribe();
        let started = Instant::now();
        let wait = async {
            loop {
                let now = rx.borrow_and_update().clone();
                if pred(&now) {
                    return now;
                }
                if rx.changed().await.is_err() {
                    panic!("the route of {} stopped", self.service);
                }
            }
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(now) => {
                println!(
                    "{}: {what}: after {:.1} s",
                    self.service,
                    started.elapsed().as_secs_f64()
                );
                now
            }
            Err(_) => panic!(
                "{}: {what}: not within {limit:?}; ready endpoints: {:?}",
                self.service,
                self.current()
            ),
        }
    }
}

fn names_alone(endpoints: &[Endpoint], pod: &str) -> bool {
    endpoints.len() == 1 && endpoints[0].pod.as_deref() == Some(pod)
}

/// Connection options for `user` at `addr` over TCP.
pub fn opts_at(addr: SocketAddr, user: &str, password: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false)
        .into()
}

/// Whether `user` logs in at `addr` with `password`: `false` only for error 1045 (refused),
/// a panic for anything else (an instance that does not answer proves nothing).
pub async fn logs_in(addr: SocketAddr, user: &str, password: &str) -> bool {
    let attempt = mysql_async::Conn::new(opts_at(addr, user, password));
    match tokio::time::timeout(Duration::from_secs(10), attempt).await {
        Ok(Ok(c)) => {
            let _ = c.disconnect().await;
            true
        }
        Ok(Err(mysql_async::Error::Server(e))) if e.code == 1045 => false,
        other => panic!("logging in as {user} at {addr}: {other:?}"),
    }
}

/// One acknowledged write.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The id inserted.
    pub id: u64,
    /// When the INSERT returned OK.
    pub at: Instant,
    /// The endpoint that acknowledged it.
    pub by: SocketAddr,
}

/// The time between two consecutive acknowledgements: while it lasts, no write succeeds.
#[derive(Debug, Clone)]
pub struct Pause {
    /// The last acknowledgement before it.
    pub before: Ack,
    /// The acknowledgement that ends it.
    pub after: Ack,
}

impl Pause {
    /// How long it lasted.
    pub fn length(&self) -> Duration {
        self.after.at.duration_since(self.before.at)
    }
}

/// What a [`Writer`] saw.
#[derive(Debug, Clone, Default)]
pub struct WriterLog {
    /// Acknowledged writes, in order.
    pub acks: Vec<Ack>,
    /// Failed attempts: refused connections, errors, timeouts, writes given up when the
    /// route changed under them (their outcome is unknown; they are not acknowledged).
    pub failures: u64,
    /// The first error messages.
    pub errors: Vec<String>,
}

impl WriterLog {
    /// The acknowledged ids.
    pub fn ids(&self) -> Vec<u64> {
        self.acks.iter().map(|a| a.id).collect()
    }

    /// The first acknowledgement after `since`.
    pub fn first_ack_after(&self, since: Instant) -> Option<&Ack> {
        self.acks.iter().find(|a| a.at > since)
    }

    /// The longest time between two consecutive acknowledgements.
    pub fn longest_pause(&self) -> Duration {
        self.pauses().map(|p| p.length()).max().unwrap_or_default()
    }

    /// The longest pause between two consecutive acknowledgements that overlaps
    /// `since..=until`, the one under way at `since` included (a switchover's pause begins
    /// with the old primary's last acknowledgement, before the switchover is asked for);
    /// `None` without an acknowledgement on each side.
    pub fn longest_pause_around(&self, since: Instant, until: Instant) -> Option<Pause> {
        self.pauses()
            .filter(|p| p.after.at >= since && p.before.at <= until)
            .max_by_key(Pause::length)
    }

    /// Every pause between two consecutive acknowledgements, in order.
    fn pauses(&self) -> impl Iterator<Item = Pause> + '_ {
        self.acks.windows(2).map(|w| Pause {
            before: w[0].clone(),
            after: w[1].clone(),
        })
    }

    fn error(&mut self, e: String) {
        self.failures += 1;
        if self.errors.len() < 30 {
            self.errors.push(e);
        }
    }
}

/// Inserts one row at a time (autocommit) where a [`ServiceRoute`] points, as
/// `moco-writable`; a new connection whenever the route names another endpoint (as a client
/// of the Service reconnecting), and after any error.
#[derive(Debug)]
pub struct Writer {
    stop: watch::Sender<bool>,
    log: Arc<Mutex<WriterLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    /// Starts writing ids from 1 where `route` points, as `user` with `password`.
    pub fn start(route: &ServiceRoute, user: &str, password: &str) -> Writer {
        let (stop, mut stop_rx) = watch::channel(false);
        let log = Arc::new(Mutex::new(WriterLog::default()));
        let mut route_rx = route.subscribe();
        let (user, password, l) = (user.to_owned(), password.to_owned(), Arc::clone(&log));
        let task = tokio::spawn(async move {
            let mut next = 1u64;
            let mut conn: Option<(SocketAddr, mysql_async::Conn)> = None;
            let pause = Duration::from_millis(20);
            while !*stop_rx.borrow() {
                let target = {
                    let now = route_rx.borrow_and_update();
                    // kube-proxy spreads connections over the ready endpoints; the first
                    // will do (a primary Service naming two is checked by the drills).
                    now.first().map(|e| e.addr)
                };
                let Some(target) = target else {
                    conn = None;
                    tokio::select! {
                        _ = route_rx.changed() => {}
                        _ = stop_rx.changed() => {}
                        () = tokio::time::sleep(pause) => {}
                    }
                    continue;
                };
                if conn.as_ref().is_none_or(|(a, _)| *a != target) {
                    conn = None;
                    match connect(&opts_at(target, &user, &password), CONNECT_LIMIT).await {
                        Ok(c) => conn = Some((target, c)),
                        Err(e) => {
                            l.lock().unwrap().error(format!("{target}: {e}"));
                            tokio::time::sleep(pause).await;
                            continue;
                        }
                    }
                }
                let Some((addr, c)) = conn.as_mut() else {
                    continue;
                };
                let addr = *addr;
                let id = next;
                next += 1;
                let outcome = {
                    let insert = tokio::time::timeout(
                        INSERT_LIMIT,
                        c.exec_drop("INSERT INTO moco_test.t (id) VALUES (?)", (id,)),
                    );
                    tokio::pin!(insert);
                    loop {
                        tokio::select! {
                            r = &mut insert => break Some(r),
                            // The Service no longer routes to the endpoint: a client whose
                            // connection is cut by the change; the write's fate is unknown. An
                            // update that still names it (another endpoint's readiness, the
                            // same list again) leaves the connection alone, as kube-proxy does.
                            changed = route_rx.changed() => {
                                let still_routed = route_rx
                                    .borrow_and_update()
                                    .iter()
                                    .any(|e| e.addr == addr);
                                if changed.is_err() || !still_routed {
                                    break None;
                                }
                            }
                        }
                    }
                };
                match outcome {
                    Some(Ok(Ok(()))) => l.lock().unwrap().acks.push(Ack {
                        id,
                        at: Instant::now(),
                        by: addr,
                    }),
                    Some(Ok(Err(e))) => {
                        l.lock().unwrap().error(format!("{addr}: insert {id}: {e}"));
                        conn = None;
                        tokio::time::sleep(pause).await;
                    }
                    Some(Err(_)) => {
                        l.lock()
                            .unwrap()
                            .error(format!("{addr}: insert {id} timed out"));
                        conn = None;
                    }
                    None => {
                        l.lock()
                            .unwrap()
                            .error(format!("{addr}: insert {id} abandoned: the route changed"));
                        conn = None;
                    }
                }
            }
        });
        Writer { stop, log, task }
    }

    /// What it saw so far.
    pub fn log(&self) -> WriterLog {
        self.log.lock().unwrap().clone()
    }

    /// How many writes were acknowledged so far.
    pub fn acked(&self) -> usize {
        self.log.lock().unwrap().acks.len()
    }

    /// Waits until more than `n` writes are acknowledged; panics after `limit`.
    pub async fn wait_acked(&self, n: usize, limit: Duration) {
        let started = Instant::now();
        while self.acked() <= n {
            assert!(
                started.elapsed() < limit,
                "no write acknowledged beyond {n} within {limit:?}; last errors: {:?}",
                last(&self.log().errors, 5)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops and returns what it saw.
    pub async fn finish(self) -> WriterLog {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        self.log.lock().unwrap().clone()
    }
}

fn last(v: &[String], n: usize) -> Vec<String> {
    v[v.len().saturating_sub(n)..].to_vec()
}

/// Creates `moco_test.t` at `addr` as `moco-writable`.
pub async fn create_table(addr: SocketAddr, password: &str) -> Result<(), String> {
    crate::local::create_table_with(&opts_at(addr, "moco-writable", password)).await
}

/// The ids stored in `moco_test.t` at `addr` (as `moco-admin`), or why not.
pub async fn stored_ids(addr: SocketAddr, password: &str) -> Result<Vec<u64>, String> {
    let mut c = connect(
        &opts_at(addr, "moco-admin", password),
        Duration::from_secs(5),
    )
    .await?;
    let ids: Vec<u64> = c
        .query("SELECT id FROM moco_test.t ORDER BY id")
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    Ok(ids)
}

/// The acknowledged ids missing from `stored`.
pub fn missing(acked: &[u64], stored: &[u64]) -> Vec<u64> {
    let stored: std::collections::BTreeSet<u64> = stored.iter().copied().collect();
    acked
        .iter()
        .copied()
        .filter(|i| !stored.contains(i))
        .collect()
}

/// Counts acknowledgements per endpoint, for reports.
pub fn acks_by_endpoint(log: &WriterLog) -> BTreeMap<SocketAddr, usize> {
    let mut m = BTreeMap::new();
    for a in &log.acks {
        *m.entry(a.by).or_insert(0) += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s"},
            "addressType": "IPv4",
            "ports": [{"name": "mysqlx", "port": 33060}, {"name": "mysql", "port": 3306}],
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn only_ready_endpoints_route_on_the_mysql_port() {
        let s = slice(serde_json::json!([
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "a"}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false}, "targetRef": {"kind": "Pod", "name": "b"}},
            {"addresses": ["10.0.0.3"], "targetRef": {"kind": "Pod", "name": "c"}},
        ]));
        let got = ready_endpoints(&[s], "mysql");
        let want: Vec<(String, Option<String>)> = vec![
            ("10.0.0.1:3306".into(), Some("a".into())),
            ("10.0.0.3:3306".into(), Some("c".into())),
        ];
        let got: Vec<(String, Option<String>)> = got
            .into_iter()
            .map(|e| (e.addr.to_string(), e.pod))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_pause_around_a_moment_includes_the_one_under_way() {
        let t = Instant::now();
        let by: SocketAddr = "10.0.0.1:3306".parse().unwrap();
        let at = |ms: u64| t + Duration::from_millis(ms);
        let acks = [0, 100, 1_100, 1_200, 4_200, 4_300, 9_300]
            .iter()
            .enumerate()
            .map(|(i, ms)| Ack {
                id: i as u64 + 1,
                at: at(*ms),
                by,
            })
            .collect();
        let log = WriterLog {
            acks,
            ..WriterLog::default()
        };
        assert_eq!(log.longest_pause(), Duration::from_secs(5));
        // Under way at 150 ms (100 -> 1,100) and within: 1,200 -> 4,200 is the longest.
        let p = log.longest_pause_around(at(150), at(4_250)).unwrap();
        assert_eq!(
            (p.before.id, p.after.id, p.length()),
            (4, 5, Duration::from_secs(3))
        );
        // A window inside one pause: that pause.
        let p = log.longest_pause_around(at(2_000), at(3_000)).unwrap();
        assert_eq!((p.before.id, p.after.id), (4, 5));
        // Before the first acknowledgement or after the last: none.
        assert!(log.longest_pause_around(at(9_400), at(9_500)).is_none());
    }

    #[test]
    fn missing_lists_acknowledged_ids_not_stored() {
        assert_eq!(missing(&[1, 2, 3, 5], &[1, 3, 4]), vec![2, 5]);
        assert!(missing(&[], &[1]).is_empty());
    }
}
