//! The objects the operator keeps for a MySQLCluster, one behaviour of MOCO's after another
//! (`/work/shared/reference/moco-operator.md` §2), on the real control plane
//! (`scripts/kube.sh up`, `MOCO_KUBE_DIR`) with `moco controller --watch-namespace` run on
//! this machine: what the real API server validates, defaults and allocates, and what the
//! real garbage collector, disruption, StatefulSet and Job controllers do with them.
//!
//! * the password Secrets where MOCO puts them (the controller's in the operator's own
//!   namespace, without an owner, the source of the copies), the agent Certificate and its
//!   copied Secret (following a renewal), the ServiceAccount, the three Services with the
//!   users' templates (and what may not be customised forced, repaired, and undone with the
//!   template), and everything going with the cluster: owned objects by the garbage
//!   collector, the operator's-namespace ones by the finalizer;
//! * a `mysql` port renumbered by another writer repaired, and the rounds after it succeeding
//!   (regression: every round failed on the API server's duplicate-name refusal);
//! * the my.cnf ConfigMap named by its content, a new one per user ConfigMap edit and the
//!   history beyond `--mysql-configmap-history-limit` deleted; the slow-log ConfigMap, gone
//!   with `disableSlowQueryLogContainer`; the PodDisruptionBudget at 3, 5 and 1 instances
//!   and with no eviction while a backup Job is active; the backup CronJob while
//!   `backupPolicyName` names a BackupPolicy; `ReconcileSuccess` False while it names none;
//! * `StatefulSetReady` False while the real StatefulSet controller rolls out a spec edit and
//!   True only once it finished (one MariaDB Pod);
//! * a failed restore Job (MySQL: MOCO's backup image) left in place, round after round, and
//!   created again once deleted. A restore Job's success is proven in `kube_pitr`.
//!
//! Pods that need not run are parked (a `nodeSelector` no Node has): every object is made and
//! the rounds succeed, at the cost of no mysqld.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount, ServicePort,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use moco_api::backuppolicy::BackupPolicy;
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::resources::{fnv1a_32, mycnf_config_map_name};
use moco_operator::reconcile::certificate_resource;
use moco_operator::render::config_maps::DEFAULT_SLOW_LOG_TEMPLATE;
use moco_tests::control_plane::{is_ready, wait_for};
use moco_tests::operated_namespace::{LIMIT, NAME, OperatedNamespace, STS, mariadb_cluster};
use serde_json::{Value, json};

/// The namespace of a test, with its operator.
type Fixture = OperatedNamespace;

/// A fixture whose operator lives in a namespace of its own.
async fn split(test: &str, args: &[&str]) -> Option<Fixture> {
    OperatedNamespace::start_apart(test, "seeds-system", args).await
}

/// A fixture whose operator names the Pods (for clusters whose Pods run).
async fn hosted(test: &str) -> Option<Fixture> {
    OperatedNamespace::start(test).await
}

/// The labels of every mysqld object of the cluster (MOCO's).
fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "mysql".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), NAME.to_owned()),
        ("app.kubernetes.io/created-by".to_owned(), "moco".to_owned()),
    ])
}

/// A MariaDB cluster `db` of `replicas` with the spec fields of `extra`; `parked` Pods are
/// never scheduled.
fn cluster(ns: &str, replicas: u32, parked: bool, extra: &Value) -> String {
    let mut c = mariadb_cluster(ns, replicas, "1Gi");
    if parked {
        c["spec"]["podTemplate"]["spec"]["nodeSelector"] = json!({"moco-rs.test/nowhere": "true"});
    }
    for (k, v) in extra.as_object().into_iter().flatten() {
        c["spec"][k] = v.clone();
    }
    c.to_string()
}

fn user_config_map(ns: &str, name: &str, max_connections: u32) -> String {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": name},
        "data": {"max_connections": max_connections.to_string()}
    })
    .to_string()
}

fn backup_policy(ns: &str) -> String {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "BackupPolicy",
        "metadata": {"namespace": ns, "name": "daily"},
        "spec": {
            // Never within a test.
            "schedule": "0 0 1 1 *",
            "concurrencyPolicy": "Forbid",
            "jobConfig": {
                "serviceAccountName": "backup",
                "bucketConfig": {"bucketName": "backups", "endpointURL": "http://127.0.0.1:9"},
                "workVolume": {"emptyDir": {}}
            }
        }
    })
    .to_string()
}

/// Whether `meta` names the cluster `uid` as its one owner and controller, blocking its
/// deletion (so the garbage collector deletes it with the cluster).
fn owned_by(meta: &ObjectMeta, uid: &str) -> bool {
    match meta.owner_references.as_deref() {
        Some([r]) => {
            r.api_version == "moco.cybozu.com/v1beta2"
                && r.kind == "MySQLCluster"
                && r.name == NAME
                && r.uid == uid
                && r.controller == Some(true)
                && r.block_owner_deletion == Some(true)
        }
        _ => false,
    }
}

fn condition<'a>(c: &'a MySQLCluster, type_: &str) -> Option<&'a Condition> {
    c.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// `(status, reason, observedGeneration)` of condition `type_`.
fn cond(c: &MySQLCluster, type_: &str) -> Option<(String, String, Option<i64>)> {
    condition(c, type_).map(|c| (c.status.clone(), c.reason.clone(), c.observed_generation))
}

