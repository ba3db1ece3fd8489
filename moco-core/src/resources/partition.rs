//! The health-gated rollout of a Pod-template change: MOCO's partitioned rollout, and past it.
//!
//! Left to itself, a StatefulSet rolls a new Pod template from the highest ordinal down, the
//! next Pod as soon as the previous one is Ready, whether or not its replica caught up and the
//! cluster is healthy, and the primary whenever its turn comes. MOCO (since v0.32) holds the
//! rollout with the RollingUpdate partition: its webhook sets `partition = replicas` on every
//! spec change ([`admit_partition`]), and a controller lowers it by one only while the cluster
//! is healthy and every Pod already updated is Ready and available ([`decide_partition`]).
//!
//! Past MOCO: Pods are ordered by ordinal (MOCO sorts names, so `moco-x-10` comes before
//! `moco-x-2`); an updated Pod must also have caught up (its replica executed what the primary
//! had when it came back); the primary is never restarted as the primary: when its ordinal is
//! next, the cluster is switched over first, to an updated replica when there is one, so the
//! write gap of a rollout is one switchover; and an updated Pod that does not become Ready
//! within a limit is reported as stalled, naming it and why, while every other Pod stays on
//! the old revision.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the StatefulSet webhook sees of a write (MOCO's `/mutate-apps-v1-statefulset`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartitionAdmission {
    /// `spec.replicas` of the object written.
    pub replicas: u32,
    /// Its `spec.updateStrategy.rollingUpdate.partition`, if set.
    #[serde(default)]
    pub partition: Option<u32>,
    /// An update whose spec differs from the stored object's only in the partition (the
    /// partition controller's own write); false on create.
    #[serde(default)]
    pub only_partition_changed: bool,
    /// MOCO's `moco.cybozu.com/force-rolling-update: "true"` on the StatefulSet.
    #[serde(default)]
    pub force_rolling_update: bool,
}

/// What the webhook does to the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "partition", rename_all = "camelCase")]
pub enum AdmittedPartition {
    /// Leave the update strategy as written.
    Keep,
    /// Hold every Pod on its revision: `partition` set to this (the replicas).
    Hold {
        /// The partition to set.
        to: u32,
    },
    /// Forced: remove `rollingUpdate`, so the StatefulSet controller rolls on its own.
    Unmanaged,
}

/// MOCO's rule for a StatefulSet write: forced ⇒ no partition; the partition controller's own
/// change of the partition ⇒ kept; any other write (a new object, a changed spec) ⇒ every Pod
/// held until the controller lets them go one by one.
pub fn admit_partition(a: &PartitionAdmission) -> AdmittedPartition {
    if a.force_rolling_update {
        return AdmittedPartition::Unmanaged;
    }
    if a.only_partition_changed && a.partition.is_some() {
        return AdmittedPartition::Keep;
    }
    if a.partition == Some(a.replicas) {
        return AdmittedPartition::Keep;
    }
    AdmittedPartition::Hold { to: a.replicas }
}

/// One Pod of the StatefulSet as the partition controller sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartitionPod {
    /// The ordinal.
    pub index: u32,
    /// Its `controller-revision-hash` is the StatefulSet's update revision.
    pub updated: bool,
    /// It has a deletion timestamp.
    #[serde(default)]
    pub terminating: bool,
    /// Its `Ready` condition is true and every container (init containers included) is ready.
    #[serde(default)]
    pub ready: bool,
    /// Seconds since its `Ready` condition last changed (to true when `ready`, to false or
    /// since its creation otherwise).
    #[serde(default)]
    pub seconds_in_condition: u64,
    /// Its replica executed what the primary had when the Pod came back (the primary
    /// itself counts as caught up). Unknown counts as not.
    #[serde(default)]
    pub caught_up: bool,
    /// A container of it failed (its last run ended with a non-zero exit, or it waits in a
    /// back-off or on a configuration error): it is not merely slow to start.
    #[serde(default)]
    pub failing: bool,
    /// Why it is not Ready, as its containers tell (a waiting reason, the last exit code and
    /// message); empty when unknown.
    #[serde(default)]
    pub not_ready_reason: String,
}

