//! Reconcile scenarios through the real `kube::Client` against the fake API server: create,
//! update my.cnf, change an image, drift, grow and shrink a volume, backup on and off, restore,
//! offline, stop and start reconciliation and clustering, delete, and API errors.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use moco_api::mysqlcluster::MySQLCluster;
use moco_kube::metrics::{ClusterLabels, ClusterMetrics};
use moco_operator::reconcile::drift::ApplyReason;
use moco_operator::reconcile::{Clustering, Context, Outcome, ReconcileError, reconcile};
use moco_operator::render::RenderSettings;
use moco_testkit::apiserver::{FakeApiServer, RecordedRequest, RequestMatcher};
use serde_json::{Value, json};

const NS: &str = "ns";
const SYSTEM: &str = "moco-system";
const CLUSTERS: &str = "moco.cybozu.com/v1beta2/mysqlclusters";
const STS: &str = "apps/v1/statefulsets";
const SECRETS: &str = "v1/secrets";
const CONFIGMAPS: &str = "v1/configmaps";

struct Env {
    fake: FakeApiServer,
    ctx: Context,
}

fn now() -> Time {
    serde_json::from_value(json!("2026-11-23T12:00:00Z")).unwrap()
}

fn cluster_json(spec_patch: Value) -> Value {
    let mut v = json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": NS,
                     "finalizers": ["moco.cybozu.com/mysqlcluster"]},
        "spec": {
            "replicas": 3,
            "serverIDBase": 100,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    });
    merge(&mut v["spec"], spec_patch);
    v
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

impl Env {
    fn new(spec_patch: Value) -> Self {
        let fake = FakeApiServer::new();
        fake.insert(cluster_json(spec_patch));
        let ctx = Context {
            client: fake.client(),
            settings: RenderSettings::new(SYSTEM),
            history_limit: 10,
            pvc_sync_label_keys: vec![],
            pvc_sync_annotation_keys: vec![],
            metrics: ClusterMetrics::default(),
            now: Arc::new(now),
            existing: Default::default(),
        };
        Env { fake, ctx }
    }

    fn cluster(&self) -> MySQLCluster {
        self.fake.get(NS, "db").expect("the cluster exists")
    }

    async fn round(&self) -> Result<Outcome, ReconcileError> {
        reconcile(&self.cluster(), &self.ctx).await
    }

    async fn ok_round(&self) -> Outcome {
        self.round().await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Edits the cluster's spec as a user would (the generation moves).
    fn edit_spec(&self, patch: Value) {
        self.fake
            .modify(CLUSTERS, NS, "db", |c| merge(&mut c["spec"], patch));
    }

    fn annotate(&self, key: &str, value: Option<&str>) {
        self.fake.modify(CLUSTERS, NS, "db", |c| {
            let annotations = c["metadata"]
                .as_object_mut()
                .unwrap()
                .entry("annotations")
                .or_insert(json!({}));
            match value {
                Some(v) => annotations[key] = json!(v),
                None => {
                    annotations.as_object_mut().unwrap().remove(key);
                }
            }
        });
    }

    fn sts(&self) -> Option<Value> {
        self.fake.get_json(STS, NS, "moco-db")
    }

    fn condition(&self, type_: &str) -> Value {
        let c = self.fake.get_json(CLUSTERS, NS, "db").unwrap();
        c["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_)
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn writes(&self) -> Vec<RecordedRequest> {
        self.fake
            .take_requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .collect()
    }

    /// Makes the StatefulSet look rolled out and ready, as its controller would.
    fn statefulset_ready(&self) {
        let sts = self.sts().unwrap();
        let generation = sts["metadata"]["generation"].clone();
        self.fake.set_status(
            STS,
            NS,
            "moco-db",
            json!({"replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                   "updatedReplicas": 3, "currentRevision": "r1", "updateRevision": "r1",
                   "observedGeneration": generation}),
        );
    }
}

fn labels() -> ClusterLabels {
    ClusterLabels {
        name: "db".into(),
        namespace: NS.into(),
    }
}

fn mycnf_names(env: &Env) -> Vec<String> {
    env.fake
        .list_json(CONFIGMAPS, Some(NS))
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
        .filter(|n| n.starts_with("moco-db."))
        .collect()
}

fn mounted_mycnf(sts: &Value) -> String {
    sts["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "mysql-conf")
        .unwrap()["configMap"]["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn the_first_round_creates_every_object_with_one_field_manager() {
    let env = Env::new(json!({}));
    let outcome = env.ok_round().await;
    assert_eq!(outcome.clustering, Clustering::Run);
    assert_eq!(outcome.statefulset, Some(ApplyReason::Missing));

    // Passwords: created once in the controller namespace, copied to the cluster's namespace.
    let controller: Secret = env.fake.get(SYSTEM, "mysql-ns.db").unwrap();
    let user: Secret = env.fake.get(NS, "moco-db").unwrap();
    let data = controller.data.clone().unwrap();
    assert_eq!(data.len(), 8);
    for v in data.values() {
        assert_eq!(v.0.len(), 32);
        assert!(v.0.iter().all(u8::is_ascii_hexdigit));
    }
    assert_eq!(user.data, controller.data);
    assert_ne!(data["ADMIN_PASSWORD"], data["AGENT_PASSWORD"]);

    for (resource, ns, name) in [
        (SECRETS, NS, "moco-my-cnf-db"),
        (
            "cert-manager.io/v1/certificates",
            SYSTEM,
            "moco-agent-ns.db",
        ),
        ("v1/serviceaccounts", NS, "moco-db"),
        ("rbac.authorization.k8s.io/v1/roles", NS, "moco-db"),
        ("rbac.authorization.k8s.io/v1/rolebindings", NS, "moco-db"),
        ("v1/services", NS, "moco-db"),
        ("v1/services", NS, "moco-db-primary"),
        ("v1/services", NS, "moco-db-replica"),
        (STS, NS, "moco-db"),
        ("policy/v1/poddisruptionbudgets", NS, "moco-db"),
    ] {
        assert!(
            env.fake.get_json(resource, ns, name).is_some(),
            "{resource} {ns}/{name} missing"
        );
    }
    // The Pods may read their own MySQLCluster, nothing else.
    let role = env
        .fake
        .get_json("rbac.authorization.k8s.io/v1/roles", NS, "moco-db")
        .unwrap();
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": ["moco.cybozu.com"], "resources": ["mysqlclusters"],
                "verbs": ["get"], "resourceNames": ["db"]}])
    );
    assert_eq!(mycnf_names(&env).len(), 1);
    assert_eq!(
        mounted_mycnf(&env.sts().unwrap()),
        mycnf_names(&env)[0],
        "the Pods mount the ConfigMap that was created"
    );

    // Every apply is a forced server-side apply by moco-controller.
    let patches: Vec<RecordedRequest> = env
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && !r.path.ends_with("/status"))
        .collect();
    assert!(patches.len() >= 9, "{patches:?}");
    for p in &patches {
        assert_eq!(
            p.content_type.as_deref(),
            Some("application/apply-patch+yaml"),
            "{p:?}"
        );
        assert_eq!(
            p.query_param("fieldManager"),
            Some("moco-controller"),
            "{p:?}"
        );
        assert_eq!(p.query_param("force"), Some("true"), "{p:?}");
    }

