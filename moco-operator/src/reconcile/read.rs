//! What a round reads besides the cluster: the passwords (creating the controller's Secret on
//! the first round), the user's my.cnf options, the agent certificate, the BackupPolicy, the
//! deployed StatefulSet, whether a backup runs, and which of the objects a round may delete
//! exist (from the controller's stores, [`super::existing`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::api::{Api, ListParams};
use moco_api::annotations::tls_of;
use moco_api::backuppolicy::BackupPolicy;
use moco_api::cluster::ClusterId;
use moco_api::labels::ANNOTATION_SECRET_VERSION;
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::moco_accounts::MocoPasswords;
use moco_kube::api::{label_selector, retry};

use super::apply::FIELD_MANAGER;
use super::drift::owned_part;
use super::{Context, ReconcileError, Step};
use crate::render::ClusterInputs;
use crate::render::pod_template::names;
use crate::render::secrets::SECRET_VERSION;

/// The passwords of the cluster's accounts, as read.
pub(super) enum Passwords {
    /// From the controller's Secret, which never changes once created.
    Stored(MocoPasswords),
    /// There is no Secret yet: fresh random passwords, for the apply step to store (the
    /// rendered controller Secret) before anything that uses them.
    Drawn(MocoPasswords),
}

impl Passwords {
    /// The passwords to render with.
    pub(super) fn get(&self) -> &MocoPasswords {
        match self {
            Passwords::Stored(p) | Passwords::Drawn(p) => p,
        }
    }
}

/// The passwords of the cluster's accounts: from the controller's Secret, or drawn afresh
/// when it does not exist (created by the apply step, so reading writes nothing).
pub(super) async fn passwords(ctx: &Context, id: &ClusterId) -> Result<Passwords, ReconcileError> {
    let system = &ctx.settings.system_namespace;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), system);
    let name = id.controller_secret();
    let existing = retry(|| api.get_opt(&name))
        .await
        .map_err(ReconcileError::api(Step::Secrets))?;
    match existing {
        Some(secret) => stored_passwords(&secret, system, &name).map(Passwords::Stored),
        None => {
            let passwords =
                moco_adapters::mysql::generate_passwords().map_err(|e| ReconcileError::Input {
                    step: Step::Secrets,
                    message: format!("cannot draw random passwords from the OS: {e}"),
                })?;
            Ok(Passwords::Drawn(passwords))
        }
    }
}

/// The passwords the controller's Secret `system`/`name` holds.
pub(super) fn stored_passwords(
    secret: &Secret,
    system: &str,
    name: &str,
) -> Result<MocoPasswords, ReconcileError> {
    let invalid = |what: String| ReconcileError::Input {
        step: Step::Secrets,
        message: format!("Secret {system}/{name}: {what}"),
    };
    let version = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_SECRET_VERSION));
    if version.map(String::as_str) != Some(SECRET_VERSION) {
        return Err(invalid(format!(
            "annotation {ANNOTATION_SECRET_VERSION} is {version:?}, not \"{SECRET_VERSION}\""
        )));
    }
    let bytes: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    MocoPasswords::from_secret_data(&bytes)
        .map_err(|key| invalid(format!("key {key} is missing, empty or not UTF-8")))
}

/// Everything else the objects are rendered from.
pub(super) struct Inputs {
    pub user_config: BTreeMap<String, String>,
    pub certificate_secret: Option<BTreeMap<String, ByteString>>,
    pub mysql_certificate_secret: Option<BTreeMap<String, ByteString>>,
    pub backup_policy: Option<BackupPolicy>,
    pub backup_job_active: bool,
    pub deployed_statefulset: Option<StatefulSet>,
    pub deployed_slow_log: Option<Container>,
    pub present: Present,
}

/// Which of the objects a round deletes when they are not needed may exist: the apply step
/// deletes only these (a `false` is the store's word that the object is not there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Present {
    pub pdb: bool,
    pub backup_cronjob: bool,
    pub backup_role: bool,
    pub backup_role_binding: bool,
    pub archive: bool,
    pub restore_job: bool,
    pub restore_role: bool,
    pub restore_role_binding: bool,
}

