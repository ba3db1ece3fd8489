//! The CustomResourceDefinitions as installed: derived from the Rust types, then trimmed so that
//! they stay small enough for client-side `kubectl apply`.
//!
//! Post-processing of the derived schema:
//! * descriptions inside embedded Kubernetes types (PodSpec, ServiceSpec, PVC spec, volumes,
//!   env, affinity, conditions…) are removed; the descriptions of MOCO's own fields are kept;
//! * resource quantities get MOCO's schema (`anyOf` integer/string plus the quantity pattern)
//!   instead of a bare `x-kubernetes-int-or-string`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::accounts::{MySQLDatabase, MySQLUser};
use crate::backuppolicy::BackupPolicy;
use crate::mysqlcluster::MySQLCluster;

/// Errors of CRD generation.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The derived CRD could not be converted to or from JSON.
    #[error("CRD {name}: JSON conversion failed: {source}")]
    Json {
        /// CRD name.
        name: String,
        /// The serde error.
        source: serde_json::Error,
    },
    /// The CRD could not be written as YAML.
    #[error("CRD {name}: YAML serialization failed: {message}")]
    Yaml {
        /// CRD name.
        name: String,
        /// The serializer's message.
        message: String,
    },
    /// The derived CRD lacks an openAPIV3Schema.
    #[error("CRD {0}: the derived CRD has no openAPIV3Schema")]
    NoSchema(String),
}

/// The pattern of Kubernetes resource quantities, as in MOCO's CRDs.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Paths (below the root schema) of embedded Kubernetes types whose inner descriptions are dropped.
/// `[]` steps into array items.
const MYSQLCLUSTER_EMBEDDED: &[&str] = &[
    "spec.podTemplate.spec",
    "spec.podTemplate.overwriteContainers[].resources",
    "spec.podTemplate.overwriteContainers[].securityContext",
    "spec.volumeClaimTemplates[].spec",
    "spec.primaryServiceTemplate.spec",
    "spec.replicaServiceTemplate.spec",
    "spec.restore.restorePoint",
    "spec.restore.jobConfig.workVolume",
    "spec.restore.jobConfig.env",
    "spec.restore.jobConfig.envFrom",
    "spec.restore.jobConfig.affinity",
    "spec.restore.jobConfig.volumes",
    "spec.restore.jobConfig.volumeMounts",
    "spec.restore.jobConfig.cpu",
    "spec.restore.jobConfig.maxCpu",
    "spec.restore.jobConfig.memory",
    "spec.restore.jobConfig.maxMemory",
    "status.conditions",
    "status.backup.time",
    "status.restoredTime",
];

const BACKUPPOLICY_EMBEDDED: &[&str] = &[
    "spec.jobConfig.workVolume",
    "spec.jobConfig.env",
    "spec.jobConfig.envFrom",
    "spec.jobConfig.affinity",
    "spec.jobConfig.volumes",
    "spec.jobConfig.volumeMounts",
    "spec.jobConfig.cpu",
    "spec.jobConfig.maxCpu",
    "spec.jobConfig.memory",
    "spec.jobConfig.maxMemory",
];

/// Only the conditions are embedded Kubernetes types in moco-rs's own kinds.
const ACCOUNTS_EMBEDDED: &[&str] = &["status.conditions"];

/// The MySQLCluster CRD as installed.
pub fn mysqlcluster_crd() -> Result<CustomResourceDefinition, CrdError> {
    finish(MySQLCluster::crd(), MYSQLCLUSTER_EMBEDDED)
}

/// The BackupPolicy CRD as installed.
pub fn backuppolicy_crd() -> Result<CustomResourceDefinition, CrdError> {
    finish(BackupPolicy::crd(), BACKUPPOLICY_EMBEDDED)
}

/// The MySQLUser CRD (`moco-rs.io/v1alpha1`) as installed.
pub fn mysqluser_crd() -> Result<CustomResourceDefinition, CrdError> {
    finish(MySQLUser::crd(), ACCOUNTS_EMBEDDED)
}

/// The MySQLDatabase CRD (`moco-rs.io/v1alpha1`) as installed.
pub fn mysqldatabase_crd() -> Result<CustomResourceDefinition, CrdError> {
    finish(MySQLDatabase::crd(), ACCOUNTS_EMBEDDED)
}

/// Every CRD: MOCO's two (MySQLCluster first), then moco-rs's own MySQLUser and MySQLDatabase.
pub fn all_crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        mysqlcluster_crd()?,
        backuppolicy_crd()?,
        mysqluser_crd()?,
        mysqldatabase_crd()?,
    ])
}