/// Waits until the clock (the API server's: the same machine) is past the second `object` was
/// created in, so that an object created next has a later `creationTimestamp`.
async fn next_second(object: &ConfigMap) {
    let created = object
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap();
    wait_for("the next second", Duration::from_secs(5), || async {
        (k8s_openapi::jiff::Timestamp::now().as_second() > created).then_some(())
    })
    .await;
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn pod_spec(sts: &StatefulSet) -> k8s_openapi::api::core::v1::PodSpec {
    sts.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .unwrap_or_default()
}

/// The ConfigMap the StatefulSet mounts as volume `volume`.
fn mounted_config_map(sts: &StatefulSet, volume: &str) -> Option<String> {
    pod_spec(sts)
        .volumes
        .into_iter()
        .flatten()
        .find(|v| v.name == volume)
        .and_then(|v| v.config_map)
        .map(|c| c.name)
}

fn container_names(sts: &StatefulSet) -> Vec<String> {
    pod_spec(sts)
        .containers
        .into_iter()
        .map(|c| c.name)
        .collect()
}

fn data_text(secret: &Secret, key: &str) -> String {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .unwrap_or_else(|| panic!("Secret {} has no key {key}", name(&secret.metadata)));
    String::from_utf8(bytes.0.clone()).unwrap()
}

/// `(name, port, protocol, targetPort)` of each port.
fn ports(svc: &Service) -> BTreeSet<(String, i32, String, String)> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .into_iter()
        .flatten()
        .map(|p: ServicePort| {
            let target = match p.target_port {
                Some(IntOrString::String(s)) => s,
                Some(IntOrString::Int(i)) => i.to_string(),
                None => String::new(),
            };
            (
                p.name.unwrap_or_default(),
                p.port,
                p.protocol.unwrap_or_default(),
                target,
            )
        })
        .collect()
}

fn port(name: &str, number: i32, target: &str) -> (String, i32, String, String) {
    (name.into(), number, "TCP".into(), target.into())
}

fn selector(svc: &Service) -> BTreeMap<String, String> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.clone())
        .unwrap_or_default()
}

fn role_selector(role: &str) -> BTreeMap<String, String> {
    let mut s = labels();
    s.insert("moco.cybozu.com/role".into(), role.into());
    s
}

/// The passwords of the eight accounts as the controller's Secret holds them.
const PASSWORD_KEYS: [&str; 8] = [
    "ADMIN_PASSWORD",
    "AGENT_PASSWORD",
    "REPLICATION_PASSWORD",
    "CLONE_DONOR_PASSWORD",
    "EXPORTER_PASSWORD",
    "BACKUP_PASSWORD",
    "READONLY_PASSWORD",
    "WRITABLE_PASSWORD",
];

