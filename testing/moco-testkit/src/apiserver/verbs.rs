//! The HTTP side: one request in, one answer out. Requests are recorded and checked against
//! injected faults first; watches are handed to [`super::watch`]; everything else runs against
//! the [`State`] under its lock, which is released before the answer is sent.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};

use super::Shared;
use super::apply;
use super::log::RecordedRequest;
use super::patch;
use super::request::{Request, present};
use super::route::{Route, parse_path, parse_query};
use super::status::{ApiError, deleted_status};
use super::store::{Deleted, ObjectKey, Preconditions, Propagation, State, meta_mut, meta_str};
use super::watch;

/// The service behind [`super::FakeApiServer::client`].
pub(super) async fn serve(
    shared: Arc<Shared>,
    request: http::Request<kube::client::Body>,
) -> Result<http::Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Ok(error_response(&ApiError::bad_request(format!(
                "reading the body: {e}"
            ))));
        }
    };
    let header = |name: http::header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header(http::header::CONTENT_TYPE);
    let accept = header(http::header::ACCEPT).unwrap_or_default();
    let request = Request {
        method: parts.method.as_str().to_string(),
        route: parse_path(parts.uri.path()),
        query: parse_query(parts.uri.query().unwrap_or("")),
        body: parse_body(&bytes, content_type.as_deref()),
        content_type,
        metadata_only: accept.contains("as=PartialObjectMetadata"),
    };
    let recorded = RecordedRequest {
        method: request.method.clone(),
        path: parts.uri.path().to_string(),
        query: request.query.clone(),
        content_type: request.content_type.clone(),
        body: request.body.clone().ok().flatten(),
    };
    {
        let mut state = shared.lock();
        state.requests.push(recorded);
        let fault = state.faults.iter_mut().find(|f| {
            f.remaining > 0 && f.matcher.matches(&request.method, request.route.as_ref())
        });
        if let Some(fault) = fault {
            fault.remaining -= 1;
            let error = ApiError::new(
                fault.code,
                &fault.reason,
                format!("injected failure: {}", fault.reason),
            );
            state.faults.retain(|f| f.remaining > 0);
            return Ok(error_response(&error));
        }
    }
    let watching = matches!(request.param("watch"), Some("true" | "1"));
    if request.method == "GET"
        && watching
        && let Some(route) = &request.route
        && route.name.is_none()
    {
        return Ok(match watch::start(&shared, route, &request) {
            Ok(body) => json_response(200, body),
            Err(e) => error_response(&e),
        });
    }
    let answer = {
        let mut state = shared.lock();
        dispatch(&mut state, &request)
    };
    shared.notify();
    Ok(match answer {
        Ok((code, body)) => json_response(code, Body::from(body.to_string())),
        Err(e) => error_response(&e),
    })
}

