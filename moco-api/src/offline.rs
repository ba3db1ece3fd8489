//! Offline validation of manifests, as `moco validate` runs it: what the API server and MOCO's
//! admission webhooks would say about applying the given objects, without a cluster.
//!
//! For each `MySQLCluster` or `BackupPolicy` document (`moco.cybozu.com/v1beta2`), and each
//! `MySQLUser` or `MySQLDatabase` document (moco-rs's own `moco-rs.io/v1alpha1`):
//! 1. the raw object is checked against the CRD's structural schema ([`crate::schema_check`]);
//! 2. it is decoded into the Rust type, which applies the CRD defaults;
//! 3. the mutating webhook's rules run (a MySQLCluster's `serverIDBase` of 0 gets a value: the
//!    old object's on update, else one from the mutation rule; the same functions the webhook
//!    calls), as the API server runs mutation first; the other kinds have no mutating webhook;
//! 4. the CRD's CEL rules are evaluated client-side (transition rules only on update);
//! 5. if all of that passed (as on the API server), the validating webhook's rules run (those
//!    of `moco_core::validate` for MOCO's kinds, those of [`crate::accounts::validate`] for
//!    moco-rs's own): create rules, or update rules when an object of the same kind, namespace
//!    and name is among the old documents.
//!
//! A `BackupPolicy` present in the old documents and absent from the new ones is treated as
//! deleted, and the delete rule runs against the new `MySQLCluster`s of its namespace.
//! `StorageClass` documents in either set provide the facts for the volume expansion rule;
//! without any, storage growth is reported as unchecked (a warning, not a violation).
//! Other kinds are ignored.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::cel::{CompiledSchema, Validator, compile_schema};
use moco_core::validate::{
    BackupPolicyView, ClusterReference, ClusterView, MutationInput, StorageFacts, Violation,
    mutate_cluster_create, mutate_cluster_update, storage_growth, validate_backup_policy,
    validate_backup_policy_delete, validate_cluster_create, validate_cluster_update,
};
use serde_json::Value;

use crate::accounts::validate::{
    FieldError, validate_database, validate_database_update, validate_user, validate_user_update,
};
use crate::accounts::{MySQLDatabase, MySQLUser};
use crate::backuppolicy::BackupPolicy;
use crate::convert::storage_class_facts;
use crate::crd::{
    CrdError, backuppolicy_crd, mysqlcluster_crd, mysqldatabase_crd, mysqluser_crd, schema_of,
};
use crate::mysqlcluster::MySQLCluster;
use crate::schema_check;

/// API version of MOCO's kinds, MySQLCluster and BackupPolicy.
pub const API_VERSION: &str = "moco.cybozu.com/v1beta2";
/// API version of moco-rs's own kinds, MySQLUser and MySQLDatabase
/// ([`crate::accounts::GROUP`]/[`crate::accounts::VERSION`]).
pub const ACCOUNTS_API_VERSION: &str = "moco-rs.io/v1alpha1";

/// Errors that stop offline validation altogether.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// A file is not valid YAML.
    #[error("{file}: not valid YAML: {message}")]
    Yaml {
        /// File name as given.
        file: String,
        /// Parser message.
        message: String,
    },
    /// The CRDs could not be generated.
    #[error(transparent)]
    Crd(#[from] CrdError),
    /// A CEL rule of the CRD does not compile (a bug in moco-rs).
    #[error("CEL rules of the {kind} CRD do not compile: {message}")]
    Cel {
        /// Kind.
        kind: &'static str,
        /// Compilation errors.
        message: String,
    },
}

/// One YAML document of an input file.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// File name as given (`-` for standard input).
    pub file: String,
    /// 1-based position of the document in its file.
    pub index: usize,
    /// The document.
    pub value: Value,
}

/// Splits a multi-document YAML text into documents; empty documents are dropped and the items
/// of a `kind: List` (as `kubectl get -o yaml` prints several objects) become documents with
/// the position of the list.
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<Document>, OfflineError> {
    // The user-facing wording: the default one advises Rust API changes ("use
    // Option<String>"), which means nothing to someone who wrote a manifest.
    let values: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| OfflineError::Yaml {
        file: file.to_owned(),
        message: e.render_with_formatter(&serde_saphyr::UserMessageFormatter),
    })?;
    let mut docs = Vec::new();
    for (i, value) in values.into_iter().enumerate() {
        let document = |value| Document {
            file: file.to_owned(),
            index: i + 1,
            value,
        };
        match value {
            Value::Null => {}
            Value::Object(mut map)
                if map.get("kind").and_then(Value::as_str) == Some("List")
                    && map.get("items").is_some_and(Value::is_array) =>
            {
                if let Some(Value::Array(items)) = map.remove("items") {
                    docs.extend(items.into_iter().map(document));
                }
            }
            other => docs.push(document(other)),
        }
    }
    Ok(docs)
}

