//! The MySQLCluster controller: watches clusters and everything they own or name, runs
//! [`crate::reconcile::reconcile`] for each change (at most `concurrency` at once, never two for
//! one cluster), tells the clustering side what to do, and runs only while this process holds
//! the leader Lease.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use kube::ResourceExt;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use moco_api::backuppolicy::BackupPolicy;
use moco_api::labels::{CREATED_BY, LABEL_CREATED_BY};
use moco_api::mysqlcluster::MySQLCluster;
use moco_kube::api::Scope;
use serde::de::DeserializeOwned;

use crate::error::ErrorCategory;
use crate::reconcile::existing::ExistingWriters;
use crate::reconcile::{Clustering, Context, ReconcileError, reconcile};

/// How long after a successful round a cluster is reconciled again without any change:
/// 10 hours, controller-runtime's default resync period, which MOCO keeps (it adds no periodic
/// requeue of its own).
///
/// Every object a round writes in the cluster's namespace is owned and watched, and so are
/// the cluster, its BackupPolicy and ConfigMap, and the certificate Secrets: a change to any of
/// them, a hand edit or deletion included, starts a reconcile at once. What no watch reports
/// and this period is left to repair: the cert-manager Certificate (created once; cert-manager
/// keeps its Secret, which is watched), the label and annotation values copied to PVCs
/// (`--pvc-sync-*-keys`), and a StorageClass that allows expansion after a growth was skipped
/// for it. None of these needs repairing within minutes (a user who fixed a StorageClass can
/// touch the cluster to have it reconciled now). At 10 minutes this resync was more than half
/// of the operator's steady requests (docs/benchmarks.md).
pub const RESYNC: Duration = Duration::from_secs(10 * 60 * 60);
/// Delay before retrying a round that failed on something the user must fix.
pub const INPUT_RETRY: Duration = Duration::from_secs(60);
/// Delay before retrying a round that failed on the API.
pub const API_RETRY: Duration = Duration::from_secs(10);

/// Where reconcile's clustering decisions go: the clustering managers, one per cluster.
pub trait ClusteringControl: Send + Sync + Debug {
    /// Starts, wakes, pauses or stops the manager of `cluster`.
    fn control(&self, cluster: &MySQLCluster, what: Clustering);
}

/// The controller's shared state.
#[derive(Debug)]
pub struct Shared {
    /// Reconcile's context.
    pub ctx: Context,
    /// The clustering managers.
    pub clustering: Arc<dyn ClusteringControl>,
}

async fn reconcile_one(
    cluster: Arc<MySQLCluster>,
    shared: Arc<Shared>,
) -> Result<Action, ReconcileError> {
    let outcome = reconcile(&cluster, &shared.ctx).await?;
    shared.clustering.control(&cluster, outcome.clustering);
    Ok(Action::requeue(RESYNC))
}

fn error_policy(cluster: Arc<MySQLCluster>, error: &ReconcileError, _: Arc<Shared>) -> Action {
    tracing::warn!(
        cluster = cluster.metadata.name.as_deref().unwrap_or_default(),
        namespace = cluster.metadata.namespace.as_deref().unwrap_or_default(),
        step = %error.step(),
        category = %error.category(),
        error = %error,
        "reconcile failed"
    );
    match error.category() {
        ErrorCategory::Input => Action::requeue(INPUT_RETRY),
        ErrorCategory::Api | ErrorCategory::Conflict => Action::requeue(API_RETRY),
    }
}

