//! The derived view of one round's facts (MOCO's `GatherStatus` post-processing): which
//! instance is primary, which replicas are errant or hung, which can take over, and whether
//! the primary may be deleted. Everything the state rules and the plans look at is here.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::facts::{ClusterFacts, Flavor, InstanceFacts, MysqldStatus, ThreadState};
use crate::gtid::GtidSet;
use crate::quorum::{Quorum, observed_wait_count, required_acks};

/// Derived per-round facts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Assessment {
    /// `status.currentPrimaryIndex`.
    pub primary: u32,
    /// Ordinals with errant transactions (from this round, or remembered when the primary
    /// could not be asked).
    pub errant: Vec<u32>,
    /// Non-primaries whose semi-sync primary side has waiting sessions: a former primary that
    /// still holds unacknowledged commits. They count as unreachable.
    pub hung: Vec<u32>,
    /// Replicas that could become primary by switchover, lowest ordinal first.
    pub candidates: Vec<u32>,
    /// The primary reports an empty executed set while a replica has data.
    pub lost_data: bool,
    /// A replica lags more than `maxDelaySecondsForPodDeletion`.
    pub prevent_pod_deletion: bool,
    /// Number of ready Pods.
    pub ready_pods: u32,
}

impl Assessment {
    /// True when `index` is errant.
    pub fn is_errant(&self, index: u32) -> bool {
        self.errant.binary_search(&index).is_ok()
    }
}

/// A view of the facts with hung instances treated as unreachable.
#[derive(Debug)]
pub(crate) struct View<'a> {
    pub facts: &'a ClusterFacts,
    pub assessment: Assessment,
    /// Who acknowledges commits this round (computed last, from the rest of the view).
    pub quorum: Quorum,
    /// The instances by ordinal. Plans iterate this, never `facts.instances`, so that no
    /// decision depends on the order an adapter lists instances in (Pods listed by name put
    /// `-10` before `-2`).
    ordered: Vec<&'a InstanceFacts>,
}

