//! The rotation of MOCO's own passwords, decided one step per round from what the servers
//! accept.
//!
//! Every reader of a password (the manager, the agents, the exporters, the replicas'
//! channels, backup Jobs, people's option files) must be moved to the new one while the
//! servers accept both, or a reader fails on a credential on the way. So a rotation is a
//! sequence the platform persists (`phase`, the channels moved) and this function advances
//! from observations, never from memory of what it did:
//!
//! 1. [`RotationPhase::Drawn`]: the new passwords are stored beside the old ones. Each account
//!    the primary does not yet accept with its new password gets it **added** beside the old
//!    one ([`RotationStep::AddNew`]: MariaDB's two authentication methods, MySQL's dual
//!    passwords); once every instance accepts both, the platform **publishes** the new ones
//!    to its readers ([`RotationStep::Publish`]).
//! 2. [`RotationPhase::Published`]: each replica's channel is **re-pointed** with the new
//!    replication password (one per round, its relay log applied first: a new channel
//!    discards it); once the platform reports no reader left on the old passwords,
//!    the old ones are **dropped** ([`RotationStep::DropOld`]); once no instance accepts an
//!    old password, the rotation is **finished** ([`RotationStep::Finish`]).
//!
//! Each step's SQL ends in the same state whatever the account held before, so a step
//! repeated after a restart, or on a new primary after a failover, is harmless; and a step is
//! taken only while the cluster is healthy with nothing else to do, so that a rotation never
//! competes with a failover or a clone for the servers.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Where a rotation stands, as the platform persists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RotationPhase {
    /// New passwords drawn and stored beside the old; the readers still use the old ones.
    Drawn,
    /// The readers were given the new passwords; the old ones are still accepted.
    Published,
}

impl RotationPhase {
    /// The name the platform stores.
    pub fn as_str(self) -> &'static str {
        match self {
            RotationPhase::Drawn => "drawn",
            RotationPhase::Published => "published",
        }
    }

    /// Parses [`RotationPhase::as_str`].
    pub fn parse(text: &str) -> Option<RotationPhase> {
        match text {
            "drawn" => Some(RotationPhase::Drawn),
            "published" => Some(RotationPhase::Published),
            _ => None,
        }
    }
}

/// Which of an account's two passwords an instance accepted at a test login.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepts {
    /// The password before the rotation.
    pub old: bool,
    /// The password the rotation introduces.
    pub new: bool,
}

/// What one instance showed this round.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceView {
    /// Account name → what it accepted. An account missing was not tried.
    pub accounts: BTreeMap<String, Accepts>,
}

/// Everything a rotation step is decided from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotationView {
    /// The persisted phase.
    pub phase: RotationPhase,
    /// Replicas whose channel was re-pointed with the new replication password in this
    /// rotation (persisted).
    pub channels_moved: BTreeSet<u32>,
    /// The accounts rotated (all of MOCO's).
    pub accounts: Vec<String>,
    /// `None` while the cluster is not healthy or the engine has steps to take: the reason.
    pub busy: Option<String>,
    /// The primary's ordinal.
    pub primary: u32,
    /// Every instance of the cluster by ordinal (the primary included); one that could not be
    /// tried is absent.
    pub instances: BTreeMap<u32, InstanceView>,
    /// The number of instances the cluster has.
    pub replicas: u32,
    /// Readers the platform knows still hold the old passwords (for example "the agent of
    /// Pod db-1"); empty once all of them moved.
    pub readers_on_old: Vec<String>,
}

/// The one thing to do this round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "step")]
pub enum RotationStep {
    /// Nothing now: `reason` says what the rotation waits for.
    Wait {
        /// For a person.
        reason: String,
    },
    /// On the primary, make these accounts accept both passwords.
    AddNew {
        /// Account names.
        accounts: Vec<String>,
    },
    /// Give the readers the new passwords (the phase becomes [`RotationPhase::Published`]).
    Publish,
    /// Re-point replica `index`'s channel with the new replication password, then record it
    /// as moved. A new channel discards the relay log, so the IO thread is stopped and what
    /// it received applied first (under writes a relay log is never found empty by looking).
    RepointChannel {
        /// The replica.
        index: u32,
    },
    /// On the primary, make these accounts accept only their new password.
    DropOld {
        /// Account names.
        accounts: Vec<String>,
    },
    /// Forget the old passwords: the rotation is over.
    Finish,
}

impl RotationStep {
    /// Whether this step does nothing.
    pub fn is_wait(&self) -> bool {
        matches!(self, RotationStep::Wait { .. })
    }
}

fn wait(reason: impl Into<String>) -> RotationStep {
    RotationStep::Wait {
        reason: reason.into(),
    }
}

