//! The two role-following TCP endpoints of a local cluster, like MOCO's `moco-<name>-primary`
//! and `moco-<name>-replica` Services.
//!
//! * The primary endpoint forwards each new connection to the instance labelled `primary`.
//! * The replica endpoint forwards each new connection to the instances labelled `replica`,
//!   round-robin.
//! * A connection is closed (both sides) as soon as its backend no longer carries the role its
//!   endpoint selects: clients of a demoted primary are cut off, as MOCO's KillConnections
//!   and the Service's endpoint removal do together.
//! * While an endpoint has no backend, a new connection waits up to
//!   [`ProxyConfig::connect_wait`] for one (a switchover takes a fraction of a second), then is
//!   closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::error::LocalError;

/// An instance an endpoint can forward to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backend {
    /// The instance ordinal.
    pub index: u32,
    /// Its MySQL address.
    pub addr: SocketAddr,
}

/// Which instances currently carry which role label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// The instance labelled `primary` (at most one is used).
    pub primary: Option<Backend>,
    /// The instances labelled `replica`.
    pub replicas: Vec<Backend>,
}

/// The two endpoint kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndpointKind {
    /// Follows the `primary` label.
    Primary,
    /// Follows the `replica` labels.
    Replica,
}

impl EndpointKind {
    fn name(self) -> &'static str {
        match self {
            EndpointKind::Primary => "primary",
            EndpointKind::Replica => "replica",
        }
    }
}

impl Routes {
    /// True when `index` carries the role `kind` selects.
    pub fn routes_to(&self, kind: EndpointKind, index: u32) -> bool {
        match kind {
            EndpointKind::Primary => self.primary.is_some_and(|b| b.index == index),
            EndpointKind::Replica => self.replicas.iter().any(|b| b.index == index),
        }
    }
}

/// Tuning of the endpoints.
#[derive(Clone, Copy, Debug)]
pub struct ProxyConfig {
    /// How long a new connection waits for a backend to appear.
    pub connect_wait: Duration,
    /// Limit for connecting to a backend.
    pub connect_timeout: Duration,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            connect_wait: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
        }
    }
}

/// Counters of one endpoint.
#[derive(Debug, Default)]
pub struct EndpointStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections currently forwarded.
    pub active: AtomicU64,
    /// Connections closed because their backend lost the role.
    pub cut_by_role_change: AtomicU64,
    /// Connections closed because no backend was available or reachable.
    pub refused: AtomicU64,
}

/// A snapshot of [`EndpointStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointCounters {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections currently forwarded.
    pub active: u64,
    /// Connections closed because their backend lost the role.
    pub cut_by_role_change: u64,
    /// Connections closed because no backend was available or reachable.
    pub refused: u64,
}

