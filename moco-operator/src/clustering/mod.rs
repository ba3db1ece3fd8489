//! Clustering on Kubernetes: one manager (`moco_cluster::manager::Manager`, the same loop
//! `moco local` runs) per MySQLCluster, driving the [`platform::KubePlatform`]; started, woken,
//! paused and stopped by reconcile ([`crate::controller::ClusteringControl`]), and stopped by the
//! controller's cluster watch when a cluster is removed without its finalizer; the [`pods`]
//! watch keeps the Pods the rounds read and wakes a manager when a primary Pod is deleted or
//! asked to step down.

pub mod agent;
pub mod pods;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use kube::Client;
use moco_api::addresses::AddressResolver;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::manager::{Manager, ManagerConfig};
use moco_kube::metrics::{ClusterLabels, ClusterMetrics};
use moco_kube::platform::{InstanceCloner, KubePlatform, SqlConnector};
use moco_kube::pods::PodCache;
use moco_kube::rounds::LastRounds;
use tokio::sync::{Notify, watch};

use crate::controller::ClusteringControl;
use crate::reconcile::Clustering;
use moco_api::cluster::ClusterId;

/// A running manager.
struct Running {
    uid: String,
    shutdown: watch::Sender<bool>,
    waker: Arc<Notify>,
}

/// The managers of every cluster this process reconciles.
pub struct Managers {
    client: Client,
    addresses: Arc<dyn AddressResolver>,
    connector: Arc<dyn SqlConnector>,
    cloner: Option<Arc<dyn InstanceCloner>>,
    config: ManagerConfig,
    metrics: ClusterMetrics,
    pod_cache: Option<PodCache>,
    last_rounds: LastRounds,
    /// The controller's namespace: rotations of MOCO's passwords are kept in its Secrets.
    system_namespace: Option<String>,
    running: Mutex<HashMap<(String, String), Running>>,
}

impl fmt::Debug for Managers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Managers")
            .field("addresses", &self.addresses)
            .field("config", &self.config)
            .field("running", &self.running().len())
            .finish_non_exhaustive()
    }
}

impl Managers {
    /// No manager yet; each runs with `config` and reaches its instances through `addresses`
    /// and `connector`.
    pub fn new(
        client: Client,
        addresses: Arc<dyn AddressResolver>,
        connector: Arc<dyn SqlConnector>,
        cloner: Option<Arc<dyn InstanceCloner>>,
        config: ManagerConfig,
        metrics: ClusterMetrics,
    ) -> Self {
        Managers {
            client,
            addresses,
            connector,
            cloner,
            config,
            metrics,
            pod_cache: None,
            last_rounds: LastRounds::default(),
            system_namespace: None,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// The managers take the steps of rotations of MOCO's passwords kept in the controller's
    /// Secrets in `namespace`.
    #[must_use]
    pub fn with_system_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.system_namespace = Some(namespace.into());
        self
    }

    /// The managers' rounds read their Pods from `cache` (filled by [`pods::watch_pods`])
    /// instead of listing them each round.
    #[must_use]
    pub fn with_pod_cache(mut self, cache: PodCache) -> Self {
        self.pod_cache = Some(cache);
        self
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The clusters with a running manager, as `(namespace, name)`.
    pub fn clusters(&self) -> Vec<(String, String)> {
        let mut out: Vec<_> = self.running().keys().cloned().collect();
        out.sort();
        out
    }

    /// Starts the next round of `namespace/name` now, if its manager runs (never starts one:
    /// only reconcile does).
    pub fn wake(&self, namespace: &str, name: &str) {
        if let Some(r) = self.running().get(&(namespace.to_owned(), name.to_owned())) {
            r.waker.notify_one();
        }
    }

    /// Stops every manager (shutdown, or leadership lost).
    pub fn stop_all(&self) {
        for ((namespace, name), r) in self.running().drain() {
            let _ = r.shutdown.send(true);
            self.last_rounds.forget(&namespace, &name);
        }
    }

    fn start(&self, id: ClusterId) -> Running {
        let platform = KubePlatform::new(
            self.client.clone(),
            id.clone(),
            Arc::clone(&self.addresses),
            Arc::clone(&self.connector),
            self.cloner.clone(),
            self.metrics.clone(),
        );
        let platform = match &self.pod_cache {
            Some(cache) => platform.with_pod_cache(cache.clone()),
            None => platform,
        }
        .with_last_rounds(self.last_rounds.clone());
        let platform = match &self.system_namespace {
            Some(ns) => platform.with_system_namespace(ns.clone()),
            None => platform,
        };
        let manager = Manager::new(Arc::new(platform), self.config.clone());
        let waker = manager.waker();
        let (shutdown, rx) = watch::channel(false);
        tracing::info!(cluster = %id.name, namespace = %id.namespace, "clustering started");
        let span = tracing::info_span!("clustering", cluster = %id.name, namespace = %id.namespace);
        tokio::spawn(tracing::Instrument::instrument(
            async move { manager.run(rx).await },
            span,
        ));
        Running {
            uid: id.uid,
            shutdown,
            waker,
        }
    }
}

impl ClusteringControl for Managers {
    fn control(&self, cluster: &MySQLCluster, what: Clustering) {
        let Ok(id) = ClusterId::of(cluster) else {
            return;
        };
        let key = (id.namespace.clone(), id.name.clone());
        let mut running = self.running();
        match what {
            Clustering::Keep => {}
            Clustering::Run => match running.get(&key) {
                // Same cluster: wake it, so a spec change is acted on at once.
                Some(r) if r.uid == id.uid => r.waker.notify_one(),
                _ => {
                    // A new cluster of the same name replaces a stale manager.
                    if let Some(old) = running.remove(&key) {
                        let _ = old.shutdown.send(true);
                    }
                    let started = self.start(id);
                    running.insert(key, started);
                }
            },
            Clustering::Pause | Clustering::Stop => {
                if let Some(r) = running.remove(&key) {
                    let _ = r.shutdown.send(true);
                    self.last_rounds.forget(&key.0, &key.1);
                    tracing::info!(cluster = %key.1, namespace = %key.0, ?what, "clustering stopped");
                }
                let labels = ClusterLabels {
                    name: key.1.clone(),
                    namespace: key.0.clone(),
                };
                if what == Clustering::Pause {
                    self.metrics.clustering_paused(&labels);
                } else {
                    self.metrics.remove_cluster(&labels);
                }
            }
        }
    }
}

impl crate::partition::Rounds for Managers {
    fn last_round(
        &self,
        namespace: &str,
        cluster: &str,
    ) -> Option<Arc<moco_core::facts::ClusterFacts>> {
        self.last_rounds.get(namespace, cluster)
    }

    fn wake(&self, namespace: &str, cluster: &str) {
        Managers::wake(self, namespace, cluster);
    }
}
