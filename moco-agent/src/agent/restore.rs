//! `PUT /v1/restore`: a physical backup of another cluster pushed into this instance.
//!
//! On Kubernetes the restore Job cannot reach the Pod's data volume, and the datadir can only
//! be replaced while no server runs. So the Job pushes the backup (an uncompressed
//! `mariadb-backup --stream=xbstream` stream) to instance 0's agent, which receives it the way
//! a clone arrives from a donor ([`super::clone::receive_copy`]): unpacked into
//! `moco-clone-staging/` while the server keeps running, prepared, seeded with the source's
//! GTID history and renamed to `moco-clone-ready/`. Only then does the agent answer, so the
//! Job knows the copy is whole before it deletes the Pod. `moco init` puts the copy in place
//! and, since the seed says `rekey`, gives the copy's accounts (the source cluster's, with
//! its passwords) this cluster's passwords ([`crate::init`]); the new agent seeds it.
//!
//! Who may: any client of the cluster's CA (mutual TLS) that knows this cluster's
//! `moco-admin` password. The CA is shared by every cluster of an operator, and a restore
//! replaces the data, so the certificate alone is not enough.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use futures::{StreamExt as _, TryStreamExt as _};
use moco_cluster::ports::MysqlPort as _;
use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;
use moco_http::tls::PeerIdentity;
use tokio::sync::OwnedSemaphorePermit;

use super::clone::{constant_time_eq, copy_waits, fail_clone, now, receive_copy, refuse};
use super::state::{AgentState, BackupTools};
use crate::api::{
    ClonePhase, CloneStatus, HEADER_ADMIN_PASSWORD, HEADER_BINLOG_STATE, PATH_RESTORE,
    RESTORE_DONOR, RestoreReceived,
};

/// The restore route (served over mutual TLS beside [`super::clone::clone_router`]'s). The
/// body is a whole backup, streamed to the tools, never held in memory: no size limit.
pub fn restore_router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route(
            PATH_RESTORE,
            put(restore).layer(DefaultBodyLimit::disable()),
        )
        .with_state(state)
}

/// The source's history from [`HEADER_BINLOG_STATE`]: without it the copy could not continue
/// the source's GTIDs, so a missing or unreadable one refuses the restore.
pub fn source_binlog_state(headers: &HeaderMap) -> Result<GtidSet, String> {
    let value = headers.get(HEADER_BINLOG_STATE).ok_or_else(|| {
        format!(
            "{HEADER_BINLOG_STATE} is missing: the source's gtid_binlog_state before the backup"
        )
    })?;
    let text = value
        .to_str()
        .map_err(|_| format!("{HEADER_BINLOG_STATE} is not text"))?;
    GtidSet::from_mariadb(text.trim()).map_err(|e| format!("{HEADER_BINLOG_STATE}: {e}"))
}

/// How long a refused restore's body is still read (and dropped).
const DRAIN: Duration = Duration::from_secs(5);

/// `PUT /v1/restore` (see the module docs and [`crate::api`]).
pub async fn restore(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (permit, source_state, tools) = match admit(&state, peer.as_deref(), &headers).await {
        Ok(admitted) => admitted,
        Err(refusal) => {
            drain(body.into_data_stream());
            return refusal;
        }
    };
    state.update_clone(|s| {
        *s = CloneStatus {
            phase: ClonePhase::Receiving,
            donor: Some(RESTORE_DONOR.to_owned()),
            bytes: 0,
            started_at: Some(now()),
            finished_at: None,
            error: None,
        }
    });
    state.metrics.clone_count.inc();
    state.metrics.clone_in_progress.set(1);
    tracing::info!(source_state = %source_state, "receiving a restore");
    // A task of its own: the connection's task drops the handler when the client goes away,
    // and a restore that stops half-way must still be cleaned up and recorded as failed.
    let task_state = state.clone();
    let task = tokio::spawn(async move {
        let started = Instant::now();
        let outcome = receive(&task_state, &tools, source_state, body).await;
        if let Err((status, message)) = &outcome {
            tracing::warn!(%status, error = %message, "restore failed");
            fail_clone(&task_state, message);
        } else {
            tracing::info!(
                seconds = started.elapsed().as_secs_f64(),
                "restore received and prepared"
            );
        }
        drop(permit);
        outcome
    });
    match task.await {
        Ok(Ok(received)) => (StatusCode::OK, Json(received)).into_response(),
        Ok(Err((status, message))) => refuse(status, message),
        Err(e) => {
            fail_clone(&state, &format!("the restore task ended: {e}"));
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the restore task ended: {e}"),
            )
        }
    }
}

