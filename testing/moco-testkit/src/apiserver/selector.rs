//! Label and field selectors as the `labelSelector` and `fieldSelector` query parameters carry
//! them.

use serde_json::Value;

use super::status::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    DoesNotExist(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed `labelSelector`: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-joined.
    pub(super) fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(Self(requirements))
    }

    /// Whether an object with `labels` (its `metadata.labels`, maybe null) is selected.
    pub(super) fn matches(&self, labels: &Value) -> bool {
        let label = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
        })
    }
}

/// Splits on commas outside parentheses (`a in (x,y),b` is two requirements).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(part: &str) -> Result<Requirement, ApiError> {
    let invalid = || ApiError::bad_request(format!("unable to parse requirement: {part:?}"));
    let key = |k: &str| -> Result<String, ApiError> {
        let k = k.trim();
        if k.is_empty() || k.contains(char::is_whitespace) || k.contains(['=', '!', '(', ')']) {
            Err(invalid())
        } else {
            Ok(k.to_string())
        }
    };
    if let Some(open) = part.find('(') {
        let inner = part[open + 1..].strip_suffix(')').ok_or_else(invalid)?;
        let mut words = part[..open].split_whitespace();
        let (Some(k), Some(op), None) = (words.next(), words.next(), words.next()) else {
            return Err(invalid());
        };
        let values: Vec<String> = inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        return match op {
            "in" => Ok(Requirement::In(key(k)?, values)),
            "notin" => Ok(Requirement::NotIn(key(k)?, values)),
            _ => Err(invalid()),
        };
    }
    if let Some(k) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key(k)?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, v.trim().to_string()));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(key(k)?, v.trim().to_string()));
    }
    Ok(Requirement::Exists(key(part)?))
}

/// A parsed `fieldSelector`. Only `metadata.name` and `metadata.namespace` are supported (what
/// every kind supports on the real server); other fields are refused with 400 as the real
/// server refuses fields a kind does not index.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `field=value`, `field==value`, `field!=value`, comma-joined.
    pub(super) fn parse(text: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(terms))
    }

    /// Whether `object` is selected.
    pub(super) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let key = if field == "metadata.name" {
                "name"
            } else {
                "namespace"
            };
            let actual = object
                .get("metadata")
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .unwrap_or("");
            (actual == value) == *equal
        })
    }
}

/// Both selectors of a list or watch.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Selectors {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Whether `object` is selected by both.
    pub(super) fn matches(&self, object: &Value) -> bool {
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .unwrap_or(&Value::Null);
        self.labels.matches(labels) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_requirements() {
        let labels = json!({"app": "mysql", "tier": "db"});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&labels);
        assert!(m("app=mysql,tier==db"));
        assert!(!m("app!=mysql"));
        assert!(m("app,!missing"));
        assert!(!m("!app"));
        assert!(m("app in (web, mysql),tier notin (cache)"));
        assert!(!m("tier notin (db,cache)"));
        assert!(m("missing!=x"));
        assert!(!m("missing in (x)"));
        assert!(m(""));
        assert!(LabelSelector::parse("app in (x").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_terms() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(&obj);
        assert!(m("metadata.name=a,metadata.namespace==ns"));
        assert!(!m("metadata.name!=a"));
        assert_eq!(FieldSelector::parse("spec.x=1").unwrap_err().code, 400);
    }
}