/// The accounts of `instance` for which `bad` holds, in the view's order; every account
/// when the instance was not tried.
fn accounts_where(v: &RotationView, index: u32, bad: impl Fn(Accepts) -> bool) -> Vec<String> {
    let Some(instance) = v.instances.get(&index) else {
        return v.accounts.clone();
    };
    v.accounts
        .iter()
        .filter(|a| instance.accounts.get(*a).is_none_or(|x| bad(*x)))
        .cloned()
        .collect()
}

/// The first instance (by ordinal) not tried this round, if any.
fn missing_instance(v: &RotationView) -> Option<u32> {
    (0..v.replicas).find(|i| !v.instances.contains_key(i))
}

/// The next step of the rotation described by `v`.
pub fn decide_rotation(v: &RotationView) -> RotationStep {
    if let Some(reason) = &v.busy {
        return wait(format!("the cluster is busy: {reason}"));
    }
    if let Some(index) = missing_instance(v) {
        return wait(format!("instance {index} could not be asked"));
    }
    match v.phase {
        RotationPhase::Drawn => decide_drawn(v),
        RotationPhase::Published => decide_published(v),
    }
}

fn decide_drawn(v: &RotationView) -> RotationStep {
    let lacking = accounts_where(v, v.primary, |a| !(a.old && a.new));
    // Adding is repeated until the primary accepts both: it also restores an old password
    // someone removed, which the readers still use.
    if !lacking.is_empty() {
        return RotationStep::AddNew { accounts: lacking };
    }
    for index in 0..v.replicas {
        let lacking = accounts_where(v, index, |a| !a.new);
        if let Some(first) = lacking.first() {
            return wait(format!(
                "instance {index} does not accept the new password of {first} yet (replication)"
            ));
        }
    }
    RotationStep::Publish
}