    // Status: reconciled, StatefulSet not ready yet (no Pods in the fake).
    assert_eq!(env.condition("ReconcileSuccess")["status"], "True");
    assert_eq!(env.condition("ReconciliationActive")["status"], "True");
    assert_eq!(
        env.condition("StatefulSetReady")["reason"],
        "StatefulSetNotReady"
    );
    let c = env.fake.get_json(CLUSTERS, NS, "db").unwrap();
    assert_eq!(
        c["status"]["reconcileInfo"],
        json!({"generation": 1, "reconcileVersion": 2})
    );
    env.statefulset_ready();
    env.ok_round().await;
    assert_eq!(env.condition("StatefulSetReady")["status"], "True");
}

#[tokio::test]
async fn an_unchanged_cluster_leaves_the_statefulset_and_passwords_alone() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    let before: Secret = env.fake.get(SYSTEM, "mysql-ns.db").unwrap();
    let sts_rv = env.sts().unwrap()["metadata"]["resourceVersion"].clone();
    env.fake.take_requests();
    let outcome = env.ok_round().await;
    assert_eq!(outcome.statefulset, None);
    let writes = env.writes();
    assert!(
        !writes.iter().any(|r| r.path.contains("/statefulsets/")
            || (r.path.contains("/secrets/") && r.method == "POST")),
        "{writes:?}"
    );
    assert_eq!(env.sts().unwrap()["metadata"]["resourceVersion"], sts_rv);
    let after: Secret = env.fake.get(SYSTEM, "mysql-ns.db").unwrap();
    assert_eq!(before.data, after.data);
}

/// Reading writes nothing (issue 31, reconcile shape): a new cluster whose inputs are missing
/// fails its round before any object is written. The controller's password Secret used to be
/// created while the passwords were read, before the missing ConfigMap was noticed.
#[tokio::test]
async fn a_round_that_fails_while_reading_writes_nothing_but_the_status() {
    let env = Env::new(json!({"mysqlConfigMapName": "missing"}));
    env.fake.take_requests();
    let err = env.round().await.unwrap_err();
    assert!(err.to_string().contains("spec.mysqlConfigMapName"), "{err}");
    let writes = env.writes();
    assert!(
        writes.iter().all(|r| r.path.contains("/mysqlclusters/db")),
        "{writes:?}"
    );
    assert!(env.fake.get_json(SECRETS, SYSTEM, "mysql-ns.db").is_none());
}

/// Every check runs before anything is written: a reconciled cluster edited into each kind
/// of invalid state fails its next round with the field named, and the round writes nothing
/// but the cluster's status (no object is half-applied from an input the next step refuses).
#[tokio::test]
async fn each_invalid_input_stops_the_round_before_any_write_naming_its_field() {
    type Edit = fn(&Env);
    let cases: [(&str, Edit, &str); 8] = [
        (
            "flavor",
            |e| e.annotate("moco-rs/flavor", Some("postgres")),
            "metadata.annotations[\"moco-rs/flavor\"]",
        ),
        (
            "tls",
            |e| e.annotate("moco-rs/tls", Some("yes")),
            "metadata.annotations[\"moco-rs/tls\"]",
        ),
        (
            "issuer without tls",
            |e| e.annotate("moco-rs/tls-issuer", Some("ClusterIssuer/x")),
            "metadata.annotations[\"moco-rs/tls-issuer\"]",
        ),
        (
            "slow-log template",
            |e| e.edit_spec(json!({"slowQueryLogConfigTmpl": "{{ .Other }}"})),
            "spec.slowQueryLogConfigTmpl",
        ),
        (
            "init container name",
            |e| {
                e.edit_spec(json!({"podTemplate": {"spec": {
                    "containers": [{"name": "mysqld", "image": "mysql:8.4"}],
                    "initContainers": [{"name": "moco-init", "image": "x"}]}}}))
            },
            "spec.podTemplate.spec.initContainers[0].name",
        ),
        (
            "mysqld memory",
            |e| {
                e.edit_spec(json!({"podTemplate": {"spec": {"containers": [{
                    "name": "mysqld", "image": "mysql:8.4",
                    "resources": {"requests": {"memory": "lots"}}}]}}}))
            },
            "spec.podTemplate.spec.containers[0].resources.requests.memory",
        ),
        (
            "archive without a policy",
            |e| e.annotate("moco-rs/binlog-archive-interval", Some("5s")),
            "needs spec.backupPolicyName",
        ),
        (
            "my.cnf option",
            |e| {
                e.fake
                    .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "opts", "namespace": NS},
                    "data": {"max_connections": "1\nread_only=OFF"}}));
                e.edit_spec(json!({"mysqlConfigMapName": "opts"}));
            },
            "spec.mysqlConfigMapName",
        ),
    ];
    for (what, edit, field) in cases {
        let env = Env::new(json!({}));
        env.ok_round().await;
        edit(&env);
        env.fake.take_requests();
        let err = env.round().await.expect_err(what);
        assert!(err.to_string().contains(field), "{what}: {err}");
        assert_eq!(err.category().as_str(), "input", "{what}");
        let writes = env.writes();
        assert!(
            writes.iter().all(|r| r.path.contains("/mysqlclusters/db")),
            "{what}: {writes:?}"
        );
    }
}