/// One problem with one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// File of the document.
    pub file: String,
    /// Position of the document in the file.
    pub index: usize,
    /// `kind` of the object.
    pub kind: String,
    /// `metadata.name` of the object.
    pub name: String,
    /// Offending field path (e.g. `spec.replicas`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = if self.field.is_empty() {
            "<root>"
        } else {
            &self.field
        };
        write!(
            f,
            "{}:{}: {}/{}: {}: {}",
            self.file, self.index, self.kind, self.name, field, self.message
        )
    }
}

/// Result of offline validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Violations; non-empty means the objects would be rejected.
    pub findings: Vec<Finding>,
    /// Checks that could not be made offline.
    pub warnings: Vec<String>,
    /// Number of MySQLCluster, BackupPolicy, MySQLUser and MySQLDatabase documents checked.
    pub checked: usize,
}

/// The compiled schemas of the four CRDs, reusable across calls.
#[derive(Debug)]
pub struct OfflineValidator {
    cluster: CrdRules,
    policy: CrdRules,
    user: CrdRules,
    database: CrdRules,
    cel: Validator,
}

/// One CRD's structural schema and its compiled CEL rules.
#[derive(Debug)]
struct CrdRules {
    schema: Value,
    cel: CompiledSchema,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Cluster,
    Policy,
    User,
    Database,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Cluster, Kind::Policy, Kind::User, Kind::Database];

    fn name(self) -> &'static str {
        match self {
            Kind::Cluster => "MySQLCluster",
            Kind::Policy => "BackupPolicy",
            Kind::User => "MySQLUser",
            Kind::Database => "MySQLDatabase",
        }
    }

    /// The one version the CRD serves.
    fn api_version(self) -> &'static str {
        match self {
            Kind::Cluster | Kind::Policy => API_VERSION,
            Kind::User | Kind::Database => ACCOUNTS_API_VERSION,
        }
    }

    /// The API group with its `/`: a document of another group with the same kind name is
    /// someone else's and is not checked.
    fn group_prefix(self) -> &'static str {
        match self {
            Kind::Cluster | Kind::Policy => "moco.cybozu.com/",
            Kind::User | Kind::Database => "moco-rs.io/",
        }
    }
}

type Key = (Kind, String, String);

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn namespace_of(v: &Value) -> String {
    let ns = text(v, "/metadata/namespace");
    if ns.is_empty() {
        "default".to_owned()
    } else {
        ns.to_owned()
    }
}

/// The kind of a document this validator checks: its `kind` and its API group (any version:
/// an unserved one is reported).
fn kind_of(v: &Value) -> Option<Kind> {
    let (kind, api_version) = (text(v, "/kind"), text(v, "/apiVersion"));
    Kind::ALL
        .into_iter()
        .find(|k| k.name() == kind && api_version.starts_with(k.group_prefix()))
}

impl OfflineValidator {
    /// Generates the CRDs and compiles their CEL rules.
    pub fn new() -> Result<Self, OfflineError> {
        let rules = |kind: Kind, schema: Value| {
            let cel = compile_schema(&schema);
            if cel.has_errors() {
                let message: Vec<String> = cel
                    .compilation_errors()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                return Err(OfflineError::Cel {
                    kind: kind.name(),
                    message: message.join("; "),
                });
            }
            Ok(CrdRules { schema, cel })
        };
        Ok(OfflineValidator {
            cluster: rules(Kind::Cluster, schema_of(&mysqlcluster_crd()?)?)?,
            policy: rules(Kind::Policy, schema_of(&backuppolicy_crd()?)?)?,
            user: rules(Kind::User, schema_of(&mysqluser_crd()?)?)?,
            database: rules(Kind::Database, schema_of(&mysqldatabase_crd()?)?)?,
            cel: Validator::new(),
        })
    }

    fn rules(&self, kind: Kind) -> &CrdRules {
        match kind {
            Kind::Cluster => &self.cluster,
            Kind::Policy => &self.policy,
            Kind::User => &self.user,
            Kind::Database => &self.database,
        }
    }

