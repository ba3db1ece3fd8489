//! Volume-claim changes: which PVCs to grow, whether the StatefulSet must be recreated, and
//! which requests are refused.
//!
//! A StatefulSet's `volumeClaimTemplates` are immutable, so MOCO changes volumes in two steps:
//! it grows the existing PVCs itself (only upward, only where the StorageClass allows
//! expansion), then deletes the StatefulSet with `propagationPolicy: Orphan` (the Pods keep
//! running) and recreates it with the new templates. A smaller template is accepted but never
//! shrinks a PVC: the user deletes one Pod and its PVC at a time and the instance is re-cloned.
//!
//! Resizes are not computed while the StatefulSet is rolling out, as in MOCO. Unlike MOCO, the
//! PVCs to grow are found by comparing each PVC with the desired template rather than the
//! deployed template with the desired one: MOCO recreates the StatefulSet even in a round that
//! skipped resizing, after which the templates agree and the PVCs would never be grown.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::quantity::Quantity;

/// One volume claim template, reduced to what decides resizing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimTemplate {
    /// Template name (`mysql-data`).
    pub name: String,
    /// `spec.resources.requests.storage`.
    pub storage: Quantity,
}

/// The rollout state of the deployed StatefulSet (its metadata, spec and status).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutFacts {
    /// The StatefulSet has a deletionTimestamp.
    #[serde(default)]
    pub deleting: bool,
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration` (0: not yet observed).
    #[serde(default)]
    pub observed_generation: i64,
    /// `spec.replicas` (Kubernetes' default 1 when unset).
    pub replicas: u32,
    /// `status.readyReplicas`.
    #[serde(default)]
    pub ready_replicas: u32,
    /// `status.updatedReplicas`.
    #[serde(default)]
    pub updated_replicas: u32,
    /// `spec.updateStrategy.rollingUpdate.partition`, when a RollingUpdate strategy sets one.
    #[serde(default)]
    pub partition: Option<u32>,
    /// `status.currentRevision`.
    #[serde(default)]
    pub current_revision: String,
    /// `status.updateRevision`.
    #[serde(default)]
    pub update_revision: String,
}

/// True while the StatefulSet is being deleted or rolled out (the `kubectl rollout status`
/// rules MOCO uses): no PVC is touched then.
pub fn statefulset_is_updating(r: &RolloutFacts) -> bool {
    r.deleting
        || r.observed_generation == 0
        || r.generation > r.observed_generation
        || r.ready_replicas < r.replicas
        || r.partition
            .is_some_and(|p| r.updated_replicas < r.replicas.saturating_sub(p))
        || r.update_revision != r.current_revision
}

/// The deployed StatefulSet, as far as volumes are concerned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeployedVolumes {
    /// StatefulSet name (`moco-<cluster>`); PVCs are `<template>-<name>-<ordinal>`.
    pub name: String,
    /// Its `spec.volumeClaimTemplates`.
    pub templates: Vec<ClaimTemplate>,
    /// Its rollout state.
    pub rollout: RolloutFacts,
}

/// An existing PersistentVolumeClaim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PvcFacts {
    /// PVC name.
    pub name: String,
    /// The instance ordinal the PVC belongs to.
    pub ordinal: u32,
    /// `spec.resources.requests.storage`.
    pub storage: Quantity,
    /// `spec.storageClassName`: `None` when unset (the default class applies), `""` for
    /// "no class".
    #[serde(default)]
    pub storage_class: Option<String>,
}

/// What is known about one StorageClass: read by the volume decisions and by the admission
/// rule that refuses growing a claim whose class cannot expand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageClassFacts {
    /// `metadata.name`.
    pub name: String,
    /// `allowVolumeExpansion: true`.
    #[serde(default)]
    pub allow_volume_expansion: bool,
    /// Annotated `storageclass.kubernetes.io/is-default-class: "true"` (or the beta key).
    #[serde(default)]
    pub is_default: bool,
}

/// What the volume decision depends on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeInput {
    /// `spec.volumeClaimTemplates` of the MySQLCluster.
    pub desired: Vec<ClaimTemplate>,
    /// The existing StatefulSet; `None` when there is none (it will be created as desired).
    #[serde(default)]
    pub deployed: Option<DeployedVolumes>,
    /// The cluster's PVCs.
    #[serde(default)]
    pub pvcs: Vec<PvcFacts>,
    /// All StorageClasses.
    #[serde(default)]
    pub storage_classes: Vec<StorageClassFacts>,
}

/// Grow one PVC: set its storage request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PvcResize {
    /// PVC name.
    pub claim: String,
    /// Its template.
    pub template: String,
    /// Current request.
    pub from: Quantity,
    /// New request (the template's quantity, as written there).
    pub to: Quantity,
}

/// Why a PVC that should grow is left alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "reason",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SkipReason {
    /// Its StorageClass does not set `allowVolumeExpansion`.
    NotExpandable {
        /// The class.
        storage_class: String,
    },
    /// `storageClassName: ""`: statically provisioned, nothing to expand through.
    NoStorageClass,
    /// Unset class and no single default class to resolve it to.
    NoDefaultStorageClass,
    /// The named StorageClass does not exist.
    StorageClassNotFound {
        /// The class.
        storage_class: String,
    },
}

/// A PVC that will not be grown this round, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkippedResize {
    /// PVC name.
    pub claim: String,
    /// The size the template asks for.
    pub wanted: Quantity,
    /// Why not.
    pub reason: SkipReason,
}

/// A PVC larger than its (shrunk) template: the user must delete the Pod and PVC to apply it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingShrink {
    /// PVC name.
    pub claim: String,
    /// Its current request.
    pub current: Quantity,
    /// The template's request.
    pub template_size: Quantity,
}

/// How the desired templates differ from the deployed ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "change",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum TemplateChange {
    /// A template the StatefulSet does not have.
    Added {
        /// Template name.
        name: String,
    },
    /// A template the MySQLCluster no longer has.
    Removed {
        /// Template name.
        name: String,
    },
    /// A different storage request.
    Resized {
        /// Template name.
        name: String,
        /// Deployed request.
        from: Quantity,
        /// Desired request.
        to: Quantity,
    },
}

/// The volume decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumePlan {
    /// PVCs to grow, before the StatefulSet is touched.
    pub resizes: Vec<PvcResize>,
    /// PVCs that should grow but cannot.
    pub skipped: Vec<SkippedResize>,
    /// The StatefulSet is rolling out: resizes wait for a later round.
    pub resize_deferred: bool,
    /// Template differences; non-empty means delete the StatefulSet with
    /// `propagationPolicy: Orphan` and recreate it.
    pub template_changes: Vec<TemplateChange>,
    /// PVCs only a manual Pod+PVC deletion can bring down to their template's size.
    pub pending_shrinks: Vec<PendingShrink>,
}

impl VolumePlan {
    /// True when the StatefulSet must be deleted (orphaning its Pods) and recreated.
    pub fn recreate_statefulset(&self) -> bool {
        !self.template_changes.is_empty()
    }
}

/// A PVC that is already larger than a template the user just grew: growing "to" the new size
/// would shrink it, which Kubernetes refuses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShrinkConflict {
    /// PVC name.
    pub claim: String,
    /// Its current request.
    pub current: Quantity,
    /// What the template now asks for.
    pub requested: Quantity,
}

/// Input the volume decision refuses to act on.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VolumeError {
    /// Templates were grown, but some PVCs are already larger than the new size. Nothing is
    /// resized or recreated until the template is at least as large as those PVCs.
    #[error("cannot reduce volume size: {}", describe_conflicts(.0))]
    Shrink(Vec<ShrinkConflict>),
}

fn describe_conflicts(conflicts: &[ShrinkConflict]) -> String {
    conflicts
        .iter()
        .map(|c| {
            format!(
                "PVC {} requests {}, more than the {} wanted",
                c.claim, c.current, c.requested
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The PVC name the StatefulSet controller gives ordinal `ordinal` of `template`.
pub fn claim_name(template: &str, statefulset: &str, ordinal: u32) -> String {
    format!("{template}-{statefulset}-{ordinal}")
}

/// Decides PVC resizes and StatefulSet recreation.
pub fn plan_volumes(input: &VolumeInput) -> Result<VolumePlan, VolumeError> {
    let Some(deployed) = &input.deployed else {
        return Ok(VolumePlan::default());
    };
    let mut plan = VolumePlan {
        template_changes: template_changes(&input.desired, &deployed.templates),
        resize_deferred: statefulset_is_updating(&deployed.rollout),
        ..VolumePlan::default()
    };
    let mut conflicts = Vec::new();

    for template in &input.desired {
        let deployed_size = deployed
            .templates
            .iter()
            .find(|t| t.name == template.name)
            .map(|t| &t.storage);
        let grown = deployed_size.is_some_and(|d| *d < template.storage);
        for ordinal in 0..deployed.rollout.replicas {
            let name = claim_name(&template.name, &deployed.name, ordinal);
            let Some(pvc) = input
                .pvcs
                .iter()
                .find(|p| p.ordinal == ordinal && p.name == name)
            else {
                continue;
            };
            if pvc.storage > template.storage {
                if grown {
                    conflicts.push(ShrinkConflict {
                        claim: name,
                        current: pvc.storage.clone(),
                        requested: template.storage.clone(),
                    });
                } else {
                    plan.pending_shrinks.push(PendingShrink {
                        claim: name,
                        current: pvc.storage.clone(),
                        template_size: template.storage.clone(),
                    });
                }
                continue;
            }
            if pvc.storage == template.storage || plan.resize_deferred {
                continue;
            }
            match expandable(pvc, &input.storage_classes) {
                Ok(()) => plan.resizes.push(PvcResize {
                    claim: name,
                    template: template.name.clone(),
                    from: pvc.storage.clone(),
                    to: template.storage.clone(),
                }),
                Err(reason) => plan.skipped.push(SkippedResize {
                    claim: name,
                    wanted: template.storage.clone(),
                    reason,
                }),
            }
        }
    }

    if conflicts.is_empty() {
        Ok(plan)
    } else {
        Err(VolumeError::Shrink(conflicts))
    }
}

fn template_changes(desired: &[ClaimTemplate], deployed: &[ClaimTemplate]) -> Vec<TemplateChange> {
    let mut changes = Vec::new();
    for want in desired {
        match deployed.iter().find(|t| t.name == want.name) {
            None => changes.push(TemplateChange::Added {
                name: want.name.clone(),
            }),
            Some(have) if have.storage != want.storage => changes.push(TemplateChange::Resized {
                name: want.name.clone(),
                from: have.storage.clone(),
                to: want.storage.clone(),
            }),
            Some(_) => {}
        }
    }
    for have in deployed {
        if !desired.iter().any(|t| t.name == have.name) {
            changes.push(TemplateChange::Removed {
                name: have.name.clone(),
            });
        }
    }
    changes
}

fn expandable(pvc: &PvcFacts, classes: &[StorageClassFacts]) -> Result<(), SkipReason> {
    let class = match pvc.storage_class.as_deref() {
        Some("") => return Err(SkipReason::NoStorageClass),
        Some(name) => classes.iter().find(|c| c.name == name).ok_or_else(|| {
            SkipReason::StorageClassNotFound {
                storage_class: name.to_owned(),
            }
        })?,
        None => {
            let mut defaults = classes.iter().filter(|c| c.is_default);
            match (defaults.next(), defaults.next()) {
                (Some(only), None) => only,
                _ => return Err(SkipReason::NoDefaultStorageClass),
            }
        }
    };
    if class.allow_volume_expansion {
        Ok(())
    } else {
        Err(SkipReason::NotExpandable {
            storage_class: class.name.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn tmpl(name: &str, storage: &str) -> ClaimTemplate {
        ClaimTemplate {
            name: name.into(),
            storage: q(storage),
        }
    }

    fn settled(replicas: u32) -> RolloutFacts {
        RolloutFacts {
            deleting: false,
            generation: 4,
            observed_generation: 4,
            replicas,
            ready_replicas: replicas,
            updated_replicas: replicas,
            partition: Some(0),
            current_revision: "r1".into(),
            update_revision: "r1".into(),
        }
    }

    fn pvc(ordinal: u32, storage: &str, class: Option<&str>) -> PvcFacts {
        PvcFacts {
            name: claim_name("mysql-data", "moco-test", ordinal),
            ordinal,
            storage: q(storage),
            storage_class: class.map(Into::into),
        }
    }

    fn classes() -> Vec<StorageClassFacts> {
        vec![
            StorageClassFacts {
                name: "fast".into(),
                allow_volume_expansion: true,
                is_default: true,
            },
            StorageClassFacts {
                name: "fixed".into(),
                allow_volume_expansion: false,
                is_default: false,
            },
        ]
    }

    fn input(desired: &str, deployed: &str, pvcs: Vec<PvcFacts>) -> VolumeInput {
        VolumeInput {
            desired: vec![tmpl("mysql-data", desired)],
            deployed: Some(DeployedVolumes {
                name: "moco-test".into(),
                templates: vec![tmpl("mysql-data", deployed)],
                rollout: settled(3),
            }),
            pvcs,
            storage_classes: classes(),
        }
    }

    fn resize(ordinal: u32, from: &str, to: &str) -> PvcResize {
        PvcResize {
            claim: claim_name("mysql-data", "moco-test", ordinal),
            template: "mysql-data".into(),
            from: q(from),
            to: q(to),
        }
    }

    fn resized(from: &str, to: &str) -> Vec<TemplateChange> {
        vec![TemplateChange::Resized {
            name: "mysql-data".into(),
            from: q(from),
            to: q(to),
        }]
    }

    #[test]
    fn claim_names_follow_the_statefulset_controller() {
        assert_eq!(
            claim_name("mysql-data", "moco-test", 0),
            "mysql-data-moco-test-0"
        );
    }

    /// (case name, how it differs from a settled StatefulSet, expected "updating").
    type UpdatingCase = (&'static str, fn(&mut RolloutFacts), bool);

    #[test]
    fn updating_table() {
        let cases: Vec<UpdatingCase> = vec![
            ("settled", |_| {}, false),
            ("deleting", |r| r.deleting = true, true),
            ("never observed", |r| r.observed_generation = 0, true),
            ("generation not observed", |r| r.generation = 5, true),
            ("pod not ready", |r| r.ready_replicas = 2, true),
            (
                "partitioned rollout unfinished",
                |r| {
                    r.partition = Some(1);
                    r.updated_replicas = 1;
                },
                true,
            ),
            (
                "partitioned rollout done up to the partition",
                |r| {
                    r.partition = Some(1);
                    r.updated_replicas = 2;
                },
                false,
            ),
            (
                "partition above replicas",
                |r| {
                    r.partition = Some(9);
                    r.updated_replicas = 0;
                },
                false,
            ),
            (
                "no partition",
                |r| {
                    r.partition = None;
                    r.updated_replicas = 0;
                },
                false,
            ),
            (
                "revisions differ",
                |r| r.update_revision = "r2".into(),
                true,
            ),
        ];
        for (name, edit, want) in cases {
            let mut r = settled(3);
            edit(&mut r);
            assert_eq!(statefulset_is_updating(&r), want, "{name}");
        }
    }

    #[test]
    fn plan_table() {
        struct Case {
            name: &'static str,
            input: VolumeInput,
            want: VolumePlan,
        }
        let fast = Some("fast");
        let cases = vec![
            Case {
                name: "unchanged",
                input: input(
                    "10Gi",
                    "10Gi",
                    vec![
                        pvc(0, "10Gi", fast),
                        pvc(1, "10Gi", fast),
                        pvc(2, "10Gi", fast),
                    ],
                ),
                want: VolumePlan::default(),
            },
            Case {
                name: "same size, other spelling",
                input: input("10240Mi", "10Gi", vec![pvc(0, "10Gi", fast)]),
                want: VolumePlan::default(),
            },
            Case {
                name: "grow all three",
                input: input(
                    "20Gi",
                    "10Gi",
                    vec![
                        pvc(0, "10Gi", fast),
                        pvc(1, "10Gi", fast),
                        pvc(2, "10Gi", fast),
                    ],
                ),
                want: VolumePlan {
                    resizes: vec![
                        resize(0, "10Gi", "20Gi"),
                        resize(1, "10Gi", "20Gi"),
                        resize(2, "10Gi", "20Gi"),
                    ],
                    template_changes: resized("10Gi", "20Gi"),
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "one already grown (earlier partial round)",
                input: input(
                    "20Gi",
                    "10Gi",
                    vec![pvc(0, "20Gi", fast), pvc(1, "10Gi", fast)],
                ),
                want: VolumePlan {
                    resizes: vec![resize(1, "10Gi", "20Gi")],
                    template_changes: resized("10Gi", "20Gi"),
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "template already recreated but PVCs still small (MOCO would stall here)",
                input: input("20Gi", "20Gi", vec![pvc(0, "10Gi", fast)]),
                want: VolumePlan {
                    resizes: vec![resize(0, "10Gi", "20Gi")],
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "class not expandable, missing, none and unset resolved to the default",
                input: input(
                    "20Gi",
                    "10Gi",
                    vec![
                        pvc(0, "10Gi", Some("fixed")),
                        pvc(1, "10Gi", Some("gone")),
                        pvc(2, "10Gi", Some("")),
                    ],
                ),
                want: VolumePlan {
                    skipped: vec![
                        SkippedResize {
                            claim: "mysql-data-moco-test-0".into(),
                            wanted: q("20Gi"),
                            reason: SkipReason::NotExpandable {
                                storage_class: "fixed".into(),
                            },
                        },
                        SkippedResize {
                            claim: "mysql-data-moco-test-1".into(),
                            wanted: q("20Gi"),
                            reason: SkipReason::StorageClassNotFound {
                                storage_class: "gone".into(),
                            },
                        },
                        SkippedResize {
                            claim: "mysql-data-moco-test-2".into(),
                            wanted: q("20Gi"),
                            reason: SkipReason::NoStorageClass,
                        },
                    ],
                    template_changes: resized("10Gi", "20Gi"),
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "unset class uses the single default",
                input: input("20Gi", "10Gi", vec![pvc(0, "10Gi", None)]),
                want: VolumePlan {
                    resizes: vec![resize(0, "10Gi", "20Gi")],
                    template_changes: resized("10Gi", "20Gi"),
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "only ordinals below replicas, only this StatefulSet's claims",
                input: input(
                    "20Gi",
                    "10Gi",
                    vec![
                        pvc(3, "10Gi", fast),
                        PvcFacts {
                            name: "mysql-data-moco-other-0".into(),
                            ordinal: 0,
                            storage: q("10Gi"),
                            storage_class: Some("fast".into()),
                        },
                    ],
                ),
                want: VolumePlan {
                    template_changes: resized("10Gi", "20Gi"),
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "rolling out: resizes deferred, recreation still decided",
                input: {
                    let mut i = input("20Gi", "10Gi", vec![pvc(0, "10Gi", fast)]);
                    if let Some(d) = i.deployed.as_mut() {
                        d.rollout.ready_replicas = 2;
                    }
                    i
                },
                want: VolumePlan {
                    resize_deferred: true,
                    template_changes: resized("10Gi", "20Gi"),
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "template shrunk: recreate, PVCs wait for manual deletion",
                input: input(
                    "5Gi",
                    "10Gi",
                    vec![pvc(0, "10Gi", fast), pvc(1, "5Gi", fast)],
                ),
                want: VolumePlan {
                    template_changes: resized("10Gi", "5Gi"),
                    pending_shrinks: vec![PendingShrink {
                        claim: "mysql-data-moco-test-0".into(),
                        current: q("10Gi"),
                        template_size: q("5Gi"),
                    }],
                    ..VolumePlan::default()
                },
            },
            Case {
                // A PVC larger than an unchanged template (grown by hand, or left from an
                // earlier shrink) waits for deletion; only a template that grows past a PVC
                // is an error.
                name: "unchanged template, one PVC larger: it waits, no error",
                input: input(
                    "10Gi",
                    "10Gi",
                    vec![pvc(0, "20Gi", fast), pvc(1, "10Gi", fast)],
                ),
                want: VolumePlan {
                    pending_shrinks: vec![PendingShrink {
                        claim: "mysql-data-moco-test-0".into(),
                        current: q("20Gi"),
                        template_size: q("10Gi"),
                    }],
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "template added and removed",
                input: VolumeInput {
                    desired: vec![tmpl("mysql-data", "10Gi"), tmpl("extra", "1Gi")],
                    deployed: Some(DeployedVolumes {
                        name: "moco-test".into(),
                        templates: vec![tmpl("mysql-data", "10Gi"), tmpl("old", "1Gi")],
                        rollout: settled(3),
                    }),
                    pvcs: vec![],
                    storage_classes: classes(),
                },
                want: VolumePlan {
                    template_changes: vec![
                        TemplateChange::Added {
                            name: "extra".into(),
                        },
                        TemplateChange::Removed { name: "old".into() },
                    ],
                    ..VolumePlan::default()
                },
            },
            Case {
                name: "no StatefulSet: nothing to do",
                input: VolumeInput {
                    desired: vec![tmpl("mysql-data", "10Gi")],
                    deployed: None,
                    pvcs: vec![pvc(0, "1Gi", fast)],
                    storage_classes: classes(),
                },
                want: VolumePlan::default(),
            },
        ];
        for case in cases {
            let got = plan_volumes(&case.input);
            assert_eq!(got.as_ref(), Ok(&case.want), "{}", case.name);
            assert_eq!(
                got.map(|p| p.recreate_statefulset()).ok(),
                Some(!case.want.template_changes.is_empty()),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn ambiguous_or_missing_default_class_is_skipped() {
        for defaults in [0, 2] {
            let mut i = input("20Gi", "10Gi", vec![pvc(0, "10Gi", None)]);
            i.storage_classes = (0..2)
                .map(|n| StorageClassFacts {
                    name: format!("c{n}"),
                    allow_volume_expansion: true,
                    is_default: n < defaults,
                })
                .collect();
            let skipped = plan_volumes(&i).map(|p| p.skipped);
            assert_eq!(
                skipped
                    .ok()
                    .and_then(|s| s.first().map(|s| s.reason.clone())),
                Some(SkipReason::NoDefaultStorageClass),
                "{defaults} defaults"
            );
        }
    }

    #[test]
    fn growing_below_an_existing_pvc_is_an_error_naming_it() {
        let i = input(
            "20Gi",
            "10Gi",
            vec![pvc(0, "10Gi", Some("fast")), pvc(1, "30Gi", Some("fast"))],
        );
        let err = plan_volumes(&i);
        assert_eq!(
            err,
            Err(VolumeError::Shrink(vec![ShrinkConflict {
                claim: "mysql-data-moco-test-1".into(),
                current: q("30Gi"),
                requested: q("20Gi"),
            }]))
        );
        let msg = err.err().map(|e| e.to_string());
        assert_eq!(
            msg.as_deref(),
            Some(
                "cannot reduce volume size: PVC mysql-data-moco-test-1 requests 30Gi, more than the 20Gi wanted"
            )
        );
    }
}