/// mysqld's certificate Secret is read only for a cluster with TLS, after the checks.
#[tokio::test]
async fn the_mysql_certificate_is_read_only_with_tls() {
    let env = Env::new(json!({}));
    env.fake.take_requests();
    env.ok_round().await;
    let reads_certificate = |env: &Env| {
        env.fake
            .take_requests()
            .iter()
            .any(|r| r.method == "GET" && r.path.ends_with("/secrets/moco-mysql-ns.db"))
    };
    assert!(!reads_certificate(&env));
    env.annotate("moco-rs/tls", Some("true"));
    env.ok_round().await;
    assert!(reads_certificate(&env));
}

/// An operator upgraded to a newer reconciler version leaves an unchanged cluster on the one
/// it recorded (no StatefulSet write) and moves it on the next spec edit.
#[tokio::test]
async fn an_upgrade_keeps_the_recorded_reconciler_version_until_a_spec_edit() {
    let mut env = Env::new(json!({}));
    env.ok_round().await;
    let info = |env: &Env| {
        env.fake.get_json(CLUSTERS, NS, "db").unwrap()["status"]["reconcileInfo"].clone()
    };
    assert_eq!(info(&env), json!({"generation": 1, "reconcileVersion": 2}));
    env.ctx.settings.latest_reconciler_version = 3;
    env.fake.take_requests();
    assert_eq!(env.ok_round().await.statefulset, None);
    assert!(
        !env.writes()
            .iter()
            .any(|r| r.path.contains("/statefulsets/")),
        "{:?}",
        env.writes()
    );
    assert_eq!(info(&env), json!({"generation": 1, "reconcileVersion": 2}));
    env.edit_spec(json!({"podTemplate": {"metadata": {"labels": {"edited": "yes"}}}}));
    assert_eq!(
        env.ok_round().await.statefulset,
        Some(ApplyReason::Rendering)
    );
    assert_eq!(info(&env)["reconcileVersion"], 3);
    assert_eq!(
        env.sts().unwrap()["spec"]["template"]["metadata"]["annotations"]["moco-rs/reconciler-version"],
        "3"
    );
}

#[tokio::test]
async fn a_new_mycnf_rolls_the_statefulset_and_old_config_maps_are_pruned() {
    let mut env = Env::new(json!({"mysqlConfigMapName": "opts"}));
    env.ctx.history_limit = 2;
    let opts = |value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "opts", "namespace": NS},
               "data": {"max_connections": value}})
    };
    env.fake.insert(opts("100"));
    env.ok_round().await;
    let first = mycnf_names(&env);
    for (i, value) in ["200", "300"].iter().enumerate() {
        env.fake.insert(opts(value));
        let outcome = env.ok_round().await;
        assert_eq!(
            outcome.statefulset,
            Some(ApplyReason::Rendering),
            "round {i}"
        );
    }
    let names = mycnf_names(&env);
    let current = mounted_mycnf(&env.sts().unwrap());
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&current));
    assert!(
        !names.contains(&first[0]),
        "the oldest was pruned: {names:?}"
    );
    let text = env.fake.get_json(CONFIGMAPS, NS, &current).unwrap()["data"]["my.cnf"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("max_connections = 300"), "{text}");

    // A missing ConfigMap fails the round naming the field, and the status says so.
    env.fake.delete_now(CONFIGMAPS, NS, "opts");
    let err = env.round().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.mysqlConfigMapName: ConfigMap ns/opts not found"),
        "{err}"
    );
    assert_eq!(err.category().as_str(), "input");
    assert_eq!(
        env.condition("ReconcileSuccess")["reason"],
        "ReconcileFailed"
    );
}

#[tokio::test]
async fn a_new_agent_image_is_rolled_out_and_drift_is_repaired() {
    let mut env = Env::new(json!({}));
    env.ok_round().await;
    env.ctx.settings.images.agent = "agent:new".into();
    assert_eq!(
        env.ok_round().await.statefulset,
        Some(ApplyReason::Rendering)
    );
    let sts = env.sts().unwrap();
    let agent = sts["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "agent")
        .unwrap()
        .clone();
    assert_eq!(agent["image"], "agent:new");

    // Someone scales the StatefulSet by hand: the next round puts it back.
    env.fake
        .modify(STS, NS, "moco-db", |s| s["spec"]["replicas"] = json!(1));
    assert_eq!(
        env.ok_round().await.statefulset,
        Some(ApplyReason::Drift("/spec/replicas".into()))
    );
    assert_eq!(env.sts().unwrap()["spec"]["replicas"], 3);

    // The security-context flag: a field the operator stops setting is removed.
    env.ctx.settings.default_security_context = false;
    assert_eq!(
        env.ok_round().await.statefulset,
        Some(ApplyReason::Rendering)
    );
    let sts = env.sts().unwrap();
    assert!(
        sts["spec"]["template"]["spec"]["securityContext"]
            .get("fsGroup")
            .is_none(),
        "{}",
        sts["spec"]["template"]["spec"]["securityContext"]
    );
}

#[tokio::test]
async fn the_force_rolling_update_annotation_reaches_the_statefulset() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    env.annotate("moco.cybozu.com/force-rolling-update", Some("true"));
    assert_eq!(
        env.ok_round().await.statefulset,
        Some(ApplyReason::Rendering)
    );
    assert_eq!(
        env.sts().unwrap()["metadata"]["annotations"]["moco.cybozu.com/force-rolling-update"],
        "true"
    );
    env.annotate("moco.cybozu.com/force-rolling-update", None);
    assert_eq!(
        env.ok_round().await.statefulset,
        Some(ApplyReason::Rendering)
    );
    assert!(
        env.sts().unwrap()["metadata"]["annotations"]
            .get("moco.cybozu.com/force-rolling-update")
            .is_none()
    );
}

