//! `network-up`: the bridge, the Node addresses on it and the Service blackhole.

use std::fs;
use std::io::Write;

use super::ip::{self, ip};
use super::{NetError, POD_PREFIX, UpArgs, check_bridge_name};
use crate::state::NetworkState;

/// Makes the network `args` describe and writes STATE/network.json. Refuses, naming the flag,
/// a bridge that exists, a range that overlaps a route of the host, or a state directory that
/// already has a network; when a step fails, what was made before it is removed again, so
/// that nothing is left half made.
pub fn up(args: &UpArgs) -> Result<(), NetError> {
    let plan = check(args)?;
    fs::create_dir_all(&args.state_dir).map_err(NetError::io(&args.state_dir))?;
    let mut made = Made::default();
    match make(&plan, args, &mut made) {
        Ok(()) => Ok(()),
        Err(error) => match made.undo(&plan) {
            Ok(()) => Err(error),
            Err(undo) => Err(NetError::Undo {
                error: Box::new(error),
                undo: Box::new(undo),
            }),
        },
    }
}

/// Every refusal, before anything is made.
fn check(args: &UpArgs) -> Result<NetworkState, NetError> {
    check_bridge_name(&args.bridge)?;
    if args.pod_cidr.prefix() != POD_PREFIX {
        return Err(NetError::Refused {
            flag: "--pod-cidr",
            why: format!("{} is not a /{POD_PREFIX}", args.pod_cidr),
        });
    }
    if args.service_cidr.overlaps(&args.pod_cidr) {
        return Err(NetError::Refused {
            flag: "--service-cidr",
            why: format!(
                "{} overlaps --pod-cidr {}",
                args.service_cidr, args.pod_cidr
            ),
        });
    }
    let plan = (args.nodes > 0)
        .then(|| NetworkState::plan(&args.bridge, args.pod_cidr, args.service_cidr, args.nodes))
        .flatten()
        .ok_or_else(|| NetError::Refused {
            flag: "--nodes",
            why: format!(
                "{} Nodes do not fit {} (1 to 255, a /24 each)",
                args.nodes, args.pod_cidr
            ),
        })?;
    let state = NetworkState::path(&args.state_dir);
    if state.exists() {
        return Err(NetError::Refused {
            flag: "--state-dir",
            why: format!(
                "{} already exists: a network is up for this state directory (run `pod-runner down` first)",
                state.display()
            ),
        });
    }
    if ip::link_exists(&args.bridge) {
        return Err(NetError::Refused {
            flag: "--bridge",
            why: format!("an interface named {} already exists", args.bridge),
        });
    }
    for route in ip::routes()? {
        for (flag, cidr) in [
            ("--pod-cidr", args.pod_cidr),
            ("--service-cidr", args.service_cidr),
        ] {
            if route.dst.overlaps(&cidr) {
                return Err(NetError::Refused {
                    flag,
                    why: format!("{cidr} overlaps the host's route {}", route.text),
                });
            }
        }
    }
    Ok(plan)
}

/// What `make` has made so far, for undoing it.
#[derive(Debug, Default)]
struct Made {
    bridge: bool,
    blackhole: bool,
}

impl Made {
    /// Removes what was made, newest first (the addresses go with the bridge).
    fn undo(&self, plan: &NetworkState) -> Result<(), NetError> {
        if self.blackhole {
            ip(&["route", "del", "blackhole", &plan.service_cidr.to_string()])?;
        }
        if self.bridge {
            ip(&["link", "del", &plan.bridge])?;
        }
        Ok(())
    }
}

fn make(plan: &NetworkState, args: &UpArgs, made: &mut Made) -> Result<(), NetError> {
    let bridge = plan.bridge.as_str();
    ip(&["link", "add", bridge, "type", "bridge"])?;
    made.bridge = true;
    for node in &plan.nodes {
        let address = format!("{}/{}", node.address, plan.pod_cidr.prefix());
        ip(&["addr", "add", &address, "dev", bridge])?;
    }
    ip(&["link", "set", bridge, "up"])?;
    ip(&["route", "add", "blackhole", &plan.service_cidr.to_string()])?;
    made.blackhole = true;

    let path = NetworkState::path(&args.state_dir);
    let json = serde_json::to_vec_pretty(plan).map_err(|source| NetError::State {
        path: path.clone(),
        source,
    })?;
    // create_new: a network.json that appeared since the check is not overwritten.
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(NetError::io(&path))?;
    if let Err(e) = file.write_all(&json).and_then(|()| file.sync_all()) {
        let _ = fs::remove_file(&path);
        return Err(NetError::Io { path, source: e });
    }
    Ok(())
}
