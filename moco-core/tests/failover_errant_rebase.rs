//! Regression (simulator, hung-primary schedules; engine bug 5): the errant list remembered in
//! the status was computed against the old primary and outlived the failover, so when the new
//! primary was lost before a round saw it, an instance that held nothing the new primary
//! lacked stayed excluded and the cluster stayed Lost. The promotion now persists the list
//! re-based on the new primary.

use moco_core::decide;
use moco_core::facts::ClusterFacts;
use moco_core::operation::Operation;
use serde_json::{Value, json};

/// Five MySQL instances, primary 0 gone, replicas' IO threads stopped (the second failover
/// round); instance 2 received the most. Instance 4 is remembered errant.
fn facts(four_reachable: bool) -> ClusterFacts {
    let text = include_str!("fixtures/scenarios/failover3-second-round-most-advanced.json");
    let mut v: Value = serde_json::from_str(text).unwrap();
    let f = &mut v["facts"];
    f["spec"]["replicas"] = json!(5);
    f["status"]["errantReplicaList"] = json!([4]);
    f["status"]["errantReplicas"] = json!(1);
    let template = f["instances"][1].clone();
    for index in [3u32, 4] {
        let mut inst = template.clone();
        inst["index"] = json!(index);
        inst["host"] = json!(format!("moco-test-{index}.moco-test.default.svc"));
        inst["mysqld"]["serverId"] = json!(1000 + index);
        inst["mysqld"]["serverUuid"] =
            json!(format!("00000000-0000-0000-0000-00000000000{}", index + 1));
        if index == 4 && !four_reachable {
            inst["mysqld"] = Value::Null;
        }
        f["instances"].as_array_mut().unwrap().push(inst);
    }
    serde_json::from_value(f.clone()).unwrap()
}

fn persisted_errant(f: &ClusterFacts) -> (u32, Vec<u32>) {
    let d = decide(f).unwrap();
    d.steps
        .iter()
        .find_map(|s| match &s.operation {
            Operation::SetPrimaryIndex {
                index,
                errant_replica_list,
                ..
            } => Some((*index, errant_replica_list.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no promotion planned: {:?}", d.steps))
}

#[test]
fn promotion_rebases_the_errant_list_on_the_new_primary() {
    // Instance 4 holds nothing instance 2 lacks: no longer errant once 2 is primary.
    assert_eq!(persisted_errant(&facts(true)), (2, vec![]));
}

#[test]
fn an_unreachable_instance_keeps_its_verdict() {
    // Nothing new is known of instance 4: its verdict stays.
    assert_eq!(persisted_errant(&facts(false)), (2, vec![4]));
}
