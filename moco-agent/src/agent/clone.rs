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
//! One clone, backup or restore at a time per agent; a clone only into an instance that
//! executed nothing. A restore (`PUT /v1/restore`, [`super::restore`]) is a MariaDB copy
//! pushed by a restore Job instead of pulled from a donor, and shares everything from the
//! unpacking on ([`receive_copy`]).

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
use moco_adapters::mysql::{InitOptions, MysqlInstance, ensure_users};
use moco_cluster::ports::{Credentials, MysqlPort as _};
use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::time::Timestamp;
use moco_http::tls::PeerIdentity;
use serde::{Deserialize, Serialize};

use super::state::{AgentState, BackupTools};
use crate::api::{
    ClonePhase, CloneRequest, CloneStatus, CopyPurpose, ErrorBody, HEADER_BINLOG_STATE,
    HEADER_DONOR_PASSWORD, HEADER_PURPOSE, PATH_BACKUP, PATH_CLONE,
};
use crate::error::AgentError;
use crate::layout::{DataVolume, write_atomically};

/// The size of the chunks a backup is streamed in.
const STREAM_CHUNK: usize = 1 << 20;

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
    /// The copy's accounts carry another cluster's passwords (a restore): `moco init` gives
    /// them this cluster's before the server first runs the copy, then clears this. A clone
    /// comes from the cluster itself and needs none (absent in seeds of earlier releases).
    #[serde(default)]
    pub rekey: bool,
}

impl Seed {
    /// The seed waiting on `volume`, if any.
    pub fn load(volume: &DataVolume) -> Result<Option<Seed>, AgentError> {
        let path = volume.clone_seed();
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(AgentError::io(&path, "read", e)),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| AgentError::invalid("moco-clone-seed.json", e.to_string()))
    }

    /// Writes it on `volume`, atomically: a crash leaves the old seed or the new one.
    pub fn store(&self, volume: &DataVolume) -> Result<(), AgentError> {
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| AgentError::invalid("moco-clone-seed.json", e.to_string()))?;
        let path = volume.clone_seed();
        write_atomically(&path, &text).map_err(|e| AgentError::io(&path, "write", e))
    }
}

/// The clone routes (served over mutual TLS).
pub fn clone_router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route(PATH_CLONE, get(clone_status).post(start_clone))
        .route(PATH_BACKUP, get(backup))
        .with_state(state)
}

pub(super) fn refuse(status: StatusCode, error: impl Into<String>) -> Response {
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
    moco_cluster::ports::Clock::now(&moco_cluster::ports::SystemClock)
}

