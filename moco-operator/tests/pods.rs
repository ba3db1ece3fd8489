//! The clustering rounds' Pods through the Kubernetes platform: from the Pod watch's store once
//! it has listed them (finding 2 of the real control plane's benchmark: each round LISTed them
//! through the API server), listed while it has not, and listed in the round after the
//! platform's own Pod write, which the store may not hold yet.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_api::addresses::PodNetwork;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::manager::ManagerConfig;
use moco_cluster::ports::Platform;
use moco_core::facts::Role;
use moco_kube::api::Scope;
use moco_kube::metrics::ClusterMetrics;
use moco_kube::platform::{KubePlatform, MysqlConnector};
use moco_kube::pods::PodCache;
use moco_operator::clustering::Managers;
use moco_operator::clustering::pods::watch_pods;
use moco_testkit::apiserver::FakeApiServer;
use serde_json::json;

const NS: &str = "ns";

fn pod(index: u32) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("moco-db-{index}"), "namespace": NS,
            "labels": {"app.kubernetes.io/name": "mysql", "app.kubernetes.io/created-by": "moco",
                       "app.kubernetes.io/instance": "db"}},
        "spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]},
        "status": {"podIP": format!("10.0.0.{index}"),
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// The LISTs of Pods sent since the last call.
fn pod_lists(fake: &FakeApiServer) -> usize {
    fake.take_requests()
        .iter()
        .filter(|r| {
            r.method == "GET" && r.path.ends_with("/pods") && r.query_param("watch").is_none()
        })
        .count()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_read_their_pods_from_the_watch_once_it_has_listed_them() {
    let fake = FakeApiServer::new();
    let cluster = fake.insert(json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": NS},
        "spec": {
            "replicas": 3, "serverIDBase": 7,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }));
    for i in 0..3 {
        fake.insert(pod(i));
    }
    let cluster: MySQLCluster = serde_json::from_value(cluster).unwrap();
    let (cache, writer) = PodCache::new(&Scope::All);
    let platform = KubePlatform::new(
        fake.client(),
        ClusterId::of(&cluster).unwrap(),
        Arc::new(PodNetwork),
        Arc::new(MysqlConnector::default()),
        None,
        ClusterMetrics::default(),
    )
    .with_pod_cache(cache);

    // The watch has not listed them: the round lists them itself.
    let seen = platform.observe().await.unwrap();
    assert!(seen.instances.iter().all(|s| s.pod.exists && s.pod.ready));
    assert_eq!(pod_lists(&fake), 1);

    let managers = Arc::new(Managers::new(
        fake.client(),
        Arc::new(PodNetwork),
        Arc::new(MysqlConnector::default()),
        None,
        ManagerConfig::default(),
        ClusterMetrics::default(),
    ));
    let watch = tokio::spawn({
        let client = fake.client();
        async move { watch_pods(client, &Scope::All, managers, writer).await }
    });
    eventually("the Pod watch", || {
        fake.requests()
            .iter()
            .any(|r| r.path.ends_with("/pods") && r.query_param("watch") == Some("true"))
    })
    .await;
    fake.take_requests();
    for _ in 0..3 {
        let seen = platform.observe().await.unwrap();
        assert_eq!(seen.instances.len(), 3);
        assert!(seen.instances.iter().all(|s| s.pod.exists && s.pod.ready));
    }
    assert_eq!(pod_lists(&fake), 0, "served from the store");

    // A Pod that goes is gone from the next round's view once its event arrived.
    fake.delete_now("v1/pods", NS, "moco-db-2");
    let mut exists = true;
    for _ in 0..500 {
        exists = platform.observe().await.unwrap().instances[2].pod.exists;
        if !exists {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!exists, "the deletion reached the store");
    assert_eq!(pod_lists(&fake), 0);

    // The platform's own write: the next round lists, so it sees the label whether or not
    // the store holds it yet; the round after reads the store again.
    platform
        .set_role_label(0, Some(Role::Primary))
        .await
        .unwrap();
    let seen = platform.observe().await.unwrap();
    assert_eq!(seen.instances[0].pod.role_label, Some(Role::Primary));
    assert_eq!(pod_lists(&fake), 1);
    platform.observe().await.unwrap();
    assert_eq!(pod_lists(&fake), 0);
    watch.abort();
}
