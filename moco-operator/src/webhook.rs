//! The admission webhooks over HTTP, on MOCO's paths: the rules are
//! [`moco_api::admission`]'s (and, for moco-rs's own MySQLUser and MySQLDatabase,
//! [`moco_api::accounts::admission`]'s); this module decodes the `AdmissionReview`, encodes the
//! answer as the API server expects it, and counts each answer in the [`Metrics`].
//!
//! The rules run off the async runtime ([`WebhookState::off_runtime`]): the webhook shares its
//! process with every cluster's manager and the leader Lease's renewal, and whoever may create
//! an object chooses how much work its rules are; on the blocking pool, at most
//! [`ADMISSION_AT_ONCE`] at a time, a costly object slows admission only.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use moco_api::accounts::admission::{admit_mysqluser, validate_mysqldatabase};
use moco_api::accounts::{PATH_VALIDATE_MYSQLDATABASE, PATH_VALIDATE_MYSQLUSER};
use moco_api::admission::{
    ClusterLookup, mutate_mysqlcluster, mutate_statefulset, validate_backuppolicy,
    validate_mysqlcluster,
};
use moco_api::labels::{
    PATH_MUTATE_MYSQLCLUSTER, PATH_MUTATE_STATEFULSET, PATH_VALIDATE_BACKUPPOLICY,
    PATH_VALIDATE_MYSQLCLUSTER,
};
use serde_json::Value;

use crate::metrics::Metrics;
pub use crate::metrics::{WEBHOOK_PATHS, WebhookResult};

/// Largest webhook response the metrics middleware reads to classify the answer.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Source of the random numbers the mutating webhook needs for `serverIDBase`.
pub type RandomSource = Arc<dyn Fn() -> u32 + Send + Sync>;

/// Admission requests whose rules run at once; the others wait (asynchronously) for a turn.
pub const ADMISSION_AT_ONCE: usize = 2;

/// What the handlers share: where cluster facts come from, the random source, and the turns
/// of admission work.
pub struct WebhookState<L> {
    lookup: L,
    random: RandomSource,
    turns: tokio::sync::Semaphore,
}

impl<L> std::fmt::Debug for WebhookState<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookState").finish_non_exhaustive()
    }
}

impl<L: ClusterLookup> WebhookState<L> {
    /// State with the operating system's random numbers.
    pub fn new(lookup: L) -> Self {
        Self::with_random(lookup, Arc::new(os_random))
    }

    /// State with a given random source (tests that check the `serverIDBase` chosen).
    pub fn with_random(lookup: L, random: RandomSource) -> Self {
        WebhookState {
            lookup,
            random,
            turns: tokio::sync::Semaphore::new(ADMISSION_AT_ONCE),
        }
    }

    /// Runs `work` on the blocking pool once a turn is free, so that no admission request
    /// holds a worker of the runtime the managers and the Lease run on. `None` if the work
    /// panicked.
    pub async fn off_runtime<T, F>(&self, work: F) -> Option<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let _turn = self.turns.acquire().await.ok()?;
        match tokio::task::spawn_blocking(work).await {
            Ok(answer) => Some(answer),
            Err(e) => {
                tracing::error!(error = %e, "an admission rule failed");
                None
            }
        }
    }
}

/// The answer of a webhook whose rules failed: a 500, which the API server reports as the
/// webhook's failure (the object is refused: the webhooks fail closed).
fn failed_rules() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "the admission rules failed; see the controller's log",
    )
        .into_response()
}

/// `work` off the runtime ([`WebhookState::off_runtime`]), its answer as JSON.
async fn answer_off_runtime<L, T, F>(state: &WebhookState<L>, work: F) -> Response
where
    L: ClusterLookup,
    F: FnOnce() -> T + Send + 'static,
    T: serde::Serialize + Send + 'static,
{
    match state.off_runtime(work).await {
        Some(answer) => Json(answer).into_response(),
        None => failed_rules(),
    }
}

type Review = AdmissionReview<DynamicObject>;

