//! The commands on an existing cluster: `status`, `switchover`, `scale`, `kill`, `freeze`,
//! `thaw`, `start` and `down`. They write requests to the files the manager reads (`pods.json`,
//! `cluster.json`) or signal a server, then wait for the manager's answer where there is one.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::platform::pods::{KillHold, PodsFile, now_ms};
use crate::platform::run::{self as local_run, Freeze};
use crate::platform::scale as local_scale;
use crate::platform::snapshot::ClusterSnapshot;
use crate::platform::{Layout, LocalError, Manifest};
use moco_core::operation::switchover_refusal_message;
use moco_core::state::ClusterState;
use moco_core::status::ClusterStatus;

use crate::error::{Error, usage};
use crate::options::{
    DownOptions, InstanceOptions, KillOptions, ScaleOptions, StartOptions, StatusOptions,
    SwitchoverOptions,
};
use crate::output::{out, print_out};
use crate::status::{LocalStatus, live_pid, no_failover_note};

/// Opens an existing cluster directory (refusing anything else).
pub(crate) fn open(dir: &Path) -> Result<(Layout, Manifest), Error> {
    let layout = Layout::new(dir);
    let manifest = Manifest::load(&layout).map_err(|e| match e {
        LocalError::NotACluster { .. } | LocalError::Foreign { .. } => usage(format!("--dir: {e}")),
        other => Error::Local(other),
    })?;
    Ok((layout, manifest))
}

/// Opens an existing cluster directory with an instance `index` (`N` on the command line).
fn open_instance(dir: &Path, index: u32) -> Result<(Layout, Manifest), Error> {
    let (layout, manifest) = open(dir)?;
    manifest
        .check_index(index)
        .map_err(|e| usage(format!("N = {index}: {e}")))?;
    Ok((layout, manifest))
}

/// `status`: prints the cluster's state, roles, endpoints and per-instance replication (JSON
/// with `json`).
pub fn status(options: StatusOptions) -> Result<(), Error> {
    let (layout, manifest) = open(&options.dir)?;
    let manager = local_run::running_manager(&layout)?;
    let snapshot = ClusterSnapshot::load(&layout)?;
    let status = LocalStatus::gather(&layout, &manifest, manager, snapshot.as_ref());
    if options.json {
        // Through a JSON value: keys come out sorted, as this command always printed them.
        let text = serde_json::to_value(&status)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .map_err(|e| usage(format!("encoding status: {e}")))?;
        print_out(&format!("{text}\n"));
    } else {
        print_out(&status.render_text(true));
    }
    Ok(())
}

pub(crate) fn require_manager(layout: &Layout) -> Result<u32, Error> {
    local_run::running_manager(layout)?.ok_or_else(|| {
        Error::Local(LocalError::ManagerNotRunning {
            dir: layout.root().to_path_buf(),
        })
    })
}

pub(crate) fn read_status(layout: &Layout) -> Result<ClusterStatus, Error> {
    Ok(crate::platform::files::read_json_opt(&layout.status())?.unwrap_or_default())
}

