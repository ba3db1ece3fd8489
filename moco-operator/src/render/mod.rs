//! Every object the operator keeps for a MySQLCluster, built as a pure function of the cluster,
//! the operator's settings and what reconcile read from the API server.
//!
//! Reconcile reads (the cluster, its ConfigMap of user options, the password Secret, the
//! certificate Secret, the BackupPolicy, the deployed StatefulSet), calls [`render_cluster`],
//! and applies what comes back. `moco render` calls the same function with placeholders for
//! what only a live cluster has (the uid, the passwords), so what users review offline is what
//! the operator would create.
//!
//! Names, labels, fields and defaults are MOCO's (`docs/resources.md`); where this build departs
//! from MOCO, the module that builds the object says so.

pub mod certificate;
pub mod checked;
pub mod config_maps;
pub mod jobs;
pub mod meta;
pub mod offline;
pub mod pod_template;
pub mod secrets;
pub mod services;
pub mod statefulset;
pub mod template;
pub mod tls;
pub mod version;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use moco_api::backuppolicy::BackupPolicy;
use moco_api::cluster::ObjectError;
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::moco_accounts::MocoPasswords;
use moco_core::resources::{MycnfError, PdbDecision, PdbInput, decide_pdb};
use serde_json::Value;

use crate::error::ErrorCategory;

pub use checked::Checked;

/// This release's agent image (`docker build --target agent`; it also carries `moco-init`).
/// MOCO's agent speaks gRPC to MOCO's controller and cannot serve this operator.
pub const DEFAULT_AGENT_IMAGE: &str = "ghcr.io/moco-rs/moco-agent:0.1.0";
/// MOCO v0.36's default backup image.
pub const DEFAULT_BACKUP_IMAGE: &str = "ghcr.io/cybozu-go/moco-backup:0.36.0";
/// MOCO v0.36's default fluent-bit image of the slow-log sidecar.
pub const DEFAULT_FLUENT_BIT_IMAGE: &str = "ghcr.io/cybozu-go/moco/fluent-bit:5.0.2.1";
/// MOCO v0.36's default mysqld_exporter image.
pub const DEFAULT_MYSQLD_EXPORTER_IMAGE: &str = "ghcr.io/cybozu-go/moco/mysqld_exporter:0.19.0.1";

/// The images of the containers the operator adds (`--agent-image` and friends).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Images {
    /// `agent` sidecar and the `copy-moco-init` init container.
    pub agent: String,
    /// `backup` and `restore` Job containers.
    pub backup: String,
    /// `slow-log` sidecar.
    pub fluent_bit: String,
    /// `mysqld-exporter` sidecar.
    pub mysqld_exporter: String,
}

impl Default for Images {
    fn default() -> Self {
        Images {
            agent: DEFAULT_AGENT_IMAGE.into(),
            backup: DEFAULT_BACKUP_IMAGE.into(),
            fluent_bit: DEFAULT_FLUENT_BIT_IMAGE.into(),
            mysqld_exporter: DEFAULT_MYSQLD_EXPORTER_IMAGE.into(),
        }
    }
}

/// What the operator's flags contribute to every cluster's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderSettings {
    /// The controller's namespace (`POD_NAMESPACE`): the password Secret and the Certificate
    /// live there.
    pub system_namespace: String,
    /// Images of the added containers.
    pub images: Images,
    /// Inject `fsGroup`/`runAsUser`/`runAsGroup` 10000 where the user left them unset
    /// (`--disable-default-security-context` turns it off).
    pub default_security_context: bool,
    /// The reconciler version new and edited clusters are rendered with
    /// ([`version::LATEST_RECONCILER_VERSION`] unless an upgrade is being tested).
    pub latest_reconciler_version: u32,
    /// Seconds the mysqld container's preStop hook sleeps
    /// ([`pod_template::DEFAULT_PRE_STOP_SECONDS`] unless `--mysqld-pre-stop-seconds`).
    pub pre_stop_seconds: u32,
}

impl RenderSettings {
    /// Settings with MOCO's defaults in `system_namespace`.
    pub fn new(system_namespace: impl Into<String>) -> Self {
        RenderSettings {
            system_namespace: system_namespace.into(),
            images: Images::default(),
            default_security_context: true,
            latest_reconciler_version: version::LATEST_RECONCILER_VERSION,
            pre_stop_seconds: pod_template::DEFAULT_PRE_STOP_SECONDS,
        }
    }
}

