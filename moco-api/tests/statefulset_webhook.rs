//! The StatefulSet mutating webhook of the partitioned rollout, called directly: each case is
//! the object the API server would store once the answered patch is applied.

use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use moco_api::admission::mutate_statefulset;
use serde_json::{Value, json};

fn sts(replicas: i32, strategy: Value, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "moco-c", "namespace": "ns",
            "ownerReferences": [{"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
                                 "name": "c", "uid": "u", "controller": true}]
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "c"}},
            "serviceName": "moco-c",
            "updateStrategy": strategy,
            "template": {"spec": {"containers": [{"name": "mysqld", "image": image}]}}
        }
    })
}

fn rolling(partition: Option<i32>) -> Value {
    match partition {
        Some(p) => json!({"type": "RollingUpdate", "rollingUpdate": {"partition": p}}),
        None => json!({"type": "RollingUpdate"}),
    }
}

fn review(operation: &str, object: &Value, old: &Value) -> AdmissionReview<DynamicObject> {
    serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
            "resource": {"group": "apps", "version": "v1", "resource": "statefulsets"},
            "name": "moco-c",
            "namespace": "ns",
            "operation": operation,
            "userInfo": {"username": "u"},
            "object": object,
            "oldObject": old
        }
    }))
    .unwrap()
}

/// The object as stored: `object` with the webhook's patch applied (it must be allowed).
fn stored(operation: &str, object: &Value, old: &Value) -> Value {
    let answer = mutate_statefulset(review(operation, object, old));
    let response = answer.response.unwrap();
    assert!(response.allowed, "{}", response.result.message);
    let mut out = object.clone();
    if let Some(patch) = response.patch {
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        json_patch::patch(&mut out, &patch).unwrap();
    }
    out
}

fn strategy(v: &Value) -> Value {
    v["spec"]["updateStrategy"].clone()
}

#[test]
fn a_new_statefulset_is_held_at_its_replicas() {
    let new = sts(3, rolling(None), "m:1");
    assert_eq!(
        strategy(&stored("CREATE", &new, &Value::Null)),
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 3}})
    );
    // No updateStrategy at all (the API server defaults it after the webhooks on some paths).
    let mut bare = new.clone();
    bare["spec"]
        .as_object_mut()
        .unwrap()
        .remove("updateStrategy");
    assert_eq!(
        strategy(&stored("CREATE", &bare, &Value::Null)),
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 3}})
    );
    // Other rollingUpdate fields are kept.
    let mut unavailable = new;
    unavailable["spec"]["updateStrategy"]["rollingUpdate"] = json!({"maxUnavailable": 1});
    assert_eq!(
        strategy(&stored("CREATE", &unavailable, &Value::Null)),
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "partition": 3}})
    );
}

#[test]
fn a_spec_change_holds_every_pod_again_and_the_controllers_write_is_kept() {
    let old = sts(3, rolling(Some(1)), "m:1");
    // The partition controller's own write: only the partition differs.
    let lowered = sts(3, rolling(Some(0)), "m:1");
    assert_eq!(
        strategy(&stored("UPDATE", &lowered, &old)),
        rolling(Some(0))
    );
    // A metadata-only change keeps the partition as it is.
    let mut labelled = old.clone();
    labelled["metadata"]["labels"] = json!({"x": "y"});
    assert_eq!(
        strategy(&stored("UPDATE", &labelled, &old)),
        rolling(Some(1))
    );
    // A new template: every Pod held again.
    let edited = sts(3, rolling(Some(1)), "m:2");
    assert_eq!(strategy(&stored("UPDATE", &edited, &old)), rolling(Some(3)));
    // An apply that drops the partition with a new template (the operator's field manager
    // owned it since the webhook set it on its apply): held, never let go.
    let dropped = sts(3, rolling(None), "m:2");
    assert_eq!(
        strategy(&stored("UPDATE", &dropped, &old)),
        rolling(Some(3))
    );
    // Dropping it without any other change is not the controller's write either.
    let dropped = sts(3, rolling(None), "m:1");
    assert_eq!(
        strategy(&stored("UPDATE", &dropped, &old)),
        rolling(Some(3))
    );
    // Scaled: held at the new count.
    let scaled = sts(5, rolling(Some(1)), "m:1");
    assert_eq!(strategy(&stored("UPDATE", &scaled, &old)), rolling(Some(5)));
}

#[test]
fn the_force_annotation_removes_the_partition() {
    let mut forced = sts(3, rolling(Some(3)), "m:2");
    forced["metadata"]["annotations"] = json!({"moco.cybozu.com/force-rolling-update": "true"});
    let old = sts(3, rolling(Some(3)), "m:1");
    assert_eq!(
        strategy(&stored("UPDATE", &forced, &old)),
        json!({"type": "RollingUpdate"})
    );
    forced["spec"]["updateStrategy"] = rolling(None);
    assert_eq!(
        strategy(&stored("CREATE", &forced, &Value::Null)),
        json!({"type": "RollingUpdate"})
    );
    // Any other value is not the annotation.
    forced["metadata"]["annotations"] = json!({"moco.cybozu.com/force-rolling-update": "yes"});
    assert_eq!(
        strategy(&stored("CREATE", &forced, &Value::Null)),
        rolling(Some(3))
    );
}

#[test]
fn statefulsets_not_controlled_by_one_mysqlcluster_or_on_delete_are_left_alone() {
    let untouched = |object: &Value| {
        let answer = mutate_statefulset(review("CREATE", object, &Value::Null));
        let response = answer.response.unwrap();
        assert!(response.allowed);
        assert!(response.patch.is_none(), "{object}");
    };
    let mut other = sts(3, rolling(None), "m:1");
    other["metadata"]["ownerReferences"][0]["kind"] = json!("Deployment");
    untouched(&other);
    // MOCO's `&&`: the right kind in another group is not a MySQLCluster either.
    let mut group = sts(3, rolling(None), "m:1");
    group["metadata"]["ownerReferences"][0]["apiVersion"] = json!("example.com/v1");
    untouched(&group);
    let mut none = sts(3, rolling(None), "m:1");
    none["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    untouched(&none);
    let mut two = sts(3, rolling(None), "m:1");
    let owner = two["metadata"]["ownerReferences"][0].clone();
    two["metadata"]["ownerReferences"] = json!([owner.clone(), owner]);
    untouched(&two);
    untouched(&sts(3, json!({"type": "OnDelete"}), "m:1"));
}

#[test]
fn an_undecodable_object_is_refused_and_other_operations_pass() {
    let answer = mutate_statefulset(review("CREATE", &json!({"spec": 5}), &Value::Null));
    let response = answer.response.unwrap();
    assert!(!response.allowed);
    assert!(
        response.result.message.starts_with("cannot decode object"),
        "{}",
        response.result.message
    );
    let old = sts(3, rolling(Some(1)), "m:1");
    let answer = mutate_statefulset(review("DELETE", &Value::Null, &old));
    assert!(answer.response.unwrap().allowed);
}
