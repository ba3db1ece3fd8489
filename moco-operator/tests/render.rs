//! The objects the operator builds for a cluster: snapshots of every example spec (reviewed by
//! hand, so a change in any field shows in review), and the rules behind them one by one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, Service};
use moco_api::backuppolicy::BackupPolicy;
use moco_api::mysqlcluster::{MySQLCluster, MySQLClusterStatus};
use moco_api::offline::parse_documents;
use moco_core::moco_accounts::MocoPasswords;
use moco_operator::render::offline::{OfflineRenderError, render_documents};
use moco_operator::render::{
    ClusterInputs, ClusterObjects, RenderError, RenderSettings, render_cluster,
};
use serde_json::{Value, json};

fn settings() -> RenderSettings {
    RenderSettings::new("moco-system")
}

fn passwords() -> MocoPasswords {
    let p = |s: &str| s.to_owned();
    MocoPasswords {
        admin: p("a"),
        agent: p("b"),
        repl: p("c"),
        clone_donor: p("d"),
        exporter: p("e"),
        backup: p("f"),
        readonly: p("g"),
        writable: p("h"),
    }
}

/// A cluster as the API server stores it after admission; `patch` is merged into `spec`.
fn cluster(patch: Value) -> MySQLCluster {
    let mut v = json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": "ns", "uid": "uid-1", "generation": 1},
        "spec": {
            "replicas": 3,
            "serverIDBase": 100,
            "podTemplate": {"spec": {"containers": [
                {"name": "mysqld", "image": "mysql:8.4"}
            ]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    });
    merge(&mut v["spec"], patch);
    serde_json::from_value(v).unwrap()
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

struct Inputs {
    user_config: BTreeMap<String, String>,
    passwords: MocoPasswords,
    policy: Option<BackupPolicy>,
    backup_job_active: bool,
    deployed_slow_log: Option<Container>,
    deployed_replicas: Option<u32>,
    settings: RenderSettings,
    reconciler_version: u32,
}

impl Inputs {
    fn new() -> Self {
        Inputs {
            user_config: BTreeMap::new(),
            passwords: passwords(),
            policy: None,
            backup_job_active: false,
            deployed_slow_log: None,
            deployed_replicas: None,
            settings: settings(),
            reconciler_version: 1,
        }
    }

    fn render(&self, cluster: &MySQLCluster) -> Result<ClusterObjects, RenderError> {
        render_cluster(
            &self.settings,
            &ClusterInputs {
                cluster,
                user_config: &self.user_config,
                passwords: &self.passwords,
                certificate_secret: None,
                mysql_certificate_secret: None,
                backup_policy: self.policy.as_ref(),
                backup_job_active: self.backup_job_active,
                deployed_slow_log: self.deployed_slow_log.as_ref(),
                deployed_replicas: self.deployed_replicas,
                reconciler_version: self.reconciler_version,
            },
        )
    }
}

fn render(cluster: &MySQLCluster) -> ClusterObjects {
    Inputs::new().render(cluster).unwrap()
}

fn pod(objects: &ClusterObjects) -> &PodSpec {
    objects
        .statefulset
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
}

fn container<'a>(spec: &'a PodSpec, name: &str) -> &'a Container {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn names(containers: &[Container]) -> Vec<&str> {
    containers.iter().map(|c| c.name.as_str()).collect()
}

// ---------------------------------------------------------------------------------------------
// Snapshots of the example specs, through `moco render`'s path.

#[test]
fn every_example_renders_as_reviewed() {
    let mut rendered = 0;
    for entry in
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/examples")).unwrap()
    {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.contains("kind: MySQLCluster") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let docs = parse_documents(&name, &text).unwrap();
        let out = render_documents(&docs, &settings()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut yaml = String::new();
        for object in &out.objects {
            yaml.push_str("---\n");
            yaml.push_str(&serde_saphyr::to_string(object).unwrap());
        }
        insta::assert_snapshot!(format!("example-{name}"), yaml);
        rendered += 1;
    }
    assert!(rendered >= 7, "only {rendered} examples rendered");
}

// ---------------------------------------------------------------------------------------------
// Names, labels, ownership.

#[test]
fn cluster_objects_are_owned_by_the_cluster_and_controller_objects_name_its_namespace() {
    let objects = render(&cluster(json!({})));
    let values = objects.to_values().unwrap();
    let mut owned = 0;
    for v in &values {
        let ns = v["metadata"]["namespace"].as_str().unwrap();
        let labels = &v["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/instance"], "db", "{v}");
        assert_eq!(labels["app.kubernetes.io/created-by"], "moco", "{v}");
        if ns == "moco-system" {
            assert_eq!(labels["app.kubernetes.io/instance-namespace"], "ns");
            assert!(v["metadata"].get("ownerReferences").is_none(), "{v}");
        } else {
            assert_eq!(ns, "ns");
            assert_eq!(
                v["metadata"]["ownerReferences"],
                json!([{"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
                        "name": "db", "uid": "uid-1", "controller": true,
                        "blockOwnerDeletion": true}]),
                "{v}"
            );
            owned += 1;
        }
    }
    let kinds: Vec<(&str, &str)> = values
        .iter()
        .map(|v| {
            (
                v["kind"].as_str().unwrap(),
                v["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("Secret", "mysql-ns.db"),
            ("Secret", "moco-db"),
            ("Secret", "moco-my-cnf-db"),
            ("Certificate", "moco-agent-ns.db"),
            ("ConfigMap", kinds[4].1),
            ("ConfigMap", kinds[5].1),
            ("ServiceAccount", "moco-db"),
            ("Role", "moco-db"),
            ("RoleBinding", "moco-db"),
            ("Service", "moco-db"),
            ("Service", "moco-db-primary"),
            ("Service", "moco-db-replica"),
            ("StatefulSet", "moco-db"),
            ("PodDisruptionBudget", "moco-db"),
        ]
    );
    assert!(kinds[4].1.starts_with("moco-db.") && kinds[4].1.len() == "moco-db.".len() + 8);
    assert!(kinds[5].1.starts_with("moco-slow-log-agent-config-db."));
    assert_eq!(owned, 12);
    // The claim templates carry the owner too, so PVCs go with the cluster.
    let claims = objects
        .statefulset
        .spec
        .as_ref()
        .unwrap()
        .volume_claim_templates
        .as_ref()
        .unwrap();
    assert_eq!(
        claims[0].metadata.owner_references.as_ref().unwrap()[0].uid,
        "uid-1"
    );
    assert_eq!(
        claims[0].spec.as_ref().unwrap().access_modes,
        Some(vec!["ReadWriteOnce".to_owned()])
    );
}

#[test]
fn passwords_land_in_both_secrets_and_the_option_files() {
    let objects = render(&cluster(json!({})));
    for s in [&objects.controller_secret, &objects.user_secret] {
        let data = s.data.as_ref().unwrap();
        assert_eq!(data.len(), 8);
        assert_eq!(data["ADMIN_PASSWORD"].0, b"a");
        assert_eq!(data["REPLICATION_PASSWORD"].0, b"c");
        assert_eq!(data["WRITABLE_PASSWORD"].0, b"h");
        assert_eq!(
            s.metadata.annotations.as_ref().unwrap()["moco.cybozu.com/secret-version"],
            "1"
        );
    }
    let files = objects.mycnf_secret.data.as_ref().unwrap();
    let keys: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "moco-admin-my.cnf",
            "moco-backup-my.cnf",
            "moco-exporter-my.cnf",
            "moco-readonly-my.cnf",
            "moco-writable-my.cnf"
        ]
    );
    assert_eq!(
        String::from_utf8(files["moco-readonly-my.cnf"].0.clone()).unwrap(),
        "[client]\nuser=\"moco-readonly\"\npassword=\"g\"\n"
    );
}