/// `scale`: changes the number of instances, then waits until the cluster is Healthy at the
/// new size when a manager runs.
pub async fn scale(options: ScaleOptions) -> Result<(), Error> {
    let (layout, manifest) = open(&options.dir)?;
    let started = Instant::now();
    let from = manifest.replicas;
    let plan = local_scale::scale(&layout, options.replicas)
        .await
        .map_err(|e| match e {
            LocalError::Other { .. }
            | LocalError::PortInUse { .. }
            | LocalError::PortRange { .. } => usage(e.to_string()),
            other => Error::Local(other),
        })?;
    if plan == local_scale::ScalePlan::Unchanged {
        out!("the cluster already has {from} instances");
        return Ok(());
    }
    match plan {
        local_scale::ScalePlan::Shrink { from, to } => out!(
            "cluster.json now asks for {to} instances: instances {to}..{} leave once no acknowledged commit needs them (their directories are kept under retired/)",
            from - 1
        ),
        _ => out!(
            "instances {from}..{} created in {:.1} s; cluster.json now says {} instances",
            options.replicas - 1,
            started.elapsed().as_secs_f64(),
            options.replicas
        ),
    }
    if local_run::running_manager(&layout)?.is_none() {
        out!(
            "no manager runs: `moco local resume --dir {}` starts the cluster at its new size",
            layout.root().display()
        );
        return Ok(());
    }
    let deadline = started + options.timeout;
    loop {
        let status = read_status(&layout)?;
        let snapshot = ClusterSnapshot::load(&layout)?;
        let done = snapshot.as_ref().is_some_and(|s| {
            s.is(ClusterState::Healthy)
                && u32::try_from(s.instances.len()).is_ok_and(|n| n == options.replicas)
        }) && status.semi_sync_members == Some(options.replicas)
            && Manifest::load(&layout)?.replicas == options.replicas;
        if done {
            out!(
                "Healthy with {} instance(s) after {:.1} s",
                options.replicas,
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(usage(format!(
                "--timeout {}: the cluster is not Healthy with {} instances yet (state {}); the manager goes on, see `moco local status --dir {}`",
                humantime_like(options.timeout),
                options.replicas,
                snapshot.as_ref().map_or("Unknown", |s| s.state_name()),
                layout.root().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A duration as the flags accept it (`90s`).
fn humantime_like(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// `switchover`: asks the manager to move the primary (to `to`, or to the engine's choice)
/// and waits until it moved; withdraws the request after `timeout`.
pub async fn switchover(options: SwitchoverOptions) -> Result<(), Error> {
    let (layout, manifest) = open(&options.dir)?;
    if manifest.replicas == 1 {
        return Err(usage(format!(
            "--dir {}: a single-instance cluster cannot switch over",
            layout.root().display()
        )));
    }
    require_manager(&layout)?;
    let from = read_status(&layout)?.current_primary_index;
    if let Some(to) = options.to {
        manifest
            .check_index(to)
            .map_err(|e| usage(format!("--to {to}: {e}")))?;
        if to >= manifest.spec_replicas() {
            return Err(usage(format!(
                "--to {to}: instance {to} is leaving (the cluster shrinks to {})",
                manifest.spec_replicas()
            )));
        }
        if to == from {
            out!("instance {to} is already the primary");
            return Ok(());
        }
        let snapshot = ClusterSnapshot::load(&layout)?;
        if let Some(s) = snapshot
            && !s.candidates.contains(&to)
        {
            return Err(usage(format!(
                "--to {to}: instance {to} is not a switchover candidate now (candidates: {:?}; state {})",
                s.candidates,
                s.state_name()
            )));
        }
        // The refusal of an earlier request is not this one's answer.
        PodsFile::update(&layout, |p| {
            p.switchover_to = Some(to);
            p.switchover_refused = None;
        })?;
    } else {
        PodsFile::update(&layout, |p| {
            p.instances.entry(from).or_default().demote = true
        })?;
    }
    let started = Instant::now();
    let deadline = started + options.timeout;
    loop {
        let now = read_status(&layout)?.current_primary_index;
        // Done when the index moved and the primary endpoint follows (role label moved).
        let pods = PodsFile::load(&layout)?;
        let labelled = pods.get(now).role == Some(moco_core::facts::Role::Primary);
        if now != from && options.to.is_none_or(|t| t == now) && labelled {
            out!(
                "primary moved from instance {from} to instance {now} in {} ms",
                started.elapsed().as_millis()
            );
            return Ok(());
        }
        if let Some(to) = options.to
            && now != to
            && pods.switchover_to != Some(to)
        {
            // The manager withdrew the request: it refused the target, and wrote why in the
            // same update (or another request replaced it).
            let reason = withdrawal(&pods, to);
            return Err(usage(format!("--to {to}: {reason}")));
        }
        if local_run::running_manager(&layout)?.is_none() {
            // The request stays: the old primary may already be read-only, and the next
            // manager finishes the switchover (it is crash-only).
            return Err(usage(format!(
                "switchover: the manager stopped before the primary moved (still instance {from}); the request stays and completes once `moco local resume --dir {}` starts the manager again",
                layout.root().display()
            )));
        }
        if Instant::now() >= deadline {
            // Withdraw the request so that it does not fire later by surprise.
            PodsFile::update(&layout, |p| {
                p.switchover_to = None;
                if let Some(m) = p.instances.get_mut(&from) {
                    m.demote = false;
                }
            })?;
            let snapshot = ClusterSnapshot::load(&layout)?;
            let detail = snapshot
                .map(|s| {
                    format!(
                        "state {}, candidates {:?}{}",
                        s.state_name(),
                        s.candidates,
                        s.last_error
                            .map(|e| format!(", last error: {e}"))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            return Err(usage(format!(
                "switchover: the primary is still instance {from} after {} s ({detail}); the request was withdrawn",
                options.timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Why a `switchover --to` request for `to` is gone from `pods`: the manager's refusal, written
/// with the withdrawal, or someone else's change.
fn withdrawal(pods: &PodsFile, to: u32) -> String {
    match (&pods.switchover_refused, pods.switchover_to) {
        (Some((index, reason)), _) if *index == to => switchover_refusal_message(to, reason),
        (_, Some(other)) => format!(
            "the request was replaced by a request for instance {other} before the switchover"
        ),
        (_, None) => "the request was withdrawn before the switchover (by someone else)".to_owned(),
    }
}

/// `kill`: marks instance `index` as held down, then SIGKILLs its server.
pub async fn kill(options: KillOptions) -> Result<(), Error> {
    let index = options.index;
    let (layout, manifest) = open_instance(&options.dir, index)?;
    let now = now_ms();
    let until = if options.keep_down {
        None
    } else {
        Some(now + u64::try_from(options.down_for.as_millis()).unwrap_or(u64::MAX))
    };
    PodsFile::update(&layout, |p| {
        p.instances.entry(index).or_default().kill_hold = Some(KillHold {
            since_ms: now,
            until_ms: until,
        });
    })?;
    let pid = live_pid(&layout, index);
    let before = ClusterSnapshot::load(&layout).ok().flatten();
    let killed = local_run::kill_instance(&layout, &manifest, index).await?;
    let hold = match until {
        None => format!(
            "it stays down until `moco local start --dir {} {index}`",
            layout.root().display(),
        ),
        Some(_) => format!(
            "the manager restarts it after {} s (or `moco local start --dir {} {index}`)",
            options.down_for.as_secs(),
            layout.root().display(),
        ),
    };
    if killed {
        out!(
            "killed instance {index} (pid {}) with SIGKILL; {hold}",
            pid.map_or("?".to_owned(), |p| p.to_string())
        );
    } else {
        out!("instance {index} was not running; {hold}");
    }
    if let Some(note) = before
        .as_ref()
        .and_then(|s| no_failover_note(s, Some(index)))
    {
        out!("{note}");
    }
    Ok(())
}

/// `freeze`: SIGSTOPs instance `index`'s server.
pub fn freeze(options: InstanceOptions) -> Result<(), Error> {
    signal(options, Freeze::Freeze)
}

/// `thaw`: SIGCONTs a frozen instance's server.
pub fn thaw(options: InstanceOptions) -> Result<(), Error> {
    signal(options, Freeze::Thaw)
}

fn signal(options: InstanceOptions, what: Freeze) -> Result<(), Error> {
    let index = options.index;
    let (layout, manifest) = open_instance(&options.dir, index)?;
    let done = local_run::freeze_instance(&layout, &manifest, index, what)?;
    match (done, what) {
        (Some(pid), Freeze::Freeze) => out!(
            "froze instance {index} (pid {pid}) with SIGSTOP; `moco local thaw --dir {} {index}` resumes it",
            layout.root().display(),
        ),
        (Some(pid), Freeze::Thaw) => {
            out!("thawed instance {index} (pid {pid}) with SIGCONT")
        }
        (None, _) => out!("instance {index} is not running"),
    }
    Ok(())
}

/// `start`: lifts a killed instance's hold and waits until the manager started it.
pub async fn start(options: StartOptions) -> Result<(), Error> {
    let index = options.index;
    let (layout, _manifest) = open_instance(&options.dir, index)?;
    PodsFile::update(&layout, |p| {
        if let Some(m) = p.instances.get_mut(&index) {
            m.kill_hold = None;
        }
    })?;
    require_manager(&layout)?;
    let deadline = Instant::now() + options.timeout;
    loop {
        if let Some(pid) = live_pid(&layout, index) {
            out!("instance {index} runs (pid {pid})");
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(usage(format!(
                "instance {index} did not start within {} s; see {}",
                options.timeout.as_secs(),
                layout.manager_log().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `down`: stops the manager and every instance; `wipe` also deletes the directory.
pub async fn down(options: DownOptions) -> Result<(), Error> {
    let (layout, _manifest) = open(&options.dir)?;
    let stopped_manager = local_run::stop_manager(&layout, Duration::from_secs(120)).await?;
    if let Some(pid) = stopped_manager {
        out!("stopped the manager (pid {pid})");
    }
    local_run::stop_instances(&layout, Duration::from_secs(60)).await?;
    out!("every instance is stopped");
    if options.wipe {
        std::fs::remove_dir_all(layout.root())
            .map_err(|e| LocalError::io(layout.root(), "remove", e))?;
        out!("removed {}", layout.root().display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_withdrawn_request_says_who_withdrew_it() {
        let pods = |to: Option<u32>, refused: Option<(u32, &str)>| PodsFile {
            switchover_to: to,
            switchover_refused: refused.map(|(i, r)| (i, r.to_owned())),
            ..PodsFile::default()
        };
        assert_eq!(
            withdrawal(&pods(None, Some((2, "its mysqld does not answer"))), 2),
            "switchover to instance 2 refused: its mysqld does not answer; the request was \
             withdrawn"
        );
        // Another instance's refusal is not this request's answer.
        assert_eq!(
            withdrawal(&pods(None, Some((1, "x"))), 2),
            "the request was withdrawn before the switchover (by someone else)"
        );
        assert_eq!(
            withdrawal(&pods(Some(0), None), 2),
            "the request was replaced by a request for instance 0 before the switchover"
        );
    }
}
