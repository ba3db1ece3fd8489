//! `moco local scale`: changing the number of instances of a cluster, running or not.
//!
//! Growing is what a StatefulSet does when `spec.replicas` rises: new instance slots with
//! new, empty datadirs (here initialised with MOCO's accounts and left running), then the
//! new size in `cluster.json`. A running manager sees the new size and starts a generation
//! for it ([`super::run`]); the engine then brings the new instances in as learners and makes
//! them members once they caught up (docs/clustering.md, "Growing without a write stall").
//! Nothing of the running instances changes, and the endpoints keep their connections.
//!
//! Shrinking is what this project's operator does with a StatefulSet when `spec.replicas`
//! drops: the new size goes to `cluster.json` (`shrinkingTo`) while every instance keeps
//! running. The engine switches a leaving primary over, stops the leaving instances from
//! acknowledging and, once no acknowledged commit depends on them, records the new member
//! count; then the manager stops them and keeps their directories under `retired/`
//! ([`retire_leaving`]), as a StatefulSet keeps the volumes of the Pods it removes
//! (docs/clustering.md, "Shrinking").

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use moco_core::facts::Flavor;

use super::error::LocalError;
use super::files::FileLock;
use super::layout::Layout;
use super::manifest::{Manifest, check_replicas};
use super::secret::Secret;
use super::servers;
use moco_adapters::mysqld::LocalMysqld;

/// What a scale request does, decided before anything is touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScalePlan {
    /// Already that size.
    Unchanged,
    /// New instances `from..to` are created.
    Grow {
        /// The current size.
        from: u32,
        /// The new size.
        to: u32,
    },
    /// Instances `to..from` leave once the engine lets them.
    Shrink {
        /// The instances running.
        from: u32,
        /// The new size.
        to: u32,
    },
}

/// Checks a scale request against the cluster: `--replicas` odd and in range, a cluster that
/// was fully created, no other shrink under way, and (to grow) the new instances' ports free.
pub fn plan(manifest: &Manifest, replicas: u32) -> Result<ScalePlan, LocalError> {
    check_replicas(replicas)?;
    if manifest.phase != super::manifest::Phase::Ready {
        return Err(LocalError::other(
            "cluster.json",
            "the cluster was never fully created (`up` failed); remove it with `moco local down --wipe`",
        ));
    }
    let from = manifest.replicas;
    match manifest.shrinking_to {
        // Asking again for the shrink under way waits for it.
        Some(to) if to == replicas => return Ok(ScalePlan::Shrink { from, to }),
        Some(to) => {
            return Err(LocalError::other(
                format!("--replicas {replicas}"),
                format!(
                    "a shrink from {from} to {to} instances is under way; wait until it finished (`moco local status`) before asking for another size"
                ),
            ));
        }
        None => {}
    }
    if replicas == from {
        return Ok(ScalePlan::Unchanged);
    }
    if manifest.flavor == Flavor::Mysql {
        // A MySQL instance's X protocol and admin ports are placed after every instance's
        // port, by the cluster's size: a new size would move them.
        return Err(LocalError::other(
            format!("--replicas {replicas}"),
            "changing the size of a local MySQL cluster is not supported (its X protocol and admin ports are laid out by the cluster's size); MariaDB clusters can grow and shrink",
        ));
    }
    if replicas < from {
        return Ok(ScalePlan::Shrink { from, to: replicas });
    }
    Manifest::check_port_range(manifest.base_port, replicas)?;
    for index in from..replicas {
        let port = manifest.instance_port(index);
        if TcpListener::bind(("127.0.0.1", port)).is_err() {
            return Err(LocalError::PortInUse {
                port,
                what: format!("--replicas {replicas}: instance {index}"),
            });
        }
    }
    Ok(ScalePlan::Grow { from, to: replicas })
}

/// Scales the cluster in `layout` to `replicas` instances.
///
/// Growing creates and initialises the new instances (left running, read-only, with MOCO's
/// accounts), then writes the new size; on a failure the new instances are stopped and
/// removed and `cluster.json` is left as it was. Shrinking only records the new size
/// (`shrinkingTo`): the running manager does the rest, and a stopped cluster does it when it
/// is resumed.
pub async fn scale(layout: &Layout, replicas: u32) -> Result<ScalePlan, LocalError> {
    let lock_path = layout.root().join("scale.lock");
    let Some(_lock) = FileLock::try_acquire(&lock_path)? else {
        return Err(LocalError::other(
            layout.root().display().to_string(),
            "another `moco local scale` is changing this cluster right now",
        ));
    };
    let mut manifest = Manifest::load(layout)?;
    let plan = plan(&manifest, replicas)?;
    let (from, to) = match plan {
        ScalePlan::Unchanged => return Ok(plan),
        ScalePlan::Shrink { to, .. } => {
            manifest.shrinking_to = Some(to);
            manifest.save(layout)?;
            return Ok(plan);
        }
        ScalePlan::Grow { from, to } => (from, to),
    };
    let binary = manifest.server_binary()?;
    let secret = Secret::load(layout)?;
    let mut grown = manifest.clone();
    grown.replicas = to;
    let mut created: Vec<(u32, Arc<LocalMysqld>)> = Vec::new();
    let result = async {
        for index in from..to {
            // A leftover (of a failed attempt, or of a shrink stopped before it moved the
            // directory away) is kept under `retired/`, never reused.
            retire_dir(layout, index)?;
            let server = Arc::new(servers::write_instance(layout, &grown, &binary, index)?);
            created.push((index, Arc::clone(&server)));
        }
        let inits = created
            .iter()
            .map(|(_, s)| servers::initialize_instance(layout, &grown, &secret, s));
        for r in futures::future::join_all(inits).await {
            r?;
        }
        manifest.replicas = to;
        manifest.save(layout)
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "growing failed; removing the new instances");
        let _ = servers::stop_servers(&created, u32::MAX, Duration::from_secs(30)).await;
        for (index, _) in &created {
            let _ = std::fs::remove_dir_all(layout.instance_dir(*index));
        }
        return Err(e);
    }
    Ok(plan)
}

