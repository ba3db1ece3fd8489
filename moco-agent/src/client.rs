//! Calling an agent: HTTP/1.1 over mutual TLS, one connection per call. The operator starts
//! and watches clones with it; a recipient agent pulls the donor's backup with it; a restore
//! Job pushes a backup into instance 0 with it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use moco_core::gtid::GtidSet;
use rustls::pki_types::ServerName;
use tokio::io::AsyncRead;

use crate::api::{
    CloneRequest, CloneStatus, CopyPurpose, CredentialsRequest, CredentialsStatus, ErrorBody,
    HEADER_ADMIN_PASSWORD, HEADER_BINLOG_STATE, HEADER_DONOR_PASSWORD, HEADER_PURPOSE, PATH_BACKUP,
    PATH_CLONE, PATH_CREDENTIALS, PATH_RESTORE, RestoreReceived,
};
use crate::error::AgentError;

/// A request body: a small JSON document, or a whole backup streamed for hours.
pub type RequestBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// The default of [`AgentClient::with_restore_limit`]: the agent's own limit of a request
/// (`AGENT_LIMITS.request_timeout`), after which it answers `408` anyway.
pub const RESTORE_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// A client of agents with one TLS identity.
#[derive(Clone)]
pub struct AgentClient {
    tls: Arc<rustls::ClientConfig>,
    /// Limit of connecting and of a call's response head.
    timeout: Duration,
    /// Limit of a restore's answer, after connecting.
    restore_limit: Duration,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("timeout", &self.timeout)
            .field("restore_limit", &self.restore_limit)
            .finish_non_exhaustive()
    }
}

/// `bytes` as a [`RequestBody`].
fn full(bytes: impl Into<Bytes>) -> RequestBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

impl AgentClient {
    /// A client presenting the identity of `tls` (built with
    /// [`moco_http::tls::mtls_client_config`]).
    pub fn new(tls: rustls::ClientConfig, timeout: Duration) -> Self {
        AgentClient {
            tls: Arc::new(tls),
            timeout,
            restore_limit: RESTORE_LIMIT,
        }
    }

    /// How long [`AgentClient::restore`] waits for its answer once connected. The agent
    /// answers only after it received the whole backup and prepared it (hours for a large
    /// one), so the response-head limit of the other calls would cut every real restore.
    pub fn with_restore_limit(mut self, limit: Duration) -> Self {
        self.restore_limit = limit;
        self
    }

    /// Sends `request` to the agent at `host:port`, verifying its certificate for `host`;
    /// connecting and the response head each within the client's timeout.
    pub async fn send(
        &self,
        host: &str,
        port: u16,
        request: Request<RequestBody>,
    ) -> Result<Response<Incoming>, AgentError> {
        let (response, _connection) = self.exchange(host, port, request, self.timeout).await?;
        Ok(response)
    }

