//! What the rendered Roles let their subjects do, asked as `kubectl auth can-i` would
//! ([`moco_testkit::rbac`]): each Job's ServiceAccount may do what its program calls
//! and nothing beside it (issue 29).

use std::collections::BTreeMap;

use moco_api::backuppolicy::BackupPolicy;
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::moco_accounts::MocoPasswords;
use moco_operator::render::{ClusterInputs, ClusterObjects, RenderSettings, render_cluster};
use moco_testkit::rbac::{Request, Requester, can};
use serde_json::{Value, json};

const NS: &str = "ns";
const CLUSTERS: (&str, &str) = ("moco.cybozu.com", "mysqlclusters");
const STATUS: (&str, &str) = ("moco.cybozu.com", "mysqlclusters/status");
const PODS: (&str, &str) = ("", "pods");
const EVENTS: (&str, &str) = ("", "events");

fn cluster(flavor: &str, spec: Value) -> MySQLCluster {
    let mut v = json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": NS, "uid": "uid-1",
                     "annotations": {"moco-rs/flavor": flavor}},
        "spec": {
            "replicas": 3, "serverIDBase": 100,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysqld"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        }
    });
    if let (Value::Object(s), Value::Object(p)) = (&mut v["spec"], spec) {
        s.extend(p);
    }
    serde_json::from_value(v).unwrap()
}

fn render(cluster: &MySQLCluster, policy: Option<&BackupPolicy>) -> ClusterObjects {
    let p = String::from("x");
    let passwords = MocoPasswords {
        admin: p.clone(),
        agent: p.clone(),
        repl: p.clone(),
        clone_donor: p.clone(),
        exporter: p.clone(),
        backup: p.clone(),
        readonly: p.clone(),
        writable: p,
    };
    render_cluster(
        &RenderSettings::new("moco-system"),
        &ClusterInputs {
            cluster,
            user_config: &BTreeMap::new(),
            passwords: &passwords,
            certificate_secret: None,
            mysql_certificate_secret: None,
            backup_policy: policy,
            backup_job_active: false,
            deployed_slow_log: None,
            deployed_replicas: None,
            reconciler_version: 1,
        },
    )
    .unwrap()
}

fn restore_spec() -> Value {
    json!({"restore": {
        "sourceName": "src", "sourceNamespace": "old",
        "restorePoint": "2026-05-01T12:34:56Z",
        "jobConfig": {"serviceAccountName": "restorer", "bucketConfig": {"bucketName": "b"},
                      "workVolume": {"emptyDir": {}}}
    }})
}

fn policy() -> BackupPolicy {
    serde_json::from_value(json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "BackupPolicy",
        "metadata": {"name": "daily", "namespace": NS},
        "spec": {"schedule": "@daily", "jobConfig": {
            "serviceAccountName": "backup", "bucketConfig": {"bucketName": "b"},
            "workVolume": {"emptyDir": {}}}}
    }))
    .unwrap()
}

/// `can-i` against one Role and its binding, for `who`; `(group, resource)`, `name`.
struct CanI<'a> {
    role: &'a k8s_openapi::api::rbac::v1::Role,
    binding: &'a k8s_openapi::api::rbac::v1::RoleBinding,
    who: Requester,
}

impl CanI<'_> {
    fn can(&self, verb: &str, (group, resource): (&str, &str), name: &str) -> bool {
        can(
            &[self.role],
            &[self.binding],
            &self.who,
            &Request {
                verb,
                group,
                resource,
                name,
                namespace: NS,
            },
        )
    }

    /// Asserts every `(verb, resource, name)` of `allowed` is allowed and every one of
    /// `denied` denied.
    fn check(&self, allowed: &[(&str, (&str, &str), &str)], denied: &[(&str, (&str, &str), &str)]) {
        for (verb, resource, name) in allowed {
            assert!(
                self.can(verb, *resource, name),
                "{verb} {resource:?} {name:?} must be allowed"
            );
        }
        for (verb, resource, name) in denied {
            assert!(
                !self.can(verb, *resource, name),
                "{verb} {resource:?} {name:?} must be denied"
            );
        }
    }
}

