//! `Status` answers worded like the real API server's, so code that matches on `reason`,
//! `code` or the message sees what it would see in a cluster.

use serde_json::{Map, Value, json};

use super::registry::ResourceType;

/// A failed request: what becomes a `Status` body with HTTP status `code`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ApiError {
    /// HTTP status code, also `code` in the body.
    pub code: u16,
    /// `reason`, e.g. `NotFound`.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// `details`, when the real server sends some.
    pub details: Option<Value>,
}

impl ApiError {
    /// An error with no details.
    pub(super) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 BadRequest.
    pub(super) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 for a path that names no resource the fake serves.
    pub(super) fn unknown_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 405 for a verb the resource path does not take.
    pub(super) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 404 NotFound for object `name`.
    pub(super) fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.qualified()),
        )
        .with_details(resource_details(rt, name))
    }

    /// 409 AlreadyExists for object `name`.
    pub(super) fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.qualified()),
        )
        .with_details(resource_details(rt, name))
    }

    /// 409 Conflict: a stale `resourceVersion` (or a failed precondition).
    pub(super) fn conflict(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                rt.qualified()
            ),
        )
        .with_details(resource_details(rt, name))
    }

    /// 422 Invalid for object `name`, `message` naming the field.
    pub(super) fn invalid(rt: &ResourceType, name: &str, message: &str) -> Self {
        let mut details = Map::new();
        details.insert("name".into(), json!(name));
        if !rt.group.is_empty() {
            details.insert("group".into(), json!(rt.group));
        }
        details.insert("kind".into(), json!(rt.kind));
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {message}", rt.kind),
        )
        .with_details(Value::Object(details))
    }

    /// 410 Expired: a watch or continue token older than the history the fake keeps, worded
    /// as the watch cache words it (`reason` is `Expired`, the HTTP code is 410 Gone).
    pub(super) fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// The `Status` body.
    pub(super) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(details), Some(obj)) = (&self.details, status.as_object_mut()) {
            obj.insert("details".into(), details.clone());
        }
        status
    }
}

/// `details` of errors about one object: the real server puts the resource (plural) in `kind`.
fn resource_details(rt: &ResourceType, name: &str) -> Value {
    let mut details = Map::new();
    details.insert("name".into(), json!(name));
    if !rt.group.is_empty() {
        details.insert("group".into(), json!(rt.group));
    }
    details.insert("kind".into(), json!(rt.plural));
    Value::Object(details)
}

/// The `Success` status a DELETE answers with when the object is gone at once.
pub(super) fn deleted_status(rt: &ResourceType, name: &str, uid: &str) -> Value {
    let mut details = resource_details(rt, name);
    if let Some(d) = details.as_object_mut() {
        d.insert("uid".into(), json!(uid));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}