impl<'a> View<'a> {
    pub(crate) fn instance(&self, index: u32) -> Option<&'a InstanceFacts> {
        let pos = self
            .ordered
            .binary_search_by_key(&index, |i| i.index)
            .ok()?;
        self.ordered.get(pos).copied()
    }

    /// Every instance, lowest ordinal first.
    pub(crate) fn instances(&self) -> impl Iterator<Item = &'a InstanceFacts> + '_ {
        self.ordered.iter().copied()
    }

    /// mysqld status, or `None` when unreachable or hung.
    pub(crate) fn mysqld(&self, index: u32) -> Option<&'a MysqldStatus> {
        if self.assessment.hung.binary_search(&index).is_ok() {
            return None;
        }
        self.instance(index).and_then(|i| i.mysqld.as_ref())
    }

    pub(crate) fn primary(&self) -> Option<&'a InstanceFacts> {
        self.instance(self.assessment.primary)
    }

    pub(crate) fn primary_status(&self) -> Option<&'a MysqldStatus> {
        self.mysqld(self.assessment.primary)
    }

    /// Every instance but the primary, lowest ordinal first.
    pub(crate) fn non_primaries(&self) -> impl Iterator<Item = &'a InstanceFacts> + '_ {
        let p = self.assessment.primary;
        self.instances().filter(move |i| i.index != p)
    }

    pub(crate) fn replicas(&self) -> u32 {
        self.facts.spec.replicas
    }

    /// True when `index` is past `spec.replicas`: an instance a shrinking cluster removes once
    /// it no longer counts for any acknowledged commit.
    pub(crate) fn is_leaving(&self, index: u32) -> bool {
        index >= self.replicas()
    }

    /// The listed instances that are leaving, lowest ordinal first.
    pub(crate) fn leaving(&self) -> impl Iterator<Item = &'a InstanceFacts> + '_ {
        let n = self.replicas();
        self.instances().filter(move |i| i.index >= n)
    }

    pub(crate) fn flavor(&self) -> Flavor {
        self.facts.spec.flavor
    }

    /// True when `status` replicates from the current primary's address.
    pub(crate) fn replicates_from_primary(&self, status: &MysqldStatus) -> bool {
        match (self.primary(), &status.replica_status) {
            (Some(p), Some(r)) => r.source_host == p.host && r.source_port == p.port,
            _ => false,
        }
    }

    /// MOCO's "ok replica": reachable, Pod ready, read-only, replicating from the primary,
    /// not errant — plus both replication threads running, which MOCO gets from the
    /// agent's readiness probe and the core checks directly.
    pub(crate) fn is_ok_replica(&self, inst: &InstanceFacts) -> bool {
        self.replica_flaw(inst).is_none()
    }

    /// Why `inst` is not an ok replica (the first rule it breaks, in the words a refused
    /// switchover request reports), or `None` when it is one.
    pub(crate) fn replica_flaw(&self, inst: &InstanceFacts) -> Option<&'static str> {
        if !inst.pod.exists {
            return Some("its Pod does not exist");
        }
        if !inst.pod.ready {
            return Some("its Pod is not Ready");
        }
        if self.assessment.is_errant(inst.index) {
            return Some("it has errant transactions");
        }
        let Some(s) = self.mysqld(inst.index) else {
            return Some("its mysqld does not answer");
        };
        if !s.super_read_only {
            return Some("it is not read-only");
        }
        if !self.replicates_from_primary(s) {
            return Some("it does not replicate from the primary");
        }
        let running = s
            .replica_status
            .as_ref()
            .is_some_and(|r| r.io_running == ThreadState::Yes && r.sql_running == ThreadState::Yes);
        if !running {
            return Some("its replication threads are not both running");
        }
        None
    }

    /// Replicas connected to the primary whose server_id belongs to this cluster.
    pub(crate) fn in_cluster_replica_hosts(&self) -> u32 {
        let base = u64::from(self.facts.spec.server_id_base);
        let end = base + u64::from(self.replicas());
        let ids: BTreeSet<u32> = self
            .primary_status()
            .map(|p| {
                p.replica_hosts
                    .iter()
                    .map(|h| h.server_id)
                    .filter(|id| (base..end).contains(&u64::from(*id)))
                    .collect()
            })
            .unwrap_or_default();
        u32::try_from(ids.len()).unwrap_or(u32::MAX)
    }
}

