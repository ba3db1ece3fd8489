//! Binding unscheduled Pods to Nodes: there is no kube-scheduler, so the runner does its
//! part. The choice is a pure function ([`choose`]) of the Pod and what the API server holds,
//! following kube-scheduler's filters and their messages: volumes (claims must exist and be
//! bound), cordoned Nodes, taints (NoSchedule/NoExecute) against tolerations, the node
//! selector and required node affinity, the Node's Pod count, and required inter-Pod affinity
//! and anti-affinity (the Pod's and the existing Pods'). Among the Nodes that fit, preferred
//! node and Pod (anti-)affinity weigh first, then untolerated PreferNoSchedule taints, then
//! the fewest Pods (then the name, so that the choice is reproducible). Resource requests are
//! not counted: every Node is the same shared machine.
//!
//! A Pod that fits nowhere stays unbound with `PodScheduled=False, reason Unschedulable` and a
//! `FailedScheduling` event naming why, as kube-scheduler leaves it; it is tried again on
//! every change the runner sees (a Node, a Pod, a claim, a namespace) and every 30 s.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{
    Binding, Namespace, Node, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaim,
    Pod, PodAffinityTerm, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::context::Context;
use crate::store::{ready, reflect};

/// The scheduler name whose Pods the runner binds (and Pods naming none).
pub const SCHEDULER_NAME: &str = "default-scheduler";
/// How often every unbound Pod is tried again without any change seen.
const RESYNC: Duration = Duration::from_secs(30);

/// What went wrong writing a scheduling decision (logged; the Pod is tried again).
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The binding was refused.
    #[error("binding Pod {pod} to Node {node}: {source}")]
    Bind {
        /// namespace/name.
        pod: String,
        /// The chosen Node.
        node: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The PodScheduled condition could not be written.
    #[error("setting PodScheduled=False on Pod {pod}: {source}")]
    Condition {
        /// namespace/name.
        pod: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// What the scheduler sees of the cluster.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    /// Every Node.
    pub nodes: &'a [Arc<Node>],
    /// Every Pod (bound ones count for spreading and inter-Pod rules).
    pub pods: &'a [Arc<Pod>],
    /// Every PersistentVolumeClaim.
    pub claims: &'a [Arc<PersistentVolumeClaim>],
    /// Every Namespace (their labels, for namespace selectors of inter-Pod terms).
    pub namespaces: &'a [Arc<Namespace>],
}

/// Why a Pod is not bound: the PodScheduled condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    /// `Unschedulable` or `SchedulingGated`.
    pub reason: &'static str,
    /// kube-scheduler's style: `0/3 nodes are available: 3 node(s) didn't match ...`.
    pub message: String,
}

/// Whether the Pod is the scheduler's to bind: no Node yet, not being deleted, not finished,
/// for the default scheduler.
pub fn wants_scheduling(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.node_name.as_deref().is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
        && spec
            .scheduler_name
            .as_deref()
            .is_none_or(|s| s.is_empty() || s == SCHEDULER_NAME)
        && !terminal(pod)
}

/// Chooses the Node for `pod`, or says why none fits.
pub fn choose(pod: &Pod, cluster: &Cluster<'_>) -> Result<String, Unschedulable> {
    let unschedulable = |message: String| Unschedulable {
        reason: "Unschedulable",
        message,
    };
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
    {
        return Err(Unschedulable {
            reason: "SchedulingGated",
            message: "Scheduling is blocked due to non-empty scheduling gates".to_owned(),
        });
    }
    let total = cluster.nodes.len();
    if total == 0 {
        return Err(unschedulable(
            "0/0 nodes are available: no nodes available to schedule pods.".to_owned(),
        ));
    }
    if let Err(why) = claims_bound(pod, cluster.claims) {
        return Err(unschedulable(format!(
            "0/{total} nodes are available: {why}."
        )));
    }
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    let mut fits: Vec<(i64, usize, usize, &str)> = Vec::new();
    for node in cluster.nodes {
        match filter(pod, node, cluster) {
            Err(why) => *failures.entry(why).or_default() += 1,
            Ok(()) => fits.push((
                -preference(pod, node, cluster),
                prefer_no_schedule(pod, node),
                pods_on(cluster.pods, &node.name_any(), pod).count(),
                node.metadata.name.as_deref().unwrap_or_default(),
            )),
        }
    }
    fits.sort();
    if let Some((.., name)) = fits.first() {
        return Ok((*name).to_owned());
    }
    let mut reasons: Vec<String> = failures
        .iter()
        .map(|(why, count)| format!("{count} {why}"))
        .collect();
    reasons.sort();
    Err(unschedulable(format!(
        "0/{total} nodes are available: {}.",
        reasons.join(", ")
    )))
}

