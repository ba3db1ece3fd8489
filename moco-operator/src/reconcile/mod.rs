//! Reconciling one MySQLCluster: read what the objects depend on, build them
//! ([`crate::render`]), apply them in MOCO's order, and record the outcome in the status.
//!
//! One round, in order (each step ends the round on error):
//! 1. the controller's password Secret (created once), the cluster's copies and option files;
//! 2. the agent Certificate (created once) and the copy of its Secret;
//! 3. the my.cnf ConfigMap (old ones pruned) and the slow-log ConfigMap (or none);
//! 4. the ServiceAccount and the three Services;
//! 5. PVC growth and, when the claim templates differ in anything, the StatefulSet's deletion
//!    with its Pods orphaned (its creation in step 6 is the re-creation, counted as one);
//! 6. the StatefulSet, applied only when its rendering changed or a field the operator owns
//!    drifted ([`drift`]);
//! 7. the PodDisruptionBudget; the backup CronJob and the restore Job with their RBAC. Of the
//!    budget, the backup objects and the archiver, a round deletes those it does not need only
//!    if the controller's stores do not rule them out ([`existing`]).
//!
//! The status (`StatefulSetReady`, `ReconcileSuccess`, `ReconciliationActive`,
//! `reconcileInfo`) is written at the end of every round, failed ones included, as MOCO does.
//! What clustering should do next is returned to the caller, which owns the clustering
//! managers.

pub mod apply;
pub mod conditions;
pub mod drift;
pub mod existing;
pub mod history;
mod read;
pub mod rollout;
pub mod rotation;
mod services;
mod status;
mod volumes;

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Resource};
use moco_api::annotations::{is_true, tls_of};
use moco_api::cluster::ClusterId;
use moco_api::labels::{
    ANNOTATION_CLUSTERING_STOPPED, ANNOTATION_RECONCILIATION_STOPPED, FINALIZER,
};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::resources::VolumeError;
use moco_kube::api::{label_selector, retry};
use moco_kube::metrics::{ClusterLabels, ClusterMetrics, ReconcileLabels};
use serde_json::Value;

use crate::error::ErrorCategory;
use crate::render::{
    ClusterInputs, ClusterObjects, JobObjects, RenderError, RenderSettings, TlsObjects,
};

use apply::{apply, create_once, delete_if_present};
use drift::{ApplyReason, apply_reason, with_hash};

/// What reconcile needs besides the cluster.
#[derive(Clone)]
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Images, namespace and security defaults.
    pub settings: RenderSettings,
    /// my.cnf (and slow-log) ConfigMaps kept per cluster (`--mysql-configmap-history-limit`).
    pub history_limit: i32,
    /// Label keys copied from claim templates to PVCs (`--pvc-sync-label-keys`).
    pub pvc_sync_label_keys: Vec<String>,
    /// Annotation keys copied from claim templates to PVCs (`--pvc-sync-annotation-keys`).
    pub pvc_sync_annotation_keys: Vec<String>,
    /// Counters and gauges.
    pub metrics: ClusterMetrics,
    /// The clock (tests fix it).
    pub now: Arc<dyn Fn() -> Time + Send + Sync>,
    /// What the controller's watches say exists of the objects a round may delete (the
    /// default knows nothing, and every such delete is sent).
    pub existing: existing::Existing,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .field("history_limit", &self.history_limit)
            .finish_non_exhaustive()
    }
}

/// The wall clock as a Kubernetes time.
pub fn wall_clock() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The steps of a round, named in errors and in the `result` label of the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reading the cluster and what it names.
    Read,
    /// The password Secrets.
    Secrets,
    /// The agent Certificate and its Secret's copy.
    Certificate,
    /// The my.cnf and slow-log ConfigMaps.
    ConfigMaps,
    /// The ServiceAccount and Services.
    Services,
    /// PVC growth and StatefulSet re-creation.
    Volumes,
    /// The StatefulSet.
    StatefulSet,
    /// The PodDisruptionBudget.
    Pdb,
    /// The backup CronJob and its RBAC, and the binlog archiver.
    Backup,
    /// The restore Job and its RBAC.
    Restore,
    /// The status write.
    Status,
    /// The finalizer.
    Finalizer,
}

