//! The facts schema is a public API (docs/facts.md): what the JSON Schema calls required must be
//! exactly what the reader refuses to go without, and only the documented fields may be left
//! out. Checked field by field on the example documents: remove one field, parse, compare.

use std::collections::BTreeSet;

use moco_core::facts::ClusterFacts;
use serde_json::Value;

/// The fields docs/facts.md lists as optional (by name; ClusterStatus is the stored status,
/// whose fields follow Kubernetes' omit-when-empty convention).
const OPTIONAL: &[&str] = &[
    "switchoverTo",
    "externalSource",
    "roleLabel",
    "version",
    "lastIoErrno",
    "lastIoError",
    "lastSqlErrno",
    "lastSqlError",
];

fn examples() -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/facts");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        out.push((
            path.display().to_string(),
            serde_json::from_str(&text).unwrap(),
        ));
    }
    assert!(out.len() >= 8, "the example facts are missing");
    out
}

/// Follows `$ref` and picks the object branch of a nullable `anyOf`/`oneOf`.
fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    loop {
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/$defs/");
            node = &root["$defs"][name];
            continue;
        }
        let branches = node
            .get("anyOf")
            .or_else(|| node.get("oneOf"))
            .and_then(Value::as_array);
        if let Some(b) = branches.and_then(|b| {
            b.iter()
                .find(|x| x.get("type") != Some(&Value::from("null")))
        }) && node.get("properties").is_none()
        {
            node = b;
            continue;
        }
        return node;
    }
}

/// Every (JSON pointer of an object, field name, required by the schema) in `doc`.
fn fields(
    root: &Value,
    schema: &Value,
    doc: &Value,
    at: &str,
    out: &mut Vec<(String, String, bool)>,
) {
    let schema = resolve(root, schema);
    match doc {
        Value::Object(map) => {
            let Some(props) = schema.get("properties") else {
                return;
            };
            let required: BTreeSet<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (key, value) in map {
                out.push((at.to_owned(), key.clone(), required.contains(key.as_str())));
                fields(root, &props[key], value, &format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    fields(root, item, v, &format!("{at}/{i}"), out);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn schema_required_fields_are_exactly_the_ones_the_reader_needs() {
    let schema = serde_json::to_value(schemars::schema_for!(ClusterFacts)).unwrap();
    let mut checked = 0;
    let mut nullable_checked = 0;
    for (name, doc) in examples() {
        let mut list = Vec::new();
        fields(&schema, &schema, &doc, "", &mut list);
        for (at, key, required) in list {
            // ClusterStatus is the stored status: Kubernetes omits its empty fields.
            if at == "/status" || at.starts_with("/status/") {
                continue;
            }
            let mut cut = doc.clone();
            let obj = if at.is_empty() {
                cut.as_object_mut()
            } else {
                cut.pointer_mut(&at).and_then(Value::as_object_mut)
            };
            let was_null = obj.as_ref().is_some_and(|o| o[&key].is_null());
            obj.unwrap().remove(&key);
            let parsed = serde_json::from_value::<ClusterFacts>(cut);
            let documented_optional = OPTIONAL.contains(&key.as_str());
            assert_eq!(
                parsed.is_err(),
                required,
                "{name}: {at}/{key}: the schema says required = {required}, the reader {}",
                if parsed.is_err() {
                    "needs it"
                } else {
                    "does without it"
                }
            );
            assert_eq!(
                required, !documented_optional,
                "{name}: {at}/{key}: docs/facts.md and the schema disagree"
            );
            checked += 1;
            if was_null && required {
                nullable_checked += 1;
            }
        }
    }
    assert!(checked > 200, "only {checked} fields checked");
    assert!(
        nullable_checked > 10,
        "only {nullable_checked} required null fields seen"
    );
}
