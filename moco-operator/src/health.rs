//! `/healthz` and `/readyz`. Readiness follows the webhook listener because readiness is what
//! the webhook Service routes on: a pod that cannot answer admission requests (certificate not
//! loaded yet, or shutting down) must not receive them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

/// Readiness of the controller: ready once the webhook certificate is loaded and its listener
/// serves, not ready once shutdown starts.
#[derive(Debug, Default)]
pub struct Readiness {
    webhook_serving: AtomicBool,
    shutting_down: AtomicBool,
}

impl Readiness {
    /// Not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.webhook_serving.load(Ordering::SeqCst) && !self.shutting_down.load(Ordering::SeqCst)
    }

    /// Marks the webhook server as serving.
    pub fn set_webhook_serving(&self, serving: bool) {
        self.webhook_serving.store(serving, Ordering::SeqCst);
    }

    /// Marks the start of shutdown.
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }
}

/// `/healthz` (the process serves) and `/readyz` (see [`Readiness`]).
pub fn health_router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn readyz(State(readiness): State<Arc<Readiness>>) -> (StatusCode, &'static str) {
    if readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the webhook server is not serving",
        )
    }
}
