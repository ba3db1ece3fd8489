//! Configure: bring role labels, replication, semi-sync and read-only flags in line with
//! `currentPrimaryIndex` (MOCO's `configure`, run in the Degraded and Incomplete states).

use crate::assessment::View;
use crate::facts::{ExternalSource, Flavor, InstanceFacts, MysqldStatus, Role, ThreadState};
use crate::operation::{Event, Operation, ReplicationSource, Step};
use crate::quorum::{full_size_failover_quorum, observed_wait_count, required_acks};

use super::channel::{self, Channel};
use super::{Action, Planned, READ_ONLY_TIMEOUT_SECONDS, SEMI_SYNC_TIMEOUT_MS, clone};

/// The label instance `index` should carry: none for errant replicas and for instances that
/// are leaving (no client is routed to them while they go).
fn desired_role(v: &View<'_>, index: u32) -> Option<Role> {
    if index == v.assessment.primary {
        Some(Role::Primary)
    } else if v.assessment.is_errant(index) || v.is_leaving(index) {
        None
    } else {
        Some(Role::Replica)
    }
}

/// Healthy clusters plan nothing but label repairs (there are none when labels are right).
pub(super) fn fix_labels(v: &View<'_>) -> Planned {
    let mut p = Planned::new(Action::None);
    let (removals, additions) = label_changes(v);
    if removals.is_empty() && additions.is_empty() {
        return p;
    }
    p.action = Action::Configure;
    p.steps.extend(removals);
    for (index, role) in additions {
        p.steps.push(Step::new(Operation::SetRoleLabel {
            index,
            role: Some(role),
        }));
    }
    p
}

/// Label removals (wrong labels) and the labels to add to live, non-errant instances.
/// Dead instances get no label, so a restarted ex-primary is never routed to before it has
/// been checked for errant transactions (MOCO #801).
fn label_changes(v: &View<'_>) -> (Vec<Step>, Vec<(u32, Role)>) {
    let mut removals = Vec::new();
    let mut additions = Vec::new();
    for inst in v.instances().filter(|i| i.pod.exists) {
        let want = desired_role(v, inst.index);
        let have = inst.pod.role_label;
        if have.is_some() && have != want {
            removals.push(Step::new(Operation::SetRoleLabel {
                index: inst.index,
                role: None,
            }));
        }
        if have != want
            && let Some(role) = want
            && v.mysqld(inst.index).is_some()
        {
            additions.push((inst.index, role));
        }
    }
    (removals, additions)
}

pub(super) fn configure(v: &View<'_>) -> Planned {
    let mut p = Planned::new(Action::Configure);

    // 1–2. Remove wrong labels; kill the connections of instances whose role changes so that
    // clients reconnect through the right endpoint.
    let (removals, additions) = label_changes(v);
    p.steps.extend(removals);
    for (index, _) in &additions {
        p.steps
            .push(Step::new(Operation::KillConnections { index: *index }));
    }

    // 3. The primary.
    let (Some(ps), Some(pi)) = (v.primary_status(), v.primary()) else {
        return finish(p, additions);
    };
    let raise = match v.facts.spec.external_source.as_ref() {
        Some(ext) => {
            intermediate_primary(v, ps, ext, &mut p);
            None
        }
        None => own_primary(v, ps, &mut p),
    };

    // 4. Replicas.
    let source = ReplicationSource::Instance {
        index: v.assessment.primary,
        host: pi.host.clone(),
        port: pi.port,
    };
    // Learners (instances a growing cluster has not caught up yet) replicate asynchronously.
    let own = v.facts.spec.external_source.is_none();
    for inst in v.non_primaries() {
        if v.is_leaving(inst.index) {
            leaving(v, inst, &mut p);
            continue;
        }
        let semi_sync = own && v.quorum.is_member(inst.index);
        replica(v, inst, ps, pi, &source, semi_sync, &mut p);
    }
    p.steps.extend(raise);

    // 5–6. Labels for live instances; the primary opens for writes last.
    let mut open = own && ps.read_only;
    if open && let Some(held) = empty_primary_held(v, ps) {
        p.events.push(held);
        open = false;
    }
    finish_with(p, additions, open.then_some(v.assessment.primary))
}