// ---------------------------------------------------------------------------------------------
// The Pod template.

#[test]
fn mysqld_is_completed_and_the_system_containers_follow_in_order() {
    let c = cluster(json!({
        "collectors": ["engine_innodb_status", "info_schema.innodb_metrics"],
        "startupWaitSeconds": 95,
        "podTemplate": {"spec": {"containers": [
            {"name": "mysqld", "image": "mysql:8.4", "args": ["--user-arg"],
             "ports": [{"name": "custom", "containerPort": 1234}],
             "livenessProbe": {"exec": {"command": ["true"]}, "failureThreshold": 7},
             "readinessProbe": {"periodSeconds": 3}},
            {"name": "sidecar", "image": "busybox"},
            {"name": "agent", "image": "user-agent-is-dropped"}
        ]}}
    }));
    let objects = render(&c);
    let spec = pod(&objects);
    assert_eq!(
        names(&spec.containers),
        ["mysqld", "agent", "slow-log", "mysqld-exporter", "sidecar"]
    );
    assert_eq!(
        names(spec.init_containers.as_ref().unwrap()),
        ["copy-moco-init", "moco-init"]
    );
    let mysqld = container(spec, "mysqld");
    assert_eq!(
        mysqld.args.as_deref().unwrap(),
        ["--user-arg", "--defaults-file=/etc/mysql/my.cnf"]
    );
    let ports: Vec<(&str, i32)> = mysqld
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| (p.name.as_deref().unwrap(), p.container_port))
        .collect();
    assert_eq!(
        ports,
        [
            ("custom", 1234),
            ("mysql", 3306),
            ("mysqlx", 33060),
            ("mysql-admin", 33062),
            ("health", 9081)
        ]
    );
    // The handler is forced; the user's other probe fields stay.
    let live = mysqld.liveness_probe.as_ref().unwrap();
    assert!(live.exec.is_none());
    assert_eq!(
        live.http_get.as_ref().unwrap().path.as_deref(),
        Some("/healthz")
    );
    assert_eq!(live.failure_threshold, Some(7));
    let ready = mysqld.readiness_probe.as_ref().unwrap();
    assert_eq!(
        ready.http_get.as_ref().unwrap().path.as_deref(),
        Some("/readyz")
    );
    assert_eq!(ready.period_seconds, Some(3));
    let startup = mysqld.startup_probe.as_ref().unwrap();
    assert_eq!(startup.failure_threshold, Some(9));
    assert_eq!(startup.period_seconds, Some(10));
    let mounts: Vec<(&str, &str)> = mysqld
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    assert!(mounts.contains(&("mysql-data", "/var/lib/mysql")));
    assert!(mounts.contains(&("my-cnf-secret", "/mysql-credentials")));
    assert_eq!(
        container(spec, "mysqld-exporter").args.as_deref().unwrap(),
        [
            "--config.my-cnf=/mysql-credentials/moco-exporter-my.cnf",
            "--collect.engine_innodb_status",
            "--collect.info_schema.innodb_metrics"
        ]
    );
    // moco-init runs in the mysqld image and gets the server_id base last.
    let init = container(spec, "moco-init");
    assert_eq!(init.image.as_deref(), Some("mysql:8.4"));
    assert_eq!(init.command.as_ref().unwrap().last().unwrap(), "100");
    assert_eq!(spec.service_account_name.as_deref(), Some("moco-db"));
    assert_eq!(spec.termination_grace_period_seconds, Some(300));
}

/// The preStop sleep is MOCO's 20 s unless the operator is told otherwise, and the user's own
/// preStop cannot shorten it (the switchover away from a deleted primary relies on it).
#[test]
fn the_pre_stop_sleep_follows_the_operator_flag_and_not_the_template() {
    let c = cluster(json!({"podTemplate": {"spec": {"containers": [
        {"name": "mysqld", "image": "mysql:8.4",
         "lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}
    ]}}}));
    let pre_stop = |objects: &ClusterObjects| {
        container(pod(objects), "mysqld")
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
            .and_then(|h| h.exec.as_ref())
            .and_then(|e| e.command.clone())
    };
    assert_eq!(
        pre_stop(&render(&c)),
        Some(vec!["sleep".to_owned(), "20".to_owned()])
    );
    let mut inputs = Inputs::new();
    inputs.settings.pre_stop_seconds = 3;
    assert_eq!(
        pre_stop(&inputs.render(&c).unwrap()),
        Some(vec!["sleep".to_owned(), "3".to_owned()])
    );
}

#[test]
fn user_sidecars_named_like_optional_system_ones_are_kept_only_when_those_are_off() {
    let both = json!({"podTemplate": {"spec": {"containers": [
        {"name": "mysqld", "image": "mysql:8.4"},
        {"name": "slow-log", "image": "mine"},
        {"name": "mysqld-exporter", "image": "mine"}
    ]}}});
    // Slow log on (default), no collectors: the user's exporter stays, their slow-log goes.
    let objects = render(&cluster(both.clone()));
    let spec = pod(&objects);
    assert_eq!(
        names(&spec.containers),
        ["mysqld", "agent", "slow-log", "mysqld-exporter"]
    );
    assert_ne!(container(spec, "slow-log").image.as_deref(), Some("mine"));
    assert_eq!(
        container(spec, "mysqld-exporter").image.as_deref(),
        Some("mine")
    );
    // Slow log off, collectors on: the reverse.
    let mut patch = both;
    merge(
        &mut patch,
        json!({"disableSlowQueryLogContainer": true, "collectors": ["x"]}),
    );
    let objects = render(&cluster(patch));
    let spec = pod(&objects);
    assert_eq!(container(spec, "slow-log").image.as_deref(), Some("mine"));
    assert_ne!(
        container(spec, "mysqld-exporter").image.as_deref(),
        Some("mine")
    );
    assert!(objects.slow_log_config_map.is_none());
    let volumes: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert!(!volumes.contains(&"slow-fluent-bit-config"));
}

#[test]
fn security_defaults_fill_only_unset_fields_and_the_flag_turns_them_off() {
    let c = cluster(json!({"podTemplate": {"spec": {
    "securityContext": {"fsGroup": 5},
    "containers": [
        {"name": "mysqld", "image": "mysql:8.4", "securityContext": {"runAsUser": 7}},
        {"name": "sidecar", "image": "busybox"}
    ]}}}));
    let objects = render(&c);
    let spec = pod(&objects);
    let psc = spec.security_context.as_ref().unwrap();
    assert_eq!(psc.fs_group, Some(5));
    assert_eq!(
        psc.fs_group_change_policy.as_deref(),
        Some("OnRootMismatch")
    );
    let mysqld = container(spec, "mysqld").security_context.as_ref().unwrap();
    assert_eq!(
        (mysqld.run_as_user, mysqld.run_as_group),
        (Some(7), Some(10000))
    );
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        if c.name != "mysqld" {
            let sc = c.security_context.as_ref().unwrap();
            assert_eq!(
                (sc.run_as_user, sc.run_as_group),
                (Some(10000), Some(10000)),
                "{}",
                c.name
            );
        }
    }

    let mut inputs = Inputs::new();
    inputs.settings.default_security_context = false;
    let objects = inputs.render(&cluster(json!({}))).unwrap();
    let spec = pod(&objects);
    assert_eq!(spec.security_context.as_ref().unwrap().fs_group, None);
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        assert_eq!(
            c.security_context.as_ref(),
            Some(&Default::default()),
            "{}",
            c.name
        );
    }
}

