//! The simulator's ground truth about errant data, and the record of every operation the
//! manager applied, checked against it at the moment it took effect.
//!
//! **Lineage.** The cluster's history is a set of transactions, the lineage: empty at the start;
//! every transaction committed by the instance `currentPrimaryIndex` points at joins it (a
//! client write it accepted — acknowledged, waiting or later killed — or an errant write made
//! on it); when `currentPrimaryIndex` moves to instance `t` (a switchover or failover persisted
//! by the manager), the lineage becomes what `t` holds or will hold once its relay log is
//! applied (its data plus relay log). So the lineage never contains a write a non-primary
//! accepted (a direct write on a replica, a write a stale writable ex-primary accepted), and
//! after a failover the old primary's commits the new primary never received drop out of it.
//!
//! **Errant (truth).** An instance is errant when its data holds a transaction outside the
//! lineage. It stops being errant when that data goes (re-initialised, re-cloned from a
//! non-errant donor, the transaction dropped by crash recovery) or joins the lineage again (an
//! instance holding it is promoted).
//!
//! **Known errant.** The engine can only exclude what it can see: a transaction outside the
//! lineage is *known* on instance `i` once a round compared `i` with the lineage's primary and
//! could see it — the round read `i`'s status and the primary's status with a non-empty
//! executed set, and the transaction falls in `i.executed − primary.executed` outside the
//! primary's own server (the engine's comparison of reported sets; MariaDB reports
//! `1..seq` per server id), and the round's verdict was persisted (its status write went
//! through, or had nothing to change) — or a failover round promoted a primary and compared
//! `i`'s executed set with the promoted one's received set. The knowledge lasts until `i` is re-initialised or
//! cloned, a later comparison of `i` with the lineage's primary shows it gone, or the
//! transaction joins the lineage. An instance that answered no such comparison since it became
//! errant (it was unreachable, hung or frozen, or the primary was) is errant but not known
//! errant: promoting it then is the best the engine can do.
//!
//! **Checked at every operation** ([`State::applied`]): an instance holding a known-errant
//! transaction is never promoted (`SetPrimaryIndex` target), given a role label, used as a
//! replication source or as a clone donor; and when an instance is made writable, no other
//! instance is writable unless it can acknowledge nothing and the manager did not get its
//! status in that round (frozen, down or cut from the manager: a fenced ex-primary).

use std::collections::BTreeSet;

use moco_core::facts::{ClusterFacts, Flavor, MysqldStatus};
use moco_core::gtid::{GtidSet, SourceId};
use moco_core::{Action, Decision};

use super::model::{State, WriteState, uuid_of};
use super::records::{AppliedOp, ErrantWrite, Read, SimGtid, SimOp};

impl State {
    /// The GTID source of `g` as the server reports it.
    fn source_id(&self, g: &SimGtid) -> SourceId {
        match self.flavor {
            Flavor::Mysql => SourceId::Uuid {
                uuid: uuid_of(g.origin),
                tag: String::new(),
            },
            Flavor::Mariadb => SourceId::MariaDb {
                domain: 0,
                server_id: self.server_id_base + g.origin,
            },
        }
    }

    /// Instance `i`'s transactions outside the lineage.
    pub(crate) fn out_of_lineage(&self, i: u32) -> BTreeSet<SimGtid> {
        self.inst(i)
            .map(|x| x.data.difference(&self.truth.lineage).copied().collect())
            .unwrap_or_default()
    }

    /// Instance `i`'s transactions outside the lineage that a round could see.
    pub(crate) fn known_errant(&self, i: u32) -> BTreeSet<SimGtid> {
        let Some(known) = self.truth.known.get(&i) else {
            return BTreeSet::new();
        };
        self.out_of_lineage(i)
            .intersection(known)
            .copied()
            .collect()
    }

    /// A transaction committed by instance `i` joins the lineage when `i` is the primary.
    pub(crate) fn note_commit(&mut self, i: u32, g: SimGtid) {
        if self.status.current_primary_index == i {
            self.truth.lineage.insert(g);
        }
    }

    /// The manager started a round.
    pub(crate) fn note_observe(&mut self) {
        self.truth.reads.clear();
    }

    /// The manager got instance `i`'s status.
    pub(crate) fn note_read(&mut self, i: u32) {
        let Some(x) = self.inst(i) else { return };
        let reported = match self.flavor {
            Flavor::Mysql => x.committed(),
            Flavor::Mariadb => x.data.clone(),
        };
        let hung = !x.pending.is_empty();
        let wipes = self.wipes_of(i);
        self.truth.reads.insert(
            i,
            Read {
                reported,
                hung,
                wipes,
            },
        );
    }

