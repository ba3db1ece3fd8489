//! The fake's model of server-side apply (see the module doc of [`super`]): per object, field
//! manager and subresource, the last applied configuration; a new apply removes what the
//! previous one set (where nobody changed it since) and merges the new one in.

use serde_json::{Map, Value};

/// Metadata the server sets or that names the object: never owned by a manager.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The fields of apply body `body` that a manager comes to own: without nulls, `apiVersion`,
/// `kind` and server-set metadata; for a `status` apply only `status`, for a main-resource
/// apply of a kind with a status subresource everything but `status`.
pub(super) fn owned_fields(body: &Value, status_subresource: bool, has_status: bool) -> Value {
    let mut owned = strip_nulls(body);
    let Value::Object(map) = &mut owned else {
        return Value::Object(Map::new());
    };
    if status_subresource {
        let status = map.remove("status");
        map.clear();
        if let Some(status) = status {
            map.insert("status".into(), status);
        }
        return owned;
    }
    map.remove("apiVersion");
    map.remove("kind");
    if has_status {
        map.remove("status");
    }
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        for key in SERVER_METADATA {
            meta.remove(*key);
        }
        if meta.is_empty() {
            map.remove("metadata");
        }
    }
    owned
}

fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(list) => Value::Array(list.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Applies `owned` (from [`owned_fields`]) to `object`, first removing `previous` (what the
/// same manager applied last time).
pub(super) fn apply(object: &mut Value, previous: Option<&Value>, owned: &Value) {
    if let Some(previous) = previous {
        remove_owned(object, previous);
    }
    merge_owned(object, owned);
}

/// Removes from `target` the fields of `owned` that still hold the value the manager applied;
/// maps are walked and dropped once emptied, anything else (lists included) is a leaf.
fn remove_owned(target: &mut Value, owned: &Value) {
    let (Value::Object(target), Value::Object(owned)) = (target, owned) else {
        return;
    };
    for (key, owned_value) in owned {
        let Some(current) = target.get_mut(key) else {
            continue;
        };
        let remove = if current.is_object() && owned_value.is_object() {
            remove_owned(current, owned_value);
            current.as_object().is_some_and(Map::is_empty)
        } else {
            current == owned_value
        };
        if remove {
            target.remove(key);
        }
    }
}

/// Merges `owned` into `target`: maps recursively, lists and scalars replace.
fn merge_owned(target: &mut Value, owned: &Value) {
    let Value::Object(owned) = owned else {
        *target = owned.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in owned {
            match target.get_mut(key) {
                Some(current) if current.is_object() && value.is_object() => {
                    merge_owned(current, value);
                }
                _ => {
                    target.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reapply_removes_dropped_fields_only() {
        let first =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1", "y": "2"}});
        let mut object = json!({"metadata": {"name": "n", "labels": {"other": "o"}}});
        apply(&mut object, None, &first);
        // Another writer changes y: it is no longer the manager's to remove.
        object["data"]["y"] = json!("changed");
        let second = json!({"metadata": {"labels": {"a": "1"}}, "data": {"z": "3"}});
        apply(&mut object, Some(&first), &second);
        assert_eq!(
            object,
            json!({"metadata": {"name": "n", "labels": {"other": "o", "a": "1"}}, "data": {"y": "changed", "z": "3"}})
        );
    }

    #[test]
    fn owned_fields_drop_server_fields() {
        let body = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n", "resourceVersion": "3"}, "spec": {"a": null, "b": 1}, "status": {"s": 1}});
        assert_eq!(owned_fields(&body, false, true), json!({"spec": {"b": 1}}));
        assert_eq!(owned_fields(&body, true, true), json!({"status": {"s": 1}}));
    }
}