fn insert_pvcs(env: &Env, size: &str) {
    for i in 0..3 {
        env.fake.insert(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": format!("mysql-data-moco-db-{i}"), "namespace": NS,
                         "labels": {"app.kubernetes.io/name": "mysql",
                                    "app.kubernetes.io/instance": "db",
                                    "app.kubernetes.io/created-by": "moco"}},
            "spec": {"storageClassName": "fast",
                     "resources": {"requests": {"storage": size}}}
        }));
    }
}

fn pvc_sizes(env: &Env) -> Vec<String> {
    (0..3)
        .map(|i| {
            env.fake
                .get_json(
                    "v1/persistentvolumeclaims",
                    NS,
                    &format!("mysql-data-moco-db-{i}"),
                )
                .unwrap()["spec"]["resources"]["requests"]["storage"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn template_size(env: &Env) -> Value {
    env.sts().unwrap()["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]
        ["storage"]
        .clone()
}

#[tokio::test]
async fn growing_a_volume_grows_the_pvcs_and_recreates_the_statefulset() {
    let env = Env::new(json!({}));
    env.fake.insert(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast"}, "provisioner": "x", "allowVolumeExpansion": true
    }));
    env.ok_round().await;
    insert_pvcs(&env, "1Gi");
    env.statefulset_ready();
    let old_uid = env.sts().unwrap()["metadata"]["uid"].clone();
    env.edit_spec(json!({"volumeClaimTemplates": [{
        "metadata": {"name": "mysql-data"},
        "spec": {"resources": {"requests": {"storage": "2Gi"}}}
    }]}));
    env.fake.take_requests();
    env.ok_round().await;
    assert_eq!(pvc_sizes(&env), ["2Gi", "2Gi", "2Gi"]);
    let sts = env.sts().unwrap();
    assert_ne!(sts["metadata"]["uid"], old_uid, "re-created");
    assert_eq!(template_size(&env), "2Gi");
    let delete = env
        .writes()
        .into_iter()
        .find(|r| r.method == "DELETE" && r.path.ends_with("/statefulsets/moco-db"))
        .expect("the StatefulSet was deleted");
    let orphan = delete.query_param("propagationPolicy") == Some("Orphan")
        || delete
            .body
            .as_ref()
            .is_some_and(|b| b["propagationPolicy"] == "Orphan");
    assert!(orphan, "Pods must be orphaned: {delete:?}");
    let m = &env.ctx.metrics;
    assert_eq!(m.volume_resized.get_or_create(&labels()).get(), 1);
    assert_eq!(m.statefulset_recreate.get_or_create(&labels()).get(), 1);
}

/// Regression (issue 46): a StatefulSet deleted for re-creation that the garbage collector has
/// not removed yet was polled for inside the round, for up to 5 s, and the round failed when
/// it was still there. The round now ends at once; the rounds its deletion brings create it.
#[tokio::test]
async fn a_statefulset_still_going_after_its_deletion_is_not_waited_for_in_the_round() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    insert_pvcs(&env, "1Gi");
    env.statefulset_ready();
    // What the garbage collector's `orphan` finalizer does: the deletion waits for it.
    env.fake.modify(STS, NS, "moco-db", |sts| {
        sts["metadata"]["finalizers"] = json!(["orphan"]);
    });
    // The Pod the deletion orphans (the garbage collector takes its controller away).
    env.fake.insert(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "moco-db-0", "namespace": NS, "labels": {
            "app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": "db",
            "app.kubernetes.io/created-by": "moco"
        }},
        "spec": {"containers": [{"name": "mysqld", "image": "mysql"}]}
    }));
    let old_uid = env.sts().unwrap()["metadata"]["uid"].clone();
    env.edit_spec(json!({"volumeClaimTemplates": [{
        "metadata": {"name": "mysql-data", "labels": {"tier": "gold"}},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}}
    }]}));
    env.fake.take_requests();
    let outcome = env.ok_round().await;
    assert_eq!(outcome.statefulset, None, "nothing applied this round");
    let requests = env.fake.take_requests();
    let on_sts = |method: &str| {
        requests
            .iter()
            .filter(|r| r.method == method && r.path.ends_with("/statefulsets/moco-db"))
            .count()
    };
    assert_eq!(on_sts("DELETE"), 1);
    // The round's read and one look after the deletion: no polling (the old code asked every
    // 0.5 s for 5 s, then failed the round).
    assert_eq!(on_sts("GET"), 3, "{requests:#?}");
    let going = env.sts().expect("still there, terminating");
    assert!(going["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(going["metadata"]["uid"], old_uid);

    // A round while it goes (its deletion's MODIFIED event) neither deletes nor applies it.
    env.ok_round().await;
    let requests = env.fake.take_requests();
    assert!(
        !requests
            .iter()
            .any(|r| r.method != "GET" && r.path.contains("/statefulsets")),
        "{requests:#?}"
    );

    // Gone: the next round creates it, counted as one re-creation.
    env.fake.modify(STS, NS, "moco-db", |sts| {
        sts["metadata"]["finalizers"] = json!([]);
    });
    assert!(env.sts().is_none());
    let outcome = env.ok_round().await;
    assert!(outcome.statefulset.is_some());
    let sts = env.sts().unwrap();
    assert_ne!(sts["metadata"]["uid"], old_uid, "re-created");
    let m = &env.ctx.metrics;
    assert_eq!(m.statefulset_recreate.get_or_create(&labels()).get(), 1);
    assert_eq!(
        m.statefulset_recreate_errors.get_or_create(&labels()).get(),
        0
    );
}

#[tokio::test]
async fn shrinking_a_volume_changes_the_template_but_never_a_pvc() {
    let env = Env::new(json!({}));
    env.fake.insert(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast"}, "provisioner": "x", "allowVolumeExpansion": true
    }));
    env.ok_round().await;
    insert_pvcs(&env, "1Gi");
    env.statefulset_ready();
    env.edit_spec(json!({"volumeClaimTemplates": [{
        "metadata": {"name": "mysql-data"},
        "spec": {"resources": {"requests": {"storage": "512Mi"}}}
    }]}));
    env.ok_round().await;
    assert_eq!(pvc_sizes(&env), ["1Gi", "1Gi", "1Gi"]);
    assert_eq!(template_size(&env), "512Mi");

    // Growing to less than the PVCs already have is refused with the volume error.
    env.statefulset_ready();
    insert_pvcs(&env, "4Gi");
    env.edit_spec(json!({"volumeClaimTemplates": [{
        "metadata": {"name": "mysql-data"},
        "spec": {"resources": {"requests": {"storage": "2Gi"}}}
    }]}));
    let err = env.round().await.unwrap_err();
    assert!(
        err.to_string().contains("cannot reduce volume size"),
        "{err}"
    );
    assert_eq!(
        env.ctx
            .metrics
            .volume_resized_errors
            .get_or_create(&labels())
            .get(),
        1
    );
}

