//! `moco local status`: one typed view of a local cluster, built from the files the manager keeps
//! (manifest, pods, status, the last round's snapshot) and the processes alive now. `--json`
//! serializes it (tools and the end-to-end tests read it); the text view formats the same value,
//! so the two cannot disagree.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use crate::platform::pods::{PodsFile, now_ms};
use crate::platform::port::EventRecord;
use crate::platform::snapshot::{ClusterSnapshot, EndpointAddrs, InstanceSnapshot};
use crate::platform::{Layout, Manifest};
use moco_core::facts::Flavor;
use moco_core::state::ClusterState;
use moco_core::status::{ClusterStatus, Condition};
use serde::Serialize;

/// The status of a local cluster.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalStatus {
    /// The cluster directory.
    pub dir: String,
    /// `mariadb` or `mysql`.
    pub flavor: &'static str,
    /// The server's version.
    pub server_version: String,
    /// The manager process.
    pub manager: ManagerStatus,
    /// The last round's state; `Stopped` without a manager, `Starting` before its first round.
    pub state: &'static str,
    /// `status.currentPrimaryIndex`.
    pub current_primary_index: u32,
    /// Switchover candidates of the last round, lowest ordinal first.
    pub candidates: Vec<u32>,
    /// `status.semiSyncMembers`: instances `0..n` acknowledge commits; the others, while the
    /// cluster grows, are learners replicating asynchronously.
    pub semi_sync_members: u32,
    /// `spec.replicas`: below the instances listed while a shrink is under way (the ones past
    /// it are leaving).
    pub replicas: u32,
    /// The role-following endpoints.
    pub endpoints: EndpointAddrs,
    /// `status.conditions`.
    pub conditions: Vec<Condition>,
    /// When the last round ran (RFC 3339).
    pub updated_at: Option<String>,
    /// The last round's error, if it failed.
    pub last_error: Option<String>,
    /// The manager's last finished round: how long ago it ended and how long it took.
    pub last_round: Option<LastRound>,
    /// Per instance: the last round's view, with pid, role and hold as they are now.
    pub instances: Vec<InstanceSnapshot>,
    /// Where the client option files are (text view only).
    #[serde(skip)]
    pub client_dir: PathBuf,
}

/// The manager's last finished round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastRound {
    /// Milliseconds since it ended.
    pub age_ms: u64,
    /// How long it took.
    pub took_ms: u64,
    /// The limit its plan allowed.
    pub limit_ms: u64,
}

impl LastRound {
    /// True when no round has ended for longer than the last one's limit plus a few check
    /// intervals: the manager is stuck (a round cannot outlast its limit) or gone.
    pub fn stale(&self) -> bool {
        self.age_ms > self.limit_ms.saturating_add(STALE_SLACK_MS)
    }
}

/// Slack over a round's limit before the last round counts as stale: the pauses between
/// rounds (the check interval, 1 s by default) and the snapshot's own write.
const STALE_SLACK_MS: u64 = 10_000;

/// The manager process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ManagerStatus {
    /// A manager runs for this directory.
    pub running: bool,
    /// Its pid, when known.
    pub pid: Option<u32>,
}