/// What reconcile read besides the cluster itself.
#[derive(Clone, Copy, Debug)]
pub struct ClusterInputs<'a> {
    /// The cluster, admitted by the webhook (defaults applied), with its uid.
    pub cluster: &'a MySQLCluster,
    /// Data of the ConfigMap `spec.mysqlConfigMapName` (empty when unset).
    pub user_config: &'a BTreeMap<String, String>,
    /// The passwords of the eight accounts (from the controller Secret, created once).
    pub passwords: &'a MocoPasswords,
    /// Data of the cert-manager Secret of the agent certificate, once cert-manager wrote it.
    pub certificate_secret: Option<&'a BTreeMap<String, ByteString>>,
    /// Data of the cert-manager Secret of mysqld's certificate, once cert-manager wrote it
    /// (read only when the cluster has TLS).
    pub mysql_certificate_secret: Option<&'a BTreeMap<String, ByteString>>,
    /// The BackupPolicy `spec.backupPolicyName` names, as read.
    pub backup_policy: Option<&'a BackupPolicy>,
    /// The backup CronJob has an active Job (the PDB then allows no eviction).
    pub backup_job_active: bool,
    /// The `slow-log` container of the deployed StatefulSet: reused while the cluster's
    /// generation is the one last reconciled, so a new fluent-bit image alone rolls no Pod.
    pub deployed_slow_log: Option<&'a Container>,
    /// `spec.replicas` of the deployed StatefulSet: held while a shrink's leaving instances
    /// may still be needed (`moco_core::resources::statefulset_replicas`).
    pub deployed_replicas: Option<u32>,
    /// The reconciler version this round renders with
    /// (`moco_core::resources::choose_reconciler_version`).
    pub reconciler_version: u32,
}

/// Every object of one cluster, as it should be.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterObjects {
    /// `mysql-<ns>.<name>` in the controller namespace: the passwords.
    pub controller_secret: Secret,
    /// `moco-<name>`: the same passwords for the agent's environment.
    pub user_secret: Secret,
    /// `moco-my-cnf-<name>`: client option files of the accounts.
    pub mycnf_secret: Secret,
    /// cert-manager `Certificate` `moco-agent-<ns>.<name>` in the controller namespace.
    pub certificate: Value,
    /// `moco-<name>-grpc`: the copy of the certificate Secret, once it exists.
    pub grpc_secret: Option<Secret>,
    /// mysqld's certificate and its copies, when the cluster has TLS.
    pub tls: Option<TlsObjects>,
    /// `moco-<name>.<hash>`: my.cnf.
    pub mycnf_config_map: ConfigMap,
    /// `moco-slow-log-agent-config-<name>.<hash>`, unless the slow-log sidecar is disabled.
    pub slow_log_config_map: Option<ConfigMap>,
    /// `moco-<name>`: the identity of the mysqld Pods.
    pub service_account: ServiceAccount,
    /// `moco-<name>` Role and RoleBinding: the Pods may read their MySQLCluster.
    pub instance_rbac: (Role, RoleBinding),
    /// `moco-<name>` (headless), `moco-<name>-primary`, `moco-<name>-replica`.
    pub services: [Service; 3],
    /// `moco-<name>`.
    pub statefulset: StatefulSet,
    /// `moco-<name>`, when the cluster gets a budget (see `moco_core::resources::pdb`).
    pub pdb: Option<PodDisruptionBudget>,
    /// Backup CronJob, Role and RoleBinding, while `spec.backupPolicyName` is set.
    pub backup: Option<JobObjects<CronJob>>,
    /// Restore Job, Role and RoleBinding, while `spec.restore` is set and not yet done.
    pub restore: Option<JobObjects<Job>>,
    /// `moco-archive-<name>`, the binlog archiver, while the annotation
    /// [`moco_api::annotations::ARCHIVE_ANNOTATION`] asks for it (it runs with the backup policy's settings).
    pub archive: Option<Deployment>,
}

