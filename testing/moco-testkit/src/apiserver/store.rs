//! The fake's state: objects, the resourceVersion counter, the event history watches replay,
//! the applied configurations of server-side apply, the request log and pending faults. Every
//! write goes through [`State::create`], [`State::update`] or [`State::delete`], so server-set
//! fields, events and garbage collection are the same whoever writes (HTTP or test controls).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::log::{Fault, RecordedRequest};
use super::registry::ResourceType;
use super::selector::Selectors;
use super::status::ApiError;

/// Where an object is stored.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct ObjectKey {
    /// Its resource.
    pub rt: &'static ResourceType,
    /// Its namespace; empty for cluster-scoped kinds.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `name` in `namespace` (ignored for cluster-scoped kinds).
    pub(super) fn new(rt: &'static ResourceType, namespace: &str, name: &str) -> Self {
        Self {
            rt,
            namespace: if rt.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

/// One change, kept so that a watch from an older resourceVersion can replay it.
#[derive(Debug, Clone)]
pub(super) struct HistoryEvent {
    /// The resourceVersion the change produced.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// Which object.
    pub key: ObjectKey,
    /// The object after the change (for a deletion: its last state, at `rv`).
    pub object: Value,
    /// The object before a modification, so that a watch with a label selector can turn it
    /// into ADDED or DELETED when the object starts or stops matching, as the real server does.
    pub previous: Option<Value>,
}

/// `propagationPolicy` of a deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Propagation {
    /// Dependents are deleted after the owner.
    Background,
    /// Dependents are deleted before the owner (at once, not through a `foregroundDeletion`
    /// finalizer).
    Foreground,
    /// Dependents stay and lose their ownerReference to the owner.
    Orphan,
}

impl Propagation {
    /// Parses `Background`, `Foreground` or `Orphan`.
    pub(super) fn parse(text: &str) -> Result<Self, ApiError> {
        match text {
            "Background" => Ok(Self::Background),
            "Foreground" => Ok(Self::Foreground),
            "Orphan" => Ok(Self::Orphan),
            other => Err(ApiError::bad_request(format!(
                "DeleteOptions.meta.k8s.io is invalid: propagationPolicy: Unsupported value: \
                 {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            ))),
        }
    }
}

/// What a deletion did.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Deleted {
    /// The object is gone; its last state.
    Removed(Value),
    /// The object has finalizers: it now has a `deletionTimestamp` and stays.
    Pending(Value),
}

/// Preconditions of a DELETE (`DeleteOptions.preconditions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Preconditions {
    /// Required `metadata.uid`.
    pub uid: Option<String>,
    /// Required `metadata.resourceVersion`.
    pub resource_version: Option<String>,
}

/// Metadata fields the server owns: kept from the stored object on every update.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
];

/// Everything the fake holds.
#[derive(Debug, Default)]
pub(super) struct State {
    /// The objects, as stored (with `apiVersion` and `kind`).
    pub objects: BTreeMap<ObjectKey, Value>,
    /// Last applied configuration per object, field manager, and whether it was applied to
    /// `status`.
    pub applied: BTreeMap<(ObjectKey, String, bool), Value>,
    /// Propagation policy of objects waiting on finalizers, by uid.
    pending_propagation: HashMap<String, Propagation>,
    /// The last resourceVersion given out.
    pub rv: u64,
    uids: u64,
    names: u64,
    cluster_ips: u64,
    /// Changes with resourceVersion above [`State::compacted`], in order.
    pub history: Vec<HistoryEvent>,
    /// Watches from a resourceVersion below this one are answered 410.
    pub compacted: u64,
    /// Every request received.
    pub requests: Vec<RecordedRequest>,
    /// Failures still to inject.
    pub faults: Vec<Fault>,
    /// Bumped to end every open watch.
    pub watch_epoch: u64,
}

/// `metadata.{field}` of `object` as a string.
pub(super) fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// `object.metadata`, created if missing. `None` if `object` is not a JSON object.
pub(super) fn meta_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = object.as_object_mut()?;
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut()
}

