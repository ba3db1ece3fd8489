//! The operator's half of a clone on Kubernetes: the Kubernetes platform's clone port (the
//! manager's `clone` operation), which reads the cluster's Secret and hands the clone to
//! `AgentCloner`, against real agents and servers standing in for two Pods, and the fake API
//! server. A
//! kubelet stand-in re-creates a deleted Pod the way a StatefulSet does: the agent and server
//! stop, `moco init` runs, both start again.

use std::sync::Arc;
use std::time::Duration;

use moco_api::cluster::ClusterId;
use moco_cluster::ports::Platform as _;
use moco_core::operation::ReplicationSource;
use moco_kube::metrics::ClusterMetrics;
use moco_kube::platform::{KubePlatform, MysqlConnector};
use moco_operator::clustering::agent::AgentCloner;
use moco_testkit::apiserver::FakeApiServer;
use moco_tests::job_bench::{AgentBench, addresses, pod_object, writable_with_table};
use mysql_async::prelude::Queryable;
use serde_json::json;

const NS: &str = "drill";
const PODS: &str = "v1/pods";

/// Pod `moco-db-<index>` as the kubelet stand-in keeps it (nothing here reads its status).
fn pod(index: u32) -> serde_json::Value {
    pod_object(NS, index, true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_clones_an_empty_instance_through_the_agents() {
    let test = "the_operator_clones_an_empty_instance_through_the_agents";
    let Some(bench) = AgentBench::start(test) else {
        return;
    };
    let ([donor, recipient], [a0, a1]) = bench
        .pods_with_agents(bench.root.path(), None, &[], Duration::from_secs(120))
        .await;

    let mut c = donor.admin().await;
    writable_with_table(&mut c, "id INT PRIMARY KEY").await;
    c.query_drop("INSERT INTO app.t SELECT seq FROM app.seq_1_to_5000")
        .await
        .unwrap();
    let donor_state: String = c
        .query_first("SELECT @@gtid_binlog_state")
        .await
        .unwrap()
        .unwrap();

    let fake = FakeApiServer::new();
    fake.insert(pod(0));
    fake.insert(pod(1));
    // The cluster's password Secret, as the operator writes it.
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("moco-db".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(
            moco_tests::pod::test_passwords()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), k8s_openapi::ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Default::default()
    };
    let mut secret = serde_json::to_value(secret).unwrap();
    secret["apiVersion"] = json!("v1");
    secret["kind"] = json!("Secret");
    fake.insert(secret);
    let addresses = addresses(
        &[donor.port, recipient.port],
        &[a0.agent.port(), a1.agent.port()],
    );

    // The kubelet stand-in: a deleted Pod comes back through its init container.
    let restarted = Arc::new(tokio::sync::Notify::new());
    let kubelet = {
        let fake = fake.clone();
        let restarted = restarted.clone();
        let mut a1 = a1;
        tokio::spawn(async move {
            loop {
                if fake.get_json(PODS, NS, "moco-db-1").is_none() {
                    recipient.stop().await;
                    let out = recipient.run_init(10, &[]);
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    recipient.start().await;
                    a1.restart();
                    fake.insert(pod(1));
                    restarted.notify_one();
                    return (recipient, a1);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let id = ClusterId {
        name: "db".into(),
        namespace: NS.into(),
        uid: "uid-1".into(),
    };
    let addresses = Arc::new(addresses);
    let cloner = AgentCloner::new(
        fake.client(),
        bench.certs.controller.0.clone(),
        addresses.clone(),
    );
    let platform = KubePlatform::new(
        fake.client(),
        id.clone(),
        addresses,
        Arc::new(MysqlConnector::default()),
        Some(Arc::new(cloner)),
        ClusterMetrics::default(),
    );
    let donor_source = ReplicationSource::Instance {
        index: 0,
        host: "127.0.0.1".into(),
        port: donor.port,
    };
    tokio::time::timeout(
        Duration::from_secs(600),
        platform.clone_instance(1, &donor_source, Duration::from_secs(120)),
    )
    .await
    .expect("the clone finished in time")
    .unwrap();
    restarted.notified().await;
    let (recipient, a1) = kubelet.await.unwrap();
    let deletes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    assert_eq!(deletes, ["/api/v1/namespaces/drill/pods/moco-db-1"]);

    let mut r = recipient.admin().await;
    let (rows, state): (u64, String) = r
        .query_first("SELECT (SELECT COUNT(*) FROM app.t), @@gtid_binlog_state")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rows, 5000);
    assert_eq!(state, donor_state);
    // A second request finds the clone done and the instance no longer empty.
    let e = platform
        .clone_instance(1, &donor_source, Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
    drop((c, r, a0, a1));
    donor.stop().await;
    recipient.stop().await;
}
