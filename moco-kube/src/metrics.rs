//! The per-cluster metrics with MOCO's names, labels and buckets: what reconcile, the
//! clustering rounds on Kubernetes ([`crate::platform::KubePlatform`]) and the partitioned
//! rollout update. The operator registers them on its `/metrics`; `kubectl moco`, which runs
//! the same platform to gather, keeps them unregistered.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `moco_cluster_checks_total`, `…_errors_total`, `…_switchover_total`, `…_failover_total` | counter | `name`, `namespace` |
//! | `moco_cluster_available`, `…_healthy`, `…_replicas`, `…_ready_replicas`, `…_errant_replicas` | gauge | `name`, `namespace` |
//! | `moco_cluster_processing_time_seconds` | histogram | `name`, `namespace` |
//! | `moco_cluster_round_duration_seconds` | histogram | `name`, `namespace` |
//! | `moco_cluster_last_round_timestamp_seconds` | gauge | `name`, `namespace` |
//! | `moco_cluster_volume_resized_total`, `…_errors_total` | counter | `name`, `namespace` |
//! | `moco_cluster_statefulset_recreate_total`, `…_errors_total` | counter | `name`, `namespace` |
//! | `moco_cluster_reconciliation_stopped`, `moco_cluster_clustering_stopped` | gauge | `name`, `namespace` |
//! | `moco_controller_reconcile_total` | counter | `result` (`success`, or the failed step) , `category` |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of the per-cluster metrics (MOCO's).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ClusterLabels {
    /// The MySQLCluster's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
}

/// Labels of MOCO's `moco_cluster_partition_update_retries_total`: the namespace alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct NamespaceLabels {
    /// The namespace.
    pub namespace: String,
}

/// Labels of `moco_controller_reconcile_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `success`, or the step that failed.
    pub result: &'static str,
    /// `none` on success; else the error category (`input`, `api`, `conflict`).
    pub category: &'static str,
}

/// A gauge that can hold NaN (MOCO's value while clustering is paused).
pub type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// MOCO's buckets of `moco_cluster_processing_time_seconds`.
pub const PROCESSING_TIME_BUCKETS: [f64; 11] =
    [0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 30.0];

fn processing_histogram() -> Histogram {
    Histogram::new(PROCESSING_TIME_BUCKETS)
}

/// Buckets of `moco_cluster_round_duration_seconds`: a round that waits for a silent instance
/// takes the detection window (1.5 s), one whose step runs into its limit 30 s or more, a
/// clone up to 600 s.
pub const ROUND_DURATION_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 600.0,
];

fn round_histogram() -> Histogram {
    Histogram::new(ROUND_DURATION_BUCKETS)
}

/// A family of histograms with MOCO's buckets.
pub type HistogramFamily = Family<ClusterLabels, Histogram, fn() -> Histogram>;

