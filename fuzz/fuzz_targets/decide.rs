//! Arbitrary facts never make `decide` panic, and whenever the facts are consistent the plan
//! keeps the engine's invariants: only the recorded primary is opened for writes, and only
//! after every other reachable instance is read-only; errant replicas are never promoted.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use moco_core::facts::{ClusterFacts, Flavor, InstanceFacts, MysqldStatus, PodFacts, SpecFacts};
use moco_core::operation::Operation;
use moco_core::status::ClusterStatus;
use moco_core::time::Timestamp;

#[derive(Debug, Arbitrary)]
struct Input {
    replicas: u8,
    /// The replica count when `replicas` is 255: any value at all (issue 12: a huge one once
    /// aborted `decide` on an allocation). Rare, so most inputs stay plausible.
    any_replicas: u32,
    primary: u8,
    flavor: Flavor,
    offline: bool,
    restore: bool,
    cloned: bool,
    external: bool,
    reclone_errant: bool,
    errant_memory: Vec<u8>,
    switchover_to: Option<u8>,
    instances: Vec<(PodFacts, Option<MysqldStatus>)>,
}

fuzz_target!(|input: Input| {
    let replicas = if input.replicas == u8::MAX {
        input.any_replicas
    } else {
        u32::from(input.replicas % 8)
    };
    let mut facts = ClusterFacts {
        schema_version: moco_core::facts::FACTS_SCHEMA_VERSION,
        spec: SpecFacts {
            replicas,
            external_source: input.external.then(|| moco_core::facts::ExternalSource {
                host: "h9".into(),
                port: 3306,
            }),
            restore: input.restore,
            offline: input.offline,
            server_id_base: 1,
            max_delay_seconds_for_pod_deletion: 5,
            flavor: input.flavor,
            reclone_errant: input.reclone_errant,
            startup_wait_seconds: 60,
        },
        status: ClusterStatus {
            current_primary_index: u32::from(input.primary % 8),
            errant_replica_list: input
                .errant_memory
                .iter()
                .map(|&i| u32::from(i % 8))
                .collect(),
            cloned: input.cloned,
            ..ClusterStatus::default()
        },
        now: Timestamp(1_800_000_000),
        instances: Vec::new(),
        switchover_to: input.switchover_to.map(|t| u32::from(t % 8)),
    };
    for (n, (pod, mysqld)) in input.instances.into_iter().take(8).enumerate() {
        let index = n as u32;
        // Identities the engine accepts (server_id = base + index, a MySQL server_uuid) and
        // that match the sources arbitrary GTID sets use (uuids 0..=3, MariaDB server ids
        // 1..=5), so that primaries' own transactions occur.
        let mysqld = mysqld.map(|mut m| {
            m.flavor = input.flavor;
            m.server_id = 1 + index;
            m.server_uuid = (input.flavor == Flavor::Mysql)
                .then(|| format!("00000000-0000-0000-0000-{index:012x}"));
            m
        });
        facts.instances.push(InstanceFacts {
            index,
            host: format!("h{index}"),
            port: 3306,
            pod,
            mysqld,
        });
    }
    let Ok(decision) = moco_core::decide(&facts) else {
        return;
    };
    let mut writable: Vec<u32> = facts
        .instances
        .iter()
        .filter(|i| i.mysqld.as_ref().is_some_and(|m| !m.read_only))
        .map(|i| i.index)
        .collect();
    for step in &decision.steps {
        match &step.operation {
            Operation::SetWritable { index } => {
                assert_eq!(*index, facts.status.current_primary_index);
                // Every other reachable instance must have been made read-only by now.
                assert!(
                    writable.iter().all(|i| i == index),
                    "opening {index} while {writable:?} are writable: {:?}",
                    decision.steps
                );
            }
            Operation::SetSuperReadOnly { index, .. } => writable.retain(|i| i != index),
            Operation::SetPrimaryIndex { index, .. } => {
                assert!(!decision.assessment.errant.contains(index));
            }
            _ => {}
        }
    }
    let again = moco_core::decide(&facts).expect("decide is deterministic");
    assert_eq!(again, decision);
});