impl Step {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Read => "read",
            Step::Secrets => "secrets",
            Step::Certificate => "certificate",
            Step::ConfigMaps => "configmaps",
            Step::Services => "services",
            Step::Volumes => "volumes",
            Step::StatefulSet => "statefulset",
            Step::Pdb => "pdb",
            Step::Backup => "backup",
            Step::Restore => "restore",
            Step::Status => "status",
            Step::Finalizer => "finalizer",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a round failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API request failed (after retries).
    #[error("{step}: {source}")]
    Api {
        /// Where.
        step: Step,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The objects cannot be built from the cluster as it is.
    #[error("{0}")]
    Render(#[from] RenderError),
    /// Something the cluster names is missing or unusable; the message names it.
    #[error("{step}: {message}")]
    Input {
        /// Where.
        step: Step,
        /// What, naming the field or object.
        message: String,
    },
    /// The volume templates shrank below existing PVCs.
    #[error("volumes: {0}")]
    Volume(#[from] VolumeError),
    /// The controller's password Secret was created by another writer while this round drew
    /// passwords of its own; the next round renders with the stored ones.
    #[error("secrets: Secret {0} was created by another writer during this round")]
    SecretRaced(String),
    /// The StatefulSet did not go away after its deletion for re-creation.
    #[error("volumes: StatefulSet {0} still exists 5s after its deletion for re-creation")]
    RecreateTimeout(String),
}

impl ReconcileError {
    fn api(step: Step) -> impl FnOnce(kube::Error) -> ReconcileError {
        move |source| ReconcileError::Api { step, source }
    }

    /// The failed step.
    pub fn step(&self) -> Step {
        match self {
            ReconcileError::Api { step, .. } | ReconcileError::Input { step, .. } => *step,
            ReconcileError::Render(_) => Step::Read,
            ReconcileError::SecretRaced(_) => Step::Secrets,
            ReconcileError::Volume(_) | ReconcileError::RecreateTimeout(_) => Step::Volumes,
        }
    }

    /// Its category: input (the user can fix it), conflict (another writer), or api.
    pub fn category(&self) -> ErrorCategory {
        match self {
            ReconcileError::Api {
                source: kube::Error::Api(s),
                ..
            } if s.code == 409 => ErrorCategory::Conflict,
            ReconcileError::SecretRaced(_) => ErrorCategory::Conflict,
            ReconcileError::Api { .. } | ReconcileError::RecreateTimeout(_) => ErrorCategory::Api,
            ReconcileError::Render(e) => e.category(),
            ReconcileError::Input { .. } | ReconcileError::Volume(_) => ErrorCategory::Input,
        }
    }
}

/// What the caller should do with the cluster's clustering manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clustering {
    /// Start it, or wake it.
    Run,
    /// Keep it (and its status writes) paused.
    Pause,
    /// Stop it for good: the cluster is gone.
    Stop,
    /// Leave it as it is (a round that failed before its end).
    Keep,
}

/// What a round did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What clustering should do.
    pub clustering: Clustering,
    /// Why the StatefulSet was applied, if it was.
    pub statefulset: Option<ApplyReason>,
}

fn labels(id: &ClusterId) -> ClusterLabels {
    ClusterLabels {
        name: id.name.clone(),
        namespace: id.namespace.clone(),
    }
}

/// One round for `cluster`, as read from the API server (or its cache).
pub async fn reconcile(cluster: &MySQLCluster, ctx: &Context) -> Result<Outcome, ReconcileError> {
    let id = ClusterId::of(cluster).map_err(RenderError::from)?;
    let result = reconcile_inner(cluster, &id, ctx).await;
    let outcome = match &result {
        Ok(_) => ReconcileLabels {
            result: "success",
            category: "none",
        },
        Err(e) => ReconcileLabels {
            result: e.step().as_str(),
            category: e.category().as_str(),
        },
    };
    ctx.metrics.reconcile.get_or_create(&outcome).inc();
    result
}

async fn reconcile_inner(
    cluster: &MySQLCluster,
    id: &ClusterId,
    ctx: &Context,
) -> Result<Outcome, ReconcileError> {
    let clusters: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), &id.namespace);
    if cluster.metadata.deletion_timestamp.is_some() {
        finalize(cluster, id, ctx, &clusters).await?;
        return Ok(Outcome {
            clustering: Clustering::Stop,
            statefulset: None,
        });
    }
    let has_finalizer = cluster
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER);
    if !has_finalizer {
        add_finalizer(cluster, id, &clusters).await?;
    }
    let clustering_stopped = is_true(&cluster.metadata, ANNOTATION_CLUSTERING_STOPPED);
    ctx.metrics
        .clustering_stopped
        .get_or_create(&labels(id))
        .set(i64::from(clustering_stopped));
    if is_true(&cluster.metadata, ANNOTATION_RECONCILIATION_STOPPED) {
        ctx.metrics
            .reconciliation_stopped
            .get_or_create(&labels(id))
            .set(1);
        status::reconciliation_stopped(&clusters, id, clustering_stopped, ctx).await?;
        return Ok(Outcome {
            clustering: if clustering_stopped {
                Clustering::Pause
            } else {
                Clustering::Run
            },
            statefulset: None,
        });
    }
    ctx.metrics
        .reconciliation_stopped
        .get_or_create(&labels(id))
        .set(0);

    let version = rollout::reconciler_version(cluster, ctx.settings.latest_reconciler_version);
    // Boxed: the round holds every built object across its awaits (tens of KiB of
    // k8s-openapi structs), too much for the stack of a caller's task.
    let round = Box::pin(apply_all(cluster, id, version, ctx)).await;
    let seen = read::statefulset(ctx, id).await;
    status::after_round(
        &clusters,
        id,
        cluster,
        status::Round {
            reconciler_version: version,
            ok: round.is_ok(),
        },
        seen.as_ref(),
        clustering_stopped,
        ctx,
    )
    .await?;
    let statefulset = round?;
    Ok(Outcome {
        clustering: if clustering_stopped {
            Clustering::Pause
        } else {
            Clustering::Run
        },
        statefulset,
    })
}

