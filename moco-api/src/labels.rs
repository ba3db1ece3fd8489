//! Label, annotation and finalizer keys MOCO uses, and its well-known names.

/// `app.kubernetes.io/name`: `mysql` on cluster objects, `mysql-backup` on backup/restore objects.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/instance`: the MySQLCluster name.
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// `app.kubernetes.io/created-by`: always [`CREATED_BY`].
pub const LABEL_CREATED_BY: &str = "app.kubernetes.io/created-by";
/// `app.kubernetes.io/instance-namespace`: the cluster namespace, on objects in the controller namespace.
pub const LABEL_INSTANCE_NAMESPACE: &str = "app.kubernetes.io/instance-namespace";
/// Value of [`LABEL_CREATED_BY`].
pub const CREATED_BY: &str = "moco";
/// Value of [`LABEL_NAME`] on mysqld objects.
pub const APP_MYSQL: &str = "mysql";
/// Value of [`LABEL_NAME`] on backup and restore objects.
pub const APP_MYSQL_BACKUP: &str = "mysql-backup";

/// Pod label `moco.cybozu.com/role`: [`ROLE_PRIMARY`] or [`ROLE_REPLICA`].
pub const LABEL_ROLE: &str = "moco.cybozu.com/role";
/// Role label value of the primary Pod.
pub const ROLE_PRIMARY: &str = "primary";
/// Role label value of replica Pods.
pub const ROLE_REPLICA: &str = "replica";

/// Pod annotation requesting a switchover away from this primary (`"true"`).
pub const ANNOTATION_DEMOTE: &str = "moco.cybozu.com/demote";
/// Pod annotation protecting the primary from deletion while replicas lag (`"true"`).
pub const ANNOTATION_PREVENT_DELETE: &str = "moco.cybozu.com/prevent-delete";
/// MySQLCluster annotation pausing clustering (`"true"`).
pub const ANNOTATION_CLUSTERING_STOPPED: &str = "moco.cybozu.com/clustering-stopped";
/// MySQLCluster annotation pausing resource reconciliation (`"true"`).
pub const ANNOTATION_RECONCILIATION_STOPPED: &str = "moco.cybozu.com/reconciliation-stopped";
/// MySQLCluster annotation (copied to the StatefulSet) disabling the partitioned rollout (`"true"`).
pub const ANNOTATION_FORCE_ROLLING_UPDATE: &str = "moco.cybozu.com/force-rolling-update";
/// Annotation of password Secrets giving their format version (`"1"`).
pub const ANNOTATION_SECRET_VERSION: &str = "moco.cybozu.com/secret-version";

/// Finalizer of MySQLClusters.
pub const FINALIZER: &str = moco_core::validate::FINALIZER;

/// StorageClass annotation marking the default class.
pub const ANNOTATION_DEFAULT_STORAGE_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// Beta form of [`ANNOTATION_DEFAULT_STORAGE_CLASS`].
pub const ANNOTATION_DEFAULT_STORAGE_CLASS_BETA: &str =
    "storageclass.beta.kubernetes.io/is-default-class";

/// Webhook path of the MySQLCluster validating webhook.
pub const PATH_VALIDATE_MYSQLCLUSTER: &str = "/validate-moco-cybozu-com-v1beta2-mysqlcluster";
/// Webhook path of the MySQLCluster mutating webhook.
pub const PATH_MUTATE_MYSQLCLUSTER: &str = "/mutate-moco-cybozu-com-v1beta2-mysqlcluster";
/// Webhook path of the BackupPolicy validating webhook.
pub const PATH_VALIDATE_BACKUPPOLICY: &str = "/validate-moco-cybozu-com-v1beta2-backuppolicy";
/// Path of the StatefulSet mutating webhook (the partitioned rollout; MOCO's path).
pub const PATH_MUTATE_STATEFULSET: &str = "/mutate-apps-v1-statefulset";

/// `app.kubernetes.io/component`: tells the binlog archiver's Pods (which carry the backup
/// labels too) from the backup Jobs'.
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";

/// [`LABEL_COMPONENT`] of the binlog archiver.
pub const ARCHIVE_COMPONENT: &str = "binlog-archive";
