//! A request as the fake parsed it, and how objects are presented in answers: shared by the
//! plain verbs and the watches.

use serde_json::{Value, json};

use super::route::Route;
use super::selector::{FieldSelector, LabelSelector, Selectors};
use super::status::ApiError;

/// A request, parsed.
#[derive(Debug)]
pub(super) struct Request {
    pub method: String,
    pub route: Option<Route>,
    pub query: Vec<(String, String)>,
    pub content_type: Option<String>,
    /// The body as JSON; `Err` with the parse error for a body that is not.
    pub body: Result<Option<Value>, String>,
    /// Whether the client asked for `PartialObjectMetadata` (metadata-only Api).
    pub metadata_only: bool,
}

impl Request {
    pub(super) fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn dry_run(&self) -> bool {
        self.param("dryRun") == Some("All")
    }

    /// The body, which must be a JSON object.
    pub(super) fn object(&self) -> Result<Value, ApiError> {
        match &self.body {
            Ok(Some(v)) if v.is_object() => Ok(v.clone()),
            Ok(Some(_)) => Err(ApiError::bad_request("the body is not a JSON object")),
            Ok(None) => Err(ApiError::bad_request("the request has no body")),
            Err(e) => Err(ApiError::bad_request(format!(
                "couldn't get version/kind; json parse error: {e}"
            ))),
        }
    }

    pub(super) fn selectors(&self) -> Result<Selectors, ApiError> {
        Ok(Selectors {
            labels: LabelSelector::parse(self.param("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(self.param("fieldSelector").unwrap_or(""))?,
        })
    }
}

/// The object as returned: whole, or as `PartialObjectMetadata` for metadata-only clients.
pub(super) fn present(object: &Value, metadata_only: bool) -> Value {
    if metadata_only {
        json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata",
            "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
        })
    } else {
        object.clone()
    }
}
