//! Stores of API objects kept up to date by watches: the Nodes, the scheduler and the
//! provisioner each read one instead of asking the API server on every turn.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// A store of every `K` the API server has, kept up to date by a task until `shutdown`;
/// `wake` is notified on each change so that the loop reading the store runs again. The
/// watch retries with backoff on its own (the API server restarting is no failure).
pub fn reflect<K>(api: Api<K>, wake: Arc<Notify>, shutdown: CancellationToken) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                item = stream.next() => match item {
                    Some(Ok(_)) => wake.notify_one(),
                    Some(Err(e)) => warn!("watching {}: {e} (retrying)", K::plural(&K::DynamicType::default())),
                    None => break,
                },
            }
        }
    });
    reader
}

/// Waits for the store's first list, or the shutdown (then false).
pub async fn ready<K>(store: &Store<K>, shutdown: &CancellationToken) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    tokio::select! {
        _ = shutdown.cancelled() => false,
        r = store.wait_until_ready() => r.is_ok(),
    }
}
