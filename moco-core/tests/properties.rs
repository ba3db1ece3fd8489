//! Property tests: the invariants the decision engine promises, over generated facts.
//!
//! Facts are generated as a healthy cluster (1, 3 or 5 instances, MySQL or MariaDB rules) with
//! a random list of faults applied: unreachable or hung instances, unready or deleted Pods,
//! demote requests, errant or lagging replicas, stopped IO threads, writable replicas, wiped
//! data, missing labels. Every invariant is checked on every generated case.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use moco_core::facts::{
    ClusterFacts, Flavor, InstanceFacts, MysqldStatus, PodFacts, ReplicaHost, ReplicaStatus, Role,
    SemiSyncFacts, SpecFacts, ThreadState,
};
use moco_core::gtid::{GtidSet, SourceId};
use moco_core::operation::{Operation, PrimaryChange};
use moco_core::state::ClusterState;
use moco_core::status::ClusterStatus;
use moco_core::time::Timestamp;
use moco_core::{Decision, decide};
use proptest::prelude::*;

const BASE: u32 = 100;

fn uuid_text(i: u32) -> String {
    format!("00000000-0000-0000-0000-{:012}", i + 1)
}

fn source(flavor: Flavor, server: u32) -> SourceId {
    match flavor {
        Flavor::Mysql => SourceId::Uuid {
            uuid: u128::from(server + 1),
            tag: String::new(),
        },
        Flavor::Mariadb => SourceId::MariaDb {
            domain: 0,
            server_id: BASE + server,
        },
    }
}

fn range(flavor: Flavor, server: u32, end: u64) -> GtidSet {
    let mut s = GtidSet::new();
    s.insert_interval(source(flavor, server), 1, end);
    s
}