/// Everything the partition controller decides from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartitionInput {
    /// `spec.replicas` of the StatefulSet.
    pub replicas: u32,
    /// Its current partition (`None`: no rollingUpdate, the rollout is not managed).
    #[serde(default)]
    pub partition: Option<u32>,
    /// `status.updatedReplicas`.
    #[serde(default)]
    pub updated_replicas: u32,
    /// `status.currentRevision` is `status.updateRevision`: the last rollout completed (every
    /// Pod updated and Ready once), so a Pod that is not Ready now is not the rollout's.
    #[serde(default)]
    pub rollout_complete: bool,
    /// The StatefulSet controller observed the current spec (`status.observedGeneration` is
    /// the generation) and the cluster's spec was reconciled (its generation is the one
    /// `status.reconcileInfo` recorded): the update revision is the final one.
    #[serde(default)]
    pub settled: bool,
    /// MOCO's force annotation is set.
    #[serde(default)]
    pub force_rolling_update: bool,
    /// The cluster's `Healthy` condition is true.
    #[serde(default)]
    pub cluster_healthy: bool,
    /// `status.currentPrimaryIndex`.
    #[serde(default)]
    pub primary: Option<u32>,
    /// How long an updated Pod must have been Ready (MOCO: 5 s, the `minReadySeconds`).
    #[serde(default)]
    pub min_ready_seconds: u64,
    /// How long an updated Pod may stay not Ready before the rollout is reported stalled
    /// (one whose container failed is reported at once).
    #[serde(default)]
    pub stall_seconds: u64,
    /// The Pods, in any order.
    #[serde(default)]
    pub pods: Vec<PartitionPod>,
}

/// Why the controller does not lower the partition now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum RolloutWait {
    /// The StatefulSet or the cluster's spec is not settled yet.
    NotSettled,
    /// Not every Pod exists.
    PodsMissing {
        /// Pods seen.
        found: u32,
    },
    /// An updated Pod is not yet Ready, available or caught up.
    PodNotReady {
        /// Its ordinal.
        index: u32,
        /// What it lacks.
        lacks: Lacks,
    },
    /// The cluster is not Healthy.
    ClusterNotHealthy,
}

/// What a Pod already let go still lacks before the next one may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "lacks", rename_all = "camelCase")]
pub enum Lacks {
    /// It runs the old revision (the StatefulSet controller has not replaced it yet).
    UpdateRevision,
    /// It is terminating.
    Terminating,
    /// It is not Ready.
    Ready,
    /// It has been Ready for less than the minimum: the wait ends by itself.
    Available {
        /// The minimum (`minReadySeconds`).
        needed_seconds: u64,
        /// How long it has been Ready.
        ready_seconds: u64,
    },
    /// Its replica has not executed what the primary had when it came back: the wait ends
    /// when a clustering round sees it has.
    CatchUp,
}

impl std::fmt::Display for Lacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lacks::UpdateRevision => f.write_str("the update revision"),
            Lacks::Terminating => f.write_str("to finish terminating"),
            Lacks::Ready => f.write_str("Ready"),
            Lacks::Available {
                needed_seconds,
                ready_seconds,
            } => write!(
                f,
                "to be Ready for {needed_seconds} s (Ready for {ready_seconds} s)"
            ),
            Lacks::CatchUp => f.write_str("to catch up with the primary"),
        }
    }
}

/// The partition controller's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum PartitionDecision {
    /// Nothing to roll: every Pod runs the update revision, or the rollout is not managed.
    Idle,
    /// Not now: look again later.
    Wait(RolloutWait),
    /// Lower the partition by one: the StatefulSet controller rolls Pod `to`.
    Lower {
        /// The partition now.
        from: u32,
        /// The new partition (the ordinal rolled next).
        to: u32,
    },
    /// The next Pod is the primary's: switch over to `to` first; the partition is lowered once
    /// the primary moved.
    SwitchOver {
        /// The primary's ordinal.
        from: u32,
        /// The replica to promote.
        to: u32,
    },
    /// An updated Pod stayed not Ready longer than the limit: the rollout stops there (every
    /// Pod below the partition keeps its revision) until the spec changes again.
    Stalled {
        /// Its ordinal.
        index: u32,
        /// Its containers' account of why, or "not Ready for N s".
        reason: String,
    },
}

