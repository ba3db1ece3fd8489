//! The Nodes: registered, their status and Lease renewed as a kubelet's are, so that the node
//! lifecycle controller of kube-controller-manager sees them alive (and notices when one is
//! not). A Node's heartbeat can be stopped on purpose with an annotation (a partition drill:
//! its Pods keep running, the control plane loses sight of it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::context::Context;
use crate::state::NodeNetwork;

/// The annotation that stops a Node's heartbeat while its value is `stopped`.
pub const HEARTBEAT_ANNOTATION: &str = "pod-runner.moco-rs.test/heartbeat";
/// The kubelet version the Nodes report (the control plane's).
pub const KUBELET_VERSION: &str = "v1.36.3";
/// The field manager of every write the runner makes.
pub const MANAGER: &str = "pod-runner";
/// Where Node Leases live.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The Lease's renewal period and duration, as the kubelet's defaults (10 s, 40 s).
pub const LEASE_RENEW: Duration = Duration::from_secs(10);
/// How long a Lease is valid without renewal.
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// How often the status (Ready's heartbeat) is posted when nothing changes.
pub const STATUS_EVERY: Duration = Duration::from_secs(40);
/// The port the Nodes announce for a kubelet endpoint.
pub const KUBELET_PORT: i32 = 10250;

/// What went wrong with a Node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Registering (creating or updating) it failed.
    #[error("registering Node {node}: {source}")]
    Register {
        /// The Node.
        node: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Posting its status failed.
    #[error("posting the status of Node {node}: {source}")]
    Status {
        /// The Node.
        node: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Renewing its Lease failed.
    #[error("renewing Lease {LEASE_NAMESPACE}/{node}: {source}")]
    Lease {
        /// The Node (and Lease).
        node: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// Whether the Node's heartbeat is stopped by [`HEARTBEAT_ANNOTATION`].
pub fn heartbeat_stopped(node: &Node) -> bool {
    node.annotations()
        .get(HEARTBEAT_ANNOTATION)
        .is_some_and(|v| v == "stopped")
}

/// The Node's metadata and spec as the runner owns them (server-side apply): its labels and
/// Pod range. Other fields (taints, cordon, other labels) are left to whoever sets them.
pub fn node_object(index: usize, net: &NodeNetwork) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": net.name,
            "labels": {
                "kubernetes.io/hostname": net.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch(),
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": arch(),
                // One zone per Node, so that zone spreading and zone-loss drills have one.
                "topology.kubernetes.io/zone": format!("zone-{index}"),
            },
        },
        "spec": {
            "podCIDR": net.pod_cidr.to_string(),
            "podCIDRs": [net.pod_cidr.to_string()],
        },
    })
}

/// What the machine is, for every Node's `nodeInfo` (read once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// `uname -r`.
    pub kernel: String,
    /// PRETTY_NAME of /etc/os-release.
    pub os_image: String,
    /// The machine's boot id.
    pub boot_id: String,
}

impl Machine {
    /// Reads it; what is missing reads as `unknown`.
    pub fn read() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unknown".to_owned())
        };
        let os_image = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            kernel: read("/proc/sys/kernel/osrelease"),
            os_image,
            boot_id: read("/proc/sys/kernel/random/boot_id"),
        }
    }
}

/// The condition types a kubelet posts, with the status and reason of a healthy Node.
const CONDITIONS: [(&str, &str, &str, &str); 4] = [
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
];

/// When the Node's condition `type_` last became `status`: kept from the Node if it already
/// has that status, else `now` (a transition).
pub fn transition_time(node: Option<&Node>, type_: &str, status: &str, now: &str) -> String {
    node.and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| now.to_owned())
}

