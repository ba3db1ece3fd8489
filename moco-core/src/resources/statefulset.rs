//! Which reconciler version renders the StatefulSet, and whether (and why) it must change.
//!
//! Rewriting the Pod template restarts every mysqld, so it must only happen for a reason the
//! user can see coming. MOCO keeps a reconciler version per cluster: an operator upgrade keeps
//! rendering clusters with the version recorded for their current spec generation, and only a
//! spec edit moves them to the latest. The StatefulSet changes when the spec generation, the
//! my.cnf ConfigMap, the reconciler version, the agent image or the exporter image changes. A
//! new fluent-bit image alone does not roll Pods: the deployed slow-log container is kept
//! until the spec changes anyway.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The newest reconciler this operator implements.
pub const LATEST_RECONCILER_VERSION: u32 = 2;

/// `status.reconcileInfo`: the spec generation last reconciled and the reconciler version used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReconcileInfo {
    /// `metadata.generation` at the last successful reconciliation (0: never).
    #[serde(default)]
    pub generation: i64,
    /// The reconciler version used then (0: none recorded).
    #[serde(default)]
    pub reconcile_version: u32,
}

/// Picks the reconciler version: the recorded one while the spec is unchanged (or the cluster
/// is being deleted), so operator upgrades do not restart mysqld; `latest` otherwise. A
/// recorded 0 or a version above `latest` (one this operator does not implement) means
/// `latest`, as in MOCO. `latest` is [`LATEST_RECONCILER_VERSION`] unless an operator is
/// told otherwise (to test an upgrade).
pub fn choose_reconciler_version(
    recorded: &ReconcileInfo,
    generation: i64,
    deleting: bool,
    latest: u32,
) -> u32 {
    let keep_recorded = recorded.generation == generation || deleting;
    if keep_recorded && (1..=latest).contains(&recorded.reconcile_version) {
        recorded.reconcile_version
    } else {
        latest
    }
}

/// The parts of the Pod template whose change decides a rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTemplateFacts {
    /// Name of the my.cnf ConfigMap the `mysql-conf` volume mounts.
    pub mycnf_config_map: String,
    /// Image of the `agent` container.
    pub agent_image: String,
    /// Image of the `mysqld-exporter` container; `None` when there is no exporter.
    #[serde(default)]
    pub exporter_image: Option<String>,
    /// Image of the `slow-log` container; `None` when there is none.
    #[serde(default)]
    pub fluent_bit_image: Option<String>,
}

fn latest_reconciler_version() -> u32 {
    LATEST_RECONCILER_VERSION
}

/// What the StatefulSet decision depends on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatefulSetInput {
    /// The MySQLCluster's `metadata.generation`.
    pub generation: i64,
    /// The MySQLCluster has a deletionTimestamp.
    #[serde(default)]
    pub deleting: bool,
    /// `status.reconcileInfo`.
    #[serde(default)]
    pub reconcile_info: ReconcileInfo,
    /// The newest reconciler version the operator implements.
    #[serde(default = "latest_reconciler_version")]
    pub latest_reconciler_version: u32,
    /// What this round would put into the Pod template (operator flags, new ConfigMap name).
    pub desired: PodTemplateFacts,
    /// What the existing StatefulSet's Pod template holds; `None` when there is none.
    #[serde(default)]
    pub deployed: Option<PodTemplateFacts>,
}

