//! Status writes of reconcile: read the latest status, change only the conditions and fields
//! reconcile owns, write it back with the read resourceVersion, and start over on a conflict
//! (the clustering manager writes its own conditions to the same status).

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Api, PostParams};
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::{MySQLCluster, MySQLClusterStatus, ReconcileInfo};
use moco_kube::api::retry;

use super::conditions::{
    self, CLUSTERING_ACTIVE, StatefulSetSeen, clustering_active, reconcile_success,
    reconciliation_active, set, set_unknown, statefulset_ready,
};
use super::{Context, ReconcileError, Step};

/// Attempts of a read-modify-write before a conflict ends the round.
const ATTEMPTS: u32 = 5;

/// Reads the status, lets `change` edit it (returning whether it did), and writes it back.
async fn modify(
    api: &Api<MySQLCluster>,
    name: &str,
    mut change: impl FnMut(&mut MySQLClusterStatus, Option<i64>) -> bool,
) -> Result<(), ReconcileError> {
    let err = ReconcileError::api(Step::Status);
    let mut attempt = 1;
    loop {
        let mut current = retry(|| api.get_status(name))
            .await
            .map_err(ReconcileError::api(Step::Status))?;
        let mut status = current.status.clone().unwrap_or_default();
        if !change(&mut status, current.metadata.generation) {
            return Ok(());
        }
        current.status = Some(status);
        match api
            .replace_status(name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < ATTEMPTS => attempt += 1,
            Err(e) => return Err(err(e)),
        }
    }
}

/// Clustering stopped by annotation: `ClusteringActive=False`, and `Available`/`Healthy`
/// become Unknown since nobody checks them (once, when it stops). Running: `True`.
fn clustering_conditions(
    status: &mut MySQLClusterStatus,
    stopped: bool,
    generation: Option<i64>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> bool {
    let was_stopped = conditions::find(&status.conditions, CLUSTERING_ACTIVE)
        .is_some_and(|c| c.status == "False");
    let mut changed = set(
        &mut status.conditions,
        &clustering_active(!stopped),
        generation,
        now,
    );
    if stopped && !was_stopped {
        changed |= set_unknown(&mut status.conditions, "Available", now);
        changed |= set_unknown(&mut status.conditions, "Healthy", now);
    }
    changed
}

/// How a round went.
#[derive(Clone, Copy, Debug)]
pub(super) struct Round {
    /// The reconciler version it rendered with: recorded with the generation, so the next
    /// round renders with it until the spec changes.
    pub reconciler_version: u32,
    /// Every step succeeded.
    pub ok: bool,
}

/// After a round (successful or not).
pub(super) async fn after_round(
    api: &Api<MySQLCluster>,
    id: &ClusterId,
    cluster: &MySQLCluster,
    Round {
        reconciler_version,
        ok,
    }: Round,
    seen: Result<&Option<StatefulSet>, &kube::Error>,
    clustering_stopped: bool,
    ctx: &Context,
) -> Result<(), ReconcileError> {
    let now = (ctx.now)();
    let generation = cluster.metadata.generation;
    let sts = match seen {
        Ok(Some(s)) => StatefulSetSeen::Found(s),
        Ok(None) => StatefulSetSeen::NotFound,
        Err(_) => StatefulSetSeen::Error,
    };
    let wanted = [
        statefulset_ready(sts),
        reconcile_success(ok),
        reconciliation_active(true),
    ];
    modify(api, &id.name, |status, _| {
        let mut changed = false;
        for w in &wanted {
            changed |= set(&mut status.conditions, w, generation, &now);
        }
        changed |= clustering_conditions(status, clustering_stopped, generation, &now);
        let info = ReconcileInfo {
            generation: generation.unwrap_or(0),
            reconcile_version: i32::try_from(reconciler_version).unwrap_or(i32::MAX),
        };
        if status.reconcile_info != info {
            status.reconcile_info = info;
            changed = true;
        }
        changed
    })
    .await
}

/// Reconciliation stopped by annotation: only `ReconciliationActive=False` and the clustering
/// conditions change.
pub(super) async fn reconciliation_stopped(
    api: &Api<MySQLCluster>,
    id: &ClusterId,
    clustering_stopped: bool,
    ctx: &Context,
) -> Result<(), ReconcileError> {
    let now = (ctx.now)();
    modify(api, &id.name, |status, generation| {
        let changed = set(
            &mut status.conditions,
            &reconciliation_active(false),
            generation,
            &now,
        );
        clustering_conditions(status, clustering_stopped, generation, &now) | changed
    })
    .await
}
