//! The request log and fault injection: what tests read back and how they make the fake fail.

use serde_json::Value;

use super::route::Route;

/// One request as the fake received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method, upper case (`GET`, `PATCH`, ...).
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query parameters, decoded, in the order sent.
    pub query: Vec<(String, String)>,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body, when it is JSON (YAML apply bodies are converted); `None` when empty.
    pub body: Option<Value>,
}

impl RecordedRequest {
    /// The first value of query parameter `key`.
    pub fn query_param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The query as `k=v&k=v`, decoded and in order (handy in assertions).
    pub fn query_string(&self) -> String {
        self.query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// Which requests a fault applies to: every field left unset matches anything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestMatcher {
    method: Option<String>,
    resource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

impl RequestMatcher {
    /// Matches every request.
    pub fn any() -> Self {
        Self::default()
    }

    /// Only requests with HTTP method `method` (any case), e.g. `PATCH`.
    #[must_use]
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_ascii_uppercase());
        self
    }

    /// Only requests on resource `plural`, e.g. `statefulsets`.
    #[must_use]
    pub fn resource(mut self, plural: &str) -> Self {
        self.resource = Some(plural.to_string());
        self
    }

    /// Only requests in namespace `namespace`.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// Only requests on the object named `name`.
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Only requests on subresource `subresource`, e.g. `status`.
    #[must_use]
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.to_string());
        self
    }

    /// Whether a request with `method` on `route` (`None` for unknown paths) matches.
    pub(super) fn matches(&self, method: &str, route: Option<&Route>) -> bool {
        let field = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| have == Some(w))
        };
        field(&self.method, Some(method))
            && field(&self.resource, route.map(|r| r.rt.plural))
            && field(&self.namespace, route.and_then(|r| r.namespace.as_deref()))
            && field(&self.name, route.and_then(|r| r.name.as_deref()))
            && field(
                &self.subresource,
                route.and_then(|r| r.subresource.as_deref()),
            )
    }
}

/// A failure to answer instead of serving the next `remaining` matching requests.
#[derive(Debug, Clone)]
pub(super) struct Fault {
    pub matcher: RequestMatcher,
    pub code: u16,
    pub reason: String,
    pub remaining: usize,
}