    fn wipes_of(&self, i: u32) -> usize {
        self.truth.wipes.iter().filter(|w| w.instance == i).count()
    }

    /// `i`'s transactions outside the lineage, read this round, that `extra` covers.
    fn visible(&self, i: u32, extra: &GtidSet) -> Option<BTreeSet<SimGtid>> {
        let read = self.truth.reads.get(&i)?;
        Some(
            read.reported
                .iter()
                .filter(|g| !self.truth.lineage.contains(g))
                .filter(|g| extra.contains(&self.source_id(g), g.seq))
                .copied()
                .collect(),
        )
    }

    /// A round's facts: every instance compared with the primary (which answered with a
    /// non-empty executed set) learns what it visibly holds outside the lineage.
    pub(crate) fn note_facts(&mut self, facts: &ClusterFacts, decision: &Decision) {
        self.truth.pending_known = None;
        let p = facts.status.current_primary_index;
        let Some(ps) = facts
            .instances
            .iter()
            .find(|x| x.index == p)
            .and_then(|x| x.mysqld.as_ref())
        else {
            return;
        };
        if ps.gtid_executed.is_empty() {
            return;
        }
        let mut learnt = Vec::new();
        for inst in facts.instances.iter().filter(|x| x.index != p) {
            let Some(s) = &inst.mysqld else { continue };
            let extra = foreign(s.gtid_executed.subtract(&ps.gtid_executed), ps);
            if let Some(seen) = self.visible(inst.index, &extra) {
                learnt.push((inst.index, seen));
            }
        }
        self.truth.pending_known = Some(learnt.into_iter().collect());
        // The engine keeps its verdict in `errantReplicaList`: when the round's list is the
        // one already persisted, nothing is left to write; otherwise it counts once the
        // round's status write went through (a manager dying before it forgets it).
        if decision.status.errant_replica_list == self.status.errant_replica_list {
            self.commit_known();
        }
    }

    /// The round's status write went through: what it learnt is persisted.
    pub(crate) fn commit_known(&mut self) {
        if let Some(learnt) = self.truth.pending_known.take() {
            self.truth.known.extend(learnt);
        }
    }

    /// `currentPrimaryIndex` moved to `to`: the lineage becomes what `to` holds or will hold,
    /// and, in a failover, every instance this round read (not hung) is compared with `to`'s
    /// received set.
    pub(crate) fn promote_lineage(&mut self, to: u32) {
        let lineage = self
            .inst(to)
            .map(super::model::Inst::received)
            .unwrap_or_default();
        self.truth.lineage = lineage;
        for known in self.truth.known.values_mut() {
            known.retain(|g| !self.truth.lineage.contains(g));
        }
        self.truth.known.remove(&to);
        // Only a failover compares the instances with the promoted one (a switchover keeps
        // the list it had: the candidate caught up with the old primary).
        let Some(facts) = self
            .last_round
            .as_ref()
            .filter(|(_, d)| d.action == Action::Failover)
            .map(|(f, _)| f.clone())
        else {
            return;
        };
        let Some(ts) = facts
            .instances
            .iter()
            .find(|x| x.index == to)
            .and_then(|x| x.mysqld.as_ref())
        else {
            return;
        };
        let received = match &ts.replica_status {
            Some(r) => r.retrieved_gtid_set.union(&ts.gtid_executed),
            None => ts.gtid_executed.clone(),
        };
        let mut learnt = Vec::new();
        for inst in facts.instances.iter().filter(|x| x.index != to) {
            let Some(s) = &inst.mysqld else { continue };
            if self.truth.reads.get(&inst.index).is_none_or(|r| r.hung) {
                continue;
            }
            let extra = foreign(s.gtid_executed.subtract(&received), ts);
            if let Some(seen) = self.visible(inst.index, &extra) {
                learnt.push((inst.index, seen));
            }
        }
        for (i, seen) in learnt {
            self.truth.known.entry(i).or_default().extend(seen);
        }
    }

    /// Instance `i`'s data was replaced (wiped, cloned): nothing of it is known any more.
    pub(crate) fn forget_known(&mut self, i: u32) {
        self.truth.known.remove(&i);
    }

