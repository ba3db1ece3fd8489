//! The fake API server of `moco_testkit::apiserver`, driven through the real
//! `kube::Client`, `kube::Api` and `kube::runtime`: each test asserts what the real API server
//! would answer, so that tests of the operator built on the fake can be trusted.
// Helpers outside `#[test]` functions panic on failure as the tests do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::Status;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use moco_api::mysqlcluster::MySQLCluster;
use moco_testkit::apiserver::{FakeApiServer, RequestMatcher};
use serde_json::json;

/// A ConfigMap `name` in `default` with `labels` and `data`.
fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let map = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: map(labels),
            ..ObjectMeta::default()
        },
        data: map(data),
        ..ConfigMap::default()
    }
}

/// A MySQLCluster `name` in `default` as a user would write it.
fn mysql_cluster(name: &str) -> MySQLCluster {
    let mut value = moco_testkit::cluster(name, 3);
    value["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("uid")
        .unwrap();
    serde_json::from_value(value).unwrap()
}

/// The Status of an API error.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// `(code, reason)` of an API error.
fn code_reason<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    let status = api_error(result);
    (status.code, status.reason)
}

fn names<K: ResourceExt>(objects: &[K]) -> Vec<String> {
    objects.iter().map(ResourceExt::name_any).collect()
}

/// The next item of `stream`, failing after 10 seconds.
async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("no item within 10s")
        .expect("the stream ended")
}

fn owner_of(owner: &impl Resource<DynamicType = ()>) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: owner.api_version_for(),
        kind: owner.kind_for(),
        name: meta.name.clone().unwrap(),
        uid: meta.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

trait TypeOf: Resource<DynamicType = ()> {
    fn api_version_for(&self) -> String {
        Self::api_version(&()).into_owned()
    }
    fn kind_for(&self) -> String {
        Self::kind(&()).into_owned()
    }
}
impl<K: Resource<DynamicType = ()>> TypeOf for K {}

#[tokio::test]
async fn create_get_and_list_with_selectors() {
    let fake = FakeApiServer::new();
    let api: Api<ConfigMap> = Api::default_namespaced(fake.client());
    let pp = PostParams::default();

    let a = api
        .create(
            &pp,
            &config_map("a", &[("app", "mysql"), ("tier", "db")], &[("k", "v")]),
        )
        .await
        .unwrap();
    api.create(&pp, &config_map("b", &[("app", "web")], &[]))
        .await
        .unwrap();
    api.create(
        &pp,
        &config_map("c", &[("app", "mysql"), ("tier", "cache")], &[]),
    )
    .await
    .unwrap();
    let other: Api<ConfigMap> = Api::namespaced(fake.client(), "other");
    let mut in_other = config_map("d", &[("app", "mysql")], &[]);
    in_other.metadata.namespace = None;
    let d = other.create(&pp, &in_other).await.unwrap();
    assert_eq!(d.metadata.namespace.as_deref(), Some("other"));

    // Server-set fields.
    assert_eq!(
        a.metadata.uid.as_deref(),
        Some("00000000-0000-4000-8000-000000000001")
    );
    assert_eq!(
        d.metadata.uid.as_deref(),
        Some("00000000-0000-4000-8000-000000000004")
    );
    assert_eq!(a.metadata.resource_version.as_deref(), Some("1"));
    assert_eq!(d.metadata.resource_version.as_deref(), Some("4"));
    assert_eq!(a.metadata.generation, Some(1));
    assert!(a.metadata.creation_timestamp.is_some());

    let got = api.get("a").await.unwrap();
    assert_eq!(got, a);
    assert_eq!(got.data.unwrap()["k"], "v");
    assert_eq!(
        code_reason(api.get("missing").await),
        (404, "NotFound".to_string())
    );
    assert_eq!(
        api_error(api.get("missing").await).message,
        "configmaps \"missing\" not found"
    );

    let list = |selector: &'static str| {
        let api = api.clone();
        async move {
            names(
                &api.list(&ListParams::default().labels(selector))
                    .await
                    .unwrap()
                    .items,
            )
        }
    };
    assert_eq!(list("").await, ["a", "b", "c"]);
    assert_eq!(list("app=mysql").await, ["a", "c"]);
    assert_eq!(list("app==mysql,tier!=cache").await, ["a"]);
    assert_eq!(list("app in (web,mysql),tier notin (db)").await, ["b", "c"]);
    assert_eq!(list("tier").await, ["a", "c"]);
    assert_eq!(list("!tier").await, ["b"]);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(names(&by_name.items), ["b"]);
    assert_eq!(by_name.metadata.resource_version.as_deref(), Some("4"));

    // All namespaces, in namespace/name order, and pages.
    let all: Api<ConfigMap> = Api::all(fake.client());
    let everything = all
        .list(&ListParams::default().labels("app=mysql"))
        .await
        .unwrap();
    assert_eq!(names(&everything.items), ["a", "c", "d"]);
    let page = all.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(&page.items), ["a", "b"]);
    assert_eq!(page.metadata.remaining_item_count, Some(2));
    let token = page.metadata.continue_.unwrap();
    let rest = all
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&rest.items), ["c", "d"]);
    assert_eq!(rest.metadata.continue_, None);

    // AlreadyExists and generateName.
    let dup = api_error(api.create(&pp, &config_map("a", &[], &[])).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(dup.message, "configmaps \"a\" already exists");
    let details = dup.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("a", "configmaps")
    );
    let mut generated = config_map("", &[], &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let g1 = api.create(&pp, &generated).await.unwrap().name_any();
    let g2 = api.create(&pp, &generated).await.unwrap().name_any();
    assert!(g1.starts_with("gen-") && g1.len() == 9, "{g1}");
    assert_ne!(g1, g2);

    // A namespace in the body that differs from the path is refused.
    let mut wrong = config_map("e", &[], &[]);
    wrong.metadata.namespace = Some("elsewhere".into());
    assert_eq!(
        code_reason(api.create(&pp, &wrong).await),
        (400, "BadRequest".into())
    );
}