/// The clusters in `namespace` whose `field` names `name`.
fn clusters_naming(
    store: &Store<MySQLCluster>,
    namespace: Option<&str>,
    name: Option<&str>,
    field: fn(&MySQLCluster) -> Option<&String>,
) -> Vec<ObjectRef<MySQLCluster>> {
    store
        .state()
        .iter()
        .filter(|c| c.metadata.namespace.as_deref() == namespace)
        .filter(|c| field(c).map(String::as_str) == name)
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The cluster a cert-manager Secret `moco-agent-<ns>.<name>` (the agent's) or
/// `moco-mysql-<ns>.<name>` (mysqld's, with TLS) belongs to (namespaces have no dots, so the
/// first one separates).
pub fn cluster_of_certificate(name: &str) -> Option<(String, String)> {
    let rest = name
        .strip_prefix("moco-agent-")
        .or_else(|| name.strip_prefix("moco-mysql-"))?;
    let (namespace, cluster) = rest.split_once('.')?;
    (!namespace.is_empty() && !cluster.is_empty())
        .then(|| (namespace.to_owned(), cluster.to_owned()))
}

/// The cluster whose password Secret (`mysql-<ns>.<name>`, the controller's copy) this is: a
/// rotation publishes new passwords there, and the cluster's own Secrets follow in its
/// reconcile.
pub fn cluster_of_password_secret(name: &str) -> Option<(String, String)> {
    let (namespace, cluster) = name.strip_prefix("mysql-")?.split_once('.')?;
    (!namespace.is_empty() && !cluster.is_empty())
        .then(|| (namespace.to_owned(), cluster.to_owned()))
}

/// Stops the manager of a cluster the watch saw deleted. The controller reconciles only
/// clusters that exist, so one removed without passing through reconcile's finalizer (someone
/// removed the finalizer by hand) would otherwise keep its manager.
fn stop_deleted(event: &watcher::Event<MySQLCluster>, clustering: &dyn ClusteringControl) {
    if let watcher::Event::Delete(cluster) = event {
        clustering.control(cluster, Clustering::Stop);
    }
}

/// The owned objects of kind `K` (metadata only, without `managedFields`), kept in `store` on
/// their way to the controller: one watch both triggers the owners' reconciles and tells
/// reconcile what exists ([`crate::reconcile::existing`]). The store is written before the
/// event reaches the controller, so the reconcile an event starts sees it.
fn owned_into<K>(
    scope: &Scope,
    client: &kube::Client,
    config: &watcher::Config,
    store: Writer<PartialObjectMeta<K>>,
) -> impl Stream<Item = Result<PartialObjectMeta<K>, watcher::Error>> + Send + 'static
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    watcher::watcher(
        scope.api::<PartialObjectMeta<K>>(client.clone()),
        config.clone(),
    )
    .modify(|m| m.managed_fields_mut().clear())
    .reflect(store)
    .touched_objects()
}

/// The clusters a ConfigMap concerns: its owner (a ConfigMap the operator made), and those
/// naming it in `spec.mysqlConfigMapName`.
fn clusters_of_config_map(
    clusters: &Store<MySQLCluster>,
    cm: &PartialObjectMeta<ConfigMap>,
) -> Vec<ObjectRef<MySQLCluster>> {
    let namespace = cm.metadata.namespace.as_deref();
    let mut refs: Vec<ObjectRef<MySQLCluster>> = cm
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter_map(|o| ObjectRef::from_owner_ref(namespace, o, ()))
        .collect();
    refs.extend(clusters_naming(
        clusters,
        namespace,
        cm.metadata.name.as_deref(),
        |c| c.spec.mysql_config_map_name.as_ref(),
    ));
    refs
}

/// Runs the controller over every namespace until `shutdown` completes; `existing` fills
/// the stores of `shared.ctx.existing` (both from [`crate::reconcile::existing::stores`]).
pub async fn run_controller(
    shared: Arc<Shared>,
    existing: ExistingWriters,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    run_controller_in(&Scope::All, shared, existing, concurrency, shutdown).await;
}

/// Runs the controller over the namespaces of `scope` until `shutdown` completes.
///
/// One WATCH per kind, but for Secrets: the owned ones (labelled, in the scope's namespaces)
/// and the cert-manager Secrets of the controller's namespace (unlabelled, and outside the
/// scope with `--watch-namespace`) would take one watch of every Secret to share. The
/// MySQLCluster watch also stops the managers of deleted clusters; the ConfigMap watch (every
/// ConfigMap of the scope, metadata only) serves both the owned ConfigMaps and the ones
/// clusters name.
pub async fn run_controller_in(
    scope: &Scope,
    shared: Arc<Shared>,
    existing: ExistingWriters,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = shared.ctx.client.clone();
    let system = shared.ctx.settings.system_namespace.clone();
    let owned = watcher::Config::default().labels(&format!("{LABEL_CREATED_BY}={CREATED_BY}"));
    let (clusters, cluster_store) = reflector::store();
    let clustering = shared.clustering.clone();
    let cluster_events = watcher::watcher(
        scope.api::<MySQLCluster>(client.clone()),
        watcher::Config::default(),
    )
    .reflect(cluster_store)
    .inspect_ok(move |event| stop_deleted(event, clustering.as_ref()))
    .applied_objects();
    let controller = Controller::for_stream(cluster_events, clusters.clone())
        .with_config(ControllerConfig::default().concurrency(concurrency));
    let policies = clusters.clone();
    let config_maps = clusters;
    controller
        .owns(scope.api::<StatefulSet>(client.clone()), owned.clone())
        .owns(scope.api::<Service>(client.clone()), owned.clone())
        .owns(scope.api::<Secret>(client.clone()), owned.clone())
        .owns(scope.api::<ServiceAccount>(client.clone()), owned.clone())
        .owns_stream(owned_into(scope, &client, &owned, existing.pdbs))
        .owns_stream(owned_into(scope, &client, &owned, existing.cronjobs))
        .owns_stream(owned_into(scope, &client, &owned, existing.deployments))
        .owns_stream(owned_into(scope, &client, &owned, existing.roles))
        .owns_stream(owned_into(scope, &client, &owned, existing.role_bindings))
        .owns_stream(owned_into(scope, &client, &owned, existing.jobs))
        .watches_stream(
            watcher::watcher(
                scope.api::<PartialObjectMeta<ConfigMap>>(client.clone()),
                watcher::Config::default(),
            )
            .touched_objects(),
            move |cm: PartialObjectMeta<ConfigMap>| clusters_of_config_map(&config_maps, &cm),
        )
        .watches(
            scope.api::<BackupPolicy>(client.clone()),
            watcher::Config::default(),
            move |p: BackupPolicy| {
                clusters_naming(
                    &policies,
                    p.metadata.namespace.as_deref(),
                    p.metadata.name.as_deref(),
                    |c| c.spec.backup_policy_name.as_ref(),
                )
            },
        )
        .watches_stream(
            watcher::watcher(
                Api::<PartialObjectMeta<Secret>>::namespaced(client.clone(), &system),
                watcher::Config::default(),
            )
            .touched_objects(),
            |s: PartialObjectMeta<Secret>| {
                let name = s.metadata.name.as_deref()?;
                cluster_of_certificate(name)
                    .or_else(|| cluster_of_password_secret(name))
                    .map(|(ns, name)| ObjectRef::<MySQLCluster>::new(&name).within(&ns))
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile_one, error_policy, shared)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one ConfigMap watch serves both relations the two watches served: the owned
    /// ConfigMaps (by owner) and the ones a cluster names (by `mysqlConfigMapName`).
    #[test]
    fn a_config_map_concerns_its_owner_and_the_clusters_naming_it() {
        let (clusters, mut writer) = reflector::store::<MySQLCluster>();
        let cluster = |name: &str, config: Option<&str>| -> MySQLCluster {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"replicas": 1, "mysqlConfigMapName": config,
                    "podTemplate": {"spec": {"containers": []}}, "volumeClaimTemplates": []}
            }))
            .unwrap()
        };
        writer.apply_watcher_event(&watcher::Event::Init);
        for c in [cluster("a", Some("opts")), cluster("b", None)] {
            writer.apply_watcher_event(&watcher::Event::InitApply(c));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let config_map = |name: &str, owner: Option<&str>| -> PartialObjectMeta<ConfigMap> {
            let owners: Vec<serde_json::Value> = owner
                .into_iter()
                .map(|o| {
                    serde_json::json!({"apiVersion": "moco.cybozu.com/v1beta2",
                        "kind": "MySQLCluster", "name": o, "uid": "u", "controller": true})
                })
                .collect();
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}
            }))
            .unwrap()
        };
        let names = |cm: PartialObjectMeta<ConfigMap>| -> Vec<String> {
            let mut n: Vec<String> = clusters_of_config_map(&clusters, &cm)
                .into_iter()
                .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(config_map("opts", None)), ["ns/a"]);
        assert_eq!(names(config_map("moco-b.abc", Some("b"))), ["ns/b"]);
        assert_eq!(names(config_map("opts", Some("b"))), ["ns/a", "ns/b"]);
        assert!(names(config_map("kube-root-ca.crt", None)).is_empty());
    }

    /// The steady state's requests were more than half the 10-minute resync's
    /// (docs/benchmarks.md); every object a round writes is watched.
    #[test]
    fn the_resync_is_controller_runtimes_ten_hours() {
        assert_eq!(RESYNC, Duration::from_secs(36_000));
    }

    #[test]
    fn certificate_secrets_map_to_their_cluster() {
        assert_eq!(
            cluster_of_certificate("moco-agent-ns.db.x"),
            Some(("ns".into(), "db.x".into()))
        );
        assert_eq!(
            cluster_of_certificate("moco-mysql-ns.db"),
            Some(("ns".into(), "db".into()))
        );
        assert_eq!(cluster_of_certificate("moco-agent-nodot"), None);
        assert_eq!(cluster_of_certificate("mysql-ns.db"), None);
    }

    #[test]
    fn password_secrets_map_to_their_cluster() {
        assert_eq!(
            cluster_of_password_secret("mysql-ns.db.x"),
            Some(("ns".into(), "db.x".into()))
        );
        assert_eq!(cluster_of_password_secret("moco-mysql-ns.db"), None);
        assert_eq!(cluster_of_password_secret("mysql-nodot"), None);
        assert_eq!(cluster_of_password_secret("mysql-.db"), None);
    }
}