/// JSON, or for apply patches YAML (what `application/apply-patch+yaml` allows).
fn parse_body(bytes: &[u8], content_type: Option<&str>) -> Result<Option<Value>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(Some(v)),
        Err(e) if content_type.is_some_and(|c| c.starts_with("application/apply-patch+yaml")) => {
            let text = String::from_utf8_lossy(bytes);
            serde_saphyr::from_str::<Value>(&text)
                .map(Some)
                .map_err(|y| format!("{e}; as YAML: {y}"))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn json_response(code: u16, body: Body) -> http::Response<Body> {
    let mut response = http::Response::new(body);
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) fn error_response(error: &ApiError) -> http::Response<Body> {
    json_response(error.code, Body::from(error.to_status().to_string()))
}

fn dispatch(state: &mut State, request: &Request) -> Result<(u16, Value), ApiError> {
    let route = request.route.as_ref().ok_or_else(ApiError::unknown_path)?;
    match route.subresource.as_deref() {
        None => {}
        Some("status") if route.rt.status => {}
        Some(_) => return Err(ApiError::unknown_path()),
    }
    let all_namespaces = route.rt.namespaced && route.namespace.is_none();
    match (request.method.as_str(), route.name.as_deref()) {
        ("GET", None) => list(state, route, request),
        ("GET", Some(name)) => {
            let key = key(route, name);
            let object = state
                .objects
                .get(&key)
                .ok_or_else(|| ApiError::not_found(route.rt, name))?;
            Ok((200, present(object, request.metadata_only)))
        }
        ("POST", None) if !all_namespaces => create(state, route, request),
        ("PUT", Some(name)) => replace(state, route, name, request),
        ("PATCH", Some(name)) => patch(state, route, name, request),
        ("DELETE", Some(name)) if route.subresource.is_none() => {
            delete(state, route, name, request)
        }
        ("DELETE", None) if !all_namespaces => delete_collection(state, route, request),
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn key(route: &Route, name: &str) -> ObjectKey {
    ObjectKey::new(route.rt, route.namespace.as_deref().unwrap_or(""), name)
}

/// Checks `apiVersion`, `kind`, name and namespace of a body against the path, filling in
/// the namespace (and name) where the body has none, as the real server does.
fn settle_identity(route: &Route, name: Option<&str>, object: &mut Value) -> Result<(), ApiError> {
    let rt = route.rt;
    if let Some(api_version) = object.get("apiVersion").and_then(Value::as_str)
        && api_version != rt.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    if let Some(kind) = object.get("kind").and_then(Value::as_str)
        && kind != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    let body_name = meta_str(object, "name").unwrap_or_default().to_string();
    let body_namespace = meta_str(object, "namespace")
        .unwrap_or_default()
        .to_string();
    let meta =
        meta_mut(object).ok_or_else(|| ApiError::bad_request("the body is not a JSON object"))?;
    if let Some(name) = name {
        if body_name.is_empty() {
            meta.insert("name".into(), json!(name));
        } else if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
    }
    match &route.namespace {
        Some(ns) if body_namespace.is_empty() => {
            meta.insert("namespace".into(), json!(ns));
        }
        Some(ns) if &body_namespace != ns => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        Some(_) => {}
        None => {
            meta.remove("namespace");
        }
    }
    Ok(())
}

fn list(state: &State, route: &Route, request: &Request) -> Result<(u16, Value), ApiError> {
    let selectors = request.selectors()?;
    let limit = match request.param("limit") {
        None | Some("") | Some("0") => None,
        Some(text) => Some(
            text.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {text:?}")))?,
        ),
    };
    let after = request.param("continue").filter(|c| !c.is_empty());
    let mut items: Vec<(String, Value)> = state
        .list(route.rt, route.namespace.as_deref(), &selectors)
        .map(|(k, v)| {
            (
                format!("{}/{}", k.namespace, k.name),
                present(v, request.metadata_only),
            )
        })
        .filter(|(token, _)| after.is_none_or(|a| token.as_str() > a))
        .collect();
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), json!(state.rv.to_string()));
    if let Some(limit) = limit
        && items.len() > limit
    {
        let rest = items.len() - limit;
        items.truncate(limit);
        if let Some((token, _)) = items.last() {
            metadata.insert("continue".into(), json!(token));
        }
        metadata.insert("remainingItemCount".into(), json!(rest));
    }
    let (api_version, kind) = if request.metadata_only {
        (
            "meta.k8s.io/v1".to_string(),
            "PartialObjectMetadataList".to_string(),
        )
    } else {
        (route.rt.api_version(), format!("{}List", route.rt.kind))
    };
    Ok((
        200,
        json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": metadata,
            "items": items.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        }),
    ))
}

fn create(state: &mut State, route: &Route, request: &Request) -> Result<(u16, Value), ApiError> {
    let mut object = request.object()?;
    settle_identity(route, None, &mut object)?;
    let created = state.create(route.rt, object, false, request.dry_run())?;
    Ok((201, present(&created, request.metadata_only)))
}

fn stored(state: &State, route: &Route, name: &str) -> Result<(ObjectKey, Value), ApiError> {
    let key = key(route, name);
    let object = state
        .objects
        .get(&key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(route.rt, name))?;
    Ok((key, object))
}

/// What a write of `written` (a whole object) stores: for `/status` the stored object with
/// `written`'s status (and its resourceVersion, a precondition); for the main resource of a
/// kind with a status subresource, `written` with the stored status.
fn scope_write(route: &Route, stored: &Value, mut written: Value) -> Value {
    let take_status = |into: &mut Value, from: &Value| {
        if let Some(map) = into.as_object_mut() {
            match from.get("status") {
                Some(status) => map.insert("status".into(), status.clone()),
                None => map.remove("status"),
            };
        }
    };
    if route.subresource.is_some() {
        let mut object = stored.clone();
        take_status(&mut object, &written);
        if let (Some(rv), Some(meta)) =
            (meta_str(&written, "resourceVersion"), meta_mut(&mut object))
        {
            meta.insert("resourceVersion".into(), json!(rv));
        }
        object
    } else {
        if route.rt.status {
            take_status(&mut written, stored);
        }
        written
    }
}

fn replace(
    state: &mut State,
    route: &Route,
    name: &str,
    request: &Request,
) -> Result<(u16, Value), ApiError> {
    let mut object = request.object()?;
    settle_identity(route, Some(name), &mut object)?;
    let (key, stored) = stored(state, route, name)?;
    let object = scope_write(route, &stored, object);
    let updated = state.update(&key, object, request.dry_run())?;
    Ok((200, present(&updated, request.metadata_only)))
}

fn patch(
    state: &mut State,
    route: &Route,
    name: &str,
    request: &Request,
) -> Result<(u16, Value), ApiError> {
    let content_type = request.content_type.as_deref().unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    if media == "application/apply-patch+yaml" {
        return apply_patch(state, route, name, request);
    }
    let body = match &request.body {
        Ok(Some(body)) => body.clone(),
        Ok(None) => return Err(ApiError::bad_request("the patch is empty")),
        Err(e) => return Err(ApiError::bad_request(format!("the patch is not JSON: {e}"))),
    };
    let (key, stored) = stored(state, route, name)?;
    let mut patched = stored.clone();
    match media {
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            patch::merge_patch(&mut patched, &body);
        }
        "application/json-patch+json" => {
            patch::json_patch(&mut patched, &body)
                .map_err(|e| ApiError::invalid(route.rt, name, &e))?;
        }
        _ => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types \
                     include: application/json-patch+json, application/merge-patch+json, \
                     application/apply-patch+yaml, application/strategic-merge-patch+json \
                     (got {content_type:?})"
                ),
            ));
        }
    }
    if !patched.is_object() {
        return Err(ApiError::invalid(
            route.rt,
            name,
            "the patched object is not a JSON object",
        ));
    }
    let object = scope_write(route, &stored, patched);
    let updated = state.update(&key, object, request.dry_run())?;
    Ok((200, present(&updated, request.metadata_only)))
}