/// kube-scheduler's filters, first failure first; the reason as kube-scheduler words it.
fn filter(pod: &Pod, node: &Node, cluster: &Cluster<'_>) -> Result<(), String> {
    let tolerations = tolerations(pod);
    let spec = node.spec.as_ref();
    if spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        let cordon = Taint {
            key: "node.kubernetes.io/unschedulable".to_owned(),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        };
        if !tolerations.iter().any(|t| tolerates(t, &cordon)) {
            return Err("node(s) were unschedulable".to_owned());
        }
    }
    for taint in spec.and_then(|s| s.taints.as_deref()).unwrap_or_default() {
        if (taint.effect == "NoSchedule" || taint.effect == "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
        {
            return Err(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or_default()
            ));
        }
    }
    if !node_affinity(pod, node) {
        return Err("node(s) didn't match Pod's node affinity/selector".to_owned());
    }
    let capacity = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("pods"))
        .and_then(|q| q.0.parse::<usize>().ok())
        .unwrap_or(110);
    if pods_on(cluster.pods, &node.name_any(), pod).count() >= capacity {
        return Err("Too many pods".to_owned());
    }
    inter_pod(pod, node, cluster).map_err(str::to_owned)
}

/// The Pod's claims (and its generic ephemeral volumes' claims) exist and are bound: with
/// Immediate binding, kube-scheduler waits for that.
fn claims_bound(pod: &Pod, claims: &[Arc<PersistentVolumeClaim>]) -> Result<(), String> {
    let namespace = pod.namespace().unwrap_or_default();
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    let mut unbound = false;
    for volume in volumes {
        let name = if let Some(c) = &volume.persistent_volume_claim {
            c.claim_name.clone()
        } else if volume.ephemeral.is_some() {
            format!("{}-{}", pod.name_any(), volume.name)
        } else {
            continue;
        };
        let claim = claims
            .iter()
            .find(|c| c.namespace().as_deref() == Some(&namespace) && c.name_any() == name);
        let Some(claim) = claim else {
            return Err(format!("persistentvolumeclaim \"{name}\" not found"));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        let bound = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .is_some_and(|v| !v.is_empty())
            && claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        unbound |= !bound;
    }
    if unbound {
        return Err("pod has unbound immediate PersistentVolumeClaims".to_owned());
    }
    Ok(())
}

fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// Kubernetes' `Toleration.ToleratesTaint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// `nodeSelector` and required node affinity.
fn node_affinity(pod: &Pod, node: &Node) -> bool {
    let labels = node.labels();
    let Some(spec) = &pod.spec else { return true };
    if let Some(selector) = &spec.node_selector
        && !selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(selector) => selector
            .node_selector_terms
            .iter()
            .any(|term| node_term(term, node)),
    }
}

/// A node selector term: every expression and field holds; an empty term matches nothing.
fn node_term(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.labels();
    let name = node.name_any();
    expressions
        .iter()
        .all(|r| node_requirement(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && node_requirement(r, Some(&name))
        })
}

/// One node selector requirement against the label's value (None: no such label).
fn node_requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value.and_then(number), values) else {
                return false;
            };
            let Some(bound) = number(bound) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// A label selector (matchLabels and matchExpressions); an empty one matches everything.
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|r| label_requirement(r, labels.get(&r.key)))
}

