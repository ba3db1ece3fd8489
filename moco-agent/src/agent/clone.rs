//! The clone service (`POST`/`GET /v1/clone`, `GET /v1/backup`; see [`crate::api`]).
//!
//! **MariaDB** has no `CLONE INSTANCE`. The recipient's agent pulls a physical backup from the
//! donor's agent (`mariadb-backup --stream`, never stored whole on either side), unpacks it
//! into `moco-clone-staging/` beside the datadir while the server keeps running, prepares it,
//! records the GTID state the copy must get in `moco-clone-seed.json`, and renames the copy to
//! `moco-clone-ready/`: phase `Ready`. The server must not run while its datadir is replaced,
//! and in a Pod only the init container runs without it, so the operator then deletes the
//! Pod; `moco init` puts the copy in place, and the agent of the new Pod seeds it
//! ([`super::start`]) and reports `Completed`.
//!
//! **MySQL** copies with `CLONE INSTANCE FROM` on the recipient; the server restarts itself
//! on the copy, and the agent waits until the init account logs in, then makes sure of the
//! accounts (MOCO's order).
//!
//! One clone or backup at a time per agent; a clone only into an instance that executed
//! nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use moco_adapters::instance::clone::{self as procedures, BackupSource, RestoreTarget};
use moco_adapters::mysql::{Account, InitOptions, MysqlInstance, ensure_users};
use moco_adapters::ports::{Credentials, MysqlPort as _};
use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;
use moco_core::time::Timestamp;
use moco_http::tls::PeerIdentity;
use serde::{Deserialize, Serialize};

use super::state::AgentState;
use crate::api::{
    ClonePhase, CloneRequest, CloneStatus, ErrorBody, HEADER_BINLOG_STATE, HEADER_DONOR_PASSWORD,
    PATH_BACKUP, PATH_CLONE,
};
use crate::error::AgentError;
use crate::layout::write_atomically;

/// What a prepared copy must be given when it first runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seed {
    /// The donor's `gtid_binlog_state` before the backup.
    pub donor_state: GtidSet,
    /// The copy's GTID position.
    pub position: GtidSet,
    /// The clone as it stood when the copy was ready.
    pub status: CloneStatus,
}

/// The clone routes (served over mutual TLS).
pub fn clone_router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route(PATH_CLONE, get(clone_status).post(start_clone))
        .route(PATH_BACKUP, get(backup))
        .with_state(state)
}

fn refuse(status: StatusCode, error: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorBody {
            error: error.into(),
        }),
    )
        .into_response()
}

/// Seconds since the epoch now.
pub fn now() -> Timestamp {
    moco_adapters::ports::Clock::now(&moco_adapters::ports::SystemClock)
}

/// The refusal of a client that is not the controller; `None` for the controller.
fn unless_controller(state: &AgentState, peer: Option<&PeerIdentity>) -> Option<Response> {
    match peer {
        Some(p) if p.common_name.as_deref() == Some(state.controller_name.as_str()) => None,
        Some(p) => Some(refuse(
            StatusCode::FORBIDDEN,
            format!(
                "only the controller (CN={}) may do this; the client is {p}",
                state.controller_name
            ),
        )),
        None => Some(refuse(StatusCode::FORBIDDEN, "no client certificate")),
    }
}

async fn clone_status(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
) -> Response {
    if let Some(r) = unless_controller(&state, peer.as_deref()) {
        return r;
    }
    Json(state.clone_status()).into_response()
}

