//! The local platform's rules, as pure functions of what it saw: which instances the endpoints
//! route to, when an instance is ready, how a crashed instance is restarted, and the spec facts
//! of a local cluster. [`super::LocalPlatform`] applies them to its files and processes.

use std::net::SocketAddr;
use std::time::Duration;

use moco_core::facts::{Flavor, ReplicaStatus, Role, SpecFacts};

use super::READINESS_FAILURES;
use crate::platform::manifest::Manifest;
use crate::platform::pods::PodsFile;
use crate::platform::proxy::{Backend, Routes};

/// What `moco local switchover` asks for, as seen in `pods.json`.
pub(super) type SwitchRequest = (Option<u32>, Vec<u32>);

/// What the endpoints' routes are computed from: this round's readiness and writability per
/// instance, the recorded primary, the primary routed now, and the role labels.
pub(super) struct RouteInputs<'a> {
    pub(super) replicas: u32,
    pub(super) ready: &'a [bool],
    pub(super) writable: &'a [bool],
    pub(super) primary: u32,
    pub(super) routed: Option<u32>,
    pub(super) pods: &'a PodsFile,
}

impl RouteInputs<'_> {
    /// Labelled and ready instances only, as a Service selects Ready Pods by label; the
    /// primary endpoint also requires `status.currentPrimaryIndex` and writability, or that
    /// it is routed already (see [`LocalPlatform::refresh_routes`]).
    pub(super) fn routes(&self, addr: impl Fn(u32) -> SocketAddr) -> Routes {
        let mut routes = Routes::default();
        for index in 0..self.replicas {
            if !self.ready.get(index as usize).copied().unwrap_or(false) {
                continue;
            }
            let backend = Backend {
                index,
                addr: addr(index),
            };
            match self.pods.get(index).role {
                Some(Role::Primary)
                    if index == self.primary
                        && routes.primary.is_none()
                        && (self.writable.get(index as usize).copied().unwrap_or(false)
                            || self.routed == Some(index)) =>
                {
                    routes.primary = Some(backend)
                }
                Some(Role::Replica) => routes.replicas.push(backend),
                _ => {}
            }
        }
        routes
    }
}

/// Readiness after one probe of every instance (`None`: its process is not running; else
/// whether it greeted), from the readiness before and the silent probes in a row so far
/// (`failures`, updated): a running instance turns not ready only after
/// [`READINESS_FAILURES`] silent probes in a row, one whose process is gone at once.
pub(super) fn next_readiness(
    probes: &[Option<bool>],
    was: &[bool],
    failures: &mut Vec<u32>,
) -> Vec<bool> {
    failures.resize(probes.len(), 0);
    probes
        .iter()
        .zip(failures.iter_mut())
        .enumerate()
        .map(|(i, (probe, failed))| match probe {
            None => {
                *failed = READINESS_FAILURES;
                false
            }
            Some(true) => {
                *failed = 0;
                true
            }
            Some(false) => {
                *failed = failed.saturating_add(1);
                was.get(i).copied().unwrap_or(false) && *failed < READINESS_FAILURES
            }
        })
        .collect()
}

/// The switchover request `pods.json` holds: the `--to` target and the instances asked to
/// demote.
pub(super) fn switch_request(pods: &PodsFile) -> SwitchRequest {
    (
        pods.switchover_to,
        pods.instances
            .iter()
            .filter(|(_, m)| m.demote)
            .map(|(i, _)| *i)
            .collect(),
    )
}

/// The arguments a crashed instance is restarted with after `down_for`, or `None` while it
/// must stay down: the primary of a cluster of more than one waits `primary_grace` for the
/// manager to fail over (rule 4 of [`LocalPlatform::supervise_once`]); a MariaDB replica
/// rolls back its unacknowledged binlog tail (`--init-rpl-role=SLAVE`, rule 3).
pub(super) fn restart_args(
    is_primary: bool,
    manifest: &Manifest,
    down_for: Duration,
    primary_grace: Duration,
) -> Option<Vec<String>> {
    if is_primary && manifest.replicas > 1 && down_for < primary_grace {
        return None;
    }
    let mut args = Vec::new();
    if !is_primary && manifest.flavor == Flavor::Mariadb {
        args.push("--init-rpl-role=SLAVE".to_owned());
    }
    Some(args)
}

