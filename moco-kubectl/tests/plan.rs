//! `kubectl moco plan`: the facts come from the fake API server through the operator's own
//! platform, the instances sit behind closed ports, and the printed decision must be the
//! engine's for the printed facts, with nothing written.

// Helpers panic on failure as the tests do.

use crate::common;

use common::{NAME, NS, cluster, fake_with, pod, run, writes};
use moco_core::facts::ClusterFacts;
use moco_testkit::apiserver::FakeApiServer;
use serde_json::{Value, json};

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    listener.local_addr().unwrap().port()
}

fn healthy_status() -> Value {
    let condition = |type_: &str, reason: &str| {
        json!({"type": type_, "status": "True", "reason": reason,
               "message": format!("the current state is {reason}"),
               "lastTransitionTime": "2024-03-01T09:30:00Z"})
    };
    json!({
        "currentPrimaryIndex": 0,
        "syncedReplicas": 3,
        "conditions": [
            condition("Initialized", "Healthy"),
            condition("Available", "Healthy"),
            condition("Healthy", "Healthy"),
        ]
    })
}

fn healthy_cluster() -> FakeApiServer {
    fake_with(
        cluster(3, healthy_status()),
        vec![
            pod(0, Some("primary"), true, "Running"),
            pod(1, Some("replica"), true, "Running"),
            pod(2, Some("replica"), true, "Running"),
        ],
    )
}

/// No request but reads, and no event stored.
fn assert_nothing_written(fake: &FakeApiServer) {
    assert!(writes(fake).is_empty(), "{:?}", writes(fake));
    assert!(fake.list_json("events.k8s.io/v1/events", None).is_empty());
    assert!(fake.list_json("v1/events", None).is_empty());
}

#[tokio::test]
async fn plan_prints_the_engines_decision_on_the_gathered_facts_and_writes_nothing() {
    let fake = healthy_cluster();
    let ports = [closed_port(), closed_port(), closed_port()];
    let addresses: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("--address={i}=127.0.0.1:{p}"))
        .collect();
    let mut args = vec!["plan", "--show-facts"];
    args.extend(addresses.iter().map(String::as_str));
    args.push(NAME);
    let out = run(&fake, &args).await;
    let printed: Value = serde_json::from_str(out.ok()).unwrap();

    // The facts: the cluster and Pods as the operator sees them, every instance down.
    let facts: ClusterFacts = serde_json::from_value(printed["facts"].clone()).unwrap();
    let mut facts_json = printed["facts"].clone();
    assert!(facts_json["now"].as_str().unwrap() > "2024");
    facts_json["now"] = json!("-");
    let pod_facts = |role: &str| {
        json!({"exists": true, "ready": true, "deleting": false, "demote": false,
               "preventDelete": false, "roleLabel": role})
    };
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True", "reason": "Healthy",
               "message": "the current state is Healthy",
               "lastTransitionTime": "2024-03-01T09:30:00Z"})
    };
    let instance = |index: u32, role: &str| {
        json!({"index": index, "host": format!("moco-db-{index}.moco-db.shop.svc"),
               "port": 3306, "pod": pod_facts(role), "mysqld": null})
    };
    assert_eq!(
        facts_json,
        json!({
            "schemaVersion": moco_core::facts::FACTS_SCHEMA_VERSION,
            "spec": {"replicas": 3, "restore": false, "offline": false,
                     "serverIdBase": 100, "maxDelaySecondsForPodDeletion": 0,
                     "flavor": "mysql", "recloneErrant": false, "startupWaitSeconds": 3600},
            "status": {
                "conditions": [condition("Initialized"), condition("Available"), condition("Healthy")],
                "currentPrimaryIndex": 0, "syncedReplicas": 3,
                "errantReplicas": 0, "errantReplicaList": [],
                "cloned": false, "restoredTime": null
            },
            "now": "-",
            "instances": [instance(0, "primary"), instance(1, "replica"), instance(2, "replica")]
        })
    );

    // The decision is exactly the engine's on those facts.
    let decision = moco_core::decide(&facts).unwrap();
    assert_eq!(
        printed["decision"],
        serde_json::to_value(&decision).unwrap()
    );
    assert_eq!(printed["decision"]["state"], json!("Lost"));
    assert!(
        out.err.contains(
            "kubectl-moco: note: instance(s) 0, 1, 2 did not answer over SQL and count as down"
        ),
        "{}",
        out.err
    );
    assert_nothing_written(&fake);

    // Without --show-facts: the decision alone, in moco plan's layout.
    let alone = run(
        &fake,
        &args[..args.len() - 1]
            .iter()
            .filter(|a| **a != "--show-facts")
            .copied()
            .chain([NAME])
            .collect::<Vec<_>>(),
    )
    .await;
    let alone: moco_core::Decision = serde_json::from_str(alone.ok()).unwrap();
    assert_eq!(alone.state, decision.state);
    assert_eq!(alone.steps, decision.steps);
    assert_nothing_written(&fake);
}

