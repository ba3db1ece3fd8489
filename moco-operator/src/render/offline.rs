//! `moco render`: the objects the operator would create for the MySQLClusters of some
//! manifests, computed offline from those manifests alone.
//!
//! The clusters are first checked as `moco validate` checks them (a cluster the API server or
//! the webhooks would refuse is not rendered). The ConfigMaps named by `spec.mysqlConfigMapName`
//! and the BackupPolicies named by `spec.backupPolicyName` must be among the manifests, since
//! the operator would stop at them too. What only a live cluster has is replaced by
//! placeholders: the cluster's uid, the generated passwords, the certificate cert-manager issues.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use moco_api::backuppolicy::BackupPolicy;
use moco_api::mysqlcluster::MySQLCluster;
use moco_api::offline::{Document, Finding, OfflineError, OfflineValidator};
use moco_core::moco_accounts::MocoPasswords;
use moco_core::validate::{MutationInput, mutate_cluster_create};
use serde_json::Value;

use super::certificate::CERTIFICATE_KEYS;
use super::{ClusterInputs, RenderError, RenderSettings, render_cluster};

/// The uid written into owner references in place of the cluster's.
pub const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";
/// The value of every password and certificate in rendered Secrets.
pub const PLACEHOLDER_SECRET: &str = "PLACEHOLDER";

/// What `moco render` prints.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Rendered {
    /// Every object of every cluster, in apply order, cluster by cluster.
    pub objects: Vec<Value>,
    /// What the output stands in for (printed on standard error).
    pub warnings: Vec<String>,
}

/// Why nothing was rendered.
#[derive(Debug, thiserror::Error)]
pub enum OfflineRenderError {
    /// Setting up validation failed.
    #[error(transparent)]
    Setup(#[from] OfflineError),
    /// Some object would be refused; each finding names its field.
    #[error("{} violation(s); nothing rendered", findings.len())]
    Invalid {
        /// The violations, as `moco validate` prints them.
        findings: Vec<Finding>,
    },
    /// A cluster names an object that is not among the manifests, or cannot be built.
    #[error("{file}:{index}: MySQLCluster {namespace}/{name}: {source}")]
    Cluster {
        /// File of the cluster.
        file: String,
        /// Position of the document.
        index: usize,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What failed.
        #[source]
        source: Box<RenderError>,
    },
    /// The manifests hold no MySQLCluster.
    #[error("no MySQLCluster in the manifests")]
    NoCluster,
}

fn kind_is(v: &Value, api_version: &str, kind: &str) -> bool {
    v.get("apiVersion").and_then(Value::as_str) == Some(api_version)
        && v.get("kind").and_then(Value::as_str) == Some(kind)
}

fn key_of(v: &Value) -> (String, String) {
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let ns = match text("/metadata/namespace") {
        "" => "default",
        ns => ns,
    };
    (ns.to_owned(), text("/metadata/name").to_owned())
}

fn placeholder_passwords() -> MocoPasswords {
    let placeholder: Result<MocoPasswords, std::convert::Infallible> =
        MocoPasswords::try_from_fn(|_| Ok(PLACEHOLDER_SECRET.to_owned()));
    match placeholder {
        Ok(p) => p,
        Err(never) => match never {},
    }
}

/// Renders every MySQLCluster of `documents`.
pub fn render_documents(
    documents: &[Document],
    settings: &RenderSettings,
) -> Result<Rendered, OfflineRenderError> {
    let report = OfflineValidator::new()?.validate(documents, &[]);
    if !report.findings.is_empty() {
        return Err(OfflineRenderError::Invalid {
            findings: report.findings,
        });
    }
    let mut out = Rendered {
        warnings: report.warnings,
        ..Rendered::default()
    };
    let config_maps: BTreeMap<(String, String), BTreeMap<String, String>> = documents
        .iter()
        .filter(|d| kind_is(&d.value, "v1", "ConfigMap"))
        .map(|d| {
            let data = d
                .value
                .get("data")
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default();
            (key_of(&d.value), data)
        })
        .collect();
    let policies: BTreeMap<(String, String), BackupPolicy> = documents
        .iter()
        .filter(|d| kind_is(&d.value, "moco.cybozu.com/v1beta2", "BackupPolicy"))
        .filter_map(|d| {
            serde_json::from_value(d.value.clone())
                .ok()
                .map(|p| (key_of(&d.value), p))
        })
        .collect();
    let passwords = placeholder_passwords();
    let certificate: BTreeMap<String, ByteString> = CERTIFICATE_KEYS
        .iter()
        .map(|k| ((*k).to_owned(), ByteString(PLACEHOLDER_SECRET.into())))
        .collect();
    let empty = BTreeMap::new();
    for doc in documents
        .iter()
        .filter(|d| kind_is(&d.value, "moco.cybozu.com/v1beta2", "MySQLCluster"))
    {
        let (namespace, name) = key_of(&doc.value);
        let fail = |source| OfflineRenderError::Cluster {
            file: doc.file.clone(),
            index: doc.index,
            namespace: namespace.clone(),
            name: name.clone(),
            source: Box::new(source),
        };
        let mut cluster: MySQLCluster = serde_json::from_value(doc.value.clone())
            .map_err(|e| fail(RenderError::invalid("", e.to_string())))?;
        cluster.metadata.namespace = Some(namespace.clone());
        cluster.metadata.uid = Some(PLACEHOLDER_UID.to_owned());
        if cluster.spec.server_id_base == 0 {
            let mutation = mutate_cluster_create(&MutationInput::default(), 0);
            let base = mutation.server_id_base.unwrap_or(1);
            cluster.spec.server_id_base = base;
            out.warnings.push(format!(
                "MySQLCluster {namespace}/{name}: spec.serverIDBase is unset; the admission \
                 webhook picks a random value at creation, rendered here as {base}"
            ));
        }
        let user_config = match &cluster.spec.mysql_config_map_name {
            None => &empty,
            Some(cm) => config_maps
                .get(&(namespace.clone(), cm.clone()))
                .ok_or_else(|| {
                    fail(RenderError::invalid(
                        "spec.mysqlConfigMapName",
                        format!("ConfigMap {namespace}/{cm} is not among the manifests"),
                    ))
                })?,
        };
        let policy = cluster
            .spec
            .backup_policy_name
            .as_ref()
            .and_then(|p| policies.get(&(namespace.clone(), p.clone())));
        let objects = render_cluster(
            settings,
            &ClusterInputs {
                cluster: &cluster,
                user_config,
                passwords: &passwords,
                certificate_secret: Some(&certificate),
                mysql_certificate_secret: Some(&certificate),
                backup_policy: policy,
                backup_job_active: false,
                deployed_slow_log: None,
                deployed_replicas: None,
                reconciler_version: settings.latest_reconciler_version,
            },
        )
        .map_err(fail)?;
        let values = objects
            .to_values()
            .map_err(|e| fail(RenderError::invalid("", e.to_string())))?;
        out.objects.extend(values);
    }
    if out.objects.is_empty() {
        return Err(OfflineRenderError::NoCluster);
    }
    Ok(out)
}
