//! The MySQLCluster status fields clustering owns, and how each round recomputes them from the
//! previous status and the decided state.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::state::ClusterState;
use crate::time::Timestamp;

/// The clustering part of `MySQLCluster.status` (field names as in MOCO's API).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterStatus {
    /// Conditions `Initialized`, `Available`, `Healthy`, `ClusteringActive` (others written by
    /// the controller are carried through untouched).
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Ordinal of the primary.
    #[serde(default)]
    pub current_primary_index: u32,
    /// Number of ready Pods, primary included.
    #[serde(default)]
    pub synced_replicas: u32,
    /// `errantReplicaList.len()`.
    #[serde(default)]
    pub errant_replicas: u32,
    /// Ordinals with errant transactions; remembered while the primary cannot be asked.
    #[serde(default)]
    pub errant_replica_list: Vec<u32>,
    /// Set once the initial clone from the external source finished.
    #[serde(default)]
    pub cloned: bool,
    /// Set by the restore Job when it finished.
    #[serde(default)]
    pub restored_time: Option<Timestamp>,
    /// Instances `0..semiSyncMembers` count as semi-sync acknowledgers (an extension of
    /// MOCO's status). A cluster that grows keeps its new instances out, replicating
    /// asynchronously, until each has caught up, so that no commit waits for an instance that
    /// is still being cloned. A cluster that shrinks keeps counting its leaving instances
    /// until none of them is needed for an acknowledged commit; then this drops to
    /// `spec.replicas`, and [`ClusterStatus::leaving_may_go`] tells the platform it may remove
    /// them. Absent means every instance (MOCO's rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync_members: Option<u32>,
    /// The fewest acknowledgements a commit already acknowledged may have had, while that is
    /// below what the members need (a cluster growing from one instance, or a wait count not
    /// yet known to be on enough replicas after being raised). A failover is judged by it.
    /// Absent means the members' required count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync_min_acks: Option<u32>,
}

/// A Kubernetes-style condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// CamelCase reason; the state name for clustering conditions.
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: Timestamp,
}

/// The three condition values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    fn from_bool(b: bool) -> Self {
        if b {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// Condition type names.
pub mod condition_type {
    /// False while cloning or restoring.
    pub const INITIALIZED: &str = "Initialized";
    /// True while the cluster accepts writes (Healthy or Degraded, primary able to commit).
    pub const AVAILABLE: &str = "Available";
    /// True only in the Healthy state.
    pub const HEALTHY: &str = "Healthy";
    /// True while clustering runs.
    pub const CLUSTERING_ACTIVE: &str = "ClusteringActive";
}

impl ClusterStatus {
    /// True when a cluster shrunk to `replicas` may remove its instances past that size: the
    /// primary is not among them and the engine recorded that they no longer count for any
    /// acknowledged commit. Without a record (a status from before the shrink, or from MOCO)
    /// they must stay: the engine has not looked yet.
    pub fn leaving_may_go(&self, replicas: u32) -> bool {
        self.current_primary_index < replicas
            && self.semi_sync_members.is_some_and(|m| m <= replicas)
    }

    /// The condition of the given type, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Sets a condition, keeping `lastTransitionTime` unless the status value changes.
    pub fn set_condition(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: String,
        now: Timestamp,
    ) {
        match self.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = now;
                }
                c.status = status;
                c.reason = reason.to_owned();
                c.message = message;
            }
            None => self.conditions.push(Condition {
                type_: type_.to_owned(),
                status,
                reason: reason.to_owned(),
                message,
                last_transition_time: now,
            }),
        }
    }
}

/// The condition types the clustering loop writes; every other condition belongs to the
/// reconciler.
pub const CLUSTERING_CONDITIONS: [&str; 4] = [
    condition_type::INITIALIZED,
    condition_type::AVAILABLE,
    condition_type::HEALTHY,
    condition_type::CLUSTERING_ACTIVE,
];

