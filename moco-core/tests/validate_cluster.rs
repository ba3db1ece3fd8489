//! Table tests of the `MySQLCluster` admission rules (MOCO's validating webhook).

use moco_core::validate::{
    ClaimTemplateView, ClusterView, ContainerPortView, ContainerView, Rule, StorageClassFacts,
    StorageFacts, Violation, storage_growth, validate_cluster_create, validate_cluster_update,
};
use serde_json::json;

fn container(name: &str) -> ContainerView {
    ContainerView {
        name: Some(name.to_owned()),
        ports: Vec::new(),
    }
}

fn port(name: Option<&str>, number: Option<i32>) -> ContainerPortView {
    ContainerPortView {
        name: name.map(str::to_owned),
        container_port: number,
    }
}

fn claim(name: &str, storage: Option<&str>, class: Option<&str>) -> ClaimTemplateView {
    ClaimTemplateView {
        name: name.to_owned(),
        storage_request: storage.map(str::to_owned),
        storage_class_name: class.map(str::to_owned),
    }
}

/// A cluster every rule accepts.
fn valid() -> ClusterView {
    ClusterView {
        name: "test".into(),
        replicas: 3,
        containers: vec![container("mysqld")],
        init_containers: Vec::new(),
        volume_names: Vec::new(),
        claim_templates: vec![claim("mysql-data", Some("10Gi"), None)],
        server_id_base: 1,
        log_rotation_schedule: String::new(),
        log_rotation_size: 0,
        collectors: Vec::new(),
        disable_slow_query_log_container: false,
        restore: None,
        replication_source_secret_name: None,
    }
}

fn rules(v: &[Violation]) -> Vec<(Rule, String)> {
    v.iter().map(|v| (v.rule, v.field.to_string())).collect()
}