#[tokio::test]
async fn cluster_scoped_services_and_unknown_kinds() {
    let fake = FakeApiServer::new();
    let classes: Api<StorageClass> = Api::all(fake.client());
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "standard"}, "provisioner": "example.com/disk"
    }))
    .unwrap();
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let got = classes.get("standard").await.unwrap();
    assert_eq!(got.provisioner, "example.com/disk");
    assert_eq!(got.metadata.namespace, None);
    assert_eq!(
        fake.get_json("storage.k8s.io/v1/storageclasses", "", "standard")
            .unwrap()["provisioner"],
        "example.com/disk"
    );

    let services: Api<Service> = Api::default_namespaced(fake.client());
    let svc = |name: &str, cluster_ip: Option<&str>| -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"clusterIP": cluster_ip, "ports": [{"port": 3306}]}
        }))
        .unwrap()
    };
    let primary = services
        .create(&PostParams::default(), &svc("primary", None))
        .await
        .unwrap();
    let headless = services
        .create(&PostParams::default(), &svc("headless", Some("None")))
        .await
        .unwrap();
    let spec = primary.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.10"));
    assert_eq!(spec.cluster_ips, Some(vec!["10.96.0.10".to_string()]));
    assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    // An apply that does not mention the IP keeps it.
    let applied = services
        .patch(
            "primary",
            &PatchParams::apply("moco-controller"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "primary"}, "spec": {"ports": [{"port": 3307}]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        applied.spec.unwrap().cluster_ip.as_deref(),
        Some("10.96.0.10")
    );

    let daemonsets: Api<DaemonSet> = Api::default_namespaced(fake.client());
    let status = api_error(daemonsets.list(&ListParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        status.message,
        "the server could not find the requested resource"
    );
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_conflicts() {
    let fake = FakeApiServer::new();
    let api: Api<StatefulSet> = Api::default_namespaced(fake.client());
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "moco-c"},
        "spec": {"replicas": 3, "serviceName": "moco-c", "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "mysqld"}]}}},
        "status": {"replicas": 9}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &sts).await.unwrap();
    // A create does not set the status of a kind with a status subresource.
    assert_eq!(created.status, None);
    fake.set_status(
        "apps/v1/statefulsets",
        "default",
        "moco-c",
        json!({"replicas": 3, "readyReplicas": 3}),
    );

    let mut fresh = api.get("moco-c").await.unwrap();
    let stale = fresh.clone();
    assert_eq!(fresh.metadata.resource_version.as_deref(), Some("2"));
    fresh.spec.as_mut().unwrap().replicas = Some(5);
    fresh.status = None;
    let replaced = api
        .replace("moco-c", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.resource_version.as_deref(), Some("3"));
    assert_eq!(replaced.metadata.generation, Some(2));
    // The main resource keeps the stored status.
    assert_eq!(replaced.status.as_ref().unwrap().ready_replicas, Some(3));

    let conflict = api_error(api.replace("moco-c", &PostParams::default(), &stale).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.message,
        "Operation cannot be fulfilled on statefulsets.apps \"moco-c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(
        fake.get::<StatefulSet>("default", "moco-c")
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(5)
    );

    // A replace that changes nothing writes nothing.
    let again = api
        .replace("moco-c", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version.as_deref(), Some("3"));
    assert_eq!(fake.resource_version(), 3);

    // /status changes only the status, and bumps no generation.
    let mut status_write = again.clone();
    status_write.spec.as_mut().unwrap().replicas = Some(1);
    status_write.status.as_mut().unwrap().ready_replicas = Some(1);
    let after = api
        .replace_status("moco-c", &PostParams::default(), &status_write)
        .await
        .unwrap();
    assert_eq!(after.spec.unwrap().replicas, Some(5));
    assert_eq!(after.status.unwrap().ready_replicas, Some(1));
    assert_eq!(after.metadata.generation, Some(2));
}

#[tokio::test]
async fn server_side_apply_removes_what_the_manager_dropped_and_keeps_status() {
    let fake = FakeApiServer::new();
    let api: Api<MySQLCluster> = Api::default_namespaced(fake.client());
    let ssa = PatchParams::apply("moco-test").force();

    let mut first = mysql_cluster("c");
    first.metadata.labels = Some(BTreeMap::from([
        ("a".into(), "1".into()),
        ("b".into(), "2".into()),
    ]));
    first.spec.mysql_config_map_name = Some("my-conf".into());
    let created = api.patch("c", &ssa, &Patch::Apply(&first)).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.spec.mysql_config_map_name.as_deref(),
        Some("my-conf")
    );
    assert_eq!(created.labels().len(), 2);

    // Status through /status, and a label from another writer.
    api.patch_status(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"currentPrimaryIndex": 2, "syncedReplicas": 2}})),
    )
    .await
    .unwrap();
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"other": "x"}}})),
    )
    .await
    .unwrap();

    let mut second = mysql_cluster("c");
    second.metadata.labels = Some(BTreeMap::from([("a".into(), "1".into())]));
    let applied = api.patch("c", &ssa, &Patch::Apply(&second)).await.unwrap();
    assert_eq!(
        applied.spec.mysql_config_map_name, None,
        "the dropped field is removed"
    );
    assert_eq!(
        applied.labels(),
        &BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("other".to_string(), "x".to_string())
        ])
    );
    assert_eq!(applied.metadata.generation, Some(2));
    let status = applied.status.unwrap();
    assert_eq!(
        (status.current_primary_index, status.synced_replicas),
        (2, 2)
    );

    // The status in an apply to the main resource is ignored.
    let mut with_status = second.clone();
    with_status.status = Some(serde_json::from_value(json!({"currentPrimaryIndex": 0})).unwrap());
    let ignored = api
        .patch("c", &ssa, &Patch::Apply(&with_status))
        .await
        .unwrap();
    assert_eq!(ignored.status.unwrap().current_primary_index, 2);
    assert_eq!(
        ignored.metadata.resource_version,
        applied.metadata.resource_version
    );

    let stored = fake
        .get_json("moco.cybozu.com/v1beta2/mysqlclusters", "default", "c")
        .unwrap();
    assert_eq!(stored["apiVersion"], "moco.cybozu.com/v1beta2");
    assert_eq!(stored["kind"], "MySQLCluster");
    assert!(stored["spec"].get("mysqlConfigMapName").is_none());
}

