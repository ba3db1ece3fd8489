//! The partition controller: lets a Pod-template change roll one Pod at a time, each step
//! only when the cluster is healthy and the Pod rolled last is Ready, available and caught up,
//! and the primary last after a planned switchover (MOCO's StatefulSetPartitionReconciler, and
//! past it: `moco_core::resources::partition` holds the rules and where they depart from MOCO).
//!
//! The StatefulSet webhook (`moco_api::admission::mutate_statefulset`) holds every Pod on its
//! revision when the spec changes; this controller lowers the partition. It watches the
//! operator's StatefulSets and their Pods; it reads the cluster only while a rollout is under
//! way, and each Pod's catch-up from the clustering manager's last round ([`Rounds`]).
//!
//! A step is: read → decide (pure) → one write. The switchover before the primary's Pod is
//! asked for by name (the cluster's `moco-rs/switchover-to` annotation, which the clustering
//! manager acts on or refuses): the highest updated replica, so that the new primary is not
//! rolled later (MOCO's demote annotation would let the manager pick the lowest-ordinal
//! candidate, an old-revision Pod when the primary is in the middle: two switchovers).

pub mod input;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::events::publish;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use moco_api::annotations::{SWITCHOVER_TO_ANNOTATION, annotation};
use moco_api::labels::{CREATED_BY, LABEL_CREATED_BY};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::facts::ClusterFacts;
use moco_core::resources::{CatchUp, Lacks, PartitionDecision, RolloutWait, decide_partition};
use moco_core::time::Timestamp;
use moco_kube::api::Scope;
use moco_kube::metrics::{ClusterLabels, ClusterMetrics, NamespaceLabels};

use crate::reconcile::apply::FIELD_MANAGER;
use input::{RolloutLimits, incarnations, ordinal, partition_input};

/// The condition a stalled rollout sets on the MySQLCluster (moco-rs's).
pub const ROLLOUT_STALLED: &str = "RolloutStalled";
/// How soon a rollout under way is looked at again (MOCO: 10 s).
const STEP: Duration = Duration::from_secs(10);
/// How soon again while the cluster is not healthy (MOCO: 30 s).
const UNHEALTHY: Duration = Duration::from_secs(30);
/// How soon again while a switchover is asked, or a Pod catches up.
const SOON: Duration = Duration::from_secs(2);

/// The clustering managers' last rounds, which say how far each instance got.
pub trait Rounds: Send + Sync + Debug {
    /// The facts the last round of `namespace/cluster` observed, if it ran.
    fn last_round(&self, namespace: &str, cluster: &str) -> Option<Arc<ClusterFacts>>;
    /// Runs a round of `namespace/cluster` soon (a Pod waits to be seen caught up).
    fn wake(&self, namespace: &str, cluster: &str);
}

/// The controller's settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct PartitionConfig {
    /// The rollout's limits.
    pub limits: RolloutLimits,
    /// MOCO's `--partition-update-interval`: the least time between two partition updates
    /// of the whole controller (0: none).
    pub interval: Duration,
}

