//! Running `ip` and reading what it prints.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use super::NetError;
use crate::cidr::Cidr;

/// Runs `ip ARGS…`, returning its stdout; a failure names the command and carries its stderr.
pub(super) fn ip(args: &[&str]) -> Result<String, NetError> {
    let command = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| NetError::Spawn {
            command: command.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(NetError::Command {
            command,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ip -j ARGS…` and parses the JSON array it prints (empty output is an empty array).
pub(super) fn ip_json(args: &[&str]) -> Result<Vec<serde_json::Value>, NetError> {
    let mut all = vec!["-j"];
    all.extend_from_slice(args);
    let out = ip(&all)?;
    if out.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(&out).map_err(|e| NetError::Output {
        command: format!("ip {}", all.join(" ")),
        why: e.to_string(),
    })
}

/// Whether the host has an interface of that name (read from sysfs: no process to start).
pub(super) fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Deletes interface `name`; fine when it is gone, or goes meanwhile (a veth whose peer's
/// namespace is being destroyed goes by itself, a moment later).
pub(super) fn del_link(name: &str) -> Result<(), NetError> {
    match ip(&["link", "del", name]) {
        Err(_) if !link_exists(name) => Ok(()),
        result => result.map(drop),
    }
}

/// Deletes namespace `name` (its name: it lives on while a process is in it); fine when it
/// is gone.
pub(super) fn del_netns(name: &str) -> Result<(), NetError> {
    match ip(&["netns", "del", name]) {
        Err(_) if !netns_exists(name) => Ok(()),
        result => result.map(drop),
    }
}

/// Whether `ip netns` has a namespace of that name.
pub(super) fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// The names `ip netns list` shows.
pub(super) fn netns_names() -> Result<Vec<String>, NetError> {
    Ok(ip_json(&["netns", "list"])?
        .iter()
        .filter_map(|n| n.get("name")?.as_str().map(str::to_owned))
        .collect())
}

/// One route of the host, its destination as a network.
#[derive(Debug, Clone)]
pub(super) struct Route {
    pub dst: Cidr,
    pub kind: Option<String>,
    /// The route as `ip` printed it, for messages.
    pub text: String,
}

/// The host's IPv4 routes in every table, the default routes left out (they overlap
/// everything and are no sign of another network).
pub(super) fn routes() -> Result<Vec<Route>, NetError> {
    let all = ip_json(&["-4", "route", "show", "table", "all"])?;
    let mut routes = Vec::new();
    for r in all {
        let Some(dst) = r.get("dst").and_then(|d| d.as_str()) else {
            continue;
        };
        if dst == "default" {
            continue;
        }
        let (addr, prefix) = dst.split_once('/').unwrap_or((dst, "32"));
        let (Ok(addr), Ok(prefix)) = (addr.parse::<Ipv4Addr>(), prefix.parse::<u8>()) else {
            continue;
        };
        let Some(cidr) = Cidr::new(addr, prefix) else {
            continue;
        };
        routes.push(Route {
            dst: cidr,
            kind: r.get("type").and_then(|t| t.as_str()).map(str::to_owned),
            text: r.to_string(),
        });
    }
    Ok(routes)
}

/// Whether the blackhole route for `cidr` is there.
pub(super) fn blackhole_exists(cidr: Cidr) -> Result<bool, NetError> {
    Ok(routes()?
        .iter()
        .any(|r| r.dst == cidr && r.kind.as_deref() == Some("blackhole")))
}