#[tokio::test]
async fn apply_without_a_field_manager_is_refused() {
    let fake = FakeApiServer::new();
    let api: Api<ConfigMap> = Api::default_namespaced(fake.client());
    let status = api_error(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Apply(config_map("a", &[], &[("k", "v")])),
        )
        .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        status.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert!(fake.list_json("v1/configmaps", None).is_empty());
}

#[tokio::test]
async fn merge_and_json_patches() {
    let fake = FakeApiServer::new();
    let api: Api<ConfigMap> = Api::default_namespaced(fake.client());
    api.create(
        &PostParams::default(),
        &config_map("a", &[("app", "x")], &[("k1", "v1"), ("k2", "v2")]),
    )
    .await
    .unwrap();

    let merged = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k1": null, "k3": "v3"}, "metadata": {"labels": {"app": null, "new": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.data.clone().unwrap(),
        BTreeMap::from([
            ("k2".to_string(), "v2".to_string()),
            ("k3".to_string(), "v3".to_string())
        ])
    );
    assert_eq!(
        merged.labels(),
        &BTreeMap::from([("new".to_string(), "y".to_string())])
    );

    let ops = json!([
        {"op": "test", "path": "/data/k2", "value": "v2"},
        {"op": "replace", "path": "/data/k2", "value": "w2"},
        {"op": "add", "path": "/data/k~1slash", "value": "s"},
        {"op": "remove", "path": "/data/k3"}
    ]);
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(ops).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.data.unwrap(),
        BTreeMap::from([
            ("k/slash".to_string(), "s".to_string()),
            ("k2".to_string(), "w2".to_string())
        ])
    );

    let failing = json!([{"op": "test", "path": "/data/k2", "value": "v2"}, {"op": "remove", "path": "/data/k2"}]);
    let status = api_error(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(failing).unwrap()),
        )
        .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        fake.get::<ConfigMap>("default", "a").unwrap().data.unwrap()["k2"],
        "w2"
    );

    // A merge patch carrying a stale resourceVersion is a failed precondition.
    let stale = json!({"metadata": {"resourceVersion": "1"}, "data": {"k2": "x"}});
    assert_eq!(
        code_reason(
            api.patch("a", &PatchParams::default(), &Patch::Merge(stale))
                .await
        ),
        (409, "Conflict".to_string())
    );
    // Strategic merge patches are merge patches here: lists are replaced.
    let strategic = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"finalizers": ["x/y"]}})),
        )
        .await
        .unwrap();
    assert_eq!(strategic.finalizers(), ["x/y"]);
    assert_eq!(
        code_reason(
            api.patch("missing", &PatchParams::default(), &Patch::Merge(json!({})))
                .await
        ),
        (404, "NotFound".to_string())
    );
}

