//! Bounds on what one client can hold of a server: connections, time and bytes.
//!
//! Without them a client that connects and then sends nothing, half a header, or half of a
//! declared body keeps its connection, task and buffers for as long as it likes; a few
//! hundred such clients took the webhook server past its Pod's memory limit (issue 12,
//! item 2). So every listener of the process:
//!
//! * accepts at most [`ServerLimits::max_connections`] connections at a time, and at most
//!   [`ServerLimits::max_connections_per_client`] from one IP address, so one greedy client
//!   cannot take every place from the API server; a connection beyond either is closed at
//!   once, before its TLS handshake, so a flood costs a socket and no buffers;
//! * gives a client [`ServerLimits::handshake_timeout`] for its TLS handshake (webhooks);
//! * gives it [`ServerLimits::header_timeout`] for a request's header once its first byte
//!   arrived;
//! * gives it [`ServerLimits::request_timeout`] to finish a request, body included; a request
//!   still running then gets `408` and its connection is closed;
//! * closes a connection on which the client sent nothing for
//!   [`ServerLimits::silence_timeout`]: new connections that never send, and idle keep-alive
//!   ones (hyper's header timeout starts only at a request's first byte). It is longer than a
//!   request may run, so no answer is cut short by it, and a stalled body gets its `408`;
//! * refuses a body larger than [`ServerLimits::max_body_bytes`] (`413`).
//!
//! Everything is HTTP/1.1. The API server speaks it to webhooks, and HTTP/2 would need its own
//! idle and stream limits.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What one listener allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once (including ones in their TLS handshake).
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_connections_per_client: usize,
    /// Time for a TLS handshake.
    pub handshake_timeout: Duration,
    /// Time for a request's header, from its first byte.
    pub header_timeout: Duration,
    /// Time for a whole request: reading the body and answering.
    pub request_timeout: Duration,
    /// Largest request body.
    pub max_body_bytes: usize,
}

impl ServerLimits {
    /// How long a connection may stay without a byte from its client: a request's whole
    /// time plus a header's.
    pub fn silence_timeout(&self) -> Duration {
        self.request_timeout + self.header_timeout
    }
}

/// The webhooks. The API server gives up on a webhook after 10 s (`timeoutSeconds`, which
/// our configurations leave at its default), so no request needs longer. An AdmissionReview
/// holds at most the object and its old version, and a MySQLCluster is far smaller than the
/// 2 MiB allowed here. At most 32 × 2 MiB of bodies can be in memory at once.
pub const WEBHOOK_LIMITS: ServerLimits = ServerLimits {
    max_connections: 32,
    max_connections_per_client: 8,
    handshake_timeout: Duration::from_secs(5),
    header_timeout: Duration::from_secs(5),
    request_timeout: Duration::from_secs(10),
    max_body_bytes: 2 * 1024 * 1024,
};

/// The health probes and metrics: the kubelet and a scraper or two, requests without bodies.
pub const PROBE_LIMITS: ServerLimits = ServerLimits {
    max_connections: 16,
    max_connections_per_client: 8,
    handshake_timeout: Duration::from_secs(5),
    header_timeout: Duration::from_secs(5),
    request_timeout: Duration::from_secs(5),
    max_body_bytes: 16 * 1024,
};

/// A server on `listener` with `limits`: HTTP/1.1 only, the header timeout (also for idle
/// keep-alive connections), and `acceptor` (TLS, or none) behind the connection limit.
pub fn limited_server<A>(
    listener: tokio::net::TcpListener,
    acceptor: A,
    limits: &ServerLimits,
) -> axum_server::Server<std::net::SocketAddr, LimitedAcceptor<A>> {
    let mut server = axum_server::Server::<std::net::SocketAddr>::from_listener(listener)
        .http1_only()
        .acceptor(LimitedAcceptor::new(acceptor, limits));
    server
        .http_builder()
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    server
}

/// Applies the request timeout and the body limit of `limits` to `router`.
pub fn limit_requests(router: Router, limits: &ServerLimits) -> Router {
    let timeout = limits.request_timeout;
    router
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| within(timeout, req, next),
        ))
}

/// Runs the request, or answers `408` and closes the connection when it takes longer than
/// `timeout` (its body may still be on the way: the connection cannot be reused).
async fn within(timeout: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => {
            let mut response = (
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request did not complete within {} s",
                    timeout.as_secs()
                ),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}

/// An acceptor that admits connections within [`ServerLimits`] around `inner` (the TLS
/// acceptor, or axum-server's default for plain HTTP). A connection over a limit is refused
/// before `inner` sees it; an admitted one holds its places until it closes, and fails its
/// reads once the client has been silent for [`ServerLimits::silence_timeout`].
#[derive(Clone, Debug)]
pub struct LimitedAcceptor<A> {
    inner: A,
    permits: Arc<Semaphore>,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
    max_per_client: usize,
    silence: Duration,
}

impl<A> LimitedAcceptor<A> {
    /// Connections through `inner` within `limits`.
    pub fn new(inner: A, limits: &ServerLimits) -> Self {
        LimitedAcceptor {
            inner,
            permits: Arc::new(Semaphore::new(limits.max_connections)),
            per_client: Arc::new(Mutex::new(HashMap::new())),
            max_per_client: limits.max_connections_per_client,
            silence: limits.silence_timeout(),
        }
    }

    /// A place for one more connection from `client`, if it has fewer than its limit.
    fn client_place(&self, client: IpAddr) -> Option<ClientPlace> {
        let mut open = self
            .per_client
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(client).or_insert(0);
        if *count >= self.max_per_client {
            return None;
        }
        *count += 1;
        Some(ClientPlace {
            client,
            open: Arc::clone(&self.per_client),
        })
    }
}

/// One connection counted against its client's limit until dropped.
#[derive(Debug)]
struct ClientPlace {
    client: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<A, S> Accept<TcpStream, S> for LimitedAcceptor<A>
where
    A: Accept<TcpStream, S>,
    A::Future: Send + 'static,
    A::Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Permitted<A::Stream>;
    type Service = A::Service;
    type Future = BoxFuture<io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let refuse = |why: &'static str| -> Self::Future {
            tracing::debug!("connection refused: {why}");
            Box::pin(std::future::ready(Err(io::Error::other(why))))
        };
        let place = match stream.peer_addr() {
            Ok(peer) => match self.client_place(peer.ip()) {
                Some(place) => place,
                None => return refuse("too many open connections from this client"),
            },
            Err(_) => return refuse("the peer address is unknown"),
        };
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            return refuse("too many open connections");
        };
        let accepting = self.inner.accept(stream, service);
        let silence = self.silence;
        Box::pin(async move {
            let (stream, service) = accepting.await?;
            Ok((
                Permitted {
                    inner: stream,
                    _permit: permit,
                    _place: place,
                    silence,
                    deadline: Box::pin(tokio::time::sleep(silence)),
                },
                service,
            ))
        })
    }
}

/// A stream that holds its connection permit until it is dropped, and whose reads fail with
/// `TimedOut` once nothing arrived for `silence`.
#[derive(Debug)]
pub struct Permitted<S> {
    inner: S,
    _permit: OwnedSemaphorePermit,
    _place: ClientPlace,
    silence: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Permitted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let next = tokio::time::Instant::now() + this.silence;
                    this.deadline.as_mut().reset(next);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.deadline.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client sent nothing for too long",
                )))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Permitted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
