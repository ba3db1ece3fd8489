//! The operator loop against the fake API server: it takes the leader Lease, reconciles a
//! cluster when it appears and again when it changes (through watches, not polling), wakes on
//! the objects a cluster names, and lets the Lease go on shutdown.

use std::time::{Duration, Instant};

use moco_cluster::manager::ManagerConfig;
use moco_kube::api::Scope;
use moco_kube::metrics::ClusterMetrics;
use moco_operator::operator::{OperatorConfig, run_operator};
use moco_operator::render::RenderSettings;
use moco_testkit::apiserver::FakeApiServer;
use serde_json::{Value, json};

const CLUSTERS: &str = "moco.cybozu.com/v1beta2/mysqlclusters";

fn config() -> OperatorConfig {
    OperatorConfig {
        namespace: "moco-system".into(),
        lease_name: "moco".into(),
        identity: "replica-a".into(),
        settings: RenderSettings::new("moco-system"),
        history_limit: 10,
        pvc_sync_label_keys: vec![],
        pvc_sync_annotation_keys: vec![],
        concurrency: 2,
        manager: ManagerConfig {
            check_interval: Duration::from_secs(3600),
            ..ManagerConfig::default()
        },
        grpc_cert_dir: "/nonexistent/grpc-cert".into(),
        scope: Scope::All,
        partition: Default::default(),
    }
}

async fn eventually(what: &str, mut check: impl FnMut() -> Option<Value>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_reconciles_on_watch_events_and_releases_the_lease() {
    let fake = FakeApiServer::new();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(run_operator(
        fake.client(),
        config(),
        ClusterMetrics::default(),
        stopped,
    ));
    let lease = eventually("the Lease", || {
        fake.get_json("coordination.k8s.io/v1/leases", "moco-system", "moco")
            .filter(|l| l["spec"]["holderIdentity"] == "replica-a")
    })
    .await;
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);

    fake.insert(json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": "ns",
                     "finalizers": ["moco.cybozu.com/mysqlcluster"]},
        "spec": {
            "replicas": 3, "serverIDBase": 7, "mysqlConfigMapName": "opts",
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }));
    // The named ConfigMap is missing: the round fails and says so in the status.
    eventually("ReconcileFailed", || {
        let c = fake.get_json(CLUSTERS, "ns", "db")?;
        let failed = c["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "ReconcileSuccess" && c["status"] == "False");
        failed.then_some(c)
    })
    .await;
    assert!(
        fake.get_json("apps/v1/statefulsets", "ns", "moco-db")
            .is_none()
    );
    // Creating it wakes the cluster through the ConfigMap watch, long before any retry.
    fake.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "opts", "namespace": "ns"}, "data": {"max_connections": "7"}}));
    let sts = eventually("the StatefulSet", || {
        fake.get_json("apps/v1/statefulsets", "ns", "moco-db")
    })
    .await;
    assert_eq!(sts["spec"]["replicas"], 3);

    // An edit of the spec is reconciled.
    fake.modify(CLUSTERS, "ns", "db", |c| c["spec"]["replicas"] = json!(5));
    eventually("5 replicas", || {
        fake.get_json("apps/v1/statefulsets", "ns", "moco-db")
            .filter(|s| s["spec"]["replicas"] == 5)
    })
    .await;
    // A deleted owned object comes back.
    fake.delete_now("v1/services", "ns", "moco-db-primary");
    eventually("the primary Service back", || {
        fake.get_json("v1/services", "ns", "moco-db-primary")
    })
    .await;

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the operator stops on shutdown")
        .unwrap();
    let lease = fake
        .get_json("coordination.k8s.io/v1/leases", "moco-system", "moco")
        .unwrap();
    assert_ne!(
        lease["spec"]["holderIdentity"], "replica-a",
        "the Lease is released: {lease}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_does_not_hold_the_lease_reconciles_nothing() {
    let fake = FakeApiServer::new();
    let far_future = "2999-01-01T00:00:00.000000Z";
    fake.insert(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "moco", "namespace": "moco-system"},
        "spec": {"holderIdentity": "replica-b", "leaseDurationSeconds": 15,
                 "acquireTime": far_future, "renewTime": far_future}
    }));
    fake.insert(json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": "ns"},
        "spec": {
            "replicas": 1, "serverIDBase": 7,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(run_operator(
        fake.client(),
        config(),
        ClusterMetrics::default(),
        stopped,
    ));
    // Give it time to act if it wrongly would: the Lease is read at once.
    eventually("the Lease read", || {
        fake.requests()
            .iter()
            .any(|r| r.path.ends_with("/leases/moco"))
            .then_some(Value::Null)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        fake.get_json("apps/v1/statefulsets", "ns", "moco-db")
            .is_none()
    );
    assert!(
        !fake
            .requests()
            .iter()
            .any(|r| r.path.contains("mysqlclusters")),
        "a follower must not even watch clusters"
    );
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the operator stops on shutdown")
        .unwrap();
}

fn cluster(name: &str, spec_patch: Value) -> Value {
    let mut c = json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "replicas": 1, "serverIDBase": 7,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        }
    });
    if let (Some(spec), Value::Object(patch)) = (c["spec"].as_object_mut(), spec_patch) {
        spec.extend(patch);
    }
    c
}