impl Present {
    /// As the stores of `existing` say for cluster `id`.
    pub(super) fn of(existing: &super::existing::Existing, id: &ClusterId) -> Self {
        let ns = id.namespace.as_str();
        let backup = id.backup();
        let restore = id.restore();
        Present {
            pdb: existing.pdbs.may_exist(ns, &id.prefixed()),
            backup_cronjob: existing.cronjobs.may_exist(ns, &backup),
            backup_role: existing.roles.may_exist(ns, &backup),
            backup_role_binding: existing.role_bindings.may_exist(ns, &backup),
            archive: existing.deployments.may_exist(ns, &id.archive()),
            restore_job: existing.jobs.may_exist(ns, &restore),
            restore_role: existing.roles.may_exist(ns, &restore),
            restore_role_binding: existing.role_bindings.may_exist(ns, &restore),
        }
    }
}

impl Inputs {
    pub(super) async fn read(
        ctx: &Context,
        cluster: &MySQLCluster,
        id: &ClusterId,
    ) -> Result<Self, ReconcileError> {
        let client = &ctx.client;
        let ns = id.namespace.as_str();
        let read_err = || ReconcileError::api(Step::Read);

        let user_config = match &cluster.spec.mysql_config_map_name {
            None => BTreeMap::new(),
            Some(name) => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
                let cm = retry(|| api.get_opt(name))
                    .await
                    .map_err(read_err())?
                    .ok_or_else(|| ReconcileError::Input {
                        step: Step::ConfigMaps,
                        message: format!(
                            "spec.mysqlConfigMapName: ConfigMap {ns}/{name} not found"
                        ),
                    })?;
                cm.data.unwrap_or_default()
            }
        };

        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ctx.settings.system_namespace);
        let certificate = id.certificate();
        let certificate_secret = retry(|| secrets.get_opt(&certificate))
            .await
            .map_err(read_err())?
            .and_then(|s| s.data);

        let backup_policy = match &cluster.spec.backup_policy_name {
            None => None,
            Some(name) => {
                let api: Api<BackupPolicy> = Api::namespaced(client.clone(), ns);
                retry(|| api.get_opt(name)).await.map_err(read_err())?
            }
        };
        let backup_job_active = if cluster.spec.backup_policy_name.is_some() {
            let api: Api<CronJob> = Api::namespaced(client.clone(), ns);
            let name = id.backup();
            retry(|| api.get_opt(&name))
                .await
                .map_err(read_err())?
                .and_then(|c| c.status)
                .and_then(|s| s.active)
                .is_some_and(|a| !a.is_empty())
        } else {
            false
        };

        let deployed_statefulset = statefulset(ctx, id).await.map_err(read_err())?;
        // The deployed slow-log container is kept while the spec is the one last reconciled.
        let reconciled_generation = cluster.status.as_ref().map(|s| s.reconcile_info.generation);
        let deployed_slow_log = if reconciled_generation.is_some()
            && reconciled_generation == cluster.metadata.generation
        {
            deployed_statefulset.as_ref().and_then(applied_slow_log)
        } else {
            None
        };
        // mysqld's key pair, read only for a cluster with TLS (an annotation the checks refuse
        // reads nothing: the round stops at the checks).
        let mysql_certificate_secret = if tls_of(cluster).unwrap_or(false) {
            mysql_certificate(ctx, id).await?
        } else {
            None
        };
        Ok(Inputs {
            user_config,
            certificate_secret,
            mysql_certificate_secret,
            backup_policy,
            backup_job_active,
            deployed_statefulset,
            deployed_slow_log,
            present: Present::of(&ctx.existing, id),
        })
    }
}

impl Inputs {
    /// What the renderer is given of this round's reads, for `cluster` with `passwords`.
    pub(super) fn for_render<'a>(
        &'a self,
        cluster: &'a MySQLCluster,
        passwords: &'a MocoPasswords,
        reconciler_version: u32,
    ) -> ClusterInputs<'a> {
        ClusterInputs {
            cluster,
            user_config: &self.user_config,
            passwords,
            certificate_secret: self.certificate_secret.as_ref(),
            mysql_certificate_secret: self.mysql_certificate_secret.as_ref(),
            backup_policy: self.backup_policy.as_ref(),
            backup_job_active: self.backup_job_active,
            deployed_slow_log: self.deployed_slow_log.as_ref(),
            deployed_replicas: self
                .deployed_statefulset
                .as_ref()
                .and_then(|s| s.spec.as_ref())
                .and_then(|s| s.replicas)
                .and_then(|n| u32::try_from(n).ok()),
            reconciler_version,
        }
    }
}