/// What went wrong in a step (logged and retried).
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// An API call failed.
    #[error("{what} {namespace}/{name}: {source}")]
    Api {
        /// What was being done.
        what: &'static str,
        /// The object's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

#[derive(Default)]
struct State {
    catch_up: HashMap<(String, String), CatchUp>,
    last_lowered: Option<Instant>,
    /// The stall reported per StatefulSet (`namespace/name`), so that each is said once.
    stalled: HashMap<(String, String), String>,
}

struct Context {
    client: kube::Client,
    rounds: Arc<dyn Rounds>,
    metrics: ClusterMetrics,
    config: PartitionConfig,
    pods: Store<Pod>,
    state: Mutex<State>,
}

impl Context {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn now() -> Timestamp {
    Timestamp(k8s_openapi::jiff::Timestamp::now().as_second())
}

/// The MySQLCluster controlling `sts`.
fn cluster_of(sts: &StatefulSet) -> Option<String> {
    sts.owner_references()
        .iter()
        .find(|o| o.kind == "MySQLCluster" && o.controller == Some(true))
        .map(|o| o.name.clone())
}

fn api_error(
    what: &'static str,
    namespace: &str,
    name: &str,
    source: kube::Error,
) -> PartitionError {
    PartitionError::Api {
        what,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    }
}

async fn step(sts: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action, PartitionError> {
    let (Some(namespace), Some(name)) = (sts.namespace(), sts.metadata.name.clone()) else {
        return Ok(Action::await_change());
    };
    let Some(cluster_name) = cluster_of(&sts) else {
        return Ok(Action::await_change());
    };
    if sts.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let labels = ClusterLabels {
        name: cluster_name.clone(),
        namespace: namespace.clone(),
    };
    let status = sts.status.as_ref();
    let count = |n: Option<i32>| f64::from(n.unwrap_or(0));
    ctx.metrics
        .current_replicas
        .get_or_create(&labels)
        .set(count(status.and_then(|s| s.current_replicas)));
    ctx.metrics
        .updated_replicas
        .get_or_create(&labels)
        .set(count(status.and_then(|s| s.updated_replicas)));
    let uid = sts.metadata.uid.clone().unwrap_or_default();
    let pods: Vec<Pod> = ctx
        .pods
        .state()
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .filter(|p| p.owner_references().iter().any(|o| o.uid == uid))
        .filter(|p| ordinal(&name, p.metadata.name.as_deref().unwrap_or_default()).is_some())
        .map(|p| p.as_ref().clone())
        .collect();
    let now = now();
    let limits = ctx.config.limits;
    // Nothing to roll is known from the StatefulSet alone: no read of the cluster then.
    let alone = partition_input(&sts, &pods, None, &BTreeSet::new(), now, limits);
    if decide_partition(&alone) == PartitionDecision::Idle {
        resume(&ctx, &sts, &cluster_name, &labels).await?;
        return Ok(Action::await_change());
    }
    let clusters: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let cluster = clusters
        .get_opt(&cluster_name)
        .await
        .map_err(|e| api_error("reading the MySQLCluster", &namespace, &cluster_name, e))?;
    let round = ctx.rounds.last_round(&namespace, &cluster_name);
    let caught_up = ctx
        .state()
        .catch_up
        .entry((namespace.clone(), name.clone()))
        .or_default()
        .observe(round.as_deref(), &incarnations(&name, &pods, now));
    let input = partition_input(&sts, &pods, cluster.as_ref(), &caught_up, now, limits);
    let decision = decide_partition(&input);
    tracing::debug!(namespace, statefulset = name, ?decision, "partition");
    match decision {
        PartitionDecision::Idle => {
            resume(&ctx, &sts, &cluster_name, &labels).await?;
            Ok(Action::await_change())
        }
        PartitionDecision::Wait(wait) => {
            resume(&ctx, &sts, &cluster_name, &labels).await?;
            let (after, wake) = next_look(&wait);
            if wake {
                ctx.rounds.wake(&namespace, &cluster_name);
            }
            Ok(Action::requeue(after))
        }
        PartitionDecision::Lower { from, to } => {
            resume(&ctx, &sts, &cluster_name, &labels).await?;
            lower(&ctx, &sts, &labels, from, to).await
        }
        PartitionDecision::SwitchOver { from, to } => {
            // Decided from the cluster's primary, so the cluster was read.
            if let Some(cluster) = &cluster {
                request_switchover(&ctx, cluster, from, to).await?;
            }
            ctx.rounds.wake(&namespace, &cluster_name);
            Ok(Action::requeue(SOON))
        }
        PartitionDecision::Stalled { index, reason } => {
            stall(&ctx, &sts, &cluster_name, &labels, index, &reason).await?;
            Ok(Action::requeue(STEP))
        }
    }
}

/// Lowers the partition by one, unless the interval since the last one has not passed.
async fn lower(
    ctx: &Context,
    sts: &StatefulSet,
    labels: &ClusterLabels,
    from: u32,
    to: u32,
) -> Result<Action, PartitionError> {
    let interval = ctx.config.interval;
    let before = {
        let mut state = ctx.state();
        if let Some(last) = state.last_lowered
            && last.elapsed() < interval
        {
            ctx.metrics
                .partition_update_retries
                .get_or_create(&NamespaceLabels {
                    namespace: labels.namespace.clone(),
                })
                .inc();
            return Ok(Action::requeue(interval - last.elapsed()));
        }
        state.last_lowered.replace(Instant::now())
    };
    let name = sts.metadata.name.clone().unwrap_or_default();
    let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &labels.namespace);
    let lowered = lower_partition(&api, sts, to)
        .await
        .map_err(|e| api_error("lowering the partition of", &labels.namespace, &name, e))?;
    if lowered == Lowered::Stale {
        // Decided from a view the StatefulSet's watch has not caught up with: nothing was
        // written, so nothing is said; the next look has the StatefulSet as it is.
        ctx.state().last_lowered = before;
        return Ok(Action::requeue(SOON));
    }
    publish(
        &ctx.client,
        &sts.object_ref(&()),
        EventType::Normal,
        "PartitionUpdate",
        format!("Updated partition from {from} to {to}"),
    )
    .await;
    ctx.metrics
        .last_partition_updated
        .get_or_create(labels)
        .set(now().0 as f64);
    Ok(Action::requeue(STEP))
}

/// Whether [`lower_partition`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lowered {
    /// The partition is `to` now.
    Done,
    /// The StatefulSet changed since `sts` was read (a cached view behind the server, e.g. a
    /// Pod's event that woke a step before the StatefulSet's own event after the last
    /// lowering): nothing was written.
    Stale,
}

/// Sets the partition of `sts` to `to`, only if the StatefulSet is still the one read: the
/// patch carries its resourceVersion, so a step decided from a stale view neither writes a
/// partition again (a second event for one step) nor raises one lowered since.
pub async fn lower_partition(
    api: &Api<StatefulSet>,
    sts: &StatefulSet,
    to: u32,
) -> Result<Lowered, kube::Error> {
    let name = sts.metadata.name.clone().unwrap_or_default();
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": sts.metadata.resource_version},
        "spec": {"updateStrategy": {"rollingUpdate": {"partition": to}}}
    });
    let written = api
        .patch(
            &name,
            // The operator's field manager; a merge patch (an update) takes the partition over
            // from its apply, whose next apply then leaves it to the webhook.
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await;
    match written {
        Ok(_) => Ok(Lowered::Done),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Lowered::Stale),
        Err(e) => Err(e),
    }
}