impl LocalStatus {
    /// The status of the cluster in `layout`: `manager` is the running manager's pid (`Some(0)`
    /// when it runs with an unknown pid), `snapshot` its last round.
    pub fn gather(
        layout: &Layout,
        manifest: &Manifest,
        manager: Option<u32>,
        snapshot: Option<&ClusterSnapshot>,
    ) -> Self {
        let status: ClusterStatus = crate::platform::files::read_json_opt(&layout.status())
            .ok()
            .flatten()
            .unwrap_or_default();
        let pods = PodsFile::load(layout).unwrap_or_default();
        let running = manager.is_some();
        let state = match (running, snapshot) {
            (false, _) => "Stopped",
            (true, Some(s)) => s.state_name(),
            (true, None) => "Starting",
        };
        let now = now_ms();
        let instances = (0..manifest.replicas)
            .map(|index| {
                let snap = snapshot
                    .filter(|_| running)
                    .and_then(|s| s.instances.iter().find(|i| i.index == index));
                let pid = live_pid(layout, index);
                let pod = pods.get(index);
                InstanceSnapshot {
                    index,
                    role: pod.role.map_or("none", |r| r.as_str()).to_owned(),
                    port: manifest.instance_port(index),
                    pid,
                    reachable: pid.is_some() && snap.is_some_and(|s| s.reachable),
                    ready: pid.is_some() && snap.is_some_and(|s| s.ready),
                    executed_gtids: snap.map(|s| s.executed_gtids.clone()).unwrap_or_default(),
                    lag: snap.and_then(|s| s.lag),
                    errant: status.errant_replica_list.contains(&index),
                    read_only: snap.and_then(|s| s.read_only),
                    source: snap.and_then(|s| s.source.clone()),
                    replication_error: snap.and_then(|s| s.replication_error.clone()),
                    held_down: pod.kill_hold.as_ref().is_some_and(|h| h.active(now)),
                }
            })
            .collect();
        LocalStatus {
            dir: layout.root().display().to_string(),
            flavor: flavor_name(manifest.flavor),
            server_version: manifest.server_version.clone(),
            manager: ManagerStatus {
                running,
                pid: manager.filter(|p| *p != 0),
            },
            state,
            current_primary_index: status.current_primary_index,
            candidates: snapshot.map(|s| s.candidates.clone()).unwrap_or_default(),
            semi_sync_members: status
                .semi_sync_members
                .unwrap_or(manifest.replicas)
                .min(manifest.replicas),
            replicas: manifest.spec_replicas(),
            endpoints: EndpointAddrs {
                primary: format!("127.0.0.1:{}", manifest.primary_port()),
                replica: format!("127.0.0.1:{}", manifest.replica_port()),
            },
            conditions: status.conditions,
            updated_at: snapshot.map(|s| s.updated_at.clone()),
            last_error: snapshot.and_then(|s| s.last_error.clone()),
            last_round: snapshot
                .filter(|_| running)
                .and_then(|s| s.last_round)
                .map(|r| LastRound {
                    age_ms: now.saturating_sub(r.ended_at_ms),
                    took_ms: r.took_ms,
                    limit_ms: r.limit_ms,
                }),
            instances,
            client_dir: layout.client_dir(),
        }
    }

