//! Reconciling one MySQLCluster: read what the objects depend on, build them
//! ([`crate::render`]), apply them in MOCO's order, and record the outcome in the status.
//!
//! One round, in order (each step ends the round on error):
//! 1. the controller's password Secret (created once), the cluster's copies and option files;
//! 2. the agent Certificate (created once) and the copy of its Secret;
//! 3. the my.cnf ConfigMap (old ones pruned) and the slow-log ConfigMap (or none);
//! 4. the ServiceAccount and the three Services;
//! 5. PVC growth and, when the claim templates differ in anything, the StatefulSet's deletion
//!    with its Pods orphaned (its creation in step 6 is the re-creation, counted as one; when
//!    the deletion is still under way, the round that its end brings creates it: nothing waits
//!    inside a round);
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
mod config_maps;
pub mod drift;
pub mod existing;
pub mod history;
mod jobs;
mod read;
pub mod rollout;
pub mod rotation;
mod secrets;
mod services;
mod statefulset;
mod status;
mod volumes;

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Resource};
use moco_api::annotations::{is_true, tls_of};
use moco_api::cluster::ClusterId;
use moco_api::labels::{
    ANNOTATION_CLUSTERING_STOPPED, ANNOTATION_RECONCILIATION_STOPPED, FINALIZER,
};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::resources::VolumeError;
use moco_kube::metrics::{ClusterLabels, ClusterMetrics, ReconcileLabels};
use serde_json::Value;

use crate::error::ErrorCategory;
use crate::render::checked::check;
use crate::render::{ClusterObjects, RenderError, RenderSettings, build};

use apply::{Writer, delete_if_present};
use drift::ApplyReason;

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
            ReconcileError::Volume(_) => Step::Volumes,
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
            ReconcileError::Api { .. } => ErrorCategory::Api,
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

/// Steps 1–7 of the round; returns why the StatefulSet was applied, if it was.
async fn apply_all(
    cluster: &MySQLCluster,
    id: &ClusterId,
    reconciler_version: u32,
    ctx: &Context,
) -> Result<Option<ApplyReason>, ReconcileError> {
    // Read, check, build: nothing is written before every object is built.
    let passwords = read::passwords(ctx, id).await?;
    let inputs = read::Inputs::read(ctx, cluster, id).await?;
    let checked = check(
        &ctx.settings,
        &inputs.for_render(cluster, passwords.get(), reconciler_version),
    )?;
    // Taken apart without `..`: an object added to `ClusterObjects` does not compile until
    // a step below applies (or deliberately skips) it.
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
    } = build(&ctx.settings, &checked);
    let system_namespace = ctx.settings.system_namespace.as_str();
    let system = Writer::new(&ctx.client, system_namespace);
    let w = Writer::new(&ctx.client, &id.namespace);
    let present = &inputs.present;

    // 1. The passwords, then a rotation asked for (`kubectl moco credential rotate`): the
    // manager carries it out and publishes its passwords through the controller's Secret,
    // whose change brings the next round, which renders the cluster's copies.
    secrets::store_passwords(&system, system_namespace, &passwords, &controller_secret).await?;
    rotation::begin_requested(ctx, cluster, id).await?;
    w.apply_each(Step::Secrets, [&user_secret, &mycnf_secret])
        .await?;
    // 2. Certificates, and the copies of their Secrets.
    secrets::certificates(
        &system,
        &w,
        &certificate,
        grpc_secret.as_ref(),
        tls.as_ref(),
    )
    .await?;
    // 3. ConfigMaps, then the history beyond the limit.
    config_maps::apply(
        &w,
        id,
        ctx.history_limit,
        &mycnf_config_map,
        slow_log_config_map.as_ref(),
    )
    .await?;
    // 4. ServiceAccount, the Pods' RBAC, Services.
    services::apply_all(&w, &service_account, &instance_rbac, &services).await?;
    // 5–6. Volumes, then the StatefulSet.
    let reason = statefulset::reconcile(
        &w,
        ctx,
        cluster,
        id,
        statefulset,
        inputs.deployed_statefulset.clone(),
        reconciler_version,
    )
    .await?;
    // 7. PDB, backup and archiver, restore.
    let pdb_name = id.prefixed();
    w.ensure(
        Step::Pdb,
        &pdb_name,
        pdb.as_ref(),
        present.pdb,
        &DeleteParams::default(),
    )
    .await?;
    jobs::backup(&w, id, backup.as_ref(), archive.as_ref(), present).await?;
    jobs::restore(&w, cluster, id, restore.as_ref(), present).await?;
    Ok(reason)
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