    /// Validates `new` documents, treating `old` documents as the objects they replace.
    pub fn validate(&self, new: &[Document], old: &[Document]) -> Report {
        let mut report = Report::default();
        let storage = storage_facts(new.iter().chain(old));
        let mut old_objects: BTreeMap<Key, (&Document, Option<Decoded>)> = BTreeMap::new();
        for doc in old {
            let Some(kind) = kind_of(&doc.value) else {
                continue;
            };
            let key = (
                kind,
                namespace_of(&doc.value),
                text(&doc.value, "/metadata/name").to_owned(),
            );
            let decoded = decode(kind, &doc.value).ok().map(|mut d| {
                d.mutate(None);
                d
            });
            old_objects.insert(key, (doc, decoded));
        }
        let mut new_clusters: Vec<(String, ClusterReference)> = Vec::new();
        let mut new_keys = Vec::new();
        for doc in new {
            let Some(kind) = kind_of(&doc.value) else {
                continue;
            };
            report.checked += 1;
            let key = (
                kind,
                namespace_of(&doc.value),
                text(&doc.value, "/metadata/name").to_owned(),
            );
            new_keys.push(key.clone());
            let old_decoded = old_objects.get(&key).and_then(|(_, d)| d.as_ref());
            let mut finding = |field: &str, message: String| {
                report.findings.push(Finding {
                    file: doc.file.clone(),
                    index: doc.index,
                    kind: kind.name().to_owned(),
                    name: key.2.clone(),
                    field: field.to_owned(),
                    message,
                });
            };
            if text(&doc.value, "/apiVersion") != kind.api_version() {
                finding(
                    "apiVersion",
                    format!(
                        "apiVersion {:?} is not served: use {}",
                        text(&doc.value, "/apiVersion"),
                        kind.api_version()
                    ),
                );
                continue;
            }
            if key.2.is_empty() {
                finding("metadata.name", "name is required".to_owned());
            }
            let schema_errors = schema_check::check(&self.rules(kind).schema, &doc.value);
            for e in &schema_errors {
                finding(&e.path, e.message.clone());
            }
            if !schema_errors.is_empty() {
                continue;
            }
            let mut decoded = match decode(kind, &doc.value) {
                Ok(d) => d,
                Err(e) => {
                    finding("", format!("cannot decode the object: {e}"));
                    continue;
                }
            };
            decoded.mutate(old_decoded);
            if let Decoded::Cluster(c) = &decoded {
                new_clusters.push((key.1.clone(), ClusterReference::from(c.as_ref())));
            }
            // Like the API server: CEL rules are part of schema validation, and a request that
            // fails it never reaches the validating webhooks.
            let cel = self.cel_findings(kind, &decoded, &doc.value, old_decoded);
            let cel_failed = !cel.is_empty();
            for (field, message) in cel {
                finding(&field, message);
            }
            if cel_failed {
                continue;
            }
            for (field, message) in admission(&decoded, old_decoded, &storage) {
                finding(&field, message);
            }
            if let (Decoded::Cluster(c), Some(Decoded::Cluster(o)), StorageFacts::Unknown) =
                (&decoded, old_decoded, &storage)
            {
                for g in storage_growth(
                    &ClusterView::from(c.as_ref()),
                    &ClusterView::from(o.as_ref()),
                ) {
                    report.warnings.push(format!(
                        "{}:{}: MySQLCluster/{}: spec.volumeClaimTemplates[{}]: storage request \
                         of {:?} grows from {} to {}; volume expansion support not checked \
                         (give the StorageClass objects as input to check it)",
                        doc.file, doc.index, key.2, g.index, g.name, g.from, g.to
                    ));
                }
            }
        }
        // BackupPolicies that disappear are deletions.
        for (key, (doc, _)) in &old_objects {
            if key.0 != Kind::Policy || new_keys.contains(key) {
                continue;
            }
            let clusters: Vec<ClusterReference> = new_clusters
                .iter()
                .filter(|(ns, _)| *ns == key.1)
                .map(|(_, c)| c.clone())
                .collect();
            for v in validate_backup_policy_delete(&key.2, &clusters) {
                report.findings.push(Finding {
                    file: doc.file.clone(),
                    index: doc.index,
                    kind: Kind::Policy.name().to_owned(),
                    name: key.2.clone(),
                    field: v.field.to_string(),
                    message: format!("DELETE refused: {}", v.message),
                });
            }
        }
        report
    }

    /// The CRD's CEL rules over the decoded object, which holds the CRD's defaults as the API
    /// server stores them. A MySQLUser's grants are taken as written instead: decoding reads a
    /// grant's `"true"` key (a bare YAML 1.1 `on:`) as its `on` and writes `on` back, which
    /// would hide a grant giving both keys, or neither, from the rule
    /// `has(self.on) != has(self.__true__)`.
    fn cel_findings(
        &self,
        kind: Kind,
        new: &Decoded,
        raw: &Value,
        old: Option<&Decoded>,
    ) -> Vec<(String, String)> {
        let mut value = match new.to_value() {
            Ok(v) => v,
            Err(e) => return vec![(String::new(), format!("cannot encode the object: {e}"))],
        };
        if kind == Kind::User {
            let written = raw.pointer("/spec/grants").cloned();
            if let (Some(grants), Some(Value::Object(spec))) = (written, value.get_mut("spec")) {
                spec.insert("grants".to_owned(), grants);
            }
        }
        let old_value = old.map(Decoded::to_value).and_then(Result::ok);
        match self
            .cel
            .validate_compiled(&self.rules(kind).cel, &value, old_value.as_ref())
        {
            Ok(()) => Vec::new(),
            // A rule of the root with a fieldPath (the accounts' name rule, `.spec.name`) comes
            // back with its leading dot; the API server names the field `spec.name`.
            Err(errors) => errors
                .iter()
                .map(|e| {
                    let field = e.field_path.strip_prefix('.').unwrap_or(&e.field_path);
                    (field.to_owned(), e.message.clone())
                })
                .collect(),
        }
    }
}

