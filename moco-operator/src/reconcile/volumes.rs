//! Step 5 of a round, while a StatefulSet is deployed: copy the configured label and annotation
//! values from the claim templates to the PVCs and grow PVCs whose template grew ([`grow`]),
//! then delete the StatefulSet (orphaning its Pods) when its immutable claim templates must
//! change ([`recreate`]; step 6 creates it again). The decisions are
//! `moco_core::resources::volumes`; this module reads their inputs and carries them out.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use moco_api::cluster::ClusterId;
use moco_api::labels::{ANNOTATION_DEFAULT_STORAGE_CLASS, ANNOTATION_DEFAULT_STORAGE_CLASS_BETA};
use moco_api::mysqlcluster::MySQLClusterSpec;
use moco_core::resources::{
    ClaimTemplate, DeployedVolumes, PvcFacts, Quantity, RolloutFacts, StorageClassFacts,
    VolumeInput, VolumePlan, plan_volumes,
};
use moco_kube::api::{label_selector, retry};
use serde_json::json;

use super::apply::Writer;
use super::drift::Recreation;
use super::{Context, ReconcileError, Step, labels};

fn storage_of(
    spec: Option<&k8s_openapi::api::core::v1::PersistentVolumeClaimSpec>,
) -> Option<&str> {
    spec.and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.as_str())
}

fn desired_templates(spec: &MySQLClusterSpec) -> Result<Vec<ClaimTemplate>, ReconcileError> {
    spec.volume_claim_templates
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let field = format!("spec.volumeClaimTemplates[{i}].spec.resources.requests.storage");
            let text = storage_of(Some(&t.spec)).ok_or_else(|| ReconcileError::Input {
                step: Step::Volumes,
                message: format!("{field} is missing"),
            })?;
            let storage = Quantity::parse(text).map_err(|e| ReconcileError::Input {
                step: Step::Volumes,
                message: format!("{field}: {e}"),
            })?;
            Ok(ClaimTemplate {
                name: t.metadata.name.clone(),
                storage,
            })
        })
        .collect()
}

fn deployed_volumes(sts: &StatefulSet) -> DeployedVolumes {
    let spec = sts.spec.clone().unwrap_or_default();
    let status = sts.status.clone().unwrap_or_default();
    let templates = spec
        .volume_claim_templates
        .iter()
        .flatten()
        .filter_map(|t| {
            let storage = Quantity::parse(storage_of(t.spec.as_ref())?).ok()?;
            Some(ClaimTemplate {
                name: t.metadata.name.clone().unwrap_or_default(),
                storage,
            })
        })
        .collect();
    let count = |n: Option<i32>| u32::try_from(n.unwrap_or(0)).unwrap_or(0);
    DeployedVolumes {
        name: sts.metadata.name.clone().unwrap_or_default(),
        templates,
        rollout: RolloutFacts {
            deleting: sts.metadata.deletion_timestamp.is_some(),
            generation: sts.metadata.generation.unwrap_or(0),
            observed_generation: status.observed_generation.unwrap_or(0),
            replicas: count(Some(spec.replicas.unwrap_or(1))),
            ready_replicas: count(status.ready_replicas),
            updated_replicas: count(status.updated_replicas),
            partition: spec
                .update_strategy
                .and_then(|u| u.rolling_update)
                .and_then(|r| r.partition)
                .and_then(|p| u32::try_from(p).ok()),
            current_revision: status.current_revision.unwrap_or_default(),
            update_revision: status.update_revision.unwrap_or_default(),
        },
    }
}

/// The ordinal of PVC `name` made from a template of StatefulSet `sts`, and the template:
/// `<template>-<sts>-<ordinal>`.
pub(super) fn parse_claim_name<'a>(name: &'a str, sts: &str) -> Option<(&'a str, u32)> {
    let (rest, ordinal) = name.rsplit_once('-')?;
    let ordinal = ordinal.parse().ok()?;
    let template = rest.strip_suffix(sts)?.strip_suffix('-')?;
    Some((template, ordinal))
}

