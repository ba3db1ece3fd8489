//! Names, labels and owner references of the objects the operator creates for a cluster.
//!
//! Every name here is MOCO's, so that an operator switch finds (and adopts) the objects MOCO
//! left behind instead of creating a second set.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use moco_api::labels::{
    APP_MYSQL, APP_MYSQL_BACKUP, CREATED_BY, LABEL_CREATED_BY, LABEL_INSTANCE,
    LABEL_INSTANCE_NAMESPACE, LABEL_NAME,
};
use moco_api::mysqlcluster::MySQLCluster;

use super::RenderError;

/// API version of the MySQLCluster, as owner references name it.
pub const CLUSTER_API_VERSION: &str = "moco.cybozu.com/v1beta2";
/// Kind of the MySQLCluster, as owner references name it.
pub const CLUSTER_KIND: &str = "MySQLCluster";

/// MySQLCluster annotation naming the server family of its `mysqld` image: `mysql` (MOCO's,
/// the default) or `mariadb` (this build's extension; MOCO's API has no field for it).
pub const FLAVOR_ANNOTATION: &str = "moco-rs/flavor";

/// The server family of `cluster`, from [`FLAVOR_ANNOTATION`].
pub fn flavor_of(cluster: &MySQLCluster) -> Result<moco_core::facts::Flavor, RenderError> {
    use moco_core::facts::Flavor;
    match cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FLAVOR_ANNOTATION))
        .map(String::as_str)
    {
        None | Some("mysql") => Ok(Flavor::Mysql),
        Some("mariadb") => Ok(Flavor::Mariadb),
        Some(other) => Err(RenderError::invalid(
            format!("metadata.annotations[\"{FLAVOR_ANNOTATION}\"]"),
            format!("{other:?} is not a server family: use \"mysql\" or \"mariadb\""),
        )),
    }
}

/// The identity of a MySQLCluster: everything object names and references derive from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterId {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`, for the owner references.
    pub uid: String,
}

