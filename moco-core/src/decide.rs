//! The entry point: facts in, [`Decision`] out.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::assessment::{Assessment, View, assess};
use crate::error::FactsError;
use crate::facts::{ClusterFacts, FACTS_SCHEMA_VERSION, Flavor, MysqldStatus, SpecFacts};
use crate::gtid::parse_server_uuid;
use crate::operation::{Event, Step};
use crate::plan::{self, Action};
use crate::quorum::observed_wait_count;
use crate::state::ClusterState;
use crate::status::{ClusterStatus, StatusInputs, next_status};

/// Everything the engine decided in one round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// The cluster state.
    pub state: ClusterState,
    /// What the plan does, in one word.
    pub action: Action,
    /// Derived facts the state was decided from.
    pub assessment: Assessment,
    /// The status to persist before executing the steps.
    pub status: ClusterStatus,
    /// The operations, in order. The executor stops at the first failure.
    pub steps: Vec<Step>,
    /// Events to record now, whatever the steps do (e.g. a refused failover).
    pub events: Vec<Event>,
    /// Observe and decide again right after executing the steps (MOCO's `redo`).
    pub redo: bool,
}

/// The most instances facts may describe. No semi-synchronous cluster comes near it (MOCO
/// documents clusters of 10 or more as misordered by its rollout); it keeps every
/// per-instance allocation of a decision small whatever the input says.
pub const MAX_REPLICAS: u32 = 255;

/// Checks that the facts describe a possible cluster; errors name the JSON path.
pub fn check_facts(facts: &ClusterFacts) -> Result<(), FactsError> {
    if facts.schema_version != FACTS_SCHEMA_VERSION {
        return Err(FactsError::new(
            "schemaVersion",
            format!(
                "{} is not a facts layout this engine reads (it reads {FACTS_SCHEMA_VERSION}; see CHANGELOG.md)",
                facts.schema_version
            ),
        ));
    }
    let spec = &facts.spec;
    if spec.replicas == 0 {
        return Err(FactsError::new("spec.replicas", "must be at least 1"));
    }
    if spec.replicas > MAX_REPLICAS {
        return Err(FactsError::new(
            "spec.replicas",
            format!(
                "{} is more instances than this engine plans for (at most {MAX_REPLICAS})",
                spec.replicas
            ),
        ));
    }
    if spec.server_id_base == 0 {
        return Err(FactsError::new("spec.serverIdBase", "must be positive"));
    }
    // Ordinals past `spec.replicas` are instances a shrinking cluster still has: they stay in
    // the facts while they leave (`docs/clustering.md`, "Shrinking").
    let mut seen = vec![false; usize::try_from(MAX_REPLICAS).unwrap_or(0)];
    for (n, inst) in facts.instances.iter().enumerate() {
        let slot = usize::try_from(inst.index)
            .ok()
            .and_then(|i| seen.get_mut(i));
        match slot {
            None => {
                return Err(FactsError::new(
                    format!("instances[{n}].index"),
                    format!(
                        "{} is not an instance ordinal (below {MAX_REPLICAS})",
                        inst.index
                    ),
                ));
            }
            Some(true) => {
                return Err(FactsError::new(
                    format!("instances[{n}].index"),
                    format!("instance {} appears twice", inst.index),
                ));
            }
            Some(s) => *s = true,
        }
        if let Some(m) = &inst.mysqld
            && m.super_read_only
            && !m.read_only
        {
            // MySQL keeps read_only on while super_read_only is on; the MariaDB adapter reports
            // super_read_only = read_only. Anything else is a broken probe.
            return Err(FactsError::new(
                format!("instances[{n}].mysqld.superReadOnly"),
                "superReadOnly is true while readOnly is false",
            ));
        }
        if let Some(m) = &inst.mysqld {
            check_mysqld(spec, n, inst.index, m)?;
        }
    }
    let listed = |i: u32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| seen.get(i))
            .is_some_and(|s| *s)
    };
    if !spec.offline
        && let Some(missing) = (0..spec.replicas).find(|&i| !listed(i))
    {
        return Err(FactsError::new(
            "instances",
            format!(
                "instance {missing} is missing, spec.replicas = {}: every ordinal below it needs an entry",
                spec.replicas
            ),
        ));
    }
    let primary = facts.status.current_primary_index;
    if primary >= spec.replicas && !listed(primary) {
        return Err(FactsError::new(
            "status.currentPrimaryIndex",
            format!(
                "{primary} is not an instance ordinal (replicas = {}) nor a listed instance that is leaving",
                spec.replicas
            ),
        ));
    }
    if let Some(t) = facts.switchover_to
        && t >= spec.replicas
    {
        return Err(FactsError::new(
            "switchoverTo",
            format!(
                "{t} is not an instance ordinal (replicas = {})",
                spec.replicas
            ),
        ));
    }
    // An instance that left may still be remembered as errant: it drops out of the list.
    for (n, &i) in facts.status.errant_replica_list.iter().enumerate() {
        if i >= MAX_REPLICAS {
            return Err(FactsError::new(
                format!("status.errantReplicaList[{n}]"),
                format!("{i} is not an instance ordinal (below {MAX_REPLICAS})"),
            ));
        }
    }
    Ok(())
}

