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
//! The StatefulSet's claim templates are the exception: the API server refuses to update them,
//! so any difference between the rendered and the deployed ones, in either direction, means
//! re-creating the StatefulSet ([`recreation`]), as MOCO does.
//!
//! [`owned_part`] reads back what the operator applied, without what the API server defaulted,
//! from the object's `managedFields` (how MOCO keeps the deployed slow-log container).
//!
//! Applying the StatefulSet only for these reasons is what keeps an operator upgrade from
//! restarting mysqld: a given reconciler version renders the same objects in every release
//! (the snapshots in `tests/snapshots/` hold that contract), so the hash does not change.

use moco_api::annotations::RENDERED_HASH_ANNOTATION;
use moco_core::resources::{Quantity, fnv1a_32};
use serde_json::Value;

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

/// Whether the StatefulSet must be re-created for its claim templates, which the API server
/// does not let an update change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recreation {
    /// No.
    No,
    /// The deployed claim templates differ from the rendered ones, first at this JSON
    /// pointer: delete the StatefulSet, orphaning its Pods, and create it again (after
    /// growing the PVCs).
    Needed(String),
    /// A re-creation is under way: the StatefulSet is gone and has left Pods behind (a round
    /// deleted it and the create failed, or someone deleted it orphaning its Pods). Creating
    /// it is the re-creation's last step, counted as one.
    Pending,
}

impl Recreation {
    /// Whether this round's StatefulSet apply re-creates it.
    pub fn recreates(&self) -> bool {
        !matches!(self, Recreation::No)
    }
}

/// Decides [`Recreation`] from the rendered StatefulSet (with the deployed claim owners'
/// API versions kept, see [`super::keep_claim_owner_api_version`]), the deployed one, and
/// whether Pods of the cluster exist without a controller while there is none.
pub fn recreation(rendered: &Value, deployed: Option<&Value>, orphans: bool) -> Recreation {
    match deployed {
        None if orphans => Recreation::Pending,
        None => Recreation::No,
        Some(d) => {
            claim_templates_difference(rendered, d).map_or(Recreation::No, Recreation::Needed)
        }
    }
}

/// Fields of a deployed claim template that the API server writes (`status.phase: Pending`)
/// and no rendering has.
const SERVER_CLAIM_FIELDS: [&str; 2] = ["status", "creationTimestamp"];

fn without_server_fields(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(o) = t.as_object_mut() {
        o.remove(SERVER_CLAIM_FIELDS[0]);
    }
    if let Some(m) = t.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove(SERVER_CLAIM_FIELDS[1]);
    }
    t
}

/// The first difference between the rendered `spec.volumeClaimTemplates` and the deployed
/// ones, in either direction (a label added, changed or removed; `storageClassName`,
/// `accessModes`, a size, a template added or removed): MOCO re-creates the StatefulSet on
/// any difference. What the API server adds to a template (its `status`) is not one, nor an
/// empty value it drops or a quantity it rewrites (`1024Mi` is `1Gi`).
pub fn claim_templates_difference(rendered: &Value, deployed: &Value) -> Option<String> {
    const AT: &str = "/spec/volumeClaimTemplates";
    let templates = |v: &Value| {
        v.pointer(AT)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (want, have) = (templates(rendered), templates(deployed));
    if want.len() != have.len() {
        return Some(AT.to_owned());
    }
    want.iter().zip(&have).enumerate().find_map(|(i, (w, h))| {
        let (w, h) = (without_server_fields(w), without_server_fields(h));
        let at = format!("{AT}/{i}");
        first_difference(&w, &h, at.clone()).or_else(|| first_difference(&h, &w, at))
    })
}

/// The part of `value` that the managed-fields set `fields` (a `fieldsV1` trie: `f:<field>`,
/// `k:<keys>`, `v:<value>`, `i:<index>`) names: what one field manager applied, without what
/// the API server defaulted or other writers set. MOCO reads its own fields back this way
/// (`Extract…` of client-go's apply configurations). `None` when nothing of `value` is named.
pub fn owned_part(value: &Value, fields: &Value) -> Option<Value> {
    let fields = fields.as_object()?;
    // A node named with nothing under it is owned whole (a leaf, or an atomic list or map).
    if fields.keys().all(|k| k == ".") {
        return Some(value.clone());
    }
    match value {
        Value::Object(o) => {
            let out: serde_json::Map<String, Value> = fields
                .iter()
                .filter_map(|(k, sub)| {
                    let name = k.strip_prefix("f:")?;
                    Some((name.to_owned(), owned_part(o.get(name)?, sub)?))
                })
                .collect();
            Some(Value::Object(out))
        }
        Value::Array(items) => {
            let out: Vec<Value> = items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    let sub = fields
                        .iter()
                        .find_map(|(k, sub)| list_key_matches(k, i, item).then_some(sub))?;
                    owned_part(item, sub)
                })
                .collect();
            Some(Value::Array(out))
        }
        other => Some(other.clone()),
    }
}