/// What the clustering loop writes to `MySQLCluster.status`. The engine reads the whole
/// [`ClusterStatus`], but the reconciler also writes status (`restoredTime`, reconcile
/// information, its own conditions); each writer sends only its own fields, so neither
/// overwrites the other's. Serialized in MOCO's field names, ready to be a status patch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusteringStatus {
    /// Only the [`CLUSTERING_CONDITIONS`].
    pub conditions: Vec<Condition>,
    /// Ordinal of the primary.
    pub current_primary_index: u32,
    /// Number of ready Pods, primary included.
    pub synced_replicas: u32,
    /// `errantReplicaList.len()`.
    pub errant_replicas: u32,
    /// Ordinals with errant transactions.
    pub errant_replica_list: Vec<u32>,
    /// Set once the initial clone from the external source finished.
    pub cloned: bool,
    /// Instances `0..n` acknowledge semi-sync commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync_members: Option<u32>,
    /// The fewest acknowledgements an acknowledged commit may have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semi_sync_min_acks: Option<u32>,
}

impl ClusteringStatus {
    /// The clustering-owned part of `status`.
    pub fn of(status: &ClusterStatus) -> Self {
        ClusteringStatus {
            conditions: status
                .conditions
                .iter()
                .filter(|c| CLUSTERING_CONDITIONS.contains(&c.type_.as_str()))
                .cloned()
                .collect(),
            current_primary_index: status.current_primary_index,
            synced_replicas: status.synced_replicas,
            errant_replicas: status.errant_replicas,
            errant_replica_list: status.errant_replica_list.clone(),
            cloned: status.cloned,
            semi_sync_members: status.semi_sync_members,
            semi_sync_min_acks: status.semi_sync_min_acks,
        }
    }

    /// Writes these fields into `status` and leaves the others alone: clustering conditions
    /// are replaced by type (added where missing), other conditions and `restoredTime` stay.
    pub fn merge_into(&self, status: &mut ClusterStatus) {
        for c in &self.conditions {
            match status.conditions.iter_mut().find(|o| o.type_ == c.type_) {
                Some(old) => *old = c.clone(),
                None => status.conditions.push(c.clone()),
            }
        }
        status.current_primary_index = self.current_primary_index;
        status.synced_replicas = self.synced_replicas;
        status.errant_replicas = self.errant_replicas;
        status.errant_replica_list = self.errant_replica_list.clone();
        status.cloned = self.cloned;
        status.semi_sync_members = self.semi_sync_members;
        status.semi_sync_min_acks = self.semi_sync_min_acks;
    }
}

/// The facts of one round that the status is computed from.
#[derive(Clone, Debug)]
pub struct StatusInputs<'a> {
    /// The previous status.
    pub old: &'a ClusterStatus,
    /// The decided state.
    pub state: ClusterState,
    /// Whether the primary can commit now; `Available` requires it (MOCO does not check this,
    /// see docs/clustering.md).
    pub primary_can_commit: bool,
    /// Why it cannot, when it cannot.
    pub write_block_reason: Option<String>,
    /// Ordinals found errant this round (already merged with memory when the primary could
    /// not be asked).
    pub errant: &'a [u32],
    /// Number of ready Pods.
    pub ready_pods: u32,
    /// Whether an external source is configured.
    pub has_external_source: bool,
    /// Observation time.
    pub now: Timestamp,
}