    /// Records operation `op` and checks it against the truth.
    pub(crate) fn applied(&mut self, op: SimOp) {
        let n = self.replicas();
        let writable: Vec<u32> = self
            .insts
            .iter()
            .filter(|x| x.up && !x.read_only)
            .map(|x| x.index)
            .collect();
        let errant: Vec<u32> = (0..n)
            .filter(|&i| !self.out_of_lineage(i).is_empty())
            .collect();
        let known_errant: Vec<u32> = (0..n)
            .filter(|&i| !self.known_errant(i).is_empty())
            .collect();
        let mut problems = Vec::new();
        let mut missing_acknowledged = Vec::new();
        let mut opened_empty = false;
        if let SimOp::SetWritable(i) = op {
            let have = self.inst(i).map(|x| x.data.clone()).unwrap_or_default();
            missing_acknowledged = self
                .writes
                .iter()
                .filter(|w| w.state == WriteState::Acknowledged && !have.contains(&w.gtid))
                .map(|w| w.gtid)
                .collect();
            opened_empty = self
                .truth
                .reads
                .get(&i)
                .is_some_and(|r| r.reported.is_empty());
        }
        let errant_use = |what: &str, i: u32| {
            let known = self.known_errant(i);
            (!known.is_empty()).then(|| {
                let list: Vec<String> = known.iter().map(ToString::to_string).collect();
                format!(
                    "{what} instance {i}, which holds {} outside the primary's history (errant, and a round saw it)",
                    list.join(",")
                )
            })
        };
        match op {
            SimOp::SetPrimaryIndex { to, .. } => problems.extend(errant_use("promoted", to)),
            SimOp::SetRoleLabel {
                instance,
                role: Some(role),
            } => problems.extend(errant_use(&format!("labelled {role:?}"), instance)),
            SimOp::ConfigureReplication { source, .. } => {
                problems.extend(errant_use("used as replication source", source));
            }
            SimOp::Clone { donor, .. } => problems.extend(errant_use("used as clone donor", donor)),
            SimOp::SetWritable(i) => {
                // The instance opened must be the one the round read and configured, not a
                // new data directory (empty, semi-sync off) that replaced it since.
                if let Some(read) = self.truth.reads.get(&i)
                    && read.wipes != self.wipes_of(i)
                {
                    let lost: Vec<String> = self
                        .inst(i)
                        .map(|x| {
                            read.reported
                                .difference(&x.data)
                                .map(ToString::to_string)
                                .collect()
                        })
                        .unwrap_or_default();
                    problems.push(format!(
                        "made instance {i} writable, whose data directory was replaced since this round read its status (lost: {{{}}})",
                        lost.join(",")
                    ));
                }
                let ackers = self.writable_ackers();
                for &j in writable.iter().filter(|&&j| j != i) {
                    if self.truth.reads.contains_key(&j) {
                        problems.push(format!(
                            "made instance {i} writable while instance {j}, whose status this round read, is writable too"
                        ));
                    } else if ackers.contains(&j) {
                        problems.push(format!(
                            "made instance {i} writable while instance {j} is writable and can acknowledge"
                        ));
                    }
                }
            }
            _ => {}
        }
        let tick = self.ticks;
        for p in &problems {
            self.truth
                .violations
                .push(format!("tick {tick}: {op:?}: {p}"));
        }
        self.truth.ops.push(AppliedOp {
            tick,
            op,
            writable,
            errant,
            known_errant,
            missing_acknowledged,
            opened_empty,
            problems,
        });
    }

    /// A transaction written straight on instance `i` (not through the primary), which keeps
    /// its replication channel as it is. `None` when mysqld is down or frozen.
    pub(crate) fn errant_write(&mut self, i: u32) -> Option<SimGtid> {
        let flavor = self.flavor;
        let tick = self.ticks;
        let x = self.inst_mut(i)?;
        if !x.up || x.frozen {
            return None;
        }
        let g = x.next_gtid(flavor);
        x.data.insert(g);
        x.binlog.push(g);
        let channel_running = x.repl.as_ref().is_some_and(|r| r.io_running);
        self.truth.errant_writes.push(ErrantWrite {
            instance: i,
            gtid: g,
            tick,
            channel_running,
        });
        self.note_commit(i, g);
        self.refresh();
        Some(g)
    }
}

/// `extra` without the transactions of `primary`'s own server (the engine's errant rule).
fn foreign(extra: GtidSet, primary: &MysqldStatus) -> GtidSet {
    match primary.identity() {
        Some(id) => extra.without_server(&id),
        None => extra,
    }
}