/// The pause after `failures` failed restarts in a row: 1 s, doubling, at most `max`.
pub(super) fn restart_pause(failures: u32, max: Duration) -> Duration {
    Duration::from_secs(1u64 << failures.min(6).saturating_sub(1)).min(max)
}

/// A replica's replication error as `moco local status` shows it: the IO thread's first.
pub(super) fn replication_error(replica: &ReplicaStatus) -> Option<String> {
    if replica.last_io_errno != 0 {
        Some(format!(
            "IO {}: {}",
            replica.last_io_errno, replica.last_io_error
        ))
    } else if replica.last_sql_errno != 0 {
        Some(format!(
            "SQL {}: {}",
            replica.last_sql_errno, replica.last_sql_error
        ))
    } else {
        None
    }
}

/// The spec facts of a local cluster: its manifest's size, flavour and server ids, and what
/// a local cluster never has (an external source, a restore, offline, a Pod deletion delay).
pub(super) fn spec_facts(manifest: &Manifest) -> SpecFacts {
    SpecFacts {
        replicas: manifest.spec_replicas(),
        external_source: None,
        restore: false,
        offline: false,
        server_id_base: manifest.server_id_base,
        max_delay_seconds_for_pod_deletion: 0,
        flavor: manifest.flavor,
        reclone_errant: manifest.reclone_errant,
        startup_wait_seconds: 3600,
    }
}

#[cfg(test)]
mod tests {
    use moco_core::facts::ThreadState;
    use moco_core::gtid::GtidSet;

    use super::*;
    use crate::platform::pods::PodMeta;

