//! The CEL rules of the MySQLCluster CRD, evaluated client-side with kube's `cel` feature
//! against the generated schema (the same schema `moco crd` prints).

use kube::core::cel::{Validator, compile_schema};
use moco_api::crd::{backuppolicy_crd, mysqlcluster_crd, schema_of};
use serde_json::{Value, json};

fn schema() -> Value {
    match mysqlcluster_crd().and_then(|crd| schema_of(&crd)) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn cluster(spec_extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 3,
        "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster", "metadata": {"name": "c", "namespace": "ns"}, "spec": spec})
}

fn restore(source: &str) -> Value {
    json!({
        "sourceName": source,
        "sourceNamespace": "ns",
        "restorePoint": "2024-01-02T03:04:05Z",
        "jobConfig": {
            "serviceAccountName": "sa",
            "bucketConfig": {"bucketName": "b"},
            "workVolume": {"emptyDir": {}}
        }
    })
}

/// Messages of the failed rules, or an empty list.
fn failures(new: &Value, old: Option<&Value>) -> Vec<String> {
    match Validator::new().validate(&schema(), new, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    }
}

#[test]
fn rules_compile() {
    for crd in [mysqlcluster_crd(), backuppolicy_crd()] {
        let schema = match crd.and_then(|c| schema_of(&c)) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let compiled = compile_schema(&schema);
        assert!(
            !compiled.has_errors(),
            "{:?}",
            compiled.compilation_errors()
        );
    }
}

#[test]
fn odd_replicas() {
    for (replicas, ok) in [
        (1, true),
        (3, true),
        (5, true),
        (2, false),
        (0, false),
        (-1, false),
        (4, false),
    ] {
        let got = failures(&cluster(json!({"replicas": replicas})), None);
        assert_eq!(got.is_empty(), ok, "replicas {replicas}: {got:?}");
        if !ok {
            assert_eq!(
                got,
                vec!["spec.replicas: replicas must be a positive odd number"]
            );
        }
    }
}

#[test]
fn replicas_default_is_odd() {
    let mut c = cluster(json!({}));
    if let Some(spec) = c.pointer_mut("/spec").and_then(Value::as_object_mut) {
        spec.remove("replicas");
    }
    assert_eq!(failures(&c, None), Vec::<String>::new());
}

/// MOCO's CRD refuses a smaller `replicas`; this one lets a cluster shrink, and still refuses
/// an even size on update.
#[test]
fn replicas_may_decrease_to_an_odd_number() {
    let old = cluster(json!({"replicas": 5}));
    assert!(failures(&cluster(json!({"replicas": 3})), Some(&old)).is_empty());
    assert_eq!(
        failures(&cluster(json!({"replicas": 2})), Some(&old)),
        vec!["spec.replicas: replicas must be a positive odd number"]
    );
    assert!(failures(&cluster(json!({"replicas": 5})), Some(&old)).is_empty());
    assert!(failures(&cluster(json!({"replicas": 7})), Some(&old)).is_empty());
    // Transition rules do not apply on create.
    assert!(failures(&cluster(json!({"replicas": 3})), None).is_empty());
}

#[test]
fn restore_is_immutable() {
    let with = cluster(json!({"restore": restore("a")}));
    let without = cluster(json!({}));
    let edited = cluster(json!({"restore": restore("b")}));
    assert!(failures(&with, None).is_empty());
    assert!(failures(&with, Some(&with)).is_empty());
    assert!(failures(&without, Some(&without)).is_empty());
    assert_eq!(
        failures(&edited, Some(&with)),
        vec!["spec.restore: restore is not editable"]
    );
    let added = failures(&with, Some(&without));
    assert_eq!(
        added,
        vec![
            "spec.restore: restore is not editable: it cannot be added to or removed from an existing cluster"
        ]
    );
    let removed = failures(&without, Some(&with));
    assert_eq!(removed, added);
}

#[test]
fn replication_source_may_only_be_cleared() {
    let donor = cluster(json!({"replicationSourceSecretName": "donor"}));
    let other = cluster(json!({"replicationSourceSecretName": "other"}));
    let none = cluster(json!({}));
    let msg = "spec.replicationSourceSecretName: replicationSourceSecretName can only be removed on an existing cluster: replication can be initiated only with new clusters and the secret name cannot be changed";
    assert!(failures(&donor, None).is_empty(), "set on create");
    assert!(failures(&donor, Some(&donor)).is_empty(), "kept");
    assert!(failures(&none, Some(&donor)).is_empty(), "cleared");
    assert_eq!(failures(&other, Some(&donor)), vec![msg], "changed");
    assert_eq!(failures(&donor, Some(&none)), vec![msg], "added");
}
