//! `kubectl moco switchover`: asks the operator to move the primary away from the current one
//! by annotating its Pod `moco.cybozu.com/demote: "true"`. The operator picks the new primary,
//! switches over and removes the annotation. Like MOCO's plugin it prints nothing.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use moco_api::annotations::is_true;
use moco_api::labels::ANNOTATION_DEMOTE;
use serde_json::json;

use crate::cli::ClusterArg;
use crate::context::Context;
use crate::error::Error;
use crate::objects;

/// What a switchover request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The primary's Pod was annotated.
    Requested {
        /// The Pod.
        pod: String,
    },
    /// The annotation was already there; nothing was written.
    AlreadyRequested {
        /// The Pod.
        pod: String,
    },
}

/// Runs `switchover`.
pub async fn run(ctx: &Context, args: &ClusterArg) -> Result<Outcome, Error> {
    let ns = &ctx.namespace;
    let cluster = objects::cluster(ctx, &args.cluster).await?;
    let refuse = |reason| Error::CannotSwitch {
        namespace: ns.clone(),
        cluster: args.cluster.clone(),
        reason,
    };
    if cluster.spec.offline {
        return Err(refuse(
            "the cluster is offline (spec.offline: true), so no instance runs to switch over to",
        ));
    }
    let replicas = objects::replicas(&cluster);
    if replicas <= 1 {
        return Err(refuse(
            "a single-instance cluster is not able to switch over (spec.replicas: 1)",
        ));
    }
    let recorded = cluster
        .status
        .as_ref()
        .map_or(0, |s| s.current_primary_index);
    let index = u32::try_from(recorded)
        .ok()
        .filter(|i| *i < replicas)
        .ok_or(Error::PrimaryOutOfRange {
            namespace: ns.clone(),
            cluster: args.cluster.clone(),
            index: i64::from(recorded),
            replicas,
        })?;
    let name = objects::pod_name(&args.cluster, index);
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let pod = api
        .get(&name)
        .await
        .map_err(|e| Error::api("get", "Pod", ns, &name, ": the primary's Pod is missing", e))?;
    let annotated = is_true(&pod.metadata, ANNOTATION_DEMOTE);
    if annotated {
        return Ok(Outcome::AlreadyRequested { pod: name });
    }
    let patch = Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_DEMOTE: "true"}}}));
    api.patch(&name, &PatchParams::default(), &patch)
        .await
        .map_err(|e| Error::api("patch", "Pod", ns, &name, "", e))?;
    Ok(Outcome::Requested { pod: name })
}
