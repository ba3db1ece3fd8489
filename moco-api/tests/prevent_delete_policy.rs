//! The CEL of the ValidatingAdmissionPolicy `moco-delete-validator` in `deploy/`, evaluated
//! client-side on Pod DELETE requests.
//!
//! kube-cel's schema-less VAP evaluator escapes every map key (as for CRD property names), so
//! `annotations['moco.cybozu.com/prevent-delete']` would never match there. The expression is
//! therefore evaluated as a rule over a schema in which `oldObject.metadata.annotations` is a
//! string map, as it is for the API server's typed Pod, with `oldObject` bound to
//! `self.oldObject`.

use kube::core::cel::Validator;
use serde_json::{Value, json};

/// `(expression, messageExpression)` of each validation of the policy.
fn expressions() -> Vec<(String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/admission-policy.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let policy = docs
        .iter()
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
        .pointer("/spec/validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| {
            let text = |k: &str| {
                v.pointer(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            (text("/expression"), text("/messageExpression"))
        })
        .collect()
}

fn pod(annotations: Option<Value>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "moco-test-0", "namespace": "default"},
        "spec": {"containers": [{"name": "mysqld", "image": "mysql"}]}
    });
    if let (Some(a), Some(meta)) = (
        annotations,
        pod.pointer_mut("/metadata").and_then(Value::as_object_mut),
    ) {
        meta.insert("annotations".into(), a);
    }
    pod
}

/// Failure messages of deleting `old`.
fn delete(old: Value) -> Vec<String> {
    let rules: Vec<Value> = expressions()
        .into_iter()
        .map(|(rule, message)| {
            json!({
                "rule": rule.replace("oldObject", "self.oldObject"),
                "messageExpression": message.replace("oldObject", "self.oldObject"),
            })
        })
        .collect();
    assert!(!rules.is_empty());
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": rules,
        "properties": {
            "oldObject": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "metadata": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "namespace": {"type": "string"},
                            "annotations": {"type": "object", "additionalProperties": {"type": "string"}}
                        }
                    }
                }
            }
        }
    });
    match Validator::new().validate(&schema, &json!({"oldObject": old}), None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.message.clone()).collect(),
    }
}

#[test]
fn protected_pod_cannot_be_deleted() {
    assert_eq!(
        delete(pod(Some(json!({"moco.cybozu.com/prevent-delete": "true"})))),
        vec!["moco-test-0 is protected from deletion"]
    );
}

#[test]
fn other_pods_can_be_deleted() {
    assert!(delete(pod(None)).is_empty());
    assert!(delete(pod(Some(json!({})))).is_empty());
    assert!(
        delete(pod(Some(
            json!({"moco.cybozu.com/prevent-delete": "false"})
        )))
        .is_empty()
    );
    assert!(delete(pod(Some(json!({"moco.cybozu.com/demote": "true"})))).is_empty());
}
