//! The runner's state directory and the network description that `pod-runner network-up`
//! writes there for `run` and `down` to read.
//!
//! ```text
//! STATE/network.json                      NetworkState (network-up writes it, down reads it)
//! STATE/pods/<pod-uid>/                   one Pod: volumes/, hosts, containers/<name>-<n>/
//! STATE/logs/<ns>_<pod>_<uid>/<container>/<n>.log   every start of every container
//! STATE/volumes/<pv-name>/                a provisioned PersistentVolume's data
//! ```

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cidr::Cidr;

/// What `network-up` made: read by `run` (Node addresses and Pod ranges) and `down`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkState {
    /// The bridge's interface name; every interface and namespace the runner makes starts with it.
    pub bridge: String,
    /// The bridge's network: Node addresses and every Pod address are in it.
    pub pod_cidr: Cidr,
    /// The Service range, routed to a blackhole on the host (there is no kube-proxy).
    pub service_cidr: Cidr,
    /// The Nodes, in order.
    pub nodes: Vec<NodeNetwork>,
}

/// One Node's share of the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeNetwork {
    /// The Node's name (`node-0`, `node-1`, …).
    pub name: String,
    /// Its address on the bridge (the Node's InternalIP and the Pods' hostIP).
    pub address: Ipv4Addr,
    /// Its Pods' range (the Node's `spec.podCIDR`).
    pub pod_cidr: Cidr,
}

impl NetworkState {
    /// The layout for `nodes` Nodes in `pod_cidr`: Node i has address `.0.(i+1)` and Pod range
    /// the (i+1)th /24, so that Node addresses and Pod addresses never collide.
    pub fn plan(bridge: &str, pod_cidr: Cidr, service_cidr: Cidr, nodes: u32) -> Option<Self> {
        let nodes = (0..nodes)
            .map(|i| {
                Some(NodeNetwork {
                    name: format!("node-{i}"),
                    address: pod_cidr.nth(i + 1)?,
                    pod_cidr: pod_cidr.subnet(24, i + 1)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            bridge: bridge.to_owned(),
            pod_cidr,
            service_cidr,
            nodes,
        })
    }

    /// The file it is kept in.
    pub fn path(state_dir: &Path) -> PathBuf {
        state_dir.join("network.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_keeps_node_and_pod_addresses_apart() {
        let s = NetworkState::plan(
            "mk0",
            "10.200.0.0/16".parse().unwrap(),
            "10.160.0.0/16".parse().unwrap(),
            3,
        )
        .unwrap();
        let addrs: Vec<_> = s.nodes.iter().map(|n| n.address.to_string()).collect();
        assert_eq!(addrs, ["10.200.0.1", "10.200.0.2", "10.200.0.3"]);
        let ranges: Vec<_> = s.nodes.iter().map(|n| n.pod_cidr.to_string()).collect();
        assert_eq!(ranges, ["10.200.1.0/24", "10.200.2.0/24", "10.200.3.0/24"]);
    }
}
