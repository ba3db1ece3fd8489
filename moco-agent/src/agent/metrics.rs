//! `/metrics` of the agent: MOCO's `moco_instance_*` metrics, with the constant labels `name`
//! (the cluster) and `index` (the instance), in the OpenMetrics text format.
//!
//! | metric | type | what |
//! |---|---|---|
//! | `moco_instance_replication_delay_seconds` | gauge | the lag `/readyz` last measured (replicas) |
//! | `moco_instance_clone_count` | gauge, only increases | clones started |
//! | `moco_instance_clone_failure_count` | gauge, only increases | clones that failed |
//! | `moco_instance_clone_duration_seconds` | histogram | clones that succeeded |
//! | `moco_instance_clone_in_progress` | gauge | 1 while a clone runs |
//! | `moco_instance_log_rotation_count` | gauge, only increases | slow-log rotations |
//! | `moco_instance_log_rotation_failure_count` | gauge, only increases | failed rotations |
//! | `moco_instance_log_rotation_duration_seconds` | histogram | rotations |
//!
//! The counts are gauges that only increase: MOCO exports them as counters named without
//! `_total`, which OpenMetrics counters cannot be, and dashboards query these names.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of the OpenMetrics text format.
pub use moco_http::metrics::CONTENT_TYPE;

/// A gauge of seconds.
pub type Seconds = Gauge<f64, AtomicU64>;

/// The agent's metrics.
#[derive(Debug)]
pub struct AgentMetrics {
    registry: Registry,
    /// Replication lag in seconds.
    pub replication_delay: Seconds,
    /// Clones started.
    pub clone_count: Gauge,
    /// Clones failed.
    pub clone_failure_count: Gauge,
    /// Durations of successful clones.
    pub clone_duration: Histogram,
    /// 1 while a clone runs.
    pub clone_in_progress: Gauge,
    /// Rotations done.
    pub log_rotation_count: Gauge,
    /// Rotations failed.
    pub log_rotation_failure_count: Gauge,
    /// Durations of rotations.
    pub log_rotation_duration: Histogram,
}

impl AgentMetrics {
    /// The metrics of instance `index` of cluster `name`.
    pub fn new(name: &str, index: u32) -> Self {
        let mut root = Registry::with_prefix_and_labels(
            "moco_instance",
            [
                ("name".into(), name.to_owned().into()),
                ("index".into(), index.to_string().into()),
            ]
            .into_iter(),
        );
        let m = AgentMetrics {
            registry: Registry::default(),
            replication_delay: Seconds::default(),
            clone_count: Gauge::default(),
            clone_failure_count: Gauge::default(),
            clone_duration: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            clone_in_progress: Gauge::default(),
            log_rotation_count: Gauge::default(),
            log_rotation_failure_count: Gauge::default(),
            log_rotation_duration: Histogram::new(exponential_buckets(0.001, 4.0, 10)),
        };
        let r = &mut root;
        r.register(
            "replication_delay_seconds",
            "Replication delay of the instance in seconds",
            m.replication_delay.clone(),
        );
        r.register("clone_count", "Clones started", m.clone_count.clone());
        r.register(
            "clone_failure_count",
            "Clones that failed",
            m.clone_failure_count.clone(),
        );
        r.register(
            "clone_duration_seconds",
            "Seconds a successful clone took",
            m.clone_duration.clone(),
        );
        r.register(
            "clone_in_progress",
            "1 while a clone runs",
            m.clone_in_progress.clone(),
        );
        r.register(
            "log_rotation_count",
            "Slow query log rotations",
            m.log_rotation_count.clone(),
        );
        r.register(
            "log_rotation_failure_count",
            "Slow query log rotations that failed",
            m.log_rotation_failure_count.clone(),
        );
        r.register(
            "log_rotation_duration_seconds",
            "Seconds a rotation took",
            m.log_rotation_duration.clone(),
        );
        AgentMetrics {
            registry: root,
            ..m
        }
    }

    /// The exposition text.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// `/metrics`.
pub fn metrics_router(metrics: Arc<AgentMetrics>) -> Router {
    Router::new()
        .route("/metrics", get(serve))
        .with_state(metrics)
}

async fn serve(State(metrics): State<Arc<AgentMetrics>>) -> Response {
    moco_http::metrics::exposition(metrics.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_mocos() {
        let m = AgentMetrics::new("db", 2);
        m.clone_count.inc();
        m.replication_delay.set(1.5);
        let text = m.render().unwrap();
        assert!(
            text.contains("moco_instance_clone_count{name=\"db\",index=\"2\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("moco_instance_replication_delay_seconds{name=\"db\",index=\"2\"} 1.5\n"),
            "{text}"
        );
        for name in [
            "moco_instance_clone_failure_count",
            "moco_instance_clone_duration_seconds_bucket",
            "moco_instance_clone_in_progress",
            "moco_instance_log_rotation_count",
            "moco_instance_log_rotation_failure_count",
            "moco_instance_log_rotation_duration_seconds_count",
        ] {
            assert!(text.contains(name), "{name} missing:\n{text}");
        }
    }
}
