//! Stops the manager of a MySQLCluster that disappears without passing through reconcile's
//! finalizer (someone removed the finalizer by hand): the controller only reconciles objects
//! that exist, so nothing else would stop it.

use std::sync::Arc;

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use moco_api::mysqlcluster::MySQLCluster;

use super::Managers;
use crate::controller::{ClusteringControl, Scope};
use crate::reconcile::Clustering;

/// Watches the MySQLClusters of `scope` until the stream ends, stopping the manager of each
/// deleted one.
pub async fn stop_deleted(client: Client, scope: &Scope, managers: Arc<Managers>) {
    let api: Api<MySQLCluster> = scope.api(client);
    let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Delete(cluster)) => {
                managers.control(&cluster, Clustering::Stop);
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "MySQLCluster deletion watch"),
        }
    }
}