fn label_requirement(r: &LabelSelectorRequirement, value: Option<&String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

/// Whether `other` is among the Pods the inter-Pod `term` of `owner` speaks of: its namespace
/// (the owner's, the listed ones, or those the namespace selector picks) and its labels (the
/// label selector, plus matchLabelKeys/mismatchLabelKeys taken from the owner's labels).
fn term_selects(
    term: &PodAffinityTerm,
    owner: &Pod,
    other: &Pod,
    namespaces: &[Arc<Namespace>],
) -> bool {
    let other_ns = other.namespace().unwrap_or_default();
    let listed = term.namespaces.as_deref().unwrap_or_default();
    let namespace_ok = if listed.is_empty() && term.namespace_selector.is_none() {
        owner.namespace() == other.namespace()
    } else {
        listed.contains(&other_ns)
            || term.namespace_selector.as_ref().is_some_and(|selector| {
                let empty = BTreeMap::new();
                let labels = namespaces
                    .iter()
                    .find(|n| n.name_any() == other_ns)
                    .map_or(&empty, |n| n.labels());
                selects(selector, labels)
            })
    };
    let Some(selector) = &term.label_selector else {
        return false;
    };
    let owner_labels = owner.labels();
    let keyed = |keys: &Option<Vec<String>>, operator: &str| -> Vec<LabelSelectorRequirement> {
        keys.iter()
            .flatten()
            .filter_map(|k| {
                Some(LabelSelectorRequirement {
                    key: k.clone(),
                    operator: operator.to_owned(),
                    values: Some(vec![owner_labels.get(k)?.clone()]),
                })
            })
            .collect()
    };
    let extra: Vec<_> = keyed(&term.match_label_keys, "In")
        .into_iter()
        .chain(keyed(&term.mismatch_label_keys, "NotIn"))
        .collect();
    namespace_ok
        && selects(selector, other.labels())
        && extra
            .iter()
            .all(|r| label_requirement(r, other.labels().get(&r.key)))
}

/// The Pods bound to a Node that occupy it (not finished), `pod` itself excepted.
fn pods_on<'a>(
    pods: &'a [Arc<Pod>],
    node: &'a str,
    pod: &'a Pod,
) -> impl Iterator<Item = &'a Arc<Pod>> {
    pods.iter().filter(move |p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            && !terminal(p)
            && !same_pod(p, pod)
    })
}

/// Every bound, unfinished Pod with its Node (`pod` itself excepted).
fn placed<'a>(pod: &'a Pod, cluster: &Cluster<'a>) -> Vec<(&'a Pod, &'a Node)> {
    cluster
        .pods
        .iter()
        .filter(|p| !terminal(p) && !same_pod(p, pod))
        .filter_map(|p| {
            let name = p.spec.as_ref()?.node_name.as_deref()?;
            let node = cluster.nodes.iter().find(|n| n.name_any() == name)?;
            Some((p.as_ref(), node.as_ref()))
        })
        .collect()
}

fn same_pod(a: &Pod, b: &Pod) -> bool {
    match (&a.metadata.uid, &b.metadata.uid) {
        (Some(x), Some(y)) => x == y,
        _ => a.namespace() == b.namespace() && a.name_any() == b.name_any(),
    }
}

fn terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The value of the topology label `key` on both Nodes, if both have it and it is the same.
fn same_domain(a: &Node, b: &Node, key: &str) -> bool {
    match (a.labels().get(key), b.labels().get(key)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// Required inter-Pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity filter.
fn inter_pod(pod: &Pod, node: &Node, cluster: &Cluster<'_>) -> Result<(), &'static str> {
    let placed = placed(pod, cluster);
    let ns = cluster.namespaces;
    // In kube-scheduler's order: the Pod's affinity, its anti-affinity, the existing Pods'.
    if !pod_affinity(pod, node, &placed, ns) {
        return Err("node(s) didn't match pod affinity rules");
    }
    for term in required_anti(pod) {
        if placed.iter().any(|(other, other_node)| {
            same_domain(other_node, node, &term.topology_key) && term_selects(term, pod, other, ns)
        }) {
            return Err("node(s) didn't match pod anti-affinity rules");
        }
    }
    for (other, other_node) in &placed {
        for term in required_anti(other) {
            if same_domain(other_node, node, &term.topology_key)
                && term_selects(term, other, pod, ns)
            {
                return Err("node(s) didn't satisfy existing pods anti-affinity rules");
            }
        }
    }
    Ok(())
}

/// The Pod's required affinity: a Pod matching all its terms in this Node's domain of each;
/// or, when no Pod matches them all anywhere, the first of its kind (it matches its own
/// terms) on a Node having every topology label.
fn pod_affinity(pod: &Pod, node: &Node, placed: &[(&Pod, &Node)], ns: &[Arc<Namespace>]) -> bool {
    let terms: &[PodAffinityTerm] = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    if terms.is_empty() {
        return true;
    }
    if !terms
        .iter()
        .all(|t| node.labels().contains_key(&t.topology_key))
    {
        return false;
    }
    let matching: Vec<&(&Pod, &Node)> = placed
        .iter()
        .filter(|(other, _)| terms.iter().all(|t| term_selects(t, pod, other, ns)))
        .collect();
    let satisfied = terms.iter().all(|t| {
        matching
            .iter()
            .any(|(_, other_node)| same_domain(other_node, node, &t.topology_key))
    });
    satisfied || (matching.is_empty() && terms.iter().all(|t| term_selects(t, pod, pod, ns)))
}

fn required_anti(pod: &Pod) -> &[PodAffinityTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// The preferred rules' score of a Node: the weights of the matching preferred node affinity
/// terms, plus (minus) each preferred Pod affinity (anti-affinity) term's weight for each
/// matching Pod in the Node's domain.
fn preference(pod: &Pod, node: &Node, cluster: &Cluster<'_>) -> i64 {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return 0;
    };
    let mut score: i64 = affinity
        .node_affinity
        .as_ref()
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
        .iter()
        .filter(|p| node_term(&p.preference, node))
        .map(|p| i64::from(p.weight))
        .sum();
    let placed = placed(pod, cluster);
    let mut weigh = |terms: Option<&Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>,
                     sign: i64| {
        for weighted in terms.into_iter().flatten() {
            let term = &weighted.pod_affinity_term;
            let count = placed
                .iter()
                .filter(|(other, other_node)| {
                    same_domain(other_node, node, &term.topology_key)
                        && term_selects(term, pod, other, cluster.namespaces)
                })
                .count();
            score += sign * i64::from(weighted.weight) * i64::try_from(count).unwrap_or(i64::MAX);
        }
    };
    weigh(
        affinity.pod_affinity.as_ref().and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }),
        1,
    );
    weigh(
        affinity.pod_anti_affinity.as_ref().and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }),
        -1,
    );
    score
}