async fn start_clone(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
    Json(request): Json<CloneRequest>,
) -> Response {
    if let Some(r) = unless_controller(&state, peer.as_deref()) {
        return r;
    }
    let Ok(permit) = state.busy.clone().try_acquire_owned() else {
        return refuse(
            StatusCode::CONFLICT,
            "a clone or a backup is already running on this instance",
        );
    };
    if state.clone_status().phase == ClonePhase::Ready {
        return refuse(
            StatusCode::CONFLICT,
            "a prepared copy waits for the Pod to restart",
        );
    }
    let executed = match state.agent.executed_gtid().await {
        Ok(e) => e,
        Err(e) => return refuse(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    if !executed.is_empty() {
        return refuse(
            StatusCode::PRECONDITION_FAILED,
            format!("the instance is not empty: it executed {executed}"),
        );
    }
    let flavor = match state.agent.server_info().await {
        Ok(info) => info.dialect.flavor(),
        Err(e) => return refuse(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    if flavor == Flavor::Mariadb && (state.tools.is_none() || state.client.is_none()) {
        return refuse(
            StatusCode::PRECONDITION_FAILED,
            "this agent cannot receive a MariaDB copy: mariadb-backup and mbstream must be in \
             its image, and its certificate in --grpc-cert-dir",
        );
    }
    let status = CloneStatus {
        phase: ClonePhase::Receiving,
        donor: Some(format!("{}:{}", request.donor_host, request.donor_port)),
        bytes: 0,
        started_at: Some(now()),
        finished_at: None,
        error: None,
    };
    state.update_clone(|s| *s = status.clone());
    state.metrics.clone_count.inc();
    state.metrics.clone_in_progress.set(1);
    let task_state = state.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let result = match flavor {
            Flavor::Mariadb => receive_mariadb(&task_state, &request).await,
            Flavor::Mysql => clone_mysql(&task_state, &request).await,
        };
        drop(permit);
        match result {
            Ok(()) => {
                if task_state.clone_status().phase == ClonePhase::Completed {
                    task_state
                        .metrics
                        .clone_duration
                        .observe(started.elapsed().as_secs_f64());
                    task_state.metrics.clone_in_progress.set(0);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "clone failed");
                fail_clone(&task_state, &e.to_string());
            }
        }
    });
    (StatusCode::ACCEPTED, Json(status)).into_response()
}

/// Records a failed clone (in memory and in `moco-clone-result.json`).
pub fn fail_clone(state: &AgentState, error: &str) {
    state.update_clone(|s| {
        s.phase = ClonePhase::Failed;
        s.finished_at = Some(now());
        s.error = Some(error.to_owned());
    });
    state.metrics.clone_failure_count.inc();
    state.metrics.clone_in_progress.set(0);
    record_result(state);
}

/// Writes the clone status to `moco-clone-result.json`, so that it survives a restart.
pub fn record_result(state: &AgentState) {
    let path = state.volume.clone_result();
    let written = serde_json::to_vec_pretty(&state.clone_status())
        .map_err(std::io::Error::other)
        .and_then(|text| write_atomically(&path, &text));
    if let Err(e) = written {
        tracing::warn!(error = %e, path = %path.display(), "cannot record the clone's result");
    }
}

/// Receives, unpacks and prepares a MariaDB copy beside the datadir (see the module docs).
async fn receive_mariadb(state: &AgentState, request: &CloneRequest) -> Result<(), AgentError> {
    let (Some(tools), Some(client)) = (&state.tools, &state.client) else {
        return Err(AgentError::Refused("no copy tools".to_owned()));
    };
    let staging = state.volume.clone_staging();
    let ready = state.volume.clone_ready();
    for stale in [&staging, &ready] {
        if stale.exists() {
            std::fs::remove_dir_all(stale).map_err(|e| AgentError::io(stale, "remove", e))?;
        }
    }
    let (donor_state, stream) = client
        .backup(
            &request.donor_agent_host,
            request.donor_agent_port,
            &state.passwords.clone_donor,
        )
        .await?;
    let target = RestoreTarget {
        backup_tool: tools.backup.clone(),
        mbstream: tools.mbstream.clone(),
        datadir: staging.clone(),
        log: state.log_dir.join("clone.log"),
    };
    let bytes = procedures::extract(stream, &target).await?;
    state.update_clone(|s| {
        s.bytes = bytes;
        s.phase = ClonePhase::Preparing;
    });
    let position = procedures::prepare(&target).await?;
    state.update_clone(|s| s.phase = ClonePhase::Ready);
    let seed = Seed {
        donor_state,
        position,
        status: state.clone_status(),
    };
    let text =
        serde_json::to_vec_pretty(&seed).map_err(|e| AgentError::invalid("seed", e.to_string()))?;
    let seed_path = state.volume.clone_seed();
    write_atomically(&seed_path, &text).map_err(|e| AgentError::io(&seed_path, "write", e))?;
    std::fs::rename(&staging, &ready).map_err(|e| AgentError::io(&staging, "rename", e))?;
    record_result(state);
    tracing::info!(
        bytes,
        "copy prepared; it is put in place when the Pod restarts"
    );
    Ok(())
}

/// MySQL's `CLONE INSTANCE FROM`, then the accounts once the restarted server lets the init
/// account in.
async fn clone_mysql(state: &AgentState, request: &CloneRequest) -> Result<(), AgentError> {
    let donor = Credentials {
        user: request.user.clone(),
        password: request.password.clone(),
    };
    procedures::clone_instance_from(
        &state.agent,
        &request.donor_host,
        request.donor_port,
        &donor,
    )
    .await?;
    state.update_clone(|s| s.phase = ClonePhase::Seeding);
    let init = super::state::on_socket(
        &state.socket,
        &Credentials {
            user: request.init_user.clone(),
            password: request.init_password.clone(),
        },
        Duration::from_secs(5),
        Duration::from_secs(60),
    );
    wait_for_login(
        &init,
        Duration::from_secs(request.boot_timeout_seconds.max(1)),
    )
    .await?;
    ensure_users(&init, &state.passwords, &InitOptions::default()).await?;
    state.update_clone(|s| {
        s.phase = ClonePhase::Completed;
        s.finished_at = Some(now());
    });
    record_result(state);
    Ok(())
}

/// Waits until `server` lets its account in.
pub async fn wait_for_login(server: &MysqlInstance, limit: Duration) -> Result<(), AgentError> {
    let deadline = Instant::now() + limit;
    loop {
        match server.ping().await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(AgentError::Remote {
                    target: server.target().to_owned(),
                    message: format!("not answering after {} s: {e}", limit.as_secs()),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// `GET /v1/backup`: the donor side of a MariaDB copy.
async fn backup(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
    headers: HeaderMap,
) -> Response {
    let given = headers
        .get(HEADER_DONOR_PASSWORD)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if !constant_time_eq(given, state.passwords.clone_donor.as_bytes()) {
        let who = peer.map_or_else(|| "(no certificate)".to_owned(), |p| p.to_string());
        tracing::warn!(client = %who, "backup refused: wrong clone-donor password");
        return refuse(
            StatusCode::FORBIDDEN,
            "the clone-donor password does not match this cluster's",
        );
    }
    let Some(tools) = state.tools.clone() else {
        return refuse(
            StatusCode::PRECONDITION_FAILED,
            "mariadb-backup is not in this agent's image",
        );
    };
    let Ok(permit) = state.busy.clone().try_acquire_owned() else {
        return refuse(
            StatusCode::CONFLICT,
            "a clone or a backup is already running on this instance",
        );
    };
    let donor_state = match state.agent.executed_gtid().await {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    let source = BackupSource {
        tool: tools.backup,
        defaults_file: state.defaults_file.clone(),
        datadir: state.volume.datadir(),
        host: "127.0.0.1".to_owned(),
        port: state.mysqld_port,
        credentials: Credentials {
            user: Account::CloneDonor.name().to_owned(),
            password: state.passwords.clone_donor.clone(),
        },
        scratch_dir: state.volume.backup_scratch(),
        log: state.log_dir.join("backup.log"),
    };
    if let Err(e) = procedures::wipe_dir(&source.scratch_dir) {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    }
    let mut running = match procedures::start_backup(&source) {
        Ok(b) => b,
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let Some(stdout) = running.take_stream() else {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the backup has no output",
        );
    };
    tracing::info!(donor_state = %donor_state, "streaming a backup");
    // The bytes, then the tool's exit: a failed backup ends the body with an error, so the
    // recipient never takes a truncated stream for a whole one.
    let chunks = tokio_util::io::ReaderStream::new(stdout);
    let end = futures::stream::once(async move {
        let finished = running.finish().await;
        drop(permit);
        match finished {
            Ok(()) => None,
            Err(e) => {
                tracing::warn!(error = %e, "the backup failed while streaming");
                Some(Err(std::io::Error::other(e.to_string())))
            }
        }
    });
    use futures::StreamExt as _;
    let body = chunks.chain(end.filter_map(|x| async move { x }));
    let mut response = Response::new(Body::from_stream(body));
    if let Ok(v) = HeaderValue::from_str(&moco_adapters::mysql::sql::mariadb_binlog_state_text(
        &donor_state,
    )) {
        response.headers_mut().insert(HEADER_BINLOG_STATE, v);
    }
    response
}

/// Compares secrets without leaking where they differ through timing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
