//! Admission handlers called directly (no HTTP): operations that are passed through, and
//! lookups that fail (the webhook then refuses, as MOCO's does on an internal error).

use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use moco_api::admission::{
    ClusterLookup, LookupError, StaticLookup, mutate_mysqlcluster, validate_backuppolicy,
    validate_mysqlcluster,
};
use moco_core::validate::{ClusterReference, StorageClassFacts};
use serde_json::{Value, json};

struct Failing;

impl ClusterLookup for Failing {
    async fn may(
        &self,
        _who: &k8s_openapi::api::authentication::v1::UserInfo,
        access: &moco_api::admission::Access,
    ) -> Result<bool, LookupError> {
        Err(LookupError {
            what: format!("cannot ask whether the requester may {access}"),
            message: "connection refused".into(),
        })
    }

    async fn storage_classes(&self) -> Result<Vec<StorageClassFacts>, LookupError> {
        Err(LookupError {
            what: "cannot list StorageClasses".into(),
            message: "connection refused".into(),
        })
    }

    async fn clusters_in(&self, namespace: &str) -> Result<Vec<ClusterReference>, LookupError> {
        Err(LookupError {
            what: format!("cannot list MySQLClusters in namespace {namespace}"),
            message: "forbidden".into(),
        })
    }
}

fn cluster(storage: &str) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "replicas": 1,
            "serverIDBase": 5,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"}, "spec": {"resources": {"requests": {"storage": storage}}}}]
        }
    })
}

fn review(
    operation: &str,
    kind: &str,
    object: Value,
    old: Value,
) -> AdmissionReview<DynamicObject> {
    let value = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "moco.cybozu.com", "version": "v1beta2", "kind": kind},
            "resource": {"group": "moco.cybozu.com", "version": "v1beta2", "resource": "x"},
            "name": "c",
            "namespace": "ns",
            "operation": operation,
            "userInfo": {"username": "u"},
            "object": object,
            "oldObject": old
        }
    });
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
}

fn outcome(review: &AdmissionReview<DynamicObject>) -> (bool, String, bool) {
    let response = review
        .response
        .as_ref()
        .unwrap_or_else(|| panic!("no response"));
    (
        response.allowed,
        response.result.message.clone(),
        response.patch.is_some(),
    )
}

#[tokio::test]
async fn failed_lookups_refuse() {
    let grown = review("UPDATE", "MySQLCluster", cluster("2Gi"), cluster("1Gi"));
    let (allowed, message, _) = outcome(&validate_mysqlcluster(&Failing, grown).await);
    assert!(!allowed);
    assert_eq!(
        message,
        "internal error: cannot list StorageClasses: connection refused"
    );
    // No growth: StorageClasses are not needed, so a failing lookup does not matter.
    let same = review("UPDATE", "MySQLCluster", cluster("1Gi"), cluster("1Gi"));
    assert!(outcome(&validate_mysqlcluster(&Failing, same).await).0);
    let delete = review(
        "DELETE",
        "BackupPolicy",
        Value::Null,
        json!({"metadata": {"name": "c"}}),
    );
    let (allowed, message, _) = outcome(&validate_backuppolicy(&Failing, delete).await);
    assert!(!allowed);
    assert_eq!(
        message,
        "internal error: cannot list MySQLClusters in namespace ns: forbidden"
    );
    // A MySQLUser whose requester cannot be checked is refused: the webhook fails closed.
    let user = json!({
        "apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLUser",
        "metadata": {"name": "app", "namespace": "ns"},
        "spec": {"clusterName": "c", "passwordSecretKeyRef": {"name": "s", "key": "password"}},
    });
    let (allowed, message, _) = outcome(
        &moco_api::accounts::admission::admit_mysqluser(
            &Failing,
            review("CREATE", "MySQLUser", user, Value::Null),
        )
        .await,
    );
    assert!(!allowed);
    assert_eq!(
        message,
        "internal error: cannot ask whether the requester may get secrets \"s\" in namespace ns: connection refused"
    );
}

#[tokio::test]
async fn other_operations_pass() {
    let lookup = StaticLookup::default();
    let update = review("UPDATE", "MySQLCluster", cluster("1Gi"), cluster("1Gi"));
    assert_eq!(
        outcome(&mutate_mysqlcluster(update, 7)),
        (true, String::new(), false)
    );
    let delete = review("DELETE", "MySQLCluster", Value::Null, cluster("1Gi"));
    assert!(outcome(&validate_mysqlcluster(&lookup, delete).await).0);
    let connect = review("CONNECT", "BackupPolicy", Value::Null, Value::Null);
    assert!(outcome(&validate_backuppolicy(&lookup, connect).await).0);
}

#[tokio::test]
async fn undecodable_objects_are_refused() {
    let mut broken = cluster("1Gi");
    if let Some(spec) = broken.pointer_mut("/spec").and_then(Value::as_object_mut) {
        spec.remove("podTemplate");
    }
    let (allowed, message, _) = outcome(
        &validate_mysqlcluster(
            &StaticLookup::default(),
            review("CREATE", "MySQLCluster", broken, Value::Null),
        )
        .await,
    );
    assert!(!allowed);
    assert!(
        message.starts_with("cannot decode object: missing field `podTemplate`"),
        "{message}"
    );
}

/// Issue 12, item 7: an update omitting `serverIDBase` was denied by the webhook ("must be a
/// positive integer, got 0") while `moco validate --old` passed it. Both now run the same
/// mutation: the stored value is kept, and validation then sees it.
#[tokio::test]
async fn an_update_omitting_server_id_base_keeps_the_stored_one() {
    let lookup = StaticLookup::default();
    let mut omitted = cluster("1Gi");
    if let Some(spec) = omitted.pointer_mut("/spec").and_then(Value::as_object_mut) {
        spec.remove("serverIDBase");
    }
    let update = review("UPDATE", "MySQLCluster", omitted.clone(), cluster("1Gi"));
    let mutated = mutate_mysqlcluster(update, 7);
    let (allowed, _, patched) = outcome(&mutated);
    assert!(allowed && patched);
    let patch = mutated
        .response
        .as_ref()
        .and_then(|r| r.patch.clone())
        .unwrap_or_default();
    let ops: Value = serde_json::from_slice(&patch).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/spec/serverIDBase", "value": 5}])
    );
    // What the API server then validates: the object with the patch applied.
    let mut applied = omitted;
    json_patch::patch(
        &mut applied,
        &serde_json::from_value::<json_patch::Patch>(ops).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let validated = validate_mysqlcluster(
        &lookup,
        review("UPDATE", "MySQLCluster", applied, cluster("1Gi")),
    )
    .await;
    assert!(outcome(&validated).0, "{:?}", outcome(&validated));
    // A different value is not touched: validation refuses the change, as MOCO does.
    let mut changed = cluster("1Gi");
    changed["spec"]["serverIDBase"] = json!(9);
    let mutated = mutate_mysqlcluster(review("UPDATE", "MySQLCluster", changed, cluster("1Gi")), 7);
    assert_eq!(outcome(&mutated), (true, String::new(), false));
}