/// Creates the cert-manager Certificate `name` from its rendered JSON, once (cert-manager
/// renews it).
async fn create_certificate(
    certificates: &Api<DynamicObject>,
    name: &str,
    rendered: &serde_json::Value,
) -> Result<(), ReconcileError> {
    let certificate: DynamicObject =
        serde_json::from_value(rendered.clone()).map_err(|e| ReconcileError::Input {
            step: Step::Certificate,
            message: e.to_string(),
        })?;
    create_once(certificates, name, &certificate)
        .await
        .map(|_| ())
        .map_err(ReconcileError::api(Step::Certificate))
}

/// Steps 1–7 of the round; returns why the StatefulSet was applied, if it was.
async fn apply_all(
    cluster: &MySQLCluster,
    id: &ClusterId,
    reconciler_version: u32,
    ctx: &Context,
) -> Result<Option<ApplyReason>, ReconcileError> {
    let client = &ctx.client;
    let ns = id.namespace.as_str();
    let system = ctx.settings.system_namespace.as_str();

    // Read, check, build: nothing is written before the objects are built.
    let passwords = read::passwords(ctx, id).await?;
    let inputs = read::Inputs::read(ctx, cluster, id).await?;
    let checked = crate::render::checked::check(
        &ctx.settings,
        cluster,
        &inputs.user_config,
        inputs.backup_policy.as_ref(),
    )?;
    let mysql_certificate_secret = match checked.tls {
        Some(_) => read::mysql_certificate(ctx, id).await?,
        None => None,
    };
    let objects = crate::render::build(
        &ctx.settings,
        &checked,
        &ClusterInputs {
            cluster,
            user_config: &inputs.user_config,
            passwords: passwords.get(),
            certificate_secret: inputs.certificate_secret.as_ref(),
            mysql_certificate_secret: mysql_certificate_secret.as_ref(),
            backup_policy: inputs.backup_policy.as_ref(),
            backup_job_active: inputs.backup_job_active,
            deployed_slow_log: inputs.deployed_slow_log.as_ref(),
            deployed_replicas: inputs
                .deployed_statefulset
                .as_ref()
                .and_then(|s| s.spec.as_ref())
                .and_then(|s| s.replicas)
                .and_then(|n| u32::try_from(n).ok()),
            reconciler_version,
        },
    );
    // Taken apart without `..`: an object added to `ClusterObjects` does not compile until
    // this step applies (or deliberately skips) it.
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
        instance_rbac,
        services,
        statefulset,
        pdb,
        backup,
        restore,
        archive,
    } = objects;

    // 1. Secrets: the controller's first, when its passwords were drawn in this round (it is
    // created once and never updated: the passwords in it are the cluster's). If another
    // writer created it meanwhile, its passwords stand and this round's rendering is stale:
    // the round ends and the next one renders with them.
    if let read::Passwords::Drawn(passwords) = &passwords {
        let api: Api<Secret> = Api::namespaced(client.clone(), system);
        let name = id.controller_secret();
        let stored = create_once(&api, &name, &controller_secret)
            .await
            .map_err(ReconcileError::api(Step::Secrets))?;
        if read::stored_passwords(&stored, system, &name)? != *passwords {
            return Err(ReconcileError::SecretRaced(name));
        }
    }
    // A rotation of the passwords asked for (`kubectl moco credential rotate`) begins here;
    // the manager carries it out and publishes its passwords through the controller's
    // Secret, whose change brings the next round, which renders the cluster's copies below.
    rotation::begin_requested(ctx, cluster, id).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for s in [&user_secret, &mycnf_secret] {
        apply(&secrets, &name_of(s), s)
            .await
            .map_err(ReconcileError::api(Step::Secrets))?;
    }

    // 2. Certificate (created once; cert-manager renews it) and its Secret's copy.
    let certificates: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), system, &certificate_resource());
    create_certificate(&certificates, &id.certificate(), &certificate).await?;
    if let Some(s) = &grpc_secret {
        apply(&secrets, &name_of(s), s)
            .await
            .map_err(ReconcileError::api(Step::Certificate))?;
    }
    // mysqld's, with TLS: the Pods start once its key pair's copy exists.
    if let Some(TlsObjects {
        certificate,
        server_secret,
        ca_secret,
    }) = &tls
    {
        create_certificate(&certificates, &id.mysql_certificate(), certificate).await?;
        for s in [server_secret, ca_secret].into_iter().flatten() {
            apply(&secrets, &name_of(s), s)
                .await
                .map_err(ReconcileError::api(Step::Certificate))?;
        }
    }

    // 3. ConfigMaps, then the history beyond the limit.
    apply_config_maps(&mycnf_config_map, slow_log_config_map.as_ref(), id, ctx).await?;

    // 4. ServiceAccount and Services.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    apply(&accounts, &id.prefixed(), &service_account)
        .await
        .map_err(ReconcileError::api(Step::Services))?;
    let (role, binding) = &instance_rbac;
    apply_rbac(ctx, id, &id.prefixed(), role, binding, Step::Services).await?;
    let service_api: Api<Service> = Api::namespaced(client.clone(), ns);
    for s in &services {
        services::apply_service(&service_api, &name_of(s), s)
            .await
            .map_err(ReconcileError::api(Step::Services))?;
    }

    // 5–6. Volumes, then the StatefulSet. Its claim templates cannot be updated: when the
    // rendered ones differ in anything, the volume step deletes the StatefulSet (orphaning the
    // Pods) and its creation below is the re-creation, counted by the re-creation metrics in
    // this round and in every later one until it succeeds.
    let mut statefulset = statefulset;
    if let Some(d) = &inputs.deployed_statefulset {
        keep_claim_owner_api_version(&mut statefulset, d, &id.uid);
    }
    let rendered = with_hash(to_value(&statefulset, Step::StatefulSet)?);
    let recreation = match &inputs.deployed_statefulset {
        Some(d) => drift::recreation(&rendered, Some(&to_value(d, Step::StatefulSet)?), false),
        None => drift::recreation(&rendered, None, read::orphaned_pods(ctx, id).await?),
    };
    let deployed =
        volumes::reconcile(cluster, id, ctx, inputs.deployed_statefulset, &recreation).await?;
    let deployed_value = deployed
        .as_ref()
        .map(|d| to_value(d, Step::StatefulSet))
        .transpose()?;
    let reason = apply_reason(&rendered, deployed_value.as_ref());
    if let Some(reason) = &reason {
        let recreating = deployed.is_none() && recreation.recreates();
        let decision = rollout::decide(
            cluster,
            ctx.settings.latest_reconciler_version,
            &statefulset,
            deployed.as_ref(),
        );
        tracing::info!(
            cluster = %id.name,
            namespace = %id.namespace,
            ?reason,
            recreating,
            reconciler_version,
            rollout = ?decision.action,
            "applying the StatefulSet"
        );
        let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
        let applied = apply(&statefulsets, &id.prefixed(), &rendered).await;
        if recreating {
            let metric = labels(id);
            let counter = match &applied {
                Ok(_) => &ctx.metrics.statefulset_recreate,
                Err(_) => &ctx.metrics.statefulset_recreate_errors,
            };
            counter.get_or_create(&metric).inc();
            applied.map_err(ReconcileError::api(Step::Volumes))?;
        } else {
            applied.map_err(ReconcileError::api(Step::StatefulSet))?;
        }
    }

    // 7. PDB, backup, restore.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    match &pdb {
        Some(p) => {
            apply(&pdbs, &id.prefixed(), p)
                .await
                .map_err(ReconcileError::api(Step::Pdb))?;
        }
        None if inputs.present.pdb => {
            delete_if_present(&pdbs, &id.prefixed(), &DeleteParams::default())
                .await
                .map_err(ReconcileError::api(Step::Pdb))?;
        }
        None => {}
    }
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    match &backup {
        Some(b) => {
            apply_rbac(
                ctx,
                id,
                &id.backup(),
                &b.role,
                &b.role_binding,
                Step::Backup,
            )
            .await?;
            apply(&cronjobs, &id.backup(), &b.workload)
                .await
                .map_err(ReconcileError::api(Step::Backup))?;
        }
        None => {
            // Only what the stores do not rule out: a cluster that never had a backup sends
            // no DELETE (they were three answered 404 in every round).
            let dp = DeleteParams::background();
            let present = &inputs.present;
            let name = id.backup();
            if present.backup_cronjob {
                delete_if_present(&cronjobs, &name, &dp)
                    .await
                    .map_err(ReconcileError::api(Step::Backup))?;
            }
            if present.backup_role {
                delete_if_present(&roles, &name, &dp)
                    .await
                    .map_err(ReconcileError::api(Step::Backup))?;
            }
            if present.backup_role_binding {
                delete_if_present(&bindings, &name, &dp)
                    .await
                    .map_err(ReconcileError::api(Step::Backup))?;
            }
        }
    }
    // The binlog archiver runs with the backup's ServiceAccount and RoleBinding.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    match &archive {
        Some(d) => {
            apply(&deployments, &id.archive(), d)
                .await
                .map_err(ReconcileError::api(Step::Backup))?;
        }
        None if inputs.present.archive => {
            delete_if_present(&deployments, &id.archive(), &DeleteParams::background())
                .await
                .map_err(ReconcileError::api(Step::Backup))?;
        }
        None => {}
    }
    reconcile_restore(cluster, id, ctx, restore.as_ref(), &inputs.present).await?;
    Ok(reason)
}