impl EndpointStats {
    fn snapshot(&self) -> EndpointCounters {
        EndpointCounters {
            accepted: self.accepted.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
            cut_by_role_change: self.cut_by_role_change.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

/// The running endpoints. Dropping it (or [`Endpoints::shutdown`]) stops the listeners and
/// closes every forwarded connection.
#[derive(Debug)]
pub struct Endpoints {
    primary_addr: SocketAddr,
    replica_addr: SocketAddr,
    routes: watch::Sender<Routes>,
    shutdown: watch::Sender<bool>,
    stats: [Arc<EndpointStats>; 2],
    tasks: Vec<JoinHandle<()>>,
}

impl Endpoints {
    /// Binds both listeners and starts accepting. Fails with [`LocalError::PortInUse`] when a
    /// port is taken.
    pub async fn bind(
        primary: SocketAddr,
        replica: SocketAddr,
        config: ProxyConfig,
    ) -> Result<Endpoints, LocalError> {
        let bind = |addr: SocketAddr, kind: EndpointKind| async move {
            TcpListener::bind(addr).await.map_err(|e| {
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    LocalError::PortInUse {
                        port: addr.port(),
                        what: format!("{} endpoint", kind.name()),
                    }
                } else {
                    LocalError::other(
                        format!("{} endpoint {addr}", kind.name()),
                        format!("bind: {e}"),
                    )
                }
            })
        };
        let primary_listener = bind(primary, EndpointKind::Primary).await?;
        let replica_listener = bind(replica, EndpointKind::Replica).await?;
        let local = |l: &TcpListener, addr: SocketAddr| l.local_addr().unwrap_or(addr);
        let primary_addr = local(&primary_listener, primary);
        let replica_addr = local(&replica_listener, replica);
        let (routes, routes_rx) = watch::channel(Routes::default());
        let (shutdown, shutdown_rx) = watch::channel(false);
        let stats = [
            Arc::new(EndpointStats::default()),
            Arc::new(EndpointStats::default()),
        ];
        let tasks = vec![
            tokio::spawn(accept_loop(
                primary_listener,
                EndpointKind::Primary,
                routes_rx.clone(),
                shutdown_rx.clone(),
                config,
                Arc::clone(&stats[0]),
            )),
            tokio::spawn(accept_loop(
                replica_listener,
                EndpointKind::Replica,
                routes_rx,
                shutdown_rx,
                config,
                Arc::clone(&stats[1]),
            )),
        ];
        Ok(Endpoints {
            primary_addr,
            replica_addr,
            routes,
            shutdown,
            stats,
            tasks,
        })
    }

    /// The primary endpoint's address.
    pub fn primary_addr(&self) -> SocketAddr {
        self.primary_addr
    }

    /// The replica endpoint's address.
    pub fn replica_addr(&self) -> SocketAddr {
        self.replica_addr
    }

    /// Replaces the routing table; connections whose backend lost its role are closed.
    pub fn set_routes(&self, routes: Routes) {
        self.routes.send_if_modified(|current| {
            if *current == routes {
                false
            } else {
                *current = routes;
                true
            }
        });
    }

    /// The routing table in force.
    pub fn routes(&self) -> Routes {
        self.routes.borrow().clone()
    }

    /// Counters of an endpoint.
    pub fn counters(&self, kind: EndpointKind) -> EndpointCounters {
        match kind {
            EndpointKind::Primary => self.stats[0].snapshot(),
            EndpointKind::Replica => self.stats[1].snapshot(),
        }
    }

    /// Stops accepting and closes every forwarded connection.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for Endpoints {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    kind: EndpointKind,
    routes: watch::Receiver<Routes>,
    mut shutdown: watch::Receiver<bool>,
    config: ProxyConfig,
    stats: Arc<EndpointStats>,
) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => {
                let (client, peer) = match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        tracing::warn!(endpoint = kind.name(), error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                stats.accepted.fetch_add(1, Ordering::Relaxed);
                connections.retain(|c| !c.is_finished());
                connections.push(tokio::spawn(forward(
                    client,
                    peer,
                    kind,
                    routes.clone(),
                    shutdown.clone(),
                    config,
                    Arc::clone(&next),
                    Arc::clone(&stats),
                )));
            }
        }
    }
    for c in connections {
        c.abort();
    }
}

fn pick(routes: &Routes, kind: EndpointKind, next: &AtomicUsize) -> Option<Backend> {
    match kind {
        EndpointKind::Primary => routes.primary,
        EndpointKind::Replica => {
            if routes.replicas.is_empty() {
                None
            } else {
                let n = next.fetch_add(1, Ordering::Relaxed);
                routes.replicas.get(n % routes.replicas.len()).copied()
            }
        }
    }
}

