//! `down`: removes every process, cgroup, namespace, interface and route one runner made,
//! found by its bridge's name, then checks from the outside that none is left.

use std::fs;
use std::io::ErrorKind;
use std::net::Ipv4Addr;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::ip::{self, ip, ip_json};
use super::{DownArgs, NetError, check_bridge_name};
use crate::container::Cgroup;
use crate::state::NetworkState;

/// What was removed, for the one-line summary.
#[derive(Debug, Default)]
struct Removed {
    processes: usize,
    cgroups: usize,
    netns: usize,
    links: usize,
    bridge: bool,
    blackhole: bool,
}

/// Removes what `network-up` and the Pods made for the network in `args.state_dir`: the
/// containers' processes (killed, thawed first when frozen) and cgroups, the Pods' namespaces
/// and veth pairs, the bridge, the blackhole route and network.json. Nothing to do when there
/// is no network.json; running it again is harmless. Fails, naming it, when anything is
/// still there afterwards (network.json is then kept, so that it can be run again).
pub fn down(args: &DownArgs) -> Result<(), NetError> {
    let path = NetworkState::path(&args.state_dir);
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            eprintln!("pod-runner down: no {}: nothing to do", path.display());
            return Ok(());
        }
        Err(e) => return Err(NetError::io(&path)(e)),
    };
    let net: NetworkState = serde_json::from_slice(&text).map_err(|source| NetError::State {
        path: path.clone(),
        source,
    })?;
    // The name decides what is deleted below: one that is not a runner's could match more.
    check_bridge_name(&net.bridge)?;

    let mut removed = Removed::default();
    let tree = Cgroup::for_bridge(&net.bridge).remove_tree()?;
    Cgroup::remove_runner_dir_if_empty();
    removed.processes += tree.processes;
    removed.cgroups += tree.cgroups;

    // The veths before the namespaces: a namespace's end takes its veth away by itself, a
    // moment later, and a listing in between would name a veth about to go.
    for link in pod_links(&net.bridge)? {
        ip::del_link(&link)?;
        removed.links += 1;
    }
    for ns in ip::netns_names()? {
        if !is_pod_netns(&net.bridge, &ns) {
            continue;
        }
        // A process that is in the namespace but in no container's cgroup (one entered by
        // hand with `ip netns exec`) would keep the namespace alive.
        for pid in ip(&["netns", "pids", &ns])?.split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>()
                && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok()
            {
                removed.processes += 1;
            }
        }
        ip::del_netns(&ns)?;
        removed.netns += 1;
    }

    if ip::link_exists(&net.bridge) {
        ip::del_link(&net.bridge)?;
        removed.bridge = true;
    }
    if ip::blackhole_exists(net.service_cidr)? {
        ip(&["route", "del", "blackhole", &net.service_cidr.to_string()])?;
        removed.blackhole = true;
    }

    let left = left_behind(&net)?;
    if !left.is_empty() {
        return Err(NetError::Left(left));
    }
    fs::remove_file(&path).map_err(NetError::io(&path))?;
    eprintln!(
        "pod-runner down: {}: killed {} processes, removed {} cgroups, {} namespaces, {} veths, {}, {}, {}",
        net.bridge,
        removed.processes,
        removed.cgroups,
        removed.netns,
        removed.links,
        if removed.bridge {
            format!("the bridge {}", net.bridge)
        } else {
            "no bridge (already gone)".to_owned()
        },
        if removed.blackhole {
            format!("the blackhole route {}", net.service_cidr)
        } else {
            "no blackhole route (already gone)".to_owned()
        },
        path.display()
    );
    Ok(())
}

/// Whether `name` is `<bridge>-<a>-<b>-<c>-<d>` (a Pod namespace of this bridge; a bridge name
/// holds no `-`, so another bridge's namespaces never match).
fn is_pod_netns(bridge: &str, name: &str) -> bool {
    name.strip_prefix(bridge)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|rest| rest.replace('-', ".").parse::<Ipv4Addr>().is_ok())
}

/// The host ends of this bridge's veth pairs: the bridge's ports, and veths named
/// `<bridge>` plus four hex digits (one made but not yet on the bridge).
fn pod_links(bridge: &str) -> Result<Vec<String>, NetError> {
    let mut names = Vec::new();
    for link in ip_json(&["-d", "link", "show"])? {
        let Some(name) = link.get("ifname").and_then(|n| n.as_str()) else {
            continue;
        };
        let on_bridge = link.get("master").and_then(|m| m.as_str()) == Some(bridge);
        let is_veth = link
            .get("linkinfo")
            .and_then(|i| i.get("info_kind"))
            .and_then(|k| k.as_str())
            == Some("veth");
        let named = name
            .strip_prefix(bridge)
            .is_some_and(|rest| rest.len() == 4 && rest.chars().all(|c| c.is_ascii_hexdigit()));
        if on_bridge || (is_veth && named) {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// What of this bridge's is still there, checked from the outside (`ip`, the cgroup
/// directory).
fn left_behind(net: &NetworkState) -> Result<Vec<String>, NetError> {
    let mut left = Vec::new();
    for ns in ip::netns_names()? {
        if is_pod_netns(&net.bridge, &ns) {
            left.push(format!("network namespace {ns}"));
        }
    }
    for link in pod_links(&net.bridge)? {
        left.push(format!("interface {link}"));
    }
    let bridges = ip_json(&["link", "show", "type", "bridge"])?;
    if bridges
        .iter()
        .any(|l| l.get("ifname").and_then(|n| n.as_str()) == Some(net.bridge.as_str()))
    {
        left.push(format!("bridge {}", net.bridge));
    }
    if ip::blackhole_exists(net.service_cidr)? {
        left.push(format!("blackhole route {}", net.service_cidr));
    }
    let cgroup = Cgroup::for_bridge(&net.bridge);
    if cgroup.exists() {
        left.push(format!("cgroup {}", cgroup.path().display()));
    }
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_only_its_own_namespaces() {
        assert!(is_pod_netns("mk1", "mk1-10-200-1-2"));
        assert!(!is_pod_netns("mk1", "mk12-10-200-1-2"));
        assert!(!is_pod_netns("mk1", "mk1-other"));
        assert!(!is_pod_netns("mk1", "mk1"));
    }
}