/// How many PreferNoSchedule taints of the Node the Pod does not tolerate.
fn prefer_no_schedule(pod: &Pod, node: &Node) -> usize {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|t| {
            t.effect == "PreferNoSchedule" && !tolerations(pod).iter().any(|x| tolerates(x, t))
        })
        .count()
}

/// The order Pods are tried in: higher priority first, then older first.
fn queue_order(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let priority = |p: &Pod| p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    priority(b)
        .cmp(&priority(a))
        .then_with(|| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
        })
        .then_with(|| a.namespace().cmp(&b.namespace()))
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// What the scheduler remembers between passes.
#[derive(Debug, Default)]
struct Memory {
    /// Pods bound by the runner whose binding the watch has not shown yet (uid → Node), so
    /// that the next pass neither binds them again nor forgets they occupy the Node.
    assumed: HashMap<String, String>,
    /// The last reason reported per unbound Pod (uid → message), so that an unchanged reason
    /// is not written again on every pass.
    reported: HashMap<String, String>,
}

/// Binds unscheduled Pods until `shutdown`. Errors are logged and the Pod tried again.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) -> Result<(), ScheduleError> {
    let wake = Arc::new(Notify::new());
    let client = ctx.client.clone();
    let nodes = reflect(
        Api::<Node>::all(client.clone()),
        wake.clone(),
        shutdown.clone(),
    );
    let pods = reflect(
        Api::<Pod>::all(client.clone()),
        wake.clone(),
        shutdown.clone(),
    );
    let claims = reflect(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        wake.clone(),
        shutdown.clone(),
    );
    let namespaces = reflect(
        Api::<Namespace>::all(client.clone()),
        wake.clone(),
        shutdown.clone(),
    );
    if !(ready(&nodes, &shutdown).await
        && ready(&pods, &shutdown).await
        && ready(&claims, &shutdown).await
        && ready(&namespaces, &shutdown).await)
    {
        return Ok(());
    }
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: SCHEDULER_NAME.to_owned(),
            instance: Some("pod-runner".to_owned()),
        },
    );
    let mut memory = Memory::default();
    loop {
        let nodes = nodes.state();
        let claims = claims.state();
        let namespaces = namespaces.state();
        let mut pod_list = pods.state();
        pass(
            &client,
            &recorder,
            &mut memory,
            &nodes,
            &mut pod_list,
            &claims,
            &namespaces,
        )
        .await;
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = wake.notified() => {}
            _ = tokio::time::sleep(RESYNC) => {}
        }
    }
}