/// Whether the `fieldsV1` key `key` names item `index` of a list, `item`.
fn list_key_matches(key: &str, index: usize, item: &Value) -> bool {
    if let Some(keys) = key.strip_prefix("k:") {
        let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(keys) else {
            return false;
        };
        keys.iter().all(|(k, v)| item.get(k) == Some(v))
    } else if let Some(v) = key.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
    } else if let Some(i) = key.strip_prefix("i:") {
        i.parse::<usize>().is_ok_and(|i| i == index)
    } else {
        false
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

    fn with_templates(templates: Value) -> Value {
        json!({"spec": {"volumeClaimTemplates": templates}})
    }

    fn template() -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "mysql-data", "ownerReferences": [{"uid": "u"}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": "1024Mi"}}}})
    }

    /// What a real API server returns for `template()`: its status, the quantity rewritten.
    fn deployed_template() -> Value {
        let mut t = template();
        t["status"] = json!({"phase": "Pending"});
        t["spec"]["resources"]["requests"]["storage"] = json!("1Gi");
        t
    }

    #[test]
    fn claim_templates_differ_in_any_field_in_either_direction_but_not_in_server_fields() {
        let deployed = with_templates(json!([deployed_template()]));
        assert_eq!(
            claim_templates_difference(&with_templates(json!([template()])), &deployed),
            None
        );
        type Edit = (&'static str, fn(&mut Value));
        let edits: [Edit; 6] = [
            ("/metadata/labels", |t| {
                t["metadata"]["labels"] = json!({"a": "1"})
            }),
            ("/metadata/annotations", |t| {
                t["metadata"]["annotations"] = json!({"a": "1"})
            }),
            ("/spec/storageClassName", |t| {
                t["spec"]["storageClassName"] = json!("fast")
            }),
            ("/spec/accessModes", |t| {
                t["spec"]["accessModes"] = json!(["ReadWriteOnce", "ReadOnlyMany"])
            }),
            ("/spec/accessModes/0", |t| {
                t["spec"]["accessModes"] = json!(["ReadWriteOncePod"])
            }),
            ("/spec/resources/requests/storage", |t| {
                t["spec"]["resources"]["requests"]["storage"] = json!("2Gi")
            }),
        ];
        for (at, edit) in edits {
            let mut t = template();
            edit(&mut t);
            assert_eq!(
                claim_templates_difference(&with_templates(json!([t])), &deployed),
                Some(format!("/spec/volumeClaimTemplates/0{at}")),
                "{at}"
            );
        }
        // Removed from the rendering: the deployed template has it, the rendering not.
        let mut labelled = deployed_template();
        labelled["metadata"]["labels"] = json!({"a": "1"});
        assert_eq!(
            claim_templates_difference(
                &with_templates(json!([template()])),
                &with_templates(json!([labelled]))
            ),
            Some("/spec/volumeClaimTemplates/0/metadata/labels".into())
        );
        // A template more or less.
        assert_eq!(
            claim_templates_difference(&with_templates(json!([template(), template()])), &deployed),
            Some("/spec/volumeClaimTemplates".into())
        );
        assert_eq!(
            claim_templates_difference(&json!({"spec": {}}), &deployed),
            Some("/spec/volumeClaimTemplates".into())
        );
    }

    #[test]
    fn a_re_creation_is_needed_on_a_difference_and_pending_while_orphans_wait() {
        let rendered = with_templates(json!([template()]));
        let deployed = with_templates(json!([deployed_template()]));
        assert_eq!(
            recreation(&rendered, Some(&deployed), false),
            Recreation::No
        );
        assert_eq!(recreation(&rendered, Some(&deployed), true), Recreation::No);
        let mut grown = template();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(
            recreation(&with_templates(json!([grown])), Some(&deployed), false),
            Recreation::Needed(
                "/spec/volumeClaimTemplates/0/spec/resources/requests/storage".into()
            )
        );
        assert_eq!(recreation(&rendered, None, true), Recreation::Pending);
        assert_eq!(recreation(&rendered, None, false), Recreation::No);
        assert!(Recreation::Pending.recreates() && !Recreation::No.recreates());
    }

    /// The managed fields of a real StatefulSet's `slow-log` container as the API server
    /// records them for the operator's apply, and the container with the server's defaults.
    #[test]
    fn the_owned_part_drops_what_the_server_defaulted() {
        let fields = json!({"f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"slow-log\"}": {".": {}, "f:image": {}, "f:name": {},
                    "f:args": {},
                    "f:ports": {"k:{\"containerPort\":9104,\"protocol\":\"TCP\"}": {
                        ".": {}, "f:containerPort": {}, "f:name": {}}},
                    "f:resources": {"f:limits": {"f:cpu": {}}},
                    "f:volumeMounts": {"k:{\"mountPath\":\"/var/log/mysql\"}": {
                        ".": {}, "f:mountPath": {}, "f:name": {}}}}}}}}});
        let deployed = json!({"metadata": {"labels": {"app": "x", "other": "y"}, "uid": "u"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "mysqld", "image": "m"},
                {"name": "slow-log", "image": "f", "args": ["a", "b"],
                    "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePath": "/dev/termination-log",
                    "ports": [{"containerPort": 9104, "name": "m", "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}},
                    "volumeMounts": [{"mountPath": "/var/log/mysql", "name": "var-log",
                        "readOnly": false}]}
            ], "dnsPolicy": "ClusterFirst"}}}});
        assert_eq!(
            owned_part(&deployed, &fields),
            Some(json!({"metadata": {"labels": {"app": "x"}},
            "spec": {"template": {"spec": {"containers": [
                {"name": "slow-log", "image": "f", "args": ["a", "b"],
                    "ports": [{"containerPort": 9104, "name": "m"}],
                    "resources": {"limits": {"cpu": "100m"}},
                    "volumeMounts": [{"mountPath": "/var/log/mysql", "name": "var-log"}]}
            ]}}}}))
        );
        // Set items (`v:`) and positions (`i:`).
        let fields = json!({"f:a": {"v:\"x\"": {}}, "f:b": {"i:1": {}}});
        assert_eq!(
            owned_part(&json!({"a": ["x", "y"], "b": [1, 2, 3]}), &fields),
            Some(json!({"a": ["x"], "b": [2]}))
        );
        assert_eq!(owned_part(&json!({"a": 1}), &json!("not a set")), None);
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