    /// The text view: a summary line, the endpoints, the last error, and one row per instance
    /// (with its executed GTID set when `with_gtids`).
    pub fn render_text(&self, with_gtids: bool) -> String {
        let mut out = String::new();
        let manager = match self.manager {
            ManagerStatus {
                running: true,
                pid: Some(pid),
            } => format!("pid {pid}"),
            ManagerStatus { running: true, .. } => "running".to_owned(),
            ManagerStatus { running: false, .. } => "not running".to_owned(),
        };
        let _ = writeln!(
            out,
            "cluster {} ({} {})  state: {}  primary: {}  manager: {manager}",
            self.dir, self.flavor, self.server_version, self.state, self.current_primary_index,
        );
        let _ = writeln!(
            out,
            "endpoints: primary {}  replica {}   client files: {}/<user>.cnf",
            self.endpoints.primary,
            self.endpoints.replica,
            self.client_dir.display()
        );
        if let Some(r) = &self.last_round {
            if r.stale() {
                let _ = writeln!(
                    out,
                    "WARNING: the manager has finished no round for {:.1} s (its last one had {:.1} s): it is stuck or gone, and nothing fails over",
                    r.age_ms as f64 / 1000.0,
                    r.limit_ms as f64 / 1000.0
                );
            } else {
                let _ = writeln!(
                    out,
                    "last round: {:.1} s ago, took {} ms",
                    r.age_ms as f64 / 1000.0,
                    r.took_ms
                );
            }
        }
        if let Some(err) = &self.last_error {
            let _ = writeln!(out, "last round failed: {err}");
        }
        let total = u32::try_from(self.instances.len()).unwrap_or(u32::MAX);
        if self.replicas < total {
            let _ = writeln!(
                out,
                "shrinking to {}: instances {}..{} are leaving ({}; they stop and move to retired/ once no acknowledged commit needs them)",
                self.replicas,
                self.replicas,
                total - 1,
                if self.semi_sync_members > self.replicas {
                    "still counted"
                } else {
                    "no longer counted"
                }
            );
        } else if self.semi_sync_members < total {
            let _ = writeln!(
                out,
                "growing: instances {}..{} are learners (asynchronous until they caught up; they acknowledge nothing yet)",
                self.semi_sync_members,
                total - 1
            );
        }
        let header = format!(
            "{:>3}  {:<8} {:>6} {:>8}  {:<9} {:>5}  {:<6} {}",
            "#",
            "role",
            "port",
            "pid",
            "reachable",
            "lag",
            "errant",
            if with_gtids { "gtids" } else { "" }
        );
        out.push_str(header.trim_end());
        out.push('\n');
        for i in &self.instances {
            let pid = i.pid.map_or("-".to_owned(), |p| p.to_string());
            let reachable = if i.reachable {
                "yes"
            } else if i.held_down {
                "held"
            } else {
                "no"
            };
            let lag = i.lag.map_or("-".to_owned(), |l| l.to_string());
            let errant = if i.errant { "YES" } else { "no" };
            let mut line = format!(
                "{:>3}  {:<8} {:>6} {:>8}  {:<9} {:>5}  {:<6}",
                i.index, i.role, i.port, pid, reachable, lag, errant
            );
            if with_gtids {
                line.push(' ');
                line.push_str(&i.executed_gtids);
            }
            if let Some(e) = &i.replication_error {
                let _ = write!(line, "  ({e})");
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Prints the text view with the GTID sets.
pub fn print_status_text(
    layout: &Layout,
    manifest: &Manifest,
    manager: Option<u32>,
    snapshot: Option<&ClusterSnapshot>,
) {
    let status = LocalStatus::gather(layout, manifest, manager, snapshot);
    crate::output::print_out(&status.render_text(true));
}

/// Why a cluster without writes cannot fail over, when that is the case: MOCO (and this
/// engine) never promotes a replica that holds no transaction, since it cannot show that it
/// has the primary's data, and before the first write no replica holds one. With
/// `killed = Some(i)`: only when instance `i` is the primary. `None` when a failover can
/// happen (or the primary is not the one down).
pub fn no_failover_note(snapshot: &ClusterSnapshot, killed: Option<u32>) -> Option<String> {
    let primary = snapshot.current_primary_index;
    if killed.is_some_and(|k| k != primary) || snapshot.instances.len() < 2 {
        return None;
    }
    let replicas_empty = snapshot
        .instances
        .iter()
        .filter(|i| i.index != primary)
        .all(|i| i.executed_gtids.trim().is_empty());
    replicas_empty.then(|| {
        format!(
            "note: no transaction was written yet, so no replica holds data and none can be promoted (MOCO's rule: a replica without transactions is never a failover candidate). The cluster stays Lost until instance {primary} is back; write something first to see a failover."
        )
    })
}

/// The name `moco local` prints for a server family.
pub fn flavor_name(f: Flavor) -> &'static str {
    match f {
        Flavor::Mariadb => "mariadb",
        Flavor::Mysql => "mysql",
    }
}

/// The live pid of instance `index` (from its pid file, checked against /proc).
pub fn live_pid(layout: &Layout, index: u32) -> Option<u32> {
    let text = std::fs::read_to_string(layout.pid_file(index)).ok()?;
    let pid = text.trim().parse::<u32>().ok()?;
    moco_adapters::mysqld::is_server_process(pid, &layout.mycnf(index)).then_some(pid)
}

/// The foreground view: prints the status table when it changes, and new events.
#[derive(Debug)]
pub struct LiveView {
    layout: Layout,
    last: String,
    events_seen: usize,
}

impl LiveView {
    /// A view that shows only the events recorded from now on.
    pub fn new(layout: &Layout) -> Self {
        let events_seen = std::fs::read_to_string(layout.events())
            .map(|t| t.lines().count())
            .unwrap_or(0);
        LiveView {
            layout: layout.clone(),
            last: String::new(),
            events_seen,
        }
    }

    /// Prints what changed since the last tick; returns the last round's snapshot.
    pub fn tick(&mut self, manifest: &Manifest) -> Option<ClusterSnapshot> {
        let snapshot = ClusterSnapshot::load(&self.layout).ok().flatten();
        let text = LocalStatus::gather(
            &self.layout,
            manifest,
            Some(std::process::id()),
            snapshot.as_ref(),
        )
        .render_text(false);
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if let Ok(events) = std::fs::read_to_string(self.layout.events()) {
            for line in events.lines().skip(self.events_seen) {
                self.events_seen += 1;
                if let Ok(e) = serde_json::from_str::<EventRecord>(line) {
                    // `{:?}` of the event type is its name: `Normal` or `Warning`.
                    let _ = writeln!(
                        out,
                        "event {} {:?} {}: {}",
                        e.time, e.type_, e.reason, e.message
                    );
                }
            }
        }
        if text != self.last {
            let now = moco_core::time::Timestamp(i64::try_from(now_ms() / 1000).unwrap_or(0));
            let _ = write!(out, "\n[{now}] {text}");
            if let Some(note) = snapshot
                .as_ref()
                .filter(|s| s.is(ClusterState::Lost))
                .and_then(|s| no_failover_note(s, None))
            {
                let _ = writeln!(out, "{note}");
            }
            self.last = text;
        }
        let _ = out.flush();
        snapshot
    }
}

#[cfg(test)]
mod tests {
    use crate::platform::snapshot::{ClusterSnapshot, EndpointAddrs, InstanceSnapshot};
    use moco_core::Action;
    use moco_core::state::ClusterState;

    use super::no_failover_note;

    fn snapshot(primary: u32, executed: &[&str]) -> ClusterSnapshot {
        ClusterSnapshot {
            updated_at: "2026-11-23T10:00:00Z".into(),
            updated_at_ms: 0,
            manager_pid: 1,
            state: Some(ClusterState::Lost),
            action: Action::None,
            current_primary_index: primary,
            candidates: vec![],
            endpoints: EndpointAddrs {
                primary: "127.0.0.1:1".into(),
                replica: "127.0.0.1:2".into(),
            },
            conditions: vec![],
            flavor: "mariadb".into(),
            instances: executed
                .iter()
                .enumerate()
                .map(|(i, e)| InstanceSnapshot {
                    index: u32::try_from(i).unwrap_or(0),
                    role: "replica".into(),
                    port: 0,
                    pid: None,
                    reachable: true,
                    ready: true,
                    executed_gtids: (*e).into(),
                    lag: None,
                    errant: false,
                    read_only: None,
                    source: None,
                    replication_error: None,
                    held_down: false,
                })
                .collect(),
            last_error: None,
            last_round: None,
        }
    }

    /// Issue 35: a manager that finishes no round is named as stuck once the last round's
    /// limit and the pauses between rounds have passed, not before.
    #[test]
    fn a_manager_without_rounds_is_reported_stuck_after_its_limit() {
        let round = |age_ms| super::LastRound {
            age_ms,
            took_ms: 12,
            limit_ms: 95_000,
        };
        assert!(!round(500).stale());
        assert!(!round(100_000).stale());
        assert!(round(106_000).stale());
    }

    /// Issue 12, item 10: killing the primary of a cluster nobody wrote to leaves it Lost for
    /// as long as the primary is down; say why, and only then.
    #[test]
    fn the_note_appears_only_when_no_replica_holds_a_transaction() {
        let fresh = snapshot(0, &["0-1-3", "", ""]);
        let note = no_failover_note(&fresh, Some(0)).unwrap_or_default();
        assert!(note.contains("no replica holds data"), "{note}");
        assert!(note.contains("until instance 0 is back"), "{note}");
        assert_eq!(no_failover_note(&fresh, None), Some(note));
        // A replica was killed, not the primary: a failover is not in question.
        assert_eq!(no_failover_note(&fresh, Some(1)), None);
        // One replica holds a transaction: it can be promoted.
        assert_eq!(
            no_failover_note(&snapshot(0, &["", "0-1-3", ""]), Some(0)),
            None
        );
        // The primary is instance 2 here.
        assert!(no_failover_note(&snapshot(2, &["", "", "0-1-3"]), Some(2)).is_some());
        assert_eq!(
            no_failover_note(&snapshot(2, &["0-1-3", "", ""]), Some(2)),
            None
        );
        // A single instance never fails over anyway.
        assert_eq!(no_failover_note(&snapshot(0, &[""]), Some(0)), None);
    }
}