async fn apply_config_maps(
    mycnf_config_map: &ConfigMap,
    slow_log_config_map: Option<&ConfigMap>,
    id: &ClusterId,
    ctx: &Context,
) -> Result<(), ReconcileError> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let err = || ReconcileError::api(Step::ConfigMaps);
    let mycnf = name_of(mycnf_config_map);
    apply(&api, &mycnf, mycnf_config_map).await.map_err(err())?;
    let slow = slow_log_config_map.map(name_of);
    if let Some(c) = slow_log_config_map {
        apply(&api, &name_of(c), c).await.map_err(err())?;
    }
    let selector = label_selector(&id.labels());
    let params = ListParams::default().labels(&selector);
    let listed = retry(|| api.list(&params)).await.map_err(err())?;
    let listed: Vec<history::Listed> = listed
        .items
        .iter()
        .map(|c| history::Listed {
            name: name_of(c),
            created: c
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        })
        .collect();
    let mut doomed = history::to_delete(
        &listed,
        &id.mycnf_config_map_prefix(),
        &mycnf,
        ctx.history_limit,
    );
    match &slow {
        Some(current) => doomed.extend(history::to_delete(
            &listed,
            &id.slow_log_config_map_prefix(),
            current,
            ctx.history_limit,
        )),
        // The sidecar is off: none of its ConfigMaps is needed.
        None => doomed.extend(
            listed
                .iter()
                .filter(|c| c.name.starts_with(&id.slow_log_config_map_prefix()))
                .map(|c| c.name.clone()),
        ),
    }
    for name in doomed {
        delete_if_present(&api, &name, &DeleteParams::default())
            .await
            .map_err(err())?;
    }
    Ok(())
}