/// Computes the next status from the previous one. Pure; `lastTransitionTime` moves only when
/// a condition's status value changes.
pub fn next_status(input: &StatusInputs<'_>) -> ClusterStatus {
    let mut s = input.old.clone();
    let state = input.state;
    let name = state.as_str();
    let msg = format!("the current state is {name}");
    s.set_condition(
        condition_type::INITIALIZED,
        ConditionStatus::from_bool(!matches!(
            state,
            ClusterState::Cloning | ClusterState::Restoring
        )),
        name,
        msg.clone(),
        input.now,
    );
    let serving = matches!(state, ClusterState::Healthy | ClusterState::Degraded);
    let available = serving && input.primary_can_commit;
    let (reason, message) = match (&input.write_block_reason, serving) {
        (Some(why), true) if !input.primary_can_commit => ("WriteBlocked", why.clone()),
        _ => (name, msg.clone()),
    };
    s.set_condition(
        condition_type::AVAILABLE,
        ConditionStatus::from_bool(available),
        reason,
        message,
        input.now,
    );
    s.set_condition(
        condition_type::HEALTHY,
        ConditionStatus::from_bool(state == ClusterState::Healthy),
        name,
        msg,
        input.now,
    );
    s.set_condition(
        condition_type::CLUSTERING_ACTIVE,
        ConditionStatus::True,
        "ClusteringActive",
        "clustering is active".to_owned(),
        input.now,
    );
    let mut errant = input.errant.to_vec();
    errant.sort_unstable();
    errant.dedup();
    s.errant_replicas = u32::try_from(errant.len()).unwrap_or(u32::MAX);
    s.errant_replica_list = errant;
    s.synced_replicas = input.ready_pods;
    if input.has_external_source && state != ClusterState::Cloning {
        s.cloned = true;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The leaving instances may go only once the engine recorded the new member count and
    /// the primary is not among them; without a record they stay.
    #[test]
    fn leaving_instances_go_only_when_recorded_and_the_primary_stays() {
        let status = |primary: u32, members: Option<u32>| ClusterStatus {
            current_primary_index: primary,
            semi_sync_members: members,
            ..ClusterStatus::default()
        };
        // (primary, members, replicas) → may go
        for (primary, members, replicas, want) in [
            (0, Some(3), 3, true),
            (2, Some(3), 3, true),
            (0, Some(1), 3, true),
            (3, Some(3), 3, false),
            (4, Some(3), 3, false),
            (0, Some(4), 3, false),
            (0, Some(5), 3, false),
            (0, None, 3, false),
        ] {
            assert_eq!(
                status(primary, members).leaving_may_go(replicas),
                want,
                "primary {primary} members {members:?} replicas {replicas}"
            );
        }
    }

    /// The clustering loop's write keeps the reconciler's fields: a foreign condition and
    /// `restoredTime` survive, clustering conditions are replaced, and nothing foreign leaks
    /// into what the loop sends.
    #[test]
    fn clustering_status_writes_only_its_fields() {
        let t = Timestamp(100);
        let cond = |type_: &str, status| Condition {
            type_: type_.to_owned(),
            status,
            reason: "r".to_owned(),
            message: String::new(),
            last_transition_time: t,
        };
        let mut stored = ClusterStatus {
            conditions: vec![
                cond("ReconcileSuccess", ConditionStatus::True),
                cond(condition_type::HEALTHY, ConditionStatus::False),
            ],
            restored_time: Some(Timestamp(42)),
            ..ClusterStatus::default()
        };
        let mut decided = stored.clone();
        decided.conditions = vec![
            cond(condition_type::HEALTHY, ConditionStatus::True),
            cond(condition_type::AVAILABLE, ConditionStatus::True),
            cond("ReconcileSuccess", ConditionStatus::False),
        ];
        decided.current_primary_index = 2;
        decided.errant_replica_list = vec![1];
        decided.errant_replicas = 1;
        decided.synced_replicas = 3;
        decided.cloned = true;
        decided.restored_time = None;
        let patch = ClusteringStatus::of(&decided);
        assert!(
            patch
                .conditions
                .iter()
                .all(|c| c.type_ != "ReconcileSuccess"),
            "{patch:?}"
        );
        patch.merge_into(&mut stored);
        assert_eq!(stored.restored_time, Some(Timestamp(42)));
        // The reconciler's condition kept its value; the loop's were replaced.
        for type_ in [
            "ReconcileSuccess",
            condition_type::HEALTHY,
            condition_type::AVAILABLE,
        ] {
            let status = stored.condition(type_).map(|c| c.status);
            assert_eq!(status, Some(ConditionStatus::True), "{type_}");
        }
        assert_eq!(stored.current_primary_index, 2);
        assert_eq!(stored.errant_replica_list, vec![1]);
        assert_eq!(stored.errant_replicas, 1);
        assert_eq!(stored.synced_replicas, 3);
        assert!(stored.cloned);
        assert_eq!(ClusteringStatus::of(&stored), patch);
    }

    fn inputs<'a>(
        old: &'a ClusterStatus,
        state: ClusterState,
        errant: &'a [u32],
    ) -> StatusInputs<'a> {
        StatusInputs {
            old,
            state,
            primary_can_commit: true,
            write_block_reason: None,
            errant,
            ready_pods: 3,
            has_external_source: false,
            now: Timestamp(1000),
        }
    }

    fn status_of(s: &ClusterStatus, t: &str) -> ConditionStatus {
        s.condition(t).map(|c| c.status).unwrap()
    }

    #[test]
    fn conditions_follow_the_state() {
        let old = ClusterStatus::default();
        for (state, init, avail, healthy) in [
            (ClusterState::Healthy, true, true, true),
            (ClusterState::Degraded, true, true, false),
            (ClusterState::Cloning, false, false, false),
            (ClusterState::Restoring, false, false, false),
            (ClusterState::Failed, true, false, false),
            (ClusterState::Lost, true, false, false),
            (ClusterState::Offline, true, false, false),
            (ClusterState::Incomplete, true, false, false),
        ] {
            let s = next_status(&inputs(&old, state, &[]));
            assert_eq!(
                status_of(&s, condition_type::INITIALIZED),
                ConditionStatus::from_bool(init),
                "{state}"
            );
            assert_eq!(
                status_of(&s, condition_type::AVAILABLE),
                ConditionStatus::from_bool(avail),
                "{state}"
            );
            assert_eq!(
                status_of(&s, condition_type::HEALTHY),
                ConditionStatus::from_bool(healthy),
                "{state}"
            );
            assert_eq!(
                status_of(&s, condition_type::CLUSTERING_ACTIVE),
                ConditionStatus::True
            );
            let h = s.condition(condition_type::HEALTHY).unwrap();
            assert_eq!(h.reason, state.as_str());
            assert_eq!(h.message, format!("the current state is {state}"));
        }
    }

    #[test]
    fn errant_list_replaces_the_old_one_and_counts() {
        let old = ClusterStatus {
            errant_replica_list: vec![1],
            errant_replicas: 1,
            ..ClusterStatus::default()
        };
        let s = next_status(&inputs(&old, ClusterState::Degraded, &[2, 2]));
        assert_eq!(s.errant_replica_list, vec![2]);
        assert_eq!(s.errant_replicas, 1);
        let s = next_status(&inputs(&s, ClusterState::Healthy, &[]));
        assert!(s.errant_replica_list.is_empty());
        assert_eq!(s.errant_replicas, 0);
    }

    #[test]
    fn blocked_writes_make_the_cluster_unavailable() {
        let old = ClusterStatus::default();
        let mut i = inputs(&old, ClusterState::Healthy, &[]);
        i.primary_can_commit = false;
        i.write_block_reason = Some("no ACKs".into());
        let s = next_status(&i);
        let a = s.condition(condition_type::AVAILABLE).unwrap();
        assert_eq!(a.status, ConditionStatus::False);
        assert_eq!(a.reason, "WriteBlocked");
        assert_eq!(
            status_of(&s, condition_type::HEALTHY),
            ConditionStatus::True
        );
    }

    /// A reason without a block (a caller that knows the primary commits anyway) does not
    /// turn the cluster's reason into `WriteBlocked` (a survivor of the mutation run).
    #[test]
    fn a_block_reason_counts_only_when_the_primary_cannot_commit() {
        let old = ClusterStatus::default();
        let mut i = inputs(&old, ClusterState::Healthy, &[]);
        i.write_block_reason = Some("no ACKs".into());
        let s = next_status(&i);
        let a = s.condition(condition_type::AVAILABLE).unwrap();
        assert_eq!(a.status, ConditionStatus::True);
        assert_eq!(a.reason, "Healthy");
    }

    #[test]
    fn cloned_is_set_once_cloning_ends_and_kept() {
        let old = ClusterStatus::default();
        let mut i = inputs(&old, ClusterState::Cloning, &[]);
        i.has_external_source = true;
        assert!(!next_status(&i).cloned);
        i.state = ClusterState::Incomplete;
        let s = next_status(&i);
        assert!(s.cloned);
        let mut j = inputs(&s, ClusterState::Cloning, &[]);
        j.has_external_source = true;
        assert!(next_status(&j).cloned);
    }

    #[test]
    fn transition_time_moves_only_on_change() {
        let old = ClusterStatus::default();
        let s1 = next_status(&inputs(&old, ClusterState::Healthy, &[]));
        let mut i = inputs(&s1, ClusterState::Degraded, &[]);
        i.now = Timestamp(2000);
        let s2 = next_status(&i);
        let t = |s: &ClusterStatus, c: &str| s.condition(c).unwrap().last_transition_time;
        assert_eq!(t(&s2, condition_type::AVAILABLE), Timestamp(1000));
        assert_eq!(t(&s2, condition_type::HEALTHY), Timestamp(2000));
        assert_eq!(
            s2.condition(condition_type::AVAILABLE).unwrap().reason,
            "Degraded"
        );
    }
}