/// The data of mysqld's cert-manager Secret, once cert-manager wrote it. Read only for a
/// cluster with TLS, so a cluster without it makes the requests it always made.
async fn mysql_certificate(
    ctx: &Context,
    id: &ClusterId,
) -> Result<Option<BTreeMap<String, ByteString>>, ReconcileError> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.settings.system_namespace);
    let name = id.mysql_certificate();
    Ok(retry(|| secrets.get_opt(&name))
        .await
        .map_err(ReconcileError::api(Step::Read))?
        .and_then(|s| s.data))
}

/// The `slow-log` container as the operator last applied it: the part of the deployed one
/// its field manager owns (MOCO extracts it the same way). The deployed container as a whole
/// also holds what the API server defaulted (`imagePullPolicy`, `terminationMessagePath`,
/// …), which the rendering never has: kept, it made every round after an apply render
/// something new and apply again.
fn applied_slow_log(sts: &StatefulSet) -> Option<Container> {
    let fields = sts
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| {
            m.manager.as_deref() == Some(FIELD_MANAGER)
                && m.operation.as_deref() == Some("Apply")
                && m.subresource.as_deref().is_none_or(str::is_empty)
        })?
        .fields_v1
        .as_ref()?;
    let owned = owned_part(&serde_json::to_value(sts).ok()?, &fields.0)?;
    let container = owned
        .pointer("/spec/template/spec/containers")?
        .as_array()?
        .iter()
        .find(|c| c.get("name").and_then(serde_json::Value::as_str) == Some(names::SLOW_LOG))?;
    serde_json::from_value(container.clone()).ok()
}

/// Whether Pods of the cluster are there without a controller (none of them being deleted):
/// left by a StatefulSet deleted with `propagationPolicy: Orphan`.
pub(super) async fn orphaned_pods(ctx: &Context, id: &ClusterId) -> Result<bool, ReconcileError> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let params = ListParams::default().labels(&label_selector(&id.labels()));
    let pods = retry(|| api.list(&params))
        .await
        .map_err(ReconcileError::api(Step::Read))?;
    Ok(pods.items.iter().any(|p| {
        p.metadata.deletion_timestamp.is_none()
            && !p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true))
    }))
}

/// The cluster's StatefulSet, if any.
pub(super) async fn statefulset(
    ctx: &Context,
    id: &ClusterId,
) -> Result<Option<StatefulSet>, kube::Error> {
    let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let name = id.prefixed();
    retry(|| api.get_opt(&name)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Regression (issue 31, defect 4): the deployed container with the API server's
    /// defaults was kept, so the round after each apply rendered it anew and applied again.
    #[test]
    fn the_slow_log_container_kept_is_the_one_applied_without_the_servers_defaults() {
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "moco-db", "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update",
                 "subresource": "status", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:status": {"f:replicas": {}}}},
                {"manager": "moco-controller", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"slow-log\"}": {".": {}, "f:name": {}, "f:image": {},
                        "f:resources": {"f:limits": {"f:cpu": {}, "f:memory": {}}}}}}}}}}
            ]},
            "spec": {"selector": {}, "serviceName": "moco-db", "template": {"spec": {"containers": [
                {"name": "mysqld", "image": "mariadb:10.11"},
                {"name": "slow-log", "image": "fluent-bit:old", "imagePullPolicy": "IfNotPresent",
                 "terminationMessagePath": "/dev/termination-log",
                 "terminationMessagePolicy": "File",
                 "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}}}
            ]}}}
        }))
        .unwrap();
        let kept = applied_slow_log(&sts).unwrap();
        assert_eq!(
            serde_json::to_value(&kept).unwrap(),
            json!({"name": "slow-log", "image": "fluent-bit:old",
                "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}}})
        );
        // Applied by someone else (no entry of the operator's): nothing is kept.
        let mut other = sts;
        other.metadata.managed_fields = None;
        assert!(applied_slow_log(&other).is_none());
    }
}
