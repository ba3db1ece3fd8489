//! `GET`/`POST /v1/credentials`: how a rotation of MOCO's passwords moves the agent.
//!
//! The agent reads its passwords from its environment (the Secret `moco-<cluster>` through
//! `envFrom`), which the kubelet resolves when the container starts. Once a rotation has
//! published new passwords to that Secret, the controller sends their fingerprint; an agent
//! holding others exits as soon as no clone, backup or restore runs (it takes the slot they
//! share, so none starts meanwhile), and its container starts again with the new values. The
//! old passwords are dropped only after every agent reports the new fingerprint. mysqld keeps
//! running: its probes fail for at most the second the agent needs to start.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::state::AgentState;
use crate::api::{CredentialsRequest, CredentialsStatus, PATH_CREDENTIALS};
use moco_http::tls::PeerIdentity;

/// The credentials routes (served over mutual TLS, to the controller only).
pub fn credentials_router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route(PATH_CREDENTIALS, get(status).post(request))
        .with_state(state)
}

fn current(state: &AgentState) -> CredentialsStatus {
    CredentialsStatus {
        fingerprint: state.passwords.fingerprint(),
        restarting: *state.restart.borrow(),
    }
}

async fn status(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
) -> Response {
    if let Some(r) = super::clone::unless_controller(&state, peer.as_deref()) {
        return r;
    }
    Json(current(&state)).into_response()
}

async fn request(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
    Json(body): Json<CredentialsRequest>,
) -> Response {
    if let Some(r) = super::clone::unless_controller(&state, peer.as_deref()) {
        return r;
    }
    if body.fingerprint == state.passwords.fingerprint() {
        return Json(current(&state)).into_response();
    }
    if !*state.restart.borrow() {
        tracing::info!(
            wanted = %body.fingerprint,
            "the cluster's passwords were rotated: exiting once idle, to start again with them"
        );
        let _ = state.restart.send(true);
    }
    (StatusCode::ACCEPTED, Json(current(&state))).into_response()
}

/// Resolves once a restart was requested and no clone, backup or restore runs; the slot they
/// share stays taken, so that none starts before the agent exits.
pub async fn restart_when_idle(state: Arc<AgentState>) -> tokio::sync::OwnedSemaphorePermit {
    let mut requested = state.restart.subscribe();
    let _ = requested.wait_for(|r| *r).await;
    match Arc::clone(&state.busy).acquire_owned().await {
        Ok(permit) => permit,
        // The slot is never closed: a closed one could only mean shutdown.
        Err(_) => std::future::pending().await,
    }
}