fn decide_published(v: &RotationView) -> RotationStep {
    // The readers now hold the new passwords: a server must keep accepting them.
    let lacking = accounts_where(v, v.primary, |a| !a.new);
    if !lacking.is_empty() {
        return RotationStep::AddNew { accounts: lacking };
    }
    let unmoved = (0..v.replicas).find(|i| *i != v.primary && !v.channels_moved.contains(i));
    if let Some(index) = unmoved {
        return RotationStep::RepointChannel { index };
    }
    if let Some(reader) = v.readers_on_old.first() {
        return wait(format!("{reader} still holds the old passwords"));
    }
    let keeping = accounts_where(v, v.primary, |a| a.old);
    if !keeping.is_empty() {
        return RotationStep::DropOld { accounts: keeping };
    }
    for index in 0..v.replicas {
        if let Some(first) = accounts_where(v, index, |a| a.old).first() {
            return wait(format!(
                "instance {index} still accepts the old password of {first} (replication)"
            ));
        }
    }
    RotationStep::Finish
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACCOUNTS: [&str; 2] = ["moco-admin", "moco-repl"];

    fn view(phase: RotationPhase, each: Accepts) -> RotationView {
        let instance = InstanceView {
            accounts: ACCOUNTS.iter().map(|a| ((*a).to_owned(), each)).collect(),
        };
        RotationView {
            phase,
            channels_moved: BTreeSet::new(),
            accounts: ACCOUNTS.iter().map(|a| (*a).to_owned()).collect(),
            busy: None,
            primary: 0,
            instances: (0..3).map(|i| (i, instance.clone())).collect(),
            replicas: 3,
            readers_on_old: Vec::new(),
        }
    }

    const OLD: Accepts = Accepts {
        old: true,
        new: false,
    };
    const BOTH: Accepts = Accepts {
        old: true,
        new: true,
    };
    const NEW: Accepts = Accepts {
        old: false,
        new: true,
    };

    fn set(v: &mut RotationView, index: u32, account: &str, a: Accepts) {
        v.instances
            .get_mut(&index)
            .unwrap()
            .accounts
            .insert(account.to_owned(), a);
    }

    #[test]
    fn a_drawn_rotation_adds_on_the_primary_then_waits_for_every_replica_then_publishes() {
        let mut v = view(RotationPhase::Drawn, OLD);
        assert_eq!(
            decide_rotation(&v),
            RotationStep::AddNew {
                accounts: vec!["moco-admin".into(), "moco-repl".into()]
            }
        );
        set(&mut v, 0, "moco-admin", BOTH);
        assert_eq!(
            decide_rotation(&v),
            RotationStep::AddNew {
                accounts: vec!["moco-repl".into()]
            }
        );
        set(&mut v, 0, "moco-repl", BOTH);
        let RotationStep::Wait { reason } = decide_rotation(&v) else {
            panic!("a replica lacks the new passwords");
        };
        assert!(
            reason.contains("instance 1") && reason.contains("moco-admin"),
            "{reason}"
        );
        for i in 1..3 {
            for a in ACCOUNTS {
                set(&mut v, i, a, BOTH);
            }
        }
        assert_eq!(decide_rotation(&v), RotationStep::Publish);
    }

    /// An old password someone removed by hand while drawn is added back: the readers still
    /// use it.
    #[test]
    fn a_drawn_rotation_restores_an_old_password_the_readers_still_use() {
        let mut v = view(RotationPhase::Drawn, BOTH);
        set(&mut v, 0, "moco-repl", NEW);
        assert_eq!(
            decide_rotation(&v),
            RotationStep::AddNew {
                accounts: vec!["moco-repl".into()]
            }
        );
    }

    #[test]
    fn a_published_rotation_moves_each_channel_then_waits_for_readers_then_drops_then_finishes() {
        let mut v = view(RotationPhase::Published, BOTH);
        assert_eq!(
            decide_rotation(&v),
            RotationStep::RepointChannel { index: 1 }
        );
        v.channels_moved.insert(1);
        assert_eq!(
            decide_rotation(&v),
            RotationStep::RepointChannel { index: 2 }
        );
        v.channels_moved.insert(2);
        v.readers_on_old = vec!["the agent of Pod db-1".into()];
        let RotationStep::Wait { reason } = decide_rotation(&v) else {
            panic!("a reader holds the old passwords");
        };
        assert!(reason.contains("the agent of Pod db-1"), "{reason}");
        v.readers_on_old.clear();
        assert_eq!(
            decide_rotation(&v),
            RotationStep::DropOld {
                accounts: vec!["moco-admin".into(), "moco-repl".into()]
            }
        );
        for a in ACCOUNTS {
            set(&mut v, 0, a, NEW);
        }
        let RotationStep::Wait { reason } = decide_rotation(&v) else {
            panic!("the replicas still accept the old passwords");
        };
        assert!(reason.contains("instance 1"), "{reason}");
        for i in 1..3 {
            for a in ACCOUNTS {
                set(&mut v, i, a, NEW);
            }
        }
        assert_eq!(decide_rotation(&v), RotationStep::Finish);
    }

    /// The primary's channel is never re-pointed: after a switchover the new primary's
    /// ordinal is skipped and the old primary's channel is.
    #[test]
    fn the_primarys_channel_is_not_re_pointed() {
        let mut v = view(RotationPhase::Published, BOTH);
        v.primary = 1;
        assert_eq!(
            decide_rotation(&v),
            RotationStep::RepointChannel { index: 0 }
        );
        v.channels_moved.insert(0);
        assert_eq!(
            decide_rotation(&v),
            RotationStep::RepointChannel { index: 2 }
        );
    }

    /// Published, a primary that lost a new password (a failover to a replica that had not
    /// applied the addition) gets it again before anything else.
    #[test]
    fn a_published_rotation_adds_a_new_password_the_primary_lacks() {
        let mut v = view(RotationPhase::Published, BOTH);
        set(&mut v, 0, "moco-admin", OLD);
        assert_eq!(
            decide_rotation(&v),
            RotationStep::AddNew {
                accounts: vec!["moco-admin".into()]
            }
        );
    }

    #[test]
    fn nothing_happens_while_the_cluster_is_busy_or_an_instance_was_not_asked() {
        let mut v = view(RotationPhase::Drawn, OLD);
        v.busy = Some("Degraded".into());
        assert!(
            matches!(decide_rotation(&v), RotationStep::Wait { reason } if reason.contains("Degraded"))
        );
        v.busy = None;
        v.instances.remove(&2);
        assert!(
            matches!(decide_rotation(&v), RotationStep::Wait { reason } if reason.contains("instance 2"))
        );
    }

    /// An account an instance was not asked about counts as lacking both passwords.
    #[test]
    fn an_account_not_tried_counts_as_not_accepted() {
        let mut v = view(RotationPhase::Drawn, BOTH);
        v.instances
            .get_mut(&0)
            .unwrap()
            .accounts
            .remove("moco-repl");
        assert_eq!(
            decide_rotation(&v),
            RotationStep::AddNew {
                accounts: vec!["moco-repl".into()]
            }
        );
    }

    /// Only a wait leaves the manager's pace alone: every other step is followed at once.
    #[test]
    fn only_a_wait_is_a_wait() {
        assert!(wait("x").is_wait());
        for step in [
            RotationStep::Publish,
            RotationStep::Finish,
            RotationStep::RepointChannel { index: 1 },
            RotationStep::AddNew { accounts: vec![] },
            RotationStep::DropOld { accounts: vec![] },
        ] {
            assert!(!step.is_wait(), "{step:?}");
        }
    }

    #[test]
    fn phases_round_trip_their_names() {
        for p in [RotationPhase::Drawn, RotationPhase::Published] {
            assert_eq!(RotationPhase::parse(p.as_str()), Some(p));
        }
        assert_eq!(RotationPhase::parse("done"), None);
    }
}