/// A healthy cluster: `history` holds what earlier primaries wrote.
fn healthy(n: u32, primary: u32, flavor: Flavor, history: &GtidSet, writes: u64) -> ClusterFacts {
    let executed = history.union(&range(flavor, primary, writes));
    let host = |i: u32| format!("db-{i}");
    let instances = (0..n)
        .map(|i| {
            let is_p = i == primary;
            InstanceFacts {
                index: i,
                host: host(i),
                port: 3306,
                pod: PodFacts {
                    exists: true,
                    ready: true,
                    deleting: false,
                    demote: false,
                    prevent_delete: false,
                    role_label: Some(if is_p { Role::Primary } else { Role::Replica }),
                },
                mysqld: Some(MysqldStatus {
                    flavor,
                    version: String::new(),
                    server_id: BASE + i,
                    server_uuid: Some(uuid_text(i)),
                    gtid_executed: executed.clone(),
                    gtid_purged: GtidSet::new(),
                    read_only: !is_p,
                    super_read_only: !is_p,
                    semi_sync: SemiSyncFacts {
                        source_enabled: is_p && n > 1,
                        replica_enabled: !is_p,
                        wait_for_replica_count: (flavor == Flavor::Mysql).then_some(n / 2),
                        source_timeout_ms: Some(86_400_000),
                        wait_sessions: 0,
                        source_clients: Some(if is_p { n - 1 } else { 0 }),
                    },
                    replica_status: (!is_p).then(|| ReplicaStatus {
                        source_host: host(primary),
                        source_port: 3306,
                        io_running: ThreadState::Yes,
                        sql_running: ThreadState::Yes,
                        last_io_errno: 0,
                        last_io_error: String::new(),
                        last_sql_errno: 0,
                        last_sql_error: String::new(),
                        retrieved_gtid_set: executed.clone(),
                        seconds_behind_source: Some(0),
                    }),
                    replica_hosts: if is_p {
                        (0..n)
                            .filter(|&j| j != primary)
                            .map(|j| ReplicaHost {
                                server_id: BASE + j,
                                host: host(j),
                                port: 3306,
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                    clone_state: None,
                }),
            }
        })
        .collect();
    ClusterFacts {
        schema_version: moco_core::facts::FACTS_SCHEMA_VERSION,
        spec: SpecFacts {
            replicas: n,
            external_source: None,
            restore: false,
            offline: false,
            server_id_base: BASE,
            max_delay_seconds_for_pod_deletion: 0,
            flavor,
            reclone_errant: false,
            startup_wait_seconds: 3600,
        },
        status: ClusterStatus {
            current_primary_index: primary,
            ..ClusterStatus::default()
        },
        now: Timestamp(1_800_000_000),
        instances,
        switchover_to: None,
    }
}

#[derive(Clone, Debug)]
enum Fault {
    Unreachable(u32),
    Hung(u32),
    PodUnready(u32),
    Deleting(u32),
    Demote(u32),
    Errant(u32, u64),
    Lagging(u32, u64),
    Behind(u32, u64),
    IoStopped(u32),
    Writable(u32),
    Wiped(u32),
    NoReplication(u32),
    WrongSource(u32),
    NoLabel(u32),
    PrimaryReadOnly,
    RememberedErrant(u32),
}

fn fault() -> impl Strategy<Value = Fault> {
    let i = 0u32..5;
    prop_oneof![
        i.clone().prop_map(Fault::Unreachable),
        i.clone().prop_map(Fault::Hung),
        i.clone().prop_map(Fault::PodUnready),
        i.clone().prop_map(Fault::Deleting),
        i.clone().prop_map(Fault::Demote),
        (i.clone(), 1u64..4).prop_map(|(i, k)| Fault::Errant(i, k)),
        (i.clone(), 1u64..6).prop_map(|(i, k)| Fault::Lagging(i, k)),
        (i.clone(), 1u64..6).prop_map(|(i, k)| Fault::Behind(i, k)),
        i.clone().prop_map(Fault::IoStopped),
        i.clone().prop_map(Fault::Writable),
        i.clone().prop_map(Fault::Wiped),
        i.clone().prop_map(Fault::NoReplication),
        i.clone().prop_map(Fault::WrongSource),
        i.clone().prop_map(Fault::NoLabel),
        Just(Fault::PrimaryReadOnly),
        i.prop_map(Fault::RememberedErrant),
    ]
}

fn apply(f: &mut ClusterFacts, fault: &Fault, writes: u64) {
    let n = f.spec.replicas;
    let flavor = f.spec.flavor;
    let primary = f.status.current_primary_index;
    let idx = |i: u32| (i % n) as usize;
    let m = |f: &mut ClusterFacts, i: u32| {
        f.instances[idx(i)]
            .mysqld
            .as_mut()
            .map(|m| m as *mut MysqldStatus)
    };
    let _ = m;
    match *fault {
        Fault::Unreachable(i) => f.instances[idx(i)].mysqld = None,
        Fault::Hung(i) => {
            if let Some(s) = f.instances[idx(i)].mysqld.as_mut() {
                s.semi_sync.wait_sessions = 1;
            }
        }
        Fault::PodUnready(i) => f.instances[idx(i)].pod.ready = false,
        Fault::Deleting(i) => f.instances[idx(i)].pod.deleting = true,
        Fault::Demote(i) => f.instances[idx(i)].pod.demote = true,
        Fault::Errant(i, k) => {
            let server = idx(i) as u32;
            if let Some(s) = f.instances[idx(i)].mysqld.as_mut() {
                s.gtid_executed = s.gtid_executed.union(&range(flavor, server + 10, k));
            }
        }
        Fault::Lagging(i, k) => {
            if let Some(s) = f.instances[idx(i)].mysqld.as_mut() {
                let behind = range(flavor, primary, writes.saturating_sub(k).max(1));
                s.gtid_executed = s
                    .gtid_executed
                    .subtract(&range(flavor, primary, writes))
                    .union(&behind);
            }
        }
        Fault::Behind(i, k) => {
            if let Some(s) = f.instances[idx(i)].mysqld.as_mut()
                && let Some(r) = s.replica_status.as_mut()
            {
                let behind = range(flavor, primary, writes.saturating_sub(k).max(1));
                r.retrieved_gtid_set = r
                    .retrieved_gtid_set
                    .subtract(&range(flavor, primary, writes))
                    .union(&behind);
                s.gtid_executed = s
                    .gtid_executed
                    .subtract(&range(flavor, primary, writes))
                    .union(&behind);
                r.seconds_behind_source = Some(k * 10);
            }
        }
        Fault::IoStopped(i) => {
            if let Some(r) = f.instances[idx(i)]
                .mysqld
                .as_mut()
                .and_then(|s| s.replica_status.as_mut())
            {
                r.io_running = ThreadState::No;
            }
        }
        Fault::Writable(i) => {
            if let Some(s) = f.instances[idx(i)].mysqld.as_mut() {
                s.read_only = false;
                s.super_read_only = false;
            }
        }
        Fault::Wiped(i) => {
            if let Some(s) = f.instances[idx(i)].mysqld.as_mut() {
                // A re-initialised MySQL datadir gets a new server_uuid.
                s.server_uuid = Some(uuid_text(idx(i) as u32 + 20));
                s.gtid_executed = GtidSet::new();
                s.replica_status = None;
                s.read_only = true;
                s.super_read_only = true;
            }
        }
        Fault::NoReplication(i) => {
            if let Some(s) = f.instances[idx(i)].mysqld.as_mut() {
                s.replica_status = None;
            }
        }
        Fault::WrongSource(i) => {
            if let Some(r) = f.instances[idx(i)]
                .mysqld
                .as_mut()
                .and_then(|s| s.replica_status.as_mut())
            {
                r.source_host = "elsewhere".to_owned();
            }
        }
        Fault::NoLabel(i) => f.instances[idx(i)].pod.role_label = None,
        Fault::PrimaryReadOnly => {
            if let Some(s) = f.instances[idx(primary)].mysqld.as_mut() {
                s.read_only = true;
                s.super_read_only = true;
            }
        }
        Fault::RememberedErrant(i) => {
            let i = idx(i) as u32;
            if i != primary && !f.status.errant_replica_list.contains(&i) {
                f.status.errant_replica_list.push(i);
            }
        }
    }
}

fn cluster() -> impl Strategy<Value = ClusterFacts> {
    cluster_of(prop_oneof![Just(1u32), Just(3u32), Just(5u32)])
}

fn cluster_of(sizes: impl Strategy<Value = u32>) -> impl Strategy<Value = ClusterFacts> {
    (
        sizes,
        0u32..5,
        prop_oneof![Just(Flavor::Mysql), Just(Flavor::Mariadb)],
        0u64..4,
        3u64..20,
        prop::collection::vec(fault(), 0..6),
    )
        .prop_map(|(n, p, flavor, old, writes, faults)| {
            let primary = p % n;
            let history = if old > 0 {
                range(flavor, (primary + 1) % n, old)
            } else {
                GtidSet::new()
            };
            let mut f = healthy(n, primary, flavor, &history, writes);
            for fault in &faults {
                apply(&mut f, fault, writes);
            }
            f
        })
}

fn received(s: &MysqldStatus) -> GtidSet {
    match &s.replica_status {
        Some(r) => r.retrieved_gtid_set.union(&s.gtid_executed),
        None => s.gtid_executed.clone(),
    }
}

fn ops(d: &Decision) -> Vec<&Operation> {
    d.steps.iter().map(|s| &s.operation).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The same facts always give the same decision.
    #[test]
    fn decisions_are_deterministic(f in cluster()) {
        prop_assert_eq!(decide(&f).unwrap(), decide(&f).unwrap());
    }

    /// A healthy cluster with correct labels and no requests plans nothing.
    #[test]
    fn healthy_cluster_plans_nothing(
        n in prop_oneof![Just(1u32), Just(3u32), Just(5u32)],
        p in 0u32..5,
        flavor in prop_oneof![Just(Flavor::Mysql), Just(Flavor::Mariadb)],
        writes in 1u64..50,
    ) {
        let f = healthy(n, p % n, flavor, &GtidSet::new(), writes);
        let d = decide(&f).unwrap();
        prop_assert_eq!(d.state, ClusterState::Healthy);
        prop_assert!(d.steps.is_empty(), "{:?}", d.steps);
        prop_assert!(!d.redo);
    }

    /// No plan opens an instance for writes while another reachable one stays writable, and
    /// only the current primary is ever opened.
    #[test]
    fn never_two_writable(f in cluster()) {
        let d = decide(&f).unwrap();
        let mut writable: Vec<u32> = f.instances.iter()
            .filter(|i| i.mysqld.as_ref().is_some_and(|m| !m.read_only))
            .map(|i| i.index)
            .collect();
        let mut opened = None;
        for op in ops(&d) {
            match op {
                Operation::SetWritable { index } => {
                    prop_assert_eq!(*index, f.status.current_primary_index);
                    writable.push(*index);
                    opened = Some(*index);
                }
                Operation::SetSuperReadOnly { index, .. } => writable.retain(|i| i != index),
                _ => {}
            }
        }
        if let Some(p) = opened {
            writable.sort_unstable();
            writable.dedup();
            prop_assert_eq!(writable, vec![p], "plan {:?}", d.steps);
        }
    }

    /// Switchover targets a non-errant candidate, and the old primary is made read-only and
    /// the target caught up before the index moves.
    #[test]
    fn switchover_is_safe(f in cluster()) {
        let d = decide(&f).unwrap();
        let steps = ops(&d);
        for (pos, op) in steps.iter().enumerate() {
            if let Operation::SetPrimaryIndex { index, previous, reason: PrimaryChange::Switchover, .. } = op {
                prop_assert!(d.assessment.candidates.contains(index));
                prop_assert!(!d.assessment.errant.contains(index));
                let before = &steps[..pos];
                let ro = before.iter().position(|o| matches!(o, Operation::SetSuperReadOnly { index: i, .. } if i == previous));
                let wait = before.iter().position(|o| matches!(o, Operation::WaitForCatchUp { index: i, source: s, .. } if i == index && s == previous));
                prop_assert!(matches!((ro, wait), (Some(a), Some(b)) if a < b), "plan {:?}", d.steps);
            }
        }
    }

    /// Failover promotes a non-errant replica whose received set contains every other
    /// eligible replica's, after every IO thread stopped and after it applied that set.
    #[test]
    fn failover_promotes_the_most_advanced(f in cluster()) {
        let d = decide(&f).unwrap();
        let steps = ops(&d);
        for (pos, op) in steps.iter().enumerate() {
            if let Operation::SetPrimaryIndex { index, reason: PrimaryChange::Failover, .. } = op {
                prop_assert!(!d.assessment.errant.contains(index));
                let target = f.instances.iter().find(|i| i.index == *index).and_then(|i| i.mysqld.as_ref()).unwrap();
                let mine = received(target);
                for other in f.instances.iter().filter(|i| i.index != *index && i.index != f.status.current_primary_index) {
                    if d.assessment.errant.contains(&other.index) || d.assessment.hung.contains(&other.index) {
                        continue;
                    }
                    if let Some(s) = other.mysqld.as_ref() {
                        prop_assert!(!s.io_running(), "IO thread of {} still running", other.index);
                        if s.replica_status.is_some() {
                            prop_assert!(received(s).is_subset(&mine), "instance {} is ahead of the target {}", other.index, index);
                        }
                    }
                }
                let waited = matches!(steps[..pos].last(), Some(Operation::WaitForGtid { index: i, .. }) if i == index);
                prop_assert!(waited, "no wait before promotion: {:?}", d.steps);
            }
        }
    }

    /// A single instance never replicates from another instance or waits for ACKs.
    #[test]
    fn single_instance_plans_no_replication(f in cluster_of(Just(1u32))) {
        let d = decide(&f).unwrap();
        for op in ops(&d) {
            let replication = matches!(op,
                Operation::ConfigureReplication { .. }
                | Operation::ConfigurePrimarySemiSync { .. }
                | Operation::StopReplicaIoThread { .. }
                | Operation::SetPrimaryIndex { .. }
                | Operation::Clone { .. });
            prop_assert!(!replication, "{:?}", op);
        }
    }

    /// Errant replicas lose their role label and never get one, and are never pointed at the
    /// primary or promoted.
    #[test]
    fn errant_replicas_are_fenced(f in cluster()) {
        let d = decide(&f).unwrap();
        for op in ops(&d) {
            match op {
                Operation::SetRoleLabel { index, role: Some(_) }
                | Operation::ConfigureReplication { index, .. }
                | Operation::SetPrimaryIndex { index, .. } => {
                    prop_assert!(!d.assessment.errant.contains(index), "{:?} on errant {}", op, index);
                }
                _ => {}
            }
        }
    }

    /// A condition's lastTransitionTime moves only when its status value changes.
    #[test]
    fn transition_times_move_only_on_change(f in cluster(), g in cluster()) {
        let first = decide(&f).unwrap();
        let mut next = g.clone();
        next.status = first.status.clone();
        next.status.current_primary_index = g.status.current_primary_index;
        next.status.errant_replica_list.retain(|&i| i < g.spec.replicas);
        next.now = Timestamp(f.now.0 + 60);
        let second = decide(&next).unwrap();
        for c in &second.status.conditions {
            if let Some(old) = first.status.condition(&c.type_) {
                if old.status == c.status {
                    prop_assert_eq!(old.last_transition_time, c.last_transition_time);
                } else {
                    prop_assert_eq!(c.last_transition_time, next.now);
                }
            }
        }
    }

    /// Decisions survive a JSON round trip (what `moco plan` prints is what the engine meant).
    #[test]
    fn decisions_round_trip_through_json(f in cluster()) {
        let d = decide(&f).unwrap();
        let text = serde_json::to_string(&d).unwrap();
        let back: Decision = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, d);
        let facts_text = serde_json::to_string(&f).unwrap();
        let facts_back: ClusterFacts = serde_json::from_str(&facts_text).unwrap();
        prop_assert_eq!(facts_back, f);
    }
}

fn gtid_set() -> impl Strategy<Value = GtidSet> {
    prop::collection::vec((0u32..4, any::<bool>(), 1u64..40, 0u64..10), 0..8).prop_map(|parts| {
        let mut s = GtidSet::new();
        for (src, maria, a, len) in parts {
            let source = if maria {
                SourceId::MariaDb {
                    domain: src % 2,
                    server_id: src,
                }
            } else {
                SourceId::Uuid {
                    uuid: u128::from(src) << 64 | 7,
                    tag: if src == 3 {
                        "tag_a".into()
                    } else {
                        String::new()
                    },
                }
            };
            s.insert_interval(source, a, a + len);
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn gtid_text_round_trips(a in gtid_set()) {
        let text = a.to_string();
        prop_assert_eq!(GtidSet::parse(&text).unwrap(), a);
    }

    #[test]
    fn gtid_algebra_laws(a in gtid_set(), b in gtid_set(), c in gtid_set()) {
        prop_assert_eq!(a.union(&b), b.union(&a));
        prop_assert_eq!(a.union(&b).union(&c), a.union(&b.union(&c)));
        prop_assert!(a.is_subset(&a.union(&b)));
        prop_assert!(a.subtract(&b).is_subset(&a));
        prop_assert!(a.subtract(&b).intersection(&b).is_empty());
        prop_assert_eq!(a.subtract(&b).union(&a.intersection(&b)), a.clone());
        prop_assert_eq!(a.is_subset(&b), a.subtract(&b).is_empty());
        prop_assert_eq!(a.union(&b).subtract(&b), a.subtract(&b));
        prop_assert!(a.subtract(&a).is_empty());
        prop_assert_eq!(
            a.union(&b).transaction_count(),
            a.transaction_count() + b.transaction_count() - a.intersection(&b).transaction_count()
        );
        if a.is_subset(&b) && b.is_subset(&a) {
            prop_assert_eq!(&a, &b);
        }
    }
}
