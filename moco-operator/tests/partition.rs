//! The partition controller's one write, against the fake API server: it lowers the partition
//! only of the StatefulSet it read. A step woken by a Pod's event before the StatefulSet's own
//! event had arrived once lowered "from 2 to 1" a second time (two events for one step, seen
//! on the real control plane); from an older view it would raise a partition lowered since.

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::Api;
use moco_operator::partition::{Lowered, lower_partition};
use moco_testkit::apiserver::FakeApiServer;
use serde_json::json;

fn partition(fake: &FakeApiServer) -> Option<i32> {
    fake.get::<StatefulSet>("default", "moco-db")
        .unwrap()
        .spec
        .unwrap()
        .update_strategy
        .unwrap()
        .rolling_update
        .unwrap()
        .partition
}

#[tokio::test]
async fn a_step_decided_from_a_stale_view_writes_nothing() {
    let fake = FakeApiServer::new();
    fake.insert(json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "moco-db", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "db"}},
            "serviceName": "moco-db",
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": []}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 3}}
        }
    }));
    let api: Api<StatefulSet> = Api::default_namespaced(fake.client());
    let read = api.get("moco-db").await.unwrap();

    assert_eq!(
        lower_partition(&api, &read, 2).await.unwrap(),
        Lowered::Done
    );
    assert_eq!(partition(&fake), Some(2));

    // The same view again (the cache behind the write): refused, the partition stays.
    assert_eq!(
        lower_partition(&api, &read, 2).await.unwrap(),
        Lowered::Stale
    );
    let now = api.get("moco-db").await.unwrap();
    assert_eq!(lower_partition(&api, &now, 1).await.unwrap(), Lowered::Done);
    // An older view would raise the partition lowered since: refused.
    assert_eq!(
        lower_partition(&api, &read, 2).await.unwrap(),
        Lowered::Stale
    );
    assert_eq!(partition(&fake), Some(1));
}