/// A random `u32` from the operating system; falls back to clock-derived bits if the OS source
/// is unavailable (the value only needs to be unlikely to collide).
pub fn os_random() -> u32 {
    getrandom::u32().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
            .unwrap_or(0);
        nanos.wrapping_mul(0x9E37_79B9)
    })
}

/// MOCO's four webhook paths, moco-rs's two (MySQLUser, MySQLDatabase) and `/healthz`, each
/// answer on a path of [`WEBHOOK_PATHS`] counted in `metrics`.
pub fn webhook_router<L: ClusterLookup>(
    state: Arc<WebhookState<L>>,
    metrics: Arc<Metrics>,
) -> Router {
    Router::new()
        .route(PATH_VALIDATE_MYSQLCLUSTER, post(validate_cluster::<L>))
        .route(PATH_MUTATE_MYSQLCLUSTER, post(mutate_cluster::<L>))
        .route(PATH_VALIDATE_BACKUPPOLICY, post(validate_policy::<L>))
        .route(PATH_MUTATE_STATEFULSET, post(mutate_sts::<L>))
        .route(PATH_VALIDATE_MYSQLUSER, post(validate_user::<L>))
        .route(PATH_VALIDATE_MYSQLDATABASE, post(validate_database::<L>))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            count_webhook_request,
        ))
}

/// Rules that look facts up, off the runtime ([`answer_off_runtime`]): `rules` gets the lookup
/// and the runtime's handle, through which the lookups' I/O is driven from the blocking thread.
async fn answer_with_lookup<L, T, F>(state: &Arc<WebhookState<L>>, rules: F) -> Response
where
    L: ClusterLookup,
    F: FnOnce(&L, &tokio::runtime::Handle) -> T + Send + 'static,
    T: serde::Serialize + Send + 'static,
{
    let handle = tokio::runtime::Handle::current();
    let shared = state.clone();
    answer_off_runtime(state, move || rules(&shared.lookup, &handle)).await
}

/// The MySQLUser rules, then SubjectAccessReviews of what the object asks the operator to do
/// for its requester ([`admit_mysqluser`]).
async fn validate_user<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Response {
    answer_with_lookup(&state, move |lookup, handle| {
        handle.block_on(admit_mysqluser(lookup, review))
    })
    .await
}

async fn validate_database<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Response {
    answer_off_runtime(&state, move || validate_mysqldatabase(review)).await
}

/// The MySQLCluster rules look facts up (StorageClasses, the namespace's clusters).
async fn validate_cluster<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Response {
    answer_with_lookup(&state, move |lookup, handle| {
        let request = review.request.clone();
        let answered = handle.block_on(validate_mysqlcluster(lookup, review));
        match request {
            Some(request) => crate::annotations::apply_annotation_rules(&request, answered),
            None => answered,
        }
    })
    .await
}

async fn mutate_cluster<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Response {
    let random = (state.random)();
    answer_off_runtime(&state, move || {
        patch_as_base64(&mutate_mysqlcluster(review, random))
    })
    .await
}

async fn mutate_sts<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Response {
    answer_off_runtime(&state, move || patch_as_base64(&mutate_statefulset(review))).await
}

async fn validate_policy<L: ClusterLookup>(
    State(state): State<Arc<WebhookState<L>>>,
    Json(review): Json<Review>,
) -> Response {
    answer_with_lookup(&state, move |lookup, handle| {
        handle.block_on(validate_backuppolicy(lookup, review))
    })
    .await
}

/// The review as JSON with `response.patch` encoded as a base64 string, the encoding Go's
/// `[]byte` uses on the wire (kube serializes the bytes as a number array).
pub fn patch_as_base64(review: &Review) -> Value {
    let mut value = serde_json::to_value(review).unwrap_or(Value::Null);
    if let Some(patch) = value.pointer_mut("/response/patch") {
        let bytes: Vec<u8> = patch
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .filter_map(|b| u8::try_from(b).ok())
                    .collect()
            })
            .unwrap_or_default();
        *patch = Value::String(base64(&bytes));
    }
    value
}

