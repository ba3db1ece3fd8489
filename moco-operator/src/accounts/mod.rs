//! The accounts controllers: MySQLUser and MySQLDatabase (`moco-rs.io/v1alpha1`) kept as
//! declared on their cluster's primary.
//!
//! Each object's step is: its cluster (missing → `ClusterNotFound`; not `Available` →
//! `ClusterNotAvailable`, looked at again in [`WAIT`]) → what it declares (for a user, the
//! password from its Secret) → what the primary holds → the plan (`moco_core::accounts`,
//! pure) → its statements → the `Ready` condition. Objects are looked at again every
//! [`RESYNC`], so a change made by hand is put back (a `DriftRepaired` warning lists it) and a
//! failover changes nothing: the next step reaches the new primary, which holds the accounts
//! through replication. A finalizer lets `deletionPolicy: Delete` drop the account or the
//! database; `Retain` (the default) leaves them.
//!
//! Two objects that declare the same account (name and host) or database of one cluster
//! conflict: the older one keeps it, the other reports `Conflict` and changes nothing.
//!
//! What a step costs is bounded per cluster, not per object (a thousand users of one cluster
//! are a thousand steps every [`RESYNC`]): the clusters come from a watch, not a read per step;
//! the primary's `moco-admin` connection is shared by every object of the cluster until the
//! primary changes or the connection fails ([`Primaries`]); a password Secret is read again
//! only when the watch of Secrets' metadata shows a new resourceVersion; a Secret's change
//! wakes the users found under its name in an index, not by a scan of every user.

mod database;
mod shared;
mod status;
mod user;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use moco_api::accounts::{MySQLDatabase, MySQLUser};
use moco_api::addresses::AddressResolver;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::ports::PortError;
use moco_kube::api::Scope;
use moco_kube::metrics::ClusterMetrics;
use moco_kube::platform::{KubePlatform, MysqlConnector};
use shared::{Passwords, Primaries, SecretIndex};

pub use status::ready_condition;

/// The finalizer both kinds carry, so that `deletionPolicy: Delete` can act.
pub const FINALIZER: &str = "moco-rs.io/accounts";

/// How often an applied object is compared with the server again (hand-made drift).
pub const RESYNC: Duration = Duration::from_secs(30);

/// How soon an object waiting for its cluster (or its Secret) is looked at again.
pub const WAIT: Duration = Duration::from_secs(10);

/// Errors that end a step early; it is retried after [`WAIT`]. What the object's owner can
/// fix (a missing cluster or Secret, a privilege the server does not know) is not an error
/// but its `Ready` condition.
#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    /// An API call failed.
    #[error("{what} {namespace}/{name}: {source}")]
    Api {
        /// What was being done.
        what: &'static str,
        /// The object's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The primary could not be reached or refused the admin account.
    #[error("{namespace}/{name}: the primary of MySQLCluster {cluster}: {source}")]
    Primary {
        /// The object's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its cluster.
        cluster: String,
        /// Why.
        #[source]
        source: PortError,
    },
    /// Adding or removing the finalizer failed.
    #[error("finalizer: {0}")]
    Finalizer(String),
}

/// Why an account or database could not be made as declared.
pub(crate) enum Failure {
    /// The owner of the object has to act: the reason and message for `Ready`.
    Refused(moco_api::accounts::ReadyReason, String),
    /// The server could not be asked; retried.
    Port(PortError),
    /// The API server could not record the claim; retried.
    Api(AccountsError),
}

fn api_error(
    what: &'static str,
    namespace: &str,
    name: &str,
    source: kube::Error,
) -> AccountsError {
    AccountsError::Api {
        what,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    }
}

/// What the steps share.
pub(crate) struct Context {
    client: kube::Client,
    addresses: Arc<dyn AddressResolver>,
    metrics: ClusterMetrics,
    /// Every MySQLUser (the controller's own store), for conflicts and Secret changes.
    users: Store<MySQLUser>,
    /// Every MySQLDatabase, for conflicts.
    databases: Store<MySQLDatabase>,
    /// Every MySQLCluster of the scope (a watch): a step reads its cluster here.
    clusters: Store<MySQLCluster>,
    /// The Secrets' metadata (a watch), to know when a password Secret changed.
    secrets: Store<PartialObjectMeta<Secret>>,
    /// The password Secrets last read, reused while their resourceVersion holds.
    passwords: Passwords,
    /// The users that name each Secret.
    by_secret: SecretIndex,
    /// Each cluster's primary, shared by its objects.
    primaries: Primaries,
}

/// The cluster an object names, and whether it has a writable primary.
pub(crate) enum ClusterState {
    /// No such MySQLCluster.
    Missing,
    /// It exists but is not `Available`; the message says what it is.
    NotAvailable(String),
    /// Its primary takes writes.
    Available(Box<MySQLCluster>),
}