/// Builds the assessment (errant detection, hang-ups, lost data, candidates, prevent-delete).
pub(crate) fn assess(facts: &ClusterFacts) -> View<'_> {
    let primary = facts.status.current_primary_index;
    let primary_status = facts
        .instances
        .iter()
        .find(|x| x.index == primary)
        .and_then(|i| i.mysqld.as_ref());

    // Errant detection: the replica executed something the primary has not, from a source
    // other than the primary itself (a replica may have read more of the primary's binlog than
    // the primary's own snapshot shows, MOCO #419).
    let mut errant: Vec<u32> = match primary_status {
        Some(p) if !p.gtid_executed.is_empty() => {
            let identity = p.identity();
            facts
                .instances
                .iter()
                .filter(|i| i.index != primary)
                .filter_map(|i| i.mysqld.as_ref().map(|s| (i.index, s)))
                .filter(|(_, s)| {
                    let extra = s.gtid_executed.subtract(&p.gtid_executed);
                    let foreign = match &identity {
                        Some(id) => extra.without_server(id),
                        None => extra,
                    };
                    !foreign.is_empty()
                })
                .map(|(i, _)| i)
                // An instance that did not answer keeps the verdict it had: nothing new is
                // known of it, and forgetting it would make it a failover candidate, with its
                // errant transactions, once it answers again (simulator bug 9).
                .chain(
                    facts
                        .status
                        .errant_replica_list
                        .iter()
                        .copied()
                        .filter(|&i| {
                            i != primary
                                && facts
                                    .instances
                                    .iter()
                                    .any(|x| x.index == i && x.mysqld.is_none())
                        }),
                )
                .collect()
        }
        _ => facts
            .status
            .errant_replica_list
            .iter()
            .copied()
            .filter(|&i| i != primary)
            // An instance past the size that is no longer listed has left the cluster.
            .filter(|&i| i < facts.spec.replicas || facts.instances.iter().any(|x| x.index == i))
            .collect(),
    };
    errant.sort_unstable();
    errant.dedup();

    let mut hung: Vec<u32> = facts
        .instances
        .iter()
        .filter(|i| i.index != primary)
        .filter(|i| {
            i.mysqld
                .as_ref()
                .is_some_and(|s| s.semi_sync.wait_sessions > 0)
        })
        .map(|i| i.index)
        .collect();
    hung.sort_unstable();

    // MySQL's AFTER_SYNC semi-sync adds a commit to gtid_executed only once acknowledged, so a
    // replica may hold the primary's first transactions while the primary shows none: that is
    // not lost data when the primary waits for ACKs or the replicas' data comes from the
    // primary itself. A wiped MySQL primary has a new server_uuid, so its old transactions are
    // foreign. MariaDB's gtid_binlog_state includes waiting commits, and a wiped MariaDB server
    // keeps its server_id, so there any replica data counts.
    let lost_data = primary_status.is_some_and(|p| {
        let identity = match p.flavor {
            crate::facts::Flavor::Mysql => p.identity(),
            crate::facts::Flavor::Mariadb => None,
        };
        p.gtid_executed.is_empty()
            && p.semi_sync.wait_sessions == 0
            && facts
                .instances
                .iter()
                .filter(|i| i.index != primary && hung.binary_search(&i.index).is_err())
                .filter_map(|i| i.mysqld.as_ref())
                .any(|s| match &identity {
                    Some(id) => !s.gtid_executed.without_server(id).is_empty(),
                    None => !s.gtid_executed.is_empty(),
                })
    });

    let limit = facts.spec.max_delay_seconds_for_pod_deletion;
    let prevent_pod_deletion = limit > 0
        && facts
            .instances
            .iter()
            .filter(|i| i.index != primary)
            .filter_map(|i| {
                i.mysqld
                    .as_ref()?
                    .replica_status
                    .as_ref()?
                    .seconds_behind_source
            })
            .any(|lag| lag > limit);

    let ready_pods = u32::try_from(
        facts
            .instances
            .iter()
            .filter(|i| i.index < facts.spec.replicas && i.pod.exists && i.pod.ready)
            .count(),
    )
    .unwrap_or(u32::MAX);

    let mut ordered: Vec<&InstanceFacts> = facts.instances.iter().collect();
    ordered.sort_by_key(|i| i.index);
    let mut view = View {
        ordered,
        facts,
        assessment: Assessment {
            primary,
            errant,
            hung,
            candidates: Vec::new(),
            lost_data,
            prevent_pod_deletion,
            ready_pods,
        },
        quorum: Quorum::default(),
    };
    let candidates: Vec<u32> = view
        .non_primaries()
        .filter(|i| view.is_ok_replica(i))
        .map(|i| i.index)
        .collect();
    view.assessment.candidates = candidates;
    view.quorum = assess_quorum(&view);
    view
}