/// The Node's whole status as the runner owns it (server-side apply): healthy conditions with
/// a fresh heartbeat, addresses, capacity, versions. `current` is the Node as last seen, for
/// the conditions' transition times.
pub fn node_status(
    net: &NodeNetwork,
    machine: &Machine,
    current: Option<&Node>,
    now: &str,
) -> Value {
    let conditions: Vec<Value> = CONDITIONS
        .iter()
        .map(|(type_, status, reason, message)| {
            json!({
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": transition_time(current, type_, status, now),
            })
        })
        .collect();
    // What the scheduler counts against; the machine itself is shared by every Node.
    let resources = json!({
        "cpu": "2",
        "memory": "8Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    });
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": net.name},
        "status": {
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": net.address.to_string()},
                {"type": "Hostname", "address": net.name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
            "nodeInfo": {
                "machineID": machine_id(&net.name),
                "systemUUID": machine_id(&net.name),
                "bootID": machine.boot_id,
                "kernelVersion": machine.kernel,
                "osImage": machine.os_image,
                "containerRuntimeVersion": "moco-pod-runner://0.1",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": arch(),
            },
        },
    })
}

/// The Node's Lease, renewed `now`, owned by the Node (deleted with it, as the kubelet's).
pub fn lease_object(node: &str, node_uid: Option<&str>, now: &str) -> Value {
    let mut metadata = json!({"name": node, "namespace": LEASE_NAMESPACE});
    if let Some(uid) = node_uid {
        metadata["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]);
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": now,
        },
    })
}

/// Whether the Node as seen has a Ready condition other than True (set so by the node
/// lifecycle controller while the heartbeat was stopped): then the status is posted at once.
pub fn needs_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status != "True")
}

/// The kubelet's name for the machine's architecture.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// A stable per-Node machine id (32 hex digits, as /etc/machine-id).
fn machine_id(name: &str) -> String {
    // FNV-1a, twice with different seeds: stable across runs, unlike std's hasher.
    let fnv = |seed: u64| {
        name.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x8422_2325_cbf2_9ce4)
    )
}