#[tokio::test]
async fn plan_without_addresses_uses_the_pod_network_and_pods_without_ip_are_down() {
    let fake = healthy_cluster();
    let out = run(&fake, &["plan", "--show-facts", "--compact", NAME]).await;
    let text = out.ok();
    assert_eq!(text.lines().count(), 1, "compact: {text}");
    let printed: Value = serde_json::from_str(text).unwrap();
    let facts: ClusterFacts = serde_json::from_value(printed["facts"].clone()).unwrap();
    assert!(facts.instances.iter().all(|i| i.mysqld.is_none()));
    assert_eq!(
        printed["decision"],
        serde_json::to_value(moco_core::decide(&facts).unwrap()).unwrap()
    );
    assert_nothing_written(&fake);
}

#[tokio::test]
async fn plan_refuses_bad_addresses_and_missing_clusters() {
    let fake = healthy_cluster();
    let port = closed_port();
    let out_of_range = format!("--address=3=127.0.0.1:{port}");
    assert_eq!(
        run(&fake, &["plan", &out_of_range, NAME]).await.error(),
        "--address 3=...: MySQLCluster shop/db has 3 instance(s), indexes 0 to 2"
    );
    let twice = format!("--address=1=127.0.0.1:{port}");
    assert_eq!(
        run(&fake, &["plan", &twice, &twice, NAME]).await.error(),
        "--address: instance 1 is given twice"
    );
    assert_eq!(
        run(&fake, &["status", &out_of_range, NAME]).await.error(),
        "--address 3=...: MySQLCluster shop/db has 3 instance(s), indexes 0 to 2"
    );
    assert_eq!(
        run(&FakeApiServer::new(), &["plan", NAME]).await.error(),
        "MySQLCluster shop/db not found"
    );
    assert_nothing_written(&fake);
}

/// The operator's platform refuses a cluster whose flavour annotation it does not know; so
/// does plan, naming the cluster.
#[tokio::test]
async fn plan_reports_a_cluster_the_operator_could_not_observe() {
    let mut c = cluster(3, healthy_status());
    c["metadata"]["annotations"]["moco-rs/flavor"] = json!("postgres");
    let fake = fake_with(c, vec![pod(0, Some("primary"), true, "Running")]);
    let err = run(&fake, &["plan", NAME]).await.error();
    assert!(
        err.starts_with(
            "gathering the facts of MySQLCluster shop/db: observing the cluster failed: "
        ),
        "{err}"
    );
    assert!(err.contains("postgres"), "{err}");
    assert_nothing_written(&fake);
    // status still shows what the API holds, and says why SQL was not read.
    let status = run(&fake, &["status", "-o", "json", NAME]).await;
    let report: Value = serde_json::from_str(status.ok()).unwrap();
    assert!(
        report["sqlError"]
            .as_str()
            .unwrap()
            .contains("observing the cluster failed"),
        "{report}"
    );
    assert_eq!(report["instances"][0]["sql"], json!("skipped"));
    let _ = NS;
}