/// Secrets, the Certificate, the ServiceAccount and the Services of a cluster (MOCO §2.3,
/// §2.4, §2.7, §2.8), then its deletion: what it owns goes by the real garbage collector,
/// the operator's-namespace Secret and Certificate by the finalizer (§2.1), and what it only
/// names (the user's ConfigMap, the BackupPolicy) stays.
#[tokio::test]
async fn secrets_certificate_services_where_moco_puts_them_and_all_go_with_the_cluster() {
    let Some(f) = split("seeds_objects", &[]).await else {
        return;
    };
    let (ns, system) = (f.ns.clone(), f.system.clone());
    f.cp.apply(&ns, &user_config_map(&ns, "mycnf", 200));
    f.cp.apply(&ns, &backup_policy(&ns));
    let primary_template = json!({
        "metadata": {
            "labels": {"team": "a", "app.kubernetes.io/name": "not-mysql"},
            "annotations": {"example.com/lb": "internal"}
        },
        "spec": {
            "type": "NodePort",
            "externalTrafficPolicy": "Local",
            "selector": {"app": "elsewhere"},
            "ports": [
                {"name": "mysql", "port": 13306, "targetPort": 9999, "protocol": "UDP"},
                {"name": "metrics", "port": 9104, "targetPort": 9104}
            ]
        }
    });
    f.cp.apply(
        &ns,
        &cluster(
            &ns,
            3,
            true,
            &json!({
                "mysqlConfigMapName": "mycnf",
                "backupPolicyName": "daily",
                "primaryServiceTemplate": primary_template,
                "replicaServiceTemplate": {"spec": {"sessionAffinity": "ClientIP"}}
            }),
        ),
    );
    let c = f.wait_reconciled("created").await;
    let uid = c.metadata.uid.clone().unwrap();

    // The controller's Secret: in the operator's namespace, not owned (an owner reference
    // cannot cross namespaces), MOCO's annotation and labels, 8 passwords of 32 hex digits.
    let controller_secret = format!("mysql-{ns}.{NAME}");
    let source: Secret = f
        .get_in(&system, &controller_secret)
        .await
        .unwrap_or_else(|| panic!("no Secret {system}/{controller_secret}"));
    assert!(
        f.get::<Secret>(&controller_secret).await.is_none(),
        "the controller's Secret is in the operator's namespace only"
    );
    assert!(source.metadata.owner_references.is_none());
    let mut system_labels = labels();
    system_labels.insert("app.kubernetes.io/instance-namespace".into(), ns.clone());
    assert_eq!(source.metadata.labels.as_ref(), Some(&system_labels));
    let version = |s: &Secret| {
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("moco.cybozu.com/secret-version"))
            .cloned()
    };
    assert_eq!(version(&source).as_deref(), Some("1"));
    let passwords: BTreeMap<String, ByteString> = source.data.clone().unwrap();
    assert_eq!(
        passwords
            .keys()
            .map(String::as_str)
            .collect::<BTreeSet<_>>(),
        PASSWORD_KEYS.into_iter().collect::<BTreeSet<_>>()
    );
    for (k, v) in &passwords {
        assert!(
            v.0.len() == 32 && v.0.iter().all(|b| b.is_ascii_hexdigit()),
            "{k} is not 16 random bytes in hex"
        );
    }
    let distinct: BTreeSet<&Vec<u8>> = passwords.values().map(|v| &v.0).collect();
    assert_eq!(distinct.len(), 8, "eight different passwords");

    // The user Secret: the same passwords, owned by the cluster.
    let user: Secret = f.get(STS).await.expect("Secret moco-db");
    assert!(owned_by(&user.metadata, &uid), "{:?}", user.metadata);
    assert_eq!(user.metadata.labels.as_ref(), Some(&labels()));
    assert_eq!(version(&user).as_deref(), Some("1"));
    assert_eq!(user.data.as_ref(), Some(&passwords));

    // The my.cnf Secret: one `[client]` file per account, quoted, the exporter's socket.
    let mycnf: Secret = f
        .get("moco-my-cnf-db")
        .await
        .expect("Secret moco-my-cnf-db");
    assert!(owned_by(&mycnf.metadata, &uid));
    let password = |key: &str| String::from_utf8(passwords[key].0.clone()).unwrap();
    let expected: BTreeMap<String, String> = [
        ("moco-admin", "ADMIN_PASSWORD", ""),
        (
            "moco-exporter",
            "EXPORTER_PASSWORD",
            "socket=\"/run/mysqld.sock\"\n",
        ),
        ("moco-backup", "BACKUP_PASSWORD", ""),
        ("moco-readonly", "READONLY_PASSWORD", ""),
        ("moco-writable", "WRITABLE_PASSWORD", ""),
    ]
    .into_iter()
    .map(|(user, key, extra)| {
        (
            format!("{user}-my.cnf"),
            format!(
                "[client]\nuser=\"{user}\"\npassword=\"{}\"\n{extra}",
                password(key)
            ),
        )
    })
    .collect();
    let files: BTreeMap<String, String> = mycnf
        .data
        .as_ref()
        .unwrap()
        .keys()
        .map(|k| (k.clone(), data_text(&mycnf, k)))
        .collect();
    assert_eq!(files, expected);

    // The controller's Secret is the source of truth: a deleted copy comes back with the
    // same passwords, and the source is never written.
    let secrets: Api<Secret> = Api::namespaced(f.cp.client.clone(), &ns);
    secrets.delete(STS, &DeleteParams::default()).await.unwrap();
    let old_uid = user.metadata.uid.clone();
    let again: Secret = f
        .wait_object("the deleted user Secret re-created", STS, |s: &Secret| {
            s.metadata.uid != old_uid
        })
        .await;
    assert_eq!(again.data.as_ref(), Some(&passwords));
    let source_now: Secret = f.get_in(&system, &controller_secret).await.unwrap();
    assert_eq!(
        source_now.metadata.resource_version, source.metadata.resource_version,
        "the controller's Secret was written"
    );

    // The agent Certificate: in the operator's namespace, for every Pod of the headless
    // Service, of the install's Issuer. No copy before cert-manager issued it.
    let certificate = format!("moco-agent-{ns}.{NAME}");
    let certificates: Api<DynamicObject> =
        Api::namespaced_with(f.cp.client.clone(), &system, &certificate_resource());
    let cert = certificates.get(&certificate).await.unwrap();
    let cert_uid = cert.metadata.uid.clone();
    assert_eq!(cert.data["spec"]["secretName"], json!(certificate));
    assert_eq!(
        cert.data["spec"]["dnsNames"],
        json!([format!("*.moco-{NAME}.{ns}.svc")])
    );
    assert_eq!(
        cert.data["spec"]["issuerRef"],
        json!({"kind": "Issuer", "name": "moco-grpc-issuer"})
    );
    let usages = cert.data["spec"]["usages"].as_array().cloned().unwrap();
    for usage in ["digital signature", "key encipherment", "server auth"] {
        assert!(usages.contains(&json!(usage)), "{usages:?}");
    }
    assert_eq!(cert.metadata.labels.as_ref(), Some(&system_labels));
    assert!(
        Api::<DynamicObject>::namespaced_with(f.cp.client.clone(), &ns, &certificate_resource())
            .get_opt(&certificate)
            .await
            .unwrap()
            .is_none()
    );
    assert!(f.get::<Secret>("moco-db-grpc").await.is_none());

    // Issued: copied (the three keys), owned; renewed: the copy follows.
    f.issue_agent_certificate().await;
    let issued: Secret = f.get_in(&system, &certificate).await.unwrap();
    let copy: Secret = f
        .wait_object("the certificate copied", "moco-db-grpc", |s: &Secret| {
            s.data == issued.data
        })
        .await;
    assert!(owned_by(&copy.metadata, &uid));
    let mut renewed = issued.clone();
    renewed.metadata.managed_fields = None;
    renewed
        .data
        .as_mut()
        .unwrap()
        .insert("tls.crt".into(), ByteString(b"renewed".to_vec()));
    Api::<Secret>::namespaced(f.cp.client.clone(), &system)
        .replace(&certificate, &PostParams::default(), &renewed)
        .await
        .unwrap();
    f.wait_object(
        "the renewed certificate copied",
        "moco-db-grpc",
        |s: &Secret| s.data == renewed.data,
    )
    .await;

    // The Certificate is created once: cert-manager renews it, and an edit stays.
    certificates
        .patch(
            &certificate,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"duration": "2160h"}})),
        )
        .await
        .unwrap();
    for n in 1..=2 {
        f.poke(n).await;
    }
    let cert = certificates.get(&certificate).await.unwrap();
    assert_eq!(cert.data["spec"]["duration"], json!("2160h"));
    assert_eq!(cert.metadata.uid, cert_uid);

    // The ServiceAccount the Pods run as.
    let sa: ServiceAccount = f.get(STS).await.expect("ServiceAccount moco-db");
    assert!(owned_by(&sa.metadata, &uid));
    assert_eq!(sa.metadata.labels.as_ref(), Some(&labels()));
    let sts: StatefulSet = f.get(STS).await.expect("StatefulSet");
    assert_eq!(pod_spec(&sts).service_account_name.as_deref(), Some(STS));
    let pods = wait_for("the StatefulSet's 3 Pods", LIMIT, || async {
        let pods = Api::<Pod>::namespaced(f.cp.client.clone(), &ns)
            .list(&ListParams::default().labels("app.kubernetes.io/instance=db"))
            .await
            .ok()?;
        (pods.items.len() == 3).then_some(pods.items)
    })
    .await;
    for p in &pods {
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.service_account_name.as_deref(), Some(STS));
    }

    // The headless Service: MOCO's alone (no template).
    let headless: Service = f.get(STS).await.expect("headless Service");
    assert!(owned_by(&headless.metadata, &uid));
    assert_eq!(headless.metadata.labels.as_ref(), Some(&labels()));
    let spec = headless.spec.clone().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.publish_not_ready_addresses, Some(true));
    assert!(
        headless
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("example.com/lb")),
        "the headless Service took a template: {:?}",
        headless.metadata.annotations
    );
    assert_eq!(selector(&headless), labels());
    assert_eq!(
        ports(&headless),
        BTreeSet::from([
            port("mysql", 3306, "mysql"),
            port("mysqlx", 33060, "mysqlx"),
            port("mysql-admin", 33062, "mysql-admin"),
        ])
    );

    // The primary Service: the template's type, annotations, labels and extra port; MOCO's
    // labels, selector and `mysql`/`mysqlx` ports whatever the template says.
    let primary: Service = f.get("moco-db-primary").await.expect("primary Service");
    assert!(owned_by(&primary.metadata, &uid));
    let mut primary_labels = labels();
    primary_labels.insert("team".into(), "a".into());
    assert_eq!(primary.metadata.labels.as_ref(), Some(&primary_labels));
    assert_eq!(
        primary
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("example.com/lb"))
            .map(String::as_str),
        Some("internal")
    );
    let spec = primary.spec.clone().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("NodePort"));
    assert_eq!(spec.external_traffic_policy.as_deref(), Some("Local"));
    assert_eq!(selector(&primary), role_selector("primary"));
    let primary_ports = BTreeSet::from([
        port("mysql", 3306, "mysql"),
        port("mysqlx", 33060, "mysqlx"),
        port("metrics", 9104, "9104"),
    ]);
    assert_eq!(ports(&primary), primary_ports);
    assert!(
        spec.ports.iter().flatten().all(|p| p.node_port.is_some()),
        "the API server allocated node ports: {:?}",
        spec.ports
    );
    let replica: Service = f.get("moco-db-replica").await.expect("replica Service");
    assert!(owned_by(&replica.metadata, &uid));
    let spec = replica.spec.clone().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.session_affinity.as_deref(), Some("ClientIP"));
    assert_eq!(selector(&replica), role_selector("replica"));
    assert_eq!(
        ports(&replica),
        BTreeSet::from([
            port("mysql", 3306, "mysql"),
            port("mysqlx", 33060, "mysqlx")
        ])
    );

    // Someone points the primary Service at the replicas: repaired (writes must not go to
    // a replica).
    let services: Api<Service> = Api::namespaced(f.cp.client.clone(), &ns);
    let mut tampered = primary.clone();
    tampered.metadata.managed_fields = None;
    tampered
        .spec
        .as_mut()
        .and_then(|s| s.selector.as_mut())
        .unwrap()
        .insert("moco.cybozu.com/role".into(), "replica".into());
    services
        .replace("moco-db-primary", &PostParams::default(), &tampered)
        .await
        .unwrap();
    f.wait_object(
        "the primary Service repaired",
        "moco-db-primary",
        |s: &Service| selector(s) == role_selector("primary") && ports(s) == primary_ports,
    )
    .await;

    // The template removed: a plain ClusterIP Service again (the API server drops the node
    // ports with the type), without the template's label, annotation and port.
    f.patch_cluster(json!({"spec": {"primaryServiceTemplate": null}}))
        .await;
    let plain = f
        .wait_object(
            "the primary template undone",
            "moco-db-primary",
            |s: &Service| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ClusterIP"),
        )
        .await;
    assert_eq!(plain.metadata.labels.as_ref(), Some(&labels()));
    assert!(
        plain
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("example.com/lb")),
        "{:?}",
        plain.metadata.annotations
    );
    assert_eq!(
        ports(&plain),
        BTreeSet::from([
            port("mysql", 3306, "mysql"),
            port("mysqlx", 33060, "mysqlx")
        ])
    );
    assert_eq!(selector(&plain), role_selector("primary"));
    f.wait_reconciled("template removed").await;

    // Deletion. Recorded first: everything the cluster owns, by uid.
    let pdb: PodDisruptionBudget = f.get(STS).await.expect("PodDisruptionBudget");
    let cronjob: CronJob = f.get("moco-backup-db").await.expect("backup CronJob");
    let config_maps = f.config_maps("moco-").await;
    assert_eq!(config_maps.len(), 2, "my.cnf and slow-log ConfigMaps");
    let claims = Api::<PersistentVolumeClaim>::namespaced(f.cp.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(claims.len(), 3, "a claim per Pod");
    for claim in &claims {
        assert!(
            owned_by(&claim.metadata, &uid),
            "claim {} is not the cluster's: {:?}",
            name(&claim.metadata),
            claim.metadata.owner_references
        );
    }
    let finalizers = f.cluster().await.metadata.finalizers.unwrap_or_default();
    assert!(
        finalizers.contains(&"moco.cybozu.com/mysqlcluster".to_owned()),
        "{finalizers:?}"
    );
    f.clusters()
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&format!("{ns}: the MySQLCluster gone"), LIMIT, || async {
        f.clusters()
            .get_opt(NAME)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // The finalizer: what no owner reference reaches.
    assert!(
        f.get_in::<Secret>(&system, &controller_secret)
            .await
            .is_none(),
        "the controller's Secret outlived the cluster"
    );
    assert!(
        certificates.get_opt(&certificate).await.unwrap().is_none(),
        "the Certificate outlived the cluster"
    );
    // The garbage collector: everything owned.
    f.wait_gone::<StatefulSet>("StatefulSet", STS).await;
    for s in [STS, "moco-db-primary", "moco-db-replica"] {
        f.wait_gone::<Service>(&format!("Service {s}"), s).await;
    }
    for s in [STS, "moco-my-cnf-db", "moco-db-grpc"] {
        f.wait_gone::<Secret>(&format!("Secret {s}"), s).await;
    }
    f.wait_gone::<ServiceAccount>("ServiceAccount", STS).await;
    f.wait_gone::<Role>("Role", STS).await;
    f.wait_gone::<RoleBinding>("RoleBinding", STS).await;
    f.wait_gone::<PodDisruptionBudget>("PodDisruptionBudget", name(&pdb.metadata))
        .await;
    f.wait_gone::<CronJob>("CronJob", name(&cronjob.metadata))
        .await;
    f.wait_gone::<Role>("backup Role", "moco-backup-db").await;
    f.wait_gone::<RoleBinding>("backup RoleBinding", "moco-backup-db")
        .await;
    for c in &config_maps {
        f.wait_gone::<ConfigMap>("ConfigMap", name(&c.metadata))
            .await;
    }
    for p in &pods {
        f.wait_gone::<Pod>("Pod", name(&p.metadata)).await;
    }
    for c in &claims {
        f.wait_gone::<PersistentVolumeClaim>("claim", name(&c.metadata))
            .await;
    }
    // What the cluster only names is the user's.
    assert!(f.get::<ConfigMap>("mycnf").await.is_some());
    assert!(f.get::<BackupPolicy>("daily").await.is_some());
}

/// Regression for a defect outside the render (the apply step, `reconcile/mod.rs`): the
/// Services' ports are a list merged by `(port, protocol)` under server-side apply. Another
/// writer (`kubectl edit`) renumbering the `mysql` port owns an entry `13306/TCP` named
/// `mysql`; the operator's apply adds its `3306/TCP` entry named `mysql` beside it, and the
/// API server refuses the result: `Service "moco-db-primary" is invalid: spec.ports[1].name:
/// Duplicate value: "mysql"`, in every round from then on, so nothing after the Services
/// (the StatefulSet, the PDB, the Jobs) is reconciled again until someone repairs the Service
/// by hand. Fixed in `reconcile/services.rs`: on that refusal the ports are set back first.
#[tokio::test]
async fn a_renumbered_mysql_port_of_a_service_is_repaired() {
    let Some(f) = split("seeds_port", &[]).await else {
        return;
    };
    let ns = f.ns.clone();
    f.cp.apply(&ns, &cluster(&ns, 1, true, &json!({})));
    f.wait_reconciled("created").await;
    let primary: Service = f.get("moco-db-primary").await.expect("primary Service");
    let mut tampered = primary.clone();
    tampered.metadata.managed_fields = None;
    for p in tampered.spec.as_mut().unwrap().ports.iter_mut().flatten() {
        if p.name.as_deref() == Some("mysql") {
            p.port = 13306;
        }
    }
    Api::<Service>::namespaced(f.cp.client.clone(), &ns)
        .replace("moco-db-primary", &PostParams::default(), &tampered)
        .await
        .unwrap();
    f.wait_object(
        "the mysql port repaired",
        "moco-db-primary",
        |s: &Service| {
            ports(s)
                == BTreeSet::from([
                    port("mysql", 3306, "mysql"),
                    port("mysqlx", 33060, "mysqlx"),
                ])
        },
    )
    .await;
    // And the rounds succeed again, for a spec edit too.
    f.poke(1).await;
    f.patch_cluster(json!({"spec": {"podTemplate": {"metadata": {"annotations": {"example.com/edited": "1"}}}}}))
        .await;
    f.wait_reconciled("edited after the repair").await;
}

/// The ConfigMaps (MOCO §2.5, §2.6), the PodDisruptionBudget (§2.11: `floor(replicas / 2)`,
/// 0 while a backup Job is active, none below 3), the backup CronJob (§2.12) and
/// `ReconcileSuccess` (§2.1) of a cluster whose Pods never run.
#[tokio::test]
async fn config_maps_pdb_backup_cronjob_and_reconcile_success() {
    let Some(f) = split("seeds_config", &["--mysql-configmap-history-limit", "3"]).await else {
        return;
    };
    let ns = f.ns.clone();
    f.cp.apply(&ns, &user_config_map(&ns, "mycnf", 200));
    f.cp.apply(
        &ns,
        &cluster(&ns, 3, true, &json!({"mysqlConfigMapName": "mycnf"})),
    );
    let c = f.wait_reconciled("created").await;
    let uid = c.metadata.uid.clone().unwrap();

    // my.cnf: named by the hash of its text, with the user's option, mounted.
    let mycnf = |max: u32| {
        let line = format!("\nmax_connections = {max}\n");
        move |c: &ConfigMap| {
            c.data
                .as_ref()
                .and_then(|d| d.get("my.cnf"))
                .is_some_and(|t| t.contains(&line))
        }
    };
    let first = f.config_maps("moco-db.").await;
    assert_eq!(first.len(), 1, "{first:?}");
    let text = first[0].data.as_ref().unwrap()["my.cnf"].clone();
    assert!(mycnf(200)(&first[0]), "{text}");
    assert_eq!(name(&first[0].metadata), mycnf_config_map_name(NAME, &text));
    assert!(owned_by(&first[0].metadata, &uid));
    assert_eq!(first[0].metadata.labels.as_ref(), Some(&labels()));
    let sts: StatefulSet = f.get(STS).await.unwrap();
    assert_eq!(
        mounted_config_map(&sts, "mysql-conf").as_deref(),
        Some(name(&first[0].metadata))
    );

    // The slow-log sidecar's: named by the hash of the template, the slow log's path in it.
    let slow_prefix = "moco-slow-log-agent-config-db.";
    let slow = f.config_maps(slow_prefix).await;
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(
        name(&slow[0].metadata),
        format!(
            "{slow_prefix}{:08x}",
            fnv1a_32(DEFAULT_SLOW_LOG_TEMPLATE.as_bytes())
        )
    );
    assert!(
        slow[0].data.as_ref().unwrap()["fluent-bit.conf"]
            .contains("Path /var/log/mysql/mysql.slow\n")
    );
    assert!(owned_by(&slow[0].metadata, &uid));
    assert_eq!(
        mounted_config_map(&sts, "slow-fluent-bit-config").as_deref(),
        Some(name(&slow[0].metadata))
    );
    assert!(container_names(&sts).contains(&"slow-log".to_owned()));

    // Each edit of the user's ConfigMap: a new one, mounted; beyond the history limit (3,
    // the current one included) the oldest go. Creation times have whole seconds, and MOCO
    // orders by them: each edit waits for the second after the last ConfigMap's creation,
    // so that "oldest" has one answer.
    let mut newest = first[0].clone();
    for max in [201, 202, 203] {
        next_second(&newest).await;
        f.cp.apply(&ns, &user_config_map(&ns, "mycnf", max));
        newest = wait_for(
            &format!("{ns}: my.cnf with {max} mounted"),
            LIMIT,
            || async {
                let current = f
                    .config_maps("moco-db.")
                    .await
                    .into_iter()
                    .find(mycnf(max))?;
                let sts: StatefulSet = f.get(STS).await?;
                (mounted_config_map(&sts, "mysql-conf").as_deref() == Some(name(&current.metadata)))
                    .then_some(current)
            },
        )
        .await;
    }
    let kept = wait_for(
        &format!("{ns}: 3 my.cnf ConfigMaps kept"),
        LIMIT,
        || async {
            let list = f.config_maps("moco-db.").await;
            (list.len() == 3).then_some(list)
        },
    )
    .await;
    for max in [201, 202, 203] {
        assert!(
            kept.iter().any(mycnf(max)),
            "the my.cnf of {max} was deleted: {:?}",
            kept.iter().map(|c| name(&c.metadata)).collect::<Vec<_>>()
        );
    }
    f.wait_reconciled("my.cnf edited").await;
    assert_eq!(f.config_maps("moco-db.").await.len(), 3);

    // The slow-log sidecar disabled: no ConfigMap, no container; enabled again: both back.
    f.patch_cluster(json!({"spec": {"disableSlowQueryLogContainer": true}}))
        .await;
    wait_for(&format!("{ns}: no slow-log ConfigMap"), LIMIT, || async {
        let sts: StatefulSet = f.get(STS).await?;
        (f.config_maps(slow_prefix).await.is_empty()
            && !container_names(&sts).contains(&"slow-log".to_owned())
            && mounted_config_map(&sts, "slow-fluent-bit-config").is_none())
        .then_some(())
    })
    .await;
    f.wait_reconciled("slow log disabled").await;
    assert!(f.config_maps(slow_prefix).await.is_empty());
    f.patch_cluster(json!({"spec": {"disableSlowQueryLogContainer": false}}))
        .await;
    wait_for(
        &format!("{ns}: the slow-log ConfigMap back"),
        LIMIT,
        || async {
            let sts: StatefulSet = f.get(STS).await?;
            (f.config_maps(slow_prefix).await.len() == 1
                && container_names(&sts).contains(&"slow-log".to_owned()))
            .then_some(())
        },
    )
    .await;

    // The PodDisruptionBudget: floor(replicas / 2), over the cluster's Pods (the real
    // disruption controller counts them); none below 3 instances.
    let pdb = |max: i32, pods: i32| {
        move |p: &PodDisruptionBudget| {
            p.spec.as_ref().and_then(|s| s.max_unavailable.clone()) == Some(IntOrString::Int(max))
                && p.status.as_ref().is_some_and(|s| s.expected_pods == pods)
        }
    };
    let budget = f
        .wait_object("a budget of 1 over 3 Pods", STS, pdb(1, 3))
        .await;
    assert!(owned_by(&budget.metadata, &uid));
    assert_eq!(budget.metadata.labels.as_ref(), Some(&labels()));
    assert_eq!(
        budget
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.match_labels.clone()),
        Some(labels())
    );
    // While a backup Job runs, no eviction at all (MOCO's rule): a CronJob firing every
    // minute whose Job's Pod cannot be scheduled stays active.
    f.cp.apply(
        &ns,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"namespace": ns, "name": "backup"}})
        .to_string(),
    );
    let mut minutely: Value = serde_json::from_str(&backup_policy(&ns)).unwrap();
    minutely["metadata"]["name"] = json!("minutely");
    minutely["spec"]["schedule"] = json!("* * * * *");
    minutely["spec"]["jobConfig"]["affinity"] = json!({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": "moco-rs.test/nowhere", "operator": "In", "values": ["true"]}
            ]}
        ]}
    }});
    f.cp.apply(&ns, &minutely.to_string());
    f.patch_cluster(json!({"spec": {"backupPolicyName": "minutely"}}))
        .await;
    wait_for(
        &format!("{ns}: a backup Job active"),
        Duration::from_secs(150),
        || async {
            let c: CronJob = f.get("moco-backup-db").await?;
            c.status?.active.filter(|a| !a.is_empty()).map(|_| ())
        },
    )
    .await;
    f.wait_object("no eviction while a backup runs", STS, pdb(0, 3))
        .await;
    f.patch_cluster(json!({"spec": {"backupPolicyName": null}}))
        .await;
    f.wait_gone::<CronJob>("the minutely CronJob", "moco-backup-db")
        .await;
    f.wait_object("the budget back to 1", STS, pdb(1, 3)).await;

    f.patch_cluster(json!({"spec": {"replicas": 5}})).await;
    f.wait_object("a budget of 2 over 5 Pods", STS, pdb(2, 5))
        .await;
    f.patch_cluster(json!({"spec": {"replicas": 1}})).await;
    f.wait_gone::<PodDisruptionBudget>("the budget at 1 instance", STS)
        .await;
    f.wait_reconciled("1 instance").await;

    // A BackupPolicy named before it exists: the round fails, and says so.
    let generation = f
        .patch_cluster(json!({"spec": {"backupPolicyName": "daily"}}))
        .await;
    wait_for(&format!("{ns}: ReconcileSuccess False"), LIMIT, || async {
        let c = f.cluster().await;
        (cond(&c, "ReconcileSuccess")
            == Some(("False".into(), "ReconcileFailed".into(), Some(generation))))
        .then_some(())
    })
    .await;
    assert!(f.get::<CronJob>("moco-backup-db").await.is_none());
    // MOCO records the generation of a failed round too.
    assert_eq!(
        f.cluster()
            .await
            .status
            .map(|s| s.reconcile_info.generation),
        Some(generation)
    );
    // Created: the next round (the BackupPolicy's watch) makes the CronJob.
    f.cp.apply(&ns, &backup_policy(&ns));
    let c = f.wait_reconciled("BackupPolicy created").await;
    assert_eq!(c.metadata.generation, Some(generation));
    let cronjob: CronJob = f.get("moco-backup-db").await.expect("backup CronJob");
    assert!(owned_by(&cronjob.metadata, &uid));
    let backup_labels = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_owned(),
            "mysql-backup".to_owned(),
        ),
        ("app.kubernetes.io/instance".to_owned(), NAME.to_owned()),
        ("app.kubernetes.io/created-by".to_owned(), "moco".to_owned()),
    ]);
    assert_eq!(cronjob.metadata.labels.as_ref(), Some(&backup_labels));
    let spec = cronjob.spec.clone().unwrap();
    assert_eq!(spec.schedule, "0 0 1 1 *");
    assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
    assert_eq!(
        spec.job_template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref()),
        Some(&backup_labels)
    );
    let job_spec = spec.job_template.spec.clone().unwrap();
    assert_eq!(
        job_spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref()),
        Some(&backup_labels)
    );
    let pod = job_spec.template.spec.clone().unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("backup"));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let args = pod.containers[0].args.clone().unwrap_or_default();
    assert_eq!(
        args[args.len() - 3..],
        ["backups".to_owned(), ns.clone(), NAME.to_owned()]
    );
    let role: Role = f.get("moco-backup-db").await.expect("backup Role");
    assert!(owned_by(&role.metadata, &uid));
    let binding: RoleBinding = f.get("moco-backup-db").await.expect("backup RoleBinding");
    assert_eq!(
        binding
            .subjects
            .as_ref()
            .and_then(|s| s.first())
            .map(|s| (s.kind.as_str(), s.name.as_str())),
        Some(("ServiceAccount", "backup"))
    );
    // No longer named: CronJob, Role and RoleBinding deleted.
    f.patch_cluster(json!({"spec": {"backupPolicyName": null}}))
        .await;
    f.wait_gone::<CronJob>("the backup CronJob", "moco-backup-db")
        .await;
    f.wait_gone::<Role>("the backup Role", "moco-backup-db")
        .await;
    f.wait_gone::<RoleBinding>("the backup RoleBinding", "moco-backup-db")
        .await;
    let c = f.wait_reconciled("backup removed").await;

    // No Pod ever ran: the StatefulSet was never ready.
    assert_eq!(
        cond(&c, "StatefulSetReady").map(|(s, r, _)| (s, r)),
        Some(("False".into(), "StatefulSetNotReady".into()))
    );
}

