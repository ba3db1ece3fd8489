//! What configure does to a replica's replication channel, without losing its relay log.
//!
//! The relay log may hold commits this replica acknowledged and no other replica has (semi-sync
//! acknowledges on receipt, not on apply). `CHANGE REPLICATION SOURCE` deletes it on both
//! flavours, and on MariaDB starting a stopped IO thread with `MASTER_USE_GTID=slave_pos`
//! discards it too. So a channel that already points at the primary is never rebuilt while it
//! holds unapplied transactions: it is kept, restarted in place (MySQL keeps the relay log when
//! the IO thread restarts), or left to apply first. MOCO rebuilds any channel whose IO thread
//! is not `Yes`; the simulator showed that loses acknowledged commits at the next failover.

use crate::facts::{Flavor, InstanceFacts, MysqldStatus, ThreadState};

/// MySQL error 1045: the replication user was refused (a new CHANGE carries the password).
const ER_ACCESS_DENIED: u32 = 1045;

/// The decision for one replica's channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Channel {
    /// Leave it running (or retrying by itself).
    Keep,
    /// Restart it in place: stop the IO thread if `stop_io`, set the semi-sync replica flag if
    /// `set_flags`, then `START REPLICA`.
    Restart {
        /// Stop a running or connecting IO thread first.
        stop_io: bool,
        /// The semi-sync flags are wrong (e.g. reset by a restart: `SET GLOBAL` does not persist).
        set_flags: bool,
    },
    /// Unapplied transactions in the relay log must be applied before the IO thread may
    /// restart: start the SQL thread when `start_sql`, else just wait.
    ApplyFirst {
        /// The SQL thread is stopped.
        start_sql: bool,
    },
    /// The IO thread runs, the SQL thread stopped (an error such as a full disk, or a person):
    /// start it. An error that persists stops it again and the next round retries.
    StartSql,
    /// `CHANGE REPLICATION SOURCE` to the primary and start.
    Rebuild,
}

/// Decides the channel of replica `s` given the primary `p` and the wanted semi-sync flag.
/// `acknowledged` says the replica may have acknowledged commits (a member): only then does
/// its relay log have to be applied before anything drops it.
pub(super) fn decide_channel(
    flavor: Flavor,
    s: &MysqldStatus,
    p: &InstanceFacts,
    semi_sync: bool,
    acknowledged: bool,
) -> Channel {
    let Some(r) = &s.replica_status else {
        return Channel::Rebuild;
    };
    if r.source_host != p.host || r.source_port != p.port {
        // A new source (after a failover or switchover) holds everything an eligible replica
        // received, so discarding the old relay log loses nothing.
        return Channel::Rebuild;
    }
    let flags_ok = s.semi_sync.replica_enabled == semi_sync && !s.semi_sync.source_enabled;
    let wanted = match r.io_running {
        ThreadState::Yes | ThreadState::Connecting if r.last_io_errno == ER_ACCESS_DENIED => {
            Channel::Rebuild
        }
        ThreadState::Yes | ThreadState::Connecting if flags_ok => {
            if r.sql_running == ThreadState::Yes {
                Channel::Keep
            } else {
                Channel::StartSql
            }
        }
        ThreadState::Yes | ThreadState::Connecting => Channel::Restart {
            stop_io: true,
            set_flags: true,
        },
        ThreadState::No if r.last_io_errno == 0 => Channel::Restart {
            stop_io: false,
            set_flags: !flags_ok,
        },
        ThreadState::No => Channel::Rebuild,
    };
    let drops_relay_log = match wanted {
        Channel::Rebuild => true,
        Channel::Restart { .. } => flavor == Flavor::Mariadb,
        Channel::Keep | Channel::StartSql | Channel::ApplyFirst { .. } => false,
    };
    let unapplied = !r.retrieved_gtid_set.is_subset(&s.gtid_executed);
    if drops_relay_log && unapplied && acknowledged {
        return Channel::ApplyFirst {
            start_sql: r.sql_running != ThreadState::Yes,
        };
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::ClusterFacts;

    fn healthy() -> ClusterFacts {
        serde_json::from_str(include_str!("../../../docs/examples/facts/healthy.json")).unwrap()
    }

    /// A running channel to the primary with the semi-sync flags the cluster wants is kept;
    /// with the wrong flags (a restarted replica: `SET GLOBAL` does not persist) it is
    /// restarted to set them. (A survivor of the mutation run: no scenario had a running
    /// channel with wrong flags.)
    #[test]
    fn running_channels_are_kept_only_with_the_right_semi_sync_flags() {
        let f = healthy();
        let primary = &f.instances[0];
        let mut replica = f.instances[1].mysqld.clone().unwrap();
        let decide = |s: &MysqldStatus, semi_sync: bool| {
            decide_channel(Flavor::Mysql, s, primary, semi_sync, true)
        };
        assert_eq!(decide(&replica, true), Channel::Keep);
        replica.semi_sync.replica_enabled = false;
        assert_eq!(
            decide(&replica, true),
            Channel::Restart {
                stop_io: true,
                set_flags: true
            }
        );
        assert_eq!(decide(&replica, false), Channel::Keep);
        // A stopped IO thread without an error restarts in place, setting flags only if wrong.
        if let Some(r) = replica.replica_status.as_mut() {
            r.io_running = ThreadState::No;
        }
        assert_eq!(
            decide(&replica, false),
            Channel::Restart {
                stop_io: false,
                set_flags: false
            }
        );
        assert_eq!(
            decide(&replica, true),
            Channel::Restart {
                stop_io: false,
                set_flags: true
            }
        );
    }
}