/// Decrements `active` when a forwarded connection ends, however it ends.
struct ActiveGuard(Arc<EndpointStats>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

#[allow(clippy::too_many_arguments)]
async fn forward(
    mut client: TcpStream,
    peer: SocketAddr,
    kind: EndpointKind,
    mut routes: watch::Receiver<Routes>,
    mut shutdown: watch::Receiver<bool>,
    config: ProxyConfig,
    next: Arc<AtomicUsize>,
    stats: Arc<EndpointStats>,
) {
    // Wait for a backend.
    let deadline = tokio::time::Instant::now() + config.connect_wait;
    let backend = loop {
        let picked = pick(&routes.borrow_and_update(), kind, &next);
        if let Some(b) = picked {
            break b;
        }
        tokio::select! {
            changed = routes.changed() => {
                if changed.is_err() {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                tracing::debug!(endpoint = kind.name(), %peer, "no backend: closing");
                stats.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            _ = shutdown.changed() => return,
        }
    };
    let mut upstream = match tokio::time::timeout(
        config.connect_timeout,
        TcpStream::connect(backend.addr),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(endpoint = kind.name(), backend = backend.index, error = %e, "backend refused");
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(_) => {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    stats.active.fetch_add(1, Ordering::Relaxed);
    let _guard = ActiveGuard(Arc::clone(&stats));
    // The role may have moved while connecting.
    if !routes.borrow_and_update().routes_to(kind, backend.index) {
        stats.cut_by_role_change.fetch_add(1, Ordering::Relaxed);
        return;
    }
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        _ = lost_role(&mut routes, kind, backend.index) => {
            tracing::info!(endpoint = kind.name(), backend = backend.index, %peer,
                "closing client connection: backend lost its role");
            stats.cut_by_role_change.fetch_add(1, Ordering::Relaxed);
        }
        _ = shutdown.changed() => {}
    }
    // Dropping both streams closes them.
}

async fn lost_role(routes: &mut watch::Receiver<Routes>, kind: EndpointKind, index: u32) {
    loop {
        if routes.changed().await.is_err() {
            // The endpoints are going away; shutdown handles that.
            std::future::pending::<()>().await;
        }
        if !routes.borrow_and_update().routes_to(kind, index) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A backend that greets with its name and then echoes.
    async fn named_server(name: &'static str) -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let task = tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    s.write_all(name.as_bytes()).await.unwrap();
                    let mut buf = [0u8; 64];
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                });
            }
        });
        (addr, task)
    }

    async fn greeting(s: &mut TcpStream) -> String {
        let mut buf = [0u8; 1];
        let n = s.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn any() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    /// Backends `a` and `b` (each greets with its name) and endpoints with no routes yet.
    async fn two_backends() -> (SocketAddr, SocketAddr, Endpoints, impl Sized) {
        let (a, ta) = named_server("a").await;
        let (b, tb) = named_server("b").await;
        let ep = Endpoints::bind(any(), any(), ProxyConfig::default())
            .await
            .unwrap();
        (a, b, ep, (ta, tb))
    }

    #[tokio::test]
    async fn primary_follows_label_and_cuts_demoted_clients() {
        let (a, b, ep, _servers) = two_backends().await;
        ep.set_routes(Routes {
            primary: Some(Backend { index: 0, addr: a }),
            replicas: vec![Backend { index: 1, addr: b }],
        });
        let mut c1 = TcpStream::connect(ep.primary_addr()).await.unwrap();
        assert_eq!(greeting(&mut c1).await, "a");
        c1.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 1];
        c1.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"x");

        // Switch roles: the open client of the old primary gets closed.
        ep.set_routes(Routes {
            primary: Some(Backend { index: 1, addr: b }),
            replicas: vec![Backend { index: 0, addr: a }],
        });
        let n = tokio::time::timeout(Duration::from_secs(5), c1.read(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(n, 0, "connection to the demoted primary must be closed");
        let mut c2 = TcpStream::connect(ep.primary_addr()).await.unwrap();
        assert_eq!(greeting(&mut c2).await, "b");
        let counters = ep.counters(EndpointKind::Primary);
        assert_eq!(counters.cut_by_role_change, 1);
        assert_eq!(counters.accepted, 2);
        ep.shutdown().await;
    }

    #[tokio::test]
    async fn replica_round_robin() {
        let (a, b, ep, _servers) = two_backends().await;
        ep.set_routes(Routes {
            primary: None,
            replicas: vec![Backend { index: 1, addr: a }, Backend { index: 2, addr: b }],
        });
        let mut seen = Vec::new();
        for _ in 0..4 {
            let mut c = TcpStream::connect(ep.replica_addr()).await.unwrap();
            seen.push(greeting(&mut c).await);
        }
        seen.sort();
        assert_eq!(seen, vec!["a", "a", "b", "b"]);
    }

    #[tokio::test]
    async fn waits_for_a_backend_then_gives_up() {
        let (a, _ta) = named_server("a").await;
        let config = ProxyConfig {
            connect_wait: Duration::from_millis(300),
            connect_timeout: Duration::from_secs(1),
        };
        let ep = Endpoints::bind(any(), any(), config).await.unwrap();
        // No backend at all: closed after the wait.
        let mut c = TcpStream::connect(ep.primary_addr()).await.unwrap();
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(n, 0);
        assert_eq!(ep.counters(EndpointKind::Primary).refused, 1);
        // A backend that appears during the wait is used.
        let mut c = TcpStream::connect(ep.primary_addr()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        ep.set_routes(Routes {
            primary: Some(Backend { index: 0, addr: a }),
            replicas: vec![],
        });
        assert_eq!(greeting(&mut c).await, "a");
    }

    #[tokio::test]
    async fn occupied_port_is_reported() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let taken = l.local_addr().unwrap();
        let err = Endpoints::bind(taken, any(), ProxyConfig::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, LocalError::PortInUse { port, .. } if port == taken.port()),
            "{err}"
        );
    }
}