/// The Role and RoleBinding of a backup or restore Job.
async fn apply_rbac(
    ctx: &Context,
    id: &ClusterId,
    name: &str,
    role: &Role,
    binding: &RoleBinding,
    step: Step,
) -> Result<(), ReconcileError> {
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), &id.namespace);
    let bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &id.namespace);
    apply(&roles, name, role)
        .await
        .map_err(ReconcileError::api(step))?;
    apply(&bindings, name, binding)
        .await
        .map_err(ReconcileError::api(step))?;
    Ok(())
}

/// The restore Job exists while the restore is pending; once `restoredTime` is recorded a
/// successful Job is deleted, and a failed one is left for inspection.
///
/// Its Role and RoleBinding are applied before the Job, so its Pod finds them, and then owned
/// by the Job alone ([`crate::render::jobs::owned_by_job`]): they go with the Job, whoever
/// deletes it, and are deleted once the restore is recorded even while the Job stays.
async fn reconcile_restore(
    cluster: &MySQLCluster,
    id: &ClusterId,
    ctx: &Context,
    restore: Option<&JobObjects<Job>>,
    present: &read::Present,
) -> Result<(), ReconcileError> {
    let client = &ctx.client;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &id.namespace);
    let err = || ReconcileError::api(Step::Restore);
    let name = id.restore();
    if let Some(r) = restore {
        let job = match retry(|| jobs.get_opt(&name)).await.map_err(err())? {
            Some(job) => job,
            None => {
                apply_rbac(ctx, id, &name, &r.role, &r.role_binding, Step::Restore).await?;
                // A Job's template is immutable: create it once, never update it.
                create_once(&jobs, &name, &r.workload)
                    .await
                    .map_err(err())?
            }
        };
        let (role, binding) =
            crate::render::jobs::owned_by_job(r, &job).ok_or_else(|| ReconcileError::Input {
                step: Step::Restore,
                message: format!(
                    "Job {}/{name} has no uid: cannot own its RBAC",
                    id.namespace
                ),
            })?;
        apply_rbac(ctx, id, &name, &role, &binding, Step::Restore).await?;
        return Ok(());
    }
    let restored = cluster
        .status
        .as_ref()
        .is_some_and(|s| s.restored_time.is_some());
    if cluster.spec.restore.is_some() && restored {
        let job = if present.restore_job {
            retry(|| jobs.get_opt(&name)).await.map_err(err())?
        } else {
            None
        };
        let succeeded = job
            .as_ref()
            .and_then(|j| j.status.as_ref())
            .and_then(|s| s.succeeded)
            .unwrap_or(0)
            > 0;
        if succeeded {
            delete_if_present(&jobs, &name, &DeleteParams::background())
                .await
                .map_err(err())?;
        }
        let roles: Api<Role> = Api::namespaced(client.clone(), &id.namespace);
        let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &id.namespace);
        let dp = DeleteParams::background();
        if present.restore_role_binding {
            delete_if_present(&bindings, &name, &dp)
                .await
                .map_err(err())?;
        }
        if present.restore_role {
            delete_if_present(&roles, &name, &dp).await.map_err(err())?;
        }
    }
    Ok(())
}

