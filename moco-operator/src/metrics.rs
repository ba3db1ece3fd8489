//! `/metrics`: the controller's metrics in the OpenMetrics text format, with MOCO's names so
//! that existing dashboards keep working. The per-cluster series (`moco_cluster_…`,
//! `moco_controller_reconcile_total`) are `moco_kube::metrics::ClusterMetrics`, which the
//! Kubernetes platform updates too; this module registers them with the controller's own.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `moco_controller_info` | gauge, always 1 | `version`, `namespace`, `reconciliation="leader-elected"` |
//! | `moco_controller_webhook_requests_total` | counter | `path`, `result` (allowed, denied, error) |
//! | `controller_runtime_webhook_requests_total` | counter | `code`, `webhook` |
//! | `moco_cluster_…`, `moco_controller_reconcile_total` | (`moco_kube::metrics`) | |

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use moco_kube::metrics::ClusterMetrics;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use moco_api::accounts::{PATH_VALIDATE_MYSQLDATABASE, PATH_VALIDATE_MYSQLUSER};
use moco_api::labels::{
    PATH_MUTATE_MYSQLCLUSTER, PATH_MUTATE_STATEFULSET, PATH_VALIDATE_BACKUPPOLICY,
    PATH_VALIDATE_MYSQLCLUSTER,
};
/// The content type of the OpenMetrics text format that [`Metrics::render`] writes.
pub use moco_http::metrics::CONTENT_TYPE;

/// The webhook paths served (each counted, from zero).
pub const WEBHOOK_PATHS: [&str; 6] = [
    PATH_MUTATE_MYSQLCLUSTER,
    PATH_MUTATE_STATEFULSET,
    PATH_VALIDATE_BACKUPPOLICY,
    PATH_VALIDATE_MYSQLCLUSTER,
    PATH_VALIDATE_MYSQLUSER,
    PATH_VALIDATE_MYSQLDATABASE,
];

/// How a webhook request ended (the `result` label of the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookResult {
    /// Answered with `allowed: true`.
    Allowed,
    /// Answered with `allowed: false` by a rule.
    Denied,
    /// Not decided: no AdmissionReview in the answer (undecodable request), or a refusal because
    /// a lookup failed (status code 5xx).
    Error,
}

impl WebhookResult {
    /// Every result, in label order.
    pub const ALL: [WebhookResult; 3] = [
        WebhookResult::Allowed,
        WebhookResult::Denied,
        WebhookResult::Error,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookResult::Allowed => "allowed",
            WebhookResult::Denied => "denied",
            WebhookResult::Error => "error",
        }
    }
}

/// Labels of `moco_controller_info`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct InfoLabels {
    version: &'static str,
    namespace: String,
    /// `leader-elected`: the replica holding the Lease reconciles.
    reconciliation: &'static str,
}

/// Labels of `moco_controller_webhook_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    path: &'static str,
    result: WebhookResult,
}

/// Labels of `controller_runtime_webhook_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CodeLabels {
    code: u16,
    webhook: &'static str,
}

impl EncodeLabelValue for WebhookResult {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// The controller's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    by_result: Family<ResultLabels, Counter>,
    by_code: Family<CodeLabels, Counter>,
    /// What reconcile counts.
    pub cluster: ClusterMetrics,
}

impl Metrics {
    /// Metrics of a controller running in `namespace`; every webhook path/result counter starts
    /// at zero, so that a rate over it exists before the first request.
    pub fn new(namespace: &str) -> Self {
        let mut registry = Registry::default();
        let info = Family::<InfoLabels, Gauge>::default();
        info.get_or_create(&InfoLabels {
            version: env!("CARGO_PKG_VERSION"),
            namespace: namespace.to_owned(),
            reconciliation: "leader-elected",
        })
        .set(1);
        registry.register(
            "moco_controller_info",
            "Build and mode of the moco-rs controller; always 1. reconciliation=leader-elected: \
             the replica holding the leader Lease reconciles, every replica serves the webhooks",
            info,
        );
        let by_result = Family::<ResultLabels, Counter>::default();
        for path in WEBHOOK_PATHS {
            for result in WebhookResult::ALL {
                // Creating the series is the point; the guard is dropped at once.
                let _ = by_result.get_or_create(&ResultLabels { path, result });
            }
        }
        registry.register(
            "moco_controller_webhook_requests",
            "Admission requests by webhook path and result (allowed, denied, error)",
            by_result.clone(),
        );
        let by_code = Family::<CodeLabels, Counter>::default();
        registry.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code",
            by_code.clone(),
        );
        let cluster = ClusterMetrics::default();
        cluster.register(&mut registry);
        Metrics {
            registry,
            by_result,
            by_code,
            cluster,
        }
    }

    /// Counts one request to a webhook path; other paths are not counted.
    pub fn record(&self, path: &str, result: WebhookResult, code: u16) {
        let Some(path) = WEBHOOK_PATHS.into_iter().find(|p| *p == path) else {
            return;
        };
        self.by_result
            .get_or_create(&ResultLabels { path, result })
            .inc();
        self.by_code
            .get_or_create(&CodeLabels {
                code,
                webhook: path,
            })
            .inc();
    }

    /// The metrics in the OpenMetrics text format (ending with `# EOF`).
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// `/metrics`.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .with_state(metrics)
}

async fn serve_metrics(State(metrics): State<Arc<Metrics>>) -> Response {
    moco_http::metrics::exposition(metrics.render())
}

#[cfg(test)]
mod tests {
    use moco_kube::metrics::ClusterLabels;

    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let metrics = Metrics::new("a\"b\\c\nd");
        let text = metrics.render().unwrap_or_default();
        assert!(text.contains(r#"namespace="a\"b\\c\nd""#), "{text}");
    }

    /// MOCO's clustering series, with its names, labels and buckets; NaN while paused; gone
    /// with the cluster.
    #[test]
    fn clustering_series_have_mocos_names() {
        let metrics = Metrics::new("ns");
        let l = ClusterLabels {
            name: "db".into(),
            namespace: "app".into(),
        };
        let c = &metrics.cluster;
        c.checks.get_or_create(&l).inc();
        c.healthy.get_or_create(&l).set(1.0);
        c.processing_time.get_or_create(&l).observe(0.3);
        let text = metrics.render().unwrap_or_default();
        for line in [
            r#"moco_cluster_checks_total{name="db",namespace="app"} 1"#,
            r#"moco_cluster_healthy{name="db",namespace="app"} 1.0"#,
            r#"moco_cluster_processing_time_seconds_bucket{le="0.25",name="db",namespace="app"} 0"#,
            r#"moco_cluster_processing_time_seconds_bucket{le="0.5",name="db",namespace="app"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        c.clustering_paused(&l);
        let text = metrics.render().unwrap_or_default();
        assert!(
            text.contains(r#"moco_cluster_healthy{name="db",namespace="app"} NaN"#),
            "{text}"
        );
        c.remove_cluster(&l);
        let text = metrics.render().unwrap_or_default();
        assert!(!text.contains(r#"name="db""#), "{text}");
    }

    #[test]
    fn only_webhook_paths_are_counted() {
        let metrics = Metrics::new("ns");
        metrics.record(WEBHOOK_PATHS[0], WebhookResult::Denied, 200);
        metrics.record("/healthz", WebhookResult::Allowed, 200);
        let text = metrics.render().unwrap_or_default();
        let denied = format!(
            "moco_controller_webhook_requests_total{{path=\"{}\",result=\"denied\"}} 1",
            WEBHOOK_PATHS[0]
        );
        assert!(text.contains(&denied), "{text}");
        assert!(!text.contains("/healthz"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