/// The checks before any byte of the body is read: a client of this cluster or the controller
/// and the admin password (`403`), the source's
/// history (`400`), nothing else running or waiting (`409`), an empty MariaDB instance with
/// the copy tools (`412`). Holds the clone slot when it admits.
async fn admit(
    state: &Arc<AgentState>,
    peer: Option<&PeerIdentity>,
    headers: &HeaderMap,
) -> Result<(OwnedSemaphorePermit, GtidSet, BackupTools), Response> {
    if let Err(why) = super::peers::check(
        peer,
        state.cluster_dns_name.as_deref(),
        &state.controller_name,
    ) {
        tracing::warn!(error = %why, "restore refused");
        return Err(refuse(StatusCode::FORBIDDEN, why));
    }
    let given = headers
        .get(HEADER_ADMIN_PASSWORD)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if !constant_time_eq(given, state.passwords().admin.as_bytes()) {
        let who = peer.map_or_else(|| "(no certificate)".to_owned(), ToString::to_string);
        tracing::warn!(client = %who, "restore refused: wrong moco-admin password");
        return Err(refuse(
            StatusCode::FORBIDDEN,
            format!("{HEADER_ADMIN_PASSWORD} does not match this cluster's moco-admin password"),
        ));
    }
    let source_state =
        source_binlog_state(headers).map_err(|e| refuse(StatusCode::BAD_REQUEST, e))?;
    let Ok(permit) = state.busy.clone().try_acquire_owned() else {
        return Err(refuse(
            StatusCode::CONFLICT,
            "a clone, a backup or a restore is already running on this instance",
        ));
    };
    if let Some(why) = copy_waits(state) {
        return Err(refuse(StatusCode::CONFLICT, why));
    }
    let unavailable =
        |e: moco_cluster::ports::PortError| refuse(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
    let info = state.agent.server_info().await.map_err(unavailable)?;
    if info.dialect.flavor() == Flavor::Mysql {
        return Err(refuse(
            StatusCode::PRECONDITION_FAILED,
            "this instance is MySQL: a restore pushes a MariaDB physical backup \
             (mariadb-backup --stream=xbstream), which only a MariaDB instance can take",
        ));
    }
    let Some(tools) = state.tools.clone() else {
        return Err(refuse(
            StatusCode::PRECONDITION_FAILED,
            "this agent cannot receive a MariaDB copy: mariadb-backup and mbstream must be in \
             its image",
        ));
    };
    let executed = state.agent.executed_gtid().await.map_err(unavailable)?;
    if !executed.is_empty() {
        return Err(refuse(
            StatusCode::PRECONDITION_FAILED,
            format!("the instance is not empty: it executed {executed}"),
        ));
    }
    Ok((permit, source_state, tools))
}

/// Reads and drops the rest of a refused restore's body for a few seconds. The client is
/// still sending it (a whole backup) when the refusal goes out; closing the connection at
/// once would reset it, and the client would see the reset instead of the answer. It stops
/// sending once it has read the answer.
fn drain<S, T, E>(mut body: S)
where
    S: futures::Stream<Item = Result<T, E>> + Send + Unpin + 'static,
{
    tokio::spawn(async move {
        let _ = tokio::time::timeout(DRAIN, async {
            while let Some(Ok(_)) = body.next().await {}
        })
        .await;
    });
}

/// Streams `body` through the shared receive. A body that ends with an error (the client's
/// own checks failed, or the connection dropped) is the client's failure, `400`; the tools
/// and the volume failing are the server's, `500`.
async fn receive(
    state: &AgentState,
    tools: &BackupTools,
    source_state: GtidSet,
    body: Body,
) -> Result<RestoreReceived, (StatusCode, String)> {
    let body_failed: Arc<Mutex<Option<String>>> = Arc::default();
    let seen = body_failed.clone();
    let stream = body.into_data_stream().map_err(move |e| {
        let message = e.to_string();
        seen.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(message.clone());
        std::io::Error::other(message)
    });
    let mut reader = tokio_util::io::StreamReader::new(stream);
    match receive_copy(state, tools, source_state, &mut reader, true).await {
        Ok((bytes, position)) => Ok(RestoreReceived { bytes, position }),
        Err(e) => {
            let body_error = body_failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            Err(match body_error {
                Some(cause) => (
                    StatusCode::BAD_REQUEST,
                    format!(
                        "the request body ended with an error ({cause}); restore abandoned: {e}"
                    ),
                ),
                None => {
                    // The tools or the volume failed while the client may still be sending.
                    drain(reader.into_inner());
                    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = value {
            h.insert(HEADER_BINLOG_STATE, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_source_history_comes_from_its_header() {
        let state = source_binlog_state(&headers(Some("0-1-7,0-2-9"))).unwrap();
        assert_eq!(state, GtidSet::from_mariadb("0-1-7,0-2-9").unwrap());
        // A source that executed nothing has an empty state: a valid (empty) history.
        assert!(source_binlog_state(&headers(Some(""))).unwrap().is_empty());
    }

    #[test]
    fn a_missing_or_bad_history_is_refused_by_name() {
        for value in [None, Some("0-1"), Some("not a gtid")] {
            let e = source_binlog_state(&headers(value)).unwrap_err();
            assert!(e.contains(HEADER_BINLOG_STATE), "{value:?}: {e}");
        }
    }
}