/// One look at every unbound Pod.
async fn pass(
    client: &kube::Client,
    recorder: &Recorder,
    memory: &mut Memory,
    nodes: &[Arc<Node>],
    pods: &mut Vec<Arc<Pod>>,
    claims: &[Arc<PersistentVolumeClaim>],
    namespaces: &[Arc<Namespace>],
) {
    let unbound_uid = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
            .then(|| p.metadata.uid.clone())
            .flatten()
    };
    let unbound: Vec<String> = pods.iter().filter_map(|p| unbound_uid(p)).collect();
    memory.assumed.retain(|uid, _| unbound.contains(uid));
    for pod in pods.iter_mut() {
        if let Some(node) = pod
            .metadata
            .uid
            .as_ref()
            .and_then(|u| memory.assumed.get(u))
        {
            *pod = Arc::new(with_node(pod, node));
        }
    }
    let mut queue: Vec<Arc<Pod>> = pods
        .iter()
        .filter(|p| wants_scheduling(p))
        .cloned()
        .collect();
    queue.sort_by(|a, b| queue_order(a, b));
    let queued: Vec<&str> = queue
        .iter()
        .filter_map(|p| p.metadata.uid.as_deref())
        .collect();
    memory
        .reported
        .retain(|uid, _| queued.contains(&uid.as_str()));

    for pod in queue {
        let cluster = Cluster {
            nodes,
            pods,
            claims,
            namespaces,
        };
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        match choose(&pod, &cluster) {
            Ok(node) => match bind(client, &pod, &node).await {
                Ok(()) => {
                    info!(pod = %key, node = %node, "bound");
                    memory.assumed.insert(uid.clone(), node.clone());
                    if let Some(slot) = pods
                        .iter_mut()
                        .find(|p| p.metadata.uid.as_deref() == Some(&uid))
                    {
                        *slot = Arc::new(with_node(slot, &node));
                    }
                    publish(
                        recorder,
                        &pod,
                        EventType::Normal,
                        "Scheduled",
                        "Binding",
                        format!("Successfully assigned {key} to {node}"),
                    )
                    .await;
                }
                // Bound meanwhile (by us, before the watch said so) or gone: nothing to do.
                Err(ScheduleError::Bind {
                    source: kube::Error::Api(s),
                    ..
                }) if s.code == 409 || s.code == 404 => {}
                Err(e) => warn!("{e} (trying again)"),
            },
            Err(why) => {
                if memory.reported.get(&uid) == Some(&why.message) {
                    continue;
                }
                info!(pod = %key, reason = why.reason, "not bound: {}", why.message);
                match set_unscheduled(client, &pod, &why).await {
                    Ok(()) => {
                        memory.reported.insert(uid, why.message.clone());
                        if why.reason == "Unschedulable" {
                            publish(
                                recorder,
                                &pod,
                                EventType::Warning,
                                "FailedScheduling",
                                "Scheduling",
                                why.message,
                            )
                            .await;
                        }
                    }
                    Err(ScheduleError::Condition {
                        source: kube::Error::Api(s),
                        ..
                    }) if s.code == 404 => {}
                    Err(e) => warn!("{e} (trying again)"),
                }
            }
        }
    }
}

fn with_node(pod: &Pod, node: &str) -> Pod {
    let mut pod = pod.clone();
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.to_owned());
    }
    pod
}

/// POST pods/binding, as kube-scheduler: the API server sets `spec.nodeName` and
/// `PodScheduled=True` at once, and refuses a Pod already bound or another Pod of the name.
async fn bind(client: &kube::Client, pod: &Pod, node: &str) -> Result<(), ScheduleError> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            uid: pod.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        },
    };
    Api::<Pod>::namespaced(client.clone(), &namespace)
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &name,
            &PostParams::default(),
            &binding,
        )
        .await
        .map_err(|source| ScheduleError::Bind {
            pod: format!("{namespace}/{name}"),
            node: node.to_owned(),
            source,
        })?;
    Ok(())
}

/// Writes `PodScheduled=False` with the reason, unless the Pod already says just that.
async fn set_unscheduled(
    client: &kube::Client,
    pod: &Pod,
    why: &Unschedulable,
) -> Result<(), ScheduleError> {
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    if current.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(why.reason)
            && c.message.as_deref() == Some(why.message.as_str())
    }) {
        return Ok(());
    }
    let since = current
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(crate::node::now_time);
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    // Conditions merge by type (strategic merge patch), as kube-scheduler's patch does.
    let patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": why.reason,
        "message": why.message,
        "lastProbeTime": null,
        "lastTransitionTime": since,
    }]}});
    Api::<Pod>::namespaced(client.clone(), &namespace)
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(|source| ScheduleError::Condition {
            pod: format!("{namespace}/{name}"),
            source,
        })?;
    Ok(())
}