/// What a restore Job's ServiceAccount may do besides the program's own calls: the first
/// group is what `moco restore` (and MOCO's, for MySQL) calls, the second what it never needs.
const RESTORE_DENIED: &[(&str, (&str, &str), &str)] = &[
    ("update", CLUSTERS, "db"),
    ("patch", CLUSTERS, "db"),
    ("delete", CLUSTERS, "db"),
    ("get", CLUSTERS, "other"),
    ("update", STATUS, "other"),
    ("patch", STATUS, "other"),
    ("get", PODS, "moco-db-1"),
    ("get", PODS, "moco-other-0"),
    ("delete", PODS, "moco-db-1"),
    ("delete", PODS, "moco-other-0"),
    ("delete", PODS, "web-0"),
    ("list", PODS, ""),
    ("update", PODS, "moco-db-0"),
    ("patch", PODS, "moco-db-0"),
    ("update", EVENTS, "e"),
    ("get", ("", "secrets"), "moco-db"),
];

#[test]
fn a_mariadb_restore_may_restart_instance_0_and_record_its_time_only() {
    let c = cluster("mariadb", restore_spec());
    let objects = render(&c, None);
    let r = objects.restore.as_ref().unwrap();
    let sa = CanI {
        role: &r.role,
        binding: &r.role_binding,
        who: Requester::service_account(NS, "restorer"),
    };
    sa.check(
        &[
            ("get", CLUSTERS, "db"),
            ("update", STATUS, "db"),
            ("get", PODS, "moco-db-0"),
            ("delete", PODS, "moco-db-0"),
            ("create", EVENTS, ""),
        ],
        RESTORE_DENIED,
    );
    let stranger = CanI {
        who: Requester::service_account(NS, "default"),
        ..sa
    };
    stranger.check(
        &[],
        &[("get", CLUSTERS, "db"), ("delete", PODS, "moco-db-0")],
    );
}

#[test]
fn a_mysql_restore_may_read_instance_0_and_record_its_time_only() {
    let c = cluster("mysql", restore_spec());
    let objects = render(&c, None);
    let r = objects.restore.as_ref().unwrap();
    let sa = CanI {
        role: &r.role,
        binding: &r.role_binding,
        who: Requester::service_account(NS, "restorer"),
    };
    // MOCO's restore reads Pod 0 for its address; it deletes nothing.
    let mut denied = RESTORE_DENIED.to_vec();
    denied.push(("delete", PODS, "moco-db-0"));
    sa.check(
        &[
            ("get", CLUSTERS, "db"),
            ("update", STATUS, "db"),
            ("get", PODS, "moco-db-0"),
            ("create", EVENTS, ""),
        ],
        &denied,
    );
}

#[test]
fn a_backup_may_list_pods_and_record_its_status_only() {
    for flavor in ["mysql", "mariadb"] {
        let c = cluster(flavor, json!({"backupPolicyName": "daily"}));
        let p = policy();
        let objects = render(&c, Some(&p));
        let b = objects.backup.as_ref().unwrap();
        let sa = CanI {
            role: &b.role,
            binding: &b.role_binding,
            who: Requester::service_account(NS, "backup"),
        };
        // Both programs (and the binlog archiver, which runs as the same account) get the
        // cluster, list its Pods, write status.backup and create Events; nothing else.
        sa.check(
            &[
                ("get", CLUSTERS, "db"),
                ("update", STATUS, "db"),
                ("list", PODS, ""),
                ("create", EVENTS, ""),
            ],
            &[
                ("update", CLUSTERS, "db"),
                ("patch", CLUSTERS, "db"),
                ("get", CLUSTERS, "other"),
                ("update", STATUS, "other"),
                ("delete", PODS, "moco-db-0"),
                ("update", PODS, "moco-db-0"),
                ("patch", PODS, "moco-db-0"),
                ("update", EVENTS, "e"),
                ("patch", EVENTS, "e"),
                ("get", ("", "secrets"), "moco-db"),
            ],
        );
    }
}