/// Why the StatefulSet must be rewritten (which restarts the Pods).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "reason",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum UpdateReason {
    /// The user edited the spec since the last reconciliation.
    SpecGenerationChanged {
        /// `status.reconcileInfo.generation`.
        reconciled: i64,
        /// `metadata.generation`.
        current: i64,
    },
    /// The generated my.cnf changed, so its ConfigMap name did.
    MycnfChanged {
        /// ConfigMap in the deployed template.
        deployed: String,
        /// ConfigMap this round generated.
        desired: String,
    },
    /// The recorded reconciler version is not the one chosen now (it is older, or unknown to
    /// this operator).
    ObsoleteReconcilerVersion {
        /// `status.reconcileInfo.reconcileVersion`.
        recorded: u32,
        /// The version that renders this round.
        chosen: u32,
    },
    /// The operator's agent image changed.
    AgentImageChanged {
        /// Image in the deployed template.
        deployed: String,
        /// Image the operator runs with now.
        desired: String,
    },
    /// The operator's mysqld_exporter image changed (or the exporter appeared/vanished).
    ExporterImageChanged {
        /// Image in the deployed template.
        deployed: Option<String>,
        /// Image the operator runs with now.
        desired: Option<String>,
    },
}

/// What to do with the StatefulSet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "action",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum StatefulSetAction {
    /// There is none: create it.
    Create,
    /// Rewrite it, for these reasons (never empty).
    Update {
        /// Every reason that applies, in a fixed order.
        reasons: Vec<UpdateReason>,
    },
    /// Leave it as it is (also while the cluster is being deleted).
    Keep,
}

/// The StatefulSet decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatefulSetDecision {
    /// The reconciler version that renders this round (to record in `status.reconcileInfo`).
    pub reconciler_version: u32,
    /// Create, update or keep.
    pub action: StatefulSetAction,
    /// The `slow-log` image to render: the deployed one unless the spec changed, so a new
    /// fluent-bit image alone does not restart Pods.
    pub fluent_bit_image: Option<String>,
}

impl StatefulSetDecision {
    /// True when the StatefulSet is to be created or rewritten.
    pub fn must_apply(&self) -> bool {
        !matches!(self.action, StatefulSetAction::Keep)
    }
}

/// The StatefulSet's `replicas` for a cluster of `spec_replicas` whose deployed StatefulSet
/// has `deployed`. A shrink keeps the Pods of the leaving instances (the highest ordinals,
/// which a StatefulSet removes first) until the engine recorded that none of them is needed
/// for an acknowledged commit any more (`ClusterStatus::leaving_may_go`); removing them
/// earlier could remove the only copies of acknowledged commits, or the primary. A growth
/// takes effect at once: new instances join as learners.
pub fn statefulset_replicas(
    spec_replicas: u32,
    deployed: Option<u32>,
    leaving_may_go: bool,
) -> u32 {
    match deployed {
        Some(running) if running > spec_replicas && !leaving_may_go => running,
        _ => spec_replicas,
    }
}