#[test]
fn overwrite_containers_replace_resources_and_security_context_of_system_containers() {
    let c = cluster(json!({"podTemplate": {
    "spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]},
    "overwriteContainers": [
        {"name": "agent", "resources": {"requests": {"cpu": "1"}}},
        {"name": "moco-init", "securityContext": {"runAsNonRoot": true}}
    ]}}));
    let objects = render(&c);
    let spec = pod(&objects);
    let agent = container(spec, "agent").resources.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(agent).unwrap(),
        json!({"requests": {"cpu": "1"}})
    );
    let init = container(spec, "moco-init")
        .security_context
        .as_ref()
        .unwrap();
    assert_eq!(
        serde_json::to_value(init).unwrap(),
        json!({"runAsNonRoot": true})
    );
    // Others keep the defaults.
    let copy = container(spec, "copy-moco-init")
        .resources
        .as_ref()
        .unwrap();
    assert_eq!(
        serde_json::to_value(copy).unwrap(),
        json!({"requests": {"cpu": "100m", "memory": "512Mi"},
               "limits": {"cpu": "100m", "memory": "512Mi"}})
    );
}

#[test]
fn anti_affinity_is_added_only_when_the_template_has_no_affinity() {
    let objects = render(&cluster(json!({})));
    let affinity = serde_json::to_value(pod(&objects).affinity.as_ref().unwrap()).unwrap();
    let term = &affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(term["weight"], 100);
    assert_eq!(
        term["podAffinityTerm"]["topologyKey"],
        "kubernetes.io/hostname"
    );
    assert_eq!(
        term["podAffinityTerm"]["labelSelector"]["matchExpressions"][1],
        json!({"key": "app.kubernetes.io/instance", "operator": "In", "values": ["db"]})
    );
    let user = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}});
    let objects = render(&cluster(
        json!({"podTemplate": {"spec": {"affinity": user.clone()}}}),
    ));
    assert_eq!(
        serde_json::to_value(pod(&objects).affinity.as_ref().unwrap()).unwrap(),
        user
    );
}

#[test]
fn a_deployed_slow_log_container_is_kept_as_it_is() {
    let mut inputs = Inputs::new();
    inputs.deployed_slow_log = Some(Container {
        name: "slow-log".into(),
        image: Some("fluent-bit:old".into()),
        ..Container::default()
    });
    inputs.settings.images.fluent_bit = "fluent-bit:new".into();
    let objects = inputs.render(&cluster(json!({}))).unwrap();
    assert_eq!(
        container(pod(&objects), "slow-log").image.as_deref(),
        Some("fluent-bit:old")
    );
    inputs.deployed_slow_log = None;
    let objects = inputs.render(&cluster(json!({}))).unwrap();
    assert_eq!(
        container(pod(&objects), "slow-log").image.as_deref(),
        Some("fluent-bit:new")
    );
}