/// Deletion: the controller-namespace objects (owner references cannot reach them), the
/// cluster's metrics, then the finalizer. Everything in the cluster's namespace goes with the
/// cluster by garbage collection.
async fn finalize(
    cluster: &MySQLCluster,
    id: &ClusterId,
    ctx: &Context,
    clusters: &Api<MySQLCluster>,
) -> Result<(), ReconcileError> {
    let has_finalizer = cluster
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER);
    if !has_finalizer {
        return Ok(());
    }
    let system = ctx.settings.system_namespace.as_str();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), system);
    delete_if_present(&secrets, &id.controller_secret(), &DeleteParams::default())
        .await
        .map_err(ReconcileError::api(Step::Finalizer))?;
    let certificates: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), system, &certificate_resource());
    delete_if_present(&certificates, &id.certificate(), &DeleteParams::default())
        .await
        .map_err(ReconcileError::api(Step::Finalizer))?;
    if tls_of(cluster).unwrap_or(false) {
        // cert-manager leaves a deleted Certificate's Secret behind: it holds mysqld's key.
        let name = id.mysql_certificate();
        delete_if_present(&certificates, &name, &DeleteParams::default())
            .await
            .map_err(ReconcileError::api(Step::Finalizer))?;
        delete_if_present(&secrets, &name, &DeleteParams::default())
            .await
            .map_err(ReconcileError::api(Step::Finalizer))?;
    }
    ctx.metrics.remove_cluster(&labels(id));
    let remaining: Vec<String> = cluster
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    let patch = finalizers_patch(cluster, remaining);
    clusters
        .patch(&id.name, &kube::api::PatchParams::default(), &patch)
        .await
        .map_err(ReconcileError::api(Step::Finalizer))?;
    Ok(())
}