/// BackupPolicy `daily`, the smallest valid one.
fn daily_policy() -> serde_json::Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "BackupPolicy",
        "metadata": {"name": "daily", "namespace": NS},
        "spec": {"schedule": "@daily", "jobConfig": {
            "serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"},
            "workVolume": {"emptyDir": {}}}}
    })
}

#[tokio::test]
async fn backup_objects_follow_the_policy_name() {
    let env = Env::new(json!({}));
    env.fake.insert(daily_policy());
    env.ok_round().await;
    let names = [
        "batch/v1/cronjobs",
        "rbac.authorization.k8s.io/v1/roles",
        "rbac.authorization.k8s.io/v1/rolebindings",
    ];
    for r in names {
        assert!(env.fake.get_json(r, NS, "moco-backup-db").is_none());
    }
    env.edit_spec(json!({"backupPolicyName": "daily"}));
    env.ok_round().await;
    for r in names {
        assert!(env.fake.get_json(r, NS, "moco-backup-db").is_some(), "{r}");
    }
    // While a backup runs, no Pod may be evicted.
    env.fake.set_status(
        "batch/v1/cronjobs",
        NS,
        "moco-backup-db",
        json!({"active": [{"name": "moco-backup-db-1", "namespace": NS}]}),
    );
    env.ok_round().await;
    let pdb = env
        .fake
        .get_json("policy/v1/poddisruptionbudgets", NS, "moco-db")
        .unwrap();
    assert_eq!(pdb["spec"]["maxUnavailable"], 0);
    env.edit_spec(json!({"backupPolicyName": null}));
    env.ok_round().await;
    for r in names {
        assert!(env.fake.get_json(r, NS, "moco-backup-db").is_none(), "{r}");
    }
    // A policy that does not exist fails the round, naming the field.
    env.edit_spec(json!({"backupPolicyName": "weekly"}));
    let err = env.round().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.backupPolicyName: BackupPolicy ns/weekly not found"),
        "{err}"
    );
}

#[tokio::test]
async fn the_binlog_archiver_follows_its_annotation() {
    let env = Env::new(json!({"backupPolicyName": "daily"}));
    env.fake.insert(daily_policy());
    let deployment = || {
        env.fake
            .get_json("apps/v1/deployments", NS, "moco-archive-db")
    };
    env.annotate("moco-rs/flavor", Some("mariadb"));
    env.ok_round().await;
    assert!(deployment().is_none(), "off without the annotation");
    env.annotate("moco-rs/binlog-archive-interval", Some("3s"));
    env.ok_round().await;
    let d = deployment().expect("the archiver's Deployment");
    assert_eq!(d["metadata"]["ownerReferences"][0]["name"], "db");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["args"][1],
        "--every=3s"
    );
    // A wrong interval fails the round, naming the annotation; the Deployment stays.
    env.annotate("moco-rs/binlog-archive-interval", Some("0s"));
    let err = env.round().await.unwrap_err().to_string();
    assert!(
        err.contains("metadata.annotations[\"moco-rs/binlog-archive-interval\"]"),
        "{err}"
    );
    assert!(deployment().is_some());
    env.annotate("moco-rs/binlog-archive-interval", None);
    env.ok_round().await;
    assert!(deployment().is_none(), "removed with the annotation");
}

/// The requests of `requests` that are DELETEs, as `resource/name`.
fn deletes(requests: &[RecordedRequest]) -> Vec<String> {
    let mut out: Vec<String> = requests
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| {
            let mut parts = r.path.rsplit('/');
            let name = parts.next().unwrap_or_default();
            let resource = parts.next().unwrap_or_default();
            format!("{resource}/{name}")
        })
        .collect();
    out.sort();
    out
}

/// Tells a store of the controller that its watch has listed its kind (and found nothing).
fn listed<K: kube::Resource<DynamicType = ()> + Clone + 'static>(
    writer: &mut kube::runtime::reflector::store::Writer<kube::core::PartialObjectMeta<K>>,
) {
    use kube::runtime::watcher::Event;
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitDone);
}