/// `StatefulSetReady` (MOCO §2.1) against the real StatefulSet controller: True once the
/// Pod is available on the current revision; after a spec edit False (for the new
/// generation) while the controller replaces the Pod, and True again only once it finished;
/// the new my.cnf is then what mysqld reads.
#[tokio::test]
async fn statefulset_ready_only_once_the_statefulset_controller_rolled_out_an_edit() {
    let Some(f) = hosted("seeds_ready").await else {
        return;
    };
    let ns = f.ns.clone();
    f.cp.apply(&ns, &user_config_map(&ns, "mycnf", 200));
    f.cp.apply(&ns, &user_config_map(&ns, "mycnf2", 300));
    f.cp.apply(
        &ns,
        &cluster(&ns, 1, false, &json!({"mysqlConfigMapName": "mycnf"})),
    );
    f.issue_agent_certificate().await;

    /// What the StatefulSet controller has done: (rolled out and available, update revision).
    fn rolled_out(sts: &StatefulSet) -> (bool, String) {
        let status = sts.status.clone().unwrap_or_default();
        let done = sts.metadata.generation == status.observed_generation
            && status.current_revision == status.update_revision
            && status.updated_replicas == Some(1)
            && status.available_replicas == Some(1);
        (done, status.update_revision.unwrap_or_default())
    }
    let ready_for = |generation: i64| {
        let f = &f;
        async move {
            let c = f.cluster().await;
            (cond(&c, "StatefulSetReady")
                == Some(("True".into(), "StatefulSetReady".into(), Some(generation))))
            .then_some(())
        }
    };
    let generation = f.cluster().await.metadata.generation.unwrap();
    wait_for(&format!("{ns}: StatefulSetReady"), LIMIT, || {
        ready_for(generation)
    })
    .await;
    let sts: StatefulSet = f.get(STS).await.unwrap();
    assert!(rolled_out(&sts).0, "{:?}", sts.status);

    let edited = f
        .patch_cluster(json!({"spec": {"mysqlConfigMapName": "mycnf2"}}))
        .await;
    assert_eq!(edited, generation + 1);
    let mut seen_not_ready = false;
    let mut history: Vec<(String, String, Option<i64>)> = Vec::new();
    let start = std::time::Instant::now();
    let (revision, pod) = loop {
        let c = f.cluster().await;
        let now = cond(&c, "StatefulSetReady");
        if let Some(now) = &now
            && history.last() != Some(now)
        {
            history.push(now.clone());
        }
        if now == Some(("False".into(), "StatefulSetNotReady".into(), Some(edited))) {
            seen_not_ready = true;
        }
        if now == Some(("True".into(), "StatefulSetReady".into(), Some(edited))) {
            // True for the edit: the controller must have finished (it cannot un-finish).
            let sts: StatefulSet = f.get(STS).await.unwrap();
            let (done, revision) = rolled_out(&sts);
            assert!(
                done,
                "StatefulSetReady True while the rollout is unfinished: {:?}",
                sts.status
            );
            let pod: Pod = f.get("moco-db-0").await.unwrap();
            break (revision, pod);
        }
        assert!(
            start.elapsed() < LIMIT,
            "{ns}: StatefulSetReady not True for generation {edited} within {LIMIT:?}: {history:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("{ns}: StatefulSetReady after the edit: {history:?}");
    assert!(
        seen_not_ready,
        "StatefulSetReady was never False for the edit while the Pod was replaced: {history:?}"
    );
    assert_eq!(
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("controller-revision-hash")),
        Some(&revision),
        "the Pod is on the update revision"
    );
    assert!(is_ready(&pod));
    let c = f.wait_reconciled("edited").await;
    assert_eq!(c.metadata.generation, Some(edited));
    // What mysqld reads is the new my.cnf.
    let out =
        f.cp.exec(&ns, "moco-db-0", "mysqld", &["cat", "/etc/mysql/my.cnf"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("\nmax_connections = 300\n"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The restore Job (MOCO §2.13) of a restore that fails (its bucket holds no backup), on a
/// MySQL cluster (whose Job runs MOCO's backup image, `moco-backup restore`): the program
/// says why on the cluster, and the failed Job is left in place, the same one, round after
/// round, the restore not recorded; deleted by hand, it is created again (MOCO's retry).
#[tokio::test]
async fn a_failed_restore_job_is_left_in_place() {
    let Some(f) = hosted("seeds_restore").await else {
        return;
    };
    let job = failed_restore(&f).await;

    // Rounds go by: the failed Job stays, the same one, and the restore is not recorded.
    for n in 1..=5 {
        f.poke(n).await;
    }
    let still: Job = f
        .get("moco-restore-db")
        .await
        .expect("the failed Job was deleted");
    assert_eq!(
        still.metadata.uid, job.metadata.uid,
        "the Job was re-created"
    );
    let c = f.cluster().await;
    assert!(c.status.as_ref().is_none_or(|s| s.restored_time.is_none()));
    // Its Role and RoleBinding belong to it.
    let role: Role = f.get("moco-restore-db").await.expect("restore Role");
    assert_eq!(
        role.metadata
            .owner_references
            .iter()
            .flatten()
            .map(|r| (r.kind.as_str(), r.uid.as_str()))
            .collect::<Vec<_>>(),
        [("Job", job.metadata.uid.as_deref().unwrap())]
    );

    // Deleted (the way to try again): created anew.
    Api::<Job>::namespaced(f.cp.client.clone(), &f.ns)
        .delete("moco-restore-db", &DeleteParams::background())
        .await
        .unwrap();
    f.wait_object(
        "the restore Job created again",
        "moco-restore-db",
        |j: &Job| j.metadata.uid != job.metadata.uid && j.metadata.deletion_timestamp.is_none(),
    )
    .await;
}

/// Creates a MySQL cluster restoring from an empty bucket of moto on the bridge (its Pods
/// parked); returns its restore Job once it failed, after checking that the program ran and
/// recorded its `RestoreFailed` Event.
async fn failed_restore(f: &Fixture) -> Job {
    let ns = f.ns.clone();
    let moto = moco_tests::s3::bridge_moto(&f.cp, "seeds_failed_restore");
    moco_tests::s3::create_bucket_at(&moto.endpoint, "empty").await;
    f.cp.apply(
        &ns,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"namespace": ns, "name": "restore"}})
        .to_string(),
    );
    let mut c: Value = serde_json::from_str(&cluster(
        &ns,
        1,
        true,
        &json!({"restore": {
            "sourceName": "src",
            "sourceNamespace": ns,
            "restorePoint": "2026-01-01T00:00:00Z",
            "jobConfig": {
                "serviceAccountName": "restore",
                "env": [
                    {"name": "AWS_ACCESS_KEY_ID", "value": "test"},
                    {"name": "AWS_SECRET_ACCESS_KEY", "value": "test"}
                ],
                "bucketConfig": {"bucketName": "empty", "endpointURL": moto.endpoint,
                                 "region": "us-east-1", "usePathStyle": true},
                "workVolume": {"emptyDir": {}}
            }
        }}),
    ))
    .unwrap();
    c["metadata"]["annotations"]["moco-rs/flavor"] = json!("mysql");
    c["spec"]["podTemplate"]["spec"]["containers"][0]["image"] =
        json!("ghcr.io/cybozu-go/moco/mysql:8.4.8");
    f.cp.apply(&ns, &c.to_string());
    f.issue_agent_certificate().await;
    let failed = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Failed" && c.status == "True"))
    };
    let job = f
        .wait_object("the restore Job failed", "moco-restore-db", failed)
        .await;
    let uid = f.cluster().await.metadata.uid.unwrap();
    assert!(owned_by(&job.metadata, &uid));
    // The program ran and failed on the bucket, as it said on the cluster.
    let events = Api::<Event>::namespaced(f.cp.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let notes: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("RestoreFailed"))
        .filter_map(|e| e.message.clone())
        .collect();
    let logs = std::fs::read_dir(f.cp.runner_state().join("logs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{ns}_moco-restore-db"))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("restore/1.log")).ok())
        .collect::<Vec<_>>();
    assert!(
        !notes.is_empty(),
        "no RestoreFailed event: the restore program did not run; its container's log: \
         {logs:?}; events: {:?}",
        events
            .items
            .iter()
            .map(|e| (e.reason.clone(), e.message.clone()))
            .collect::<Vec<_>>()
    );
    println!("{ns}: {notes:?}");
    job
}
