//! Watches: a stream of newline-delimited `{"type": ..., "object": ...}` events, as
//! `kube::Api::watch` and `kube::runtime::watcher` read them.
//!
//! * `resourceVersion` absent or `0`: ADDED events for the current objects first, then changes
//!   (the real server's "start at most recent" / "start at any").
//! * `resourceVersion=N`: the changes after N, replayed from the history; if N is older than the
//!   history (see [`super::FakeApiServer::compact_history`]) a single `ERROR` event with a 410
//!   `Expired` Status, and the stream ends.
//! * `sendInitialEvents=true` (kube's streaming-list mode): ADDED for the current objects, then a
//!   BOOKMARK annotated `k8s.io/initial-events-end: "true"`, then changes.
//! * `timeoutSeconds`: the stream ends after that long (tokio time).
//!
//! Other BOOKMARK events are not sent. Changes that make an object start or stop matching the
//! label selector arrive as ADDED or DELETED, as the real watch cache sends them.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{Value, json};

use super::Shared;
use super::request::{Request, present};
use super::route::Route;
use super::selector::Selectors;
use super::status::ApiError;
use super::store::{EventType, HistoryEvent};

/// Where one watch is and what it wants.
#[derive(Debug)]
struct Cursor {
    shared: Arc<Shared>,
    changes: tokio::sync::watch::Receiver<u64>,
    route: Route,
    selectors: Selectors,
    metadata_only: bool,
    /// Events up to this resourceVersion are queued or sent.
    seen: u64,
    queue: VecDeque<Bytes>,
    finished: bool,
    deadline: Option<tokio::time::Instant>,
    epoch: u64,
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

/// Starts a watch on `route` (a collection), answering 400 for bad parameters.
pub(super) fn start(
    shared: &Arc<Shared>,
    route: &Route,
    request: &Request,
) -> Result<Body, ApiError> {
    let selectors = request.selectors()?;
    let resource_version = request.param("resourceVersion").unwrap_or("");
    let initial_events = request.param("sendInitialEvents") == Some("true");
    let timeout = match request.param("timeoutSeconds") {
        None | Some("") => None,
        Some(text) => Some(
            text.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {text:?}")))?,
        ),
    };
    let from =
        match resource_version {
            "" | "0" => None,
            text => Some(text.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {text:?}"))
            })?),
        };
    // Subscribe before reading the state, so that no change falls in between.
    let changes = shared.subscribe();
    let mut cursor = Cursor {
        shared: Arc::clone(shared),
        changes,
        route: route.clone(),
        selectors,
        metadata_only: request.metadata_only,
        seen: 0,
        queue: VecDeque::new(),
        finished: false,
        deadline: timeout.map(|s| tokio::time::Instant::now() + Duration::from_secs(s)),
        epoch: 0,
    };
    {
        let state = shared.lock();
        cursor.epoch = state.watch_epoch;
        match from {
            Some(rv) if !initial_events => {
                if rv < state.compacted {
                    cursor.queue.push_back(line(
                        "ERROR",
                        ApiError::expired(rv, state.compacted).to_status(),
                    ));
                    cursor.finished = true;
                }
                cursor.seen = rv;
            }
            _ => {
                for (_, object) in
                    state.list(route.rt, route.namespace.as_deref(), &cursor.selectors)
                {
                    cursor
                        .queue
                        .push_back(line("ADDED", present(object, cursor.metadata_only)));
                }
                cursor.seen = state.rv;
                if initial_events {
                    cursor.queue.push_back(line(
                        "BOOKMARK",
                        json!({
                            "apiVersion": route.rt.api_version(),
                            "kind": route.rt.kind,
                            "metadata": {
                                "resourceVersion": state.rv.to_string(),
                                "annotations": {"k8s.io/initial-events-end": "true"},
                            },
                        }),
                    ));
                }
            }
        }
    }
    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        next(&mut cursor)
            .await
            .map(|bytes| (Ok::<_, Infallible>(bytes), cursor))
    });
    Ok(Body::from_stream(stream))
}

/// The next line of the watch, waiting for changes; `None` ends the stream.
async fn next(cursor: &mut Cursor) -> Option<Bytes> {
    loop {
        if let Some(bytes) = cursor.queue.pop_front() {
            return Some(bytes);
        }
        if cursor.finished {
            return None;
        }
        cursor.changes.borrow_and_update();
        {
            let state = cursor.shared.lock();
            if state.watch_epoch != cursor.epoch {
                return None;
            }
            if cursor.seen < state.compacted {
                cursor.queue.push_back(line(
                    "ERROR",
                    ApiError::expired(cursor.seen, state.compacted).to_status(),
                ));
                cursor.finished = true;
                continue;
            }
            let start = state.history.partition_point(|e| e.rv <= cursor.seen);
            for event in &state.history[start..] {
                if let Some(bytes) = as_seen(cursor, event) {
                    cursor.queue.push_back(bytes);
                }
            }
            cursor.seen = state.rv;
        }
        if !cursor.queue.is_empty() {
            continue;
        }
        let changed = cursor.changes.changed();
        let woke = match cursor.deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, changed).await.ok()?,
            None => changed.await,
        };
        // The sender lives as long as the fake; an error means it is gone.
        woke.ok()?;
    }
}

/// `event` as this watch sees it, if it sees it at all.
fn as_seen(cursor: &Cursor, event: &HistoryEvent) -> Option<Bytes> {
    if event.key.rt != cursor.route.rt
        || cursor
            .route
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != event.key.namespace)
    {
        return None;
    }
    let now = cursor.selectors.matches(&event.object);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| cursor.selectors.matches(p));
    let kind = match (event.kind, before, now) {
        (EventType::Added, _, true) => "ADDED",
        (EventType::Modified, true, true) => "MODIFIED",
        (EventType::Modified, false, true) => "ADDED",
        (EventType::Modified, true, false) => "DELETED",
        (EventType::Deleted, _, true) => "DELETED",
        _ => return None,
    };
    Some(line(kind, present(&event.object, cursor.metadata_only)))
}
