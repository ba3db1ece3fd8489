//! What the partition controller decides from, read off the StatefulSet, its Pods and the
//! cluster: pure functions, so that each rule can be checked on plain objects.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};
use moco_api::annotations::is_true;
use moco_api::labels::ANNOTATION_FORCE_ROLLING_UPDATE;
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::resources::{Incarnation, PartitionInput, PartitionPod};
use moco_core::time::Timestamp;

/// The label the StatefulSet controller puts on each Pod: the revision it was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The limits of a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolloutLimits {
    /// How long an updated Pod must have been Ready (MOCO: 5 s) when the StatefulSet sets no
    /// `minReadySeconds` of its own.
    pub min_ready_seconds: u64,
    /// How long an updated Pod may be not Ready, without any container failing, before the
    /// rollout is reported stalled. mysqld may take long to start (crash recovery of a large
    /// redo log, a clone), so this only reports; the rollout waits either way.
    pub stall_seconds: u64,
}

impl Default for RolloutLimits {
    fn default() -> Self {
        RolloutLimits {
            min_ready_seconds: 5,
            stall_seconds: 900,
        }
    }
}

/// The ordinal of `pod` in the StatefulSet `sts_name` (`<sts_name>-<ordinal>`), by number:
/// `moco-db-10` is 10, after 9.
pub fn ordinal(sts_name: &str, pod: &str) -> Option<u32> {
    pod.strip_prefix(sts_name)?.strip_prefix('-')?.parse().ok()
}

fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Ready, and every container (init containers included) ready: MOCO's availability check.
fn is_ready(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    ready_condition(pod).is_some_and(|c| c.status == "True")
        && status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten())
            .all(|c| c.ready)
}

/// When the Pod's Ready condition last changed (its creation when it has none).
fn ready_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod)
        .and_then(|c| c.last_transition_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())
        .map(|t| Timestamp(t.0.as_second()))
}

/// Waiting reasons that mean a container will not start by waiting alone.
const FAILING_WAITS: [&str; 6] = [
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Whether a container of `pod` failed, and its account of why the Pod is not Ready: the
/// first container with something to say (a waiting reason, or the last exit).
fn not_ready(pod: &Pod) -> (bool, String) {
    let Some(status) = pod.status.as_ref() else {
        return (false, String::new());
    };
    let containers: Vec<&ContainerStatus> = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .filter(|c| !c.ready)
        .collect();
    let mut failing = false;
    let mut reasons = Vec::new();
    for c in containers {
        let waiting = c.state.as_ref().and_then(|s| s.waiting.as_ref());
        let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
        let now = c.state.as_ref().and_then(|s| s.terminated.as_ref());
        if let Some(t) = now.or(last).filter(|t| t.exit_code != 0) {
            failing = true;
            let message = t.message.as_deref().map(str::trim).unwrap_or_default();
            let message = last_line(message);
            reasons.push(if message.is_empty() {
                format!("{} exited {}", c.name, t.exit_code)
            } else {
                format!("{} exited {}: {message}", c.name, t.exit_code)
            });
        } else if let Some(w) = waiting.filter(|w| w.reason.is_some()) {
            let reason = w.reason.as_deref().unwrap_or_default();
            failing |= FAILING_WAITS.contains(&reason);
            reasons.push(match w.message.as_deref() {
                Some(m) if !m.is_empty() => format!("{} {reason}: {m}", c.name),
                _ => format!("{} {reason}", c.name),
            });
        }
    }
    (failing, reasons.join("; "))
}

/// The last line of a log tail that names an error, or its last line (mysqld prints the
/// option it refused a few lines before "Aborting").
fn last_line(message: &str) -> &str {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|l| l.contains("[ERROR]") && !l.contains("Aborting"))
        .or(lines.last())
        .copied()
        .unwrap_or_default()
}

