//! One network namespace per Pod, joined to the bridge by a veth pair, and the faults that
//! cut a Pod off.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use super::NetError;
use super::ip::{self, ip};
use crate::state::NetworkState;

/// A Pod's network: its namespace and the host end of its veth pair. The names follow from the
/// bridge and the address alone, so that a Pod re-created with the same address finds (and
/// replaces) what its predecessor left, and `down` finds everything by the bridge's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNetwork {
    /// The namespace's name for `ip netns` (`<bridge>-<a>-<b>-<c>-<d>`).
    pub netns: String,
    /// The host end of the veth pair, a port of the bridge (`<bridge><c><d>` in hex).
    pub host_veth: String,
    /// The Pod's IP, on `eth0` inside the namespace.
    pub address: Ipv4Addr,
}

impl PodNetwork {
    /// The names for `address` on `net`'s bridge; makes nothing.
    pub fn of(net: &NetworkState, address: Ipv4Addr) -> Self {
        let [a, b, c, d] = address.octets();
        Self {
            netns: format!("{}-{a}-{b}-{c}-{d}", net.bridge),
            host_veth: format!("{}{c:02x}{d:02x}", net.bridge),
            address,
        }
    }

    /// The namespace's file, for `setns` (a container's `spec.netns`).
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.netns)
    }
}

/// Makes the Pod's namespace with `eth0` holding `address` (with the bridge's prefix) and `lo`
/// up, its veth pair's host end on the bridge. What a Pod of the same address left is removed
/// first. There is no default route: the Pod reaches the bridge's network only, as the
/// Service range leads nowhere without kube-proxy anyway.
pub fn add_pod(net: &NetworkState, address: Ipv4Addr) -> Result<PodNetwork, NetError> {
    check_address(net, address)?;
    let pod = PodNetwork::of(net, address);
    remove(&pod)?;
    match make(net, &pod) {
        Ok(()) => Ok(pod),
        Err(error) => match remove(&pod) {
            Ok(()) => Err(error),
            Err(undo) => Err(NetError::Undo {
                error: Box::new(error),
                undo: Box::new(undo),
            }),
        },
    }
}

/// Removes the Pod's veth pair and namespace; nothing to do when they are already gone.
pub fn remove_pod(net: &NetworkState, address: Ipv4Addr) -> Result<(), NetError> {
    remove(&PodNetwork::of(net, address))
}

/// Fault injection: takes the host end of the Pod's veth down, so the Pod reaches nothing and
/// nothing reaches it (its loopback still works).
pub fn cut(pod: &PodNetwork) -> Result<(), NetError> {
    ip(&["link", "set", &pod.host_veth, "down"]).map(drop)
}

/// Ends a [`cut`]: the host end is up (and forwarding: the bridge runs no STP) again.
pub fn restore(pod: &PodNetwork) -> Result<(), NetError> {
    ip(&["link", "set", &pod.host_veth, "up"]).map(drop)
}

fn check_address(net: &NetworkState, address: Ipv4Addr) -> Result<(), NetError> {
    let why = if !net.pod_cidr.contains(address) {
        Some(format!("not in {}", net.pod_cidr))
    } else if net.nodes.iter().any(|n| n.address == address) {
        Some("a Node's address".to_owned())
    } else {
        let host = u32::from(address) & !(u32::MAX << (32 - u32::from(net.pod_cidr.prefix())));
        let last = (1u32 << (32 - u32::from(net.pod_cidr.prefix()))) - 1;
        (host == 0 || host == last).then(|| "the network's or its broadcast address".to_owned())
    };
    match why {
        None => Ok(()),
        Some(why) => Err(NetError::Address {
            address,
            bridge: net.bridge.clone(),
            why,
        }),
    }
}

fn make(net: &NetworkState, pod: &PodNetwork) -> Result<(), NetError> {
    let ns = pod.netns.as_str();
    let veth = pod.host_veth.as_str();
    ip(&["netns", "add", ns])?;
    // The peer is made inside the namespace under its final name: no temporary name on the
    // host that two Pods being added at once could both pick.
    ip(&[
        "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
    ])?;
    ip(&["link", "set", veth, "master", &net.bridge, "up"])?;
    let address = format!("{}/{}", pod.address, net.pod_cidr.prefix());
    ip(&["-n", ns, "addr", "add", &address, "dev", "eth0"])?;
    ip(&["-n", ns, "link", "set", "eth0", "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Deleting the host end deletes the pair at once; the namespace is deleted after it (its
/// name only: it lives on while a process is inside, which is why the veth goes first).
fn remove(pod: &PodNetwork) -> Result<(), NetError> {
    if ip::link_exists(&pod.host_veth) {
        ip::del_link(&pod.host_veth)?;
    }
    if ip::netns_exists(&pod.netns) {
        ip::del_netns(&pod.netns)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_follow_the_address() {
        let net = NetworkState::plan(
            "mocobr12",
            "10.200.0.0/16".parse().unwrap(),
            "10.96.0.0/16".parse().unwrap(),
            1,
        )
        .unwrap();
        let pod = PodNetwork::of(&net, "10.200.1.255".parse().unwrap());
        assert_eq!(pod.netns, "mocobr12-10-200-1-255");
        assert_eq!(pod.host_veth, "mocobr1201ff");
        assert!(pod.host_veth.len() <= 15);
        assert_eq!(
            pod.netns_path(),
            PathBuf::from("/run/netns/mocobr12-10-200-1-255")
        );
    }

    #[test]
    fn refuses_addresses_that_are_no_pods() {
        let net = NetworkState::plan(
            "mk0",
            "10.200.0.0/16".parse().unwrap(),
            "10.96.0.0/16".parse().unwrap(),
            2,
        )
        .unwrap();
        for bad in ["10.201.1.2", "10.200.0.2", "10.200.0.0", "10.200.255.255"] {
            let e = check_address(&net, bad.parse().unwrap()).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
        check_address(&net, "10.200.1.2".parse().unwrap()).unwrap();
    }
}
