//! AdmissionReview fixtures as the API server posts them.

use std::collections::BTreeMap;

use moco_api::admission::StaticLookup;
use moco_core::validate::{ClusterReference, StorageClassFacts};
use serde_json::{Value, json};

use super::client::Response;

/// An AdmissionReview of `operation` on `object` (and `old`), as JSON text.
pub fn review(
    kind: &str,
    resource: &str,
    operation: &str,
    namespace: &str,
    name: &str,
    object: Value,
    old: Value,
) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{operation}-{name}"),
            "kind": {"group": "moco.cybozu.com", "version": "v1beta2", "kind": kind},
            "resource": {"group": "moco.cybozu.com", "version": "v1beta2", "resource": resource},
            "requestKind": {"group": "moco.cybozu.com", "version": "v1beta2", "kind": kind},
            "requestResource": {"group": "moco.cybozu.com", "version": "v1beta2", "resource": resource},
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
    .to_string()
}

/// A CREATE review of [`cluster`]`(name, replicas)` in namespace `default`.
pub fn create_cluster_review(name: &str, replicas: i64) -> String {
    review(
        "MySQLCluster",
        "mysqlclusters",
        "CREATE",
        "default",
        name,
        cluster(name, replicas),
        Value::Null,
    )
}

/// What the servers' tests look up: one default StorageClass `standard` (not expandable), and
/// in namespace `backup` a MySQLCluster `source` that uses the BackupPolicy `daily`.
pub fn static_lookup() -> StaticLookup {
    StaticLookup {
        storage_classes: vec![StorageClassFacts {
            name: "standard".into(),
            allow_volume_expansion: false,
            is_default: true,
        }],
        clusters: BTreeMap::from([(
            "backup".to_owned(),
            vec![ClusterReference {
                cluster_name: "source".into(),
                backup_policy_name: Some("daily".into()),
            }],
        )]),
        refused: Vec::new(),
    }
}

/// A MySQLCluster `name` in namespace `default` with `serverIDBase` 42.
pub fn cluster(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": name, "namespace": "default", "uid": "7d3f2c1a-0000-4000-8000-000000000001"},
        "spec": {
            "replicas": replicas,
            "serverIDBase": 42,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.8"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"}, "spec": {"resources": {"requests": {"storage": "10Gi"}}}}]
        }
    })
}

/// A daily BackupPolicy `name` in namespace `backup`.
pub fn policy(name: &str) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "BackupPolicy",
        "metadata": {"name": name, "namespace": "backup"},
        "spec": {
            "schedule": "@daily",
            "jobConfig": {"serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"}, "workVolume": {"emptyDir": {}}}
        }
    })
}

/// `response.allowed` of a 200 answer (panics on another status or without the field).
pub fn allowed(response: &Response) -> bool {
    assert_eq!(response.status, 200, "{}", response.body);
    response
        .json()
        .pointer("/response/allowed")
        .and_then(Value::as_bool)
        .unwrap_or_else(|| panic!("no response.allowed in {}", response.body))
}
