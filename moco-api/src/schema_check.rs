//! Offline validation of an object against a CRD's structural `openAPIV3Schema`, the way the
//! API server does it before admission: types, `required`, `enum`, bounds, lengths, patterns,
//! `nullable`, `x-kubernetes-int-or-string` and unknown fields (strict field validation).
//!
//! CEL rules (`x-kubernetes-validations`) are not evaluated here; see [`crate::offline`].

use std::fmt;

use regex::Regex;
use serde_json::{Map, Value};

/// One schema violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// Field path such as `spec.podTemplate.spec.containers[0].name` (empty for the root).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Checks `value` against `schema`; returns every violation found.
pub fn check(schema: &Value, value: &Value) -> Vec<SchemaError> {
    let mut out = Vec::new();
    check_node(schema, value, "", &mut out);
    out
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn push(out: &mut Vec<SchemaError>, path: &str, message: String) {
    out.push(SchemaError {
        path: path.to_owned(),
        message,
    });
}

fn check_node(schema: &Value, value: &Value, path: &str, out: &mut Vec<SchemaError>) {
    let Some(s) = schema.as_object() else {
        return;
    };
    if value.is_null() {
        // Nullable fields keep null; other nulls are pruned by the API server before
        // validation, i.e. treated as absent (the parent's `required` check catches them).
        return;
    }
    let int_or_string = s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if int_or_string {
        if !(is_integer(value) || value.is_string()) {
            push(
                out,
                path,
                format!("must be an integer or a string, got {}", type_name(value)),
            );
            return;
        }
    } else if let Some(ty) = s.get("type").and_then(Value::as_str) {
        let ok = match ty {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => is_integer(value),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !ok {
            push(
                out,
                path,
                format!("must be of type {ty}, got {}", type_name(value)),
            );
            return;
        }
        if ty == "integer" && s.get("format").and_then(Value::as_str) == Some("int32") {
            let fits = value.as_i64().is_some_and(|i| i32::try_from(i).is_ok());
            if !fits {
                push(
                    out,
                    path,
                    format!("{value} does not fit in a 32-bit integer"),
                );
            }
        }
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(ToString::to_string).collect();
        push(
            out,
            path,
            format!(
                "unsupported value {value}: must be one of {}",
                list.join(", ")
            ),
        );
    }
    bounds(s, value, path, out);
    match value {
        Value::Object(map) => object(s, map, path, out),
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_node(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn bounds(s: &Map<String, Value>, value: &Value, path: &str, out: &mut Vec<SchemaError>) {
    if let Some(n) = value.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
            let exclusive = s.get("exclusiveMinimum") == Some(&Value::Bool(true));
            if n < min || (exclusive && n == min) {
                push(
                    out,
                    path,
                    format!("{value} is less than the minimum of {min}"),
                );
            }
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
            let exclusive = s.get("exclusiveMaximum") == Some(&Value::Bool(true));
            if n > max || (exclusive && n == max) {
                push(
                    out,
                    path,
                    format!("{value} is greater than the maximum of {max}"),
                );
            }
        }
    }
    if let Some(text) = value.as_str() {
        let len = text.chars().count() as u64;
        if let Some(min) = s.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            push(out, path, format!("must be at least {min} characters long"));
        }
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            push(out, path, format!("must be at most {max} characters long"));
        }
        if let Some(pattern) = s.get("pattern").and_then(Value::as_str) {
            match Regex::new(pattern) {
                Ok(re) if !re.is_match(text) => {
                    push(
                        out,
                        path,
                        format!("{text:?} does not match the pattern {pattern:?}"),
                    );
                }
                Ok(_) => {}
                Err(e) => push(
                    out,
                    path,
                    format!("schema pattern {pattern:?} is invalid: {e}"),
                ),
            }
        }
        if s.get("format").and_then(Value::as_str) == Some("date-time") && !is_rfc3339(text) {
            push(out, path, format!("{text:?} is not an RFC 3339 date-time"));
        }
    }
    if let Some(items) = value.as_array() {
        let len = items.len() as u64;
        if let Some(min) = s.get("minItems").and_then(Value::as_u64)
            && len < min
        {
            push(out, path, format!("must have at least {min} item(s)"));
        }
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
            && len > max
        {
            push(out, path, format!("must have at most {max} item(s)"));
        }
    }
}

fn object(
    s: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &str,
    out: &mut Vec<SchemaError>,
) {
    let properties = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    let preserve = s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if let Some(required) = s.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if map.get(name).is_none_or(Value::is_null) {
                push(
                    out,
                    &join(path, name),
                    "required value is missing".to_owned(),
                );
            }
        }
    }
    for (key, child) in map {
        let child_path = join(path, key);
        if let Some(prop) = properties.and_then(|p| p.get(key)) {
            check_node(prop, child, &child_path, out);
        } else if let Some(add) = additional {
            if add.is_object() {
                check_node(add, child, &child_path, out);
            }
        } else if properties.is_some() && !preserve {
            push(out, &child_path, format!("unknown field {key:?}"));
        }
    }
}

/// RFC 3339 `date-time` as Kubernetes accepts it (`2021-05-01T12:34:56Z`, fractions, offsets).
fn is_rfc3339(text: &str) -> bool {
    static PATTERN: &str =
        r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$";
    Regex::new(PATTERN).is_ok_and(|re| re.is_match(text))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reports_types_required_unknown_and_bounds() {
        let schema = json!({
            "type": "object",
            "required": ["a"],
            "properties": {
                "a": {"type": "integer", "minimum": 1, "format": "int32"},
                "b": {"type": "string", "enum": ["x", "y"]},
                "c": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^h"}},
                "d": {"type": "object", "additionalProperties": {"type": "string"}},
                "q": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+Gi$"},
                "n": {"type": "string", "nullable": true},
                "t": {"type": "string", "format": "date-time"},
                "free": {"type": "object"}
            }
        });
        let ok = json!({"a": 3, "b": "x", "c": ["hi"], "d": {"k": "v"}, "q": 5, "n": null, "t": "2024-01-02T03:04:05Z", "free": {"any": [1]}});
        assert_eq!(check(&schema, &ok), vec![]);
        let bad = json!({"b": "z", "c": [], "d": {"k": 1}, "q": "5G", "t": "yesterday", "zzz": 1});
        let got: Vec<String> = check(&schema, &bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            vec![
                "a: required value is missing",
                "b: unsupported value \"z\": must be one of \"x\", \"y\"",
                "c: must have at least 1 item(s)",
                "d.k: must be of type string, got integer",
                "q: \"5G\" does not match the pattern \"^[0-9]+Gi$\"",
                "t: \"yesterday\" is not an RFC 3339 date-time",
                "zzz: unknown field \"zzz\"",
            ]
        );
        let too_big = json!({"a": 5_000_000_000i64});
        assert_eq!(check(&schema, &too_big).len(), 1);
    }
}