/// An empty primary opens only once enough replicas answered to show the cluster has no data
/// elsewhere: an acknowledged commit is on `acks` replicas, so any `replicas − acks` of them
/// hold it. Otherwise a primary that lost its data directory while the replicas were away
/// would look like a new cluster and accept writes next to replicas holding the acknowledged
/// history (simulator bug 7); with data on an answering replica the state is Failed instead.
/// Returns the warning that says why the primary stays read-only, if it does.
fn empty_primary_held(v: &View<'_>, ps: &MysqldStatus) -> Option<Event> {
    let replicas = v.replicas();
    if !ps.gtid_executed.is_empty() || replicas <= 1 {
        return None;
    }
    let need = full_size_failover_quorum(replicas, v.flavor());
    let answering = v
        .non_primaries()
        .filter(|i| v.mysqld(i.index).is_some())
        .count();
    let answering = u32::try_from(answering).unwrap_or(u32::MAX);
    (answering < need).then(|| {
        Event::warning(
            "WaitingForReplicas",
            format!(
                "instance {} has no transactions and {answering} of {} replicas answer: it opens for writes once {need} answer, so that a primary that lost its data is never opened in place of one whose replicas hold it",
                v.assessment.primary,
                replicas - 1
            ),
        )
    })
}

/// The primary of an intermediate cluster: read-only, replicating from the external source.
fn intermediate_primary(v: &View<'_>, ps: &MysqldStatus, ext: &ExternalSource, p: &mut Planned) {
    let primary = v.assessment.primary;
    if !ps.super_read_only {
        p.steps.push(Step::new(Operation::SetSuperReadOnly {
            index: primary,
            timeout_seconds: READ_ONLY_TIMEOUT_SECONDS,
        }));
    }
    let ok = ps.replica_status.as_ref().is_some_and(|r| {
        r.io_running == ThreadState::Yes && r.source_host == ext.host && r.source_port == ext.port
    });
    if !ok {
        p.steps.push(Step::new(Operation::ConfigureReplication {
            index: primary,
            source: ReplicationSource::External {
                host: ext.host.clone(),
                port: ext.port,
            },
            semi_sync: false,
        }));
    }
}

/// The primary of a cluster of its own: no replication channel left running, everything it
/// received applied, and the members' semi-sync wait count (`docs/clustering.md`, "Growing").
/// Returns the step that raises a writable primary's count: it runs after the replicas'
/// steps (which may restart a channel the raise counts on).
fn own_primary(v: &View<'_>, ps: &MysqldStatus, p: &mut Planned) -> Option<Step> {
    let primary = v.assessment.primary;
    if let Some(r) = &ps.replica_status {
        if r.io_running != ThreadState::No {
            p.steps
                .push(Step::new(Operation::StopReplicaIoThread { index: primary }));
        }
        // Apply whatever was received before opening writes (MOCO waits without limit).
        if !r.retrieved_gtid_set.is_subset(&ps.gtid_executed) {
            p.steps.push(Step::new(Operation::WaitForGtid {
                index: primary,
                gtid: r.retrieved_gtid_set.clone(),
                timeout_seconds: None,
            }));
        }
    }
    let want = v.quorum.wait_count;
    let have = observed_wait_count(ps);
    if want == 0 {
        // Fewer than two members: nobody to wait for (a single instance, or one whose new
        // replicas are still learners).
        if ps.semi_sync.source_enabled {
            p.steps.push(Step::new(Operation::SetReplicaSemiSync {
                index: primary,
                enabled: false,
            }));
        }
        return None;
    }
    if have == want && ps.semi_sync.source_enabled {
        return None;
    }
    // A writable primary raises its count only as far as the members that acknowledge now
    // allow (flag on, IO thread running from it): a member that joins this round gets its
    // flag in this plan and counts from the next round, so no commit waits for it meanwhile.
    // A read-only primary takes the members' count at once: its replicas are configured in
    // the same plan, before it opens.
    let want = if want > have && !ps.read_only {
        want.min(required_acks(acknowledging(v) + 1, v.flavor()).max(have))
    } else {
        want
    };
    if (want == have && ps.semi_sync.source_enabled) || want == 0 {
        return None;
    }
    let step = Step::new(Operation::ConfigurePrimarySemiSync {
        index: primary,
        wait_for_replica_count: want,
        timeout_ms: SEMI_SYNC_TIMEOUT_MS,
    });
    let replicas = v.replicas();
    let full = replicas / 2;
    if v.flavor() == Flavor::Mariadb && want < full && v.quorum.members == replicas {
        p.events.push(Event::warning(
            "SemiSyncWeakened",
            format!(
                "MariaDB waits for one replica acknowledgement per commit; MOCO would wait for {full} with {replicas} instances, so an acknowledged commit may exist on a single replica"
            ),
        ));
    }
    // A raise on a writable primary waits for the replicas' steps; a lower count (or a
    // primary not yet open for writes) goes first, as MOCO orders it.
    if want > have && !ps.read_only {
        Some(step)
    } else {
        p.steps.push(step);
        None
    }
}