/// Decides whether the partition goes down by one now (see the module docs).
pub fn decide_partition(input: &PartitionInput) -> PartitionDecision {
    let Some(partition) = input.partition else {
        return PartitionDecision::Idle;
    };
    if input.force_rolling_update || input.rollout_complete || input.replicas == 0 {
        return PartitionDecision::Idle;
    }
    if !input.settled {
        return PartitionDecision::Wait(RolloutWait::NotSettled);
    }
    let mut pods: Vec<&PartitionPod> = input
        .pods
        .iter()
        .filter(|p| p.index < input.replicas)
        .collect();
    pods.sort_by_key(|p| p.index);
    pods.dedup_by_key(|p| p.index);
    let found = u32::try_from(pods.len()).unwrap_or(u32::MAX);
    if found != input.replicas {
        return PartitionDecision::Wait(RolloutWait::PodsMissing { found });
    }
    // The partition may exceed the replicas (scaled down since it was set): every Pod is
    // then below it.
    let partition = partition.min(input.replicas);
    for pod in pods.iter().filter(|p| p.index >= partition).rev() {
        if let Some(lacks) = not_rolled(pod, input.min_ready_seconds) {
            let stalled = pod.failing || pod.seconds_in_condition >= input.stall_seconds;
            if !pod.ready && !pod.terminating && stalled {
                return PartitionDecision::Stalled {
                    index: pod.index,
                    reason: stall_reason(pod),
                };
            }
            return PartitionDecision::Wait(RolloutWait::PodNotReady {
                index: pod.index,
                lacks,
            });
        }
    }
    // Every Pod is let go (the StatefulSet controller finishes), or none needs it (MOCO's
    // `updatedReplicas == replicas`).
    if partition == 0 || input.updated_replicas >= input.replicas {
        return PartitionDecision::Idle;
    }
    let target = partition - 1;
    let Some(next) = pods.iter().find(|p| p.index == target) else {
        return PartitionDecision::Wait(RolloutWait::PodsMissing { found });
    };
    // Already on the update revision (a Pod re-created since), or broken anyway: rolling it
    // cannot make the cluster worse (MOCO rolls a Pod that is not Ready whatever the health).
    if next.updated || !next.ready {
        return lower(partition);
    }
    if !input.cluster_healthy {
        return PartitionDecision::Wait(RolloutWait::ClusterNotHealthy);
    }
    if input.primary == Some(target) {
        let rolled = pods
            .iter()
            .filter(|p| p.index >= partition)
            .map(|p| p.index)
            .max();
        let standby = || {
            pods.iter()
                .filter(|p| p.index != target && p.ready && !p.terminating && p.caught_up)
                .map(|p| p.index)
                .max()
        };
        // An updated replica when there is one; otherwise any ready one (the primary is then
        // the first Pod rolled and will be switched to again later); a single instance is
        // restarted as it is.
        if let Some(to) = rolled.or_else(standby) {
            return PartitionDecision::SwitchOver { from: target, to };
        }
    }
    lower(partition)
}

fn lower(partition: u32) -> PartitionDecision {
    PartitionDecision::Lower {
        from: partition,
        to: partition - 1,
    }
}

/// What an already rolled Pod still lacks before the next one may go, if anything.
fn not_rolled(pod: &PartitionPod, min_ready_seconds: u64) -> Option<Lacks> {
    if !pod.updated {
        Some(Lacks::UpdateRevision)
    } else if pod.terminating {
        Some(Lacks::Terminating)
    } else if !pod.ready {
        Some(Lacks::Ready)
    } else if pod.seconds_in_condition < min_ready_seconds {
        Some(Lacks::Available {
            needed_seconds: min_ready_seconds,
            ready_seconds: pod.seconds_in_condition,
        })
    } else if !pod.caught_up {
        Some(Lacks::CatchUp)
    } else {
        None
    }
}