impl ClusterId {
    /// The identity of `cluster`; each missing field is an error naming it.
    pub fn of(cluster: &MySQLCluster) -> Result<Self, RenderError> {
        let field = |value: &Option<String>, path: &'static str| {
            value
                .as_deref()
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .ok_or(RenderError::MissingField { path })
        };
        Ok(ClusterId {
            name: field(&cluster.metadata.name, "metadata.name")?,
            namespace: field(&cluster.metadata.namespace, "metadata.namespace")?,
            uid: field(&cluster.metadata.uid, "metadata.uid")?,
        })
    }

    /// `moco-<name>`: StatefulSet, headless Service, ServiceAccount, PDB, user Secret.
    pub fn prefixed(&self) -> String {
        format!("moco-{}", self.name)
    }

    /// `moco-<name>-primary`.
    pub fn primary_service(&self) -> String {
        format!("moco-{}-primary", self.name)
    }

    /// `moco-<name>-replica`.
    pub fn replica_service(&self) -> String {
        format!("moco-{}-replica", self.name)
    }

    /// `mysql-<namespace>.<name>`: the password Secret in the controller namespace.
    pub fn controller_secret(&self) -> String {
        format!("mysql-{}.{}", self.namespace, self.name)
    }

    /// `moco-my-cnf-<name>`: the client option files of the accounts.
    pub fn mycnf_secret(&self) -> String {
        format!("moco-my-cnf-{}", self.name)
    }

    /// `moco-agent-<namespace>.<name>`: the agent's cert-manager Certificate and its Secret.
    pub fn certificate(&self) -> String {
        format!("moco-agent-{}.{}", self.namespace, self.name)
    }

    /// `moco-<name>-grpc`: the copy of the certificate Secret the Pods mount.
    pub fn grpc_secret(&self) -> String {
        format!("moco-{}-grpc", self.name)
    }

    /// `moco-mysql-<namespace>.<name>`: mysqld's cert-manager Certificate and its Secret, when
    /// the cluster has TLS.
    pub fn mysql_certificate(&self) -> String {
        format!("moco-mysql-{}.{}", self.namespace, self.name)
    }

    /// `moco-<name>-mysql-tls`: the copy of mysqld's certificate Secret the Pods mount.
    pub fn mysql_tls_secret(&self) -> String {
        format!("moco-{}-mysql-tls", self.name)
    }

    /// `moco-<name>-mysql-ca`: the CA that signed mysqld's certificate, for clients.
    pub fn mysql_ca_secret(&self) -> String {
        format!("moco-{}-mysql-ca", self.name)
    }

    /// Prefix of the my.cnf ConfigMaps, `moco-<name>.`; the content hash follows.
    pub fn mycnf_config_map_prefix(&self) -> String {
        format!("moco-{}.", self.name)
    }

    /// Prefix of the slow-log ConfigMaps, `moco-slow-log-agent-config-<name>.` (with the dot,
    /// unlike MOCO, so that cluster `a` never prunes cluster `ab`'s ConfigMaps).
    pub fn slow_log_config_map_prefix(&self) -> String {
        format!("moco-slow-log-agent-config-{}.", self.name)
    }

    /// `moco-backup-<name>`: CronJob, Role and RoleBinding of backups.
    pub fn backup(&self) -> String {
        format!("moco-backup-{}", self.name)
    }

    /// `moco-restore-<name>`: Job, Role and RoleBinding of the restore.
    pub fn restore(&self) -> String {
        format!("moco-restore-{}", self.name)
    }

    /// `moco-<name>-<ordinal>`: the Pod of instance `ordinal`.
    pub fn pod(&self, ordinal: u32) -> String {
        format!("{}-{ordinal}", self.prefixed())
    }

    /// The host name of instance `ordinal` inside the cluster network:
    /// `moco-<name>-<ordinal>.moco-<name>.<namespace>.svc`.
    pub fn pod_fqdn(&self, ordinal: u32) -> String {
        let sts = self.prefixed();
        format!("{sts}-{ordinal}.{sts}.{}.svc", self.namespace)
    }

    /// Labels of the cluster's mysqld objects (also the Pod selector).
    pub fn labels(&self) -> BTreeMap<String, String> {
        labels_for(APP_MYSQL, &self.name)
    }

    /// `moco-archive-<name>`: the binlog archiver's Deployment.
    pub fn archive(&self) -> String {
        format!("moco-archive-{}", self.name)
    }

    /// Labels of backup and restore objects.
    pub fn backup_labels(&self) -> BTreeMap<String, String> {
        labels_for(APP_MYSQL_BACKUP, &self.name)
    }

    /// Labels of objects in the controller namespace, which name the cluster's namespace too.
    pub fn system_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        labels.insert(LABEL_INSTANCE_NAMESPACE.into(), self.namespace.clone());
        labels
    }

    /// The controller owner reference: the object is garbage-collected with the cluster.
    pub fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: CLUSTER_API_VERSION.into(),
            kind: CLUSTER_KIND.into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// Metadata of an object in the cluster namespace, owned by the cluster.
    pub fn owned_meta(&self, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.clone()),
            labels: Some(labels),
            owner_references: Some(vec![self.owner_reference()]),
            ..ObjectMeta::default()
        }
    }

    /// Metadata of an object in the controller namespace: no owner reference (references
    /// cannot cross namespaces), so the finalizer deletes it.
    pub fn system_meta(&self, name: String, system_namespace: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(system_namespace.to_owned()),
            labels: Some(self.system_labels()),
            ..ObjectMeta::default()
        }
    }
}

fn labels_for(app: &str, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.to_owned(), app.to_owned()),
        (LABEL_INSTANCE.to_owned(), instance.to_owned()),
        (LABEL_CREATED_BY.to_owned(), CREATED_BY.to_owned()),
    ])
}

/// `base` overlaid by `over`: the operator's labels win over the user's.
pub fn overlay(
    base: &BTreeMap<String, String>,
    over: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = base.clone();
    out.extend(over.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}