/// The metrics reconcile and clustering update, per cluster where MOCO has them.
#[derive(Debug, Clone)]
pub struct ClusterMetrics {
    /// Clustering rounds run.
    pub checks: Family<ClusterLabels, Counter>,
    /// Clustering rounds that failed.
    pub errors: Family<ClusterLabels, Counter>,
    /// 1 when the cluster is Available, 0 when not, NaN while clustering is paused.
    pub available: Family<ClusterLabels, FloatGauge>,
    /// 1 when the cluster is Healthy, 0 when not, NaN while clustering is paused.
    pub healthy: Family<ClusterLabels, FloatGauge>,
    /// Switchovers done.
    pub switchover: Family<ClusterLabels, Counter>,
    /// Failovers done.
    pub failover: Family<ClusterLabels, Counter>,
    /// `spec.replicas`.
    pub replicas: Family<ClusterLabels, FloatGauge>,
    /// Ready instances.
    pub ready_replicas: Family<ClusterLabels, FloatGauge>,
    /// Instances with errant transactions.
    pub errant_replicas: Family<ClusterLabels, FloatGauge>,
    /// Seconds from observing the cluster to its decision, per round.
    pub processing_time: HistogramFamily,
    /// Seconds of whole rounds, steps included.
    pub round_duration: HistogramFamily,
    /// When the last round ended (Unix seconds): `time() - it` is how long the manager has
    /// not finished one, which an alert can watch.
    pub last_round: Family<ClusterLabels, FloatGauge>,
    /// Rounds that grew at least one PVC.
    pub volume_resized: Family<ClusterLabels, Counter>,
    /// Rounds whose PVC growth failed.
    pub volume_resized_errors: Family<ClusterLabels, Counter>,
    /// StatefulSets re-created for new claim templates: deleted (orphaning the Pods) and
    /// created again, counted once created.
    pub statefulset_recreate: Family<ClusterLabels, Counter>,
    /// Rounds whose re-creation failed: the deletion, the wait for it, or the creation
    /// again, which every round retries (and counts) until it succeeds.
    pub statefulset_recreate_errors: Family<ClusterLabels, Counter>,
    /// 1 while the cluster is annotated `reconciliation-stopped`.
    pub reconciliation_stopped: Family<ClusterLabels, Gauge>,
    /// 1 while the cluster is annotated `clustering-stopped`.
    pub clustering_stopped: Family<ClusterLabels, Gauge>,
    /// Reconcile rounds by outcome.
    pub reconcile: Family<ReconcileLabels, Counter>,
    /// The StatefulSet's Pods on its current revision (`status.currentReplicas`).
    pub current_replicas: Family<ClusterLabels, FloatGauge>,
    /// Its Pods on the update revision (`status.updatedReplicas`).
    pub updated_replicas: Family<ClusterLabels, FloatGauge>,
    /// When the partition was last lowered (Unix seconds).
    pub last_partition_updated: Family<ClusterLabels, FloatGauge>,
    /// Partition updates put off by `--partition-update-interval`.
    pub partition_update_retries: Family<NamespaceLabels, Counter>,
    /// 1 while a rollout is stalled on an updated Pod that does not become Ready.
    pub rollout_stalled: Family<ClusterLabels, Gauge>,
}

impl Default for ClusterMetrics {
    fn default() -> Self {
        ClusterMetrics {
            checks: Family::default(),
            errors: Family::default(),
            available: Family::default(),
            healthy: Family::default(),
            switchover: Family::default(),
            failover: Family::default(),
            replicas: Family::default(),
            ready_replicas: Family::default(),
            errant_replicas: Family::default(),
            processing_time: Family::new_with_constructor(processing_histogram),
            round_duration: Family::new_with_constructor(round_histogram),
            last_round: Family::default(),
            volume_resized: Family::default(),
            volume_resized_errors: Family::default(),
            statefulset_recreate: Family::default(),
            statefulset_recreate_errors: Family::default(),
            reconciliation_stopped: Family::default(),
            clustering_stopped: Family::default(),
            reconcile: Family::default(),
            current_replicas: Family::default(),
            updated_replicas: Family::default(),
            last_partition_updated: Family::default(),
            partition_update_retries: Family::default(),
            rollout_stalled: Family::default(),
        }
    }
}

