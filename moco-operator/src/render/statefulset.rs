//! The StatefulSet `moco-<name>` and the PodDisruptionBudget that guards its majority.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use moco_api::cluster::ClusterId;
use moco_api::labels::ANNOTATION_FORCE_ROLLING_UPDATE;

use super::pod_template::{PodInputs, pod_template};

/// A volume claim template of the cluster as the StatefulSet carries it: owned by the cluster,
/// so the PVCs are deleted with it, and with Kubernetes' defaults written out so that the
/// deployed template compares equal to the rendered one.
fn claim_template(
    id: &ClusterId,
    template: &moco_api::mysqlcluster::PersistentVolumeClaim,
) -> PersistentVolumeClaim {
    let mut spec: PersistentVolumeClaimSpec = template.spec.clone();
    if spec.access_modes.as_ref().is_none_or(Vec::is_empty) {
        spec.access_modes = Some(vec!["ReadWriteOnce".into()]);
    }
    spec.volume_mode.get_or_insert_with(|| "Filesystem".into());
    let meta = &template.metadata;
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(meta.name.clone()),
            labels: (!meta.labels.is_empty()).then(|| meta.labels.clone()),
            annotations: (!meta.annotations.is_empty()).then(|| meta.annotations.clone()),
            owner_references: Some(vec![id.owner_reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        ..PersistentVolumeClaim::default()
    }
}

/// `moco-<name>`: `replicas` instances (`spec.replicas`, or more while a shrink holds the
/// leaving Pods; none while offline), started in parallel, rolled one Pod at a time.
pub fn statefulset(inputs: &PodInputs<'_>, replicas: u32) -> StatefulSet {
    let id = inputs.id;
    let mut metadata = id.owned_meta(id.prefixed(), id.labels());
    if let Some(value) = inputs.force_rolling_update {
        metadata.annotations = Some(BTreeMap::from([(
            ANNOTATION_FORCE_ROLLING_UPDATE.to_owned(),
            value.to_owned(),
        )]));
    }
    let replicas = if inputs.spec.offline {
        0
    } else {
        // Both sources of `replicas` (the spec and the deployed StatefulSet) are i32s.
        i32::try_from(replicas).unwrap_or(i32::MAX)
    };
    StatefulSet {
        metadata,
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(id.labels()),
                ..LabelSelector::default()
            },
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                ..StatefulSetUpdateStrategy::default()
            }),
            service_name: Some(id.prefixed()),
            template: pod_template(inputs),
            volume_claim_templates: Some(
                inputs
                    .spec
                    .volume_claim_templates
                    .iter()
                    .map(|t| claim_template(id, t))
                    .collect(),
            ),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

/// `moco-<name>` allowing `max_unavailable` voluntary evictions.
pub fn pdb(id: &ClusterId, max_unavailable: u32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: id.owned_meta(id.prefixed(), id.labels()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(
                i32::try_from(max_unavailable).unwrap_or(i32::MAX),
            )),
            selector: Some(LabelSelector {
                match_labels: Some(id.labels()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}