#[test]
fn reserved_init_container_names_are_refused_by_field() {
    let c = cluster(json!({"podTemplate": {"spec": {
        "containers": [{"name": "mysqld", "image": "mysql:8.4"}],
        "initContainers": [{"name": "ok", "image": "x"}, {"name": "copy-moco-init", "image": "x"}]
    }}}));
    let err = Inputs::new().render(&c).unwrap_err().to_string();
    assert!(
        err.starts_with("spec.podTemplate.spec.initContainers[1].name:"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// my.cnf, slow log.

#[test]
fn mycnf_follows_user_options_and_memory_and_names_bad_values() {
    let base = render(&cluster(json!({}))).mycnf_config_map;
    let mut inputs = Inputs::new();
    inputs
        .user_config
        .insert("max_connections".into(), "5000".into());
    let custom = inputs.render(&cluster(json!({}))).unwrap().mycnf_config_map;
    assert_ne!(base.metadata.name, custom.metadata.name);
    assert!(custom.data.as_ref().unwrap()["my.cnf"].contains("max_connections = 5000\n"));

    let sized = |resources: Value| {
        let c = cluster(json!({"podTemplate": {"spec": {"containers": [
            {"name": "mysqld", "image": "mysql:8.4", "resources": resources}]}}}));
        Inputs::new()
            .render(&c)
            .map(|o| o.mycnf_config_map.data.unwrap()["my.cnf"].clone())
    };
    // The buffer pool is sized from the request when there is one, else from the limit.
    let by_request =
        sized(json!({"requests": {"memory": "4Gi"}, "limits": {"memory": "8Gi"}})).unwrap();
    let by_limit = sized(json!({"limits": {"memory": "4Gi"}})).unwrap();
    assert_eq!(by_request, by_limit);
    assert_ne!(
        by_request,
        sized(json!({"limits": {"memory": "8Gi"}})).unwrap()
    );
    let err = sized(json!({"requests": {"memory": "4Gx"}}))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("spec.podTemplate.spec.containers[0].resources.requests.memory:"),
        "{err}"
    );

    let mut inputs = Inputs::new();
    inputs.user_config.insert("bad key".into(), "1".into());
    let c = cluster(json!({"mysqlConfigMapName": "opts"}));
    let err = inputs.render(&c).unwrap_err().to_string();
    assert!(
        err.starts_with("ConfigMap opts (spec.mysqlConfigMapName):"),
        "{err}"
    );
}

#[test]
fn slow_log_template_expands_path_and_is_named_by_the_template() {
    let c = cluster(json!({"slowQueryLogConfigTmpl": "[INPUT]\n    Path {{ .Path }}\n"}));
    let cm = render(&c).slow_log_config_map.unwrap();
    assert_eq!(
        cm.data.as_ref().unwrap()["fluent-bit.conf"],
        "[INPUT]\n    Path /var/log/mysql/mysql.slow\n"
    );
    let other = render(&cluster(json!({"slowQueryLogConfigTmpl": "x"})))
        .slow_log_config_map
        .unwrap();
    assert_ne!(cm.metadata.name, other.metadata.name);
    let err = Inputs::new()
        .render(&cluster(json!({"slowQueryLogConfigTmpl": "{{ .Env }}"})))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("spec.slowQueryLogConfigTmpl:"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Services.

fn service_json(s: &Service) -> Value {
    serde_json::to_value(s).unwrap()
}

#[test]
fn role_services_merge_the_template_and_force_selector_and_ports() {
    let c = cluster(json!({"primaryServiceTemplate": {
        "metadata": {"labels": {"team": "a", "app.kubernetes.io/name": "overridden"},
                     "annotations": {"lb": "yes"}},
        "spec": {"type": "LoadBalancer", "selector": {"x": "y"}, "ports": [
            {"name": "mysql", "port": 1, "targetPort": 1},
            {"name": "extra", "port": 9999}
        ]}
    }}));
    let objects = render(&c);
    let [headless, primary, replica] = &objects.services;
    let p = service_json(primary);
    assert_eq!(p["metadata"]["labels"]["team"], "a");
    assert_eq!(p["metadata"]["labels"]["app.kubernetes.io/name"], "mysql");
    assert_eq!(p["metadata"]["annotations"]["lb"], "yes");
    assert_eq!(p["spec"]["type"], "LoadBalancer");
    assert_eq!(
        p["spec"]["selector"],
        json!({"app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": "db",
               "app.kubernetes.io/created-by": "moco", "moco.cybozu.com/role": "primary"})
    );
    assert_eq!(
        p["spec"]["ports"],
        json!([
            {"name": "mysql", "protocol": "TCP", "port": 3306, "targetPort": "mysql"},
            {"name": "extra", "port": 9999},
            {"name": "mysqlx", "protocol": "TCP", "port": 33060, "targetPort": "mysqlx"}
        ])
    );
    let r = service_json(replica);
    assert_eq!(r["spec"]["selector"]["moco.cybozu.com/role"], "replica");
    assert!(r["spec"].get("type").is_none());
    let h = service_json(headless);
    assert_eq!(h["spec"]["clusterIP"], "None");
    assert_eq!(h["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(h["spec"]["ports"].as_array().unwrap().len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Replicas, PDB, backup, restore.

#[test]
fn offline_scales_to_zero_and_the_budget_follows_the_core_decision() {
    let replicas = |o: &ClusterObjects| o.statefulset.spec.as_ref().unwrap().replicas;
    let max_unavailable = |o: &ClusterObjects| {
        o.pdb
            .as_ref()
            .map(|p| serde_json::to_value(p).unwrap()["spec"]["maxUnavailable"].clone())
    };
    let five = render(&cluster(json!({"replicas": 5})));
    assert_eq!(replicas(&five), Some(5));
    assert_eq!(max_unavailable(&five), Some(json!(2)));
    let offline = render(&cluster(json!({"offline": true})));
    assert_eq!(replicas(&offline), Some(0));
    assert_eq!(max_unavailable(&offline), None);
    assert_eq!(
        max_unavailable(&render(&cluster(json!({"replicas": 1})))),
        None
    );
    let mut inputs = Inputs::new();
    inputs.backup_job_active = true;
    assert_eq!(
        max_unavailable(&inputs.render(&cluster(json!({}))).unwrap()),
        Some(json!(0))
    );
}

fn policy() -> BackupPolicy {
    serde_json::from_value(json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "BackupPolicy",
        "metadata": {"name": "daily", "namespace": "ns"},
        "spec": {"schedule": "@daily", "jobConfig": {
            "serviceAccountName": "sa",
            "bucketConfig": {"bucketName": "b", "region": "r", "usePathStyle": true},
            "workVolume": {"emptyDir": {}},
            "maxMemory": "8Gi"
        }}
    }))
    .unwrap()
}

#[test]
fn backup_objects_exist_with_the_policy_and_a_missing_policy_names_the_field() {
    assert!(render(&cluster(json!({}))).backup.is_none());
    let c = cluster(json!({"backupPolicyName": "daily"}));
    let err = Inputs::new().render(&c).unwrap_err().to_string();
    assert_eq!(
        err,
        "spec.backupPolicyName: BackupPolicy ns/daily not found"
    );
    let mut inputs = Inputs::new();
    inputs.policy = Some(policy());
    let backup = inputs.render(&c).unwrap().backup.unwrap();
    let cj = serde_json::to_value(&backup.workload).unwrap();
    assert_eq!(cj["metadata"]["name"], "moco-backup-db");
    assert_eq!(
        cj["metadata"]["labels"]["app.kubernetes.io/name"],
        "mysql-backup"
    );
    assert_eq!(cj["spec"]["schedule"], "@daily");
    assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
    let pod = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "sa");
    assert_eq!(pod["restartPolicy"], "Never");
    // The emptyDir given gets the data claim's 1Gi as its limit (the tests of the work volume).
    assert_eq!(
        pod["volumes"],
        json!([{"name": "work", "emptyDir": {"sizeLimit": "1Gi"}}])
    );
    let ctr = &pod["containers"][0];
    assert_eq!(
        ctr["args"],
        json!([
            "backup",
            "--threads=4",
            "--region=r",
            "--use-path-style",
            "--backend-type=s3",
            "b",
            "ns",
            "db"
        ])
    );
    assert_eq!(
        ctr["env"][0],
        json!({"name": "MYSQL_PASSWORD", "valueFrom": {"secretKeyRef":
            {"name": "moco-db", "key": "BACKUP_PASSWORD"}}})
    );
    assert_eq!(
        ctr["resources"],
        json!({"requests": {"cpu": "4", "memory": "4Gi"}, "limits": {"memory": "8Gi"}})
    );
    assert_eq!(ctr["securityContext"]["readOnlyRootFilesystem"], true);
    let binding = serde_json::to_value(&backup.role_binding).unwrap();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}])
    );
    let role = serde_json::to_value(&backup.role).unwrap();
    assert_eq!(role["rules"][0]["resourceNames"], json!(["db"]));
}

#[test]
fn a_mariadb_backup_job_reaches_the_agents_and_mysql_ones_stay_mocos() {
    let mut inputs = Inputs::new();
    inputs.policy = Some(policy());
    let job_pod = |annotations: Value| {
        let c = cluster(json!({"backupPolicyName": "daily"}));
        let mut v = serde_json::to_value(&c).unwrap();
        v["metadata"]["annotations"] = annotations;
        let c: MySQLCluster = serde_json::from_value(v).unwrap();
        let objects = inputs.render(&c).unwrap();
        let cj = serde_json::to_value(&objects.backup.as_ref().unwrap().workload).unwrap();
        let init = pod(&objects)
            .init_containers
            .clone()
            .unwrap()
            .into_iter()
            .find(|c| c.name == "moco-init")
            .unwrap();
        (
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"].clone(),
            init,
        )
    };
    let (mysql, init) = job_pod(json!({}));
    assert_eq!(
        mysql["volumes"],
        json!([{"name": "work", "emptyDir": {"sizeLimit": "1Gi"}}])
    );
    assert_eq!(mysql["containers"][0]["env"].as_array().unwrap().len(), 1);
    assert!(
        init.env_from.is_none(),
        "MOCO's init container has no passwords"
    );
    // MySQL: MOCO's backup image and its entrypoint, so MOCO's format both ways.
    assert_eq!(
        mysql["containers"][0]["image"],
        "ghcr.io/cybozu-go/moco-backup:0.36.0"
    );
    assert!(mysql["containers"][0].get("command").is_none());

    let (mariadb, init) = job_pod(json!({"moco-rs/flavor": "mariadb"}));
    assert_eq!(
        mariadb["volumes"][1],
        json!({"name": "grpc-cert", "secret": {"secretName": "moco-db-grpc"}})
    );
    let ctr = &mariadb["containers"][0];
    // MariaDB: `moco backup` from the agent image (it has the MariaDB tools).
    assert_eq!(ctr["image"], json!(settings().images.agent));
    assert_eq!(ctr["command"], json!(["/moco"]));
    assert_eq!(ctr["args"][0], "backup");
    assert_eq!(
        ctr["volumeMounts"][1],
        json!({"name": "grpc-cert", "mountPath": "/grpc-cert", "readOnly": true})
    );
    assert_eq!(ctr["env"][0]["name"], "MYSQL_PASSWORD");
    assert_eq!(
        ctr["env"][1],
        json!({"name": "CLONE_DONOR_PASSWORD", "valueFrom": {"secretKeyRef":
            {"name": "moco-db", "key": "CLONE_DONOR_PASSWORD"}}})
    );
    let from = serde_json::to_value(init.env_from.unwrap()).unwrap();
    assert_eq!(from, json!([{"secretRef": {"name": "moco-db"}}]));
}

