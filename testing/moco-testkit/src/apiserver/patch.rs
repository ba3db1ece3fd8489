//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902), written here because the workspace's
//! `json-patch` crate is not a dependency of this crate.

use serde_json::Value;

/// Applies merge patch `patch` to `target` (RFC 7386): objects merge recursively, `null`
/// removes a key, anything else (lists included) replaces.
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Applies JSON patch `ops` to `doc` (RFC 6902: add, remove, replace, move, copy, test). On
/// error `doc` may be partly patched; callers patch a copy.
pub(super) fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or("a JSON patch must be a list of operations")?;
    for op in ops {
        let field = |name: &str| {
            op.get(name)
                .ok_or_else(|| format!("operation {op} has no {name:?}"))
        };
        let path = field("path")?
            .as_str()
            .ok_or_else(|| format!("operation {op}: path is not a string"))?;
        let kind = field("op")?.as_str().unwrap_or_default();
        match kind {
            "add" => add(doc, path, field("value")?.clone())?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => {
                let slot = pointer_mut(doc, path).ok_or_else(|| {
                    format!("replace operation does not apply: doc is missing path: {path}")
                })?;
                *slot = field("value")?.clone();
            }
            "move" | "copy" => {
                let from = field("from")?
                    .as_str()
                    .ok_or_else(|| format!("operation {op}: from is not a string"))?;
                let value = if kind == "move" {
                    remove(doc, from)?
                } else {
                    pointer_mut(doc, from).map(|v| v.clone()).ok_or_else(|| {
                        format!("copy operation does not apply: doc is missing from path: {from}")
                    })?
                };
                add(doc, path, value)?;
            }
            "test" => {
                let actual = pointer_mut(doc, path).ok_or_else(|| {
                    format!("test operation does not apply: doc is missing path: {path}")
                })?;
                if actual != field("value")? {
                    return Err(format!("testing value {path} failed"));
                }
            }
            other => return Err(format!("unexpected kind of operation: {other:?}")),
        }
    }
    Ok(())
}

/// The tokens of JSON pointer `path` (RFC 6901), unescaped.
fn tokens(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn pointer_mut<'a>(doc: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut current = doc;
    for token in tokens(path).ok()? {
        current = match current {
            Value::Object(map) => map.get_mut(&token)?,
            Value::Array(list) => list.get_mut(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// The parent of `path` and its last token.
fn parent<'a>(doc: &'a mut Value, path: &str) -> Result<(&'a mut Value, String), String> {
    let mut tokens = tokens(path)?;
    let last = tokens
        .pop()
        .ok_or_else(|| format!("path {path:?} names the whole document"))?;
    let mut current = doc;
    for token in tokens {
        current = match current {
            Value::Object(map) => map.get_mut(&token),
            Value::Array(list) => token.parse::<usize>().ok().and_then(|i| list.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("doc is missing path: {path}"))?;
    }
    Ok((current, last))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = parent(doc, path)?;
    match parent {
        Value::Object(map) => {
            map.insert(last, value);
        }
        Value::Array(list) => {
            let index = if last == "-" {
                list.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= list.len())
                    .ok_or_else(|| {
                        format!("add operation does not apply: index out of range: {path}")
                    })?
            };
            list.insert(index, value);
        }
        _ => {
            return Err(format!(
                "add operation does not apply: doc is missing path: {path}"
            ));
        }
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let missing = || format!("remove operation does not apply: doc is missing path: {path}");
    let (parent, last) = parent(doc, path)?;
    match parent {
        Value::Object(map) => map.remove(&last).ok_or_else(missing),
        Value::Array(list) => {
            let index = last
                .parse::<usize>()
                .ok()
                .filter(|i| *i < list.len())
                .ok_or_else(missing)?;
            Ok(list.remove(index))
        }
        _ => Err(missing()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_rfc7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
    }

    #[test]
    fn json_patch_ops() {
        let mut doc = json!({"a": {"b": [1, 2]}, "x~y": 1});
        json_patch(
            &mut doc,
            &json!([
                {"op": "test", "path": "/x~0y", "value": 1},
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "add", "path": "/a/b/0", "value": 0},
                {"op": "remove", "path": "/a/b/1"},
                {"op": "replace", "path": "/x~0y", "value": 2},
                {"op": "copy", "from": "/x~0y", "path": "/c"},
                {"op": "move", "from": "/c", "path": "/a/d"}
            ]),
        )
        .unwrap();
        assert_eq!(doc, json!({"a": {"b": [0, 2, 3], "d": 2}, "x~y": 2}));
        assert!(
            json_patch(
                &mut doc,
                &json!([{"op": "test", "path": "/x~0y", "value": 9}])
            )
            .is_err()
        );
        assert!(json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
        assert!(
            json_patch(
                &mut doc,
                &json!([{"op": "replace", "path": "/nope", "value": 1}])
            )
            .is_err()
        );
    }
}
