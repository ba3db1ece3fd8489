//! The ValidatingAdmissionPolicy `moco-delete-validator` of `deploy/` and of the Helm chart,
//! applied client-side to Pod DELETE requests as the API server applies it: the request must
//! match `matchConstraints` (the resource rule, and the `objectSelector` on the old object's
//! labels), every `matchCondition` must hold, and then each validation decides.
//!
//! kube-cel's schema-less VAP evaluator escapes every map key (as for CRD property names), so
//! `annotations['moco.cybozu.com/prevent-delete']` would never match there. Each expression is
//! therefore evaluated as a rule over a schema in which `oldObject.metadata.annotations` is a
//! string map, as it is for the API server's typed Pod, with `oldObject` bound to
//! `self.oldObject` and `request` to `self.request`.

use std::collections::BTreeMap;

use kube::core::cel::Validator;
use moco_api::labels::{
    APP_MYSQL, APP_MYSQL_BACKUP, CREATED_BY, LABEL_CREATED_BY, LABEL_INSTANCE, LABEL_NAME,
};
use serde_json::{Value, json};

const DEPLOY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/admission-policy.yaml"
);
const CHART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../charts/moco/templates/admission-policy.yaml"
);

/// The policy object of `path`; the chart's template lines (`{{ ... }}`) are dropped, the
/// chart having no value inside the policy.
fn policy(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("{{"))
        .map(|l| format!("{l}\n"))
        .collect();
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let policy = docs
        .into_iter()
        .find(|d| d.pointer("/kind") == Some(&json!("ValidatingAdmissionPolicy")))
        .unwrap_or_else(|| panic!("no ValidatingAdmissionPolicy in {path}"));
    assert_eq!(
        policy.pointer("/metadata/name"),
        Some(&json!("moco-delete-validator"))
    );
    assert_eq!(
        policy.pointer("/spec/matchConstraints/resourceRules/0/operations"),
        Some(&json!(["DELETE"]))
    );
    assert_eq!(
        policy.pointer("/spec/matchConstraints/resourceRules/0/resources"),
        Some(&json!(["pods"]))
    );
    policy
}

/// Whether a `LabelSelector` (`matchLabels`, `matchExpressions` with `In`, `NotIn`, `Exists`,
/// `DoesNotExist`) selects `labels`; an absent selector selects everything.
fn selects(selector: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let by_label = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    let by_expression = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let value = labels.get(key).map(String::as_str);
            match e["operator"].as_str() {
                Some("In") => value.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => !value.is_some_and(|v| values.contains(&v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                other => panic!("operator {other:?}"),
            }
        });
    by_label && by_expression
}

/// Evaluates `expressions` (each `(rule, messageExpression)`) over `input`; the messages of
/// those that fail.
fn evaluate(expressions: &[(String, String)], input: &Value) -> Vec<String> {
    let bind = |e: &str| {
        e.replace("oldObject", "self.oldObject")
            .replace("request.", "self.request.")
    };
    let rules: Vec<Value> = expressions
        .iter()
        .map(|(rule, message)| {
            let mut r = json!({"rule": bind(rule)});
            if !message.is_empty() {
                r["messageExpression"] = json!(bind(message));
            }
            r
        })
        .collect();
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": rules,
        "properties": {
            "request": {
                "type": "object",
                "properties": {"userInfo": {"type": "object", "properties": {
                    "username": {"type": "string"}
                }}}
            },
            "oldObject": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "metadata": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "namespace": {"type": "string"},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "annotations": {"type": "object", "additionalProperties": {"type": "string"}}
                        }
                    }
                }
            }
        }
    });
    match Validator::new().validate(&schema, input, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.message.clone()).collect(),
    }
}

fn list(policy: &Value, pointer: &str, text: &str, message: &str) -> Vec<(String, String)> {
    policy
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| {
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (field(text), field(message))
        })
        .collect()
}

/// A Pod with `labels` and `annotations`.
fn pod(labels: &[(&str, &str)], annotations: Value) -> Value {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "moco-test-0", "namespace": "default",
                     "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "mysqld", "image": "mysql"}]}
    })
}