    fn addr(index: u32) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 4000 + u16::try_from(index).unwrap()))
    }

    fn labelled(roles: &[Option<Role>]) -> PodsFile {
        PodsFile {
            instances: (0u32..)
                .zip(roles)
                .map(|(i, &role)| {
                    let meta = PodMeta {
                        role,
                        ..PodMeta::default()
                    };
                    (i, meta)
                })
                .collect(),
            switchover_to: None,
            switchover_refused: None,
        }
    }

    fn indices(routes: &Routes) -> (Option<u32>, Vec<u32>) {
        (
            routes.primary.map(|b| b.index),
            routes.replicas.iter().map(|b| b.index).collect(),
        )
    }

    #[test]
    fn routes_follow_labels_readiness_and_an_open_primary() {
        let pods = labelled(&[
            Some(Role::Primary),
            Some(Role::Replica),
            Some(Role::Replica),
        ]);
        let seen = RouteInputs {
            replicas: 3,
            ready: &[true, true, true],
            writable: &[true, false, false],
            primary: 0,
            routed: None,
            pods: &pods,
        };
        let routes = seen.routes(addr);
        assert_eq!(indices(&routes), (Some(0), vec![1, 2]));
        assert_eq!(routes.primary.map(|b| b.addr), Some(addr(0)));
        // A replica that is not ready leaves the replica endpoint, as a Pod leaves a Service.
        let not_ready = RouteInputs {
            ready: &[true, false, true],
            ..seen
        };
        assert_eq!(indices(&not_ready.routes(addr)), (Some(0), vec![2]));
        // Between the commit point and the round that opens it, the new primary is read-only:
        // new clients wait instead of reaching it.
        let read_only = RouteInputs {
            writable: &[false, false, false],
            ..seen
        };
        assert_eq!(indices(&read_only.routes(addr)), (None, vec![1, 2]));
        // Once routed it stays, whatever one observation of its writability says.
        let routed = RouteInputs {
            routed: Some(0),
            ..read_only
        };
        assert_eq!(indices(&routed.routes(addr)), (Some(0), vec![1, 2]));
        // A primary label on another instance than the recorded primary routes nothing there.
        let moved = RouteInputs { primary: 1, ..seen };
        assert_eq!(indices(&moved.routes(addr)), (None, vec![1, 2]));
        // Unlabelled instances and instances beyond the size are never routed.
        let unlabelled = labelled(&[None, Some(Role::Replica)]);
        let two = RouteInputs {
            replicas: 2,
            pods: &unlabelled,
            ..seen
        };
        assert_eq!(indices(&two.routes(addr)), (None, vec![1]));
    }

    #[test]
    fn a_running_instance_turns_not_ready_after_two_silent_probes_a_stopped_one_at_once() {
        let mut failures = Vec::new();
        let ready = next_readiness(&[Some(true), Some(true), Some(true)], &[], &mut failures);
        assert_eq!(ready, [true, true, true]);
        assert_eq!(failures, [0, 0, 0]);
        // One silent probe keeps a ready instance's clients; a stopped process loses them.
        let ready = next_readiness(&[Some(false), None, Some(true)], &ready, &mut failures);
        assert_eq!(ready, [true, false, true]);
        assert_eq!(failures, [1, READINESS_FAILURES, 0]);
        // The second silent probe in a row turns it not ready.
        let ready = next_readiness(
            &[Some(false), Some(false), Some(true)],
            &ready,
            &mut failures,
        );
        assert_eq!(ready, [false, false, true]);
        // One greeting makes it ready again at once.
        let ready = next_readiness(&[Some(true), Some(true), Some(true)], &ready, &mut failures);
        assert_eq!(ready, [true, true, true]);
        assert_eq!(failures, [0, 0, 0]);
        // An instance never seen ready is not ready after a silent probe.
        let mut failures = Vec::new();
        assert_eq!(next_readiness(&[Some(false)], &[], &mut failures), [false]);
    }

    #[test]
    fn switch_requests_name_the_target_and_the_demoted_instances() {
        let mut pods = labelled(&[Some(Role::Primary), Some(Role::Replica), None]);
        assert_eq!(switch_request(&pods), (None, vec![]));
        pods.switchover_to = Some(2);
        if let Some(meta) = pods.instances.get_mut(&0) {
            meta.demote = true;
        }
        assert_eq!(switch_request(&pods), (Some(2), vec![0]));
    }

    #[test]
    fn a_crashed_primary_waits_for_a_failover_and_a_mariadb_replica_rolls_back_its_tail() {
        let grace = Duration::from_secs(20);
        let mariadb = Manifest::example();
        let mysql = Manifest {
            flavor: Flavor::Mysql,
            ..Manifest::example()
        };
        let single = Manifest {
            replicas: 1,
            ..Manifest::example()
        };
        let early = Duration::from_secs(5);
        let late = Duration::from_secs(20);
        assert_eq!(restart_args(true, &mariadb, early, grace), None);
        assert_eq!(restart_args(true, &mariadb, late, grace), Some(vec![]));
        assert_eq!(restart_args(true, &single, early, grace), Some(vec![]));
        assert_eq!(
            restart_args(false, &mariadb, Duration::ZERO, grace),
            Some(vec!["--init-rpl-role=SLAVE".to_owned()])
        );
        assert_eq!(
            restart_args(false, &mysql, Duration::ZERO, grace),
            Some(vec![])
        );
    }

    #[test]
    fn failed_restarts_pause_one_second_doubling_up_to_the_limit() {
        let max = Duration::from_secs(30);
        let pauses: Vec<u64> = (1..=8).map(|f| restart_pause(f, max).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(
            restart_pause(3, Duration::from_secs(3)),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn the_io_threads_error_is_shown_first() {
        // Both threads failed: the IO thread's error is shown.
        let mut replica = ReplicaStatus {
            source_host: "127.0.0.1".to_owned(),
            source_port: 4000,
            io_running: ThreadState::Connecting,
            sql_running: ThreadState::No,
            last_io_errno: 2003,
            last_io_error: "can't connect".to_owned(),
            last_sql_errno: 1062,
            last_sql_error: "Duplicate entry".to_owned(),
            retrieved_gtid_set: GtidSet::new(),
            seconds_behind_source: None,
        };
        assert_eq!(
            replication_error(&replica).as_deref(),
            Some("IO 2003: can't connect")
        );
        replica.last_io_errno = 0;
        assert_eq!(
            replication_error(&replica).as_deref(),
            Some("SQL 1062: Duplicate entry")
        );
        replica.last_sql_errno = 0;
        assert_eq!(replication_error(&replica), None);
    }

    #[test]
    fn spec_facts_ask_for_the_size_the_cluster_shrinks_to() {
        let manifest = Manifest {
            replicas: 5,
            shrinking_to: Some(3),
            reclone_errant: true,
            ..Manifest::example()
        };
        let spec = spec_facts(&manifest);
        assert_eq!(spec.replicas, 3);
        assert_eq!(spec.server_id_base, 1000);
        assert_eq!(spec.flavor, Flavor::Mariadb);
        assert!(spec.reclone_errant);
        assert!(spec.external_source.is_none() && !spec.restore && !spec.offline);
        assert_eq!(spec_facts(&Manifest::example()).replicas, 3);
    }
}