/// The per-instance rules of [`check_facts`] for a reachable mysqld.
fn check_mysqld(
    spec: &SpecFacts,
    n: usize,
    index: u32,
    m: &MysqldStatus,
) -> Result<(), FactsError> {
    let path = |field: &str| format!("instances[{n}].mysqld.{field}");
    if m.flavor != spec.flavor {
        return Err(FactsError::new(
            path("flavor"),
            format!(
                "\"{}\" does not match spec.flavor \"{}\"",
                m.flavor, spec.flavor
            ),
        ));
    }
    // Instance i runs with server_id = serverIdBase + i (MOCO's my.cnf); MariaDB names its
    // transactions by server_id, so a wrong one would make the primary's own transactions
    // look foreign, or another server's look like the primary's.
    let want = u64::from(spec.server_id_base) + u64::from(index);
    if u64::from(m.server_id) != want {
        return Err(FactsError::new(
            path("serverId"),
            format!(
                "{} is not spec.serverIdBase + index = {} + {index} = {want}",
                m.server_id, spec.server_id_base
            ),
        ));
    }
    // MySQL names transactions by server_uuid; without it the primary's own transactions on a
    // replica would count as errant and a healthy replica would be fenced.
    if spec.flavor == Flavor::Mysql {
        match m.server_uuid.as_deref() {
            None => {
                return Err(FactsError::new(
                    path("serverUuid"),
                    "is null; MySQL facts need @@server_uuid to tell the primary's own transactions",
                ));
            }
            Some(text) if parse_server_uuid(text).is_none() => {
                return Err(FactsError::new(
                    path("serverUuid"),
                    format!("\"{text}\" is not a UUID"),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Decides the state (MOCO's order, first match wins).
fn decide_state(v: &View<'_>) -> ClusterState {
    let facts = v.facts;
    let spec = &facts.spec;
    if spec.offline {
        return ClusterState::Offline;
    }
    let primary_status = v.primary_status();
    if spec.external_source.is_some() && !facts.status.cloned {
        let cloning = match primary_status {
            None => true,
            Some(p) => match p.clone_state {
                Some(state) => state != crate::facts::CloneState::Completed,
                None => p.gtid_executed.is_empty(),
            },
        };
        if cloning {
            return ClusterState::Cloning;
        }
    }
    if spec.restore && facts.status.restored_time.is_none() {
        return ClusterState::Restoring;
    }
    let intermediate = spec.external_source.is_some();
    let replicas = v.replicas();
    let primary_open = |p: &crate::facts::MysqldStatus| {
        if intermediate {
            p.super_read_only
        } else {
            !p.read_only
        }
    };
    let a = &v.assessment;
    let settled = |p: &crate::facts::MysqldStatus| intermediate || semi_sync_settled(v, p);

    // Healthy: every Pod ready, every replica ok, the primary open and seeing every replica.
    let all_ready = facts.instances.iter().all(|i| i.pod.exists && i.pod.ready);
    if let Some(p) = primary_status
        && all_ready
        && !a.lost_data
        && primary_open(p)
        && v.non_primaries().all(|i| v.is_ok_replica(i))
        && v.in_cluster_replica_hosts() == replicas - 1
        && settled(p)
    {
        return ClusterState::Healthy;
    }

    // Degraded: the primary serves writes with enough ok replicas among the members (all
    // instances unless the cluster grows: a learner is not needed for a commit).
    let half = v.quorum.members.min(replicas) / 2;
    let primary_ready = v.primary().is_some_and(|p| p.pod.exists && p.pod.ready);
    if let Some(p) = primary_status
        && primary_ready
        && !a.lost_data
        && primary_open(p)
        && v.in_cluster_replica_hosts() >= half
    {
        let ok = a
            .candidates
            .iter()
            .filter(|&&i| v.quorum.is_member(i))
            .count();
        let ok = u32::try_from(ok).unwrap_or(u32::MAX);
        if ok >= half && (ok != replicas - 1 || !settled(p)) {
            return ClusterState::Degraded;
        }
    }

    // Failed or Lost: the primary is gone (or empty) — can enough replicas replace it?
    if primary_status.is_none() || a.lost_data {
        // Only members acknowledge, so only they count (learners of a growing cluster may
        // still be chosen: the candidate must hold what every eligible replica received).
        let usable = v
            .non_primaries()
            .filter(|i| v.quorum.is_member(i.index) && !a.is_errant(i.index))
            .filter_map(|i| v.mysqld(i.index))
            .filter(|s| s.replica_status.is_some() && !s.gtid_executed.is_empty())
            .count();
        let usable = u32::try_from(usable).unwrap_or(u32::MAX);
        // A single instance has no replica and never reaches its quorum: Lost. So is a
        // cluster whose commits were acknowledged by nobody but the primary (min acks 0).
        return match v.quorum.failover_quorum(a.primary) {
            Some(need) if usable >= need => ClusterState::Failed,
            _ => ClusterState::Lost,
        };
    }
    ClusterState::Incomplete
}

/// Every instance is a member, none is leaving, the primary waits for the members' count and
/// every replica acknowledges: a cluster still changing size (or whose settings were reset)
/// is not Healthy, so configure runs and finishes the change.
fn semi_sync_settled(v: &View<'_>, p: &crate::facts::MysqldStatus) -> bool {
    let q = &v.quorum;
    q.members == v.replicas()
        && v.leaving().next().is_none()
        && observed_wait_count(p) == q.wait_count
        && v.non_primaries()
            .filter_map(|i| v.mysqld(i.index))
            .all(|s| s.semi_sync.replica_enabled)
}

/// Whether the primary can commit now. MOCO reports Available=True even when semi-sync has no
/// replica to wait for (MOCO #321); here a primary with fewer semi-sync clients than it needs
/// ACKs is not available.
fn write_block(v: &View<'_>) -> Option<String> {
    let p = v.primary_status()?;
    if !p.semi_sync.source_enabled || v.replicas() < 2 {
        return None;
    }
    let need = observed_wait_count(p).max(1);
    let clients = p.semi_sync.source_clients?;
    (clients < need).then(|| {
        format!(
            "the primary waits for {need} semi-sync acknowledgement(s) but only {clients} replica(s) are connected: commits block"
        )
    })
}

/// Decides everything for one round. Deterministic: the same facts give the same decision.
pub fn decide(facts: &ClusterFacts) -> Result<Decision, FactsError> {
    check_facts(facts)?;
    let view = assess(facts);
    let state = decide_state(&view);
    let block = write_block(&view);
    let status = next_status(&StatusInputs {
        old: &facts.status,
        state,
        primary_can_commit: block.is_none(),
        write_block_reason: block,
        errant: &view.assessment.errant,
        ready_pods: view.assessment.ready_pods,
        has_external_source: facts.spec.external_source.is_some(),
        now: facts.now,
    });
    let mut status = status;
    status.semi_sync_members = view.quorum.recorded_members;
    status.semi_sync_min_acks = view.quorum.recorded_min_acks;
    let planned = plan::plan(&view, state);
    Ok(Decision {
        state,
        action: planned.action,
        redo: !planned.steps.is_empty(),
        assessment: view.assessment,
        status,
        steps: planned.steps,
        events: planned.events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> ClusterFacts {
        serde_json::from_str(include_str!("../../docs/examples/facts/healthy.json")).unwrap()
    }

    fn path_of(f: &ClusterFacts) -> String {
        check_facts(f).unwrap_err().path
    }

    #[test]
    fn inconsistent_facts_name_their_path() {
        let mut f = healthy();
        f.spec.replicas = 0;
        assert_eq!(path_of(&f), "spec.replicas");
        let mut f = healthy();
        f.status.current_primary_index = 3;
        assert_eq!(path_of(&f), "status.currentPrimaryIndex");
        let mut f = healthy();
        f.status.errant_replica_list = vec![MAX_REPLICAS];
        assert_eq!(path_of(&f), "status.errantReplicaList[0]");
        // Regression (issue 12, item 9): an out-of-range target was silently ignored.
        let mut f = healthy();
        f.switchover_to = Some(3);
        assert_eq!(path_of(&f), "switchoverTo");
        let mut f = healthy();
        f.instances[2].index = 0;
        assert_eq!(path_of(&f), "instances[2].index");
        let mut f = healthy();
        f.instances[2].index = MAX_REPLICAS;
        assert_eq!(path_of(&f), "instances[2].index");
        // An ordinal past the size is an instance that leaves; those below it must be there.
        let mut f = healthy();
        f.instances[2].index = 5;
        f.instances[2].mysqld = None;
        assert_eq!(path_of(&f), "instances");
        let mut f = healthy();
        f.instances.pop();
        assert_eq!(path_of(&f), "instances");
        let mut f = healthy();
        f.spec.flavor = crate::facts::Flavor::Mariadb;
        assert_eq!(path_of(&f), "instances[0].mysqld.flavor");
        assert!(check_facts(&healthy()).is_ok());
    }

    /// A shrinking cluster lists its leaving instances; the primary may be one of them, a
    /// switchover target may not, and a leaving instance already removed may still be
    /// remembered as errant.
    #[test]
    fn leaving_instances_are_facts_of_a_shrinking_cluster() {
        let mut f = healthy();
        f.spec.replicas = 2;
        assert!(check_facts(&f).is_ok());
        f.status.current_primary_index = 2;
        assert!(check_facts(&f).is_ok());
        f.instances.retain(|i| i.index != 2);
        assert_eq!(path_of(&f), "status.currentPrimaryIndex");
        f.status.current_primary_index = 0;
        f.status.errant_replica_list = vec![2];
        assert!(check_facts(&f).is_ok());
        let d = decide(&f).unwrap();
        assert!(d.status.errant_replica_list.is_empty(), "{:?}", d.status);
        let mut f = healthy();
        f.spec.replicas = 2;
        f.switchover_to = Some(2);
        assert_eq!(path_of(&f), "switchoverTo");
    }

    /// With nothing new known of the primary (unreachable, or with an empty history), the
    /// recorded errant replicas keep their verdict, except the primary itself and an instance
    /// past the size that is no longer listed (it has left the cluster); one still listed
    /// (leaving) keeps it. Written for the five mutants of that filter that survived (issue 45).
    #[test]
    fn recorded_errant_replicas_are_kept_until_they_leave() {
        let mut f = healthy();
        f.spec.replicas = 2;
        f.instances[0].mysqld = None;
        f.status.errant_replica_list = vec![0, 1, 2, 3];
        assert!(check_facts(&f).is_ok());
        assert_eq!(assess(&f).assessment.errant, [1, 2]);
        f.instances.retain(|i| i.index != 2);
        assert_eq!(assess(&f).assessment.errant, [1]);
        // The same with a primary that answers with an empty history.
        let mut f = healthy();
        f.spec.replicas = 2;
        for i in &mut f.instances {
            if let Some(s) = i.mysqld.as_mut() {
                s.gtid_executed = crate::gtid::GtidSet::default();
            }
        }
        f.status.errant_replica_list = vec![0, 1, 2, 3];
        assert_eq!(assess(&f).assessment.errant, [1, 2]);
    }

    /// Ready Pods count the instances of the size only: a leaving instance's ready Pod is not
    /// one of the cluster's (a surviving mutant, issue 45).
    #[test]
    fn a_leaving_instances_ready_pod_is_not_counted() {
        let mut f = healthy();
        assert_eq!(assess(&f).assessment.ready_pods, 3);
        f.spec.replicas = 2;
        assert!(f.instances[2].pod.exists && f.instances[2].pod.ready);
        assert_eq!(assess(&f).assessment.ready_pods, 2);
    }

    /// An intermediate primary's cluster replicates asynchronously: it records its members
    /// (the size) once a record exists or an instance is leaving, and never invents one
    /// otherwise (two surviving mutants, issue 45).
    #[test]
    fn an_intermediate_primarys_cluster_records_its_size_only_when_it_must() {
        let mut f = healthy();
        f.spec.external_source = Some(crate::facts::ExternalSource {
            host: "source.example".to_owned(),
            port: 3306,
        });
        f.status.semi_sync_members = None;
        let quorum = |f: &ClusterFacts| assess(f).quorum;
        assert_eq!(quorum(&f).recorded_members, None, "nothing to record");
        assert_eq!(quorum(&f).wait_count, 0);
        f.status.semi_sync_members = Some(5);
        assert_eq!(
            quorum(&f).recorded_members,
            Some(3),
            "a record is kept current"
        );
        f.status.semi_sync_members = None;
        f.spec.replicas = 2;
        assert_eq!(quorum(&f).recorded_members, Some(2), "a shrink is recorded");
    }

    /// A cluster of 5 whose primary waits for 2 while the recorded floor is 1: the floor rises
    /// only with members that hold every executed commit, never with an errant replica nor a
    /// learner that has not joined (two surviving mutants, issue 45).
    #[test]
    fn the_floor_rises_only_with_members_that_hold_everything() {
        let set = |s: &str| s.parse::<crate::gtid::GtidSet>().unwrap();
        let mut f = healthy();
        f.spec.replicas = 5;
        for index in 3..5 {
            let mut i = f.instances[2].clone();
            i.index = index;
            i.host = format!("moco-test-{index}.moco-test.default.svc");
            let s = i.mysqld.as_mut().unwrap();
            s.server_id = 1000 + index;
            s.server_uuid = Some(format!("00000000-0000-0000-0000-00000000000{}", index + 1));
            f.instances.push(i);
        }
        let primary = f.instances[0].mysqld.as_mut().unwrap();
        primary.semi_sync.source_enabled = true;
        primary.semi_sync.wait_for_replica_count = Some(2);
        // Replicas 2 and 3 are behind; 1 holds everything.
        for index in [2, 3] {
            let s = f.instances[index].mysqld.as_mut().unwrap();
            s.gtid_executed = set("00000000-0000-0000-0000-000000000001:1-3");
            s.replica_status.as_mut().unwrap().retrieved_gtid_set =
                set("00000000-0000-0000-0000-000000000001:1-3");
        }
        f.status.semi_sync_min_acks = Some(1);
        // Replica 4 holds everything and a transaction of its own: errant.
        let mut errant = f.clone();
        errant.status.semi_sync_members = Some(5);
        errant.instances[4].mysqld.as_mut().unwrap().gtid_executed =
            set("00000000-0000-0000-0000-000000000001:1-5,00000000-0000-0000-0000-0000000000ee:1");
        assert!(check_facts(&errant).is_ok());
        let view = assess(&errant);
        assert_eq!(view.assessment.errant, [4]);
        assert_eq!((view.quorum.wait_count, view.quorum.min_acks), (2, 1));
        // Replica 4 holds everything but its IO thread is down: a learner that has not joined.
        let mut learner = f.clone();
        learner.status.semi_sync_members = Some(4);
        learner.instances[4]
            .mysqld
            .as_mut()
            .unwrap()
            .replica_status
            .as_mut()
            .unwrap()
            .io_running = crate::facts::ThreadState::No;
        assert!(check_facts(&learner).is_ok());
        let view = assess(&learner);
        assert_eq!(view.quorum.members, 4);
        assert_eq!((view.quorum.wait_count, view.quorum.min_acks), (2, 1));
        // With replica 1 and another member holding everything, the floor rises to the count.
        let mut two = f.clone();
        two.status.semi_sync_members = Some(5);
        let s = two.instances[3].mysqld.as_mut().unwrap();
        s.gtid_executed = set("00000000-0000-0000-0000-000000000001:1-5");
        s.replica_status.as_mut().unwrap().retrieved_gtid_set =
            set("00000000-0000-0000-0000-000000000001:1-5");
        assert_eq!(assess(&two).quorum.min_acks, 2);
    }

    /// Regression (issue 12, item 3): an absurd replica count is refused by field instead of
    /// sizing a vector (it aborted `moco plan` with a 64 GiB allocation).
    #[test]
    fn absurd_replica_counts_are_refused() {
        for replicas in [u32::MAX, 100_000, MAX_REPLICAS + 1] {
            let mut f = healthy();
            f.spec.replicas = replicas;
            f.spec.offline = true;
            f.instances.clear();
            let err = check_facts(&f).unwrap_err();
            assert_eq!(err.path, "spec.replicas", "{replicas}");
            assert!(err.message.contains("at most 255"), "{err}");
        }
    }

    /// The largest cluster the engine plans for is a cluster it plans for (mutation testing:
    /// `>` → `>=` on the bound survived every test).
    #[test]
    fn the_largest_replica_count_is_accepted() {
        let mut f = healthy();
        f.spec.replicas = MAX_REPLICAS;
        f.spec.offline = true;
        f.instances.clear();
        let checked = check_facts(&f);
        assert!(checked.is_ok(), "{checked:?}");
    }

    #[test]
    fn facts_of_another_layout_are_rejected() {
        let mut f = healthy();
        f.schema_version = 2;
        let err = check_facts(&f).unwrap_err();
        assert_eq!(err.path, "schemaVersion");
        assert!(err.message.contains("reads 1"), "{err}");
    }

    /// Messages use the JSON names and values an adapter wrote, not Rust's.
    #[test]
    fn messages_use_json_spellings() {
        let mut f = healthy();
        f.spec.server_id_base = 0;
        assert_eq!(path_of(&f), "spec.serverIdBase");
        let mut f = healthy();
        f.spec.flavor = crate::facts::Flavor::Mariadb;
        let err = check_facts(&f).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"instances[0].mysqld.flavor: "mysql" does not match spec.flavor "mariadb""#
        );
    }

    #[test]
    fn server_id_must_follow_the_base() {
        let mut f = healthy();
        if let Some(m) = f.instances[2].mysqld.as_mut() {
            m.server_id = 1001;
        }
        let err = check_facts(&f).unwrap_err();
        assert_eq!(err.path, "instances[2].mysqld.serverId");
        assert!(err.message.contains("1000 + 2 = 1002"), "{err}");
    }

    /// Without the primary's server_uuid, a replica ahead on the primary's own source would
    /// look errant and be fenced: such facts are refused instead.
    #[test]
    fn mysql_facts_need_a_server_uuid() {
        let mut f = healthy();
        if let Some(m) = f.instances[0].mysqld.as_mut() {
            m.server_uuid = None;
        }
        assert_eq!(path_of(&f), "instances[0].mysqld.serverUuid");
        let mut f = healthy();
        if let Some(m) = f.instances[1].mysqld.as_mut() {
            m.server_uuid = Some("not-a-uuid".into());
        }
        let err = check_facts(&f).unwrap_err();
        assert_eq!(err.path, "instances[1].mysqld.serverUuid");
        assert!(err.message.contains("\"not-a-uuid\""), "{err}");
    }

    /// The JSON reader refuses facts that leave out a field that changes decisions, naming it.
    #[test]
    fn omitted_facts_are_errors_not_defaults() {
        let full: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/examples/facts/healthy.json")).unwrap();
        for (pointer, field) in [
            ("/instances/1/pod", "ready"),
            ("/instances/1/pod", "exists"),
            ("/instances/1/mysqld", "replicaStatus"),
            ("/instances/1/mysqld", "serverUuid"),
            ("/instances/1/mysqld/semiSync", "waitSessions"),
            ("/instances/1/mysqld/replicaStatus", "secondsBehindSource"),
            ("/spec", "startupWaitSeconds"),
            ("", "schemaVersion"),
            ("", "status"),
        ] {
            let mut v = full.clone();
            v.pointer_mut(pointer)
                .and_then(|o| o.as_object_mut())
                .unwrap()
                .remove(field);
            let err = serde_json::from_value::<ClusterFacts>(v).unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("missing field `{field}`")),
                "{pointer}/{field}: {err}"
            );
        }
    }

    /// `status.syncedReplicas` counts the Pods that exist and are ready (a survivor of the
    /// mutation run: nothing checked it).
    #[test]
    fn synced_replicas_counts_ready_pods() {
        let mut f = healthy();
        assert_eq!(decide(&f).unwrap().status.synced_replicas, 3);
        f.instances[1].pod.ready = false;
        assert_eq!(decide(&f).unwrap().status.synced_replicas, 2);
        f.instances[2].pod.exists = false;
        f.instances[2].pod.ready = true;
        assert_eq!(decide(&f).unwrap().status.synced_replicas, 1);
    }

    /// Every replica is ok but the primary does not see one of them: not Healthy, and not
    /// Degraded either, which is for fewer ok replicas than all (MOCO's rule), so Incomplete.
    /// (A survivor of the mutation run: `ok != replicas - 1` could be dropped unnoticed.)
    #[test]
    fn all_replicas_ok_but_unseen_by_the_primary_is_incomplete() {
        let mut f = healthy();
        assert_eq!(decide(&f).unwrap().state, ClusterState::Healthy);
        if let Some(m) = f.instances[0].mysqld.as_mut() {
            m.replica_hosts.truncate(1);
        }
        let d = decide(&f).unwrap();
        assert_eq!(d.assessment.candidates, vec![1, 2]);
        assert_eq!(d.state, ClusterState::Incomplete);
    }

    /// Commits block when the primary waits for more semi-sync ACKs than it has clients; not
    /// when semi-sync is off, and never for a single instance (survivors of the mutation run).
    #[test]
    fn write_block_needs_semi_sync_on_and_a_replica_to_wait_for() {
        let block = |f: &ClusterFacts| write_block(&assess(f));
        let clients = |f: &mut ClusterFacts, enabled: bool, n: u32| {
            let m = f.instances[0].mysqld.as_mut().unwrap();
            m.semi_sync.source_enabled = enabled;
            m.semi_sync.source_clients = Some(n);
        };
        let mut f = healthy();
        assert_eq!(block(&f), None);
        clients(&mut f, true, 0);
        assert!(block(&f).unwrap().contains("only 0 replica(s)"));
        clients(&mut f, false, 0);
        assert_eq!(block(&f), None);
        for (replicas, blocked) in [(1, false), (2, true)] {
            let mut f = healthy();
            f.spec.replicas = replicas;
            f.instances.truncate(replicas as usize);
            clients(&mut f, true, 0);
            assert_eq!(block(&f).is_some(), blocked, "{replicas} instance(s)");
        }
    }

    /// A single instance whose server is gone is Lost: there is nothing to fail over to.
    #[test]
    fn a_single_instance_without_its_server_is_lost() {
        let mut f = healthy();
        f.spec.replicas = 1;
        f.instances.truncate(1);
        f.instances[0].mysqld = None;
        assert_eq!(decide(&f).unwrap().state, ClusterState::Lost);
    }

    /// Regression (fuzz target `decide`): a probe reporting super_read_only without
    /// read_only made configure skip fencing a writable replica before opening the primary.
    #[test]
    fn super_read_only_without_read_only_is_rejected() {
        let mut f = healthy();
        if let Some(m) = f.instances[1].mysqld.as_mut() {
            m.read_only = false;
            m.super_read_only = true;
        }
        assert_eq!(path_of(&f), "instances[1].mysqld.superReadOnly");
    }
}
