//! An in-memory Kubernetes API server for tests: [`FakeApiServer::client`] is a real
//! [`kube::Client`] whose transport is a `tower` service answering from the fake's state, so the
//! operator's code runs unchanged (`kube::Api`, `kube::runtime::watcher`, reflectors,
//! controllers) with no cluster. Every request is recorded for assertions, and failures can be
//! injected.
//!
//! # What is modelled
//!
//! * Paths: `/api/v1/...` and `/apis/{group}/{version}/...`, namespaced
//!   (`namespaces/{ns}/{plural}[/{name}[/status]]`), across all namespaces (`/{plural}`, list and
//!   watch only) and cluster-scoped, for the kinds of [`registry::RESOURCES`]. Other paths get the
//!   real server's 404 Status.
//! * Verbs: get; list with `labelSelector` (`=`, `==`, `!=`, exists, `!`, `in`, `notin`),
//!   `fieldSelector` (`metadata.name`, `metadata.namespace`), `limit` and `continue`; watch
//!   (see *Watches* below); create (`generateName`, 409 AlreadyExists); replace (409 Conflict on a stale
//!   `resourceVersion`); patch (apply, merge, JSON, strategic merge); delete and delete
//!   collection (`propagationPolicy`, preconditions); `dryRun=All`. Metadata-only requests
//!   (`Accept: ...;as=PartialObjectMetadata`) get `PartialObjectMetadata` answers.
//! * Server-set fields: `uid`, `resourceVersion` (one global counter), `creationTimestamp`,
//!   `generation` (1 on create, +1 whenever anything outside `metadata` and `status` changes, for
//!   every kind — real built-in kinds differ in detail), a Service's `spec.clusterIP`/`clusterIPs`
//!   (unless set, e.g. `None`; kept on updates that omit them). An update that changes nothing
//!   writes nothing (same resourceVersion, no watch event), as on the real server.
//! * Status subresource (kinds marked so in the registry): writes to the main resource keep the
//!   stored `status` (and a create drops it); writes to `/status` change only `status`.
//! * Finalizers and garbage collection: deleting an object with finalizers sets
//!   `deletionTimestamp` and keeps it until an update empties `metadata.finalizers` (new
//!   finalizers are then refused); otherwise it is removed. `Background` and `Foreground`
//!   deletion then delete dependents (objects whose `ownerReferences` name its uid), recursively;
//!   a dependent with another live owner only loses the reference; `Orphan` removes the
//!   references. Deleting a Namespace deletes what is in it.
//! * Errors are `Status` objects worded like the real server's (`NotFound`, `AlreadyExists`,
//!   `Conflict`, `BadRequest`, `Invalid`, `Expired`/410, `MethodNotAllowed`).
//!
//! # Watches
//!
//! `?watch=true` streams newline-delimited `{"type": ..., "object": ...}` events, answering the
//! requests of `kube::runtime::watcher` in both of its modes. The default mode lists first (with
//! `limit=500`) and then watches from the list's resourceVersion; the streaming-list mode
//! (`sendInitialEvents=true`) gets ADDED events for the current objects and then a BOOKMARK
//! annotated `k8s.io/initial-events-end`. A watch from `resourceVersion` absent or `0` starts
//! with ADDED events for the current objects; from `N` it replays the kept history after `N`,
//! or answers a single `ERROR` event with a 410 `Expired` Status once
//! [`FakeApiServer::compact_history`] has dropped what it needs. A change that makes an object
//! start or stop matching the watch's label selector arrives as ADDED or DELETED, as from the
//! real watch cache. `timeoutSeconds` ends the stream; [`FakeApiServer::close_watches`] ends all
//! of them (clients re-watch from their last resourceVersion).
//!
//! # Server-side apply, simplified
//!
//! The fake keeps, per object, field manager and subresource (main or `status`), the last
//! applied configuration (without `apiVersion`, `kind`, server-set metadata and nulls; for the
//! main resource of a kind with a status subresource, without `status`). An apply by a manager:
//!
//! 1. takes the stored object (or, if there is none, creates one: `201`);
//! 2. removes the fields of that manager's previous applied configuration — maps are walked
//!    key by key and dropped once empty; any other value (lists included) is removed only if it
//!    still equals what the manager applied, so a field another writer changed since stays;
//! 3. merges the new configuration in: maps recursively, lists and scalars replaced whole (no
//!    merging of lists keyed by `name` or other keys).
//!
//! Fields set by other writers (status, server-set metadata, other managers' fields) stay. The
//! `fieldManager` query parameter is required (400 without it, as on the real server); `force`
//! is accepted but conflicts between managers are never reported, and `managedFields` are not
//! kept. A `metadata.resourceVersion` in the configuration is a precondition (409 if stale).
//!
//! # What is simplified or left out
//!
//! * `application/strategic-merge-patch+json` is applied as a JSON merge patch: lists are
//!   replaced, not merged by their patch merge keys, and `$patch` directives are not understood.
//! * No validation, defaulting or conversion of objects (schemas, immutable fields, CEL rules;
//!   a Secret's `stringData` stays as written), no admission webhooks, no controllers (a StatefulSet gets no Pods; tests set status with
//!   [`FakeApiServer::set_status`]), no check that a namespace exists.
//! * Updates without `metadata.resourceVersion` are unconditional for every kind.
//! * A DELETE that removes the object answers with a `Success` Status (as for ConfigMaps), one
//!   that leaves it terminating answers with the object, whatever the kind.
//! * Foreground deletion deletes dependents first and at once (no `foregroundDeletion`
//!   finalizer).
//! * `v1` Events and `events.k8s.io/v1` Events are separate stores.
//! * A list is not a snapshot across pages: `continue` resumes after the last returned name, in
//!   the current state.
//! * Watches send no periodic BOOKMARK events.

