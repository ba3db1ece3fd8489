//! Which rolled Pods have caught up: a replica whose Pod came back (a new Pod, or Ready again)
//! has caught up once it executed everything the primary had executed when it came back.
//!
//! Ready says mysqld answers, not that the replica holds the primary's data: after a restart
//! it may be minutes behind, and rolling the next Pod (or switching over to it) then costs a
//! wait or, with semi-sync, an acknowledgement it cannot give. The rollout
//! ([`super::partition`]) goes on only once the Pod rolled last has caught up.
//!
//! The mark is taken from the first round that observed the Pod back (a round that began
//! after its `Ready` changed), so it holds at least what the primary had when the Pod came
//! back; a Pod that restarts again is a new incarnation and is measured again. The tracker is
//! soft state: lost (the operator restarts), every Ready Pod is measured again from the next
//! round, which can only delay the rollout, never let it go early.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use crate::facts::ClusterFacts;
use crate::gtid::GtidSet;
use crate::time::Timestamp;

/// One Pod as the rollout sees it when asking whether it caught up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incarnation {
    /// The ordinal.
    pub index: u32,
    /// What changes whenever the Pod comes back: its UID and the time its `Ready` condition
    /// last changed.
    pub key: String,
    /// It is Ready now.
    pub ready: bool,
    /// When its `Ready` condition last changed.
    pub ready_since: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Progress {
    /// Must execute this (the primary's executed set in the first round that saw it back).
    Behind(GtidSet),
    /// Executed it.
    CaughtUp,
}

/// The catch-up progress of a cluster's Pods, fed with each clustering round's facts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// By ordinal: the incarnation measured and how far it got.
    pods: BTreeMap<u32, (String, Progress)>,
}