async fn add_finalizer(
    cluster: &MySQLCluster,
    id: &ClusterId,
    clusters: &Api<MySQLCluster>,
) -> Result<(), ReconcileError> {
    let mut finalizers: Vec<String> = cluster.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(FINALIZER.to_owned());
    let patch = finalizers_patch(cluster, finalizers);
    clusters
        .patch(&id.name, &kube::api::PatchParams::default(), &patch)
        .await
        .map_err(ReconcileError::api(Step::Finalizer))?;
    Ok(())
}

/// A merge patch of the finalizer list, conditional on the resourceVersion this round read
/// (the API server refuses it with a conflict if the cluster changed since).
fn finalizers_patch(cluster: &MySQLCluster, finalizers: Vec<String>) -> kube::api::Patch<Value> {
    kube::api::Patch::Merge(serde_json::json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": cluster.metadata.resource_version,
        }
    }))
}

/// Claim templates are immutable: when the deployed ones already name this cluster as owner
/// under another API version (a cluster created through `v1beta1`), that version is kept so
/// the templates compare equal and the StatefulSet is not rewritten for it (MOCO does the same).
pub fn keep_claim_owner_api_version(rendered: &mut StatefulSet, deployed: &StatefulSet, uid: &str) {
    let deployed_version = |name: &str| {
        deployed
            .spec
            .as_ref()?
            .volume_claim_templates
            .as_ref()?
            .iter()
            .find(|t| t.metadata.name.as_deref() == Some(name))?
            .metadata
            .owner_references
            .as_ref()?
            .iter()
            .find(|r| r.uid == uid)
            .map(|r| r.api_version.clone())
    };
    let Some(templates) = rendered
        .spec
        .as_mut()
        .and_then(|s| s.volume_claim_templates.as_mut())
    else {
        return;
    };
    for t in templates {
        let Some(version) = t.metadata.name.as_deref().and_then(deployed_version) else {
            continue;
        };
        for r in t.metadata.owner_references.iter_mut().flatten() {
            if r.uid == uid {
                r.api_version.clone_from(&version);
            }
        }
    }
}

/// The cert-manager `Certificate` resource (not a k8s-openapi type).
pub fn certificate_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    )
}

fn name_of<K: Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

fn to_value<K: serde::Serialize>(object: &K, step: Step) -> Result<Value, ReconcileError> {
    serde_json::to_value(object).map_err(|e| ReconcileError::Input {
        step,
        message: e.to_string(),
    })
}