mod apply;
mod log;
mod patch;
pub mod registry;
mod request;
mod route;
mod selector;
mod status;
mod store;
mod verbs;
mod watch;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use log::{RecordedRequest, RequestMatcher};
pub use registry::ResourceType;

use log::Fault;
use store::{ObjectKey, Preconditions, Propagation, State, meta_str};

/// What the fake and its clients share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Bumped after every change, to wake watches.
    changes: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    /// The state. A panic while it was held (a test assertion in a control method) does not
    /// make it unusable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// An in-memory API server; see the [module documentation](self). Clones share the state.
#[derive(Debug, Clone)]
pub struct FakeApiServer {
    shared: Arc<Shared>,
}

impl Default for FakeApiServer {
    fn default() -> Self {
        Self::new()
    }
}

/// The resource named `apiVersion/plural` (`v1/configmaps`, `apps/v1/statefulsets`), or a panic.
fn resource(name: &str) -> &'static ResourceType {
    registry::by_name(name).unwrap_or_else(|| {
        panic!("the fake API server does not serve {name:?} (expected apiVersion/plural)")
    })
}

impl FakeApiServer {
    /// An empty server (no objects, not even namespaces).
    pub fn new() -> Self {
        let (changes, _) = tokio::sync::watch::channel(0);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                changes,
            }),
        }
    }

    /// A client talking to this server, with default namespace `default`. Needs a tokio
    /// runtime (the client spawns its buffer task).
    pub fn client(&self) -> kube::Client {
        let shared = Arc::clone(&self.shared);
        let service = tower::service_fn(move |request| verbs::serve(Arc::clone(&shared), request));
        kube::Client::new(service, "default")
    }

    /// The fake as an HTTP service, for a client in another process (the operator benchmark
    /// runs the API server apart so that each side's memory can be measured):
    /// `axum::serve(listener, fake.router())`.
    pub fn router(&self) -> axum::Router {
        let shared = Arc::clone(&self.shared);
        axum::Router::new().fallback(move |request: axum::extract::Request| {
            let shared = Arc::clone(&shared);
            async move {
                let (parts, body) = request.into_parts();
                let bytes = match http_body_util::BodyExt::collect(body).await {
                    Ok(c) => c.to_bytes().to_vec(),
                    Err(_) => Vec::new(),
                };
                let request = http::Request::from_parts(parts, kube::client::Body::from(bytes));
                match verbs::serve(shared, request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            }
        })
    }

    /// Stores `object` as the server would (server-set fields assigned; `status` kept), creating
    /// it or replacing the object of that name, and returns it as stored. A namespaced object
    /// without a namespace goes to `default`. Panics on an unknown kind or an object without
    /// a name.
    pub fn insert(&self, mut object: Value) -> Value {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let rt = registry::by_kind(api_version, kind).unwrap_or_else(|| {
            panic!("the fake API server does not serve apiVersion {api_version:?} kind {kind:?}")
        });
        let name = meta_str(&object, "name")
            .unwrap_or_else(|| panic!("insert: the object has no metadata.name: {object}"))
            .to_string();
        let namespace = meta_str(&object, "namespace")
            .unwrap_or("default")
            .to_string();
        if rt.namespaced
            && let Some(meta) = store::meta_mut(&mut object)
        {
            meta.insert("namespace".into(), Value::String(namespace.clone()));
        }
        let key = ObjectKey::new(rt, &namespace, &name);
        let result = {
            let mut state = self.shared.lock();
            if state.objects.contains_key(&key) {
                if let Some(meta) = store::meta_mut(&mut object) {
                    meta.remove("resourceVersion");
                }
                state.update(&key, object, false)
            } else {
                state.create(rt, object, true, false)
            }
        };
        self.shared.notify();
        result.unwrap_or_else(|e| panic!("insert {name}: {}", e.message))
    }

    /// The stored object `name` of `resource` (`apiVersion/plural`, e.g. `apps/v1/statefulsets`)
    /// in `namespace` (ignored for cluster-scoped kinds).
    pub fn get_json(&self, resource_name: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = ObjectKey::new(resource(resource_name), namespace, name);
        self.shared.lock().objects.get(&key).cloned()
    }

    /// The stored object `name` in `namespace` as a `K`. Panics if it does not deserialize.
    pub fn get<K>(&self, namespace: &str, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let resource_name = format!("{}/{}", K::api_version(&()), K::plural(&()));
        self.get_json(&resource_name, namespace, name).map(|v| {
            serde_json::from_value(v)
                .unwrap_or_else(|e| panic!("{resource_name} {namespace}/{name}: {e}"))
        })
    }

    /// The stored objects of `resource` in `namespace` (all namespaces if `None`), ordered by
    /// namespace and name.
    pub fn list_json(&self, resource_name: &str, namespace: Option<&str>) -> Vec<Value> {
        let rt = resource(resource_name);
        let selectors = selector::Selectors::default();
        self.shared
            .lock()
            .list(rt, namespace, &selectors)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The stored objects of `K` in `namespace` (all if `None`). Panics if one does not
    /// deserialize.
    pub fn list<K>(&self, namespace: Option<&str>) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let resource_name = format!("{}/{}", K::api_version(&()), K::plural(&()));
        self.list_json(&resource_name, namespace)
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap_or_else(|e| panic!("{resource_name}: {e}")))
            .collect()
    }

    /// Changes the stored object with `change` as a controller or kubelet would (a new
    /// resourceVersion and a MODIFIED event; finalizers emptied on a terminating object remove
    /// it) and returns the result. Panics if it does not exist.
    pub fn modify(
        &self,
        resource_name: &str,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Value {
        let key = ObjectKey::new(resource(resource_name), namespace, name);
        let result = {
            let mut state = self.shared.lock();
            let mut object = state
                .objects
                .get(&key)
                .cloned()
                .unwrap_or_else(|| panic!("modify: no {resource_name} {namespace}/{name}"));
            change(&mut object);
            if let Some(meta) = store::meta_mut(&mut object) {
                meta.remove("resourceVersion");
            }
            state.update(&key, object, false)
        };
        self.shared.notify();
        result.unwrap_or_else(|e| panic!("modify {name}: {}", e.message))
    }

    /// Replaces the `status` of the stored object (e.g. to make a StatefulSet ready) and returns
    /// the result. Panics if it does not exist.
    pub fn set_status(
        &self,
        resource_name: &str,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> Value {
        self.modify(resource_name, namespace, name, |object| {
            if let Some(map) = object.as_object_mut() {
                map.insert("status".into(), status);
            }
        })
    }

    /// Removes the object now, finalizers or not, collecting its dependents in the background;
    /// returns its last state, `None` if it did not exist.
    pub fn delete_now(&self, resource_name: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = ObjectKey::new(resource(resource_name), namespace, name);
        let removed = {
            let mut state = self.shared.lock();
            let object = state.objects.get(&key).cloned();
            object.map(|o| state.remove(&key, o, Propagation::Background))
        };
        self.shared.notify();
        removed
    }

    /// Deletes the object as a DELETE with `propagationPolicy` `Background` would (finalizers
    /// honoured). Returns whether it existed.
    pub fn delete(&self, resource_name: &str, namespace: &str, name: &str) -> bool {
        let key = ObjectKey::new(resource(resource_name), namespace, name);
        let found = self
            .shared
            .lock()
            .delete(
                &key,
                Propagation::Background,
                &Preconditions::default(),
                false,
            )
            .is_ok();
        self.shared.notify();
        found
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The requests received so far, clearing the log.
    pub fn take_requests(&self) -> Vec<RecordedRequest> {
        std::mem::take(&mut self.shared.lock().requests)
    }

    /// Makes the next `times` requests matching `matcher` fail with HTTP status `code` and a
    /// Status with `reason` (e.g. `409`, `"Conflict"`), without touching the state. Faults are
    /// checked in the order they were added.
    pub fn fail_next(&self, matcher: RequestMatcher, code: u16, reason: &str, times: usize) {
        self.shared.lock().faults.push(Fault {
            matcher,
            code,
            reason: reason.to_string(),
            remaining: times,
        });
    }

    /// The current (last given out) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    /// Forgets the event history, as etcd compaction does: a watch from an older
    /// resourceVersion, or one still behind, gets a 410 `Expired` error event.
    pub fn compact_history(&self) {
        {
            let mut state = self.shared.lock();
            state.compacted = state.rv;
            state.history.clear();
        }
        self.shared.notify();
    }

    /// Ends every open watch stream (clients then re-watch), as an API server restart would.
    pub fn close_watches(&self) {
        self.shared.lock().watch_epoch += 1;
        self.shared.notify();
    }
}
