//! The ledger of a generated case: what the generator did to each instance, in terms simple
//! enough for the truth (`truth.rs`) to reason about without the engine's code, and the
//! rendering of it into the facts the engine reads.
//!
//! Transactions are counted per *origin* (the server that wrote them). Every set is a prefix
//! `1..=count` per origin, which is what MariaDB's `domain-server-seq` positions mean and what
//! MySQL's gap-free `gtid_executed` looks like, so the set algebra the truth needs is a
//! comparison of counts.

use std::collections::BTreeMap;
use std::fmt;

use moco_core::facts::{
    CloneState, ClusterFacts, ExternalSource, FACTS_SCHEMA_VERSION, Flavor, InstanceFacts,
    MysqldStatus, PodFacts, ReplicaHost, ReplicaStatus, SemiSyncFacts, SpecFacts, ThreadState,
};
use moco_core::gtid::{GtidSet, SourceId, parse_server_uuid};
use moco_core::status::ClusterStatus;
use moco_core::time::Timestamp;

/// The MySQL port every instance listens on; a channel to another port points elsewhere.
pub(super) const PORT: u16 = 3306;
/// The external source of an intermediate primary.
pub(super) const EXTERNAL_HOST: &str = "source.example.invalid";

/// Who wrote a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Origin {
    /// Instance `index` under its original identity. `stream` 1 is a second GTID stream of the
    /// same server: a tagged GTID on MySQL, another replication domain on MariaDB. Either way
    /// the server is the same, so the errant rule must treat both streams as the server's own.
    Server {
        /// The ordinal whose identity wrote it.
        index: u32,
        /// 0 or 1.
        stream: u8,
    },
    /// A server that is not (or no longer) an instance of the cluster: data imported before
    /// the cluster existed, a stray writer, or the new identity of a wiped MySQL instance.
    Outsider(u32),
}

impl Origin {
    /// The origin of instance `index`'s ordinary writes.
    pub(super) fn server(index: u32) -> Origin {
        Origin::Server { index, stream: 0 }
    }

    /// True when both name the same server (streams ignored).
    pub(super) fn same_server(self, other: Origin) -> bool {
        match (self, other) {
            (Origin::Server { index: a, .. }, Origin::Server { index: b, .. }) => a == b,
            (Origin::Outsider(a), Origin::Outsider(b)) => a == b,
            _ => false,
        }
    }
}

/// A set of transactions: for each origin, the prefix `1..=count`.
#[derive(Clone, Default, PartialEq, Eq)]
pub(super) struct Txns(pub BTreeMap<Origin, u64>);

impl fmt::Debug for Txns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter()).finish()
    }
}

impl Txns {
    /// How many transactions of `o` the set holds.
    pub(super) fn get(&self, o: Origin) -> u64 {
        self.0.get(&o).copied().unwrap_or(0)
    }

    /// Sets the count of `o` (0 removes it).
    pub(super) fn set(&mut self, o: Origin, count: u64) {
        if count == 0 {
            self.0.remove(&o);
        } else {
            self.0.insert(o, count);
        }
    }

    /// Adds `k` transactions of `o`.
    pub(super) fn add(&mut self, o: Origin, k: u64) {
        let now = self.get(o);
        self.set(o, now + k);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every transaction of both.
    pub(super) fn union(&self, other: &Txns) -> Txns {
        let mut out = self.clone();
        for (&o, &c) in &other.0 {
            if c > out.get(o) {
                out.set(o, c);
            }
        }
        out
    }

    /// True when every transaction of `other` is in `self`.
    pub(super) fn contains(&self, other: &Txns) -> bool {
        other.0.iter().all(|(&o, &c)| c <= self.get(o))
    }

    /// The origins of which `self` holds transactions that `other` lacks.
    pub(super) fn beyond<'a>(&'a self, other: &'a Txns) -> impl Iterator<Item = Origin> + 'a {
        self.0
            .iter()
            .filter(move |&(&o, &c)| c > other.get(o))
            .map(|(&o, _)| o)
    }

    pub(super) fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

/// Where a replication channel points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// Instance `index` of the cluster.
    Instance(u32),
    /// A host that is no instance of the cluster.
    Elsewhere,
    /// The intermediate primary's external source.
    External,
}

/// A replication channel (`SHOW REPLICA STATUS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Channel {
    pub source: Source,
    pub port: u16,
    pub io: ThreadState,
    pub sql: ThreadState,
    pub last_io_errno: u32,
    /// What the IO thread fetched into the relay log.
    pub retrieved: Txns,
    /// `Seconds_Behind_Source`.
    pub lag: Option<u64>,
}

/// One instance as the generator left it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Inst {
    pub pod: PodFacts,
    /// mysqld answers (its facts are rendered); false renders `mysqld: null`.
    pub reachable: bool,
    /// How the server names its own transactions.
    pub identity: Origin,
    pub executed: Txns,
    pub purged: Txns,
    pub read_only: bool,
    pub super_read_only: bool,
    pub semi: SemiSyncFacts,
    pub channel: Option<Channel>,
    /// Server ids of the replicas this server reports (`SHOW REPLICAS`).
    pub replica_hosts: Vec<u32>,
    pub clone_state: Option<CloneState>,
}