/// Moves instance `index`'s directory, if any, to `retired/<index>-<unix seconds>`.
fn retire_dir(layout: &Layout, index: u32) -> Result<(), LocalError> {
    let dir = layout.instance_dir(index);
    if !dir.exists() {
        return Ok(());
    }
    let retired = layout.retired_dir();
    std::fs::create_dir_all(&retired).map_err(|e| LocalError::io(&retired, "create", e))?;
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut target = retired.join(format!("{index}-{since_epoch}"));
    let mut n = 1;
    while target.exists() {
        target = retired.join(format!("{index}-{since_epoch}-{n}"));
        n += 1;
    }
    std::fs::rename(&dir, &target).map_err(|e| LocalError::io(&dir, "move to retired/", e))
}

/// The size a running shrink may now go to: `running`'s `shrinkingTo`, once the recorded
/// status lets the leaving instances go (`ClusterStatus::leaving_may_go`).
pub fn releasable(layout: &Layout, running: &Manifest) -> Option<u32> {
    let to = running.shrinking_to?;
    let status: Option<moco_core::status::ClusterStatus> =
        super::files::read_json_opt(&layout.status()).ok().flatten();
    status.is_some_and(|s| s.leaving_may_go(to)).then_some(to)
}

/// The manager's part of a shrink, between two generations: once the status says the
/// leaving instances may go (`ClusterStatus::leaving_may_go`), stops them, writes the new
/// size to `cluster.json` and moves their directories to `retired/`. True when it did.
/// Each step can be repeated: a crash in between is finished by the next manager.
pub async fn retire_leaving(
    layout: &Layout,
    running: &Manifest,
    servers: &[(u32, Arc<LocalMysqld>)],
    grace: Duration,
) -> Result<bool, LocalError> {
    let Some(to) = releasable(layout, running) else {
        return Ok(false);
    };
    let status: moco_core::status::ClusterStatus =
        super::files::read_json_opt(&layout.status())?.unwrap_or_default();
    let leaving: Vec<(u32, Arc<LocalMysqld>)> = servers
        .iter()
        .filter(|(index, _)| *index >= to)
        .cloned()
        .collect();
    servers::stop_servers(&leaving, status.current_primary_index, grace).await?;
    let mut manifest = Manifest::load(layout)?;
    manifest.replicas = to;
    manifest.shrinking_to = None;
    manifest.save(layout)?;
    for (index, _) in &leaving {
        retire_dir(layout, *index)?;
    }
    tracing::info!(
        from = running.replicas,
        to,
        "the leaving instances stopped; their directories are under retired/"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(flavor: Flavor, replicas: u32) -> Manifest {
        Manifest {
            flavor,
            replicas,
            base_port: 1,
            server_id_base: 1,
            ..Manifest::example()
        }
    }

    #[test]
    fn bad_requests_name_the_flag() {
        let m = manifest(Flavor::Mariadb, 3);
        for (n, says) in [(4, "odd"), (11, "odd")] {
            let e = plan(&m, n).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--replicas {n}")) && e.contains(says),
                "{e}"
            );
        }
        assert_eq!(plan(&m, 3).unwrap(), ScalePlan::Unchanged);
        let e = plan(&manifest(Flavor::Mysql, 3), 5)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--replicas 5") && e.contains("MySQL"), "{e}");
        let e = plan(&manifest(Flavor::Mysql, 3), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--replicas 1") && e.contains("MySQL"), "{e}");
    }

    /// A smaller size is a shrink; asking again for the one under way waits for it, another
    /// size is refused until it finished.
    #[test]
    fn shrinking_is_planned_once_at_a_time() {
        let mut m = manifest(Flavor::Mariadb, 5);
        assert_eq!(plan(&m, 3).unwrap(), ScalePlan::Shrink { from: 5, to: 3 });
        m.shrinking_to = Some(3);
        assert_eq!(m.spec_replicas(), 3);
        assert_eq!(plan(&m, 3).unwrap(), ScalePlan::Shrink { from: 5, to: 3 });
        for other in [1, 5, 7] {
            let e = plan(&m, other).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--replicas {other}")) && e.contains("under way"),
                "{e}"
            );
        }
    }
}