/// mysqld's TLS objects ([`tls`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TlsObjects {
    /// cert-manager `Certificate` `moco-mysql-<ns>.<name>` in the controller namespace.
    pub certificate: Value,
    /// `moco-<name>-mysql-tls` (key pair and CA, for the Pods), once cert-manager wrote it.
    pub server_secret: Option<Secret>,
    /// `moco-<name>-mysql-ca` (the CA alone, for clients), once cert-manager wrote it.
    pub ca_secret: Option<Secret>,
}

/// A backup or restore workload with the RBAC its Pods need.
#[derive(Clone, Debug, PartialEq)]
pub struct JobObjects<W> {
    /// The CronJob or Job.
    pub workload: W,
    /// What the Job may read and write.
    pub role: Role,
    /// Binds the role to the Job's ServiceAccount.
    pub role_binding: RoleBinding,
}

/// Why the objects of a cluster cannot be built. Each error names the field (JSON path) or the
/// object at fault.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A field every rendered object needs is missing.
    #[error("{path} is missing")]
    MissingField {
        /// JSON path of the field.
        path: &'static str,
    },
    /// A field holds a value no object can be built from.
    #[error("{path}: {message}")]
    InvalidField {
        /// JSON path of the field.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The user's my.cnf options cannot be written.
    #[error("ConfigMap {config_map} (spec.mysqlConfigMapName): {source}")]
    Mycnf {
        /// The ConfigMap named by `spec.mysqlConfigMapName`.
        config_map: String,
        /// What the generator refused.
        #[source]
        source: MycnfError,
    },
    /// `spec.backupPolicyName` names a BackupPolicy that was not found.
    #[error("spec.backupPolicyName: BackupPolicy {namespace}/{name} not found")]
    BackupPolicyNotFound {
        /// Namespace searched.
        namespace: String,
        /// The name given.
        name: String,
    },
}

/// The identity or an annotation of the cluster, as the operator reports it: the same path
/// and words.
impl From<ObjectError> for RenderError {
    fn from(e: ObjectError) -> Self {
        let field = e.path();
        match e {
            ObjectError::MissingField { path } => RenderError::MissingField { path },
            ObjectError::InvalidAnnotation { message, .. } => RenderError::InvalidField {
                path: field,
                message,
            },
        }
    }
}