impl Inst {
    /// Makes the instance writable (read_only and super_read_only off).
    pub(super) fn open(&mut self) {
        self.read_only = false;
        self.super_read_only = false;
    }

    /// Fences the instance (read_only and super_read_only on).
    pub(super) fn fence(&mut self) {
        self.read_only = true;
        self.super_read_only = true;
    }

    /// What the instance holds or will hold once it applied its relay log.
    pub(super) fn received(&self) -> Txns {
        match &self.channel {
            Some(c) => c.retrieved.union(&self.executed),
            None => self.executed.clone(),
        }
    }

    pub(super) fn io_running(&self) -> bool {
        self.channel
            .as_ref()
            .is_some_and(|c| c.io != ThreadState::No)
    }
}

/// The family of situations a case was generated from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Healthy,
    Degraded,
    Incomplete,
    FailedFirstRound,
    FailedSecondRound,
    Errant,
    Switchover,
    Clone,
    Misc,
    /// A cluster of `n − 2` instances whose `spec.replicas` was raised to `n`.
    Grow,
    /// A cluster of `n` instances whose `spec.replicas` was lowered to `n − 2`: instances
    /// `spec..n` are leaving.
    Shrink,
}

/// Everything the generator decided.
#[derive(Clone, PartialEq)]
pub(super) struct Ledger {
    pub kind: Kind,
    pub flavor: Flavor,
    /// The instances listed (ordinals `0..n`).
    pub n: u32,
    /// `spec.replicas`: `n` unless the cluster shrinks.
    pub spec: u32,
    pub base: u32,
    pub primary: u32,
    pub max_delay: u64,
    pub reclone_errant: bool,
    pub external: bool,
    pub offline: bool,
    pub restore: bool,
    pub restored: bool,
    pub cloned: bool,
    pub insts: Vec<Inst>,
    pub remembered_errant: Vec<u32>,
    pub switchover_to: Option<u32>,
    /// Instances the generator gave transactions the primary never had (a sanity check of the
    /// generator: the truth must find them errant while the primary can be asked).
    pub made_errant: Vec<u32>,
    /// The order of `facts.instances` (ordinals).
    pub order: Vec<u32>,
    /// `status.semiSyncMembers`: set by a cluster that grew.
    pub members: Option<u32>,
    /// `status.semiSyncMinAcks`.
    pub min_acks: Option<u32>,
}

pub(super) fn host(index: u32) -> String {
    format!("moco-c-{index}.moco-c.ns.svc")
}

/// The `@@server_uuid` text of a MySQL server (streams ignored).
pub(super) fn uuid_text(o: Origin) -> String {
    match o {
        Origin::Server { index, .. } => {
            format!(
                "{:08x}-1111-4111-8111-{:012x}",
                0x5eed_0000 + index,
                index + 1
            )
        }
        Origin::Outsider(k) => format!("{:08x}-2222-4222-8222-{:012x}", 0x0bad_0000 + k, k + 1),
    }
}

impl Ledger {
    /// The GTID source naming `o`'s transactions.
    pub(super) fn source(&self, o: Origin) -> SourceId {
        match self.flavor {
            Flavor::Mysql => {
                let uuid = parse_server_uuid(&uuid_text(o)).expect("generated UUIDs parse");
                let tag = match o {
                    Origin::Server { stream: 1, .. } => "t1".to_owned(),
                    _ => String::new(),
                };
                SourceId::Uuid { uuid, tag }
            }
            Flavor::Mariadb => match o {
                Origin::Server { index, stream } => SourceId::MariaDb {
                    domain: u32::from(stream),
                    server_id: self.base + index,
                },
                Origin::Outsider(k) => SourceId::MariaDb {
                    domain: k % 2,
                    server_id: self.base + 50 + k,
                },
            },
        }
    }

    /// The GTID set of `t`.
    pub(super) fn gtid(&self, t: &Txns) -> GtidSet {
        let mut set = GtidSet::new();
        for (&o, &c) in &t.0 {
            set.insert_interval(self.source(o), 1, c);
        }
        set
    }

    pub(super) fn inst(&self, index: u32) -> &Inst {
        &self.insts[index as usize]
    }

    pub(super) fn inst_mut(&mut self, index: u32) -> &mut Inst {
        &mut self.insts[index as usize]
    }

    /// Ordinals other than the primary.
    pub(super) fn others(&self) -> Vec<u32> {
        (0..self.n).filter(|&i| i != self.primary).collect()
    }

    /// The facts, instances in `self.order`.
    pub(super) fn facts(&self) -> ClusterFacts {
        self.facts_in(&self.order)
    }