    /// Connects within the client's timeout, sends `request` and waits up to `reply` for the
    /// response head (the body is sent meanwhile). Returns the response and the connection's
    /// task, which keeps sending the request body and receiving the response body until it
    /// ends or is aborted.
    async fn exchange(
        &self,
        host: &str,
        port: u16,
        request: Request<RequestBody>,
        reply: Duration,
    ) -> Result<(Response<Incoming>, tokio::task::AbortHandle), AgentError> {
        let target = format!("agent {host}:{port}");
        let remote = |message: String| AgentError::Remote {
            target: target.clone(),
            message,
        };
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| remote(format!("not a host name: {e}")))?;
        let connect = async {
            let tcp = tokio::net::TcpStream::connect((host, port))
                .await
                .map_err(|e| remote(format!("connect: {e}")))?;
            let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| remote(format!("TLS: {e}")))?;
            hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| remote(format!("HTTP: {e}")))
        };
        let (mut sender, connection) = tokio::time::timeout(self.timeout, connect)
            .await
            .map_err(|_| remote(format!("no connection within {} s", self.timeout.as_secs())))??;
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        })
        .abort_handle();
        let response = tokio::time::timeout(reply, sender.send_request(request))
            .await
            .map_err(|_| remote(format!("no answer within {} s", reply.as_secs())))?
            .map_err(|e| remote(format!("request: {e}")))?;
        Ok((response, connection))
    }

    /// `POST /v1/credentials`: gives the agent the passwords its Secret holds now (by the
    /// Secret's keys); the answer has the fingerprint of those it uses.
    pub async fn replace_credentials(
        &self,
        host: &str,
        port: u16,
        passwords: &moco_core::moco_accounts::MocoPasswords,
    ) -> Result<CredentialsStatus, AgentError> {
        let passwords = moco_core::moco_accounts::Account::ALL
            .iter()
            .map(|a| (a.secret_key().to_owned(), passwords.get(*a).to_owned()))
            .collect();
        let body = serde_json::to_vec(&CredentialsRequest { passwords })
            .map_err(|e| AgentError::invalid("request", e.to_string()))?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(PATH_CREDENTIALS)
            .header(hyper::header::HOST, host)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(full(body))
            .map_err(|e| AgentError::invalid("request", e.to_string()))?;
        let response = self.send(host, port, request).await?;
        json_reply(host, port, response, StatusCode::OK).await
    }

    /// `POST /v1/clone` on the recipient's agent.
    pub async fn start_clone(
        &self,
        host: &str,
        port: u16,
        request: &CloneRequest,
    ) -> Result<CloneStatus, AgentError> {
        let body = serde_json::to_vec(request).map_err(|e| AgentError::Remote {
            target: format!("agent {host}:{port}"),
            message: e.to_string(),
        })?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(PATH_CLONE)
            .header(hyper::header::HOST, host)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(full(body))
            .map_err(|e| AgentError::invalid("request", e.to_string()))?;
        let response = self.send(host, port, request).await?;
        json_reply(host, port, response, StatusCode::ACCEPTED).await
    }

    /// `GET /v1/clone` on an agent.
    pub async fn clone_status(&self, host: &str, port: u16) -> Result<CloneStatus, AgentError> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(PATH_CLONE)
            .header(hyper::header::HOST, host)
            .body(full(Bytes::new()))
            .map_err(|e| AgentError::invalid("request", e.to_string()))?;
        let response = self.send(host, port, request).await?;
        json_reply(host, port, response, StatusCode::OK).await
    }

    /// `GET /v1/backup` on the donor's agent: the donor's binlog state before the backup, and
    /// the backup's bytes. The stream fails (an IO error) when the donor's backup fails.
    pub async fn backup(
        &self,
        host: &str,
        port: u16,
        donor_password: &str,
        purpose: CopyPurpose,
    ) -> Result<(GtidSet, impl AsyncRead + Unpin + Send + use<>), AgentError> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(PATH_BACKUP)
            .header(hyper::header::HOST, host)
            .header(HEADER_DONOR_PASSWORD, donor_password)
            .header(HEADER_PURPOSE, purpose.as_str())
            .body(full(Bytes::new()))
            .map_err(|e| AgentError::invalid("request", e.to_string()))?;
        let response = self.send(host, port, request).await?;
        let target = format!("donor agent {host}:{port}");
        if response.status() != StatusCode::OK {
            return Err(refusal(target, response).await);
        }
        let state = response
            .headers()
            .get(HEADER_BINLOG_STATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let state = GtidSet::from_mariadb(state).map_err(|e| AgentError::Remote {
            target: target.clone(),
            message: format!("{HEADER_BINLOG_STATE}: {e}"),
        })?;
        let stream = response
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other);
        Ok((state, tokio_util::io::StreamReader::new(stream)))
    }

    /// `PUT /v1/restore` on instance 0's agent: streams `body`, an uncompressed
    /// `mariadb-backup --stream=xbstream` backup of another cluster whose
    /// `gtid_binlog_state` was `binlog_state` before it, and returns once the agent has
    /// received and prepared it (within [`AgentClient::with_restore_limit`]). `body` ending
    /// with an error aborts the request, so the agent never takes a truncated stream for a
    /// whole one; it then answers an error and keeps nothing of it.
    pub async fn restore(
        &self,
        host: &str,
        port: u16,
        admin_password: &str,
        binlog_state: &GtidSet,
        body: impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    ) -> Result<RestoreReceived, AgentError> {
        let body = StreamBody::new(body.map_ok(Frame::data)).boxed_unsync();
        let request = Request::builder()
            .method(Method::PUT)
            .uri(PATH_RESTORE)
            .header(hyper::header::HOST, host)
            .header(hyper::header::CONTENT_TYPE, "application/octet-stream")
            .header(HEADER_ADMIN_PASSWORD, admin_password)
            .header(
                HEADER_BINLOG_STATE,
                moco_adapters::mysql::sql::mariadb_binlog_state_text(binlog_state),
            )
            .body(body)
            .map_err(|e| AgentError::invalid("request", e.to_string()))?;
        let (response, connection) = self
            .exchange(host, port, request, self.restore_limit)
            .await?;
        let answer = json_reply(host, port, response, StatusCode::OK).await;
        // An answer that came before the whole body was sent (a refusal) ends the upload.
        connection.abort();
        answer
    }
}

use futures::TryStreamExt as _;

async fn json_reply<T: serde::de::DeserializeOwned>(
    host: &str,
    port: u16,
    response: Response<Incoming>,
    expected: StatusCode,
) -> Result<T, AgentError> {
    let target = format!("agent {host}:{port}");
    if response.status() != expected {
        return Err(refusal(target, response).await);
    }
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| AgentError::Remote {
            target: target.clone(),
            message: format!("reading the answer: {e}"),
        })?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|e| AgentError::Remote {
        target,
        message: format!("unexpected answer: {e}"),
    })
}

/// The error of a non-success answer: `Refused` for 4xx (busy, not empty, not allowed),
/// `Remote` otherwise, with the agent's message.
async fn refusal(target: String, response: Response<Incoming>) -> AgentError {
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let message = serde_json::from_slice::<ErrorBody>(&body)
        .map(|b| b.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
    if status.is_client_error() {
        AgentError::Refused(format!("{target}: {status}: {message}"))
    } else {
        AgentError::Remote {
            target,
            message: format!("{status}: {message}"),
        }
    }
}
