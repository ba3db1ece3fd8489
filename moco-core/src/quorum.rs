//! Who acknowledges commits, and how many acknowledgements an acknowledged commit has, while
//! a cluster changes size.
//!
//! MOCO sets the primary's semi-sync wait count to `⌊replicas/2⌋` the moment `spec.replicas`
//! grows, before the new instances are cloned: a primary that had no replica (1 → 3) waits for
//! an acknowledgement nobody can give until a clone finishes, and a 3-instance cluster growing
//! to 5 needs both old replicas for every commit. Here the new instances join as *learners*:
//! they replicate asynchronously (their semi-sync replica flag off, so they never acknowledge)
//! and the wait count follows the *members* only, instances `0..members`. A learner becomes a
//! member once it has received everything the primary executed; only then does it acknowledge
//! and count. So while a cluster grows it tolerates exactly the replica failures it tolerated
//! before, and reaches MOCO's count as the new instances catch up.
//!
//! A failover must know how many replicas hold an acknowledged commit. That is the wait count
//! in force when the commit was acknowledged, which the primary can no longer be asked once it
//! failed; so the lowest count that may still matter is kept in the status
//! (`semiSyncMinAcks`). It drops before the wait count drops (the status is written before any
//! step runs) and rises only when enough members are seen holding everything the primary had
//! executed under the new count.
//!
//! A cluster that shrinks keeps its *leaving* instances (ordinals past `spec.replicas`) as
//! members while they may hold acknowledged commits: the count drops to the new size's first,
//! then they stop acknowledging, and they stop counting once enough remaining members hold
//! everything the primary executed (`assessment::leaving_released`; docs/clustering.md,
//! "Shrinking").
//!
//! This module holds the rules' data and arithmetic; `assessment::assess_quorum` reads them
//! from the facts of a round.

use crate::facts::{Flavor, MysqldStatus};

/// The acknowledgement rules of one round.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Quorum {
    /// Instances `0..members` acknowledge (or may have: leaving ones); the others are
    /// learners.
    pub members: u32,
    /// The members when the round started (the recorded ones): instances below it may have
    /// acknowledged commits, so their relay logs matter.
    pub previous_members: u32,
    /// The wait count the primary should have: what the members require (0: semi-sync off).
    pub wait_count: u32,
    /// The fewest acknowledgements a commit acknowledged so far may have had.
    pub min_acks: u32,
    /// This round's memory of `members` and `min_acks`, as the status records them (`None`:
    /// what an absent field means).
    pub recorded_members: Option<u32>,
    /// See [`Quorum::recorded_members`].
    pub recorded_min_acks: Option<u32>,
}

impl Quorum {
    /// True when `index` acknowledges commits (and counts towards a failover).
    pub(crate) fn is_member(&self, index: u32) -> bool {
        index < self.members
    }

    /// True when `index` may have acknowledged a commit: it was a member when the round
    /// started. A learner never ran its IO thread with the semi-sync flag on (the engine
    /// starts it, flag off, and `skip_replica_start` keeps a restart from doing otherwise),
    /// so its relay log holds nothing that only it has.
    pub(crate) fn may_have_acknowledged(&self, index: u32) -> bool {
        index < self.previous_members
    }

    /// Reachable members, other than the primary, needed to fail over without losing an
    /// acknowledged commit: each one is on `min_acks` of the `members − 1` non-primary
    /// members, so any `members − min_acks` of them include one. With `min_acks` 0 (commits
    /// acknowledged by nobody but the primary) no number is enough.
    pub(crate) fn failover_quorum(&self, primary: u32) -> Option<u32> {
        let others = if self.is_member(primary) {
            self.members.saturating_sub(1)
        } else {
            self.members
        };
        (self.min_acks > 0).then(|| others.saturating_sub(self.min_acks) + 1)
    }
}

/// The ACKs a commit needs: MOCO sets `floor(replicas/2)`; MariaDB can only wait for one.
pub(crate) fn required_acks(replicas: u32, flavor: Flavor) -> u32 {
    let want = replicas / 2;
    match flavor {
        Flavor::Mysql => want,
        Flavor::Mariadb => want.min(1),
    }
}

/// Reachable replicas needed to fail over a cluster of `replicas` members running at its full
/// wait count without losing an acknowledged commit: every acknowledged commit is on `acks`
/// replicas, so at least one of them is among any `replicas − acks` of the `replicas − 1`
/// non-primaries. MOCO's `> floor(replicas/2)` is the same number for MySQL; MariaDB (one
/// ACK) needs every replica of a 5-instance cluster. [`Quorum::failover_quorum`] is the same
/// rule for a round whose members or recorded count differ.
pub(crate) fn full_size_failover_quorum(replicas: u32, flavor: Flavor) -> u32 {
    replicas.saturating_sub(required_acks(replicas, flavor))
}

/// The wait count a primary is seen running with: 0 when semi-sync is off. MariaDB reports no
/// count and always waits for one.
pub(crate) fn observed_wait_count(p: &MysqldStatus) -> u32 {
    if p.semi_sync.source_enabled {
        p.semi_sync.wait_for_replica_count.unwrap_or(1)
    } else {
        0
    }
}
