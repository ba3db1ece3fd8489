//! `kubectl moco switchover`: moves the primary.
//!
//! Without `--to`, as MOCO: annotates the current primary's Pod `moco.cybozu.com/demote:
//! "true"`; the operator picks the new primary, switches over and removes the annotation;
//! nothing is printed. With `--to N` (beyond MOCO): what the API shows is checked first (N is
//! an instance, not the primary, not errant, its Pod Ready and labelled a replica), then the
//! MySQLCluster is annotated `moco-rs/switchover-to: "N"` and the command waits for the
//! outcome: N the primary, the operator's refusal (it also checks what only SQL shows, such as
//! replication running from the primary; it writes why as `moco-rs/switchover-refused` in the
//! patch that withdraws the request, beside a `SwitchOverRefused` event), or the timeout, after
//! which the request is withdrawn so that it cannot fire later by surprise.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use moco_api::annotations::{
    SWITCHOVER_REFUSED_ANNOTATION, SWITCHOVER_TO_ANNOTATION, annotation, is_true,
    switchover_refusal_of,
};
use moco_api::labels::{ANNOTATION_DEMOTE, LABEL_ROLE, ROLE_REPLICA};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::operation::switchover_refusal_message;
use moco_kube::platform::withdraw_switchover_request;
use serde_json::json;

use crate::cli::SwitchoverArgs;
use crate::context::Context;
use crate::error::Error;
use crate::objects;

/// How often `--to` looks at the cluster while it waits.
const POLL: Duration = Duration::from_millis(250);

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
    /// `--to N` named the primary: nothing was written.
    AlreadyPrimary {
        /// The primary's ordinal.
        index: u32,
    },
    /// `--to N`: the primary moved.
    Moved {
        /// The former primary.
        from: u32,
        /// The new primary.
        to: u32,
        /// From the request to `status.currentPrimaryIndex` naming `to`.
        millis: u128,
    },
}

/// Why instance `to` cannot take over, from what the API shows: its Pod and the cluster's
/// status (`None` when nothing here stands in the way; the operator checks the rest).
pub fn target_flaw(cluster: &MySQLCluster, pod: Option<&Pod>, to: u32) -> Option<String> {
    let replicas = objects::replicas(cluster);
    if to >= replicas {
        return Some(format!(
            "instance {to} does not exist (spec.replicas: {replicas})"
        ));
    }
    let status = cluster.status.clone().unwrap_or_default();
    if status
        .errant_replica_list
        .iter()
        .any(|&i| i64::from(i) == i64::from(to))
    {
        return Some(format!(
            "instance {to} has errant transactions (status.errantReplicaList)"
        ));
    }
    let Some(pod) = pod else {
        return Some(format!("instance {to}'s Pod does not exist"));
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return Some(format!("instance {to}'s Pod is being deleted"));
    }
    if objects::pod_condition(pod, "Ready") != Some("True") {
        return Some(format!("instance {to}'s Pod is not Ready"));
    }
    let role = pod.metadata.labels.as_ref().and_then(|l| l.get(LABEL_ROLE));
    if role.map(String::as_str) != Some(ROLE_REPLICA) {
        return Some(format!(
            "instance {to}'s Pod is not labelled {LABEL_ROLE}={ROLE_REPLICA} (the operator \
             labels replicas that replicate without errant transactions)"
        ));
    }
    None
}

