//! The MySQLCluster controller: watches clusters and everything they own or name, runs
//! [`crate::reconcile::reconcile`] for each change (at most `concurrency` at once, never two for
//! one cluster), tells the clustering side what to do, and runs only while this process holds
//! the leader Lease.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::Api;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use moco_api::backuppolicy::BackupPolicy;
use moco_api::labels::{CREATED_BY, LABEL_CREATED_BY};
use moco_api::mysqlcluster::MySQLCluster;

use crate::reconcile::{Clustering, Context, ReconcileError, reconcile};

/// How long after a successful round a cluster is reconciled again without any change, so
/// that drift no watch reported is repaired.
pub const RESYNC: Duration = Duration::from_secs(600);
/// Delay before retrying a round that failed on something the user must fix.
pub const INPUT_RETRY: Duration = Duration::from_secs(60);
/// Delay before retrying a round that failed on the API.
pub const API_RETRY: Duration = Duration::from_secs(10);

/// The namespaces the operator watches: every one (MOCO's only choice), or one
/// (`--watch-namespace`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    #[default]
    All,
    /// This namespace alone.
    Namespace(String),
}

impl Scope {
    /// `--watch-namespace`: empty means every namespace.
    pub fn from_flag(namespace: &str) -> Self {
        match namespace.trim() {
            "" => Scope::All,
            ns => Scope::Namespace(ns.to_owned()),
        }
    }

    /// The API of the namespaced resource `K` in this scope.
    pub fn api<K>(&self, client: kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match self {
            Scope::All => Api::all(client),
            Scope::Namespace(ns) => Api::namespaced(client, ns),
        }
    }
}

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
        category = error.category(),
        error = %error,
        "reconcile failed"
    );
    match error.category() {
        "input" => Action::requeue(INPUT_RETRY),
        _ => Action::requeue(API_RETRY),
    }
}

/// The clusters in `namespace` whose `field` names `name`.
fn clusters_naming(
    store: &kube::runtime::reflector::Store<MySQLCluster>,
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

/// Runs the controller over every namespace until `shutdown` completes.
pub async fn run_controller(
    shared: Arc<Shared>,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    run_controller_in(&Scope::All, shared, concurrency, shutdown).await;
}

/// Runs the controller over the namespaces of `scope` until `shutdown` completes.
pub async fn run_controller_in(
    scope: &Scope,
    shared: Arc<Shared>,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = shared.ctx.client.clone();
    let system = shared.ctx.settings.system_namespace.clone();
    let owned = watcher::Config::default().labels(&format!("{LABEL_CREATED_BY}={CREATED_BY}"));
    let controller = Controller::new(
        scope.api::<MySQLCluster>(client.clone()),
        watcher::Config::default(),
    )
    .with_config(ControllerConfig::default().concurrency(concurrency));
    let store = controller.store();
    let policies = store.clone();
    let config_maps = store.clone();
    controller
        .owns(scope.api::<StatefulSet>(client.clone()), owned.clone())
        .owns(scope.api::<Service>(client.clone()), owned.clone())
        .owns(scope.api::<ConfigMap>(client.clone()), owned.clone())
        .owns(scope.api::<Secret>(client.clone()), owned.clone())
        .owns(scope.api::<ServiceAccount>(client.clone()), owned.clone())
        .owns(
            scope.api::<PodDisruptionBudget>(client.clone()),
            owned.clone(),
        )
        .owns(scope.api::<CronJob>(client.clone()), owned.clone())
        .owns(scope.api::<Deployment>(client.clone()), owned.clone())
        .owns(scope.api::<Job>(client.clone()), owned.clone())
        .owns(scope.api::<Role>(client.clone()), owned.clone())
        .owns(scope.api::<RoleBinding>(client.clone()), owned)
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
        .watches(
            scope.api::<ConfigMap>(client.clone()),
            watcher::Config::default(),
            move |cm: ConfigMap| {
                clusters_naming(
                    &config_maps,
                    cm.metadata.namespace.as_deref(),
                    cm.metadata.name.as_deref(),
                    |c| c.spec.mysql_config_map_name.as_ref(),
                )
            },
        )
        .watches(
            Api::<Secret>::namespaced(client.clone(), &system),
            watcher::Config::default(),
            |s: Secret| {
                s.metadata
                    .name
                    .as_deref()
                    .and_then(cluster_of_certificate)
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
}