impl CatchUp {
    /// Brings the progress up to `round` (the facts of the last clustering round, if any) and
    /// returns the ordinals of `pods` that have caught up. The primary always has; a Pod not
    /// Ready, unknown to the round or not reachable in it has not.
    pub fn observe(&mut self, round: Option<&ClusterFacts>, pods: &[Incarnation]) -> BTreeSet<u32> {
        // Forget Pods gone, down or come back as someone new.
        self.pods.retain(|index, (key, _)| {
            pods.iter()
                .any(|p| p.index == *index && p.ready && p.key == *key)
        });
        let Some(round) = round else {
            return BTreeSet::new();
        };
        let primary_index = round.status.current_primary_index;
        let executed = |index: u32| {
            round
                .instances
                .iter()
                .find(|i| i.index == index && i.pod.exists && i.pod.ready)
                .and_then(|i| i.mysqld.as_ref())
                .map(|m| &m.gtid_executed)
        };
        let primary = executed(primary_index);
        let mut caught_up = BTreeSet::new();
        for pod in pods.iter().filter(|p| p.ready) {
            if pod.index == primary_index {
                caught_up.insert(pod.index);
                continue;
            }
            let (_, progress) = match self.pods.entry(pod.index) {
                Entry::Occupied(known) => known.into_mut(),
                Entry::Vacant(new) => {
                    // Only a round that began after the Pod came back may set its mark.
                    let (Some(primary), true) = (primary, round.now.0 >= pod.ready_since.0) else {
                        continue;
                    };
                    new.insert((pod.key.clone(), Progress::Behind(primary.clone())))
                }
            };
            if let Progress::Behind(mark) = progress
                && executed(pod.index).is_some_and(|e| mark.is_subset(e))
            {
                *progress = Progress::CaughtUp;
            }
            if *progress == Progress::CaughtUp {
                caught_up.insert(pod.index);
            }
        }
        caught_up
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gtids(seq: u64) -> GtidSet {
        format!("00000000-0000-0000-0000-000000000001:1-{seq}")
            .parse()
            .unwrap()
    }

    /// A round at `now` of the example cluster (primary 0) with the primary at `primary` and
    /// replica 1 at `replica` (None: unreachable).
    fn round(now: i64, primary: u64, replica: Option<u64>) -> ClusterFacts {
        let mut facts: ClusterFacts =
            serde_json::from_str(include_str!("../../../docs/examples/facts/healthy.json"))
                .unwrap();
        facts.now = Timestamp(now);
        if let Some(m) = facts.instances[0].mysqld.as_mut() {
            m.gtid_executed = gtids(primary);
        }
        match replica {
            Some(seq) => {
                if let Some(m) = facts.instances[1].mysqld.as_mut() {
                    m.gtid_executed = gtids(seq);
                }
            }
            None => facts.instances[1].mysqld = None,
        }
        facts
    }

    fn pod(index: u32, key: &str, ready: bool, since: i64) -> Incarnation {
        Incarnation {
            index,
            key: key.to_owned(),
            ready,
            ready_since: Timestamp(since),
        }
    }

    fn set(items: &[u32]) -> BTreeSet<u32> {
        items.iter().copied().collect()
    }

    #[test]
    fn a_replica_catches_up_once_it_executed_what_the_primary_had_when_it_came_back() {
        let mut c = CatchUp::default();
        let pods = [pod(0, "a", true, 0), pod(1, "b", true, 100)];
        // A round from before the Pod came back sets no mark.
        assert_eq!(c.observe(Some(&round(90, 50, Some(50))), &pods), set(&[0]));
        // The first round after: the mark is the primary's 60; the replica has 40.
        assert_eq!(c.observe(Some(&round(110, 60, Some(40))), &pods), set(&[0]));
        // The primary moved on to 80; the replica has 60: it executed the mark.
        assert_eq!(
            c.observe(Some(&round(120, 80, Some(60))), &pods),
            set(&[0, 1])
        );
        // And stays caught up while the same incarnation is Ready, even behind later writes.
        assert_eq!(
            c.observe(Some(&round(130, 99, Some(61))), &pods),
            set(&[0, 1])
        );
    }

    #[test]
    fn a_pod_that_comes_back_again_is_measured_again() {
        let mut c = CatchUp::default();
        let first = [pod(0, "a", true, 0), pod(1, "b", true, 100)];
        assert_eq!(
            c.observe(Some(&round(110, 60, Some(60))), &first),
            set(&[0, 1])
        );
        // Not Ready: not caught up, and forgotten.
        let down = [pod(0, "a", true, 0), pod(1, "b", false, 140)];
        assert_eq!(c.observe(Some(&round(150, 70, None)), &down), set(&[0]));
        let back = [pod(0, "a", true, 0), pod(1, "c", true, 160)];
        assert_eq!(c.observe(Some(&round(150, 70, None)), &back), set(&[0]));
        assert_eq!(c.observe(Some(&round(170, 90, Some(70))), &back), set(&[0]));
        assert_eq!(
            c.observe(Some(&round(180, 95, Some(90))), &back),
            set(&[0, 1])
        );
    }

    #[test]
    fn nothing_is_known_without_a_round_or_a_reachable_primary() {
        let mut c = CatchUp::default();
        let pods = [pod(0, "a", true, 0), pod(1, "b", true, 100)];
        assert_eq!(c.observe(None, &pods), set(&[]));
        let mut r = round(110, 60, Some(60));
        r.instances[0].mysqld = None;
        assert_eq!(c.observe(Some(&r), &pods), set(&[0]));
        // A replica that cannot be asked is not caught up.
        assert_eq!(c.observe(Some(&round(120, 60, None)), &pods), set(&[0]));
        assert_eq!(
            c.observe(Some(&round(130, 60, Some(60))), &pods),
            set(&[0, 1])
        );
    }

    #[test]
    fn the_primary_is_wherever_the_status_says() {
        let mut c = CatchUp::default();
        let pods = [pod(0, "a", true, 0), pod(1, "b", true, 0)];
        let mut r = round(10, 50, Some(70));
        r.status.current_primary_index = 1;
        // Instance 0 must reach the new primary's 70.
        assert_eq!(c.observe(Some(&r), &pods), set(&[1]));
        let mut r = round(20, 70, Some(75));
        r.status.current_primary_index = 1;
        assert_eq!(c.observe(Some(&r), &pods), set(&[0, 1]));
    }
}