impl Context {
    /// MySQLCluster `name` of `namespace` and whether its primary takes writes: from the
    /// watch, or read when the watch has not seen it (yet).
    async fn cluster(&self, namespace: &str, name: &str) -> Result<ClusterState, AccountsError> {
        let watched = self
            .clusters
            .get(&ObjectRef::new(name).within(namespace))
            .map(|c| c.as_ref().clone());
        let cluster = match watched {
            Some(cluster) => cluster,
            None => {
                let api: Api<MySQLCluster> = Api::namespaced(self.client.clone(), namespace);
                let Some(cluster) = api
                    .get_opt(name)
                    .await
                    .map_err(|e| api_error("reading MySQLCluster", namespace, name, e))?
                else {
                    self.primaries.forget(namespace, name);
                    return Ok(ClusterState::Missing);
                };
                cluster
            }
        };
        let available = cluster.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Available")
                .map(|c| (c.status == "True", c.reason.clone()))
        });
        Ok(match available {
            Some((true, _)) => ClusterState::Available(Box::new(cluster)),
            Some((false, reason)) => ClusterState::NotAvailable(format!(
                "MySQLCluster {name} is not Available ({reason})"
            )),
            None => ClusterState::NotAvailable(format!(
                "MySQLCluster {name} has no Available condition yet"
            )),
        })
    }

    /// `moco-admin` on `cluster`'s primary: the connection the cluster's objects share, or a
    /// new one when the primary changed or the last one failed.
    async fn primary(
        &self,
        cluster: &MySQLCluster,
        object: (&str, &str),
    ) -> Result<Arc<moco_adapters::mysql::MysqlInstance>, AccountsError> {
        if let Some(shared) = self.primaries.get(cluster) {
            return Ok(shared);
        }
        let (namespace, name) = object;
        let cluster_name = cluster.metadata.name.clone().unwrap_or_default();
        let primary_error = |source| AccountsError::Primary {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            cluster: cluster_name.clone(),
            source,
        };
        let id = ClusterId::of(cluster).map_err(|e| {
            primary_error(PortError::Failed {
                target: cluster_name.clone(),
                message: e.to_string(),
            })
        })?;
        let platform = KubePlatform::new(
            self.client.clone(),
            id,
            self.addresses.clone(),
            Arc::new(MysqlConnector::default()),
            None,
            self.metrics.clone(),
        );
        let (instance, index) = platform.primary_admin().await.map_err(primary_error)?;
        Ok(self.primaries.put(cluster, index, instance))
    }

    /// The password Secret `name` of `namespace` (None: it does not exist): the copy read
    /// last while the watch shows it unchanged, else read.
    async fn password_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Secret>, AccountsError> {
        let watched = self
            .secrets
            .get(&ObjectRef::new(name).within(namespace))
            .and_then(|m| m.metadata.resource_version.clone());
        if let Some(version) = &watched
            && let Some(secret) = self.passwords.get(namespace, name, version)
        {
            return Ok(Some(secret));
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = api
            .get_opt(name)
            .await
            .map_err(|e| api_error("reading Secret", namespace, name, e))?;
        match &secret {
            Some(s) => self.passwords.put(namespace, name, s.clone()),
            None => self.passwords.forget(namespace, name),
        }
        Ok(secret)
    }

    /// Records an event about the object `reference`; a failure is logged, never returned.
    async fn publish(
        &self,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        crate::events::publish(&self.client, reference, type_, reason, note).await;
    }
}

fn error_policy<K>(_: Arc<K>, error: &AccountsError, ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, "accounts step failed");
    if let AccountsError::Primary {
        namespace, cluster, ..
    } = error
    {
        // The next step connects again (a new primary, a rotated password, a new Pod IP).
        ctx.primaries.forget(namespace, cluster);
    }
    Action::requeue(WAIT)
}

/// Runs the MySQLUser and MySQLDatabase controllers over `scope` until `shutdown` completes.
pub async fn run_accounts_controllers(
    scope: &Scope,
    client: kube::Client,
    addresses: Arc<dyn AddressResolver>,
    metrics: ClusterMetrics,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let users = Controller::new(
        scope.api::<MySQLUser>(client.clone()),
        watcher::Config::default(),
    );
    let databases = Controller::new(
        scope.api::<MySQLDatabase>(client.clone()),
        watcher::Config::default(),
    );
    let (clusters, cluster_writer) = reflector::store();
    let cluster_watch = reflector(
        cluster_writer,
        watcher(
            scope.api::<MySQLCluster>(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects()
    .take_until(shutdown.clone())
    .for_each(|_| async {});
    let (secrets_store, secret_writer) = reflector::store();
    let context = Arc::new(Context {
        client: client.clone(),
        addresses,
        metrics,
        users: users.store(),
        databases: databases.store(),
        clusters: clusters.clone(),
        secrets: secrets_store,
        passwords: Passwords::default(),
        by_secret: SecretIndex::default(),
        primaries: Primaries::default(),
    });
    // A password Secret's change is applied at once: Secrets are watched by metadata only,
    // and a change wakes the users that name the Secret.
    let secrets = reflector(
        secret_writer,
        watcher(
            scope.api::<PartialObjectMeta<Secret>>(client),
            watcher::Config::default(),
        ),
    )
    .touched_objects();
    let index = context.clone();
    let users = users
        .with_config(ControllerConfig::default().concurrency(4))
        .watches_stream(secrets, move |secret: PartialObjectMeta<Secret>| {
            let namespace = secret.metadata.namespace.clone().unwrap_or_default();
            let name = secret.metadata.name.clone().unwrap_or_default();
            index
                .by_secret
                .users(&namespace, &name)
                .into_iter()
                .map(|user| ObjectRef::new(&user).within(&namespace))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown.clone())
        .run(user::step, error_policy, context.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "MySQLUser controller event");
            }
        });
    let databases = databases
        .with_config(ControllerConfig::default().concurrency(4))
        .graceful_shutdown_on(shutdown)
        .run(database::step, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "MySQLDatabase controller event");
            }
        });
    // A step reads its cluster from the watch: none runs before the watch has listed them.
    let controllers = async {
        clusters.wait_until_ready().await.ok();
        tokio::join!(users, databases);
    };
    tokio::join!(cluster_watch, controllers);
}
