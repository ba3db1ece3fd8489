//! `kubectl moco status` against a degraded cluster with an errant replica and more events than
//! it shows, in text and JSON; and the events the operator's own platform records.

// Helpers panic on failure as the tests do.

use crate::common;

use std::sync::Arc;

use common::{NAME, NS, cluster, fake_with, pod, run, uid, writes};
use moco_api::addresses::PodNetwork;
use moco_api::cluster::ClusterId;
use moco_cluster::ports::Platform as _;
use moco_core::operation::Event;
use moco_kube::metrics::ClusterMetrics;
use moco_kube::platform::{KubePlatform, MysqlConnector};
use moco_testkit::apiserver::FakeApiServer;
use serde_json::{Value, json};

fn degraded_status() -> Value {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2024-03-01T09:30:00Z"})
    };
    json!({
        "currentPrimaryIndex": 1,
        "syncedReplicas": 2,
        "errantReplicas": 1,
        "errantReplicaList": [2],
        "reconcileInfo": {"generation": 4, "reconcileVersion": 1},
        "conditions": [
            condition("Initialized", "True", "Degraded", "the current state is Degraded"),
            condition("Available", "True", "Degraded", "the current state is Degraded"),
            condition("Healthy", "False", "Degraded", "the current state is Degraded"),
            condition("ClusteringActive", "True", "ClusteringActive", "clustering is active"),
            condition("ReconcileSuccess", "True", "ReconcileSuccess", "reconciliation succeeded"),
        ]
    })
}

fn event(name: &str, second: u32, reason: &str, regarding: Value) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": NS},
        "eventTime": format!("2024-03-01T10:00:{second:02}.250000Z"),
        "reportingController": "moco-controller",
        "reportingInstance": "moco-controller-0",
        "action": reason, "reason": reason, "type": "Normal",
        "note": format!("{reason} at second {second}"),
        "regarding": regarding
    })
}

/// A reference to the stored cluster (the fake assigns the uid).
fn about_db(fake: &FakeApiServer) -> Value {
    json!({"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
           "name": NAME, "namespace": NS, "uid": uid(fake)})
}

/// The degraded cluster: instance 2 is errant and not ready, instance 1 the primary; twelve
/// events about it (inserted out of order, one repeated three times) and some about others.
fn degraded() -> FakeApiServer {
    let fake = fake_with(
        cluster(3, degraded_status()),
        vec![
            pod(0, Some("replica"), true, "Running"),
            pod(1, Some("primary"), true, "Running"),
            pod(2, None, false, "Running"),
        ],
    );
    for second in [7, 1, 12, 3, 5, 2, 9, 11, 4, 6, 10] {
        fake.insert(event(
            &format!("db.{second}"),
            second,
            "SetRoleLabel",
            about_db(&fake),
        ));
    }
    let mut repeated = event("db.8", 8, "ErrantReplica", about_db(&fake));
    repeated["type"] = json!("Warning");
    repeated["series"] = json!({"count": 3, "lastObservedTime": "2024-03-01T10:00:13.000000Z"});
    fake.insert(repeated);
    let mut other_cluster = about_db(&fake);
    other_cluster["name"] = json!("db2");
    fake.insert(event("db2.1", 20, "SwitchOver", other_cluster));
    let mut pod_event = about_db(&fake);
    pod_event["kind"] = json!("Pod");
    fake.insert(event("pod.1", 21, "Killing", pod_event));
    let mut old_cluster = about_db(&fake);
    old_cluster["uid"] = json!("00000000-0000-4000-8000-000000000000");
    fake.insert(event("old.1", 22, "FailOver", old_cluster));
    fake
}

const DEGRADED_TEXT: &str = "\
Name:         db
Namespace:    shop
State:        Degraded (Available: True, Healthy: False)
Primary:      moco-db-1 (index 1)
Replicas:     3 (synced 2)
Errant:       1 [2]
Cloned:       false
Reconciled:   generation 4 by reconciler version 1

Conditions:
  TYPE              STATUS  REASON            LAST TRANSITION       MESSAGE
  Initialized       True    Degraded          2024-03-01T09:30:00Z  the current state is Degraded
  Available         True    Degraded          2024-03-01T09:30:00Z  the current state is Degraded
  Healthy           False   Degraded          2024-03-01T09:30:00Z  the current state is Degraded
  ClusteringActive  True    ClusteringActive  2024-03-01T09:30:00Z  clustering is active
  ReconcileSuccess  True    ReconcileSuccess  2024-03-01T09:30:00Z  reconciliation succeeded

Instances:
  INDEX  POD        PHASE    ROLE     READY  ERRANT  SQL          LAG
  0      moco-db-0  Running  replica  true   false   unreachable  -
  1      moco-db-1  Running  primary  true   false   unreachable  -
  2      moco-db-2  Running  -        false  true    unreachable  -

Events (last 10):
  TIME                  TYPE     REASON         COUNT  MESSAGE
  2024-03-01T10:00:03Z  Normal   SetRoleLabel   1      SetRoleLabel at second 3
  2024-03-01T10:00:04Z  Normal   SetRoleLabel   1      SetRoleLabel at second 4
  2024-03-01T10:00:05Z  Normal   SetRoleLabel   1      SetRoleLabel at second 5
  2024-03-01T10:00:06Z  Normal   SetRoleLabel   1      SetRoleLabel at second 6
  2024-03-01T10:00:07Z  Normal   SetRoleLabel   1      SetRoleLabel at second 7
  2024-03-01T10:00:09Z  Normal   SetRoleLabel   1      SetRoleLabel at second 9
  2024-03-01T10:00:10Z  Normal   SetRoleLabel   1      SetRoleLabel at second 10
  2024-03-01T10:00:11Z  Normal   SetRoleLabel   1      SetRoleLabel at second 11
  2024-03-01T10:00:12Z  Normal   SetRoleLabel   1      SetRoleLabel at second 12
  2024-03-01T10:00:13Z  Warning  ErrantReplica  3      ErrantReplica at second 8
