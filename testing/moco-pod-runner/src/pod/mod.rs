//! The Pods: every Pod bound to one of the runner's Nodes gets a worker ([`worker`]) that
//! lives it as the kubelet would; this module watches the API server and hands each worker its
//! Pod's updates.

pub mod backoff;
pub mod exec;
pub mod hosts;
pub mod ips;
pub mod launch;
pub mod probe;
pub mod status;
pub mod worker;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::images::ImageTable;
use ips::IpBook;
use worker::{Msg, Shared};

/// The host programs the image table maps images to.
#[derive(Debug, Clone)]
pub struct Programs {
    /// moco-rs's `moco` binary.
    pub moco: PathBuf,
    /// Debian's `prometheus-mysqld-exporter`.
    pub mysqld_exporter: PathBuf,
    /// The directory of cert-manager's programs (`--kube-bin`).
    pub kube_bin: Option<PathBuf>,
}

/// Why the Pod loop stopped.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// The image table's scripts could not be written.
    #[error("writing the image table's scripts into {path}: {source}")]
    Images {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs the Pods of the runner's Nodes until `shutdown`; then stops every container and
/// returns once all are gone.
pub async fn run(
    ctx: Arc<Context>,
    programs: Programs,
    shutdown: CancellationToken,
) -> Result<(), PodError> {
    let scripts = ctx.state_dir.join("images");
    let images = ImageTable::prepare(
        programs.moco,
        programs.mysqld_exporter,
        scripts.clone(),
        programs.kube_bin,
    )
    .map_err(|source| PodError::Images {
        path: scripts,
        source,
    })?;
    let shared = Arc::new(Shared {
        ips: Mutex::new(IpBook::load(ctx.state_dir.join("ips.json"))),
        hosts: watch::channel(BTreeMap::new()).0,
        images,
        ctx: ctx.clone(),
    });
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let stream = watcher(api, watcher::Config::default()).boxed();
    tokio::pin!(stream);
    let mut workers: HashMap<String, mpsc::Sender<Msg>> = HashMap::new();
    let mut tasks: JoinSet<String> = JoinSet::new();
    let stop_workers = shutdown.child_token();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok(uid) = done {
                    workers.remove(&uid);
                }
            }
            event = stream.next() => match event {
                None => break,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching Pods");
                }
                Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => {
                    dispatch(&shared, &mut workers, &mut tasks, &stop_workers, pod).await;
                }
                Some(Ok(watcher::Event::Delete(pod))) => {
                    let uid = pod.metadata.uid.clone().unwrap_or_default();
                    if let Some(tx) = workers.remove(&uid) {
                        let _ = tx.send(Msg::Gone).await;
                    }
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
            }
        }
    }
    stop_workers.cancel();
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn dispatch(
    shared: &Arc<Shared>,
    workers: &mut HashMap<String, mpsc::Sender<Msg>>,
    tasks: &mut JoinSet<String>,
    shutdown: &CancellationToken,
    pod: Pod,
) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let pod = Arc::new(pod);
    if let Some(tx) = workers.get(&uid) {
        // A worker busy stopping may not read for a while: never block the watch on it.
        if tx.try_send(Msg::Update(pod.clone())).is_err() {
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(Msg::Update(pod)).await;
            });
        }
        return;
    }
    let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
        return;
    };
    let Some(node) = shared
        .ctx
        .network
        .nodes
        .iter()
        .find(|n| n.name == node_name)
        .cloned()
    else {
        return;
    };
    let (tx, rx) = mpsc::channel(16);
    workers.insert(uid.clone(), tx);
    let shared = shared.clone();
    let token = shutdown.clone();
    tasks.spawn(async move {
        worker::run(shared, pod, node, rx, token).await;
        uid
    });
}