/// One CRD as a YAML document (without the leading `---`).
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    serde_saphyr::to_string(crd).map_err(|e| CrdError::Yaml {
        name,
        message: e.to_string(),
    })
}

/// Every CRD as one multi-document YAML stream, as printed by `moco crd`.
pub fn all_crds_yaml() -> Result<String, CrdError> {
    let mut out = String::new();
    for crd in all_crds()? {
        out.push_str("---\n");
        out.push_str(&crd_yaml(&crd)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// The openAPIV3Schema of the only version of `crd`, as JSON.
pub fn schema_of(crd: &CustomResourceDefinition) -> Result<Value, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .ok_or_else(|| CrdError::NoSchema(name.clone()))?;
    serde_json::to_value(schema).map_err(|source| CrdError::Json { name, source })
}

fn finish(
    crd: CustomResourceDefinition,
    embedded: &[&str],
) -> Result<CustomResourceDefinition, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let group = crd.spec.group.clone();
    let mut value = serde_json::to_value(&crd).map_err(|source| CrdError::Json {
        name: name.clone(),
        source,
    })?;
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            let api_version = format!(
                "{group}/{}",
                version
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            if let Some(root) = version.pointer_mut("/schema/openAPIV3Schema") {
                root_fields(root, &api_version);
                quantities(root, "");
                for path in embedded {
                    if let Some(node) = walk(root, path) {
                        strip_inner_descriptions(node);
                    }
                }
            }
        }
    }
    if let Some(names) = value
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        names.insert("listKind".to_owned(), Value::String(format!("{kind}List")));
    }
    serde_json::from_value(value).map_err(|source| CrdError::Json { name, source })
}

/// Declares `apiVersion`, `kind` and `metadata` at the root like every Kubernetes CRD, and drops
/// the derive's `title`.
fn root_fields(root: &mut Value, api_version: &str) {
    let Some(map) = root.as_object_mut() else {
        return;
    };
    map.remove("title");
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.insert(
            "apiVersion".to_owned(),
            json!({"type": "string", "description": format!("APIVersion of the object: {api_version}.")}),
        );
        props.insert(
            "kind".to_owned(),
            json!({"type": "string", "description": "Kind of the object."}),
        );
        props.insert("metadata".to_owned(), json!({"type": "object"}));
    }
}

/// Follows `a.b[].c` through `properties` and `items`.
fn walk<'a>(mut node: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    for step in path.split('.') {
        let (field, into_items) = match step.strip_suffix("[]") {
            Some(f) => (f, true),
            None => (step, false),
        };
        node = node.get_mut("properties")?.get_mut(field)?;
        if into_items {
            node = node.get_mut("items")?;
        }
    }
    Some(node)
}

/// Removes every `description` strictly below `node` (its own stays).
fn strip_inner_descriptions(node: &mut Value) {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("description");
                for (key, child) in map.iter_mut() {
                    // Property names are data, not schema keywords: recurse into each property schema.
                    if key == "properties" {
                        if let Value::Object(props) = child {
                            props.values_mut().for_each(strip);
                        }
                    } else {
                        strip(child);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    if let Value::Object(map) = node {
        for (key, child) in map.iter_mut() {
            if key != "description" {
                if key == "properties" {
                    if let Value::Object(props) = child {
                        props.values_mut().for_each(strip);
                    }
                } else {
                    strip(child);
                }
            }
        }
    }
}

/// Gives quantity-typed nodes MOCO's `anyOf` + pattern schema. Every int-or-string node is a
/// quantity except the IntOrString ports of probes, lifecycle handlers and Service ports.
fn quantities(v: &mut Value, key: &str) {
    match v {
        Value::Object(map) => {
            let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
            if int_or_string && key != "port" && key != "targetPort" {
                map.insert(
                    "anyOf".to_owned(),
                    json!([{"type": "integer"}, {"type": "string"}]),
                );
                map.insert(
                    "pattern".to_owned(),
                    Value::String(QUANTITY_PATTERN.to_owned()),
                );
            }
            for (k, child) in map.iter_mut() {
                if k == "properties" {
                    if let Value::Object(props) = child {
                        for (name, prop) in props.iter_mut() {
                            quantities(prop, name);
                        }
                    }
                } else {
                    quantities(child, k);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| quantities(i, key)),
        _ => {}
    }
}
