//! The identity of a MySQLCluster and the well-known names derived from it: the names, labels
//! and owner references of the objects a cluster has, and the ports its instances listen on.
//!
//! Every name here is MOCO's, so that an operator switch finds (and adopts) the objects MOCO
//! left behind instead of creating a second set. The operator renders the objects by these
//! names, and the backup Jobs and `kubectl moco` find them by the same ones.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::labels::{
    APP_MYSQL, APP_MYSQL_BACKUP, CREATED_BY, LABEL_CREATED_BY, LABEL_INSTANCE,
    LABEL_INSTANCE_NAMESPACE, LABEL_NAME,
};
use crate::mysqlcluster::MySQLCluster;

/// API version of the MySQLCluster, as owner references name it.
pub const CLUSTER_API_VERSION: &str = "moco.cybozu.com/v1beta2";
/// Kind of the MySQLCluster, as owner references name it.
pub const CLUSTER_KIND: &str = "MySQLCluster";

/// The MySQL protocol port of every instance.
pub const MYSQL_PORT: i32 = 3306;
/// The X protocol port (MySQL only; harmless on MariaDB, where nothing listens on it).
pub const MYSQLX_PORT: i32 = 33060;
/// The admin port the controller connects to.
pub const ADMIN_PORT: i32 = 33062;
/// The agent's port (its clone API over mutual TLS).
pub const AGENT_PORT: i32 = 9080;

/// Where the client option files of MOCO's accounts are mounted in every container that needs
/// them (from the Secret [`ClusterId::mycnf_secret`]).
pub const CREDENTIALS_DIR: &str = "/mysql-credentials";

/// The key of user `user`'s option file in [`ClusterId::mycnf_secret`] and its file name in
/// [`CREDENTIALS_DIR`] (`moco-admin-my.cnf`, …).
pub fn mycnf_key(user: &str) -> String {
    format!("{user}-my.cnf")
}

/// Where the mysqld and agent containers (and the Jobs) find mysqld's TLS files, when the
/// cluster has TLS (`moco-rs/tls`).
pub const TLS_MOUNT_PATH: &str = "/mysql-tls";
/// The CA file inside [`TLS_MOUNT_PATH`]: replication channels, `mariadb-backup` and
/// `mariadb-binlog` verify their server with it.
pub const TLS_CA_FILE: &str = "/mysql-tls/ca.crt";
/// The CA's key in the cert-manager Secret of mysqld's certificate and in both of the
/// operator's copies ([`ClusterId::mysql_tls_secret`], [`ClusterId::mysql_ca_secret`]).
pub const TLS_CA_KEY: &str = "ca.crt";

/// A MySQLCluster object that is not what this build understands: a field every name needs is
/// missing, or one of this build's annotations holds a value nothing can be built from. Each
/// names the field (a JSON path).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// A field every name derives from is missing.
    #[error("{path} is missing")]
    MissingField {
        /// JSON path of the field.
        path: &'static str,
    },
    /// An annotation of this build ([`crate::annotations`]) holds a value it cannot use.
    #[error("metadata.annotations[\"{key}\"]: {message}")]
    InvalidAnnotation {
        /// The annotation's key.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl ObjectError {
    /// The JSON path of the field at fault.
    pub fn path(&self) -> String {
        match self {
            ObjectError::MissingField { path } => (*path).to_owned(),
            ObjectError::InvalidAnnotation { key, .. } => {
                format!("metadata.annotations[\"{key}\"]")
            }
        }
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
    pub fn of(cluster: &MySQLCluster) -> Result<Self, ObjectError> {
        let field = |value: &Option<String>, path: &'static str| {
            value
                .as_deref()
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .ok_or(ObjectError::MissingField { path })
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