#[test]
fn the_binlog_archiver_runs_with_the_policy_when_the_annotation_asks() {
    let with = |annotations: Value, policy_name: bool| {
        let spec = if policy_name {
            json!({"backupPolicyName": "daily"})
        } else {
            json!({})
        };
        let mut v = serde_json::to_value(cluster(spec)).unwrap();
        v["metadata"]["annotations"] = annotations;
        let c: MySQLCluster = serde_json::from_value(v).unwrap();
        let mut inputs = Inputs::new();
        inputs.policy = Some(policy());
        inputs.render(&c)
    };
    let mariadb = |interval: &str| json!({"moco-rs/flavor": "mariadb", "moco-rs/binlog-archive-interval": interval});
    assert!(
        with(json!({"moco-rs/flavor": "mariadb"}), true)
            .unwrap()
            .archive
            .is_none()
    );
    let d = with(mariadb("5s"), true).unwrap().archive.unwrap();
    let d = serde_json::to_value(&d).unwrap();
    assert_eq!(d["metadata"]["name"], "moco-archive-db");
    assert_eq!(d["metadata"]["ownerReferences"][0]["kind"], "MySQLCluster");
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
    // Its own component label: the selector must not take the backup Jobs' Pods.
    assert_eq!(
        d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"],
        "binlog-archive"
    );
    assert_eq!(
        d["spec"]["selector"]["matchLabels"],
        d["spec"]["template"]["metadata"]["labels"]
    );
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "sa");
    assert_eq!(pod["restartPolicy"], "Always");
    let ctr = &pod["containers"][0];
    assert_eq!(
        ctr["args"],
        json!([
            "archive",
            "--every=5s",
            "--region=r",
            "--use-path-style",
            "--backend-type=s3",
            "b",
            "ns",
            "db"
        ])
    );
    assert_eq!(
        ctr["env"][0]["valueFrom"]["secretKeyRef"]["key"],
        "BACKUP_PASSWORD"
    );

    let field = "metadata.annotations[\"moco-rs/binlog-archive-interval\"]";
    for (annotations, policy, wanted) in [
        (mariadb("5s"), false, "needs spec.backupPolicyName"),
        (mariadb("500ms"), true, "between 1s and 1h"),
        (mariadb("2h"), true, "between 1s and 1h"),
        (mariadb("often"), true, "\"often\""),
        (
            json!({"moco-rs/binlog-archive-interval": "5s"}),
            true,
            "has no archiver",
        ),
    ] {
        let e = with(annotations, policy).unwrap_err().to_string();
        assert!(e.starts_with(field) && e.contains(wanted), "{e}");
    }
    // A MySQL cluster's archiver runs this project's backup image, as its Jobs do.
    let mut v = serde_json::to_value(cluster(json!({"backupPolicyName": "daily"}))).unwrap();
    v["metadata"]["annotations"] = json!({"moco-rs/binlog-archive-interval": "5s"});
    let c: MySQLCluster = serde_json::from_value(v).unwrap();
    let mut inputs = Inputs::new();
    inputs.policy = Some(policy());
    inputs.settings.images.backup = "example.com/moco-rs-backup:1".into();
    let d = serde_json::to_value(inputs.render(&c).unwrap().archive.unwrap()).unwrap();
    let ctr = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(ctr["image"], "example.com/moco-rs-backup:1");
    assert_eq!(
        ctr["command"],
        Value::Null,
        "the image's own entrypoint, /moco"
    );
    assert_eq!(ctr["args"][0], "archive");
}

#[test]
fn the_max_rate_annotation_caps_the_backup_job_and_a_bad_value_names_it() {
    let render_with = |annotations: Value, backup_image: Option<&str>| {
        let c = annotated(json!({"backupPolicyName": "daily"}), annotations);
        let mut inputs = Inputs::new();
        inputs.policy = Some(policy());
        if let Some(image) = backup_image {
            inputs.settings.images.backup = image.into();
        }
        inputs.render(&c)
    };
    let args = |objects: ClusterObjects| {
        let cj = serde_json::to_value(objects.backup.unwrap().workload).unwrap();
        cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"].clone()
    };
    let mariadb = json!({"moco-rs/flavor": "mariadb", "moco-rs/backup-max-rate": "60Mi"});
    assert_eq!(
        args(render_with(mariadb, None).unwrap()),
        json!([
            "backup",
            "--threads=4",
            "--max-rate=60Mi",
            "--region=r",
            "--use-path-style",
            "--backend-type=s3",
            "b",
            "ns",
            "db"
        ])
    );
    // MySQL: with this project's backup image (its mysqlsh gets maxRate); MOCO's has no flag.
    let mysql = json!({"moco-rs/backup-max-rate": "100M"});
    let a = args(render_with(mysql.clone(), Some("example.com/moco-rs-backup:1")).unwrap());
    assert_eq!(a[2], "--max-rate=100M");
    let field = "metadata.annotations[\"moco-rs/backup-max-rate\"]: ";
    for (annotations, wanted) in [
        (mysql, "which has no --max-rate"),
        (
            json!({"moco-rs/flavor": "mariadb", "moco-rs/backup-max-rate": "60m"}),
            "\"60m\": `m` means thousandths",
        ),
        (
            json!({"moco-rs/flavor": "mariadb", "moco-rs/backup-max-rate": "0"}),
            "\"0\": must be a positive",
        ),
    ] {
        let e = render_with(annotations, None).unwrap_err().to_string();
        assert!(e.starts_with(field) && e.contains(wanted), "{e}");
    }
    // Without the annotation, MOCO's arguments exactly (the first backup test).
    let plain = args(render_with(json!({"moco-rs/flavor": "mariadb"}), None).unwrap());
    assert!(!plain.to_string().contains("max-rate"), "{plain}");
}