impl RenderError {
    /// Its category: always [`ErrorCategory::Input`], what the user can fix in the cluster or
    /// the objects it names.
    pub fn category(&self) -> ErrorCategory {
        ErrorCategory::Input
    }

    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        RenderError::InvalidField {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Checks and builds every object of one cluster ([`checked::check`], then [`build`]).
pub fn render_cluster(
    settings: &RenderSettings,
    inputs: &ClusterInputs<'_>,
) -> Result<ClusterObjects, RenderError> {
    Ok(build(settings, &checked::check(settings, inputs)?))
}

/// Builds every object of one checked cluster, from [`Checked`] alone.
pub fn build(settings: &RenderSettings, checked: &Checked<'_>) -> ClusterObjects {
    let id = &checked.id;
    let flavor = checked.flavor;
    let with_tls = checked.tls.is_some();

    let mycnf_config_map = config_maps::mycnf(id, &checked.mycnf);
    let slow_log_config_map = checked
        .slow_log
        .as_ref()
        .map(|config| config_maps::slow_log(id, config));
    let pod_inputs = pod_template::PodInputs {
        id,
        settings,
        spec: checked.spec,
        force_rolling_update: checked.force_rolling_update,
        mysqld: checked.mysqld,
        flavor,
        mycnf_config_map: config_maps::name_of(&mycnf_config_map),
        slow_log_config_map: slow_log_config_map.as_ref().map(config_maps::name_of),
        lower_case_table_names: checked.lower_case_table_names.clone(),
        deployed_slow_log: checked.deployed_slow_log,
        tls: with_tls,
        reconciler_version: checked.reconciler_version,
    };
    let replicas = checked.replicas;
    let held = moco_core::resources::statefulset_replicas(
        replicas,
        checked.deployed_replicas,
        checked.leaving_may_go,
    );
    let statefulset = statefulset::statefulset(&pod_inputs, held);
    let pdb = match decide_pdb(&PdbInput {
        replicas,
        offline: checked.spec.offline,
        backup_job_active: checked.backup_job_active,
    }) {
        PdbDecision::Absent => None,
        PdbDecision::Present { max_unavailable } => Some(statefulset::pdb(id, max_unavailable)),
    };
    let backup = checked
        .backup
        .as_ref()
        .map(|b| jobs::backup(id, settings, b, flavor, with_tls));
    let archive = checked
        .backup
        .as_ref()
        .zip(checked.archive_interval)
        .map(|(b, interval)| jobs::archive(id, settings, b, flavor, interval, with_tls));
    let restore = checked
        .restore
        .as_ref()
        .map(|r| jobs::restore(id, settings, r, flavor, with_tls));

    ClusterObjects {
        controller_secret: secrets::controller(id, &settings.system_namespace, checked.passwords),
        user_secret: secrets::user(id, checked.passwords),
        mycnf_secret: secrets::mycnf(id, checked.passwords),
        certificate: certificate::certificate(id, &settings.system_namespace),
        grpc_secret: checked
            .certificate_secret
            .map(|data| certificate::grpc_secret(id, data)),
        tls: checked.tls.as_ref().map(|issuer| TlsObjects {
            certificate: tls::certificate(id, &settings.system_namespace, issuer),
            server_secret: checked
                .mysql_certificate_secret
                .map(|data| tls::server_secret(id, data)),
            ca_secret: checked
                .mysql_certificate_secret
                .map(|data| tls::ca_secret(id, data)),
        }),
        mycnf_config_map,
        slow_log_config_map,
        service_account: services::service_account(id),
        instance_rbac: services::instance_rbac(id),
        services: services::services(id, checked.spec),
        statefulset,
        pdb,
        backup,
        restore,
        archive,
    }
}

impl ClusterObjects {
    /// Every object as JSON with `apiVersion` and `kind`, in the order reconcile applies them
    /// (taken apart without `..`, as the apply step does, so none can be left out).
    pub fn to_values(&self) -> Result<Vec<Value>, serde_json::Error> {
        let ClusterObjects {
            controller_secret,
            user_secret,
            mycnf_secret,
            certificate,
            grpc_secret,
            tls,
            mycnf_config_map,
            slow_log_config_map,
            service_account,
            instance_rbac: (instance_role, instance_binding),
            services,
            statefulset,
            pdb,
            backup,
            restore,
            archive,
        } = self;
        let mut out = vec![
            typed(controller_secret)?,
            typed(user_secret)?,
            typed(mycnf_secret)?,
            certificate.clone(),
        ];
        if let Some(s) = grpc_secret {
            out.push(typed(s)?);
        }
        if let Some(TlsObjects {
            certificate,
            server_secret,
            ca_secret,
        }) = tls
        {
            out.push(certificate.clone());
            for s in [server_secret, ca_secret].into_iter().flatten() {
                out.push(typed(s)?);
            }
        }
        out.push(typed(mycnf_config_map)?);
        if let Some(c) = slow_log_config_map {
            out.push(typed(c)?);
        }
        out.push(typed(service_account)?);
        out.push(typed(instance_role)?);
        out.push(typed(instance_binding)?);
        for s in services {
            out.push(typed(s)?);
        }
        out.push(typed(statefulset)?);
        if let Some(p) = pdb {
            out.push(typed(p)?);
        }
        for job in [
            backup.as_ref().map(JobObjects::typed_parts).transpose()?,
            restore.as_ref().map(JobObjects::typed_parts).transpose()?,
        ]
        .into_iter()
        .flatten()
        {
            out.extend(job);
        }
        if let Some(a) = archive {
            out.push(typed(a)?);
        }
        Ok(out)
    }
}

impl<W: serde::Serialize> JobObjects<W> {
    /// The workload, its Role and its RoleBinding as JSON.
    fn typed_parts(&self) -> Result<[Value; 3], serde_json::Error> {
        let JobObjects {
            workload,
            role,
            role_binding,
        } = self;
        Ok([typed(workload)?, typed(role)?, typed(role_binding)?])
    }
}

/// `object` as JSON; k8s-openapi writes `apiVersion` and `kind` itself.
fn typed<K: serde::Serialize>(object: &K) -> Result<Value, serde_json::Error> {
    serde_json::to_value(object)
}