/// Standard base64 with padding (Go's encoding of `[]byte` in JSON).
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Counts the answer of a webhook path by its result and status code (other paths pass).
async fn count_webhook_request(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if !WEBHOOK_PATHS.contains(&path.as_str()) {
        return response;
    }
    let status = response.status();
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_RESPONSE_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!(path, error = %e, "cannot read the webhook response");
            metrics.record(&path, WebhookResult::Error, 500);
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let result = classify(status, &bytes);
    metrics.record(&path, result, status.as_u16());
    tracing::debug!(
        path,
        status = status.as_u16(),
        result = result.as_str(),
        "admission request"
    );
    Response::from_parts(parts, Body::from(bytes))
}

/// Allowed/denied from the AdmissionReview in a successful response. A response that is not an
/// AdmissionReview, or a refusal with a 5xx status (a failed lookup), is an error.
fn classify(status: StatusCode, body: &[u8]) -> WebhookResult {
    if !status.is_success() {
        return WebhookResult::Error;
    }
    let Ok(review) = serde_json::from_slice::<Value>(body) else {
        return WebhookResult::Error;
    };
    let code = review
        .pointer("/response/status/code")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    match review.pointer("/response/allowed").and_then(Value::as_bool) {
        Some(true) => WebhookResult::Allowed,
        Some(false) if code >= 500 => WebhookResult::Error,
        Some(false) => WebhookResult::Denied,
        None => WebhookResult::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moco_api::admission::StaticLookup;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// POSTs `body` to `path` of the router served on a loopback port; the answer's JSON body.
    async fn post(path: &str, body: &serde_json::Value) -> (u16, Value) {
        post_counted(&Arc::new(Metrics::new("moco-system")), path, body).await
    }

    /// [`post`], counted in `metrics`.
    async fn post_counted(
        metrics: &Arc<Metrics>,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, Value) {
        let addr = serve(WebhookState::new(StaticLookup::default()), metrics.clone()).await;
        post_to(addr, path, body).await
    }

    /// The router of `state` served on a loopback port.
    async fn serve<L: ClusterLookup>(
        state: WebhookState<L>,
        metrics: Arc<Metrics>,
    ) -> std::net::SocketAddr {
        let router = webhook_router(Arc::new(state), metrics);
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let addr = listener.local_addr().ok();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let Some(addr) = addr else {
            panic!("no address")
        };
        addr
    }

    /// POSTs `body` to `path` at `addr`; the status and the answer's JSON body.
    async fn post_to(
        addr: std::net::SocketAddr,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, Value) {
        let mut stream = match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut answer = String::new();
        let written = stream.write_all(request.as_bytes()).await;
        let read = stream.read_to_string(&mut answer).await;
        assert!(written.is_ok() && read.is_ok(), "{written:?} {read:?}");
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let json = answer
            .split_once("\r\n\r\n")
            .and_then(|(_, b)| serde_json::from_str(b).ok())
            .unwrap_or(Value::Null);
        (status, json)
    }

    fn review(kind: &str, object: Value) -> Value {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "moco-rs.io", "version": "v1alpha1", "kind": kind},
                "resource": {"group": "moco-rs.io", "version": "v1alpha1", "resource": "x"},
                "name": "app",
                "namespace": "ns",
                "operation": "CREATE",
                "userInfo": {},
                "object": object,
            }
        })
    }

    /// Regression: the two accounts webhooks were served but not counted (WEBHOOK_PATHS
    /// listed four paths).
    #[tokio::test]
    async fn the_accounts_webhooks_are_counted() {
        let metrics = Arc::new(Metrics::new("moco-system"));
        let database = serde_json::json!({
            "apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLDatabase",
            "metadata": {"name": "appdb", "namespace": "ns"},
            "spec": {"clusterName": "test"},
        });
        for path in [PATH_VALIDATE_MYSQLUSER, PATH_VALIDATE_MYSQLDATABASE] {
            let (status, _) =
                post_counted(&metrics, path, &review("MySQLDatabase", database.clone())).await;
            assert_eq!(status, 200);
        }
        let text = metrics.render().unwrap_or_default();
        for path in [PATH_VALIDATE_MYSQLUSER, PATH_VALIDATE_MYSQLDATABASE] {
            assert!(
                text.lines().any(|l| l.starts_with(&format!(
                    "moco_controller_webhook_requests_total{{path=\"{path}\""
                )) && l.ends_with(" 1")),
                "{path} not counted:\n{text}"
            );
        }
    }

    #[tokio::test]
    async fn the_mysqluser_and_mysqldatabase_webhooks_are_served() {
        let user = |name: &str| {
            serde_json::json!({
                "apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLUser",
                "metadata": {"name": "app", "namespace": "ns"},
                "spec": {"clusterName": "test", "name": name,
                    "passwordSecretKeyRef": {"name": "s", "key": "password"}},
            })
        };
        let (status, answer) =
            post(PATH_VALIDATE_MYSQLUSER, &review("MySQLUser", user("app"))).await;
        assert_eq!(status, 200);
        assert_eq!(
            answer.pointer("/response/allowed"),
            Some(&Value::Bool(true))
        );
        let (status, answer) = post(
            PATH_VALIDATE_MYSQLUSER,
            &review("MySQLUser", user("moco-admin")),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            answer.pointer("/response/allowed"),
            Some(&Value::Bool(false))
        );
        let message = answer
            .pointer("/response/status/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            message.contains("spec.name: \"moco-admin\" is one of MOCO's own accounts"),
            "{answer}"
        );

        let database = serde_json::json!({
            "apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLDatabase",
            "metadata": {"name": "mysql", "namespace": "ns"},
            "spec": {"clusterName": "test"},
        });
        let (status, answer) = post(
            PATH_VALIDATE_MYSQLDATABASE,
            &review("MySQLDatabase", database),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            answer.pointer("/response/allowed"),
            Some(&Value::Bool(false))
        );
        let message = answer
            .pointer("/response/status/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            message.contains("metadata.name: \"mysql\" is a schema of the server itself"),
            "{answer}"
        );
    }

    /// A lookup that holds the thread polling it (as a costly rule holds its thread) until
    /// released; counts the requests holding one.
    #[derive(Default)]
    struct Holding {
        holding: std::sync::atomic::AtomicUsize,
        released: std::sync::Mutex<bool>,
        wake: std::sync::Condvar,
    }

    /// [`Holding`], shared with the test.
    #[derive(Clone, Default)]
    struct HoldingLookup(Arc<Holding>);

    impl Holding {
        fn hold(&self) {
            self.holding
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut released = self.released.lock().unwrap_or_else(|e| e.into_inner());
            while !*released {
                released = self.wake.wait(released).unwrap_or_else(|e| e.into_inner());
            }
        }

        fn release(&self) {
            *self.released.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.wake.notify_all();
        }
    }

    impl ClusterLookup for HoldingLookup {
        async fn may(
            &self,
            _who: &k8s_openapi::api::authentication::v1::UserInfo,
            _access: &moco_api::admission::Access,
        ) -> Result<bool, moco_api::admission::LookupError> {
            Ok(true)
        }

        async fn storage_classes(
            &self,
        ) -> Result<Vec<moco_core::validate::StorageClassFacts>, moco_api::admission::LookupError>
        {
            self.0.hold();
            Ok(Vec::new())
        }

        async fn clusters_in(
            &self,
            _namespace: &str,
        ) -> Result<Vec<moco_core::validate::ClusterReference>, moco_api::admission::LookupError>
        {
            self.0.hold();
            Ok(Vec::new())
        }
    }

    /// Four admission requests whose rules hold their threads do not stop the runtime the
    /// managers and the Lease run on (two workers, as the controller has on two cores): a task
    /// spawned meanwhile runs at once. Before the rules ran off the runtime, the two held
    /// requests held both workers and the task waited for them (broken by hand: the deadline
    /// below fails).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rules_in_flight_do_not_hold_the_runtime() {
        let shared = HoldingLookup::default();
        let lookup = shared.0.clone();
        let state = WebhookState::with_random(shared, Arc::new(|| 1));
        let addr = serve(state, Arc::new(Metrics::new("moco-system"))).await;
        let delete = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "moco.cybozu.com", "version": "v1beta2", "kind": "BackupPolicy"},
                "resource": {"group": "moco.cybozu.com", "version": "v1beta2", "resource": "backuppolicies"},
                "name": "daily", "namespace": "ns", "operation": "DELETE", "userInfo": {},
            }
        });
        let requests: Vec<_> = (0..4)
            .map(|_| {
                let body = delete.clone();
                tokio::spawn(async move { post_to(addr, PATH_VALIDATE_BACKUPPOLICY, &body).await })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while lookup.holding.load(std::sync::atomic::Ordering::SeqCst) < ADMISSION_AT_ONCE {
            assert!(std::time::Instant::now() < deadline, "the rules never ran");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The manager's round stands for any task of the runtime. Waited for on this thread
        // (not a worker), with the standard library's clock: held workers would drive no
        // timer.
        let (done, round) = std::sync::mpsc::channel();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            let _ = done.send("round done");
        });
        let ran = round.recv_timeout(std::time::Duration::from_secs(20));
        assert_eq!(
            lookup.holding.load(std::sync::atomic::Ordering::SeqCst),
            ADMISSION_AT_ONCE,
            "more rules ran at once than there are turns"
        );
        lookup.release();
        assert_eq!(
            ran,
            Ok("round done"),
            "a task of the runtime waited for the admission rules"
        );
        for request in requests {
            let answered = tokio::time::timeout(std::time::Duration::from_secs(30), request).await;
            assert!(
                matches!(&answered, Ok(Ok((200, v))) if v.pointer("/response/allowed") == Some(&Value::Bool(true))),
                "{answered:?}"
            );
        }
    }

    /// The hostile MySQLUser of the security review (one grant of ~190,000 made-up privilege
    /// words, under the 2 MiB body limit) is refused whole, naming the field; the rules were
    /// quadratic in it before and held a worker for tens of seconds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hostile_mysqluser_is_refused_whole() {
        let words: Vec<String> = (0..190_000).map(|i| format!("P{i}")).collect();
        let user = serde_json::json!({
            "apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLUser",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": {"clusterName": "test",
                "passwordSecretKeyRef": {"name": "s", "key": "password"},
                "grants": [{"on": "appdb.*", "privileges": words}]},
        });
        let body = review("MySQLUser", user);
        assert!(body.to_string().len() < 2 * 1024 * 1024);
        let answered = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            post(PATH_VALIDATE_MYSQLUSER, &body),
        )
        .await;
        let Ok((200, answer)) = answered else {
            panic!("{answered:?}")
        };
        let message = answer
            .pointer("/response/status/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            message.contains("spec.grants[0].privileges: 190000 items, at most 128"),
            "{message}"
        );
    }

    #[test]
    fn the_reserved_accounts_are_the_ones_moco_creates() {
        let created: std::collections::BTreeSet<&str> = moco_core::moco_accounts::Account::ALL
            .iter()
            .map(|a| a.name())
            .collect();
        let reserved: std::collections::BTreeSet<&str> =
            moco_api::accounts::MOCO_ACCOUNTS.into_iter().collect();
        assert_eq!(reserved, created);
    }

    #[test]
    fn responses_are_classified_by_allowed() {
        let allowed = br#"{"response":{"uid":"u","allowed":true}}"#;
        let denied = br#"{"response":{"uid":"u","allowed":false}}"#;
        assert_eq!(classify(StatusCode::OK, allowed), WebhookResult::Allowed);
        assert_eq!(classify(StatusCode::OK, denied), WebhookResult::Denied);
        let failed = br#"{"response":{"uid":"u","allowed":false,"status":{"code":500}}}"#;
        assert_eq!(classify(StatusCode::OK, failed), WebhookResult::Error);
        assert_eq!(classify(StatusCode::OK, b"not json"), WebhookResult::Error);
        assert_eq!(
            classify(StatusCode::UNPROCESSABLE_ENTITY, allowed),
            WebhookResult::Error
        );
    }
}