fn apply_patch(
    state: &mut State,
    route: &Route,
    name: &str,
    request: &Request,
) -> Result<(u16, Value), ApiError> {
    let Some(manager) = request.param("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::bad_request(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    };
    let mut body = request.object()?;
    let rt = route.rt;
    if body.get("apiVersion").and_then(Value::as_str).is_none()
        || body.get("kind").and_then(Value::as_str).is_none()
    {
        return Err(ApiError::bad_request(format!(
            "invalid object type: {}, Kind={}",
            body.get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("/"),
            body.get("kind").and_then(Value::as_str).unwrap_or("")
        )));
    }
    settle_identity(route, Some(name), &mut body)?;
    let status = route.subresource.is_some();
    let owned = apply::owned_fields(&body, status, rt.status);
    let key = key(route, name);
    let dry_run = request.dry_run();
    let Some(stored) = state.objects.get(&key).cloned() else {
        if status {
            return Err(ApiError::not_found(rt, name));
        }
        let mut object = json!({
            "apiVersion": rt.api_version(),
            "kind": rt.kind,
            "metadata": body.get("metadata").cloned().unwrap_or_else(|| json!({})),
        });
        apply::apply(&mut object, None, &owned);
        let created = state.create(rt, object, false, dry_run)?;
        if !dry_run {
            state
                .applied
                .insert((key, manager.to_string(), status), owned);
        }
        return Ok((201, present(&created, request.metadata_only)));
    };
    let applied_key = (key.clone(), manager.to_string(), status);
    let mut object = stored.clone();
    apply::apply(&mut object, state.applied.get(&applied_key), &owned);
    if let (Some(rv), Some(meta)) = (meta_str(&body, "resourceVersion"), meta_mut(&mut object)) {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    let updated = state.update(&key, object, dry_run)?;
    if !dry_run {
        state.applied.insert(applied_key, owned);
    }
    Ok((200, present(&updated, request.metadata_only)))
}

/// `propagationPolicy`, preconditions and dry run of a DELETE, from the body's DeleteOptions
/// or the query.
fn delete_options(request: &Request) -> Result<(Propagation, Preconditions, bool), ApiError> {
    let options = match &request.body {
        Ok(Some(v)) => v.clone(),
        Ok(None) => json!({}),
        Err(e) => {
            return Err(ApiError::bad_request(format!(
                "DeleteOptions are not JSON: {e}"
            )));
        }
    };
    let policy = options
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .or_else(|| request.param("propagationPolicy"));
    let propagation = match policy {
        Some(p) => Propagation::parse(p)?,
        None => Propagation::Background,
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let preconditions = Preconditions {
        uid: text(options.pointer("/preconditions/uid")),
        resource_version: text(options.pointer("/preconditions/resourceVersion")),
    };
    let dry_run = request.dry_run()
        || options
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|v| v == "All"));
    Ok((propagation, preconditions, dry_run))
}

fn delete(
    state: &mut State,
    route: &Route,
    name: &str,
    request: &Request,
) -> Result<(u16, Value), ApiError> {
    let (propagation, preconditions, dry_run) = delete_options(request)?;
    match state.delete(&key(route, name), propagation, &preconditions, dry_run)? {
        Deleted::Pending(object) => Ok((200, present(&object, request.metadata_only))),
        Deleted::Removed(object) => Ok((
            200,
            deleted_status(route.rt, name, meta_str(&object, "uid").unwrap_or_default()),
        )),
    }
}

fn delete_collection(
    state: &mut State,
    route: &Route,
    request: &Request,
) -> Result<(u16, Value), ApiError> {
    let (propagation, preconditions, dry_run) = delete_options(request)?;
    let selectors = request.selectors()?;
    let keys: Vec<ObjectKey> = state
        .list(route.rt, route.namespace.as_deref(), &selectors)
        .map(|(k, _)| k.clone())
        .collect();
    let mut items = Vec::new();
    for key in keys {
        match state.delete(&key, propagation, &preconditions, dry_run) {
            Ok(Deleted::Pending(object) | Deleted::Removed(object)) => {
                items.push(present(&object, request.metadata_only));
            }
            // Collected already as a dependent of an earlier one.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok((
        200,
        json!({
            "apiVersion": route.rt.api_version(),
            "kind": format!("{}List", route.rt.kind),
            "metadata": {"resourceVersion": state.rv.to_string()},
            "items": items,
        }),
    ))
}