#[tokio::test]
async fn delete_waits_for_finalizers() {
    let fake = FakeApiServer::new();
    let api: Api<ConfigMap> = Api::default_namespaced(fake.client());
    let mut cm = config_map("held", &[], &[]);
    cm.metadata.finalizers = Some(vec!["moco.cybozu.com/mysqlcluster".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.create(&PostParams::default(), &config_map("plain", &[], &[]))
        .await
        .unwrap();

    let terminating = api
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.finalizers(), ["moco.cybozu.com/mysqlcluster"]);
    let still = api.get("held").await.unwrap();
    assert_eq!(
        still.metadata.deletion_timestamp,
        terminating.metadata.deletion_timestamp
    );
    // No new finalizers while terminating.
    let added = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["moco.cybozu.com/mysqlcluster", "other"]}}),
            ),
        )
        .await;
    assert_eq!(code_reason(added), (422, "Invalid".to_string()));

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        code_reason(api.get("held").await),
        (404, "NotFound".to_string())
    );

    let status = api
        .delete("plain", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .unwrap();
    assert!(status.is_success());
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("plain", "configmaps")
    );
    assert_eq!(details.uid, "00000000-0000-4000-8000-000000000002");
    assert_eq!(
        code_reason(api.delete("plain", &DeleteParams::default()).await),
        (404, "NotFound".to_string())
    );
    assert!(fake.list_json("v1/configmaps", Some("default")).is_empty());
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let clusters: Api<MySQLCluster> = Api::default_namespaced(client.clone());
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let pp = PostParams::default();

    for name in ["doomed", "kept"] {
        let cluster = clusters.create(&pp, &mysql_cluster(name)).await.unwrap();
        let mut sts: StatefulSet =
            serde_json::from_value(json!({"metadata": {"name": format!("moco-{name}")}})).unwrap();
        sts.metadata.owner_references = Some(vec![owner_of(&cluster)]);
        let sts = sets.create(&pp, &sts).await.unwrap();
        // A grandchild owned by the StatefulSet.
        let mut grandchild = config_map(&format!("{name}-grandchild"), &[], &[]);
        grandchild.metadata.owner_references = Some(vec![owner_of(&sts)]);
        maps.create(&pp, &grandchild).await.unwrap();
        // A ConfigMap with two owners: the cluster and a standalone ConfigMap.
        let other_owner = maps
            .create(&pp, &config_map(&format!("{name}-owner"), &[], &[]))
            .await
            .unwrap();
        let mut shared = config_map(&format!("{name}-shared"), &[], &[]);
        shared.metadata.owner_references = Some(vec![owner_of(&cluster), owner_of(&other_owner)]);
        maps.create(&pp, &shared).await.unwrap();
    }

    clusters
        .delete("doomed", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(
        code_reason(sets.get("moco-doomed").await),
        (404, "NotFound".to_string())
    );
    assert_eq!(
        code_reason(maps.get("doomed-grandchild").await),
        (404, "NotFound".to_string())
    );
    let shared = maps.get("doomed-shared").await.unwrap();
    assert_eq!(
        shared
            .owner_references()
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["doomed-owner"]
    );

    clusters
        .delete("kept", &DeleteParams::orphan())
        .await
        .unwrap();
    let orphan = sets.get("moco-kept").await.unwrap();
    assert!(
        orphan.metadata.owner_references.is_none(),
        "{:?}",
        orphan.metadata.owner_references
    );
    assert_eq!(
        maps.get("kept-grandchild")
            .await
            .unwrap()
            .owner_references()
            .len(),
        1
    );
    assert_eq!(
        maps.get("kept-shared")
            .await
            .unwrap()
            .owner_references()
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["kept-owner"]
    );
    assert_eq!(
        fake.list::<StatefulSet>(None)
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["moco-kept"]
    );
}

