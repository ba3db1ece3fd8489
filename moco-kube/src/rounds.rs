//! The facts each cluster's last clustering round observed, kept for the partition
//! controller: how far every instance got, without a second connection to any mysqld.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use moco_core::facts::ClusterFacts;

/// Facts by cluster (`namespace`, `name`).
type ByCluster = HashMap<(String, String), Arc<ClusterFacts>>;

/// The last round's facts per cluster, shared by the platforms that write them and the
/// readers.
#[derive(Clone, Debug, Default)]
pub struct LastRounds(Arc<Mutex<ByCluster>>);

impl LastRounds {
    fn map(&self) -> std::sync::MutexGuard<'_, ByCluster> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records what a round of `namespace/name` observed.
    pub fn record(&self, namespace: &str, name: &str, facts: &ClusterFacts) {
        self.map().insert(
            (namespace.to_owned(), name.to_owned()),
            Arc::new(facts.clone()),
        );
    }

    /// What the last round of `namespace/name` observed.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ClusterFacts>> {
        self.map()
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Forgets a cluster whose manager stopped: its facts would only grow stale.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.map().remove(&(namespace.to_owned(), name.to_owned()));
    }
}