fn stall_reason(pod: &PartitionPod) -> String {
    if pod.not_ready_reason.is_empty() {
        format!("not Ready for {} s", pod.seconds_in_condition)
    } else {
        format!(
            "not Ready for {} s: {}",
            pod.seconds_in_condition, pod.not_ready_reason
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(index: u32, updated: bool) -> PartitionPod {
        PartitionPod {
            index,
            updated,
            terminating: false,
            ready: true,
            seconds_in_condition: 60,
            caught_up: true,
            failing: false,
            not_ready_reason: String::new(),
        }
    }

    /// A healthy cluster of `n` whose primary is 0, rolled down to `partition`.
    fn rolling(n: u32, partition: u32) -> PartitionInput {
        PartitionInput {
            replicas: n,
            partition: Some(partition),
            updated_replicas: n - partition,
            rollout_complete: false,
            settled: true,
            force_rolling_update: false,
            cluster_healthy: true,
            primary: Some(0),
            min_ready_seconds: 5,
            stall_seconds: 300,
            pods: (0..n).map(|i| pod(i, i >= partition)).collect(),
        }
    }

    #[test]
    fn the_webhook_holds_every_pod_on_any_spec_change_and_keeps_the_controllers_partition() {
        let write = |partition, only, force| PartitionAdmission {
            replicas: 3,
            partition,
            only_partition_changed: only,
            force_rolling_update: force,
        };
        assert_eq!(
            admit_partition(&write(None, false, false)),
            AdmittedPartition::Hold { to: 3 }
        );
        assert_eq!(
            admit_partition(&write(Some(1), false, false)),
            AdmittedPartition::Hold { to: 3 }
        );
        assert_eq!(
            admit_partition(&write(Some(3), false, false)),
            AdmittedPartition::Keep
        );
        assert_eq!(
            admit_partition(&write(Some(1), true, false)),
            AdmittedPartition::Keep
        );
        // Removing the partition is not the controller's write.
        assert_eq!(
            admit_partition(&write(None, true, false)),
            AdmittedPartition::Hold { to: 3 }
        );
        for (p, only) in [(None, false), (Some(1), true), (Some(3), false)] {
            assert_eq!(
                admit_partition(&write(p, only, true)),
                AdmittedPartition::Unmanaged
            );
        }
    }

    #[test]
    fn a_healthy_rollout_goes_down_one_pod_at_a_time_from_the_highest_ordinal() {
        assert_eq!(
            decide_partition(&rolling(3, 3)),
            PartitionDecision::Lower { from: 3, to: 2 }
        );
        assert_eq!(
            decide_partition(&rolling(3, 2)),
            PartitionDecision::Lower { from: 2, to: 1 }
        );
    }

    #[test]
    fn nothing_is_done_when_unmanaged_forced_complete_or_at_zero() {
        let mut i = rolling(3, 2);
        i.partition = None;
        assert_eq!(decide_partition(&i), PartitionDecision::Idle);
        let mut i = rolling(3, 2);
        i.force_rolling_update = true;
        assert_eq!(decide_partition(&i), PartitionDecision::Idle);
        let mut i = rolling(3, 2);
        i.updated_replicas = 3;
        assert_eq!(decide_partition(&i), PartitionDecision::Idle);
        assert_eq!(decide_partition(&rolling(3, 0)), PartitionDecision::Idle);
        // A completed rollout: a Pod down later is not the rollout's.
        let mut done = rolling(3, 0);
        done.rollout_complete = true;
        done.pods[1].ready = false;
        done.pods[1].seconds_in_condition = 3600;
        assert_eq!(decide_partition(&done), PartitionDecision::Idle);
        done.rollout_complete = false;
        assert!(matches!(
            decide_partition(&done),
            PartitionDecision::Stalled { index: 1, .. }
        ));
    }

    #[test]
    fn an_unsettled_spec_or_a_missing_pod_waits() {
        let mut i = rolling(3, 2);
        i.settled = false;
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Wait(RolloutWait::NotSettled)
        );
        let mut i = rolling(3, 2);
        i.pods.remove(1);
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Wait(RolloutWait::PodsMissing { found: 2 })
        );
        // A Pod listed twice is one Pod.
        let mut i = rolling(3, 2);
        i.pods[1] = pod(2, true);
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Wait(RolloutWait::PodsMissing { found: 2 })
        );
    }

    #[test]
    fn a_rolled_pod_must_be_updated_ready_available_and_caught_up() {
        type Break = fn(&mut PartitionPod);
        let cases: [(Break, Lacks, &str); 5] = [
            (
                |p| p.updated = false,
                Lacks::UpdateRevision,
                "the update revision",
            ),
            (
                |p| p.terminating = true,
                Lacks::Terminating,
                "to finish terminating",
            ),
            (
                |p| {
                    p.ready = false;
                    p.seconds_in_condition = 10;
                },
                Lacks::Ready,
                "Ready",
            ),
            (
                |p| p.seconds_in_condition = 4,
                Lacks::Available {
                    needed_seconds: 5,
                    ready_seconds: 4,
                },
                "to be Ready for 5 s (Ready for 4 s)",
            ),
            (
                |p| p.caught_up = false,
                Lacks::CatchUp,
                "to catch up with the primary",
            ),
        ];
        for (brk, lacks, text) in cases {
            let mut i = rolling(3, 1);
            brk(&mut i.pods[1]);
            assert_eq!(
                decide_partition(&i),
                PartitionDecision::Wait(RolloutWait::PodNotReady { index: 1, lacks })
            );
            assert_eq!(lacks.to_string(), text);
        }
        // At the minimum it may go.
        let mut i = rolling(3, 2);
        i.pods[2].seconds_in_condition = 5;
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Lower { from: 2, to: 1 }
        );
    }

    #[test]
    fn an_updated_pod_not_ready_past_the_limit_stalls_the_rollout_naming_it() {
        let mut i = rolling(3, 2);
        i.pods[2].ready = false;
        i.pods[2].seconds_in_condition = 299;
        assert!(matches!(
            decide_partition(&i),
            PartitionDecision::Wait(RolloutWait::PodNotReady { index: 2, .. })
        ));
        i.pods[2].seconds_in_condition = 300;
        i.pods[2].not_ready_reason =
            "mysqld exited 1: unknown variable 'innodb_bogus=1'".to_owned();
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Stalled {
                index: 2,
                reason: "not Ready for 300 s: mysqld exited 1: unknown variable 'innodb_bogus=1'"
                    .to_owned()
            }
        );
        i.pods[2].not_ready_reason.clear();
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Stalled {
                index: 2,
                reason: "not Ready for 300 s".to_owned()
            }
        );
        // A Pod whose container failed is reported at once; one that is only slow is not.
        i.pods[2].seconds_in_condition = 12;
        i.pods[2].not_ready_reason = "mysqld: exit code 1".to_owned();
        assert!(matches!(
            decide_partition(&i),
            PartitionDecision::Wait(RolloutWait::PodNotReady { index: 2, .. })
        ));
        i.pods[2].failing = true;
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Stalled {
                index: 2,
                reason: "not Ready for 12 s: mysqld: exit code 1".to_owned()
            }
        );
    }

    #[test]
    fn the_next_pod_waits_for_a_healthy_cluster_unless_it_is_broken_or_already_updated() {
        let mut i = rolling(3, 2);
        i.cluster_healthy = false;
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Wait(RolloutWait::ClusterNotHealthy)
        );
        let mut broken = i.clone();
        broken.pods[1].ready = false;
        assert_eq!(
            decide_partition(&broken),
            PartitionDecision::Lower { from: 2, to: 1 }
        );
        let mut updated = i.clone();
        updated.pods[1].updated = true;
        assert_eq!(
            decide_partition(&updated),
            PartitionDecision::Lower { from: 2, to: 1 }
        );
    }

    #[test]
    fn the_primary_is_switched_over_to_an_updated_replica_before_its_pod_is_rolled() {
        assert_eq!(
            decide_partition(&rolling(3, 1)),
            PartitionDecision::SwitchOver { from: 0, to: 2 }
        );
        // Once moved, the old primary is rolled as a replica.
        let mut i = rolling(3, 1);
        i.primary = Some(2);
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Lower { from: 1, to: 0 }
        );
        // The primary in the middle: rolled after a switchover to the updated Pod 2.
        let mut i = rolling(3, 2);
        i.primary = Some(1);
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::SwitchOver { from: 1, to: 2 }
        );
    }

    #[test]
    fn a_primary_rolled_first_is_switched_to_a_ready_caught_up_replica() {
        let mut i = rolling(3, 3);
        i.primary = Some(2);
        i.pods[1].caught_up = false;
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::SwitchOver { from: 2, to: 0 }
        );
        // No replica to take over: a single instance is rolled as it is.
        let mut single = rolling(1, 1);
        single.primary = Some(0);
        assert_eq!(
            decide_partition(&single),
            PartitionDecision::Lower { from: 1, to: 0 }
        );
        // Nor when no replica is ready and caught up.
        i.pods[0].ready = false;
        i.pods[0].caught_up = false;
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Lower { from: 3, to: 2 }
        );
    }

    #[test]
    fn pods_are_ordered_by_ordinal_not_by_name() {
        // Eleven instances rolled down to 10: Pod 9 is next, though "moco-x-10" sorts before
        // "moco-x-9" by name (MOCO's order).
        let mut i = rolling(11, 10);
        i.pods.reverse();
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Lower { from: 10, to: 9 }
        );
        let mut i = rolling(11, 10);
        i.pods[10].ready = false;
        i.pods[10].seconds_in_condition = 1;
        assert!(matches!(
            decide_partition(&i),
            PartitionDecision::Wait(RolloutWait::PodNotReady { index: 10, .. })
        ));
    }

    #[test]
    fn a_pod_beyond_the_replicas_is_not_the_rollouts() {
        // Scaled down from 4: Pod 3 may still exist (leaving) on the old revision.
        let mut i = rolling(3, 3);
        i.pods.push(PartitionPod {
            ready: false,
            seconds_in_condition: 3600,
            ..pod(3, true)
        });
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Lower { from: 3, to: 2 }
        );
    }

    #[test]
    fn a_partition_above_the_replicas_counts_as_the_replicas() {
        let mut i = rolling(3, 3);
        i.partition = Some(5);
        assert_eq!(
            decide_partition(&i),
            PartitionDecision::Lower { from: 3, to: 2 }
        );
    }
}
