//! Serving a metrics exposition: the operator's and the agent's `/metrics` answer the same way.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The answer of `/metrics` for an encoded exposition: the text, or `500` (logged) when it
/// could not be encoded.
pub fn exposition(rendered: Result<String, std::fmt::Error>) -> Response {
    match rendered {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot encode the metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
