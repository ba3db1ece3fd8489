//! The MySQLCluster's recorded status as the engine sees it, and the engine's clustering
//! fields written back into it: the conversions both the clustering loop and the renderer
//! (which holds a shrink's leaving Pods, `render::render_cluster`) need.

use crate::mysqlcluster::MySQLClusterStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as KubeCondition, Time};
use moco_core::status::{
    CLUSTERING_CONDITIONS, ClusterStatus, ClusteringStatus, Condition, ConditionStatus,
};
use moco_core::time::Timestamp;

/// Seconds since the epoch of a Kubernetes time.
pub fn to_timestamp(t: &Time) -> Timestamp {
    Timestamp(t.0.as_second())
}

/// A Kubernetes time from seconds since the epoch (the epoch if out of range).
pub fn to_time(t: Timestamp) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(t.0).unwrap_or_default())
}

fn condition_status(s: &str) -> ConditionStatus {
    match s {
        "True" => ConditionStatus::True,
        "False" => ConditionStatus::False,
        _ => ConditionStatus::Unknown,
    }
}

fn condition_text(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

/// The engine's view of the recorded status.
pub fn cluster_status(status: &MySQLClusterStatus) -> ClusterStatus {
    let count = |n: i32| u32::try_from(n).unwrap_or(0);
    ClusterStatus {
        conditions: status
            .conditions
            .iter()
            .map(|c| Condition {
                type_: c.type_.clone(),
                status: condition_status(&c.status),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: to_timestamp(&c.last_transition_time),
            })
            .collect(),
        current_primary_index: count(status.current_primary_index),
        synced_replicas: count(status.synced_replicas),
        errant_replicas: count(status.errant_replicas),
        errant_replica_list: status
            .errant_replica_list
            .iter()
            .filter_map(|i| u32::try_from(*i).ok())
            .collect(),
        cloned: status.cloned,
        restored_time: status.restored_time.as_ref().map(to_timestamp),
        semi_sync_members: status.semi_sync_members.and_then(|n| u32::try_from(n).ok()),
        semi_sync_min_acks: status
            .semi_sync_min_acks
            .and_then(|n| u32::try_from(n).ok()),
    }
}

/// Writes the clustering-owned fields into the recorded status; other fields and the
/// reconciler's conditions stay. Returns whether anything changed.
pub fn merge_clustering_status(status: &mut MySQLClusterStatus, new: &ClusteringStatus) -> bool {
    let before = status.clone();
    let int = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    for c in &new.conditions {
        if !CLUSTERING_CONDITIONS.contains(&c.type_.as_str()) {
            continue;
        }
        let kube = KubeCondition {
            type_: c.type_.clone(),
            status: condition_text(c.status).to_owned(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition_time: to_time(c.last_transition_time),
            observed_generation: None,
        };
        match status.conditions.iter_mut().find(|o| o.type_ == c.type_) {
            Some(old) => {
                let observed = old.observed_generation;
                *old = KubeCondition {
                    observed_generation: observed,
                    ..kube
                };
            }
            None => status.conditions.push(kube),
        }
    }
    status.current_primary_index = int(new.current_primary_index);
    status.synced_replicas = int(new.synced_replicas);
    status.errant_replicas = int(new.errant_replicas);
    status.errant_replica_list = new.errant_replica_list.iter().map(|i| int(*i)).collect();
    status.cloned = new.cloned;
    status.semi_sync_members = new.semi_sync_members.map(int);
    status.semi_sync_min_acks = new.semi_sync_min_acks.map(int);
    *status != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clustering_status_replaces_only_its_own_fields() {
        let t = |s: &str| -> Time { serde_json::from_value(json!(s)).unwrap() };
        let mut recorded = MySQLClusterStatus {
            conditions: vec![
                KubeCondition {
                    type_: "ReconcileSuccess".into(),
                    status: "True".into(),
                    reason: "ReconcileSuccess".into(),
                    message: "m".into(),
                    last_transition_time: t("2026-01-01T00:00:00Z"),
                    observed_generation: Some(3),
                },
                KubeCondition {
                    type_: "Healthy".into(),
                    status: "False".into(),
                    reason: "Degraded".into(),
                    message: String::new(),
                    last_transition_time: t("2026-01-01T00:00:00Z"),
                    observed_generation: None,
                },
            ],
            reconcile_info: crate::mysqlcluster::ReconcileInfo {
                generation: 3,
                reconcile_version: 1,
            },
            ..MySQLClusterStatus::default()
        };
        let new = ClusteringStatus {
            conditions: vec![Condition {
                type_: "Healthy".into(),
                status: ConditionStatus::True,
                reason: "Healthy".into(),
                message: String::new(),
                last_transition_time: Timestamp(1_800_000_000),
            }],
            current_primary_index: 2,
            synced_replicas: 3,
            errant_replicas: 1,
            errant_replica_list: vec![1],
            cloned: false,
            semi_sync_members: Some(3),
            semi_sync_min_acks: Some(0),
        };
        assert!(merge_clustering_status(&mut recorded, &new));
        assert!(!merge_clustering_status(&mut recorded, &new));
        assert_eq!(recorded.current_primary_index, 2);
        assert_eq!(recorded.errant_replica_list, vec![1]);
        assert_eq!(recorded.reconcile_info.generation, 3);
        assert_eq!(recorded.conditions[0].type_, "ReconcileSuccess");
        assert_eq!(recorded.conditions[0].observed_generation, Some(3));
        assert_eq!(recorded.conditions[1].status, "True");
        assert_eq!(
            to_timestamp(&recorded.conditions[1].last_transition_time).0,
            1_800_000_000
        );
        let round_trip = cluster_status(&recorded);
        assert_eq!(round_trip.current_primary_index, 2);
        assert_eq!(round_trip.semi_sync_members, Some(3));
        assert_eq!(round_trip.semi_sync_min_acks, Some(0));
        assert_eq!(round_trip.conditions[1].status, ConditionStatus::True);
    }
}