/// Regression (docs/benchmarks.md, the operator on a real control plane, finding 1): every
/// round of a cluster without `backupPolicyName` sent DELETEs the API server answered 404, for
/// the backup CronJob, Role and RoleBinding and the archiver's Deployment it never had (and
/// the budget of a cluster below three instances). Once the controller's stores have listed
/// their kinds, a round deletes only what they hold; a store that lags delays a deletion to
/// the round its watch event starts.
#[tokio::test]
async fn a_round_deletes_only_what_the_controllers_stores_hold() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::core::PartialObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use moco_operator::reconcile::existing;

    fn seen<K: kube::Resource<DynamicType = ()> + Clone + 'static>(
        env: &Env,
        writer: &mut Writer<PartialObjectMeta<K>>,
        resource: &str,
        name: &str,
    ) {
        let object = env.fake.get_json(resource, NS, name).expect(name);
        let meta: PartialObjectMeta<K> = serde_json::from_value(object).unwrap();
        writer.apply_watcher_event(&Event::Apply(meta));
    }

    let mut env = Env::new(json!({"replicas": 1}));
    env.fake.insert(daily_policy());
    let (known, mut stores) = existing::stores();
    env.ctx.existing = known;
    env.fake.take_requests();
    // Not listed yet: the stores know nothing, every delete is sent (and answered 404).
    env.ok_round().await;
    assert_eq!(
        deletes(&env.fake.take_requests()),
        [
            "cronjobs/moco-backup-db",
            "deployments/moco-archive-db",
            "poddisruptionbudgets/moco-db",
            "rolebindings/moco-backup-db",
            "roles/moco-backup-db",
        ]
    );
    listed::<CronJob>(&mut stores.cronjobs);
    listed::<Role>(&mut stores.roles);
    listed::<RoleBinding>(&mut stores.role_bindings);
    listed::<Deployment>(&mut stores.deployments);
    listed::<PodDisruptionBudget>(&mut stores.pdbs);
    env.ok_round().await;
    assert_eq!(deletes(&env.fake.take_requests()), Vec::<String>::new());

    let backup = [
        "batch/v1/cronjobs",
        "rbac.authorization.k8s.io/v1/roles",
        "rbac.authorization.k8s.io/v1/rolebindings",
    ];
    env.edit_spec(json!({"backupPolicyName": "daily"}));
    env.ok_round().await;
    env.edit_spec(json!({"backupPolicyName": null}));
    // The stores have not seen the backup objects yet: they stay, for now.
    env.ok_round().await;
    assert_eq!(deletes(&env.fake.take_requests()), Vec::<String>::new());
    for r in backup {
        assert!(env.fake.get_json(r, NS, "moco-backup-db").is_some(), "{r}");
    }
    // Their events arrive (and would start this round): they go, and nothing else is deleted.
    seen::<CronJob>(&env, &mut stores.cronjobs, backup[0], "moco-backup-db");
    seen::<Role>(&env, &mut stores.roles, backup[1], "moco-backup-db");
    seen::<RoleBinding>(&env, &mut stores.role_bindings, backup[2], "moco-backup-db");
    env.ok_round().await;
    assert_eq!(
        deletes(&env.fake.take_requests()),
        [
            "cronjobs/moco-backup-db",
            "rolebindings/moco-backup-db",
            "roles/moco-backup-db",
        ]
    );
    for r in backup {
        assert!(env.fake.get_json(r, NS, "moco-backup-db").is_none(), "{r}");
    }
}

/// A cluster restored from `old/src` at a point in time, its Jobs' settings minimal.
fn restore_spec() -> serde_json::Value {
    json!({"restore": {
        "sourceName": "src", "sourceNamespace": "old",
        "restorePoint": "2026-05-01T12:34:56Z",
        "jobConfig": {"serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"},
                      "workVolume": {"emptyDir": {}}}
    }})
}

/// What the restore program leaves: `restoredTime` recorded, its Job with `status`.
fn restore_recorded(env: &Env, status: serde_json::Value) {
    env.fake
        .set_status("batch/v1/jobs", NS, "moco-restore-db", status);
    env.fake.modify(CLUSTERS, NS, "db", |c| {
        c["status"]["restoredTime"] = json!("2026-11-23T11:00:00Z");
    });
}

#[tokio::test]
async fn the_restore_job_lives_until_the_restore_is_recorded() {
    let env = Env::new(restore_spec());
    env.ok_round().await;
    let job = env
        .fake
        .get_json("batch/v1/jobs", NS, "moco-restore-db")
        .unwrap();
    let uid = job["metadata"]["uid"].clone();
    env.ok_round().await;
    assert_eq!(
        env.fake
            .get_json("batch/v1/jobs", NS, "moco-restore-db")
            .unwrap()["metadata"]["uid"],
        uid,
        "created once"
    );
    // A failed Job is left for inspection, not deleted or re-created.
    env.fake
        .set_status("batch/v1/jobs", NS, "moco-restore-db", json!({"failed": 1}));
    env.ok_round().await;
    assert_eq!(
        env.fake
            .get_json("batch/v1/jobs", NS, "moco-restore-db")
            .unwrap()["metadata"]["uid"],
        uid,
        "a failed restore Job stays"
    );
    // The restore program records the time and its Job succeeds: the Job goes.
    restore_recorded(&env, json!({"succeeded": 1}));
    env.ok_round().await;
    assert!(
        env.fake
            .get_json("batch/v1/jobs", NS, "moco-restore-db")
            .is_none()
    );
}

/// The restore's Role and RoleBinding belong to its Job, so they go when the Job goes, and are
/// deleted once the restore is recorded even when the Job is kept (issue 29: they were owned by
/// the cluster and outlived the restore).
#[tokio::test]
async fn the_restore_rbac_goes_with_its_job_and_once_the_restore_is_recorded() {
    const JOBS: &str = "batch/v1/jobs";
    const ROLES: &str = "rbac.authorization.k8s.io/v1/roles";
    const BINDINGS: &str = "rbac.authorization.k8s.io/v1/rolebindings";
    let env = Env::new(restore_spec());
    env.annotate("moco-rs/flavor", Some("mariadb"));
    let owners = |resource: &str| {
        env.fake
            .get_json(resource, NS, "moco-restore-db")
            .map(|o| o["metadata"]["ownerReferences"].clone())
    };
    env.ok_round().await;
    let job = env.fake.get_json(JOBS, NS, "moco-restore-db").unwrap();
    let by_job = json!([{"apiVersion": "batch/v1", "kind": "Job",
                         "name": "moco-restore-db", "uid": job["metadata"]["uid"]}]);
    for resource in [ROLES, BINDINGS] {
        assert_eq!(owners(resource), Some(by_job.clone()), "{resource}");
    }
    // The Job is deleted (by hand, or a TTL): garbage collection takes its RBAC with it; the
    // next round creates both again, the RBAC owned by the new Job.
    assert!(env.fake.delete(JOBS, NS, "moco-restore-db"));
    for resource in [ROLES, BINDINGS] {
        assert_eq!(owners(resource), None, "{resource} collected with the Job");
    }
    env.ok_round().await;
    let job = env.fake.get_json(JOBS, NS, "moco-restore-db").unwrap();
    for resource in [ROLES, BINDINGS] {
        assert_eq!(
            owners(resource).unwrap()[0]["uid"],
            job["metadata"]["uid"],
            "{resource}"
        );
    }
    // The restore is recorded but its Job failed afterwards: the Job stays for inspection,
    // its RBAC does not.
    restore_recorded(&env, json!({"failed": 1}));
    env.ok_round().await;
    assert!(env.fake.get_json(JOBS, NS, "moco-restore-db").is_some());
    for resource in [ROLES, BINDINGS] {
        assert_eq!(owners(resource), None, "{resource} deleted once recorded");
    }
}