/// The labels of a mysqld Pod of cluster `test`, as the operator renders them.
fn mysqld() -> Vec<(&'static str, &'static str)> {
    vec![
        (LABEL_NAME, APP_MYSQL),
        (LABEL_INSTANCE, "test"),
        (LABEL_CREATED_BY, CREATED_BY),
        ("moco.cybozu.com/role", "primary"),
    ]
}

/// The refusals of the policy at `path` to `user` deleting `old`: empty when allowed.
fn delete_as(path: &str, user: &str, old: Value) -> Vec<String> {
    let policy = policy(path);
    let labels: BTreeMap<String, String> =
        serde_json::from_value(old["metadata"]["labels"].clone()).unwrap_or_default();
    if !selects(
        policy.pointer("/spec/matchConstraints/objectSelector"),
        &labels,
    ) {
        return Vec::new();
    }
    let input = json!({"oldObject": old, "request": {"userInfo": {"username": user}}});
    let conditions = list(&policy, "/spec/matchConditions", "expression", "");
    if !evaluate(&conditions, &input).is_empty() {
        return Vec::new();
    }
    let validations = list(
        &policy,
        "/spec/validations",
        "expression",
        "messageExpression",
    );
    assert!(!validations.is_empty());
    evaluate(&validations, &input)
}

fn delete(path: &str, old: Value) -> Vec<String> {
    delete_as(path, "alice", old)
}

const PROTECTED: &str = "moco.cybozu.com/prevent-delete";

#[test]
fn a_protected_mysqld_pod_cannot_be_deleted() {
    for path in [DEPLOY, CHART] {
        assert_eq!(
            delete(path, pod(&mysqld(), json!({PROTECTED: "true"}))),
            vec!["moco-test-0 is protected from deletion"],
            "{path}"
        );
    }
}

#[test]
fn other_mysqld_pods_can_be_deleted() {
    for path in [DEPLOY, CHART] {
        assert!(delete(path, pod(&mysqld(), json!({}))).is_empty());
        assert!(delete(path, pod(&mysqld(), json!({PROTECTED: "false"}))).is_empty());
        assert!(
            delete(
                path,
                pod(&mysqld(), json!({"moco.cybozu.com/demote": "true"}))
            )
            .is_empty()
        );
    }
}

/// Issue 29: the policy applied to every Pod, so anyone who may annotate a Pod could make it
/// undeletable. It applies to MOCO's mysqld Pods only: the labels of the operator's
/// StatefulSet, the cluster's name among them.
#[test]
fn only_mocos_mysqld_pods_are_protected() {
    let annotated = json!({PROTECTED: "true"});
    for path in [DEPLOY, CHART] {
        for labels in [
            vec![],
            vec![("app", "web")],
            vec![(LABEL_NAME, APP_MYSQL), (LABEL_INSTANCE, "test")],
            vec![(LABEL_NAME, APP_MYSQL), (LABEL_CREATED_BY, CREATED_BY)],
            vec![
                (LABEL_NAME, APP_MYSQL_BACKUP),
                (LABEL_INSTANCE, "test"),
                (LABEL_CREATED_BY, CREATED_BY),
            ],
            vec![
                (LABEL_NAME, APP_MYSQL),
                (LABEL_INSTANCE, "test"),
                (LABEL_CREATED_BY, "someone"),
            ],
        ] {
            assert!(
                delete(path, pod(&labels, annotated.clone())).is_empty(),
                "{path}: {labels:?} is not a mysqld Pod of MOCO"
            );
        }
    }
}

/// Deleting the MySQLCluster (the garbage collector deletes its StatefulSet's Pods) or its
/// namespace (the namespace controller) takes even a protected Pod: nothing is left to
/// protect it for, and a refusal would keep the Pod, or the namespace Terminating, for ever.
#[test]
fn a_cascading_deletion_takes_a_protected_pod() {
    let protected = pod(&mysqld(), json!({PROTECTED: "true"}));
    for path in [DEPLOY, CHART] {
        for controller in ["generic-garbage-collector", "namespace-controller"] {
            let user = format!("system:serviceaccount:kube-system:{controller}");
            assert!(
                delete_as(path, &user, protected.clone()).is_empty(),
                "{path}: {user}"
            );
        }
        // The StatefulSet controller (a rolling update) is refused, as anyone else.
        let sts = "system:serviceaccount:kube-system:statefulset-controller";
        assert_eq!(delete_as(path, sts, protected.clone()).len(), 1, "{path}");
    }
}