#[test]
fn restore_job_exists_until_the_restore_is_recorded() {
    let mut c = cluster(json!({"restore": {
        "sourceName": "src", "sourceNamespace": "old",
        "restorePoint": "2026-05-01T12:34:56Z",
        "jobConfig": {"serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"},
                      "workVolume": {"emptyDir": {}}}
    }}));
    let restore = render(&c).restore.unwrap();
    let job = serde_json::to_value(&restore.workload).unwrap();
    assert_eq!(job["metadata"]["name"], "moco-restore-db");
    assert_eq!(job["spec"]["backoffLimit"], 0);
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["args"],
        json!([
            "restore",
            "--threads=4",
            "--backend-type=s3",
            "b",
            "old",
            "src",
            "ns",
            "db",
            "20260501-123456",
            "",
            ""
        ])
    );
    assert!(job["spec"]["template"]["spec"].get("affinity").is_none());
    // MOCO's Job and Role for MySQL; MariaDB's streams to instance 0's agent with the
    // cluster's certificate, and deletes its Pod.
    let role = serde_json::to_value(&restore.role).unwrap();
    assert_eq!(role["rules"][2]["verbs"], json!(["get"]));
    assert_eq!(role["rules"][2]["resourceNames"], json!(["moco-db-0"]));
    assert_eq!(
        job["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let mut mariadb = c.clone();
    mariadb.metadata.annotations = Some(BTreeMap::from([(
        "moco-rs/flavor".to_owned(),
        "mariadb".to_owned(),
    )]));
    let restore = render(&mariadb).restore.unwrap();
    let role = serde_json::to_value(&restore.role).unwrap();
    assert_eq!(role["rules"][2]["resources"], json!(["pods"]));
    assert_eq!(role["rules"][2]["verbs"], json!(["get", "delete"]));
    let spec = &serde_json::to_value(&restore.workload).unwrap()["spec"]["template"]["spec"];
    assert_eq!(
        spec["volumes"][1],
        json!({"name": "grpc-cert", "secret": {"secretName": "moco-db-grpc"}})
    );
    let env = spec["containers"][0]["env"].as_array().unwrap();
    assert_eq!(env.len(), 1, "the admin password only: {env:?}");
    assert_eq!(env[0]["valueFrom"]["secretKeyRef"]["key"], "ADMIN_PASSWORD");
    c.status = Some(MySQLClusterStatus {
        restored_time: Some(serde_json::from_value(json!("2026-05-02T00:00:00Z")).unwrap()),
        ..MySQLClusterStatus::default()
    });
    assert!(render(&c).restore.is_none());
}

// ---------------------------------------------------------------------------------------------
// The Jobs' work volume: an emptyDir without a limit gets one (issue 29).

/// The work volume of the backup CronJob, the archiver and the restore Job of a cluster of
/// `flavor` whose data claim requests `storage` (none when `None`), all with `work`.
fn work_volumes(flavor: &str, storage: Option<&str>, work: Value) -> Vec<Value> {
    let job_config = json!({"serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"},
                            "workVolume": work});
    let resources = match storage {
        Some(s) => json!({"requests": {"storage": s}}),
        None => json!({}),
    };
    let mut c = annotated(
        json!({"backupPolicyName": "daily",
               "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                                         "spec": {"resources": resources}}],
               "restore": {"sourceName": "src", "sourceNamespace": "old",
                           "restorePoint": "2026-05-01T12:34:56Z", "jobConfig": job_config}}),
        json!({"moco-rs/flavor": flavor, "moco-rs/binlog-archive-interval": "5s"}),
    );
    if flavor == "mysql" {
        c.metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove("moco-rs/flavor");
    }
    let mut policy = serde_json::to_value(policy()).unwrap();
    policy["spec"]["jobConfig"]["workVolume"] = work;
    let mut inputs = Inputs::new();
    inputs.policy = Some(serde_json::from_value(policy).unwrap());
    inputs.settings.images.backup = "example.com/moco-rs-backup:1".into();
    let objects = inputs.render(&c).unwrap();
    let backup = serde_json::to_value(&objects.backup.unwrap().workload).unwrap();
    let archive = serde_json::to_value(objects.archive.unwrap()).unwrap();
    let restore = serde_json::to_value(&objects.restore.unwrap().workload).unwrap();
    vec![
        backup["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"][0].clone(),
        archive["spec"]["template"]["spec"]["volumes"][0].clone(),
        restore["spec"]["template"]["spec"]["volumes"][0].clone(),
    ]
}

#[test]
fn a_mariadb_work_emptydir_without_a_limit_holds_two_binlogs_and_a_gibibyte() {
    let limited = json!({"name": "work", "emptyDir": {"sizeLimit": "3Gi"}});
    assert_eq!(
        work_volumes("mariadb", Some("10Gi"), json!({"emptyDir": {}})),
        vec![limited.clone(), limited.clone(), limited]
    );
}

#[test]
fn a_mysql_work_emptydir_without_a_limit_is_bounded_by_the_data_claim() {
    let limited = json!({"name": "work", "emptyDir": {"sizeLimit": "10Gi"}});
    assert_eq!(
        work_volumes("mysql", Some("10Gi"), json!({"emptyDir": {}})),
        vec![limited.clone(), limited.clone(), limited]
    );
    // No storage request (the webhook refuses it; `moco render` does not): no bound known.
    let unlimited = json!({"name": "work", "emptyDir": {}});
    assert_eq!(
        work_volumes("mysql", None, json!({"emptyDir": {}})),
        vec![unlimited.clone(), unlimited.clone(), unlimited]
    );
}

#[test]
fn a_user_size_limit_is_kept_and_only_a_missing_one_is_filled() {
    for flavor in ["mysql", "mariadb"] {
        let work = json!({"emptyDir": {"medium": "Memory", "sizeLimit": "500Mi"}});
        let kept = json!({"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": "500Mi"}});
        assert_eq!(
            work_volumes(flavor, Some("10Gi"), work),
            vec![kept.clone(), kept.clone(), kept]
        );
        let filled = work_volumes(
            flavor,
            Some("10Gi"),
            json!({"emptyDir": {"medium": "Memory"}}),
        );
        assert!(
            filled[0]["emptyDir"]["sizeLimit"].is_string(),
            "{flavor}: {filled:?}"
        );
    }
}