/// A decoded object of one of the four kinds.
#[derive(Debug, Clone)]
enum Decoded {
    Cluster(Box<MySQLCluster>),
    Policy(Box<BackupPolicy>),
    User(Box<MySQLUser>),
    Database(Box<MySQLDatabase>),
}

impl Decoded {
    fn to_value(&self) -> Result<Value, serde_json::Error> {
        match self {
            Decoded::Cluster(c) => serde_json::to_value(c),
            Decoded::Policy(p) => serde_json::to_value(p),
            Decoded::User(u) => serde_json::to_value(u),
            Decoded::Database(d) => serde_json::to_value(d),
        }
    }

    /// Runs the mutating webhook's rules (the same functions the webhook calls): on update the
    /// stored `serverIDBase` when the manifest omits it, on create one from the mutation rule.
    fn mutate(&mut self, old: Option<&Decoded>) {
        let Decoded::Cluster(c) = self else {
            return;
        };
        let input = MutationInput::from(c.as_ref());
        let mutation = match old {
            Some(Decoded::Cluster(o)) => mutate_cluster_update(&input, o.spec.server_id_base),
            _ => mutate_cluster_create(&input, 0),
        };
        if let Some(base) = mutation.server_id_base {
            c.spec.server_id_base = base;
        }
    }
}

fn decode(kind: Kind, value: &Value) -> Result<Decoded, serde_json::Error> {
    Ok(match kind {
        Kind::Cluster => Decoded::Cluster(Box::new(serde_json::from_value(value.clone())?)),
        Kind::Policy => Decoded::Policy(Box::new(serde_json::from_value(value.clone())?)),
        Kind::User => Decoded::User(Box::new(serde_json::from_value(value.clone())?)),
        Kind::Database => Decoded::Database(Box::new(serde_json::from_value(value.clone())?)),
    })
}

/// The validating webhook's rules, the same functions it calls, as `(field, message)`: the
/// update rules when the old object is of the same kind, else the create rules.
fn admission(
    new: &Decoded,
    old: Option<&Decoded>,
    storage: &StorageFacts,
) -> Vec<(String, String)> {
    match (new, old) {
        (Decoded::Cluster(c), Some(Decoded::Cluster(o))) => violations(validate_cluster_update(
            &ClusterView::from(c.as_ref()),
            &ClusterView::from(o.as_ref()),
            storage,
        )),
        (Decoded::Cluster(c), _) => {
            violations(validate_cluster_create(&ClusterView::from(c.as_ref())))
        }
        (Decoded::Policy(p), _) => {
            violations(validate_backup_policy(&BackupPolicyView::from(p.as_ref())))
        }
        (Decoded::User(u), Some(Decoded::User(o))) => fields(validate_user_update(u, o)),
        (Decoded::User(u), _) => fields(validate_user(u)),
        (Decoded::Database(d), Some(Decoded::Database(o))) => {
            fields(validate_database_update(d, o))
        }
        (Decoded::Database(d), _) => fields(validate_database(d)),
    }
}

/// MOCO's kinds' violations: the field's path and the sentence MOCO's webhook answers.
fn violations(violations: Vec<Violation>) -> Vec<(String, String)> {
    violations
        .into_iter()
        .map(|v| (v.field.as_str().to_owned(), v.message))
        .collect()
}

/// moco-rs's own kinds' errors as their webhook words them: the field's path, then the problem.
fn fields(errors: Vec<FieldError>) -> Vec<(String, String)> {
    errors
        .into_iter()
        .map(|e| (e.field, e.problem.to_string()))
        .collect()
}

fn storage_facts<'a>(docs: impl Iterator<Item = &'a Document>) -> StorageFacts {
    let classes: Vec<_> = docs
        .filter(|d| text(&d.value, "/kind") == "StorageClass")
        .filter_map(|d| serde_json::from_value::<StorageClass>(d.value.clone()).ok())
        .map(|sc| storage_class_facts(&sc))
        .collect();
    if classes.is_empty() {
        StorageFacts::Unknown
    } else {
        StorageFacts::Known(classes)
    }
}

#[cfg(test)]
mod tests;