/// What a replica holds or will hold once its relay log is applied: retrieved ∪ executed.
pub(crate) fn received_set(status: &MysqldStatus) -> GtidSet {
    match &status.replica_status {
        Some(r) => r.retrieved_gtid_set.union(&status.gtid_executed),
        None => status.gtid_executed.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// The semi-sync membership of a growing cluster (rules and data in `crate::quorum`).

/// A learner that has caught up: replicating from the primary with its IO thread running and
/// holding everything the primary executed.
fn caught_up(v: &View<'_>, index: u32, primary: &MysqldStatus) -> bool {
    if v.assessment.is_errant(index) {
        return false;
    }
    let Some(s) = v.mysqld(index) else {
        return false;
    };
    v.replicates_from_primary(s)
        && s.replica_status
            .as_ref()
            .is_some_and(|r| r.io_running == ThreadState::Yes)
        && primary.gtid_executed.is_subset(&received_set(s))
}

/// A shrinking cluster may stop counting its leaving instances: the primary stays, every
/// leaving instance listed acknowledges nothing any more (its IO thread stopped, or its Pod
/// gone), and enough remaining members hold everything the primary executed, so every commit
/// a leaving instance acknowledged is also on the remaining ones.
fn leaving_released(v: &View<'_>, primary: &MysqldStatus) -> bool {
    let n = v.replicas();
    if v.is_leaving(v.assessment.primary) {
        return false;
    }
    let silent = v.leaving().all(|i| {
        !i.pod.exists
            || v.mysqld(i.index).is_some_and(|s| {
                s.replica_status
                    .as_ref()
                    .is_none_or(|r| r.io_running == ThreadState::No)
            })
    });
    let holding = v
        .non_primaries()
        .filter(|i| i.index < n && !v.assessment.is_errant(i.index))
        .filter_map(|i| v.mysqld(i.index))
        .filter(|s| primary.gtid_executed.is_subset(&received_set(s)))
        .count();
    silent && u32::try_from(holding).unwrap_or(u32::MAX) >= required_acks(n, v.flavor())
}

/// Decides the members, the wait count and the acknowledgement floor for this round.
pub(crate) fn assess_quorum(v: &View<'_>) -> Quorum {
    let n = v.replicas();
    let flavor = v.flavor();
    let status = &v.facts.status;
    let listed = v.instances().map(|i| i.index + 1).max().unwrap_or(0);
    // An intermediate primary runs no semi-sync: nothing to track.
    if v.facts.spec.external_source.is_some() {
        // Its instances replicate asynchronously: leaving ones never hold anything the others
        // need, so they may go at once.
        return Quorum {
            members: n,
            previous_members: n,
            wait_count: 0,
            min_acks: required_acks(n, flavor),
            recorded_members: (status.semi_sync_members.is_some() || listed > n).then_some(n),
            recorded_min_acks: status.semi_sync_min_acks,
        };
    }
    // Without a record every listed instance counts (a cluster that never changed size, or
    // one whose status was written by MOCO).
    let old_members = status.semi_sync_members.unwrap_or(n.max(listed));
    let previous_members = old_members;
    let mut members = old_members;
    let mut min_acks = status
        .semi_sync_min_acks
        .unwrap_or_else(|| required_acks(old_members, flavor));
    let primary = v.primary_status();
    if let Some(p) = primary {
        // Learners join in ordinal order, each once it has caught up (a learner promoted by
        // a failover holds everything: it has joined); leaving instances stop counting
        // together, once none of them is needed for an acknowledged commit.
        let primary_index = v.assessment.primary;
        while members < n && (members == primary_index || caught_up(v, members, p)) {
            members += 1;
        }
        if members > n && leaving_released(v, p) {
            members = n;
        }
    }
    // While instances leave, the primary already waits only for what the remaining members
    // can give (the floor is lowered with it, before the step).
    let wait_count = required_acks(members.min(n), flavor);
    // Commits are acknowledged only while the primary is writable; a read-only primary (a
    // new one not yet configured) acknowledges nothing, whatever its settings.
    let running = primary.filter(|p| !p.read_only).map(observed_wait_count);
    if let Some(count) = running {
        min_acks = min_acks.min(count);
    }
    if wait_count < min_acks {
        min_acks = wait_count;
    } else if let (Some(p), Some(count)) = (primary, running)
        && count > min_acks
    {
        // The count was raised in an earlier round, so every commit acknowledged under the
        // lower one is in the executed set read now: the members holding all of it hold them.
        // Never above the count this round sets: a count about to be lowered does not hold
        // for the commits after it.
        let holding = v
            .non_primaries()
            .filter(|i| i.index < members && !v.assessment.is_errant(i.index))
            .filter_map(|i| v.mysqld(i.index))
            .filter(|s| p.gtid_executed.is_subset(&received_set(s)))
            .count();
        let holding = u32::try_from(holding).unwrap_or(u32::MAX);
        min_acks = min_acks.max(count.min(holding).min(wait_count));
    }
    Quorum {
        members,
        previous_members,
        wait_count,
        min_acks,
        recorded_members: Some(members),
        recorded_min_acks: (min_acks != required_acks(members, flavor)).then_some(min_acks),
    }
}