/// A restored cluster lives on with `spec.restore`: once its restore Job and RBAC are gone and
/// the controller's stores have listed them, its rounds no longer ask for the Job or delete the
/// RBAC (each was a GET or a DELETE answered 404, every round, for the life of the cluster).
#[tokio::test]
async fn a_restored_cluster_stops_asking_for_its_restore_job_once_the_stores_rule_it_out() {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use moco_operator::reconcile::existing;

    let restore_requests = |env: &Env| -> Vec<String> {
        env.fake
            .take_requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/moco-restore-db"))
            .map(|r| format!("{} {}", r.method, r.path.rsplit('/').nth(1).unwrap_or("")))
            .collect()
    };
    let mut env = Env::new(restore_spec());
    env.annotate("moco-rs/flavor", Some("mariadb"));
    let (known, mut stores) = existing::stores();
    env.ctx.existing = known;
    env.ok_round().await;
    restore_recorded(&env, json!({"succeeded": 1}));
    env.fake.take_requests();
    // The stores have not listed yet: the round looks and deletes, as before.
    env.ok_round().await;
    assert_eq!(
        restore_requests(&env),
        [
            "GET jobs",
            "DELETE jobs",
            "DELETE rolebindings",
            "DELETE roles"
        ]
    );
    env.ok_round().await;
    assert_eq!(
        restore_requests(&env),
        ["GET jobs", "DELETE rolebindings", "DELETE roles"],
        "unlisted stores rule nothing out"
    );
    // Listed, without the restore's objects: nothing more about them.
    listed::<Job>(&mut stores.jobs);
    listed::<Role>(&mut stores.roles);
    listed::<RoleBinding>(&mut stores.role_bindings);
    env.ok_round().await;
    assert_eq!(restore_requests(&env), Vec::<String>::new());
}

#[tokio::test]
async fn offline_scales_to_zero_and_drops_the_budget() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    env.edit_spec(json!({"offline": true}));
    env.ok_round().await;
    assert_eq!(env.sts().unwrap()["spec"]["replicas"], 0);
    assert!(
        env.fake
            .get_json("policy/v1/poddisruptionbudgets", NS, "moco-db")
            .is_none()
    );
}

/// `spec.replicas` 5 → 3: the StatefulSet keeps its 5 Pods (the leaving ones are its highest
/// ordinals) until the status the clustering loop writes says they may go (members at the
/// new size, the primary not leaving); the budget follows the new size at once.
#[tokio::test]
async fn a_shrink_keeps_the_statefulset_until_the_leaving_pods_may_go() {
    let env = Env::new(json!({"replicas": 5}));
    env.ok_round().await;
    assert_eq!(env.sts().unwrap()["spec"]["replicas"], 5);
    env.edit_spec(json!({"replicas": 3}));
    let clustering = |members: u32, primary: u32| {
        let mut status = env.fake.get_json(CLUSTERS, NS, "db").unwrap()["status"].clone();
        status["semiSyncMembers"] = json!(members);
        status["currentPrimaryIndex"] = json!(primary);
        env.fake.set_status(CLUSTERS, NS, "db", status);
    };
    for (members, primary, want, why) in [
        (None, None, 5, "nothing recorded since the change"),
        (Some(5), Some(0), 5, "the leaving instances still count"),
        (Some(3), Some(4), 5, "the primary is leaving"),
        (Some(3), Some(1), 3, "released"),
    ] {
        if let (Some(m), Some(p)) = (members, primary) {
            clustering(m, p);
        }
        env.ok_round().await;
        assert_eq!(env.sts().unwrap()["spec"]["replicas"], want, "{why}");
        let pdb = env
            .fake
            .get_json("policy/v1/poddisruptionbudgets", NS, "moco-db")
            .unwrap();
        assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{why}");
    }
}

#[tokio::test]
async fn stopped_reconciliation_touches_nothing_but_its_condition() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    env.annotate("moco.cybozu.com/reconciliation-stopped", Some("true"));
    env.edit_spec(json!({"replicas": 5}));
    env.fake.take_requests();
    let outcome = env.ok_round().await;
    assert_eq!(outcome.clustering, Clustering::Run);
    let writes = env.writes();
    assert!(
        writes
            .iter()
            .all(|r| r.path.ends_with("/mysqlclusters/db/status")),
        "{writes:?}"
    );
    assert_eq!(env.sts().unwrap()["spec"]["replicas"], 3);
    assert_eq!(env.condition("ReconciliationActive")["status"], "False");
    let stopped = env
        .ctx
        .metrics
        .reconciliation_stopped
        .get_or_create(&labels())
        .get();
    assert_eq!(stopped, 1);
    env.annotate("moco.cybozu.com/reconciliation-stopped", None);
    env.ok_round().await;
    assert_eq!(env.sts().unwrap()["spec"]["replicas"], 5);
    assert_eq!(env.condition("ReconciliationActive")["status"], "True");
}

#[tokio::test]
async fn stopped_clustering_pauses_and_makes_availability_unknown() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    env.fake.modify(CLUSTERS, NS, "db", |c| {
        c["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({
            "type": "Available", "status": "True", "reason": "Healthy", "message": "ok",
            "lastTransitionTime": "2026-11-23T10:00:00Z"}));
    });
    env.annotate("moco.cybozu.com/clustering-stopped", Some("true"));
    assert_eq!(env.ok_round().await.clustering, Clustering::Pause);
    assert_eq!(env.condition("ClusteringActive")["status"], "False");
    assert_eq!(env.condition("Available")["status"], "Unknown");
    assert_eq!(env.condition("Available")["reason"], "Healthy");
    assert_eq!(
        env.ctx
            .metrics
            .clustering_stopped
            .get_or_create(&labels())
            .get(),
        1
    );
    env.annotate("moco.cybozu.com/clustering-stopped", None);
    assert_eq!(env.ok_round().await.clustering, Clustering::Run);
    assert_eq!(env.condition("ClusteringActive")["status"], "True");
}