#[tokio::test]
async fn injected_faults_and_recorded_requests() {
    let fake = FakeApiServer::new();
    let api: Api<StatefulSet> = Api::default_namespaced(fake.client());
    fake.fail_next(
        RequestMatcher::any()
            .method("PATCH")
            .resource("statefulsets")
            .name("moco-c"),
        409,
        "Conflict",
        2,
    );
    fake.fail_next(
        RequestMatcher::any().method("get").resource("statefulsets"),
        500,
        "InternalError",
        1,
    );

    let body = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "moco-c"}, "spec": {"replicas": 3}});
    let ssa = PatchParams::apply("moco-controller").force();
    for _ in 0..2 {
        let status = api_error(api.patch("moco-c", &ssa, &Patch::Apply(&body)).await);
        assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    }
    let created = api
        .patch("moco-c", &ssa, &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(created.spec.unwrap().replicas, Some(3));
    assert_eq!(
        code_reason(api.get("moco-c").await),
        (500, "InternalError".to_string())
    );
    assert_eq!(
        api.get("moco-c")
            .await
            .unwrap()
            .metadata
            .resource_version
            .as_deref(),
        Some("1")
    );

    let requests = fake.take_requests();
    assert_eq!(requests.len(), 5);
    for request in &requests[..3] {
        assert_eq!(request.method, "PATCH");
        assert_eq!(
            request.path,
            "/apis/apps/v1/namespaces/default/statefulsets/moco-c"
        );
        assert_eq!(
            request.query_string(),
            "force=true&fieldManager=moco-controller"
        );
        assert_eq!(request.query_param("fieldManager"), Some("moco-controller"));
        assert_eq!(
            request.content_type.as_deref(),
            Some("application/apply-patch+yaml")
        );
        assert_eq!(request.body.as_ref(), Some(&body));
    }
    assert_eq!(
        requests[3..]
            .iter()
            .map(|r| (r.method.as_str(), r.path.as_str(), r.body.clone()))
            .collect::<Vec<_>>(),
        [
            (
                "GET",
                "/apis/apps/v1/namespaces/default/statefulsets/moco-c",
                None
            ),
            (
                "GET",
                "/apis/apps/v1/namespaces/default/statefulsets/moco-c",
                None
            )
        ]
    );
    assert!(fake.requests().is_empty());

    let lp = ListParams::default().labels("app=x").limit(7);
    api.list(&lp).await.unwrap();
    let list = fake.requests().pop().unwrap();
    assert_eq!(list.path, "/apis/apps/v1/namespaces/default/statefulsets");
    assert_eq!(
        list.query,
        vec![
            ("labelSelector".to_string(), "app=x".to_string()),
            ("limit".to_string(), "7".to_string())
        ]
    );
}