/// The controller of `fake` over every namespace, with its own managers (their rounds never
/// come: the check interval is an hour), until the returned sender says stop.
fn controller(
    fake: &FakeApiServer,
) -> (
    std::sync::Arc<moco_operator::clustering::Managers>,
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    use std::sync::Arc;

    use moco_api::addresses::PodNetwork;
    use moco_kube::platform::MysqlConnector;
    use moco_operator::clustering::Managers;
    use moco_operator::controller::{Shared, run_controller};
    use moco_operator::reconcile::{Context, existing, wall_clock};

    let managers = Arc::new(Managers::new(
        fake.client(),
        Arc::new(PodNetwork),
        Arc::new(MysqlConnector::default()),
        None,
        ManagerConfig {
            check_interval: Duration::from_secs(3600),
            ..ManagerConfig::default()
        },
        ClusterMetrics::default(),
    ));
    let (existing, stores) = existing::stores();
    let shared = Arc::new(Shared {
        ctx: Context {
            client: fake.client(),
            settings: RenderSettings::new("moco-system"),
            history_limit: 10,
            pvc_sync_label_keys: vec![],
            pvc_sync_annotation_keys: vec![],
            metrics: ClusterMetrics::default(),
            now: Arc::new(wall_clock),
            existing,
        },
        clustering: managers.clone(),
    });
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(run_controller(shared, stores, 2, async move {
        let _ = stopped.wait_for(|v| *v).await;
    }));
    (managers, stop, task)
}

/// Whether `fake` was asked to WATCH `plural` (then the list before it was answered, and a
/// store of that kind is filled).
fn watched(fake: &FakeApiServer, plural: &str) -> bool {
    fake.requests()
        .iter()
        .any(|r| r.path.ends_with(&format!("/{plural}")) && r.query_param("watch") == Some("true"))
}

/// A cluster deleted without reconcile's finalizer (removed by hand) still gets its manager
/// stopped: the controller never reconciles it again, its cluster watch sees the deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_of_a_cluster_deleted_without_its_finalizer_stops() {
    let fake = FakeApiServer::new();
    let (managers, stop, task) = controller(&fake);
    fake.insert(cluster("db", json!({})));
    eventually("the manager started by reconcile", || {
        (managers.clusters() == [("ns".to_owned(), "db".to_owned())]).then_some(Value::Null)
    })
    .await;
    fake.delete_now(CLUSTERS, "ns", "db");
    eventually("the manager stopped", || {
        managers.clusters().is_empty().then_some(Value::Null)
    })
    .await;
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the controller stops")
        .unwrap();
}

