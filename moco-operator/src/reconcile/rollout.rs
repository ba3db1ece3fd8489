//! Which reconciler version renders a round, and why the StatefulSet's Pods are rolled.
//!
//! The version is chosen before anything is rendered, from what the cluster's status recorded
//! (`moco_core::resources::choose_reconciler_version`), and recorded again after the round,
//! so an operator upgrade renders an unchanged cluster exactly as before
//! ([`crate::render::version`]). The reasons are reported when the StatefulSet is applied, so
//! a rollout can be traced to the spec edit, the my.cnf, the version or the image behind it.

use k8s_openapi::api::apps::v1::StatefulSet;
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::resources::{
    ReconcileInfo, StatefulSetDecision, StatefulSetInput, choose_reconciler_version,
    decide_statefulset,
};

use crate::render::pod_template::template_facts;

/// `status.reconcileInfo` of `cluster` in moco-core's terms (nothing recorded: zeros; a
/// negative version, which no operator writes, counts as none).
pub fn recorded(cluster: &MySQLCluster) -> ReconcileInfo {
    let info = cluster
        .status
        .as_ref()
        .map(|s| s.reconcile_info.clone())
        .unwrap_or_default();
    ReconcileInfo {
        generation: info.generation,
        reconcile_version: u32::try_from(info.reconcile_version).unwrap_or(0),
    }
}

/// The reconciler version that renders this round of `cluster`.
pub fn reconciler_version(cluster: &MySQLCluster, latest: u32) -> u32 {
    choose_reconciler_version(
        &recorded(cluster),
        cluster.metadata.generation.unwrap_or(0),
        cluster.metadata.deletion_timestamp.is_some(),
        latest,
    )
}

/// Whether and why `rendered` replaces `deployed`'s Pods, as moco-core decides it.
pub fn decide(
    cluster: &MySQLCluster,
    latest: u32,
    rendered: &StatefulSet,
    deployed: Option<&StatefulSet>,
) -> StatefulSetDecision {
    let facts = |s: &StatefulSet| {
        s.spec
            .as_ref()
            .map(|spec| template_facts(&spec.template))
            .unwrap_or_default()
    };
    decide_statefulset(&StatefulSetInput {
        generation: cluster.metadata.generation.unwrap_or(0),
        deleting: cluster.metadata.deletion_timestamp.is_some(),
        reconcile_info: recorded(cluster),
        latest_reconciler_version: latest,
        desired: facts(rendered),
        deployed: deployed.map(facts),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use moco_api::mysqlcluster::{MySQLClusterStatus, ReconcileInfo as Recorded};
    use moco_core::resources::{StatefulSetAction, UpdateReason};

    fn cluster(generation: i64, recorded: Option<(i64, i32)>) -> MySQLCluster {
        let mut c: MySQLCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "ns", "generation": generation},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "m"}]}},
                     "volumeClaimTemplates": []}
        }))
        .unwrap();
        c.status = recorded.map(|(generation, reconcile_version)| MySQLClusterStatus {
            reconcile_info: Recorded {
                generation,
                reconcile_version,
            },
            ..MySQLClusterStatus::default()
        });
        c
    }

    fn sts(mycnf: &str, agent: &str) -> StatefulSet {
        serde_json::from_value(serde_json::json!({
            "spec": {"selector": {}, "serviceName": "s", "template": {"spec": {
                "containers": [{"name": "mysqld", "image": "m"}, {"name": "agent", "image": agent}],
                "volumes": [{"name": "mysql-conf", "configMap": {"name": mycnf}}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn the_recorded_version_renders_until_the_spec_changes() {
        assert_eq!(reconciler_version(&cluster(1, None), 2), 2);
        assert_eq!(reconciler_version(&cluster(4, Some((4, 1))), 2), 1);
        assert_eq!(reconciler_version(&cluster(5, Some((4, 1))), 2), 2);
        assert_eq!(reconciler_version(&cluster(4, Some((4, -3))), 2), 2);
    }

    #[test]
    fn reasons_come_from_the_templates() {
        let c = cluster(4, Some((4, 1)));
        let same = decide(
            &c,
            1,
            &sts("moco-db.a", "agent:1"),
            Some(&sts("moco-db.a", "agent:1")),
        );
        assert_eq!(same.action, StatefulSetAction::Keep);
        let changed = decide(
            &c,
            1,
            &sts("moco-db.b", "agent:2"),
            Some(&sts("moco-db.a", "agent:1")),
        );
        assert_eq!(
            changed.action,
            StatefulSetAction::Update {
                reasons: vec![
                    UpdateReason::MycnfChanged {
                        deployed: "moco-db.a".into(),
                        desired: "moco-db.b".into()
                    },
                    UpdateReason::AgentImageChanged {
                        deployed: "agent:1".into(),
                        desired: "agent:2".into()
                    },
                ]
            }
        );
        assert_eq!(
            decide(&c, 1, &sts("a", "b"), None).action,
            StatefulSetAction::Create
        );
    }
}