#[tokio::test]
async fn watcher_sees_added_modified_and_deleted() {
    let fake = FakeApiServer::new();
    let api: Api<ConfigMap> = Api::default_namespaced(fake.client());
    fake.insert(serde_json::to_value(config_map("existing", &[("app", "mysql")], &[])).unwrap());

    let config = watcher::Config::default().labels("app=mysql");
    let mut events = watcher(api.clone(), config).boxed();
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    match next(&mut events).await.unwrap() {
        watcher::Event::InitApply(cm) => assert_eq!(cm.name_any(), "existing"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::InitDone
    ));

    let pp = PostParams::default();
    api.create(&pp, &config_map("ignored", &[("app", "web")], &[]))
        .await
        .unwrap();
    api.create(&pp, &config_map("cm", &[("app", "mysql")], &[("k", "1")]))
        .await
        .unwrap();
    match next(&mut events).await.unwrap() {
        watcher::Event::Apply(cm) => {
            assert_eq!(cm.name_any(), "cm");
            assert_eq!(cm.data.unwrap()["k"], "1");
        }
        other => panic!("{other:?}"),
    }
    api.patch(
        "cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    match next(&mut events).await.unwrap() {
        watcher::Event::Apply(cm) => {
            assert_eq!(cm.data.unwrap()["k"], "2");
            assert_eq!(cm.metadata.resource_version.as_deref(), Some("4"));
        }
        other => panic!("{other:?}"),
    }
    api.delete("cm", &DeleteParams::default()).await.unwrap();
    match next(&mut events).await.unwrap() {
        watcher::Event::Delete(cm) => assert_eq!(cm.name_any(), "cm"),
        other => panic!("{other:?}"),
    }
    // An object that stops matching the selector is deleted for this watch.
    fake.modify("v1/configmaps", "default", "existing", |cm| {
        cm["metadata"]["labels"]["app"] = json!("web");
    });
    match next(&mut events).await.unwrap() {
        watcher::Event::Delete(cm) => assert_eq!(cm.name_any(), "existing"),
        other => panic!("{other:?}"),
    }

    // What the watcher asked for: a list (limit 500), then a watch from its resourceVersion.
    let requests = fake.requests();
    let gets: Vec<_> = requests.iter().filter(|r| r.method == "GET").collect();
    assert_eq!(gets[0].query_string(), "labelSelector=app=mysql&limit=500");
    assert_eq!(
        gets[1].query_string(),
        "watch=true&timeoutSeconds=290&labelSelector=app=mysql&allowWatchBookmarks=true&resourceVersion=1"
    );
}