#[test]
fn a_claim_or_ephemeral_work_volume_is_left_as_given_and_only_an_emptydir_is_limited() {
    let ephemeral = json!({"ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}}}});
    for flavor in ["mysql", "mariadb"] {
        for work in [
            json!({"persistentVolumeClaim": {"claimName": "scratch"}}),
            ephemeral.clone(),
        ] {
            let mut given = work.clone();
            given["name"] = json!("work");
            assert_eq!(
                work_volumes(flavor, Some("10Gi"), work),
                vec![given.clone(), given.clone(), given]
            );
        }
        let empty = work_volumes(flavor, Some("10Gi"), json!({"emptyDir": {}}));
        assert!(
            empty[0]["emptyDir"]["sizeLimit"].is_string(),
            "{flavor}: {empty:?}"
        );
    }
}

/// A shrink keeps the StatefulSet at its deployed size (the leaving Pods are its highest
/// ordinals) until the status says they may go: the members dropped to the new size and the
/// primary is not among them. A growth and a new StatefulSet take `spec.replicas` at once.
#[test]
fn a_shrink_holds_the_statefulset_until_the_leaving_pods_may_go() {
    let replicas = |deployed: Option<u32>, members: Option<i32>, primary: i32| {
        let mut c = cluster(json!({"replicas": 3}));
        c.status = Some(MySQLClusterStatus {
            current_primary_index: primary,
            semi_sync_members: members,
            ..MySQLClusterStatus::default()
        });
        let mut inputs = Inputs::new();
        inputs.deployed_replicas = deployed;
        inputs
            .render(&c)
            .unwrap()
            .statefulset
            .spec
            .unwrap()
            .replicas
    };
    assert_eq!(replicas(None, None, 0), Some(3));
    assert_eq!(replicas(Some(1), Some(1), 0), Some(3), "growth");
    assert_eq!(
        replicas(Some(5), None, 0),
        Some(5),
        "the engine has not looked"
    );
    assert_eq!(replicas(Some(5), Some(5), 0), Some(5), "still members");
    assert_eq!(replicas(Some(5), Some(3), 4), Some(5), "the primary leaves");
    assert_eq!(replicas(Some(5), Some(3), 0), Some(3), "released");
}

#[test]
fn force_rolling_update_annotation_is_copied_to_the_statefulset() {
    let mut c = cluster(json!({}));
    assert!(render(&c).statefulset.metadata.annotations.is_none());
    c.metadata.annotations = Some(BTreeMap::from([(
        "moco.cybozu.com/force-rolling-update".to_owned(),
        "true".to_owned(),
    )]));
    assert_eq!(
        render(&c).statefulset.metadata.annotations.unwrap()["moco.cybozu.com/force-rolling-update"],
        "true"
    );
}

#[test]
fn a_cluster_without_uid_or_namespace_is_refused_by_field() {
    let mut c = cluster(json!({}));
    c.metadata.uid = None;
    assert_eq!(
        Inputs::new().render(&c).unwrap_err().to_string(),
        "metadata.uid is missing"
    );
}

// ---------------------------------------------------------------------------------------------
// `moco render`'s path.

#[test]
fn offline_render_refuses_invalid_clusters_and_missing_config_maps() {
    let text = r#"
apiVersion: moco.cybozu.com/v1beta2
kind: MySQLCluster
metadata: {name: db}
spec:
  replicas: 2
  podTemplate: {spec: {containers: [{name: mysqld, image: mysql}]}}
  volumeClaimTemplates: [{metadata: {name: mysql-data}, spec: {resources: {requests: {storage: 1Gi}}}}]
"#;
    let docs = parse_documents("m.yaml", text).unwrap();
    match render_documents(&docs, &settings()) {
        Err(OfflineRenderError::Invalid { findings }) => {
            assert!(
                findings.iter().any(|f| f.field == "spec.replicas"),
                "{findings:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let text = text.replace("replicas: 2", "replicas: 3\n  mysqlConfigMapName: opts");
    let docs = parse_documents("m.yaml", &text).unwrap();
    let err = render_documents(&docs, &settings())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.mysqlConfigMapName: ConfigMap default/opts is not among the manifests"),
        "{err}"
    );
    let with_cm = format!(
        "{text}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: opts}}\ndata: {{max_connections: '9'}}\n"
    );
    let docs = parse_documents("m.yaml", &with_cm).unwrap();
    let out = render_documents(&docs, &settings()).unwrap();
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("spec.serverIDBase is unset"))
    );
    let cm = out
        .objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["data"].get("my.cnf").is_some())
        .unwrap();
    assert!(
        cm["data"]["my.cnf"]
            .as_str()
            .unwrap()
            .contains("max_connections = 9")
    );
}

#[test]
fn the_flavor_annotation_picks_the_server_family_of_my_cnf() {
    let mut c = cluster(json!({}));
    assert!(render(&c).mycnf_config_map.data.unwrap()["my.cnf"].contains("[mysqld]\n"));
    c.metadata.annotations = Some(BTreeMap::from([(
        "moco-rs/flavor".to_owned(),
        "mariadb".to_owned(),
    )]));
    let mycnf = render(&c).mycnf_config_map.data.unwrap()["my.cnf"].clone();
    assert!(
        mycnf.contains("[mariadbd]\n") && !mycnf.contains("[mysqld]\n"),
        "{mycnf}"
    );
    c.metadata.annotations = Some(BTreeMap::from([(
        "moco-rs/flavor".to_owned(),
        "percona".to_owned(),
    )]));
    let err = Inputs::new().render(&c).unwrap_err().to_string();
    assert!(
        err.starts_with("metadata.annotations[\"moco-rs/flavor\"]: \"percona\" is not"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// TLS (`moco-rs/tls`).

/// `cluster(spec)` with `annotations`.
fn annotated(spec: Value, annotations: Value) -> MySQLCluster {
    let mut v = serde_json::to_value(cluster(spec)).unwrap();
    v["metadata"]["annotations"] = annotations;
    serde_json::from_value(v).unwrap()
}

fn mounts(c: &Container) -> Vec<(String, String)> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect()
}

#[test]
fn tls_adds_the_certificate_its_copies_and_the_servers_options_and_nothing_without_it() {
    let mut inputs = Inputs::new();
    inputs.policy = Some(policy());
    let spec = json!({"backupPolicyName": "daily"});
    let mariadb = json!({"moco-rs/flavor": "mariadb"});
    let plain = inputs.render(&annotated(spec.clone(), mariadb)).unwrap();
    assert!(plain.tls.is_none());
    let mycnf = |o: &ClusterObjects| o.mycnf_config_map.data.as_ref().unwrap()["my.cnf"].clone();
    assert!(!mycnf(&plain).contains("ssl"), "{}", mycnf(&plain));
    let tls_mount = ("mysql-tls".to_owned(), "/mysql-tls".to_owned());
    assert!(!mounts(container(pod(&plain), "mysqld")).contains(&tls_mount));

    let c = annotated(
        spec.clone(),
        json!({"moco-rs/flavor": "mariadb", "moco-rs/tls": "true"}),
    );
    let objects = inputs.render(&c).unwrap();
    let tls = objects.tls.as_ref().unwrap();
    assert_eq!(
        tls.certificate["metadata"],
        json!({"name": "moco-mysql-ns.db", "namespace": "moco-system", "labels": {
            "app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": "db",
            "app.kubernetes.io/created-by": "moco",
            "app.kubernetes.io/instance-namespace": "ns"}})
    );
    assert_eq!(
        tls.certificate["spec"]["dnsNames"],
        json!([
            "*.moco-db.ns.svc",
            "moco-db-primary.ns.svc",
            "moco-db-replica.ns.svc",
            "moco-db-primary.ns",
            "moco-db-replica.ns",
            "localhost"
        ])
    );
    assert_eq!(tls.certificate["spec"]["ipAddresses"], json!(["127.0.0.1"]));
    assert_eq!(
        tls.certificate["spec"]["issuerRef"],
        json!({"kind": "Issuer", "name": "moco-mysql-issuer"})
    );
    // Before cert-manager has written its Secret there is nothing to copy.
    assert!(tls.server_secret.is_none() && tls.ca_secret.is_none());
    let text = mycnf(&objects);
    for line in [
        "ssl_ca = /mysql-tls/ca.crt\n",
        "ssl_cert = /mysql-tls/tls.crt\n",
        "ssl_key = /mysql-tls/tls.key\n",
        "require_secure_transport = ON\n",
    ] {
        assert!(text.contains(line), "{line:?} not in {text}");
    }
    let spec_pod = pod(&objects);
    assert!(mounts(container(spec_pod, "mysqld")).contains(&tls_mount));
    let agent = container(spec_pod, "agent");
    assert!(mounts(agent).contains(&tls_mount));
    let args = agent.args.clone().unwrap();
    assert!(
        args.windows(2)
            .any(|w| w == ["--mysql-tls-ca", "/mysql-tls/ca.crt"]),
        "{args:?}"
    );
    let volume = spec_pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "mysql-tls")
        .unwrap();
    assert_eq!(
        volume.secret.as_ref().unwrap().secret_name.as_deref(),
        Some("moco-db-mysql-tls")
    );
    // Only those two: the other containers talk over the socket, if at all, and never see
    // the key.
    for c in spec_pod
        .containers
        .iter()
        .chain(spec_pod.init_containers.iter().flatten())
        .filter(|c| c.name != "mysqld" && c.name != "agent")
    {
        assert!(!mounts(c).contains(&tls_mount), "{} mounts the key", c.name);
    }

    // The backup Job gets the CA alone, and the flag before its positional arguments.
    let cj = serde_json::to_value(&objects.backup.as_ref().unwrap().workload).unwrap();
    let job = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert!(
        job["volumes"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "mysql-ca", "secret": {"secretName": "moco-db-mysql-ca"}})),
        "{}",
        job["volumes"]
    );
    let ctr = &job["containers"][0];
    assert_eq!(ctr["args"][0], "backup");
    assert_eq!(ctr["args"][1], "--mysql-tls-ca=/mysql-tls/ca.crt");
    assert!(
        ctr["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "mysql-ca", "mountPath": "/mysql-tls", "readOnly": true}))
    );

    // A user option of the same name is replaced: the server's TLS is not the user's to undo.
    inputs
        .user_config
        .insert("require_secure_transport".into(), "OFF".into());
    let text = mycnf(&inputs.render(&c).unwrap());
    assert!(text.contains("require_secure_transport = ON\n"), "{text}");
    assert!(!text.contains("require_secure_transport = OFF"), "{text}");
}

#[test]
fn tls_copies_take_the_cert_manager_secret_and_a_bad_value_names_the_annotation() {
    let source: BTreeMap<String, k8s_openapi::ByteString> = ["ca.crt", "tls.crt", "tls.key"]
        .iter()
        .map(|k| {
            (
                (*k).to_owned(),
                k8s_openapi::ByteString(k.as_bytes().to_vec()),
            )
        })
        .collect();
    let c = annotated(json!({}), json!({"moco-rs/tls": "true"}));
    let inputs = Inputs::new();
    let objects = render_cluster(
        &inputs.settings,
        &ClusterInputs {
            cluster: &c,
            user_config: &inputs.user_config,
            passwords: &inputs.passwords,
            certificate_secret: None,
            mysql_certificate_secret: Some(&source),
            backup_policy: None,
            backup_job_active: false,
            deployed_slow_log: None,
            deployed_replicas: None,
            reconciler_version: 1,
        },
    )
    .unwrap();
    let tls = objects.tls.unwrap();
    let server = tls.server_secret.unwrap();
    assert_eq!(server.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(
        server.metadata.owner_references.unwrap()[0].uid,
        "uid-1",
        "the copies go with the cluster"
    );
    assert_eq!(server.data.unwrap().len(), 3);
    let ca = tls.ca_secret.unwrap();
    assert_eq!(ca.metadata.name.as_deref(), Some("moco-db-mysql-ca"));
    assert_eq!(
        ca.data.unwrap().keys().collect::<Vec<_>>(),
        ["ca.crt"],
        "clients never get the key"
    );

    // An organisation's own CA signs instead of the install manifests' when named.
    let corp = annotated(
        json!({}),
        json!({"moco-rs/tls": "true", "moco-rs/tls-issuer": "ClusterIssuer/corp-ca"}),
    );
    let objects = Inputs::new().render(&corp).unwrap();
    assert_eq!(
        objects.tls.unwrap().certificate["spec"]["issuerRef"],
        json!({"kind": "ClusterIssuer", "name": "corp-ca"})
    );

    let bad = annotated(json!({}), json!({"moco-rs/tls": "on"}));
    let e = Inputs::new().render(&bad).unwrap_err().to_string();
    assert_eq!(
        e,
        "metadata.annotations[\"moco-rs/tls\"]: \"on\" is not a boolean: use \"true\" or \"false\""
    );
}

/// The prevent-delete admission policy of `deploy/` selects the mysqld Pods the operator
/// renders (its `objectSelector` names their labels) and no Pod of the backup or restore Jobs
/// (issue 29: it applied to every Pod).
#[test]
fn the_prevent_delete_policy_selects_the_rendered_mysqld_pods_only() {
    let path = moco_testkit::repo().join("deploy/admission-policy.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let vap = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .unwrap();
    let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(vap["spec"]["matchConstraints"]["objectSelector"].clone()).unwrap();
    let selects = |labels: &BTreeMap<String, String>| {
        let by_label = selector
            .match_labels
            .iter()
            .flatten()
            .all(|(k, v)| labels.get(k) == Some(v));
        let by_expression = selector.match_expressions.iter().flatten().all(|e| {
            assert_eq!(e.operator, "Exists", "{e:?}");
            labels.contains_key(&e.key)
        });
        by_label && by_expression
    };
    let mut inputs = Inputs::new();
    inputs.policy = Some(policy());
    let c = cluster(json!({"backupPolicyName": "daily", "restore": {
        "sourceName": "src", "sourceNamespace": "old",
        "restorePoint": "2026-05-01T12:34:56Z",
        "jobConfig": {"serviceAccountName": "sa", "bucketConfig": {"bucketName": "b"},
                      "workVolume": {"emptyDir": {}}}
    }}));
    let objects = inputs.render(&c).unwrap();
    let sts = objects.statefulset.spec.as_ref().unwrap();
    let labels = sts
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    assert!(selects(&labels), "the mysqld Pods: {labels:?}");
    let backup = serde_json::to_value(&objects.backup.unwrap().workload).unwrap();
    let restore = serde_json::to_value(&objects.restore.unwrap().workload).unwrap();
    for pod_labels in [
        &backup["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"],
        &restore["spec"]["template"]["metadata"]["labels"],
    ] {
        let labels: BTreeMap<String, String> = serde_json::from_value(pod_labels.clone()).unwrap();
        assert!(!selects(&labels), "a Job's Pod: {labels:?}");
    }
}

/// Reconciler version 3 (the upgrade-test version) renders exactly what version 2 renders
/// plus one Pod-template annotation: the upgrade test on the real control plane then proves
/// the version choice, not a rendering difference of its own.
#[test]
fn version_3_is_version_2_with_one_pod_annotation() {
    let c = cluster(json!({}));
    let mut inputs = Inputs::new();
    inputs.reconciler_version = 2;
    let v2 = serde_json::to_value(&inputs.render(&c).unwrap().statefulset).unwrap();
    inputs.reconciler_version = 3;
    let mut v3 = serde_json::to_value(&inputs.render(&c).unwrap().statefulset).unwrap();
    let annotations = v3["spec"]["template"]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations")
        .unwrap();
    assert_eq!(annotations, json!({"moco-rs/reconciler-version": "3"}));
    assert_eq!(v2, v3);
}

/// Reconciler version 2 renders what version 1 renders but for mysqld's termination message
/// policy (the contract: a cluster on version 1 keeps version 1's Pods until its spec changes).
#[test]
fn version_2_is_version_1_with_mysqld_falling_back_to_its_log() {
    let c = cluster(json!({}));
    let mut inputs = Inputs::new();
    let v1 = serde_json::to_value(&inputs.render(&c).unwrap().statefulset).unwrap();
    inputs.reconciler_version = 2;
    let mut v2 = serde_json::to_value(&inputs.render(&c).unwrap().statefulset).unwrap();
    let mysqld = v2["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap();
    assert_eq!(mysqld["name"], "mysqld");
    assert_eq!(
        mysqld.remove("terminationMessagePolicy"),
        Some(json!("FallbackToLogsOnError"))
    );
    assert_eq!(v1, v2);
}