/// Members other than the primary that acknowledge commits now: not errant, replicating from
/// the primary with their IO thread running and the semi-sync flag on.
fn acknowledging(v: &View<'_>) -> u32 {
    let count = v
        .non_primaries()
        .filter(|i| {
            v.quorum.is_member(i.index)
                && !v.is_leaving(i.index)
                && !v.assessment.is_errant(i.index)
        })
        .filter_map(|i| v.mysqld(i.index))
        .filter(|s| {
            s.semi_sync.replica_enabled
                && v.replicates_from_primary(s)
                && s.replica_status
                    .as_ref()
                    .is_some_and(|r| r.io_running == ThreadState::Yes)
        })
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// Makes a writable non-primary read-only, ending the sessions that could still write before
/// and after. Before: on a thawed former primary, commits wait for acknowledgements no replica
/// will give, and MariaDB's `read_only` waits for them (for `READ_ONLY_TIMEOUT_SECONDS`, then
/// kills): nothing a non-primary's clients do deserves that grace (a switchover, which does
/// give it, fences the primary elsewhere), so unless this plan already ended them (a role
/// change does), they are ended first. After: a session that connected in between.
fn fence(raw: &MysqldStatus, index: u32, p: &mut Planned) {
    if !raw.super_read_only {
        let killed = p
            .steps
            .iter()
            .any(|s| s.operation == Operation::KillConnections { index });
        if !killed {
            p.steps
                .push(Step::new(Operation::KillConnections { index }));
        }
        p.steps.push(Step::new(Operation::SetSuperReadOnly {
            index,
            timeout_seconds: READ_ONLY_TIMEOUT_SECONDS,
        }));
        p.steps
            .push(Step::new(Operation::KillConnections { index }));
    }
}

/// An instance past `spec.replicas`: fenced read-only, and its IO thread stopped so that it
/// acknowledges nothing more (the primary's lower count, set earlier in this plan, needs only
/// the remaining members). Its channel is not changed, so its relay log stays and is applied:
/// until it stops counting, a failover may still need it. It is never cloned or re-pointed.
/// One that does not answer is named while it holds the shrink up.
fn leaving(v: &View<'_>, inst: &InstanceFacts, p: &mut Planned) {
    let index = inst.index;
    let Some(raw) = inst.mysqld.as_ref() else {
        if inst.pod.exists && v.quorum.is_member(index) {
            p.events.push(Event::warning(
                "LeavingUnreachable",
                format!(
                    "instance {index} is leaving (spec.replicas = {}) but does not answer: it may acknowledge commits when it comes back, so it keeps counting until it answers or its Pod is gone",
                    v.replicas()
                ),
            ));
        }
        return;
    };
    fence(raw, index, p);
    if v.mysqld(index)
        .and_then(|s| s.replica_status.as_ref())
        .is_some_and(|r| r.io_running != ThreadState::No)
    {
        p.steps
            .push(Step::new(Operation::StopReplicaIoThread { index }));
    }
}

/// One non-primary: fenced read-only, then cloned, left alone (errant), restarted or pointed
/// at the primary.
fn replica(
    v: &View<'_>,
    inst: &InstanceFacts,
    ps: &MysqldStatus,
    pi: &InstanceFacts,
    source: &ReplicationSource,
    semi_sync: bool,
    p: &mut Planned,
) {
    let index = inst.index;
    // Every reachable non-primary is made read-only, errant and hung ones included (MOCO
    // leaves those alone; nothing routes to them, but a direct client could still write).
    let Some(raw) = inst.mysqld.as_ref() else {
        return;
    };
    fence(raw, index, p);
    let Some(s) = v.mysqld(index) else { return };
    if v.assessment.is_errant(index) {
        if v.facts.spec.reclone_errant && !ps.gtid_executed.is_empty() {
            p.steps
                .push(clone::replica_clone(v, index, "re-clone errant instance"));
        } else if s.io_running() {
            p.steps
                .push(Step::new(Operation::StopReplicaIoThread { index }));
        }
        return;
    }
    let empty = s.gtid_executed.is_empty();
    let broken_empty = empty
        && s.replica_status
            .as_ref()
            .is_some_and(|r| r.last_io_errno == ER_SOURCE_FATAL_READING_BINLOG);
    let replay_ok = v.flavor() == Flavor::Mariadb && ps.gtid_purged.is_empty();
    // An empty replica is cloned (MOCO), except on MariaDB while the primary still holds
    // every binlog: replaying from the start is as good and restarts nothing. If the
    // replay fails because binlogs are gone (error 1236), clone after all.
    let needs_clone = empty
        && !ps.gtid_executed.is_empty()
        && (broken_empty || (s.replica_status.is_none() && !replay_ok));
    if needs_clone {
        p.steps
            .push(clone::replica_clone(v, index, "clone instance"));
        return;
    }
    let acknowledged = v.quorum.may_have_acknowledged(index);
    match channel::decide_channel(v.flavor(), s, pi, semi_sync, acknowledged) {
        Channel::Keep | Channel::ApplyFirst { start_sql: false } => return,
        Channel::ApplyFirst { start_sql: true } | Channel::StartSql => {
            p.steps
                .push(Step::new(Operation::StartReplicaSqlThread { index }));
            return;
        }
        Channel::Restart { stop_io, set_flags } => {
            if stop_io {
                p.steps
                    .push(Step::new(Operation::StopReplicaIoThread { index }));
            }
            if set_flags {
                p.steps.push(Step::new(Operation::SetReplicaSemiSync {
                    index,
                    enabled: semi_sync,
                }));
            }
            p.steps.push(Step::new(Operation::StartReplica { index }));
            return;
        }
        Channel::Rebuild => {}
    }
    // A replica must hold everything the primary purged from its binlogs, or replication
    // cannot start (MOCO's GTID_SUBTRACT(primary.gtid_purged, replica.gtid_executed) check).
    if !ps.gtid_purged.is_subset(&s.gtid_executed) {
        p.events.push(Event::warning(
            "ReplicationImpossible",
            format!(
                "instance {index} lacks transactions the primary already purged ({}); re-initialise it so that it is cloned",
                ps.gtid_purged.subtract(&s.gtid_executed)
            ),
        ));
        return;
    }
    p.steps.push(Step::new(Operation::ConfigureReplication {
        index,
        source: source.clone(),
        semi_sync,
    }));
}

/// MySQL error 1236 (`ER_SOURCE_FATAL_ERROR_READING_BINLOG`): the source no longer has what
/// the replica asks for.
const ER_SOURCE_FATAL_READING_BINLOG: u32 = 1236;

fn finish(p: Planned, additions: Vec<(u32, Role)>) -> Planned {
    finish_with(p, additions, None)
}

/// Adds the role labels, then opens `writable` for writes (MOCO's steps 5 and 6).
fn finish_with(mut p: Planned, additions: Vec<(u32, Role)>, writable: Option<u32>) -> Planned {
    for (index, role) in additions {
        p.steps.push(Step::new(Operation::SetRoleLabel {
            index,
            role: Some(role),
        }));
    }
    if let Some(index) = writable {
        p.steps.push(
            Step::new(Operation::SetWritable { index }).succeeding_with(Event::normal(
                "Writable",
                format!("instance {index} became writable"),
            )),
        );
    }
    p.action = if p.steps.is_empty() && p.events.is_empty() {
        Action::None
    } else {
        Action::Configure
    };
    p
}