/// Asks the clustering manager to switch over to Pod `to` (the cluster's
/// `moco-rs/switchover-to` annotation, the request `kubectl moco switchover --to` makes): an
/// updated, caught-up replica, so that the primary's write gap is one switchover and the new
/// primary is not rolled again later. The manager withdraws the request once done, or refuses
/// it with an event when `to` cannot take over; the next look asks again.
async fn request_switchover(
    ctx: &Context,
    cluster: &MySQLCluster,
    from: u32,
    to: u32,
) -> Result<(), PartitionError> {
    let value = to.to_string();
    if annotation(&cluster.metadata, SWITCHOVER_TO_ANNOTATION) == Some(value.as_str()) {
        return Ok(());
    }
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let api: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {SWITCHOVER_TO_ANNOTATION: value}}});
    api.patch(
        &name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        },
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|e| api_error("asking a switchover of", &namespace, &name, e))?;
    tracing::info!(
        namespace,
        cluster = name,
        from,
        to,
        "rollout: the primary's Pod is next; switching over to an updated replica first"
    );
    Ok(())
}

/// Reports a stalled rollout once per Pod and reason: a Warning event on the cluster and the
/// StatefulSet, the `RolloutStalled` condition and the gauge.
async fn stall(
    ctx: &Context,
    sts: &StatefulSet,
    cluster: &str,
    labels: &ClusterLabels,
    index: u32,
    reason: &str,
) -> Result<(), PartitionError> {
    let sts_name = sts.metadata.name.clone().unwrap_or_default();
    let message = format!("the rollout stopped at Pod {sts_name}-{index}: {reason}");
    ctx.metrics.rollout_stalled.get_or_create(labels).set(1);
    let key = (labels.namespace.clone(), sts_name.clone());
    if ctx.state().stalled.get(&key) == Some(&message) {
        return Ok(());
    }
    set_condition(ctx, &labels.namespace, cluster, Some(&message)).await?;
    let reference = cluster_reference(sts, cluster);
    publish(
        &ctx.client,
        &reference,
        EventType::Warning,
        "RolloutStalled",
        message.clone(),
    )
    .await;
    publish(
        &ctx.client,
        &sts.object_ref(&()),
        EventType::Warning,
        "RolloutStalled",
        message.clone(),
    )
    .await;
    tracing::warn!(
        namespace = labels.namespace,
        cluster,
        message,
        "rollout stalled"
    );
    ctx.state().stalled.insert(key, message);
    Ok(())
}