/// Decides whether the StatefulSet is created, rewritten (and why) or kept.
pub fn decide_statefulset(input: &StatefulSetInput) -> StatefulSetDecision {
    let recorded = &input.reconcile_info;
    let reconciler_version = choose_reconciler_version(
        recorded,
        input.generation,
        input.deleting,
        input.latest_reconciler_version,
    );
    let spec_changed = recorded.generation != input.generation;
    let desired = &input.desired;

    let fluent_bit_image = match (&desired.fluent_bit_image, &input.deployed) {
        (Some(_), Some(deployed)) if !spec_changed && deployed.fluent_bit_image.is_some() => {
            deployed.fluent_bit_image.clone()
        }
        (wanted, _) => wanted.clone(),
    };

    let action = match &input.deployed {
        _ if input.deleting => StatefulSetAction::Keep,
        None => StatefulSetAction::Create,
        Some(deployed) => {
            let mut reasons = Vec::new();
            if spec_changed {
                reasons.push(UpdateReason::SpecGenerationChanged {
                    reconciled: recorded.generation,
                    current: input.generation,
                });
            }
            if deployed.mycnf_config_map != desired.mycnf_config_map {
                reasons.push(UpdateReason::MycnfChanged {
                    deployed: deployed.mycnf_config_map.clone(),
                    desired: desired.mycnf_config_map.clone(),
                });
            }
            if recorded.reconcile_version != 0 && recorded.reconcile_version != reconciler_version {
                reasons.push(UpdateReason::ObsoleteReconcilerVersion {
                    recorded: recorded.reconcile_version,
                    chosen: reconciler_version,
                });
            }
            if deployed.agent_image != desired.agent_image {
                reasons.push(UpdateReason::AgentImageChanged {
                    deployed: deployed.agent_image.clone(),
                    desired: desired.agent_image.clone(),
                });
            }
            if deployed.exporter_image != desired.exporter_image {
                reasons.push(UpdateReason::ExporterImageChanged {
                    deployed: deployed.exporter_image.clone(),
                    desired: desired.exporter_image.clone(),
                });
            }
            if reasons.is_empty() {
                StatefulSetAction::Keep
            } else {
                StatefulSetAction::Update { reasons }
            }
        }
    };

    StatefulSetDecision {
        reconciler_version,
        action,
        fluent_bit_image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Growth at once; a shrink holds the deployed size until the engine lets the leaving
    /// Pods go; a new StatefulSet gets the spec's size.
    #[test]
    fn a_shrink_holds_the_leaving_pods_until_released() {
        // (spec, deployed, may go) → replicas
        for (spec, deployed, may_go, want) in [
            (3, None, false, 3),
            (3, Some(3), false, 3),
            (5, Some(3), false, 5),
            (3, Some(5), false, 5),
            (3, Some(5), true, 3),
            (1, Some(3), false, 3),
            (1, Some(3), true, 1),
        ] {
            assert_eq!(
                statefulset_replicas(spec, deployed, may_go),
                want,
                "spec {spec} deployed {deployed:?} may go {may_go}"
            );
        }
    }

    fn info(generation: i64, reconcile_version: u32) -> ReconcileInfo {
        ReconcileInfo {
            generation,
            reconcile_version,
        }
    }

    #[test]
    fn reconciler_version_table() {
        // (recorded generation, recorded version, current generation, deleting) → version, for
        // an operator whose latest is 1.
        let cases = [
            (0, 0, 1, false, 1), // new cluster
            (3, 0, 3, false, 1), // nothing recorded: latest
            (3, 1, 3, false, 1), // unchanged spec: recorded
            (3, 1, 4, false, 1), // spec changed: latest
            (3, 7, 3, false, 1), // unknown (newer) version recorded: latest, as MOCO
            (3, 1, 4, true, 1),  // deleting keeps the recorded one
            (3, 0, 4, true, 1),  // deleting, nothing recorded
        ];
        for (rg, rv, g, deleting, want) in cases {
            assert_eq!(
                choose_reconciler_version(&info(rg, rv), g, deleting, 1),
                want,
                "recorded ({rg},{rv}) generation {g} deleting {deleting}"
            );
        }
        // An operator whose latest is 2 (an upgrade): clusters recorded with 1 keep it until
        // their spec changes; a downgrade to 1 renders a cluster recorded with 2 with 1.
        let upgrade = [
            (3, 1, 3, false, 2, 1),
            (3, 1, 4, false, 2, 2),
            (3, 1, 4, true, 2, 1),
            (3, 2, 3, false, 2, 2),
            (3, 2, 3, false, 1, 1),
            (0, 0, 1, false, 2, 2),
        ];
        for (rg, rv, g, deleting, latest, want) in upgrade {
            assert_eq!(
                choose_reconciler_version(&info(rg, rv), g, deleting, latest),
                want,
                "recorded ({rg},{rv}) generation {g} deleting {deleting} latest {latest}"
            );
        }
    }

    fn template(
        cm: &str,
        agent: &str,
        exporter: Option<&str>,
        fluent: Option<&str>,
    ) -> PodTemplateFacts {
        PodTemplateFacts {
            mycnf_config_map: cm.into(),
            agent_image: agent.into(),
            exporter_image: exporter.map(Into::into),
            fluent_bit_image: fluent.map(Into::into),
        }
    }

    #[test]
    fn update_decision_table() {
        use StatefulSetAction::{Create, Keep, Update};
        use UpdateReason::*;
        let base = template("moco-a.1", "agent:1", Some("exp:1"), Some("fb:1"));
        struct Case {
            name: &'static str,
            generation: i64,
            deleting: bool,
            recorded: ReconcileInfo,
            desired: PodTemplateFacts,
            deployed: Option<PodTemplateFacts>,
            action: StatefulSetAction,
            fluent: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "nothing changed",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: base.clone(),
                deployed: Some(base.clone()),
                action: Keep,
                fluent: Some("fb:1"),
            },
            Case {
                name: "no StatefulSet yet",
                generation: 1,
                deleting: false,
                recorded: info(0, 0),
                desired: base.clone(),
                deployed: None,
                action: Create,
                fluent: Some("fb:1"),
            },
            Case {
                name: "spec edited",
                generation: 3,
                deleting: false,
                recorded: info(2, 1),
                desired: base.clone(),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![SpecGenerationChanged {
                        reconciled: 2,
                        current: 3,
                    }],
                },
                fluent: Some("fb:1"),
            },
            Case {
                name: "my.cnf changed",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.2", "agent:1", Some("exp:1"), Some("fb:1")),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![MycnfChanged {
                        deployed: "moco-a.1".into(),
                        desired: "moco-a.2".into(),
                    }],
                },
                fluent: Some("fb:1"),
            },
            Case {
                name: "agent image changed",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.1", "agent:2", Some("exp:1"), Some("fb:1")),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![AgentImageChanged {
                        deployed: "agent:1".into(),
                        desired: "agent:2".into(),
                    }],
                },
                fluent: Some("fb:1"),
            },
            Case {
                name: "exporter image changed",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.1", "agent:1", Some("exp:2"), Some("fb:1")),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![ExporterImageChanged {
                        deployed: Some("exp:1".into()),
                        desired: Some("exp:2".into()),
                    }],
                },
                fluent: Some("fb:1"),
            },
            Case {
                name: "fluent-bit image alone: keep, and keep the old image",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.1", "agent:1", Some("exp:1"), Some("fb:2")),
                deployed: Some(base.clone()),
                action: Keep,
                fluent: Some("fb:1"),
            },
            Case {
                name: "fluent-bit image with an agent change: old fluent-bit kept",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.1", "agent:2", Some("exp:1"), Some("fb:2")),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![AgentImageChanged {
                        deployed: "agent:1".into(),
                        desired: "agent:2".into(),
                    }],
                },
                fluent: Some("fb:1"),
            },
            Case {
                name: "fluent-bit image with a spec change: new image",
                generation: 3,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.1", "agent:1", Some("exp:1"), Some("fb:2")),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![SpecGenerationChanged {
                        reconciled: 2,
                        current: 3,
                    }],
                },
                fluent: Some("fb:2"),
            },
            Case {
                name: "slow-log container missing in the deployed template: desired image",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.1", "agent:1", Some("exp:1"), Some("fb:2")),
                deployed: Some(template("moco-a.1", "agent:1", Some("exp:1"), None)),
                action: Keep,
                fluent: Some("fb:2"),
            },
            Case {
                name: "slow-log disabled: no image",
                generation: 2,
                deleting: false,
                recorded: info(2, 1),
                desired: template("moco-a.1", "agent:1", Some("exp:1"), None),
                deployed: Some(base.clone()),
                action: Keep,
                fluent: None,
            },
            Case {
                name: "unknown recorded version with unchanged spec",
                generation: 2,
                deleting: false,
                recorded: info(2, 9),
                desired: base.clone(),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![ObsoleteReconcilerVersion {
                        recorded: 9,
                        chosen: 1,
                    }],
                },
                fluent: Some("fb:1"),
            },
            Case {
                name: "every reason at once, in order",
                generation: 5,
                deleting: false,
                recorded: info(4, 9),
                desired: template("moco-a.2", "agent:2", None, Some("fb:1")),
                deployed: Some(base.clone()),
                action: Update {
                    reasons: vec![
                        SpecGenerationChanged {
                            reconciled: 4,
                            current: 5,
                        },
                        MycnfChanged {
                            deployed: "moco-a.1".into(),
                            desired: "moco-a.2".into(),
                        },
                        ObsoleteReconcilerVersion {
                            recorded: 9,
                            chosen: 1,
                        },
                        AgentImageChanged {
                            deployed: "agent:1".into(),
                            desired: "agent:2".into(),
                        },
                        ExporterImageChanged {
                            deployed: Some("exp:1".into()),
                            desired: None,
                        },
                    ],
                },
                fluent: Some("fb:1"),
            },
            Case {
                name: "deleting: keep whatever changed",
                generation: 3,
                deleting: true,
                recorded: info(2, 1),
                desired: template("moco-a.2", "agent:2", None, None),
                deployed: Some(base.clone()),
                action: Keep,
                fluent: None,
            },
        ];
        for case in cases {
            let decision = decide_statefulset(&StatefulSetInput {
                generation: case.generation,
                deleting: case.deleting,
                reconcile_info: case.recorded,
                // The rules, for an operator whose latest is 1.
                latest_reconciler_version: 1,
                desired: case.desired,
                deployed: case.deployed,
            });
            assert_eq!(decision.action, case.action, "{}", case.name);
            assert_eq!(
                decision.fluent_bit_image.as_deref(),
                case.fluent,
                "{}",
                case.name
            );
            assert_eq!(decision.reconciler_version, 1, "{}", case.name);
            assert_eq!(decision.must_apply(), case.action != Keep, "{}", case.name);
        }
    }

    #[test]
    fn reasons_serialise_with_a_tag() {
        let reason = UpdateReason::SpecGenerationChanged {
            reconciled: 1,
            current: 2,
        };
        assert_eq!(
            serde_json::to_value(&reason).ok(),
            Some(
                serde_json::json!({"reason": "specGenerationChanged", "reconciled": 1, "current": 2})
            )
        );
    }

    /// An input written before the operator's latest version was a field (the scenario
    /// fixtures) is read as this release's latest.
    #[test]
    fn an_input_without_the_latest_version_reads_as_this_releases() {
        let input: StatefulSetInput = serde_json::from_value(serde_json::json!({
            "generation": 1,
            "desired": {"mycnfConfigMap": "moco-db.1", "agentImage": "agent:1"}
        }))
        .expect("an input without latestReconcilerVersion");
        assert_eq!(input.latest_reconciler_version, LATEST_RECONCILER_VERSION);
        assert_ne!(input.latest_reconciler_version, 0);
    }

    /// An operator upgraded to a newer reconciler version leaves an unchanged cluster on the
    /// version it recorded (nothing to roll) and moves it on its next spec edit, naming both
    /// reasons.
    #[test]
    fn an_upgrade_rolls_nothing_until_the_spec_is_edited() {
        let facts = template("moco-a.1", "agent:1", None, Some("fb:1"));
        let input = |generation: i64| StatefulSetInput {
            generation,
            deleting: false,
            reconcile_info: info(2, 1),
            latest_reconciler_version: 2,
            desired: facts.clone(),
            deployed: Some(facts.clone()),
        };
        let kept = decide_statefulset(&input(2));
        assert_eq!(
            (kept.reconciler_version, kept.action),
            (1, StatefulSetAction::Keep)
        );
        let edited = decide_statefulset(&input(3));
        assert_eq!(edited.reconciler_version, 2);
        assert_eq!(
            edited.action,
            StatefulSetAction::Update {
                reasons: vec![
                    UpdateReason::SpecGenerationChanged {
                        reconciled: 2,
                        current: 3
                    },
                    UpdateReason::ObsoleteReconcilerVersion {
                        recorded: 1,
                        chosen: 2
                    },
                ]
            }
        );
    }
}