type Case = (
    &'static str,
    fn(&mut ClusterView),
    Vec<(Rule, &'static str)>,
);

#[test]
fn create_rules() {
    let cases: Vec<Case> = vec![
        ("valid", |_| {}, vec![]),
        ("name of 40 characters", |c| c.name = "a".repeat(40), vec![]),
        (
            "name of 41 characters",
            |c| c.name = "a".repeat(41),
            vec![(Rule::NameTooLong, "metadata.name")],
        ),
        (
            "no mysql-data claim",
            |c| c.claim_templates = vec![claim("data", Some("1Gi"), None)],
            vec![(Rule::MissingDataClaim, "spec.volumeClaimTemplates")],
        ),
        (
            "claim without storage",
            |c| c.claim_templates.push(claim("extra", None, None)),
            vec![(
                Rule::MissingStorageRequest,
                "spec.volumeClaimTemplates[1].spec.resources.requests.storage",
            )],
        ),
        (
            "claim with bad quantity",
            |c| c.claim_templates[0].storage_request = Some("ten gigs".into()),
            vec![(
                Rule::InvalidStorageRequest,
                "spec.volumeClaimTemplates[0].spec.resources.requests.storage",
            )],
        ),
        (
            "negative storage (issue 12, item 9)",
            |c| c.claim_templates[0].storage_request = Some("-1".into()),
            vec![(
                Rule::InvalidStorageRequest,
                "spec.volumeClaimTemplates[0].spec.resources.requests.storage",
            )],
        ),
        (
            "zero storage",
            |c| c.claim_templates[0].storage_request = Some("0Gi".into()),
            vec![(
                Rule::InvalidStorageRequest,
                "spec.volumeClaimTemplates[0].spec.resources.requests.storage",
            )],
        ),
        (
            "serverIDBase 0",
            |c| c.server_id_base = 0,
            vec![(Rule::ServerIdBase, "spec.serverIDBase")],
        ),
        (
            "serverIDBase negative",
            |c| c.server_id_base = -5,
            vec![(Rule::ServerIdBase, "spec.serverIDBase")],
        ),
        (
            "schedule every",
            |c| c.log_rotation_schedule = "@every 10s".into(),
            vec![],
        ),
        (
            "schedule cron",
            |c| c.log_rotation_schedule = "*/5 * * * *".into(),
            vec![],
        ),
        (
            "schedule bad",
            |c| c.log_rotation_schedule = "every five minutes".into(),
            vec![(Rule::LogRotationSchedule, "spec.logRotationSchedule")],
        ),
        (
            "log size positive",
            |c| c.log_rotation_size = 1 << 20,
            vec![],
        ),
        (
            "log size negative",
            |c| c.log_rotation_size = -1,
            vec![(Rule::LogRotationSize, "spec.logRotationSize")],
        ),
        ("replicas 1", |c| c.replicas = 1, vec![]),
        ("replicas 5", |c| c.replicas = 5, vec![]),
        (
            "replicas 2",
            |c| c.replicas = 2,
            vec![(Rule::ReplicasEven, "spec.replicas")],
        ),
        (
            "replicas 0",
            |c| c.replicas = 0,
            vec![
                (Rule::ReplicasEven, "spec.replicas"),
                (Rule::ReplicasNotPositive, "spec.replicas"),
            ],
        ),
        (
            "replicas -1",
            |c| c.replicas = -1,
            vec![(Rule::ReplicasNotPositive, "spec.replicas")],
        ),
        ("replicas 255", |c| c.replicas = 255, vec![]),
        (
            "replicas 257",
            |c| c.replicas = 257,
            vec![(Rule::ReplicasTooMany, "spec.replicas")],
        ),
        (
            "container without name",
            |c| c.containers.push(ContainerView::default()),
            vec![(
                Rule::ContainerNameMissing,
                "spec.podTemplate.spec.containers[1]",
            )],
        ),
        (
            "no mysqld",
            |c| c.containers = vec![container("mysql")],
            vec![(
                Rule::MysqldContainerMissing,
                "spec.podTemplate.spec.containers",
            )],
        ),
        (
            "agent container",
            |c| c.containers.push(container("agent")),
            vec![(
                Rule::ReservedContainerName,
                "spec.podTemplate.spec.containers[1]",
            )],
        ),
        (
            "slow-log container",
            |c| c.containers.push(container("slow-log")),
            vec![(
                Rule::ReservedContainerName,
                "spec.podTemplate.spec.containers[1]",
            )],
        ),
        (
            "slow-log container when sidecar disabled",
            |c| {
                c.containers.push(container("slow-log"));
                c.disable_slow_query_log_container = true;
            },
            vec![],
        ),
        (
            "mysqld-exporter container without collectors",
            |c| c.containers.push(container("mysqld-exporter")),
            vec![],
        ),
        (
            "mysqld-exporter container with collectors",
            |c| {
                c.containers.push(container("mysqld-exporter"));
                c.collectors = vec!["engine_innodb_status".into()];
            },
            vec![(
                Rule::ReservedContainerName,
                "spec.podTemplate.spec.containers[1]",
            )],
        ),
        (
            "moco-init as a container is fine",
            |c| c.containers.push(container("moco-init")),
            vec![],
        ),
        (
            "moco-init init container",
            |c| c.init_containers.push(container("moco-init")),
            vec![(
                Rule::ReservedInitContainerName,
                "spec.podTemplate.spec.initContainers[0]",
            )],
        ),
        (
            "copy-moco-init init container is not checked",
            |c| c.init_containers.push(container("copy-moco-init")),
            vec![],
        ),
        (
            "init container without name",
            |c| c.init_containers.push(ContainerView::default()),
            vec![(
                Rule::ContainerNameMissing,
                "spec.podTemplate.spec.initContainers[0]",
            )],
        ),
        (
            "reserved ports and names",
            |c| {
                c.containers[0].ports = vec![
                    port(Some("metrics"), Some(9104)),
                    port(None, Some(3306)),
                    port(Some("mysqlx"), Some(12345)),
                    port(Some("health"), Some(9081)),
                    port(Some("admin"), Some(33062)),
                    port(None, Some(33060)),
                    port(Some("mysql-admin"), None),
                ];
            },
            vec![
                (
                    Rule::ReservedPort,
                    "spec.podTemplate.spec.containers[0].ports[1].containerPort",
                ),
                (
                    Rule::ReservedPortName,
                    "spec.podTemplate.spec.containers[0].ports[2].name",
                ),
                (
                    Rule::ReservedPort,
                    "spec.podTemplate.spec.containers[0].ports[3].containerPort",
                ),
                (
                    Rule::ReservedPortName,
                    "spec.podTemplate.spec.containers[0].ports[3].name",
                ),
                (
                    Rule::ReservedPort,
                    "spec.podTemplate.spec.containers[0].ports[4].containerPort",
                ),
                (
                    Rule::ReservedPort,
                    "spec.podTemplate.spec.containers[0].ports[5].containerPort",
                ),
                (
                    Rule::ReservedPortName,
                    "spec.podTemplate.spec.containers[0].ports[6].name",
                ),
            ],
        ),
        (
            "reserved ports on other containers are fine",
            |c| {
                c.containers.push(ContainerView {
                    name: Some("sidecar".into()),
                    ports: vec![port(Some("mysql"), Some(3306))],
                })
            },
            vec![],
        ),
        (
            "reserved volume names",
            |c| {
                c.volume_names = [
                    "data",
                    "tmp",
                    "run",
                    "var-log",
                    "mysql-conf",
                    "mysql-conf-d",
                    "my-cnf-secret",
                    "slow-fluent-bit-config",
                ]
                .iter()
                .map(|s| Some((*s).to_owned()))
                .collect();
            },
            (1..8)
                .map(|i| {
                    (
                        Rule::ReservedVolumeName,
                        [
                            "",
                            "spec.podTemplate.spec.volumes[1]",
                            "spec.podTemplate.spec.volumes[2]",
                            "spec.podTemplate.spec.volumes[3]",
                            "spec.podTemplate.spec.volumes[4]",
                            "spec.podTemplate.spec.volumes[5]",
                            "spec.podTemplate.spec.volumes[6]",
                            "spec.podTemplate.spec.volumes[7]",
                        ][i],
                    )
                })
                .collect(),
        ),
        (
            "volumes not in MOCO's reserved list",
            |c| {
                c.volume_names = vec![
                    Some("grpc-cert".into()),
                    Some("shared".into()),
                    Some("mysql-data".into()),
                    None,
                ]
            },
            vec![],
        ),
    ];
    for (name, edit, want) in cases {
        let mut view = valid();
        edit(&mut view);
        let got = validate_cluster_create(&view);
        let want: Vec<(Rule, String)> = want.into_iter().map(|(r, f)| (r, f.to_owned())).collect();
        assert_eq!(rules(&got), want, "case {name:?}: {got:#?}");
    }
}

#[test]
fn messages_name_the_field_and_the_rule() {
    let mut view = valid();
    view.replicas = 2;
    view.server_id_base = 0;
    view.log_rotation_schedule = "* * *".into();
    view.log_rotation_size = -3;
    view.name = "x".repeat(41);
    let text: Vec<String> = validate_cluster_create(&view)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        text,
        vec![
            format!("metadata.name: name must be at most 40 characters long because names of generated StatefulSets and CronJobs derive from it; {:?} has 41", "x".repeat(41)),
            "spec.serverIDBase: serverIDBase must be a positive integer, got 0".to_owned(),
            "spec.logRotationSchedule: logRotationSchedule \"* * *\" is not a valid cron schedule: expected exactly 5 fields, found 3: \"* * *\"".to_owned(),
            "spec.logRotationSize: logRotationSize must not be negative, got -3".to_owned(),
            "spec.replicas: replicas must be a positive odd number, got 2".to_owned(),
        ]
    );
}