/// Runs `switchover`.
pub async fn run(ctx: &Context, args: &SwitchoverArgs) -> Result<Outcome, Error> {
    let ns = &ctx.namespace;
    let cluster = objects::cluster(ctx, &args.cluster).await?;
    let refuse = |reason: String| Error::CannotSwitch {
        namespace: ns.clone(),
        cluster: args.cluster.clone(),
        reason,
    };
    if cluster.spec.offline {
        return Err(refuse(
            "the cluster is offline (spec.offline: true), so no instance runs to switch over to"
                .to_owned(),
        ));
    }
    let replicas = objects::replicas(&cluster);
    if replicas <= 1 {
        return Err(refuse(
            "a single-instance cluster is not able to switch over (spec.replicas: 1)".to_owned(),
        ));
    }
    let recorded = cluster
        .status
        .as_ref()
        .map_or(0, |s| s.current_primary_index);
    let primary = u32::try_from(recorded)
        .ok()
        .filter(|i| *i < replicas)
        .ok_or(Error::PrimaryOutOfRange {
            namespace: ns.clone(),
            cluster: args.cluster.clone(),
            index: i64::from(recorded),
            replicas,
        })?;
    match args.to {
        None => demote(ctx, &args.cluster, primary).await,
        Some(to) if to == primary => Ok(Outcome::AlreadyPrimary { index: to }),
        Some(to) => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
            let name = objects::pod_name(&args.cluster, to);
            let pod = pods
                .get_opt(&name)
                .await
                .map_err(|e| Error::api("get", "Pod", ns, &name, "", e))?;
            if let Some(flaw) = target_flaw(&cluster, pod.as_ref(), to) {
                return Err(refuse(format!(
                    "cannot switch over to instance {to}: {flaw}"
                )));
            }
            switch_to(ctx, args, primary, to).await
        }
    }
}

/// MOCO's switchover: the demote annotation on the primary's Pod.
async fn demote(ctx: &Context, cluster: &str, primary: u32) -> Result<Outcome, Error> {
    let ns = &ctx.namespace;
    let name = objects::pod_name(cluster, primary);
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let pod = api
        .get(&name)
        .await
        .map_err(|e| Error::api("get", "Pod", ns, &name, ": the primary's Pod is missing", e))?;
    if is_true(&pod.metadata, ANNOTATION_DEMOTE) {
        return Ok(Outcome::AlreadyRequested { pod: name });
    }
    let patch = Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_DEMOTE: "true"}}}));
    api.patch(&name, &PatchParams::default(), &patch)
        .await
        .map_err(|e| Error::api("patch", "Pod", ns, &name, "", e))?;
    Ok(Outcome::Requested { pod: name })
}