/// The refusal of a client that is not the controller; `None` for the controller.
pub(super) fn unless_controller(
    state: &AgentState,
    peer: Option<&PeerIdentity>,
) -> Option<Response> {
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

/// The clone's status, for the controller or a client of this cluster: a restore Job waits
/// on it for the copy it pushed to be seeded before it replays anything.
async fn clone_status(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
) -> Response {
    if let Err(why) = super::peers::check(
        peer.as_deref(),
        state.cluster_dns_name.as_deref(),
        &state.controller_name,
    ) {
        return refuse(StatusCode::FORBIDDEN, why);
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
    if let Some(why) = copy_waits(&state) {
        return refuse(StatusCode::CONFLICT, why);
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

/// Why a new copy must not be received now: one is prepared and waits for the Pod to restart,
/// or runs and waits to be seeded. `None` when none waits.
pub(super) fn copy_waits(state: &AgentState) -> Option<&'static str> {
    let phase = state.clone_status().phase;
    if phase == ClonePhase::Ready || state.volume.clone_ready().exists() {
        Some("a prepared copy waits for the Pod to restart")
    } else if phase == ClonePhase::Seeding {
        Some("a copy is being seeded")
    } else {
        None
    }
}

/// Receives, unpacks and prepares a MariaDB copy beside the datadir (see the module docs).
async fn receive_mariadb(state: &AgentState, request: &CloneRequest) -> Result<(), AgentError> {
    let (Some(tools), Some(client)) = (&state.tools, &state.client) else {
        return Err(AgentError::Refused("no copy tools".to_owned()));
    };
    let (donor_state, stream) = client
        .backup(
            &request.donor_agent_host,
            request.donor_agent_port,
            &state.passwords().clone_donor,
            CopyPurpose::Clone,
        )
        .await?;
    receive_copy(state, tools, donor_state, stream, false).await?;
    Ok(())
}

/// Unpacks `stream` into `moco-clone-staging/` while the server keeps running, prepares it,
/// writes `moco-clone-seed.json` (`donor_state`, the copy's position, `rekey`) and renames
/// the copy to `moco-clone-ready/`: phases `Receiving` → `Preparing` → `Ready`. Returns the
/// bytes received and the copy's position.
///
/// Whatever fails, nothing of the copy is left (staging, ready and seed removed): the next
/// attempt starts clean, and no seed outlives its copy to be given to a datadir it does not
/// belong to.
pub(super) async fn receive_copy<R>(
    state: &AgentState,
    tools: &BackupTools,
    donor_state: GtidSet,
    stream: R,
    rekey: bool,
) -> Result<(u64, GtidSet), AgentError>
where
    R: tokio::io::AsyncRead + Unpin,
{
    discard_copy(&state.volume)?;
    let received = async {
        let staging = state.volume.clone_staging();
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
        // The copy starts with its binlog history, so the agent's seed only sets its position.
        procedures::write_binlog_state(&staging, &donor_state, &position)?;
        state.update_clone(|s| s.phase = ClonePhase::Ready);
        Seed {
            donor_state,
            position: position.clone(),
            status: state.clone_status(),
            rekey,
        }
        .store(&state.volume)?;
        let ready = state.volume.clone_ready();
        std::fs::rename(&staging, &ready).map_err(|e| AgentError::io(&staging, "rename", e))?;
        Ok::<_, AgentError>((bytes, position))
    }
    .await;
    match received {
        Ok((bytes, position)) => {
            record_result(state);
            tracing::info!(
                bytes,
                %position,
                rekey,
                "copy prepared; it is put in place when the Pod restarts"
            );
            Ok((bytes, position))
        }
        Err(e) => {
            if let Err(cleanup) = discard_copy(&state.volume) {
                tracing::warn!(error = %cleanup, "cannot remove the failed copy");
            }
            Err(e)
        }
    }
}

/// Removes a copy being received or waiting, and its seed.
pub(super) fn discard_copy(volume: &DataVolume) -> Result<(), AgentError> {
    for dir in [volume.clone_staging(), volume.clone_ready()] {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(AgentError::io(&dir, "remove", e)),
        }
    }
    let seed = volume.clone_seed();
    match std::fs::remove_file(&seed) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(AgentError::io(&seed, "remove", e)),
    }
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
        state.mysql_tls.as_ref().map(|ca| ca.path.as_path()),
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
    ensure_users(&init, &state.passwords(), &InitOptions::default()).await?;
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
    if let Err(why) = super::peers::check(
        peer.as_deref(),
        state.cluster_dns_name.as_deref(),
        &state.controller_name,
    ) {
        tracing::warn!(error = %why, "backup refused");
        return refuse(StatusCode::FORBIDDEN, why);
    }
    let given = headers
        .get(HEADER_DONOR_PASSWORD)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if !constant_time_eq(given, state.passwords().clone_donor.as_bytes()) {
        let who = peer.map_or_else(|| "(no certificate)".to_owned(), |p| p.to_string());
        tracing::warn!(client = %who, "backup refused: wrong clone-donor password");
        return refuse(
            StatusCode::FORBIDDEN,
            "the clone-donor password does not match this cluster's",
        );
    }
    let purpose = match headers.get(HEADER_PURPOSE) {
        None => CopyPurpose::Clone,
        Some(value) => match value.to_str().ok().and_then(CopyPurpose::parse) {
            Some(purpose) => purpose,
            None => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("{HEADER_PURPOSE}: {value:?} is neither \"clone\" nor \"backup\""),
                );
            }
        },
    };
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
            password: state.passwords().clone_donor,
        },
        ssl_ca: state.mysql_tls.as_ref().map(|ca| ca.path.clone()),
        scratch_dir: state.volume.backup_scratch(),
        log: state.log_dir.join("backup.log"),
        nice: match purpose {
            CopyPurpose::Clone => 0,
            CopyPurpose::Backup => procedures::BACKUP_NICE,
        },
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
    // 1 MiB chunks: the default 4 KiB made one TLS record and one chunk header per 4 KiB,
    // and streaming cost 4.5-6.5 times `mariadb-backup | zstd` (docs/benchmarks.md).
    let chunks = tokio_util::io::ReaderStream::with_capacity(stdout, STREAM_CHUNK);
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
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
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

    /// A seed written by a clone of an earlier release has no `rekey`: it is a clone's, whose
    /// accounts are the cluster's own.
    #[test]
    fn seeds_without_rekey_are_clones() {
        let old = r#"{"donorState":"0-1-7","position":"0-1-5","status":{"phase":"ready"}}"#;
        let seed: Seed = serde_json::from_str(old).unwrap();
        assert!(!seed.rekey);
        assert_eq!(seed.position, GtidSet::from_mariadb("0-1-5").unwrap());
        let restored = Seed {
            rekey: true,
            ..seed
        };
        let text = serde_json::to_string(&restored).unwrap();
        assert!(text.contains(r#""rekey":true"#), "{text}");
        assert_eq!(serde_json::from_str::<Seed>(&text).unwrap(), restored);
    }

    #[test]
    fn a_failed_copy_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let v = DataVolume::new(dir.path());
        discard_copy(&v).unwrap();
        std::fs::create_dir_all(v.clone_staging().join("x")).unwrap();
        std::fs::create_dir_all(v.clone_ready()).unwrap();
        std::fs::write(v.clone_seed(), b"{}").unwrap();
        std::fs::create_dir_all(v.datadir()).unwrap();
        discard_copy(&v).unwrap();
        assert!(!v.clone_staging().exists());
        assert!(!v.clone_ready().exists());
        assert!(!v.clone_seed().exists());
        assert!(v.datadir().exists(), "the datadir is not the copy's");
    }
}