#[tokio::test]
async fn deletion_removes_controller_namespace_objects_then_the_finalizer() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    assert!(env.fake.delete(CLUSTERS, NS, "db"));
    let terminating = env.cluster();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let outcome = reconcile(&terminating, &env.ctx).await.unwrap();
    assert_eq!(outcome.clustering, Clustering::Stop);
    assert!(env.fake.get_json(SECRETS, SYSTEM, "mysql-ns.db").is_none());
    assert!(
        env.fake
            .get_json(
                "cert-manager.io/v1/certificates",
                SYSTEM,
                "moco-agent-ns.db"
            )
            .is_none()
    );
    // The finalizer is gone, so is the cluster, and what it owned was collected.
    assert!(env.fake.get_json(CLUSTERS, NS, "db").is_none());
    assert!(env.sts().is_none());
    assert!(env.fake.get_json(SECRETS, NS, "moco-db").is_none());
}

#[tokio::test]
async fn a_cluster_without_the_finalizer_gets_it() {
    let env = Env::new(json!({}));
    env.fake.modify(CLUSTERS, NS, "db", |c| {
        c["metadata"].as_object_mut().unwrap().remove("finalizers");
    });
    env.ok_round().await;
    assert_eq!(
        env.cluster().metadata.finalizers,
        Some(vec!["moco.cybozu.com/mysqlcluster".to_owned()])
    );
}

#[tokio::test]
async fn conflicts_are_retried_and_lasting_errors_fail_the_round_with_their_step() {
    let env = Env::new(json!({}));
    env.fake.fail_next(
        RequestMatcher::any()
            .method("PATCH")
            .resource("statefulsets"),
        409,
        "Conflict",
        2,
    );
    env.ok_round().await;
    let sts_patches = env
        .fake
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/statefulsets/moco-db"))
        .count();
    assert_eq!(sts_patches, 3);

    env.fake.fail_next(
        RequestMatcher::any().method("PATCH").resource("services"),
        500,
        "InternalError",
        10,
    );
    let err = env.round().await.unwrap_err();
    assert_eq!(err.step().as_str(), "services");
    assert_eq!(err.category().as_str(), "api");
    assert_eq!(env.condition("ReconcileSuccess")["status"], "False");
}

#[tokio::test]
async fn a_tampered_password_secret_is_refused_not_replaced() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    env.fake.modify(SECRETS, SYSTEM, "mysql-ns.db", |s| {
        s["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("moco.cybozu.com/secret-version");
    });
    let err = env.round().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("Secret moco-system/mysql-ns.db: annotation moco.cybozu.com/secret-version"),
        "{err}"
    );
}

/// A StatefulSet whose claim templates name the cluster as owner under another API version (a
/// cluster created through v1beta1): claim templates are immutable, so that version is kept
/// and the StatefulSet settles instead of being rewritten every round.
#[tokio::test]
async fn claim_template_owner_versions_of_older_clusters_are_kept() {
    let env = Env::new(json!({}));
    env.ok_round().await;
    env.fake.modify(STS, NS, "moco-db", |s| {
        s["spec"]["volumeClaimTemplates"][0]["metadata"]["ownerReferences"][0]["apiVersion"] =
            json!("moco.cybozu.com/v1beta1");
        s["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("moco-rs/rendered-hash");
    });
    assert_eq!(
        env.ok_round().await.statefulset,
        Some(ApplyReason::Rendering)
    );
    let owner = env.sts().unwrap()["spec"]["volumeClaimTemplates"][0]["metadata"]
        ["ownerReferences"][0]["apiVersion"]
        .clone();
    assert_eq!(owner, "moco.cybozu.com/v1beta1");
    assert_eq!(env.ok_round().await.statefulset, None);
}

#[tokio::test]
async fn tls_gets_its_certificate_the_copies_once_issued_and_deletion_removes_the_key() {
    let env = Env::new(json!({}));
    env.annotate("moco-rs/tls", Some("true"));
    env.ok_round().await;
    let certificate = env
        .fake
        .get_json(
            "cert-manager.io/v1/certificates",
            SYSTEM,
            "moco-mysql-ns.db",
        )
        .expect("mysqld's Certificate");
    assert_eq!(certificate["spec"]["secretName"], "moco-mysql-ns.db");
    assert_eq!(
        certificate["spec"]["issuerRef"]["name"],
        "moco-mysql-issuer"
    );
    // Before cert-manager has issued it, no copy; the Pods mount the server copy.
    assert!(
        env.fake
            .get_json(SECRETS, NS, "moco-db-mysql-tls")
            .is_none()
    );
    let sts = env.sts().unwrap();
    let volumes = sts["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "moco-db-mysql-tls"),
        "{volumes:?}"
    );

    // cert-manager writes its Secret: the next round copies it, the CA alone for clients.
    let b64 = |s: &str| moco_operator::webhook::base64(s.as_bytes());
    env.fake.insert(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "moco-mysql-ns.db", "namespace": SYSTEM},
        "data": {"ca.crt": b64("CA"), "tls.crt": b64("CERT"), "tls.key": b64("KEY")}
    }));
    env.ok_round().await;
    let server = env.fake.get_json(SECRETS, NS, "moco-db-mysql-tls").unwrap();
    assert_eq!(server["data"]["tls.key"], b64("KEY"));
    let ca = env.fake.get_json(SECRETS, NS, "moco-db-mysql-ca").unwrap();
    assert_eq!(ca["data"], json!({"ca.crt": b64("CA")}));

    // Deletion: the Certificate and the Secret cert-manager would leave behind go too.
    assert!(env.fake.delete(CLUSTERS, NS, "db"));
    reconcile(&env.cluster(), &env.ctx).await.unwrap();
    assert!(
        env.fake
            .get_json(
                "cert-manager.io/v1/certificates",
                SYSTEM,
                "moco-mysql-ns.db"
            )
            .is_none()
    );
    assert!(
        env.fake
            .get_json(SECRETS, SYSTEM, "moco-mysql-ns.db")
            .is_none()
    );
    assert!(env.fake.get_json(SECRETS, NS, "moco-db-mysql-ca").is_none());
}