fn storage_class_facts(sc: &StorageClass) -> StorageClassFacts {
    let annotated = |key: &str| {
        sc.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .is_some_and(|v| v == "true")
    };
    StorageClassFacts {
        name: sc.metadata.name.clone().unwrap_or_default(),
        allow_volume_expansion: sc.allow_volume_expansion == Some(true),
        is_default: annotated(ANNOTATION_DEFAULT_STORAGE_CLASS)
            || annotated(ANNOTATION_DEFAULT_STORAGE_CLASS_BETA),
    }
}

/// The values of `keys` a PVC should carry from its template, where they differ.
fn sync_patch(
    keys: &[String],
    template: Option<&BTreeMap<String, String>>,
    current: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let Some(template) = template else {
        return BTreeMap::new();
    };
    keys.iter()
        .filter_map(|k| {
            let want = template.get(k)?;
            (current.and_then(|c| c.get(k)) != Some(want)).then(|| (k.clone(), want.clone()))
        })
        .collect()
}

/// Step 5a, for the deployed StatefulSet: the label and annotation values the flags name
/// copied from the claim templates to the PVCs, and the PVCs grown whose template grew.
/// Returns the plan, whose template changes [`recreate`] acts on.
pub(super) async fn grow(
    spec: &MySQLClusterSpec,
    id: &ClusterId,
    ctx: &Context,
    deployed: &StatefulSet,
) -> Result<VolumePlan, ReconcileError> {
    let err = || ReconcileError::api(Step::Volumes);
    let client = &ctx.client;
    let sts_name = id.prefixed();
    let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &id.namespace);
    let selector = label_selector(&id.labels());
    let params = ListParams::default().labels(&selector);
    let pvcs = retry(|| pvc_api.list(&params)).await.map_err(err())?.items;

    // Label and annotation values named by the flags, from the cluster's templates.
    let templates: BTreeMap<&str, &moco_api::mysqlcluster::PersistentVolumeClaim> = spec
        .volume_claim_templates
        .iter()
        .map(|t| (t.metadata.name.as_str(), t))
        .collect();
    let mut pvc_facts = Vec::new();
    // The label and annotation values to copy, sent once everything is read.
    let mut metadata_patches = Vec::new();
    for pvc in &pvcs {
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let Some((template, ordinal)) = parse_claim_name(&name, &sts_name) else {
            continue;
        };
        if let Some(t) = templates.get(template) {
            let labels = sync_patch(
                &ctx.pvc_sync_label_keys,
                Some(&t.metadata.labels),
                pvc.metadata.labels.as_ref(),
            );
            let annotations = sync_patch(
                &ctx.pvc_sync_annotation_keys,
                Some(&t.metadata.annotations),
                pvc.metadata.annotations.as_ref(),
            );
            if !labels.is_empty() || !annotations.is_empty() {
                metadata_patches.push((
                    name.clone(),
                    json!({"metadata": {"labels": labels, "annotations": annotations}}),
                ));
            }
        }
        if let Some(storage) = storage_of(pvc.spec.as_ref()).and_then(|s| Quantity::parse(s).ok()) {
            pvc_facts.push(PvcFacts {
                name,
                ordinal,
                storage,
                storage_class: pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()),
            });
        }
    }

    let classes: Api<StorageClass> = Api::all(client.clone());
    let params = ListParams::default();
    let storage_classes = retry(|| classes.list(&params))
        .await
        .map_err(err())?
        .items
        .iter()
        .map(storage_class_facts)
        .collect();

    for (name, patch) in &metadata_patches {
        let patch = Patch::Merge(patch);
        let params = PatchParams::default();
        retry(|| pvc_api.patch(name, &params, &patch))
            .await
            .map_err(err())?;
    }
    let input = VolumeInput {
        desired: desired_templates(spec)?,
        deployed: Some(deployed_volumes(deployed)),
        pvcs: pvc_facts,
        storage_classes,
    };
    let metric = labels(id);
    let plan = match plan_volumes(&input) {
        Ok(p) => p,
        Err(e) => {
            ctx.metrics
                .volume_resized_errors
                .get_or_create(&metric)
                .inc();
            return Err(e.into());
        }
    };
    for skipped in &plan.skipped {
        tracing::info!(cluster = %id.name, namespace = %id.namespace, claim = %skipped.claim,
            reason = ?skipped.reason, "PVC not grown");
    }
    for resize in &plan.resizes {
        let patch = Patch::Merge(
            json!({"spec": {"resources": {"requests": {"storage": resize.to.as_str()}}}}),
        );
        let params = PatchParams::default();
        let result = retry(|| pvc_api.patch(&resize.claim, &params, &patch)).await;
        if let Err(e) = result {
            ctx.metrics
                .volume_resized_errors
                .get_or_create(&metric)
                .inc();
            return Err(err()(e));
        }
        tracing::info!(cluster = %id.name, namespace = %id.namespace, claim = %resize.claim,
            from = %resize.from, to = %resize.to, "PVC grown");
    }
    if !plan.resizes.is_empty() {
        ctx.metrics.volume_resized.get_or_create(&metric).inc();
    }
    Ok(plan)
}