async fn publish(
    recorder: &Recorder,
    pod: &Pod,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &pod.object_ref(&())).await {
        warn!(pod = %pod.name_any(), "publishing a {reason} event: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: serde_json::Value, spec: serde_json::Value) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
                "status": {"allocatable": {"pods": "10"}},
            }))
            .unwrap(),
        )
    }

    /// node-0..2 in zone-0, zone-1, zone-1 (as the runner labels them, but two share a zone).
    fn nodes() -> Vec<Arc<Node>> {
        (0..3)
            .map(|i| {
                let name = format!("node-{i}");
                node(
                    &name,
                    json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": format!("zone-{}", i.min(1)), "disk": if i == 2 {"ssd"} else {"hdd"}, "rank": i.to_string()}),
                    json!({}),
                )
            })
            .collect()
    }

    fn pod(
        name: &str,
        labels: serde_json::Value,
        node: Option<&str>,
        spec: serde_json::Value,
    ) -> Arc<Pod> {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c"}]);
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": labels},
                "spec": spec,
            }))
            .unwrap(),
        )
    }

    fn choose_in(p: &Pod, nodes: &[Arc<Node>], pods: &[Arc<Pod>]) -> Result<String, Unschedulable> {
        choose(
            p,
            &Cluster {
                nodes,
                pods,
                claims: &[],
                namespaces: &[],
            },
        )
    }

    #[test]
    fn spreads_to_the_node_with_fewest_pods() {
        let nodes = nodes();
        let pods = [
            pod("a", json!({}), Some("node-0"), json!({})),
            pod("b", json!({}), Some("node-1"), json!({})),
            // A finished Pod occupies nothing.
            pod("done", json!({}), Some("node-2"), json!({})),
        ];
        let mut finished = (*pods[2]).clone();
        finished.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        let pods = vec![pods[0].clone(), pods[1].clone(), Arc::new(finished)];
        assert_eq!(
            choose_in(&pod("p", json!({}), None, json!({})), &nodes, &pods).unwrap(),
            "node-2"
        );
        // Ties go to the first name.
        assert_eq!(
            choose_in(&pod("p", json!({}), None, json!({})), &nodes, &[]).unwrap(),
            "node-0"
        );
    }

    #[test]
    fn a_selector_matching_nothing_names_why() {
        let p = pod(
            "p",
            json!({}),
            None,
            json!({"nodeSelector": {"disk": "nvme"}}),
        );
        let e = choose_in(&p, &nodes(), &[]).unwrap_err();
        assert_eq!(e.reason, "Unschedulable");
        assert_eq!(
            e.message,
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        );
        let p = pod(
            "p",
            json!({}),
            None,
            json!({"nodeSelector": {"disk": "ssd"}}),
        );
        assert_eq!(choose_in(&p, &nodes(), &[]).unwrap(), "node-2");
    }

    #[test]
    fn required_node_affinity_operators() {
        let with = |exprs: serde_json::Value| {
            pod(
                "p",
                json!({}),
                None,
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}}}),
            )
        };
        let nodes = nodes();
        let fit = |exprs| choose_in(&with(exprs), &nodes, &[]).ok();
        assert_eq!(
            fit(json!([{"key": "disk", "operator": "In", "values": ["ssd"]}])).as_deref(),
            Some("node-2")
        );
        assert_eq!(
            fit(json!([{"key": "disk", "operator": "NotIn", "values": ["hdd"]}])).as_deref(),
            Some("node-2")
        );
        assert_eq!(
            fit(json!([{"key": "disk", "operator": "Exists"}])).as_deref(),
            Some("node-0")
        );
        assert_eq!(
            fit(json!([{"key": "disk", "operator": "DoesNotExist"}])),
            None
        );
        assert_eq!(
            fit(json!([{"key": "rank", "operator": "Gt", "values": ["0"]}])).as_deref(),
            Some("node-1")
        );
        assert_eq!(
            fit(json!([{"key": "nothing", "operator": "NotIn", "values": ["x"]}])).as_deref(),
            Some("node-0")
        );
        // Terms are ORed; a DaemonSet's matchFields on the name.
        let p = pod(
            "p",
            json!({}),
            None,
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["none"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
            ]}}}}),
        );
        assert_eq!(choose_in(&p, &nodes, &[]).unwrap(), "node-1");
    }

    #[test]
    fn taints_need_tolerations() {
        let not_ready =
            json!({"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]});
        let nodes = vec![
            node("node-0", json!({}), not_ready.clone()),
            node(
                "node-1",
                json!({}),
                json!({"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}),
            ),
            node("node-2", json!({}), json!({"unschedulable": true})),
        ];
        // The defaults the API server adds (NoExecute, 300 s) do not tolerate NoSchedule.
        let default_tolerations = json!({"tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ]});
        let e =
            choose_in(&pod("p", json!({}), None, default_tolerations), &nodes, &[]).unwrap_err();
        assert_eq!(
            e.message,
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: db}, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable."
        );
        let p = pod(
            "p",
            json!({}),
            None,
            json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db"}]}),
        );
        assert_eq!(choose_in(&p, &nodes, &[]).unwrap(), "node-1");
        let p = pod(
            "p",
            json!({}),
            None,
            json!({"tolerations": [{"operator": "Exists"}]}),
        );
        assert_eq!(choose_in(&p, &nodes, &[]).unwrap(), "node-0");
        // PreferNoSchedule only weighs.
        let nodes = vec![
            node(
                "node-0",
                json!({}),
                json!({"taints": [{"key": "soft", "effect": "PreferNoSchedule"}]}),
            ),
            node("node-1", json!({}), json!({})),
        ];
        let busy = vec![pod("a", json!({}), Some("node-1"), json!({}))];
        assert_eq!(
            choose_in(&pod("p", json!({}), None, json!({})), &nodes, &busy).unwrap(),
            "node-1"
        );
    }

    #[test]
    fn required_anti_affinity_by_hostname_and_zone() {
        let anti = |key: &str| {
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": key},
            ]}}})
        };
        let nodes = nodes();
        let db0 = pod(
            "db-0",
            json!({"app": "db"}),
            Some("node-0"),
            anti("kubernetes.io/hostname"),
        );
        let db1 = pod(
            "db-1",
            json!({"app": "db"}),
            Some("node-2"),
            anti("kubernetes.io/hostname"),
        );
        // Two other Pods on node-1 would make it last by count: anti-affinity still picks it.
        let other = [
            pod("x", json!({}), Some("node-1"), json!({})),
            pod("y", json!({}), Some("node-1"), json!({})),
        ];
        let mut pods = vec![db0.clone(), db1.clone()];
        pods.extend(other.iter().cloned());
        let p = pod(
            "db-2",
            json!({"app": "db"}),
            None,
            anti("kubernetes.io/hostname"),
        );
        assert_eq!(choose_in(&p, &nodes, &pods).unwrap(), "node-1");
        // A fourth has nowhere to go.
        pods.push(pod(
            "db-2",
            json!({"app": "db"}),
            Some("node-1"),
            anti("kubernetes.io/hostname"),
        ));
        let e = choose_in(
            &pod(
                "db-3",
                json!({"app": "db"}),
                None,
                anti("kubernetes.io/hostname"),
            ),
            &nodes,
            &pods,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
        );
        // The existing Pods' rule rejects a matching Pod that has no rule of its own.
        let e = choose_in(
            &pod("plain", json!({"app": "db"}), None, json!({})),
            &nodes,
            &pods,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
        );
        // By zone: db-0 in zone-0 leaves zone-1 (node-1, node-2).
        let p = pod(
            "z",
            json!({"app": "db"}),
            None,
            anti("topology.kubernetes.io/zone"),
        );
        assert_eq!(
            choose_in(&p, &nodes, std::slice::from_ref(&db0)).unwrap(),
            "node-1"
        );
        // Another namespace's Pods are not counted unless the term says so.
        let mut elsewhere = (*db0).clone();
        elsewhere.metadata.namespace = Some("other".into());
        let elsewhere = vec![Arc::new(elsewhere)];
        let p = pod(
            "db-9",
            json!({"app": "db"}),
            None,
            anti("kubernetes.io/hostname"),
        );
        assert_eq!(choose_in(&p, &nodes[..1], &elsewhere).unwrap(), "node-0");
        let mut all_ns = anti("kubernetes.io/hostname");
        all_ns["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0]["namespaceSelector"] = json!({});
        let p = pod("db-9", json!({"app": "db"}), None, all_ns);
        assert!(choose_in(&p, &nodes[..1], &elsewhere).is_err());
    }

    #[test]
    fn required_pod_affinity_and_the_first_of_its_kind() {
        let aff = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"},
        ]}}});
        let nodes = nodes();
        // The first web Pod may go anywhere (it matches its own term).
        assert_eq!(
            choose_in(
                &pod("w0", json!({"app": "web"}), None, aff.clone()),
                &nodes,
                &[]
            )
            .unwrap(),
            "node-0"
        );
        // Not so a Pod that doesn't match its own term.
        assert!(choose_in(&pod("c", json!({}), None, aff.clone()), &nodes, &[]).is_err());
        let w = pod("w0", json!({"app": "web"}), Some("node-2"), json!({}));
        assert_eq!(
            choose_in(&pod("c", json!({}), None, aff), &nodes, &[w]).unwrap(),
            "node-2"
        );
    }

    #[test]
    fn preferred_anti_affinity_spreads_before_pod_count() {
        let pref = json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}},
        ]}}});
        let nodes = nodes();
        let pods = vec![
            pod("db-0", json!({"app": "db"}), Some("node-0"), json!({})),
            pod("x", json!({}), Some("node-1"), json!({})),
            pod("y", json!({}), Some("node-1"), json!({})),
            pod("db-1", json!({"app": "db"}), Some("node-2"), json!({})),
        ];
        assert_eq!(
            choose_in(
                &pod("db-2", json!({"app": "db"}), None, pref),
                &nodes,
                &pods
            )
            .unwrap(),
            "node-1"
        );
    }

    #[test]
    fn a_full_node_and_no_nodes() {
        let nodes = nodes();
        let pods: Vec<_> = (0..10)
            .map(|i| pod(&format!("p{i}"), json!({}), Some("node-0"), json!({})))
            .collect();
        let e = choose_in(
            &pod(
                "p",
                json!({}),
                None,
                json!({"nodeName": null, "nodeSelector": {"kubernetes.io/hostname": "node-0"}}),
            ),
            &nodes[..1],
            &pods,
        )
        .unwrap_err();
        assert_eq!(e.message, "0/1 nodes are available: 1 Too many pods.");
        let e = choose_in(&pod("p", json!({}), None, json!({})), &[], &[]).unwrap_err();
        assert_eq!(
            e.message,
            "0/0 nodes are available: no nodes available to schedule pods."
        );
    }

    #[test]
    fn claims_must_be_bound_and_gates_hold() {
        let nodes = nodes();
        let with_claim = pod(
            "p",
            json!({}),
            None,
            json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-p"}}]}),
        );
        let claim = |phase: &str, volume: Option<&str>| -> Arc<PersistentVolumeClaim> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": "data-p", "namespace": "ns"},
                    "spec": {"volumeName": volume},
                    "status": {"phase": phase},
                }))
                .unwrap(),
            )
        };
        let run = |claims: &[Arc<PersistentVolumeClaim>]| {
            choose(
                &with_claim,
                &Cluster {
                    nodes: &nodes,
                    pods: &[],
                    claims,
                    namespaces: &[],
                },
            )
        };
        assert_eq!(
            run(&[]).unwrap_err().message,
            "0/3 nodes are available: persistentvolumeclaim \"data-p\" not found."
        );
        assert_eq!(
            run(&[claim("Pending", None)]).unwrap_err().message,
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        );
        assert_eq!(run(&[claim("Bound", Some("pvc-1"))]).unwrap(), "node-0");
        let gated = pod(
            "g",
            json!({}),
            None,
            json!({"schedulingGates": [{"name": "wait"}]}),
        );
        assert_eq!(
            choose_in(&gated, &nodes, &[]).unwrap_err().reason,
            "SchedulingGated"
        );
    }

    #[test]
    fn which_pods_are_the_schedulers() {
        assert!(wants_scheduling(&pod("p", json!({}), None, json!({}))));
        assert!(wants_scheduling(&pod(
            "p",
            json!({}),
            None,
            json!({"schedulerName": "default-scheduler"})
        )));
        assert!(!wants_scheduling(&pod(
            "p",
            json!({}),
            None,
            json!({"schedulerName": "other"})
        )));
        assert!(!wants_scheduling(&pod(
            "p",
            json!({}),
            Some("node-0"),
            json!({})
        )));
        let mut deleting = (*pod("p", json!({}), None, json!({}))).clone();
        deleting.metadata.deletion_timestamp =
            serde_json::from_value(json!("2030-01-01T00:00:00Z")).unwrap();
        assert!(!wants_scheduling(&deleting));
    }

    #[test]
    fn tolerations_as_kubernetes_reads_them() {
        let taint: Taint =
            serde_json::from_value(json!({"key": "k", "value": "v", "effect": "NoSchedule"}))
                .unwrap();
        let t = |v: serde_json::Value| -> Toleration { serde_json::from_value(v).unwrap() };
        assert!(tolerates(&t(json!({"key": "k", "value": "v"})), &taint));
        assert!(tolerates(
            &t(json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"})),
            &taint
        ));
        assert!(!tolerates(
            &t(json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})),
            &taint
        ));
        assert!(!tolerates(&t(json!({"key": "k", "value": "w"})), &taint));
        assert!(tolerates(&t(json!({"operator": "Exists"})), &taint));
    }
}
