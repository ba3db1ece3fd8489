//! `/healthz` and `/readyz` on the probe port (9081, plain HTTP for the kubelet).
//!
//! * `/healthz` (startup and liveness): the server answers a ping as `moco-agent`.
//! * `/readyz`: [`super::readiness::readiness`] over what the server says now.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use moco_adapters::mysql::MysqlInstance;
use moco_cluster::ports::MysqlPort as _;
use moco_core::facts::{Flavor, ThreadState};
use mysql_async::prelude::Queryable;

use super::readiness::{ReadinessFacts, ReplicaFacts, Verdict, readiness};
use super::state::AgentState;
use crate::error::AgentError;

/// The probe routes.
pub fn probe_router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn healthz(State(state): State<Arc<AgentState>>) -> Response {
    match state.agent.ping().await {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

async fn readyz(State(state): State<Arc<AgentState>>) -> Response {
    let clone_running = state.clone_status().phase.in_progress();
    let facts = match observe(&state.agent, clone_running).await {
        Ok(f) => f,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    };
    if let Some(lag) = facts.replica.as_ref().and_then(|r| r.lag) {
        state.metrics.replication_delay.set(lag.as_secs_f64());
    }
    match readiness(&facts, state.readiness) {
        Verdict::Ready => (StatusCode::OK, "ready\n").into_response(),
        Verdict::NotReady(why) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response()
        }
        Verdict::Error(why) => {
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{why}\n")).into_response()
        }
    }
}

/// What `/readyz` judges, read from the server.
pub async fn observe(
    server: &MysqlInstance,
    clone_running: bool,
) -> Result<ReadinessFacts, AgentError> {
    let (dialect, read_only, replica_status) = server.replication_view().await?;
    let failed = |what: &str, e: mysql_async::Error| AgentError::Remote {
        target: server.target().to_owned(),
        message: format!("{what}: {e}"),
    };
    let mut conn = server.conn().await?;
    let uptime: Option<(String, u64)> = conn
        .query_first("SHOW GLOBAL STATUS LIKE 'Uptime'")
        .await
        .map_err(|e| failed("Uptime", e))?;
    let replica = match &replica_status {
        None => None,
        Some(r) => {
            let (anything_queued, lag) = match dialect.flavor() {
                Flavor::Mariadb => (
                    !r.retrieved_gtid_set.is_empty(),
                    r.seconds_behind_source.map(Duration::from_secs),
                ),
                Flavor::Mysql => {
                    let q = "SELECT \
                        (SELECT UNIX_TIMESTAMP(MAX(LAST_QUEUED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP)) \
                           FROM performance_schema.replication_connection_status), \
                        (SELECT UNIX_TIMESTAMP(MAX(LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP)) \
                           FROM performance_schema.replication_applier_status_by_worker)";
                    let row: Option<(Option<f64>, Option<f64>)> =
                        conn.query_first(q).await.map_err(|e| failed("lag", e))?;
                    let (queued, applied) = row.unwrap_or_default();
                    let queued = queued.unwrap_or(0.0);
                    let applied = applied.unwrap_or(0.0);
                    let lag = if queued > 0.0 {
                        Duration::from_secs_f64((queued - applied).max(0.0))
                    } else {
                        Duration::ZERO
                    };
                    (queued > 0.0, Some(lag))
                }
            };
            Some(ReplicaFacts {
                io_running: r.io_running == ThreadState::Yes,
                sql_running: r.sql_running == ThreadState::Yes,
                io_errno: r.last_io_errno,
                sql_errno: r.last_sql_errno,
                anything_queued,
                lag,
            })
        }
    };
    Ok(ReadinessFacts {
        clone_running,
        read_only,
        replica,
        uptime: Duration::from_secs(uptime.map_or(0, |(_, v)| v)),
    })
}