/// What step 5b did to the deployed StatefulSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Deployed {
    /// Nothing: it stands, its claim templates need no change.
    Kept,
    /// Deleted for re-creation and gone: this round creates it.
    Gone,
    /// Deleted for re-creation and still there (the garbage collector orphans its Pods
    /// first). Nothing waits for it: its deletion brings the next round, which creates it.
    Going,
}

/// Step 5b: deletes the StatefulSet, orphaning its Pods, when its immutable claim templates
/// must change (`plan` from [`grow`], and `recreation` from [`super::drift::recreation`]: the
/// names and sizes of the plan are part of what `recreation` compares; both are asked so that
/// neither alone decides).
pub(super) async fn recreate(
    w: &Writer<'_>,
    id: &ClusterId,
    ctx: &Context,
    plan: &VolumePlan,
    recreation: &Recreation,
) -> Result<Deployed, ReconcileError> {
    if !plan.recreate_statefulset() && !matches!(recreation, Recreation::Needed(_)) {
        return Ok(Deployed::Kept);
    }
    tracing::info!(cluster = %id.name, namespace = %id.namespace, changes = ?plan.template_changes,
        ?recreation, "re-creating the StatefulSet for new volume claim templates (Pods keep running)");
    let name = id.prefixed();
    let api = w.api::<StatefulSet>();
    let deleted = async {
        w.delete::<StatefulSet>(Step::Volumes, &name, true, &DeleteParams::orphan())
            .await?;
        retry(|| api.get_opt(&name))
            .await
            .map_err(ReconcileError::api(Step::Volumes))
    };
    // Counted once the StatefulSet is created again (by the caller), as MOCO does.
    match deleted.await {
        Ok(None) => Ok(Deployed::Gone),
        Ok(Some(_)) => Ok(Deployed::Going),
        Err(e) => {
            ctx.metrics
                .statefulset_recreate_errors
                .get_or_create(&labels(id))
                .inc();
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_names_split_into_template_and_ordinal() {
        assert_eq!(
            parse_claim_name("mysql-data-moco-db-2", "moco-db"),
            Some(("mysql-data", 2))
        );
        assert_eq!(parse_claim_name("mysql-data-moco-dbx-2", "moco-db"), None);
        assert_eq!(parse_claim_name("mysql-data-moco-db-x", "moco-db"), None);
        assert_eq!(parse_claim_name("moco-db-0", "moco-db"), None);
    }

    #[test]
    fn only_configured_keys_present_in_the_template_are_synced() {
        let keys = vec!["a".to_owned(), "b".to_owned()];
        let template = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("c".to_owned(), "3".to_owned()),
        ]);
        let current = BTreeMap::from([("b".to_owned(), "old".to_owned())]);
        assert_eq!(
            sync_patch(&keys, Some(&template), Some(&current)),
            BTreeMap::from([("a".to_owned(), "1".to_owned())])
        );
        let synced = BTreeMap::from([("a".to_owned(), "1".to_owned())]);
        assert!(sync_patch(&keys, Some(&template), Some(&synced)).is_empty());
    }
}
