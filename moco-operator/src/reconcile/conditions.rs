//! The conditions reconcile owns on a MySQLCluster (`StatefulSetReady`, `ReconcileSuccess`,
//! `ReconciliationActive`), with MOCO's reasons and messages, and how a condition list is
//! updated without moving `lastTransitionTime` when nothing changed.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition type: the StatefulSet has rolled out and every Pod is available.
pub const STATEFULSET_READY: &str = "StatefulSetReady";
/// Condition type: the last reconcile round applied everything.
pub const RECONCILE_SUCCESS: &str = "ReconcileSuccess";
/// Condition type: reconciliation is not stopped by annotation.
pub const RECONCILIATION_ACTIVE: &str = "ReconciliationActive";
/// Condition type: clustering is not stopped by annotation.
pub const CLUSTERING_ACTIVE: &str = "ClusteringActive";

/// What reconcile learned about the StatefulSet.
#[derive(Clone, Copy, Debug)]
pub enum StatefulSetSeen<'a> {
    /// It was read.
    Found(&'a StatefulSet),
    /// It does not exist.
    NotFound,
    /// Reading it failed.
    Error,
}

/// A condition without its transition time (set by [`set`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// `type`.
    pub type_: &'static str,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// `reason`.
    pub reason: &'static str,
    /// `message`.
    pub message: &'static str,
}

/// `StatefulSetReady`: every replica available, on the update revision, the spec observed.
pub fn statefulset_ready(seen: StatefulSetSeen<'_>) -> Wanted {
    let not = |reason, message| Wanted {
        type_: STATEFULSET_READY,
        status: "False",
        reason,
        message,
    };
    match seen {
        StatefulSetSeen::NotFound => not("StatefulSetNotFound", "StatefulSet not found"),
        // MOCO's reason, spelling included, so alerts written for MOCO keep matching.
        StatefulSetSeen::Error => not("FaildToGetStatefulSet", "failed to get StatefulSet"),
        StatefulSetSeen::Found(sts) => {
            let replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let status = sts.status.clone().unwrap_or_default();
            let ready = status.available_replicas.unwrap_or(0) == replicas
                && status.current_revision == status.update_revision
                && sts.metadata.generation == status.observed_generation;
            if ready {
                Wanted {
                    type_: STATEFULSET_READY,
                    status: "True",
                    reason: "StatefulSetReady",
                    message: "StatefulSet is ready",
                }
            } else {
                not("StatefulSetNotReady", "StatefulSet is not ready")
            }
        }
    }
}

/// `ReconcileSuccess` after a round that succeeded or failed.
pub fn reconcile_success(ok: bool) -> Wanted {
    if ok {
        Wanted {
            type_: RECONCILE_SUCCESS,
            status: "True",
            reason: "ReconcileSuccess",
            message: "reconcile successfully",
        }
    } else {
        Wanted {
            type_: RECONCILE_SUCCESS,
            status: "False",
            reason: "ReconcileFailed",
            message: "reconcile failed",
        }
    }
}

/// `ReconciliationActive`.
pub fn reconciliation_active(active: bool) -> Wanted {
    if active {
        Wanted {
            type_: RECONCILIATION_ACTIVE,
            status: "True",
            reason: "ReconciliationActive",
            message: "reconciliation is active",
        }
    } else {
        Wanted {
            type_: RECONCILIATION_ACTIVE,
            status: "False",
            reason: "ReconciliationInactive",
            message: "reconciliation is inactive",
        }
    }
}

/// `ClusteringActive`.
pub fn clustering_active(active: bool) -> Wanted {
    if active {
        Wanted {
            type_: CLUSTERING_ACTIVE,
            status: "True",
            reason: "ClusteringActive",
            message: "clustering is active",
        }
    } else {
        Wanted {
            type_: CLUSTERING_ACTIVE,
            status: "False",
            reason: "ClusteringInactive",
            message: "clustering is inactive",
        }
    }
}

/// Sets `wanted` in `conditions`: `lastTransitionTime` moves to `now` only when the status
/// changes; reason, message and `observedGeneration` are always updated. Returns whether the
/// list changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    wanted: &Wanted,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let fresh = |time: Time| Condition {
        type_: wanted.type_.to_owned(),
        status: wanted.status.to_owned(),
        reason: wanted.reason.to_owned(),
        message: wanted.message.to_owned(),
        observed_generation,
        last_transition_time: time,
    };
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        None => {
            conditions.push(fresh(now.clone()));
            true
        }
        Some(c) => {
            let time = if c.status == wanted.status {
                c.last_transition_time.clone()
            } else {
                now.clone()
            };
            let next = fresh(time);
            if *c == next {
                false
            } else {
                *c = next;
                true
            }
        }
    }
}

/// Sets the status of condition `type_` to `Unknown` keeping its reason and message (MOCO
/// does this to `Available` and `Healthy` when clustering stops). Returns whether it changed.
pub fn set_unknown(conditions: &mut [Condition], type_: &str, now: &Time) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status != "Unknown" => {
            c.status = "Unknown".into();
            c.last_transition_time = now.clone();
            true
        }
        _ => false,
    }
}

/// The condition of `type_`, if any.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn time(s: &str) -> Time {
        serde_json::from_value(serde_json::json!(s)).unwrap()
    }

    fn sts(
        available: i32,
        current: &str,
        update: &str,
        generation: i64,
        observed: i64,
    ) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(3),
                ..StatefulSetSpec::default()
            }),
            status: Some(StatefulSetStatus {
                available_replicas: Some(available),
                current_revision: Some(current.into()),
                update_revision: Some(update.into()),
                observed_generation: Some(observed),
                ..StatefulSetStatus::default()
            }),
        }
    }

    #[test]
    fn statefulset_is_ready_only_when_rolled_out_and_available() {
        let ready = |s: &StatefulSet| statefulset_ready(StatefulSetSeen::Found(s)).status;
        assert_eq!(ready(&sts(3, "a", "a", 2, 2)), "True");
        assert_eq!(ready(&sts(2, "a", "a", 2, 2)), "False");
        assert_eq!(ready(&sts(3, "a", "b", 2, 2)), "False");
        assert_eq!(ready(&sts(3, "a", "a", 3, 2)), "False");
        assert_eq!(
            statefulset_ready(StatefulSetSeen::NotFound).reason,
            "StatefulSetNotFound"
        );
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut list = Vec::new();
        let t1 = time("2026-01-01T00:00:00Z");
        let t2 = time("2026-01-01T00:01:00Z");
        assert!(set(&mut list, &reconcile_success(true), Some(1), &t1));
        assert!(!set(&mut list, &reconcile_success(true), Some(1), &t2));
        assert!(set(&mut list, &reconcile_success(true), Some(2), &t2));
        assert_eq!(list[0].last_transition_time, t1);
        assert!(set(&mut list, &reconcile_success(false), Some(2), &t2));
        assert_eq!(list[0].last_transition_time, t2);
        assert_eq!(list[0].reason, "ReconcileFailed");
        assert!(set_unknown(&mut list, RECONCILE_SUCCESS, &t1));
        assert_eq!(list[0].status, "Unknown");
        assert_eq!(list[0].reason, "ReconcileFailed");
        assert!(!set_unknown(&mut list, RECONCILE_SUCCESS, &t1));
    }
}
