//! Whether a rendered object must be applied again: because what the operator renders changed
//! since its last apply, or because someone changed a field the operator owns.
//!
//! MOCO compares the object it would apply with the fields its field manager owns in the
//! deployed one. This build records a hash of the rendered object in an annotation of the
//! object itself and, besides, checks that every rendered field still has its value in the
//! deployed object. Together they catch the same changes: a new rendering (including a field
//! the operator stopped setting, such as the default security context), an annotation copied
//! from the cluster, and drift by other writers; fields the API server defaults are ignored.
//!
//! Applying the StatefulSet only for these reasons is what keeps an operator upgrade from
//! restarting mysqld: a given reconciler version renders the same objects in every release
//! (the snapshots in `tests/snapshots/` hold that contract), so the hash does not change.

use moco_core::resources::{Quantity, fnv1a_32};
use serde_json::Value;

/// The annotation holding the hash of the object as last rendered and applied.
pub const RENDERED_HASH_ANNOTATION: &str = "moco-rs/rendered-hash";

/// The hash of `rendered` (without the hash annotation itself), as 8 hex digits.
pub fn rendered_hash(rendered: &Value) -> String {
    let mut v = rendered.clone();
    if let Some(a) = v
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(RENDERED_HASH_ANNOTATION);
    }
    // serde_json writes object keys in sorted order, so equal objects hash equally.
    format!("{:08x}", fnv1a_32(v.to_string().as_bytes()))
}

/// `rendered` with its hash recorded in the annotation.
pub fn with_hash(mut rendered: Value) -> Value {
    let hash = rendered_hash(&rendered);
    if let Some(meta) = rendered.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(RENDERED_HASH_ANNOTATION.into(), Value::String(hash));
        }
    }
    rendered
}

/// Why an object is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyReason {
    /// There is no deployed object.
    Missing,
    /// The rendering differs from the one last applied.
    Rendering,
    /// A field the operator sets has another value (or is gone): the JSON pointer of the first.
    Drift(String),
}

/// Whether `rendered` (carrying its hash, see [`with_hash`]) must be applied over `deployed`.
pub fn apply_reason(rendered: &Value, deployed: Option<&Value>) -> Option<ApplyReason> {
    let Some(deployed) = deployed else {
        return Some(ApplyReason::Missing);
    };
    let hash = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(|a| a.get(RENDERED_HASH_ANNOTATION))
            .cloned()
    };
    if hash(rendered) != hash(deployed) {
        return Some(ApplyReason::Rendering);
    }
    first_difference(rendered, deployed, String::new()).map(ApplyReason::Drift)
}

/// The pointer of the first field of `want` whose value `have` does not hold. Objects may have
/// extra keys in `have` (defaults); lists must have the same length; quantity strings compare
/// by value (the API server rewrites `1024Mi` as `1Gi`).
fn first_difference(want: &Value, have: &Value, path: String) -> Option<String> {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().find_map(|(k, wv)| match h.get(k) {
            Some(hv) => first_difference(wv, hv, format!("{path}/{k}")),
            // The API server drops nulls and may drop empty objects and lists.
            None if is_empty(wv) => None,
            None => Some(format!("{path}/{k}")),
        }),
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => w
            .iter()
            .zip(h)
            .enumerate()
            .find_map(|(i, (wv, hv))| first_difference(wv, hv, format!("{path}/{i}"))),
        (Value::String(w), Value::String(h)) if w != h => {
            match (Quantity::parse(w), Quantity::parse(h)) {
                (Ok(a), Ok(b)) if a == b => None,
                _ => Some(path),
            }
        }
        (w, h) if w == h => None,
        _ => Some(path),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered() -> Value {
        with_hash(json!({
            "metadata": {"name": "x", "labels": {"a": "1"}},
            "spec": {"replicas": 3, "template": {"containers": [
                {"name": "mysqld", "resources": {"limits": {"memory": "1024Mi"}}}
            ]}}
        }))
    }

    #[test]
    fn defaults_and_equal_quantities_are_not_drift() {
        let mut deployed = rendered();
        deployed["spec"]["revisionHistoryLimit"] = json!(10);
        deployed["spec"]["template"]["containers"][0]["imagePullPolicy"] = json!("Always");
        deployed["spec"]["template"]["containers"][0]["resources"]["limits"]["memory"] =
            json!("1Gi");
        deployed["metadata"]["uid"] = json!("u");
        assert_eq!(apply_reason(&rendered(), Some(&deployed)), None);
        // An empty object the server dropped (`securityContext: {}`) is not drift either.
        let mut with_empty = rendered();
        with_empty["spec"]["template"]["containers"][0]["securityContext"] = json!({});
        let with_empty = with_hash(with_empty);
        let mut dropped = with_empty.clone();
        dropped["spec"]["template"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("securityContext");
        assert_eq!(apply_reason(&with_empty, Some(&dropped)), None);
    }

    #[test]
    fn changed_removed_and_missing_fields_are_drift() {
        let mut deployed = rendered();
        deployed["spec"]["replicas"] = json!(1);
        assert_eq!(
            apply_reason(&rendered(), Some(&deployed)),
            Some(ApplyReason::Drift("/spec/replicas".into()))
        );
        let mut deployed = rendered();
        deployed["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("a");
        assert_eq!(
            apply_reason(&rendered(), Some(&deployed)),
            Some(ApplyReason::Drift("/metadata/labels/a".into()))
        );
        let mut deployed = rendered();
        deployed["spec"]["template"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "other"}));
        assert!(matches!(
            apply_reason(&rendered(), Some(&deployed)),
            Some(ApplyReason::Drift(_))
        ));
        assert_eq!(apply_reason(&rendered(), None), Some(ApplyReason::Missing));
    }

    /// A field the operator no longer renders shows as a new hash, though the deployed
    /// object still holds everything rendered.
    #[test]
    fn a_dropped_field_changes_the_hash() {
        let deployed = rendered();
        let mut now = deployed.clone();
        now["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("a");
        let now = with_hash(now);
        assert_ne!(rendered_hash(&now), rendered_hash(&deployed));
        assert_eq!(
            apply_reason(&now, Some(&deployed)),
            Some(ApplyReason::Rendering)
        );
        // And the hash ignores itself.
        assert_eq!(rendered_hash(&with_hash(now.clone())), rendered_hash(&now));
    }
}