";

#[tokio::test]
async fn status_text_shows_state_instances_errant_replica_and_the_last_ten_events() {
    let fake = degraded();
    // The Pods have no IP, so no instance is reachable over SQL (as outside a cluster).
    let out = run(&fake, &["status", NAME]).await;
    assert_eq!(out.ok(), DEGRADED_TEXT);
    assert!(writes(&fake).is_empty(), "{:?}", writes(&fake));
}

#[tokio::test]
async fn status_json_holds_the_same_report() {
    let fake = degraded();
    let out = run(&fake, &["status", "-o", "json", "--no-sql", NAME]).await;
    let report: Value = serde_json::from_str(out.ok()).unwrap();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2024-03-01T09:30:00Z"})
    };
    let instance = |index: u32, role: Value, ready: bool, errant: bool| {
        json!({"index": index, "pod": format!("moco-db-{index}"), "phase": "Running",
               "role": role, "ready": ready, "errant": errant, "sql": "skipped",
               "lagSeconds": null})
    };
    let mut events: Vec<Value> = [3, 4, 5, 6, 7, 9, 10, 11, 12]
        .iter()
        .map(|s| {
            json!({"time": format!("2024-03-01T10:00:{s:02}Z"), "type": "Normal",
                   "reason": "SetRoleLabel", "count": 1,
                   "message": format!("SetRoleLabel at second {s}")})
        })
        .collect();
    events.push(json!({"time": "2024-03-01T10:00:13Z", "type": "Warning",
                       "reason": "ErrantReplica", "count": 3,
                       "message": "ErrantReplica at second 8"}));
    assert_eq!(
        report,
        json!({
            "name": "db", "namespace": "shop",
            "state": "Degraded", "available": "True", "healthy": "False",
            "offline": false, "clusteringStopped": false, "reconciliationStopped": false,
            "replicas": 3, "currentPrimaryIndex": 1, "primaryPod": "moco-db-1",
            "syncedReplicas": 2, "errantReplicas": 1, "errantReplicaList": [2],
            "cloned": false,
            "reconcileInfo": {"generation": 4, "reconcileVersion": 1},
            "conditions": [
                condition("Initialized", "True", "Degraded", "the current state is Degraded"),
                condition("Available", "True", "Degraded", "the current state is Degraded"),
                condition("Healthy", "False", "Degraded", "the current state is Degraded"),
                condition("ClusteringActive", "True", "ClusteringActive", "clustering is active"),
                condition("ReconcileSuccess", "True", "ReconcileSuccess", "reconciliation succeeded"),
            ],
            "instances": [
                instance(0, json!("replica"), true, false),
                instance(1, json!("primary"), true, false),
                instance(2, Value::Null, false, true),
            ],
            "sqlError": null,
            "events": events
        })
    );
}

#[tokio::test]
async fn status_of_a_new_stopped_cluster_with_a_missing_pod() {
    let mut new = cluster(2, Value::Null);
    new["metadata"]["annotations"] = json!({"moco.cybozu.com/clustering-stopped": "true",
                                            "moco.cybozu.com/reconciliation-stopped": "true"});
    let fake = fake_with(new, vec![pod(0, None, false, "Pending")]);
    let out = run(&fake, &["status", "--no-sql", NAME]).await;
    assert_eq!(
        out.ok(),
        "\
Name:         db
Namespace:    shop
State:        Unknown (Available: Unknown, Healthy: Unknown)
Stopped:      clustering, reconciliation
Primary:      moco-db-0 (index 0)
Replicas:     2 (synced 0)
Errant:       0 []
Cloned:       false

Conditions:
  <none>

Instances:
  INDEX  POD        PHASE    ROLE  READY  ERRANT  SQL      LAG
  0      moco-db-0  Pending  -     false  false   skipped  -
  1      moco-db-1  Missing  -     false  false   skipped  -

Events (last 10):
  <none>
"
    );
    assert_eq!(
        run(&FakeApiServer::new(), &["status", NAME]).await.error(),
        "MySQLCluster shop/db not found"
    );
}

/// The events the operator's Kubernetes platform records (kube's `Recorder`, events.k8s.io/v1)
/// are the ones `status` finds.
#[tokio::test]
async fn status_shows_the_events_the_operator_records() {
    let fake = degraded();
    let platform = KubePlatform::new(
        fake.client(),
        ClusterId {
            name: NAME.into(),
            namespace: NS.into(),
            uid: uid(&fake),
        },
        Arc::new(PodNetwork),
        Arc::new(MysqlConnector::default()),
        None,
        ClusterMetrics::default(),
    );
    platform
        .record_event(&Event::warning("FailOver", "failed over to instance 0"))
        .await
        .unwrap();
    let out = run(&fake, &["status", "-o", "json", "--no-sql", NAME]).await;
    let report: Value = serde_json::from_str(out.ok()).unwrap();
    let events = report["events"].as_array().unwrap();
    assert_eq!(events.len(), 10);
    let last = events.last().unwrap();
    assert_eq!(
        (
            &last["type"],
            &last["reason"],
            &last["message"],
            &last["count"]
        ),
        (
            &json!("Warning"),
            &json!("FailOver"),
            &json!("failed over to instance 0"),
            &json!(1)
        )
    );
    assert_eq!(events[0]["message"], "SetRoleLabel at second 4");
}