    /// The facts, instances in the given order of ordinals.
    pub(super) fn facts_in(&self, order: &[u32]) -> ClusterFacts {
        ClusterFacts {
            schema_version: FACTS_SCHEMA_VERSION,
            spec: SpecFacts {
                replicas: self.spec,
                external_source: self.external.then(|| ExternalSource {
                    host: EXTERNAL_HOST.to_owned(),
                    port: PORT,
                }),
                restore: self.restore,
                offline: self.offline,
                server_id_base: self.base,
                max_delay_seconds_for_pod_deletion: self.max_delay,
                flavor: self.flavor,
                reclone_errant: self.reclone_errant,
                startup_wait_seconds: 3600,
            },
            status: ClusterStatus {
                current_primary_index: self.primary,
                errant_replicas: u32::try_from(self.remembered_errant.len()).unwrap_or(0),
                errant_replica_list: self.remembered_errant.clone(),
                cloned: self.cloned,
                restored_time: self.restored.then_some(Timestamp(1_700_000_000)),
                semi_sync_members: self.members,
                semi_sync_min_acks: self.min_acks,
                ..ClusterStatus::default()
            },
            now: Timestamp(1_800_000_000),
            instances: order.iter().map(|&i| self.instance_facts(i)).collect(),
            switchover_to: self.switchover_to,
        }
    }

    fn instance_facts(&self, index: u32) -> InstanceFacts {
        let inst = self.inst(index);
        InstanceFacts {
            index,
            host: host(index),
            port: PORT,
            pod: inst.pod.clone(),
            mysqld: inst.reachable.then(|| self.mysqld(index, inst)),
        }
    }

    fn mysqld(&self, index: u32, inst: &Inst) -> MysqldStatus {
        MysqldStatus {
            flavor: self.flavor,
            version: match self.flavor {
                Flavor::Mysql => "8.4.6".to_owned(),
                Flavor::Mariadb => "10.11.14-MariaDB".to_owned(),
            },
            server_id: self.base + index,
            server_uuid: (self.flavor == Flavor::Mysql).then(|| uuid_text(inst.identity)),
            gtid_executed: self.gtid(&inst.executed),
            gtid_purged: self.gtid(&inst.purged),
            read_only: inst.read_only,
            super_read_only: inst.super_read_only,
            semi_sync: inst.semi.clone(),
            replica_status: inst.channel.as_ref().map(|c| self.replica_status(c)),
            replica_hosts: inst
                .replica_hosts
                .iter()
                .map(|&id| ReplicaHost {
                    server_id: id,
                    host: id
                        .checked_sub(self.base)
                        .filter(|&j| j < self.n)
                        .map(host)
                        .unwrap_or_else(|| "stray.example.invalid".to_owned()),
                    port: PORT,
                })
                .collect(),
            clone_state: inst.clone_state,
        }
    }

    fn replica_status(&self, c: &Channel) -> ReplicaStatus {
        let source_host = match c.source {
            Source::Instance(j) => host(j),
            Source::Elsewhere => "elsewhere.example.invalid".to_owned(),
            Source::External => EXTERNAL_HOST.to_owned(),
        };
        ReplicaStatus {
            source_host,
            source_port: c.port,
            io_running: c.io,
            sql_running: c.sql,
            last_io_errno: c.last_io_errno,
            last_io_error: if c.last_io_errno == 0 {
                String::new()
            } else {
                format!("error {}", c.last_io_errno)
            },
            last_sql_errno: 0,
            last_sql_error: String::new(),
            retrieved_gtid_set: self.gtid(&c.retrieved),
            seconds_behind_source: c.lag,
        }
    }
}

/// One line for the cluster, one per instance.
impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:?} {} x{} spec {} base {} primary {} maxDelay {} recloneErrant {} external {} \
             offline {} restore {}/{} cloned {} remembered {:?} switchoverTo {:?} madeErrant {:?} \
             order {:?} members {:?} minAcks {:?}",
            self.kind,
            self.flavor,
            self.n,
            self.spec,
            self.base,
            self.primary,
            self.max_delay,
            self.reclone_errant,
            self.external,
            self.offline,
            self.restore,
            self.restored,
            self.cloned,
            self.remembered_errant,
            self.switchover_to,
            self.made_errant,
            self.order,
            self.members,
            self.min_acks
        )?;
        for (i, inst) in self.insts.iter().enumerate() {
            writeln!(f, "  #{i}: {inst:?}")?;
        }
        Ok(())
    }
}

/// A generated case: the ledger and the facts rendered from it.
#[derive(Clone)]
pub(super) struct Case {
    pub ledger: Ledger,
    pub facts: ClusterFacts,
}

impl Case {
    pub(super) fn new(ledger: Ledger) -> Case {
        let facts = ledger.facts();
        Case { ledger, facts }
    }
}

/// Failures print the ledger and the facts as the JSON `moco plan --facts` reads, so a
/// failing case can be replayed outside the test.
impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = serde_json::to_string(&self.facts).unwrap_or_default();
        write!(f, "\nledger: {:?}facts: {json}\n", self.ledger)
    }
}