/// Now as the API's `Time` (seconds).
pub fn now_time() -> String {
    serde_json::to_value(Time(Timestamp::now()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Now as the API's `MicroTime`.
pub fn now_micro() -> String {
    serde_json::to_value(MicroTime(Timestamp::now()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Creates or updates every Node of the network, then posts its status and Lease, so that
/// `run` starts with registered, Ready Nodes.
pub async fn register_all(ctx: &Context) -> Result<(), NodeError> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let machine = Machine::read();
    let apply = PatchParams::apply(MANAGER).force();
    for (i, net) in ctx.network.nodes.iter().enumerate() {
        let node = nodes
            .patch(&net.name, &apply, &Patch::Apply(node_object(i, net)))
            .await
            .map_err(|source| NodeError::Register {
                node: net.name.clone(),
                source,
            })?;
        post_status(&nodes, net, &machine, Some(&node)).await?;
        renew_lease(ctx, &net.name, node.uid().as_deref()).await?;
        info!(node = %net.name, address = %net.address, pod_cidr = %net.pod_cidr, "Node registered");
    }
    Ok(())
}

async fn post_status(
    nodes: &Api<Node>,
    net: &NodeNetwork,
    machine: &Machine,
    current: Option<&Node>,
) -> Result<(), NodeError> {
    let status = node_status(net, machine, current, &now_time());
    nodes
        .patch_status(
            &net.name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(status),
        )
        .await
        .map_err(|source| NodeError::Status {
            node: net.name.clone(),
            source,
        })?;
    Ok(())
}

async fn renew_lease(ctx: &Context, node: &str, uid: Option<&str>) -> Result<(), NodeError> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(ctx.client.clone(), LEASE_NAMESPACE);
    leases
        .patch(
            node,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(lease_object(node, uid, &now_micro())),
        )
        .await
        .map_err(|source| NodeError::Lease {
            node: node.to_owned(),
            source,
        })?;
    Ok(())
}

/// One Node's heartbeat bookkeeping.
#[derive(Debug)]
struct Beat {
    net: NodeNetwork,
    /// When the Lease and the status are due.
    lease_due: Instant,
    status_due: Instant,
    /// While Ready is not True on the Node, the status is posted again from then on.
    ready_retry: Instant,
    /// The annotation's state as last acted on (to log and resume once).
    stopped: bool,
    /// Logged once that the Node object is gone.
    gone: bool,
}

/// After a failed write, the next try.
const RETRY: Duration = Duration::from_secs(2);
/// How often the loop looks at the Nodes (the annotation takes effect within it).
const TICK: Duration = Duration::from_secs(1);

/// Renews every Node's Lease each [`LEASE_RENEW`] and its status each [`STATUS_EVERY`] (and
/// at once when its Ready condition is not True), except while [`HEARTBEAT_ANNOTATION`] is
/// `stopped`. Write failures are logged and retried: a kubelet keeps going too.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) -> Result<(), NodeError> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let store: Store<Node> =
        crate::store::reflect(nodes.clone(), Arc::new(Notify::new()), shutdown.clone());
    if !crate::store::ready(&store, &shutdown).await {
        return Ok(());
    }
    let machine = Machine::read();
    let now = Instant::now();
    let mut beats: Vec<Beat> = ctx
        .network
        .nodes
        .iter()
        .map(|net| Beat {
            net: net.clone(),
            // register_all just renewed both.
            lease_due: now + LEASE_RENEW,
            status_due: now + STATUS_EVERY,
            ready_retry: now + RETRY,
            stopped: false,
            gone: false,
        })
        .collect();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tick.tick() => {}
        }
        for beat in &mut beats {
            let Some(node) = store.get(&ObjectRef::new(&beat.net.name)) else {
                if !beat.gone {
                    warn!(node = %beat.net.name, "the Node object is gone: no heartbeat (a kubelet re-registers only when restarted)");
                    beat.gone = true;
                }
                continue;
            };
            beat.gone = false;
            heartbeat(&ctx, &nodes, &machine, beat, &node).await;
        }
    }
}

async fn heartbeat(
    ctx: &Context,
    nodes: &Api<Node>,
    machine: &Machine,
    beat: &mut Beat,
    node: &Node,
) {
    let now = Instant::now();
    if heartbeat_stopped(node) {
        if !beat.stopped {
            info!(node = %beat.net.name, "heartbeat stopped by the {HEARTBEAT_ANNOTATION} annotation: no Lease or status renewal");
            beat.stopped = true;
        }
        return;
    }
    if beat.stopped {
        info!(node = %beat.net.name, "heartbeat resumed");
        beat.stopped = false;
        beat.lease_due = now;
        beat.status_due = now;
    }
    if now >= beat.lease_due {
        match renew_lease(ctx, &beat.net.name, node.uid().as_deref()).await {
            Ok(()) => beat.lease_due = now + LEASE_RENEW,
            Err(e) => {
                warn!("{e}");
                beat.lease_due = now + RETRY;
            }
        }
    }
    if now >= beat.status_due || (needs_ready(node) && now >= beat.ready_retry) {
        beat.ready_retry = now + RETRY;
        match post_status(nodes, &beat.net, machine, Some(node)).await {
            Ok(()) => beat.status_due = now + STATUS_EVERY,
            Err(e) => {
                warn!("{e}");
                beat.status_due = now + RETRY;
            }
        }
    }
}

/// The labels every Node gets (for tests and the scheduler's unit tests).
pub fn labels(index: usize, net: &NodeNetwork) -> BTreeMap<String, String> {
    node_object(index, net)["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> NodeNetwork {
        NodeNetwork {
            name: "node-1".into(),
            address: "10.200.0.2".parse().unwrap(),
            pod_cidr: "10.200.2.0/24".parse().unwrap(),
        }
    }

    fn node_with(ready: &str, since: &str, annotations: &[(&str, &str)]) -> Node {
        serde_json::from_value(json!({
            "metadata": {
                "name": "node-1",
                "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
            },
            "status": {"conditions": [
                {"type": "Ready", "status": ready, "lastTransitionTime": since},
            ]},
        }))
        .unwrap()
    }

    #[test]
    fn the_node_object_names_its_range_and_labels() {
        let o = node_object(1, &net());
        assert_eq!(o["spec"]["podCIDR"], "10.200.2.0/24");
        assert_eq!(o["spec"]["podCIDRs"], json!(["10.200.2.0/24"]));
        let l = labels(1, &net());
        assert_eq!(l["kubernetes.io/hostname"], "node-1");
        assert_eq!(l["kubernetes.io/os"], "linux");
        assert_eq!(l["topology.kubernetes.io/zone"], "zone-1");
        assert!(
            o["spec"].get("taints").is_none(),
            "taints are not the runner's"
        );
    }

    #[test]
    fn status_keeps_a_transition_time_unless_the_status_changes() {
        let m = Machine {
            kernel: "6".into(),
            os_image: "x".into(),
            boot_id: "b".into(),
        };
        let now = "2030-01-01T00:00:10Z";
        let ready = node_with("True", "2030-01-01T00:00:00Z", &[]);
        let s = node_status(&net(), &m, Some(&ready), now);
        let cond = |s: &Value, t: &str| {
            s["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == t)
                .unwrap()
                .clone()
        };
        let r = cond(&s, "Ready");
        assert_eq!(r["status"], "True");
        assert_eq!(r["reason"], "KubeletReady");
        assert_eq!(r["lastHeartbeatTime"], now);
        assert_eq!(r["lastTransitionTime"], "2030-01-01T00:00:00Z");
        // MemoryPressure is not on the Node yet: a transition now.
        assert_eq!(cond(&s, "MemoryPressure")["lastTransitionTime"], now);
        assert_eq!(cond(&s, "MemoryPressure")["status"], "False");

        let unknown = node_with("Unknown", "2030-01-01T00:00:05Z", &[]);
        assert!(needs_ready(&unknown));
        assert!(!needs_ready(&ready));
        let s = node_status(&net(), &m, Some(&unknown), now);
        assert_eq!(cond(&s, "Ready")["lastTransitionTime"], now);

        assert_eq!(s["status"]["addresses"][0]["address"], "10.200.0.2");
        assert_eq!(s["status"]["nodeInfo"]["kubeletVersion"], KUBELET_VERSION);
        assert_eq!(
            s["status"]["nodeInfo"]["containerRuntimeVersion"],
            "moco-pod-runner://0.1"
        );
        assert_eq!(s["status"]["allocatable"]["pods"], "110");
    }

    #[test]
    fn the_annotation_stops_the_heartbeat() {
        assert!(!heartbeat_stopped(&node_with(
            "True",
            "2030-01-01T00:00:00Z",
            &[]
        )));
        assert!(heartbeat_stopped(&node_with(
            "True",
            "2030-01-01T00:00:00Z",
            &[(HEARTBEAT_ANNOTATION, "stopped")]
        )));
        assert!(!heartbeat_stopped(&node_with(
            "True",
            "2030-01-01T00:00:00Z",
            &[(HEARTBEAT_ANNOTATION, "running")]
        )));
    }

    #[test]
    fn the_lease_is_owned_by_its_node() {
        let l = lease_object("node-1", Some("u-1"), "t");
        assert_eq!(l["metadata"]["namespace"], LEASE_NAMESPACE);
        assert_eq!(l["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(l["spec"]["holderIdentity"], "node-1");
        assert_eq!(l["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(l["spec"]["renewTime"], "t");
        assert!(now_micro().contains('.'), "MicroTime");
        assert_eq!(machine_id("node-1").len(), 32);
        assert_ne!(machine_id("node-1"), machine_id("node-2"));
        assert!(now_time().ends_with('Z') && !now_time().contains('.'));
    }
}