/// Clears a stall reported before (the Pod came up, or the spec changed).
async fn resume(
    ctx: &Context,
    sts: &StatefulSet,
    cluster: &str,
    labels: &ClusterLabels,
) -> Result<(), PartitionError> {
    let key = (
        labels.namespace.clone(),
        sts.metadata.name.clone().unwrap_or_default(),
    );
    if !ctx.state().stalled.contains_key(&key) {
        return Ok(());
    }
    ctx.metrics.rollout_stalled.get_or_create(labels).set(0);
    set_condition(ctx, &labels.namespace, cluster, None).await?;
    ctx.state().stalled.remove(&key);
    Ok(())
}

fn cluster_reference(sts: &StatefulSet, cluster: &str) -> ObjectReference {
    let owner = sts
        .owner_references()
        .iter()
        .find(|o| o.kind == "MySQLCluster" && o.name == cluster);
    ObjectReference {
        api_version: owner.map(|o| o.api_version.clone()),
        kind: Some("MySQLCluster".into()),
        name: Some(cluster.to_owned()),
        namespace: sts.namespace(),
        uid: owner.map(|o| o.uid.clone()),
        ..ObjectReference::default()
    }
}

/// Sets `RolloutStalled` to True with `message`, or to False (None), leaving every other
/// field of the status to its writers.
async fn set_condition(
    ctx: &Context,
    namespace: &str,
    cluster: &str,
    message: Option<&str>,
) -> Result<(), PartitionError> {
    let api: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), namespace);
    for _ in 0..5 {
        let mut current = api
            .get_status(cluster)
            .await
            .map_err(|e| api_error("reading the status of", namespace, cluster, e))?;
        let mut status = current.status.clone().unwrap_or_default();
        if !stalled_condition(
            &mut status.conditions,
            message,
            Time(k8s_openapi::jiff::Timestamp::now()),
        ) {
            return Ok(());
        }
        current.status = Some(status);
        match api
            .replace_status(cluster, &PostParams::default(), &current)
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_error("writing the status of", namespace, cluster, e)),
        }
    }
    Ok(())
}

/// The `RolloutStalled` condition in `conditions` set for `message` (None: not stalled);
/// whether anything changed.
pub fn stalled_condition(
    conditions: &mut Vec<Condition>,
    message: Option<&str>,
    now: Time,
) -> bool {
    let (status, reason, message) = match message {
        Some(m) => ("True", "PodNotReady", m.to_owned()),
        None => ("False", "RolloutProgressing", String::new()),
    };
    match conditions.iter_mut().find(|c| c.type_ == ROLLOUT_STALLED) {
        Some(c) if c.status == status && c.message == message => false,
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status.to_owned();
            c.reason = reason.to_owned();
            c.message = message;
            true
        }
        // Never stalled: no condition to say it is not.
        None if status == "False" => false,
        None => {
            conditions.push(Condition {
                type_: ROLLOUT_STALLED.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message,
                observed_generation: None,
                last_transition_time: now,
            });
            true
        }
    }
}