fn classes() -> StorageFacts {
    StorageFacts::Known(vec![
        StorageClassFacts {
            name: "fixed".into(),
            allow_volume_expansion: false,
            is_default: false,
        },
        StorageClassFacts {
            name: "elastic".into(),
            allow_volume_expansion: true,
            is_default: false,
        },
        StorageClassFacts {
            name: "standard".into(),
            allow_volume_expansion: false,
            is_default: true,
        },
    ])
}

type UpdateCase = (
    &'static str,
    fn(&mut ClusterView),
    fn(&mut ClusterView),
    StorageFacts,
    Vec<(Rule, &'static str)>,
);

#[test]
fn update_rules() {
    let cases: Vec<UpdateCase> = vec![
        ("unchanged", |_| {}, |_| {}, classes(), vec![]),
        (
            "long name is not checked on update",
            |o| o.name = "a".repeat(50),
            |n| n.name = "a".repeat(50),
            classes(),
            vec![],
        ),
        ("scale out", |_| {}, |n| n.replicas = 5, classes(), vec![]),
        // A shrink is allowed (MOCO refuses it); an even size still breaks the create rules.
        (
            "scale in",
            |o| o.replicas = 5,
            |n| n.replicas = 3,
            classes(),
            vec![],
        ),
        (
            "scale in to an even number breaks the create rules",
            |o| o.replicas = 3,
            |n| n.replicas = 2,
            classes(),
            vec![(Rule::ReplicasEven, "spec.replicas")],
        ),
        (
            "replication source added",
            |_| {},
            |n| n.replication_source_secret_name = Some("donor".into()),
            classes(),
            vec![(
                Rule::ReplicationSourceAdded,
                "spec.replicationSourceSecretName",
            )],
        ),
        (
            "replication source changed",
            |o| o.replication_source_secret_name = Some("donor".into()),
            |n| n.replication_source_secret_name = Some("other".into()),
            classes(),
            vec![(
                Rule::ReplicationSourceChanged,
                "spec.replicationSourceSecretName",
            )],
        ),
        (
            "replication source kept",
            |o| o.replication_source_secret_name = Some("donor".into()),
            |n| n.replication_source_secret_name = Some("donor".into()),
            classes(),
            vec![],
        ),
        (
            "replication source removed",
            |o| o.replication_source_secret_name = Some("donor".into()),
            |n| n.replication_source_secret_name = None,
            classes(),
            vec![],
        ),
        (
            "restore added",
            |_| {},
            |n| n.restore = Some(json!({"sourceName": "a"})),
            classes(),
            vec![(Rule::RestoreChanged, "spec.restore")],
        ),
        (
            "restore removed",
            |o| o.restore = Some(json!({"sourceName": "a"})),
            |n| n.restore = None,
            classes(),
            vec![(Rule::RestoreChanged, "spec.restore")],
        ),
        (
            "restore edited",
            |o| o.restore = Some(json!({"sourceName": "a"})),
            |n| n.restore = Some(json!({"sourceName": "b"})),
            classes(),
            vec![(Rule::RestoreChanged, "spec.restore")],
        ),
        (
            "restore kept",
            |o| o.restore = Some(json!({"sourceName": "a"})),
            |n| n.restore = Some(json!({"sourceName": "a"})),
            classes(),
            vec![],
        ),
        (
            "growth on default class that cannot expand",
            |_| {},
            |n| n.claim_templates[0].storage_request = Some("20Gi".into()),
            classes(),
            vec![(
                Rule::VolumeExpansionNotAllowed,
                "spec.volumeClaimTemplates[0]",
            )],
        ),
        (
            "growth on expandable class",
            |o| o.claim_templates[0].storage_class_name = Some("elastic".into()),
            |n| {
                n.claim_templates[0].storage_class_name = Some("elastic".into());
                n.claim_templates[0].storage_request = Some("10241Mi".into());
            },
            classes(),
            vec![],
        ),
        (
            "growth on fixed class",
            |o| o.claim_templates[0].storage_class_name = Some("fixed".into()),
            |n| {
                n.claim_templates[0].storage_class_name = Some("fixed".into());
                n.claim_templates[0].storage_request = Some("11G".into());
            },
            classes(),
            vec![(
                Rule::VolumeExpansionNotAllowed,
                "spec.volumeClaimTemplates[0].spec.storageClassName",
            )],
        ),
        (
            "growth on a missing class",
            |_| {},
            |n| {
                n.claim_templates[0].storage_class_name = Some("gone".into());
                n.claim_templates[0].storage_request = Some("1Ti".into());
            },
            classes(),
            vec![(
                Rule::StorageClassUnknown,
                "spec.volumeClaimTemplates[0].spec.storageClassName",
            )],
        ),
        (
            "growth without any default class",
            |_| {},
            |n| n.claim_templates[0].storage_request = Some("1Ti".into()),
            StorageFacts::Known(vec![]),
            vec![(Rule::StorageClassUnknown, "spec.volumeClaimTemplates[0]")],
        ),
        (
            "growth with unknown storage facts is not judged",
            |_| {},
            |n| n.claim_templates[0].storage_request = Some("1Ti".into()),
            StorageFacts::Unknown,
            vec![],
        ),
        (
            "same size written differently",
            |_| {},
            |n| n.claim_templates[0].storage_request = Some("10240Mi".into()),
            classes(),
            vec![],
        ),
        (
            "shrink is allowed",
            |_| {},
            |n| n.claim_templates[0].storage_request = Some("5Gi".into()),
            classes(),
            vec![],
        ),
        (
            "new claim template is not a growth",
            |_| {},
            |n| n.claim_templates.push(claim("logs", Some("1Ti"), None)),
            classes(),
            vec![],
        ),
    ];
    for (name, edit_old, edit_new, storage, want) in cases {
        let mut old = valid();
        edit_old(&mut old);
        let mut new = old.clone();
        edit_new(&mut new);
        let got = validate_cluster_update(&new, &old, &storage);
        let want: Vec<(Rule, String)> = want.into_iter().map(|(r, f)| (r, f.to_owned())).collect();
        assert_eq!(rules(&got), want, "case {name:?}: {got:#?}");
    }
}

#[test]
fn growth_is_reported_for_unchecked_callers() {
    let old = valid();
    let mut new = valid();
    new.claim_templates[0].storage_request = Some("20Gi".into());
    let growth = storage_growth(&new, &old);
    assert_eq!(growth.len(), 1);
    assert_eq!(
        (growth[0].from.as_str(), growth[0].to.as_str()),
        ("10Gi", "20Gi")
    );
    assert!(storage_growth(&old, &new).is_empty());
}

#[test]
fn update_messages() {
    let mut old = valid();
    old.replicas = 5;
    old.replication_source_secret_name = Some("a".into());
    let mut new = old.clone();
    new.replicas = 3;
    new.replication_source_secret_name = Some("b".into());
    let text: Vec<String> = validate_cluster_update(&new, &old, &classes())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        text,
        vec![
            "spec.replicationSourceSecretName: replicationSourceSecretName cannot be changed (from \"a\" to \"b\"); it can only be removed to stop replication",
        ]
    );
}