impl ClusterMetrics {
    /// Registers every series with `registry` (the controller's `/metrics`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "moco_cluster_checks",
            "The number of times MOCO checked the cluster",
            self.checks.clone(),
        );
        registry.register(
            "moco_cluster_errors",
            "The number of times MOCO encountered errors when managing the cluster",
            self.errors.clone(),
        );
        registry.register(
            "moco_cluster_available",
            "1 if the cluster is available, 0 otherwise",
            self.available.clone(),
        );
        registry.register(
            "moco_cluster_healthy",
            "1 if the cluster is running without any problems, 0 otherwise",
            self.healthy.clone(),
        );
        registry.register(
            "moco_cluster_switchover",
            "The number of times MOCO changed the live primary instance",
            self.switchover.clone(),
        );
        registry.register(
            "moco_cluster_failover",
            "The number of times MOCO changed the failed primary instance",
            self.failover.clone(),
        );
        registry.register(
            "moco_cluster_replicas",
            "The number of mysqld instances in the cluster",
            self.replicas.clone(),
        );
        registry.register(
            "moco_cluster_ready_replicas",
            "The number of ready mysqld instances in the cluster",
            self.ready_replicas.clone(),
        );
        registry.register(
            "moco_cluster_errant_replicas",
            "The number of mysqld instances that have errant transactions",
            self.errant_replicas.clone(),
        );
        registry.register(
            "moco_cluster_processing_time_seconds",
            "The length of time in seconds processing the cluster",
            self.processing_time.clone(),
        );
        registry.register(
            "moco_cluster_round_duration_seconds",
            "The length of time in seconds of a whole clustering round, steps included",
            self.round_duration.clone(),
        );
        registry.register(
            "moco_cluster_last_round_timestamp_seconds",
            "When the last clustering round ended, in seconds since the epoch",
            self.last_round.clone(),
        );
        registry.register(
            "moco_cluster_volume_resized",
            "The number of successful volume resizes",
            self.volume_resized.clone(),
        );
        registry.register(
            "moco_cluster_volume_resized_errors",
            "The number of failed volume resizes",
            self.volume_resized_errors.clone(),
        );
        registry.register(
            "moco_cluster_statefulset_recreate",
            "The number of times the StatefulSet was deleted and re-created",
            self.statefulset_recreate.clone(),
        );
        registry.register(
            "moco_cluster_statefulset_recreate_errors",
            "The number of failed StatefulSet re-creations",
            self.statefulset_recreate_errors.clone(),
        );
        registry.register(
            "moco_cluster_reconciliation_stopped",
            "1 if reconciliation of the cluster is stopped",
            self.reconciliation_stopped.clone(),
        );
        registry.register(
            "moco_cluster_clustering_stopped",
            "1 if clustering of the cluster is stopped",
            self.clustering_stopped.clone(),
        );
        registry.register(
            "moco_cluster_current_replicas",
            "The number of current replicas",
            self.current_replicas.clone(),
        );
        registry.register(
            "moco_cluster_updated_replicas",
            "The number of updated replicas",
            self.updated_replicas.clone(),
        );
        registry.register(
            "moco_cluster_last_partition_updated",
            "The timestamp of the last successful partition update",
            self.last_partition_updated.clone(),
        );
        registry.register(
            "moco_cluster_partition_update_retries",
            "The number of times the partition update was retried",
            self.partition_update_retries.clone(),
        );
        registry.register(
            "moco_cluster_rollout_stalled",
            "1 while a rollout waits on an updated Pod that failed or stays not Ready",
            self.rollout_stalled.clone(),
        );
        registry.register(
            "moco_controller_reconcile",
            "MySQLCluster reconcile rounds by result (success or the failed step) and error category",
            self.reconcile.clone(),
        );
    }

    /// Forgets every series of a deleted cluster.
    pub fn remove_cluster(&self, labels: &ClusterLabels) {
        for family in [
            &self.volume_resized,
            &self.volume_resized_errors,
            &self.statefulset_recreate,
            &self.statefulset_recreate_errors,
            &self.checks,
            &self.errors,
            &self.switchover,
            &self.failover,
        ] {
            family.remove(labels);
        }
        for family in [
            &self.available,
            &self.healthy,
            &self.replicas,
            &self.ready_replicas,
            &self.errant_replicas,
            &self.last_round,
            &self.current_replicas,
            &self.updated_replicas,
            &self.last_partition_updated,
        ] {
            family.remove(labels);
        }
        self.rollout_stalled.remove(labels);
        self.processing_time.remove(labels);
        self.round_duration.remove(labels);
        self.reconciliation_stopped.remove(labels);
        self.clustering_stopped.remove(labels);
    }

    /// Clustering paused: the state gauges say nothing is known (NaN), as in MOCO.
    pub fn clustering_paused(&self, labels: &ClusterLabels) {
        for family in [
            &self.available,
            &self.healthy,
            &self.ready_replicas,
            &self.errant_replicas,
        ] {
            family.get_or_create(labels).set(f64::NAN);
        }
    }
}
