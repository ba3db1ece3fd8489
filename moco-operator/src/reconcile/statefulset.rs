//! Steps 5–6 of a round: the volumes, then the StatefulSet. Its claim templates cannot be
//! updated: when the rendered ones differ in anything, the volume step deletes the StatefulSet
//! (orphaning the Pods) and its creation here is the re-creation, counted by the re-creation
//! metrics in the round that creates it and in every later one until that succeeds. The
//! StatefulSet is applied only when its rendering changed or a field the operator owns drifted
//! ([`super::drift`]).

use k8s_openapi::api::apps::v1::StatefulSet;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;

use super::apply::{Writer, apply};
use super::drift::{self, ApplyReason, apply_reason, with_hash};
use super::volumes::{self, Deployed};
use super::{Context, ReconcileError, Step, keep_claim_owner_api_version, labels, read, to_value};

/// Steps 5–6 for the rendered `statefulset` and the `deployed` one; returns why it was
/// applied, if it was.
pub(super) async fn reconcile(
    w: &Writer<'_>,
    ctx: &Context,
    cluster: &MySQLCluster,
    id: &ClusterId,
    mut statefulset: StatefulSet,
    deployed: Option<StatefulSet>,
    reconciler_version: u32,
) -> Result<Option<ApplyReason>, ReconcileError> {
    if let Some(d) = &deployed {
        if d.metadata.deletion_timestamp.is_some() {
            // Deleted for re-creation by an earlier round, and still going: its deletion
            // brings the round that creates it.
            tracing::info!(cluster = %id.name, namespace = %id.namespace,
                "the StatefulSet is being deleted; it is created again once it is gone");
            return Ok(None);
        }
        keep_claim_owner_api_version(&mut statefulset, d, &id.uid);
    }
    let rendered = with_hash(to_value(&statefulset, Step::StatefulSet)?);
    let (deployed, recreating) = match deployed {
        Some(d) => {
            let recreation =
                drift::recreation(&rendered, Some(&to_value(&d, Step::StatefulSet)?), false);
            let plan = volumes::grow(&cluster.spec, id, ctx, &d).await?;
            match volumes::recreate(w, id, ctx, &plan, &recreation).await? {
                Deployed::Kept => (Some(d), false),
                Deployed::Gone => (None, recreation.recreates()),
                Deployed::Going => return Ok(None),
            }
        }
        None => {
            let orphans = read::orphaned_pods(ctx, id).await?;
            (
                None,
                drift::recreation(&rendered, None, orphans).recreates(),
            )
        }
    };
    let deployed_value = deployed
        .as_ref()
        .map(|d| to_value(d, Step::StatefulSet))
        .transpose()?;
    let Some(reason) = apply_reason(&rendered, deployed_value.as_ref()) else {
        return Ok(None);
    };
    let decision = super::rollout::decide(
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
    let applied = apply(&w.api::<StatefulSet>(), &id.prefixed(), &rendered).await;
    if recreating {
        let counter = match &applied {
            Ok(_) => &ctx.metrics.statefulset_recreate,
            Err(_) => &ctx.metrics.statefulset_recreate_errors,
        };
        counter.get_or_create(&labels(id)).inc();
        applied.map_err(ReconcileError::api(Step::Volumes))?;
    } else {
        applied.map_err(ReconcileError::api(Step::StatefulSet))?;
    }
    Ok(Some(reason))
}