#[tokio::test]
async fn streaming_list_watches_and_history() {
    let fake = FakeApiServer::new();
    let api: Api<ConfigMap> = Api::default_namespaced(fake.client());
    let pp = PostParams::default();
    api.create(&pp, &config_map("one", &[], &[])).await.unwrap();

    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    match next(&mut events).await.unwrap() {
        watcher::Event::InitApply(cm) => assert_eq!(cm.name_any(), "one"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::InitDone
    ));
    api.create(&pp, &config_map("two", &[], &[])).await.unwrap();
    match next(&mut events).await.unwrap() {
        watcher::Event::Apply(cm) => assert_eq!(cm.name_any(), "two"),
        other => panic!("{other:?}"),
    }

    // A watch from an old resourceVersion replays what came after it.
    let mut replay = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match next(&mut replay).await.unwrap() {
        WatchEvent::Added(cm) => assert_eq!(cm.name_any(), "two"),
        other => panic!("{other:?}"),
    }
    // Once the history is compacted, it is too old: 410 Expired, and the stream ends.
    fake.compact_history();
    let mut expired = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match next(&mut expired).await.unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert_eq!(e.message, "too old resource version: 1 (2)");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(10), expired.next())
            .await
            .unwrap()
            .is_none()
    );

    // The watcher recovers from a closed watch: it re-watches from where it was.
    fake.close_watches();
    api.create(&pp, &config_map("three", &[], &[]))
        .await
        .unwrap();
    match next(&mut events).await.unwrap() {
        watcher::Event::Apply(cm) => assert_eq!(cm.name_any(), "three"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn reflector_store_sees_objects() {
    let fake = FakeApiServer::new();
    let api: Api<ConfigMap> = Api::default_namespaced(fake.client());
    let pp = PostParams::default();
    api.create(&pp, &config_map("a", &[], &[("k", "1")]))
        .await
        .unwrap();

    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(api.clone(), watcher::Config::default()));
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    let a = ObjectRef::<ConfigMap>::new("a").within("default");
    assert_eq!(reader.get(&a).unwrap().data.as_ref().unwrap()["k"], "1");

    api.create(&pp, &config_map("b", &[], &[])).await.unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    api.create(&pp, &config_map("c", &[], &[])).await.unwrap();
    let settled = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut names: Vec<String> = reader.state().iter().map(|c| c.name_any()).collect();
            names.sort();
            let k = reader
                .get(&a)
                .and_then(|c| c.data.as_ref().map(|d| d["k"].clone()));
            if names == ["a", "c"] && k.as_deref() == Some("2") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(settled.is_ok(), "store: {:?}", reader.state());
    task.abort();
}

/// What the controller test's reconciler gets: where to report, and the API to write with.
struct Context {
    reconciled: futures::channel::mpsc::UnboundedSender<String>,
    secrets: Api<Secret>,
}

/// Applies a Secret owned by the ConfigMap, as an operator applies what it owns.
async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{}-secret", cm.name_any()), "ownerReferences": [owner_of(cm.as_ref())]},
        "stringData": {"password": "p"}
    });
    ctx.secrets
        .patch(
            &format!("{}-secret", cm.name_any()),
            &PatchParams::apply("moco-controller").force(),
            &Patch::Apply(secret),
        )
        .await?;
    let _ = ctx.reconciled.unbounded_send(cm.name_any());
    Ok(Action::await_change())
}

#[tokio::test]
async fn controller_reconciles_on_changes_of_what_it_owns() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    maps.create(&PostParams::default(), &config_map("owner", &[], &[]))
        .await
        .unwrap();

    let (tx, mut rx) = futures::channel::mpsc::unbounded();
    let context = Arc::new(Context {
        reconciled: tx,
        secrets: secrets.clone(),
    });
    let controller = Controller::new(maps.clone(), watcher::Config::default())
        .owns(secrets.clone(), watcher::Config::default())
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            context,
        );
    let task = tokio::spawn(controller.for_each(|_| async {}));

    assert_eq!(next(&mut rx).await, "owner");
    let secret = fake.get::<Secret>("default", "owner-secret").unwrap();
    assert_eq!(secret.owner_references()[0].name, "owner");
    // Let the reconcile that the Secret's creation triggers pass, so that the next one can
    // only come from the change below.
    // A no-op apply writes nothing, so the controller settles instead of looping.
    let mut extra = 0;
    while tokio::time::timeout(Duration::from_millis(300), rx.next())
        .await
        .is_ok()
    {
        extra += 1;
        assert!(extra < 5, "the controller does not settle");
    }
    // A change to the owned Secret brings the owner back.
    fake.modify("v1/secrets", "default", "owner-secret", |s| {
        s["metadata"]["labels"] = json!({"touched": "yes"});
    });
    assert_eq!(next(&mut rx).await, "owner");
    // The re-apply kept the other writer's label (not the manager's to remove).
    let secret = fake.get::<Secret>("default", "owner-secret").unwrap();
    assert_eq!(secret.labels()["touched"], "yes");
    task.abort();
}