/// When to look again at a rollout that waits, and whether to wake the clustering manager
/// first. A wait that ends by itself (a Ready Pod's availability, a replica catching up, which
/// a clustering round must see) is looked at soon: no event marks its end. The others end with
/// a change of the StatefulSet or a Pod, which starts a step at once.
fn next_look(wait: &RolloutWait) -> (Duration, bool) {
    match wait {
        RolloutWait::ClusterNotHealthy => (UNHEALTHY, false),
        RolloutWait::PodNotReady {
            lacks: Lacks::CatchUp,
            ..
        } => (SOON, true),
        RolloutWait::PodNotReady {
            lacks: Lacks::Available { .. },
            ..
        } => (SOON, false),
        _ => (STEP, false),
    }
}

fn error_policy(sts: Arc<StatefulSet>, error: &PartitionError, _: Arc<Context>) -> Action {
    tracing::warn!(
        statefulset = sts.metadata.name.as_deref().unwrap_or_default(),
        namespace = sts.metadata.namespace.as_deref().unwrap_or_default(),
        error = %error,
        "partition step failed"
    );
    Action::requeue(STEP)
}

/// Runs the partition controller over the StatefulSets of `scope` until `shutdown`
/// completes.
pub async fn run_partition_controller(
    scope: &Scope,
    client: kube::Client,
    rounds: Arc<dyn Rounds>,
    metrics: ClusterMetrics,
    config: PartitionConfig,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let owned = watcher::Config::default().labels(&format!("{LABEL_CREATED_BY}={CREATED_BY}"));
    let (pods, writer) = reflector::store();
    let pod_events = watcher::watcher(scope.api::<Pod>(client.clone()), owned.clone())
        .reflect(writer)
        .touched_objects();
    let context = Arc::new(Context {
        client: client.clone(),
        rounds,
        metrics,
        config,
        pods,
        state: Mutex::new(State::default()),
    });
    Controller::new(scope.api::<StatefulSet>(client), owned)
        .with_config(ControllerConfig::default().concurrency(4))
        .owns_stream(pod_events)
        .graceful_shutdown_on(shutdown)
        .run(step, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "partition controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn waits_that_end_by_themselves_are_looked_at_soon() {
        let pod = |lacks| RolloutWait::PodNotReady { index: 2, lacks };
        assert_eq!(next_look(&pod(Lacks::CatchUp)), (SOON, true));
        let available = Lacks::Available {
            needed_seconds: 5,
            ready_seconds: 2,
        };
        assert_eq!(next_look(&pod(available)), (SOON, false));
        assert_eq!(next_look(&pod(Lacks::Ready)), (STEP, false));
        assert_eq!(
            next_look(&RolloutWait::ClusterNotHealthy),
            (UNHEALTHY, false)
        );
        assert_eq!(next_look(&RolloutWait::NotSettled), (STEP, false));
    }

    #[test]
    fn the_stalled_condition_appears_once_stalled_and_flips_back() {
        let mut c = Vec::new();
        assert!(
            !stalled_condition(&mut c, None, at(1)),
            "never stalled: nothing"
        );
        assert!(c.is_empty());
        assert!(stalled_condition(
            &mut c,
            Some("Pod moco-db-2: mysqld exited 1"),
            at(2)
        ));
        assert!(!stalled_condition(
            &mut c,
            Some("Pod moco-db-2: mysqld exited 1"),
            at(3)
        ));
        assert_eq!(c[0].status, "True");
        assert_eq!(c[0].last_transition_time, at(2));
        assert!(stalled_condition(
            &mut c,
            Some("Pod moco-db-2: other"),
            at(4)
        ));
        assert_eq!(
            c[0].last_transition_time,
            at(2),
            "still stalled: no transition"
        );
        assert!(stalled_condition(&mut c, None, at(5)));
        assert_eq!(
            (c[0].status.as_str(), c[0].reason.as_str()),
            ("False", "RolloutProgressing")
        );
        assert_eq!(c[0].last_transition_time, at(5));
        assert_eq!(c.len(), 1);
    }
}