/// The Pods as the catch-up tracker sees them: which incarnation each is.
pub fn incarnations(sts_name: &str, pods: &[Pod], now: Timestamp) -> Vec<Incarnation> {
    pods.iter()
        .filter_map(|p| {
            let index = ordinal(sts_name, p.metadata.name.as_deref()?)?;
            let since = ready_since(p).unwrap_or(now);
            Some(Incarnation {
                index,
                key: format!(
                    "{}@{}",
                    p.metadata.uid.as_deref().unwrap_or_default(),
                    since.0
                ),
                ready: is_ready(p) && p.metadata.deletion_timestamp.is_none(),
                ready_since: since,
            })
        })
        .collect()
}

/// Everything `moco_core::resources::decide_partition` needs. `cluster` is the StatefulSet's
/// MySQLCluster (None: not found, which leaves the rollout unsettled); `caught_up` the
/// ordinals the catch-up tracker vouches for.
pub fn partition_input(
    sts: &StatefulSet,
    pods: &[Pod],
    cluster: Option<&MySQLCluster>,
    caught_up: &BTreeSet<u32>,
    now: Timestamp,
    limits: RolloutLimits,
) -> PartitionInput {
    let name = sts.metadata.name.as_deref().unwrap_or_default();
    let spec = sts.spec.as_ref();
    let status = sts.status.as_ref();
    let update_revision = status.and_then(|s| s.update_revision.as_deref());
    let observed = status.and_then(|s| s.observed_generation) == sts.metadata.generation;
    let reconciled = cluster.is_some_and(|c| {
        c.status.as_ref().map(|s| s.reconcile_info.generation) == c.metadata.generation
    });
    let count = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let cluster_status = cluster.and_then(|c| c.status.as_ref());
    PartitionInput {
        replicas: count(spec.and_then(|s| s.replicas).or(Some(1))),
        partition: spec
            .and_then(|s| s.update_strategy.as_ref())
            .filter(|u| u.type_.as_deref().is_none_or(|t| t == "RollingUpdate"))
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .and_then(|p| u32::try_from(p).ok()),
        updated_replicas: count(status.and_then(|s| s.updated_replicas)),
        rollout_complete: update_revision.is_some()
            && status.and_then(|s| s.current_revision.as_deref()) == update_revision,
        settled: observed && reconciled,
        force_rolling_update: is_true(&sts.metadata, ANNOTATION_FORCE_ROLLING_UPDATE),
        cluster_healthy: cluster_status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Healthy" && c.status == "True")
        }),
        primary: cluster_status.and_then(|s| u32::try_from(s.current_primary_index).ok()),
        min_ready_seconds: spec
            .and_then(|s| s.min_ready_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .filter(|&s| s > 0)
            .unwrap_or(limits.min_ready_seconds),
        stall_seconds: limits.stall_seconds,
        pods: pods
            .iter()
            .filter_map(|p| {
                let index = ordinal(name, p.metadata.name.as_deref()?)?;
                let ready = is_ready(p);
                let (failing, not_ready_reason) = if ready {
                    (false, String::new())
                } else {
                    not_ready(p)
                };
                let since = ready_since(p).unwrap_or(now);
                Some(PartitionPod {
                    index,
                    updated: update_revision.is_some()
                        && p.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(REVISION_LABEL))
                            .map(String::as_str)
                            == update_revision,
                    terminating: p.metadata.deletion_timestamp.is_some(),
                    ready,
                    seconds_in_condition: u64::try_from(now.0 - since.0).unwrap_or(0),
                    caught_up: caught_up.contains(&index),
                    failing,
                    not_ready_reason,
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts(partition: Option<i32>, current: &str, update: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "moco-db", "namespace": "ns", "generation": 4,
                         "annotations": {}},
            "spec": {"replicas": 3, "selector": {}, "serviceName": "moco-db",
                     "template": {},
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"partition": partition}}},
            "status": {"replicas": 3, "observedGeneration": 4, "updatedReplicas": 1,
                       "currentRevision": current, "updateRevision": update}
        }))
        .unwrap()
    }

    fn cluster(generation: i64, reconciled: i64, healthy: &str, primary: i32) -> MySQLCluster {
        serde_json::from_value(json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "ns", "generation": generation},
            "spec": {"podTemplate": {"spec": {"containers": []}}, "volumeClaimTemplates": []},
            "status": {"currentPrimaryIndex": primary,
                       "reconcileInfo": {"generation": reconciled, "reconcileVersion": 1},
                       "conditions": [{"type": "Healthy", "status": healthy, "reason": "r",
                                       "message": "", "lastTransitionTime": "2026-11-29T10:00:00Z"}]}
        }))
        .unwrap()
    }

    fn pod(index: u32, revision: &str, ready: bool, since: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("moco-db-{index}"), "uid": format!("u{index}"),
                         "labels": {REVISION_LABEL: revision},
                         "creationTimestamp": "2026-11-29T09:00:00Z"},
            "status": {
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                                "lastTransitionTime": since}],
                "containerStatuses": [{"name": "mysqld", "ready": ready, "restartCount": 0,
                                       "image": "m", "imageID": ""}]
            }
        }))
        .unwrap()
    }

    /// 2026-11-29T10:00:00Z.
    const NOW: Timestamp = Timestamp(1_795_946_400);

    #[test]
    fn ordinals_are_numbers_of_this_statefulset() {
        assert_eq!(ordinal("moco-db", "moco-db-10"), Some(10));
        assert_eq!(ordinal("moco-db", "moco-db-2"), Some(2));
        assert_eq!(ordinal("moco-db", "moco-dbx-2"), None);
        assert_eq!(ordinal("moco-db", "moco-db-x"), None);
        assert_eq!(ordinal("moco", "moco-db-1"), None);
    }

    #[test]
    fn the_input_reads_revisions_readiness_health_and_settlement() {
        let pods = [
            pod(0, "old", true, "2026-11-29T09:00:00Z"),
            pod(1, "old", true, "2026-11-29T09:00:00Z"),
            pod(2, "new", true, "2026-11-29T09:59:57Z"),
        ];
        let caught_up: BTreeSet<u32> = [0].into();
        let input = partition_input(
            &sts(Some(2), "old", "new"),
            &pods,
            Some(&cluster(7, 7, "True", 0)),
            &caught_up,
            NOW,
            RolloutLimits::default(),
        );
        assert_eq!(
            input,
            PartitionInput {
                replicas: 3,
                partition: Some(2),
                updated_replicas: 1,
                rollout_complete: false,
                settled: true,
                force_rolling_update: false,
                cluster_healthy: true,
                primary: Some(0),
                min_ready_seconds: 5,
                stall_seconds: 900,
                pods: vec![
                    PartitionPod {
                        index: 0,
                        updated: false,
                        terminating: false,
                        ready: true,
                        seconds_in_condition: 3600,
                        caught_up: true,
                        failing: false,
                        not_ready_reason: String::new(),
                    },
                    PartitionPod {
                        index: 1,
                        updated: false,
                        terminating: false,
                        ready: true,
                        seconds_in_condition: 3600,
                        caught_up: false,
                        failing: false,
                        not_ready_reason: String::new(),
                    },
                    PartitionPod {
                        index: 2,
                        updated: true,
                        terminating: false,
                        ready: true,
                        seconds_in_condition: 3,
                        caught_up: false,
                        failing: false,
                        not_ready_reason: String::new(),
                    },
                ],
            }
        );
        // The cluster's spec not reconciled yet, or missing: not settled; not healthy.
        let unsettled = |c: Option<&MySQLCluster>| {
            partition_input(
                &sts(Some(2), "old", "new"),
                &pods,
                c,
                &caught_up,
                NOW,
                RolloutLimits::default(),
            )
        };
        assert!(!unsettled(Some(&cluster(8, 7, "True", 0))).settled);
        assert!(!unsettled(None).settled);
        assert!(!unsettled(Some(&cluster(7, 7, "False", 0))).cluster_healthy);
        // The StatefulSet controller has not seen the spec yet.
        let mut s = sts(Some(2), "old", "new");
        s.metadata.generation = Some(5);
        let i = partition_input(
            &s,
            &pods,
            Some(&cluster(7, 7, "True", 0)),
            &caught_up,
            NOW,
            RolloutLimits::default(),
        );
        assert!(!i.settled);
        // Every Pod on one revision: the rollout is complete.
        let done = partition_input(
            &sts(Some(0), "new", "new"),
            &pods,
            Some(&cluster(7, 7, "True", 0)),
            &caught_up,
            NOW,
            RolloutLimits::default(),
        );
        assert!(done.rollout_complete);
    }

    #[test]
    fn a_crashing_container_names_the_error_mysqld_logged() {
        let mut p = pod(2, "new", false, "2026-11-29T09:59:00Z");
        let status = p.status.as_mut().unwrap();
        status.container_statuses = Some(vec![serde_json::from_value(json!({
            "name": "mysqld", "ready": false, "restartCount": 2, "image": "m", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                "message": "2026-11-29 9:59:30 0 [Note] Starting\n2026-11-29 9:59:30 0 [ERROR] mariadbd: unknown variable 'innodb_bogus=1'\n2026-11-29 9:59:30 0 [ERROR] Aborting\n"}}
        }))
        .unwrap()]);
        let input = partition_input(
            &sts(Some(2), "old", "new"),
            &[p],
            None,
            &BTreeSet::new(),
            NOW,
            RolloutLimits::default(),
        );
        let pod = &input.pods[0];
        assert!(pod.failing && !pod.ready);
        assert_eq!(pod.seconds_in_condition, 60);
        assert_eq!(
            pod.not_ready_reason,
            "mysqld exited 1: 2026-11-29 9:59:30 0 [ERROR] mariadbd: unknown variable 'innodb_bogus=1'"
        );
        // Only slow: waiting without a failure is not failing.
        let mut slow = pod_waiting("ContainerCreating");
        assert!(
            !partition_input(
                &sts(Some(2), "old", "new"),
                std::slice::from_mut(&mut slow),
                None,
                &BTreeSet::new(),
                NOW,
                RolloutLimits::default()
            )
            .pods[0]
                .failing
        );
        let mut pulling = pod_waiting("ImagePullBackOff");
        let i = partition_input(
            &sts(Some(2), "old", "new"),
            std::slice::from_mut(&mut pulling),
            None,
            &BTreeSet::new(),
            NOW,
            RolloutLimits::default(),
        );
        assert!(i.pods[0].failing);
        assert_eq!(i.pods[0].not_ready_reason, "mysqld ImagePullBackOff");
    }

    fn pod_waiting(reason: &str) -> Pod {
        let mut p = pod(2, "new", false, "2026-11-29T09:59:00Z");
        p.status.as_mut().unwrap().container_statuses =
            Some(vec![serde_json::from_value(json!({
            "name": "mysqld", "ready": false, "restartCount": 0, "image": "m", "imageID": "",
            "state": {"waiting": {"reason": reason}}
        }))
        .unwrap()]);
        p
    }

    #[test]
    fn an_incarnation_changes_with_the_pod_or_its_readiness() {
        let a = incarnations("moco-db", &[pod(1, "x", true, "2026-11-29T09:00:00Z")], NOW);
        let b = incarnations("moco-db", &[pod(1, "x", true, "2026-11-29T09:30:00Z")], NOW);
        assert_eq!(a[0].index, 1);
        assert!(a[0].ready);
        assert_ne!(a[0].key, b[0].key);
        let mut other = pod(1, "x", true, "2026-11-29T09:00:00Z");
        other.metadata.uid = Some("u9".into());
        assert_ne!(incarnations("moco-db", &[other], NOW)[0].key, a[0].key);
    }
}