/// Requests the switchover to `to` and waits for its outcome.
async fn switch_to(
    ctx: &Context,
    args: &SwitchoverArgs,
    from: u32,
    to: u32,
) -> Result<Outcome, Error> {
    let ns = &ctx.namespace;
    let name = &args.cluster;
    let api: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), ns);
    let started = Instant::now();
    // The refusal of an earlier request is not this one's answer.
    let patch = Patch::Merge(json!({"metadata": {"annotations": {
        SWITCHOVER_TO_ANNOTATION: to.to_string(),
        SWITCHOVER_REFUSED_ANNOTATION: null,
    }}}));
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .map_err(|e| Error::api("patch", "MySQLCluster", ns, name, "", e))?;
    loop {
        let cluster = objects::cluster(ctx, name).await?;
        let primary = cluster
            .status
            .as_ref()
            .map_or(0, |s| s.current_primary_index);
        if i64::from(primary) == i64::from(to) {
            return Ok(Outcome::Moved {
                from,
                to,
                millis: started.elapsed().as_millis(),
            });
        }
        if let Some(reason) = withdrawn(&cluster, to) {
            return Err(Error::CannotSwitch {
                namespace: ns.clone(),
                cluster: name.clone(),
                reason,
            });
        }
        if started.elapsed() >= args.timeout {
            // A request made meanwhile by someone else stays theirs.
            withdraw_switchover_request(&api, name, to, None)
                .await
                .map_err(|e| Error::api("patch", "MySQLCluster", ns, name, "", e))?;
            return Err(Error::SwitchoverTimedOut {
                namespace: ns.clone(),
                cluster: name.clone(),
                target: to,
                primary: i64::from(primary),
                waited: args.timeout,
                detail: unmet_conditions(&cluster),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Why the request for instance `to` no longer stands, if it does not: the operator's
/// refusal, which it records in the same write as the withdrawal (so it is read with it,
/// whenever the refusal's event arrives), or someone else's change.
pub fn withdrawn(cluster: &MySQLCluster, to: u32) -> Option<String> {
    let requested = annotation(&cluster.metadata, SWITCHOVER_TO_ANNOTATION);
    if requested == Some(to.to_string().as_str()) {
        return None;
    }
    Some(
        match (switchover_refusal_of(&cluster.metadata), requested) {
            (Some((index, reason)), _) if index == to => format!(
                "the operator refused: {}",
                switchover_refusal_message(to, reason)
            ),
            (_, Some(other)) => format!(
                "the request was replaced by another ({SWITCHOVER_TO_ANNOTATION}: {other:?}) before \
             the switchover"
            ),
            (_, None) => format!(
                "the request was withdrawn before the switchover (someone removed \
             {SWITCHOVER_TO_ANNOTATION})"
            ),
        },
    )
}

/// `; Healthy False (reason): message` for each of the cluster's conditions that is not
/// True, as a hint of why the switchover did not happen.
fn unmet_conditions(cluster: &MySQLCluster) -> String {
    let Some(status) = &cluster.status else {
        return String::new();
    };
    status
        .conditions
        .iter()
        .filter(|c| c.status != "True" && c.type_ != "RolloutStalled")
        .map(|c| format!("; {} {} ({}): {}", c.type_, c.status, c.reason, c.message))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(replicas: i32, errant: &[i32]) -> MySQLCluster {
        serde_json::from_value(json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"replicas": replicas, "podTemplate": {"spec": {"containers": []}},
                     "volumeClaimTemplates": []},
            "status": {"currentPrimaryIndex": 0, "errantReplicaList": errant}
        }))
        .unwrap()
    }

    fn pod(ready: &str, role: Option<&str>, deleting: bool) -> Pod {
        let mut meta = json!({"name": "moco-db-1", "labels": {}});
        if let Some(role) = role {
            meta["labels"][LABEL_ROLE] = json!(role);
        }
        if deleting {
            meta["deletionTimestamp"] = json!("2026-11-29T00:00:00Z");
        }
        serde_json::from_value(json!({
            "metadata": meta,
            "status": {"conditions": [{"type": "Ready", "status": ready}]}
        }))
        .unwrap()
    }

    #[test]
    fn only_a_ready_replica_without_errant_transactions_is_a_target() {
        let ok = pod("True", Some(ROLE_REPLICA), false);
        assert_eq!(target_flaw(&cluster(3, &[]), Some(&ok), 1), None);
        let flaw = |c: &MySQLCluster, p: Option<&Pod>, to| target_flaw(c, p, to).unwrap();
        assert_eq!(
            flaw(&cluster(3, &[]), Some(&ok), 3),
            "instance 3 does not exist (spec.replicas: 3)"
        );
        assert_eq!(
            flaw(&cluster(3, &[1]), Some(&ok), 1),
            "instance 1 has errant transactions (status.errantReplicaList)"
        );
        assert_eq!(
            flaw(&cluster(3, &[]), None, 1),
            "instance 1's Pod does not exist"
        );
        assert_eq!(
            flaw(
                &cluster(3, &[]),
                Some(&pod("True", Some(ROLE_REPLICA), true)),
                1
            ),
            "instance 1's Pod is being deleted"
        );
        assert_eq!(
            flaw(
                &cluster(3, &[]),
                Some(&pod("False", Some(ROLE_REPLICA), false)),
                1
            ),
            "instance 1's Pod is not Ready"
        );
        for role in [None, Some("primary")] {
            assert!(
                flaw(&cluster(3, &[]), Some(&pod("True", role, false)), 1)
                    .starts_with("instance 1's Pod is not labelled moco.cybozu.com/role=replica"),
                "{role:?}"
            );
        }
    }
}