fn finalizers(object: &Value) -> Vec<String> {
    object
        .get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The object without `metadata` and `status`: what a change of bumps `generation`.
fn desired_part(object: &Value) -> Value {
    let mut part = object.clone();
    if let Some(map) = part.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    part
}

/// The current time as the API server writes timestamps (RFC 3339, seconds, UTC).
pub(super) fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl State {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// The objects of `rt` in `namespace` (all namespaces if `None`) selected by `selectors`,
    /// ordered by namespace and name as etcd keys are.
    pub(super) fn list<'a>(
        &'a self,
        rt: &'static ResourceType,
        namespace: Option<&'a str>,
        selectors: &'a Selectors,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Value)> + 'a {
        self.objects.iter().filter(move |(k, v)| {
            k.rt == rt && namespace.is_none_or(|ns| k.namespace == ns) && selectors.matches(v)
        })
    }

    fn record(
        &mut self,
        kind: EventType,
        key: &ObjectKey,
        object: &Value,
        previous: Option<Value>,
    ) {
        self.history.push(HistoryEvent {
            rv: self.rv,
            kind,
            key: key.clone(),
            object: object.clone(),
            previous,
        });
    }

    /// Stores `object` at `key` with a new resourceVersion, as a MODIFIED event.
    fn write(&mut self, key: &ObjectKey, mut object: Value) -> Value {
        let rv = self.next_rv();
        if let Some(meta) = meta_mut(&mut object) {
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        let previous = self.objects.insert(key.clone(), object.clone());
        self.record(EventType::Modified, key, &object, previous);
        object
    }

    fn generate_name(&mut self, key: &ObjectKey, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        loop {
            self.names += 1;
            let mut n = self.names;
            let mut suffix = String::new();
            for _ in 0..5 {
                suffix.push(char::from(ALPHABET[(n % 27) as usize]));
                n /= 27;
            }
            let name = format!("{prefix}{suffix}");
            if !self
                .objects
                .contains_key(&ObjectKey::new(key.rt, &key.namespace, &name))
            {
                return name;
            }
        }
    }

    /// Creates `object` as a resource of `rt`. Its namespace must already be settled (set for
    /// namespaced kinds). The server sets `uid`, `resourceVersion`, `creationTimestamp` and
    /// `generation`, names it from `generateName` if it has no name, drops `status` for kinds
    /// with a status subresource unless `keep_status`, and gives Services a cluster IP.
    pub(super) fn create(
        &mut self,
        rt: &'static ResourceType,
        mut object: Value,
        keep_status: bool,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let Some(map) = object.as_object_mut() else {
            return Err(ApiError::bad_request("the body is not a JSON object"));
        };
        map.insert("apiVersion".into(), json!(rt.api_version()));
        map.insert("kind".into(), json!(rt.kind));
        if rt.status && !keep_status {
            map.remove("status");
        }
        let namespace = meta_str(&object, "namespace")
            .unwrap_or_default()
            .to_string();
        if rt.namespaced && namespace.is_empty() {
            return Err(ApiError::bad_request("the object has no namespace"));
        }
        let mut key = ObjectKey::new(rt, &namespace, "");
        key.name = match (
            meta_str(&object, "name").filter(|n| !n.is_empty()),
            meta_str(&object, "generateName").filter(|n| !n.is_empty()),
        ) {
            (Some(name), _) => name.to_string(),
            (None, Some(prefix)) => {
                let prefix = prefix.to_string();
                self.generate_name(&key, &prefix)
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    rt,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        };
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &key.name));
        }
        self.uids += 1;
        let uid = format!("00000000-0000-4000-8000-{:012x}", self.uids);
        let Some(meta) = meta_mut(&mut object) else {
            return Err(ApiError::bad_request("the body is not a JSON object"));
        };
        meta.insert("name".into(), json!(key.name));
        if !rt.namespaced {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now()));
        meta.insert("generation".into(), json!(1));
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
            "resourceVersion",
        ] {
            meta.remove(field);
        }
        if rt.group.is_empty() && rt.plural == "services" {
            self.assign_cluster_ip(&mut object);
        }
        if dry_run {
            return Ok(object);
        }
        let rv = self.next_rv();
        if let Some(meta) = meta_mut(&mut object) {
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        self.objects.insert(key.clone(), object.clone());
        self.record(EventType::Added, &key, &object, None);
        Ok(object)
    }

    /// Sets `spec.clusterIP` (10.96.x.y) and `spec.clusterIPs` when unset, as the service IP
    /// allocator would; headless (`None`) stays.
    fn assign_cluster_ip(&mut self, service: &mut Value) {
        let Some(map) = service.as_object_mut() else {
            return;
        };
        let spec = map.entry("spec").or_insert_with(|| json!({}));
        let Some(spec) = spec.as_object_mut() else {
            return;
        };
        let ip = match spec.get("clusterIP").and_then(Value::as_str) {
            Some(ip) if !ip.is_empty() => ip.to_string(),
            _ => {
                self.cluster_ips += 1;
                let n = self.cluster_ips + 9;
                let ip = format!("10.96.{}.{}", n / 256, n % 256);
                spec.insert("clusterIP".into(), json!(ip));
                ip
            }
        };
        spec.entry("clusterIPs").or_insert_with(|| json!([ip]));
    }

    /// Replaces the object at `key` with `object`, which the caller has built whole (status
    /// already chosen). Fails with 409 if `object` carries a `resourceVersion` other than the
    /// stored one. Server-set metadata is kept from the stored object; `generation` goes up when
    /// anything outside `metadata` and `status` changed; an update that changes nothing is not
    /// written (no new resourceVersion, no event). A terminating object whose finalizers are
    /// now empty is removed.
    pub(super) fn update(
        &mut self,
        key: &ObjectKey,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let rt = key.rt;
        let Some(stored) = self.objects.get(key).cloned() else {
            return Err(ApiError::not_found(rt, &key.name));
        };
        if let Some(rv) = meta_str(&object, "resourceVersion").filter(|rv| !rv.is_empty())
            && Some(rv) != meta_str(&stored, "resourceVersion")
        {
            return Err(ApiError::conflict(rt, &key.name));
        }
        let Some(map) = object.as_object_mut() else {
            return Err(ApiError::bad_request("the body is not a JSON object"));
        };
        map.insert("apiVersion".into(), json!(rt.api_version()));
        map.insert("kind".into(), json!(rt.kind));
        let Some(meta) = meta_mut(&mut object) else {
            return Err(ApiError::bad_request("the body is not a JSON object"));
        };
        meta.remove("managedFields");
        meta.remove("selfLink");
        let stored_meta = stored.get("metadata").and_then(Value::as_object);
        for field in SERVER_METADATA {
            match stored_meta.and_then(|m| m.get(*field)) {
                Some(value) => meta.insert((*field).to_string(), value.clone()),
                None => meta.remove(*field),
            };
        }
        if meta_str(&stored, "deletionTimestamp").is_some() {
            let old = finalizers(&stored);
            if let Some(added) = finalizers(&object).into_iter().find(|f| !old.contains(f)) {
                return Err(ApiError::invalid(
                    rt,
                    &key.name,
                    &format!(
                        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{added:?}}}"
                    ),
                ));
            }
        }
        if rt.group.is_empty() && rt.plural == "services" {
            keep_cluster_ip(&mut object, &stored);
        }
        if desired_part(&object) != desired_part(&stored) {
            let generation = stored
                .get("metadata")
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(meta) = meta_mut(&mut object) {
                meta.insert("generation".into(), json!(generation + 1));
            }
        }
        if object == stored || dry_run {
            return Ok(object);
        }
        if meta_str(&object, "deletionTimestamp").is_some() && finalizers(&object).is_empty() {
            let uid = meta_str(&object, "uid").unwrap_or_default().to_string();
            let propagation = self
                .pending_propagation
                .get(&uid)
                .copied()
                .unwrap_or(Propagation::Background);
            return Ok(self.remove(key, object, propagation));
        }
        Ok(self.write(key, object))
    }

    /// Deletes the object at `key`: removed at once (with its dependents, per `propagation`)
    /// unless it has finalizers, in which case it gets a `deletionTimestamp` and stays until an
    /// update empties them.
    pub(super) fn delete(
        &mut self,
        key: &ObjectKey,
        propagation: Propagation,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<Deleted, ApiError> {
        let rt = key.rt;
        let Some(mut object) = self.objects.get(key).cloned() else {
            return Err(ApiError::not_found(rt, &key.name));
        };
        let mismatch = |want: &Option<String>, field: &str| {
            want.as_deref()
                .is_some_and(|w| Some(w) != meta_str(&object, field))
        };
        if mismatch(&preconditions.uid, "uid")
            || mismatch(&preconditions.resource_version, "resourceVersion")
        {
            return Err(ApiError::conflict(rt, &key.name));
        }
        if finalizers(&object).is_empty() {
            if dry_run {
                return Ok(Deleted::Removed(object));
            }
            return Ok(Deleted::Removed(self.remove(key, object, propagation)));
        }
        if dry_run || meta_str(&object, "deletionTimestamp").is_some() {
            return Ok(Deleted::Pending(object));
        }
        let uid = meta_str(&object, "uid").unwrap_or_default().to_string();
        self.pending_propagation.insert(uid, propagation);
        if let Some(meta) = meta_mut(&mut object) {
            meta.insert("deletionTimestamp".into(), json!(now()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        Ok(Deleted::Pending(self.write(key, object)))
    }

    /// Removes the object at `key` now, whatever its finalizers, `object` being its last state;
    /// then collects its dependents (or orphans them); removing a Namespace deletes what is in
    /// it. Returns the last state with the resourceVersion of the deletion.
    pub(super) fn remove(
        &mut self,
        key: &ObjectKey,
        mut object: Value,
        propagation: Propagation,
    ) -> Value {
        let uid = meta_str(&object, "uid").unwrap_or_default().to_string();
        if propagation == Propagation::Foreground {
            self.collect_dependents(&uid);
        }
        let previous = self.objects.remove(key);
        let rv = self.next_rv();
        if let Some(meta) = meta_mut(&mut object) {
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        self.record(EventType::Deleted, key, &object, previous);
        self.applied.retain(|(k, _, _), _| k != key);
        self.pending_propagation.remove(&uid);
        match propagation {
            Propagation::Background => self.collect_dependents(&uid),
            Propagation::Orphan => self.orphan_dependents(&uid),
            Propagation::Foreground => {}
        }
        if key.rt.group.is_empty() && key.rt.plural == "namespaces" {
            let contents: Vec<ObjectKey> = self
                .objects
                .keys()
                .filter(|k| k.rt.namespaced && k.namespace == key.name)
                .cloned()
                .collect();
            for k in contents {
                // Already gone through an earlier object's garbage collection: nothing to do.
                let _ = self.delete(
                    &k,
                    Propagation::Background,
                    &Preconditions::default(),
                    false,
                );
            }
        }
        object
    }

    fn dependents(&self, uid: &str) -> Vec<ObjectKey> {
        if uid.is_empty() {
            return Vec::new();
        }
        self.objects
            .iter()
            .filter(|(_, o)| owner_uids(o).iter().any(|u| u == uid))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn uid_exists(&self, uid: &str) -> bool {
        self.objects
            .values()
            .any(|o| meta_str(o, "uid") == Some(uid))
    }

    /// Drops the ownerReference to `uid` from `key`'s object.
    fn drop_owner(&mut self, key: &ObjectKey, uid: &str) {
        let Some(mut object) = self.objects.get(key).cloned() else {
            return;
        };
        if let Some(meta) = meta_mut(&mut object)
            && let Some(Value::Array(refs)) = meta.get_mut("ownerReferences")
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
            if refs.is_empty() {
                meta.remove("ownerReferences");
            }
        }
        self.write(key, object);
    }

    /// The garbage collector: dependents of `uid` with no other live owner are deleted
    /// (recursively, in the background); those with another live owner only lose the reference.
    fn collect_dependents(&mut self, uid: &str) {
        for key in self.dependents(uid) {
            let Some(object) = self.objects.get(&key) else {
                continue;
            };
            let other_owner = owner_uids(object)
                .iter()
                .any(|u| u != uid && self.uid_exists(u));
            if other_owner {
                self.drop_owner(&key, uid);
            } else {
                // Gone already through another path of the collection: nothing to do.
                let _ = self.delete(
                    &key,
                    Propagation::Background,
                    &Preconditions::default(),
                    false,
                );
            }
        }
    }

    fn orphan_dependents(&mut self, uid: &str) {
        for key in self.dependents(uid) {
            self.drop_owner(&key, uid);
        }
    }
}

/// A Service update that omits its cluster IPs keeps the allocated ones, as the real server
/// fills them in.
fn keep_cluster_ip(object: &mut Value, stored: &Value) {
    let Some(old_spec) = stored.get("spec").and_then(Value::as_object) else {
        return;
    };
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    for field in ["clusterIP", "clusterIPs"] {
        let unset = spec
            .get(field)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""));
        if unset && let Some(old) = old_spec.get(field) {
            spec.insert(field.to_string(), old.clone());
        }
    }
}
