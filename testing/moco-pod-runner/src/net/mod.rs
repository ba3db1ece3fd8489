//! The runner's network: the bridge with the Node addresses, the Service range routed to a
//! blackhole, one network namespace per Pod joined to the bridge by a veth pair, and the faults
//! that cut a Pod off.
//!
//! Everything is made with `ip` (iproute2), synchronously: these are set-up and tear-down steps
//! of milliseconds, and a failing command's own message is the clearest explanation there is.
//! Every name starts with the bridge's name, so that `down` finds everything one runner made
//! and nothing another made.

mod bridge;
mod down;
mod ip;
mod pod;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitStatus;

use crate::cidr::Cidr;
use crate::container::CgroupError;

pub use bridge::up;
pub use down::down;
pub use pod::{PodNetwork, add_pod, cut, remove_pod, restore};

/// `pod-runner network-up`.
#[derive(Debug, Clone, clap::Args)]
pub struct UpArgs {
    /// The runner's state directory (made when missing); network.json is written there.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// The bridge's name: up to 8 lowercase letters and digits, so that the Pods' interface
    /// names derived from it fit Linux's 15 characters.
    #[arg(long, default_value = "mocobr0")]
    pub bridge: String,
    /// The bridge's network, a /16: the Node addresses and every Node's Pod range are in it.
    #[arg(long, default_value = "10.200.0.0/16")]
    pub pod_cidr: Cidr,
    /// The Service range, routed to a blackhole on the host.
    #[arg(long, default_value = "10.96.0.0/16")]
    pub service_cidr: Cidr,
    /// How many Nodes.
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
}

/// `pod-runner down`.
#[derive(Debug, Clone, clap::Args)]
pub struct DownArgs {
    /// The runner's state directory (network.json says what to remove).
    #[arg(long)]
    pub state_dir: PathBuf,
}

/// Why a network step failed, naming the command, file or flag.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// An argument was refused before anything was made.
    #[error("{flag}: {why}")]
    Refused {
        /// The flag (`--bridge`, `--pod-cidr`, …).
        flag: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// A command could not be started at all.
    #[error("`{command}` could not run: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// What it printed on stderr (trimmed).
        stderr: String,
    },
    /// A command printed something other than the JSON expected.
    #[error("`{command}` printed what is not the JSON expected: {why}")]
    Output {
        /// The command line.
        command: String,
        /// What was wrong.
        why: String,
    },
    /// A file could not be read, written or removed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// network.json is not a network description.
    #[error("{} is not a network description: {source}", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A Pod address that cannot be a Pod's.
    #[error("{address} cannot be a Pod address on bridge {bridge} ({why})")]
    Address {
        /// The address.
        address: Ipv4Addr,
        /// The bridge.
        bridge: String,
        /// Why not.
        why: String,
    },
    /// The containers' cgroups could not be emptied or removed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// `down` finished but found some of what it removes still there.
    #[error("down left behind: {}", .0.join(", "))]
    Left(Vec<String>),
    /// A step failed and undoing the steps before it failed too.
    #[error("{error}; undoing what was made before it failed too: {undo}")]
    Undo {
        /// The step's failure.
        error: Box<NetError>,
        /// The undo's failure.
        undo: Box<NetError>,
    },
}

impl NetError {
    fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}

/// The Pod CIDR the runner requires (each Node takes a /24 of it; see `NetworkState::plan`).
const POD_PREFIX: u8 = 16;

/// Whether a bridge name is one the runner accepts: short enough that `<bridge>` plus four hex
/// digits fits an interface name, and without `-`, so that `<bridge>-<a>-<b>-<c>-<d>` names
/// one runner's namespaces only.
fn check_bridge_name(bridge: &str) -> Result<(), NetError> {
    let ok = (1..=8).contains(&bridge.len())
        && bridge.starts_with(|c: char| c.is_ascii_lowercase())
        && bridge
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(NetError::Refused {
            flag: "--bridge",
            why: format!(
                "{bridge:?} is not 1 to 8 lowercase letters and digits starting with a letter"
            ),
        })
    }
}
