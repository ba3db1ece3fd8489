//! `GET`/`POST /v1/credentials`: how a rotation of MOCO's passwords moves the agent.
//!
//! The agent reads its passwords from its environment (the Secret `moco-<cluster>` through
//! `envFrom`) when it starts. Once a rotation has published new passwords to that Secret,
//! the controller sends them here and the agent uses them from then on, in its own
//! connections too; it does not restart, since a container that restarts makes its Pod
//! NotReady and takes the primary out of its Service for that time. A later start reads the
//! same passwords from the Secret. The old passwords are dropped only after every agent
//! reports the fingerprint of the new ones.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use moco_core::moco_accounts::MocoPasswords;
use moco_http::tls::PeerIdentity;

use super::clone::refuse;
use super::state::AgentState;
use crate::api::{CredentialsRequest, CredentialsStatus, PATH_CREDENTIALS};

/// The credentials routes (served over mutual TLS, to the controller only).
pub fn credentials_router(state: Arc<AgentState>) -> Router {
    Router::new()
        .route(PATH_CREDENTIALS, get(status).post(replace))
        .with_state(state)
}

fn current(state: &AgentState) -> CredentialsStatus {
    CredentialsStatus {
        fingerprint: state.passwords().fingerprint(),
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

async fn replace(
    State(state): State<Arc<AgentState>>,
    peer: Option<axum::Extension<PeerIdentity>>,
    Json(body): Json<CredentialsRequest>,
) -> Response {
    if let Some(r) = super::clone::unless_controller(&state, peer.as_deref()) {
        return r;
    }
    let passwords = match MocoPasswords::from_secret_data(&body.passwords) {
        Ok(p) => p,
        Err(key) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("passwords: key {key} is missing or empty"),
            );
        }
    };
    if passwords.fingerprint() != state.passwords().fingerprint() {
        tracing::info!(
            fingerprint = %passwords.fingerprint(),
            "the cluster's passwords were rotated: using the new ones"
        );
        state.set_passwords(passwords);
    }
    Json(current(&state)).into_response()
}