/// One WATCH per kind (finding 3 of the real control plane's benchmark): MySQLClusters and
/// ConfigMaps were each watched twice. Secrets keep two: the owned ones and the controller
/// namespace's certificate Secrets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_opens_one_watch_per_kind_but_secrets() {
    let fake = FakeApiServer::new();
    let (_managers, stop, task) = controller(&fake);
    let kinds = [
        "mysqlclusters",
        "configmaps",
        "secrets",
        "statefulsets",
        "services",
        "serviceaccounts",
        "jobs",
        "cronjobs",
        "deployments",
        "roles",
        "rolebindings",
        "poddisruptionbudgets",
        "backuppolicies",
    ];
    eventually("every watch", || {
        kinds
            .iter()
            .all(|k| watched(&fake, k))
            .then_some(Value::Null)
    })
    .await;
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the controller stops")
        .unwrap();
    let mut watches: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for r in fake.requests() {
        if r.query_param("watch") == Some("true") {
            let plural = r.path.rsplit('/').next().unwrap_or_default().to_owned();
            watches.entry(plural).or_default().push(r.path.clone());
        }
    }
    for kind in kinds {
        let paths = &watches[kind];
        let want = if kind == "secrets" { 2 } else { 1 };
        assert_eq!(paths.len(), want, "{kind}: {paths:?}");
    }
    assert_eq!(watches.len(), kinds.len(), "{watches:?}");
}

/// Finding 1 of the real control plane's benchmark, through the controller: a cluster that
/// never had backup objects, an archiver or (below three instances) a budget gets no DELETE;
/// objects that do exist are still deleted when no longer needed, by the reconcile their
/// store's watch event starts if the store lagged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_send_no_delete_for_objects_a_cluster_never_had() {
    let fake = FakeApiServer::new();
    let (_managers, stop, task) = controller(&fake);
    // The stores have listed their kinds once their WATCH is open.
    eventually("the owned watches", || {
        [
            "cronjobs",
            "deployments",
            "roles",
            "rolebindings",
            "poddisruptionbudgets",
        ]
        .iter()
        .all(|k| watched(&fake, k))
        .then_some(Value::Null)
    })
    .await;
    fake.insert(json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "BackupPolicy",
        "metadata": {"name": "daily", "namespace": "ns"},
        "spec": {"schedule": "@daily", "jobConfig": {
            "serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"},
            "workVolume": {"emptyDir": {}}}}
    }));
    fake.insert(cluster("db", json!({})));
    eventually("the cluster reconciled", || {
        let c = fake.get_json(CLUSTERS, "ns", "db")?;
        let ok = c["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "ReconcileSuccess" && c["status"] == "True");
        ok.then_some(c)
    })
    .await;
    let sent: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path.clone())
        .collect();
    assert!(sent.is_empty(), "{sent:?}");

    let backup = [
        "batch/v1/cronjobs",
        "rbac.authorization.k8s.io/v1/roles",
        "rbac.authorization.k8s.io/v1/rolebindings",
    ];
    fake.modify(CLUSTERS, "ns", "db", |c| {
        c["spec"]["backupPolicyName"] = json!("daily");
    });
    eventually("the backup objects", || {
        backup
            .iter()
            .all(|r| fake.get_json(r, "ns", "moco-backup-db").is_some())
            .then_some(Value::Null)
    })
    .await;
    fake.modify(CLUSTERS, "ns", "db", |c| {
        c["spec"]
            .as_object_mut()
            .unwrap()
            .remove("backupPolicyName");
    });
    eventually("the backup objects deleted", || {
        backup
            .iter()
            .all(|r| fake.get_json(r, "ns", "moco-backup-db").is_none())
            .then_some(Value::Null)
    })
    .await;
    let sent: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path.clone())
        .collect();
    assert!(
        sent.iter().all(|p| p.ends_with("/moco-backup-db")),
        "only the backup objects are deleted: {sent:?}"
    );
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the controller stops")
        .unwrap();
}
