//! The Pod template of the mysqld StatefulSet: the user's template with MOCO's containers,
//! init containers, volumes, probes and security defaults added.
//!
//! The user's `mysqld` container is kept and completed (configuration file, ports, probes,
//! mounts); the system containers are built here and can only have their `resources` and
//! `securityContext` replaced (`spec.podTemplate.overwriteContainers`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvFromSource,
    EnvVar, EnvVarSource, ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, SecretEnvSource, SecretVolumeSource,
    SecurityContext, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use moco_api::cluster::{
    ADMIN_PORT, AGENT_PORT, CREDENTIALS_DIR, ClusterId, MYSQL_PORT, MYSQLX_PORT, TLS_CA_FILE,
    TLS_MOUNT_PATH,
};
use moco_api::labels::{APP_MYSQL, CREATED_BY, LABEL_CREATED_BY, LABEL_INSTANCE, LABEL_NAME};
use moco_api::mysqlcluster::{MySQLClusterSpec, OverwriteableContainerName};
use moco_core::facts::Flavor;
use moco_core::resources::PodTemplateFacts;
use moco_core::validate::{DATA_CLAIM_NAME, MYSQLD_CONTAINER_NAME};

use super::RenderSettings;
use super::meta::overlay;

/// The user and group the containers run as unless the template says otherwise.
pub const DEFAULT_UID: i64 = 10000;
/// Seconds Kubernetes waits for mysqld to stop when the template does not say.
pub const DEFAULT_TERMINATION_GRACE_SECONDS: i64 = 300;
/// The agent's mysqld health port (`/healthz`, `/readyz`).
pub const HEALTH_PORT: i32 = 9081;
/// The agent's metrics port.
pub const AGENT_METRICS_PORT: i32 = 8080;
/// mysqld_exporter's port.
pub const EXPORTER_PORT: i32 = 9104;
/// How long mysqld keeps serving after a Pod is told to stop unless the operator is told
/// otherwise (`--mysqld-pre-stop-seconds`; MOCO's fixed value): Services stop routing to the
/// Pod, and a switchover away from a deleted primary (whose read-only wait is half of it)
/// finishes first.
pub const DEFAULT_PRE_STOP_SECONDS: u32 = 20;

/// Names of the containers and init containers the operator adds.
pub mod names {
    /// The agent sidecar.
    pub const AGENT: &str = "agent";
    /// The slow query log sidecar.
    pub const SLOW_LOG: &str = "slow-log";
    /// The mysqld_exporter sidecar.
    pub const EXPORTER: &str = "mysqld-exporter";
    /// Copies `moco-init` from the agent image to the shared volume.
    pub const COPY_INIT: &str = "copy-moco-init";
    /// Initialises the data directory and writes the per-instance options.
    pub const INIT: &str = "moco-init";
}

/// What the Pod template is built from.
#[derive(Clone, Debug)]
pub struct PodInputs<'a> {
    /// The cluster's identity.
    pub id: &'a ClusterId,
    /// The operator's settings.
    pub settings: &'a RenderSettings,
    /// The admitted spec: its plain fields (those that needed parsing are in
    /// [`super::checked::Checked`]).
    pub spec: &'a MySQLClusterSpec,
    /// The value of `moco.cybozu.com/force-rolling-update`, copied to the StatefulSet.
    pub force_rolling_update: Option<&'a str>,
    /// The user's `mysqld` container ([`super::checked::Checked::mysqld`]).
    pub mysqld: &'a Container,
    /// The server family (the agent's memory: MariaDB copies run in its container).
    pub flavor: Flavor,
    /// Name of the my.cnf ConfigMap.
    pub mycnf_config_map: String,
    /// Name of the slow-log ConfigMap, when the sidecar runs.
    pub slow_log_config_map: Option<String>,
    /// `lower_case_table_names` from the user's options, passed to the init program (it can
    /// only be set when the data directory is created).
    pub lower_case_table_names: Option<String>,
    /// The deployed `slow-log` container to keep (see [`super::ClusterInputs`]).
    pub deployed_slow_log: Option<&'a Container>,
    /// The cluster has TLS ([`super::tls`]): mysqld and the agent mount its certificate.
    pub tls: bool,
    /// The reconciler version that renders ([`super::version`]).
    pub reconciler_version: u32,
}

fn quantity(text: &str) -> Quantity {
    Quantity(text.to_owned())
}

/// Requests equal to limits: the sidecars are guaranteed what they are limited to.
fn fixed_resources(cpu: &str, memory: &str) -> ResourceRequirements {
    let amounts = BTreeMap::from([
        ("cpu".to_owned(), quantity(cpu)),
        ("memory".to_owned(), quantity(memory)),
    ]);
    ResourceRequirements {
        requests: Some(amounts.clone()),
        limits: Some(amounts),
        ..ResourceRequirements::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn tcp_port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: number,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

fn pod_name_env() -> EnvVar {
    EnvVar {
        name: "POD_NAME".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.name".into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn http_get(path: &str) -> HTTPGetAction {
    HTTPGetAction {
        path: Some(path.to_owned()),
        port: IntOrString::String("health".into()),
        scheme: Some("HTTP".into()),
        ..HTTPGetAction::default()
    }
}

/// The user's probe (or a new one) with its handler replaced by an HTTP GET of `path`.
fn probe_with_handler(probe: Option<Probe>, path: &str) -> Probe {
    let mut p = probe.unwrap_or_default();
    p.exec = None;
    p.grpc = None;
    p.tcp_socket = None;
    p.http_get = Some(http_get(path));
    p
}

/// Names of the emptyDir and configuration volumes every Pod gets.
mod volume {
    pub(super) const TMP: &str = "tmp";
    pub(super) const RUN: &str = "run";
    pub(super) const VAR_LOG: &str = "var-log";
    pub(super) const CONF_D: &str = "mysql-conf-d";
    pub(super) const SHARED: &str = "shared";
    pub(super) const CONF: &str = "mysql-conf";
    pub(super) const MYCNF_SECRET: &str = "my-cnf-secret";
    pub(super) const GRPC_CERT: &str = "grpc-cert";
    pub(super) const MYSQL_TLS: &str = "mysql-tls";
    pub(super) const SLOW_LOG_CONFIG: &str = "slow-fluent-bit-config";
}

/// Mode 0644 for mounted ConfigMaps and Secrets: mysqld runs as a user other than the
/// file owner and must read them.
const FILE_MODE: i32 = 0o644;

fn system_volumes(inputs: &PodInputs<'_>) -> Vec<Volume> {
    let empty = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let config_map = |name: &str, config_map: &str| Volume {
        name: name.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.to_owned(),
            default_mode: Some(FILE_MODE),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    let secret = |name: &str, secret: String| Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret),
            default_mode: Some(FILE_MODE),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mut out = vec![
        empty(volume::TMP),
        empty(volume::RUN),
        empty(volume::VAR_LOG),
        empty(volume::CONF_D),
        empty(volume::SHARED),
        config_map(volume::CONF, &inputs.mycnf_config_map),
        secret(volume::MYCNF_SECRET, inputs.id.mycnf_secret()),
        secret(volume::GRPC_CERT, inputs.id.grpc_secret()),
    ];
    if let Some(name) = &inputs.slow_log_config_map {
        out.push(config_map(volume::SLOW_LOG_CONFIG, name));
    }
    if inputs.tls {
        out.push(secret(volume::MYSQL_TLS, inputs.id.mysql_tls_secret()));
    }
    out
}

/// The user's `mysqld` container, completed.
fn mysqld(inputs: &PodInputs<'_>) -> Container {
    let mut c = inputs.mysqld.clone();
    c.args
        .get_or_insert_with(Vec::new)
        .push("--defaults-file=/etc/mysql/my.cnf".into());
    c.lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec![
                    "sleep".into(),
                    inputs.settings.pre_stop_seconds.to_string(),
                ]),
            }),
            ..LifecycleHandler::default()
        }),
        ..c.lifecycle.unwrap_or_default()
    });
    c.ports.get_or_insert_with(Vec::new).extend([
        tcp_port("mysql", MYSQL_PORT),
        tcp_port("mysqlx", MYSQLX_PORT),
        tcp_port("mysql-admin", ADMIN_PORT),
        tcp_port("health", HEALTH_PORT),
    ]);
    let mut startup = probe_with_handler(c.startup_probe.take(), "/healthz");
    if startup.period_seconds.is_none() {
        startup.period_seconds = Some(10);
    }
    if startup.failure_threshold.is_none() {
        startup.failure_threshold = Some((inputs.spec.startup_wait_seconds / 10).max(1));
    }
    c.startup_probe = Some(startup);
    c.liveness_probe = Some(probe_with_handler(c.liveness_probe.take(), "/healthz"));
    c.readiness_probe = Some(probe_with_handler(c.readiness_probe.take(), "/readyz"));
    c.volume_mounts.get_or_insert_with(Vec::new).extend([
        mount(volume::TMP, "/tmp", false),
        mount(volume::RUN, "/run", false),
        mount(volume::VAR_LOG, "/var/log/mysql", false),
        mount(volume::CONF, "/etc/mysql", false),
        mount(volume::CONF_D, "/etc/mysql-conf.d", false),
        mount(volume::MYCNF_SECRET, CREDENTIALS_DIR, true),
        mount(DATA_CLAIM_NAME, "/var/lib/mysql", false),
    ]);
    if inputs.tls {
        c.volume_mounts.get_or_insert_with(Vec::new).push(mount(
            volume::MYSQL_TLS,
            TLS_MOUNT_PATH,
            true,
        ));
    }
    super::version::mysqld_container(inputs.reconciler_version, &mut c);
    c
}

fn agent(inputs: &PodInputs<'_>) -> Container {
    let spec = inputs.spec;
    let mut args = Vec::new();
    if let Some(delay) = spec.max_delay_seconds {
        args.extend(["--max-delay".to_owned(), format!("{delay}s")]);
    }
    if !spec.log_rotation_schedule.is_empty() {
        args.extend([
            "--log-rotation-schedule".to_owned(),
            spec.log_rotation_schedule.clone(),
        ]);
    }
    if spec.log_rotation_size > 0 {
        args.extend([
            "--log-rotation-size".to_owned(),
            spec.log_rotation_size.to_string(),
        ]);
    }
    if spec.agent_use_localhost {
        args.extend(["--mysqld-localhost".to_owned(), "true".to_owned()]);
    }
    let mut volume_mounts = vec![
        mount(volume::RUN, "/run", false),
        mount(volume::VAR_LOG, "/var/log/mysql", false),
        mount(volume::GRPC_CERT, "/grpc-cert", true),
        mount(DATA_CLAIM_NAME, "/var/lib/mysql", false),
        mount(volume::CONF, "/etc/mysql", true),
        // Writable: the agent keeps MariaDB's replica role line for the next start.
        mount(volume::CONF_D, "/etc/mysql-conf.d", false),
    ];
    if inputs.tls {
        // `mariadb-backup` streams a clone or a backup over TCP to 127.0.0.1, which the
        // certificate names.
        args.extend(["--mysql-tls-ca".to_owned(), TLS_CA_FILE.to_owned()]);
        volume_mounts.push(mount(volume::MYSQL_TLS, TLS_MOUNT_PATH, true));
    }
    Container {
        name: names::AGENT.into(),
        image: Some(inputs.settings.images.agent.clone()),
        args: (!args.is_empty()).then_some(args),
        env: Some(vec![
            pod_name_env(),
            EnvVar {
                name: "CLUSTER_NAME".into(),
                value: Some(inputs.id.name.clone()),
                ..EnvVar::default()
            },
        ]),
        env_from: Some(vec![cluster_secret_env(inputs)]),
        ports: Some(vec![
            tcp_port("agent", AGENT_PORT),
            tcp_port("agent-metrics", AGENT_METRICS_PORT),
        ]),
        // Beyond MOCO's mounts: the data volume and the server's options, which a MariaDB
        // copy is streamed from and prepared on (`mariadb-backup` runs in this container).
        volume_mounts: Some(volume_mounts),
        resources: Some(match inputs.flavor {
            // mariadb-backup's prepare step alone takes 100 MiB of buffers by default.
            Flavor::Mariadb => fixed_resources("100m", "512Mi"),
            Flavor::Mysql => fixed_resources("100m", "100Mi"),
        }),
        ..Container::default()
    }
}

fn slow_log(inputs: &PodInputs<'_>) -> Container {
    if let Some(deployed) = inputs.deployed_slow_log {
        return deployed.clone();
    }
    Container {
        name: names::SLOW_LOG.into(),
        image: Some(inputs.settings.images.fluent_bit.clone()),
        volume_mounts: Some(vec![
            mount(volume::SLOW_LOG_CONFIG, "/fluent-bit/etc", true),
            mount(volume::VAR_LOG, "/var/log/mysql", false),
        ]),
        resources: Some(fixed_resources("100m", "20Mi")),
        ..Container::default()
    }
}

fn exporter(inputs: &PodInputs<'_>) -> Container {
    let mut args = vec![format!(
        "--config.my-cnf={CREDENTIALS_DIR}/moco-exporter-my.cnf"
    )];
    args.extend(
        inputs
            .spec
            .collectors
            .iter()
            .map(|c| format!("--collect.{c}")),
    );
    Container {
        name: names::EXPORTER.into(),
        image: Some(inputs.settings.images.mysqld_exporter.clone()),
        args: Some(args),
        ports: Some(vec![tcp_port("mysqld-metrics", EXPORTER_PORT)]),
        volume_mounts: Some(vec![
            mount(volume::RUN, "/run", false),
            mount(volume::MYCNF_SECRET, CREDENTIALS_DIR, true),
        ]),
        resources: Some(fixed_resources("200m", "100Mi")),
        ..Container::default()
    }
}

fn copy_init(inputs: &PodInputs<'_>) -> Container {
    Container {
        name: names::COPY_INIT.into(),
        image: Some(inputs.settings.images.agent.clone()),
        command: Some(vec![
            "cp".into(),
            "/moco-init".into(),
            "/shared/moco-init".into(),
        ]),
        volume_mounts: Some(vec![mount(volume::SHARED, "/shared", false)]),
        resources: Some(fixed_resources("100m", "512Mi")),
        ..Container::default()
    }
}

/// Every password of the cluster's Secret (`moco-<name>`), as MOCO's agent gets them.
fn cluster_secret_env(inputs: &PodInputs<'_>) -> EnvFromSource {
    EnvFromSource {
        secret_ref: Some(SecretEnvSource {
            name: inputs.id.prefixed(),
            ..SecretEnvSource::default()
        }),
        ..EnvFromSource::default()
    }
}

fn init(inputs: &PodInputs<'_>, mysqld_image: Option<String>) -> Container {
    let spec = inputs.spec;
    let mut command = vec![
        "/shared/moco-init".to_owned(),
        "--data-dir=/var/lib/mysql".to_owned(),
        "--conf-dir=/etc/mysql-conf.d".to_owned(),
        format!("--init-timezones={}", spec.initialize_timezone_data),
    ];
    if spec.agent_use_localhost {
        command.push("--mysqld-localhost=true".to_owned());
    }
    command.push(spec.server_id_base.to_string());
    Container {
        name: names::INIT.into(),
        image: mysqld_image,
        command: Some(command),
        args: inputs
            .lower_case_table_names
            .as_ref()
            .map(|v| vec![format!("--lower-case-table-names={v}")]),
        env: Some(vec![pod_name_env()]),
        // MariaDB: a restored copy carries the source cluster's accounts, and `moco init`
        // gives them this cluster's passwords before the server first runs it.
        env_from: (inputs.flavor == Flavor::Mariadb).then(|| vec![cluster_secret_env(inputs)]),
        volume_mounts: Some(vec![
            mount(volume::TMP, "/tmp", false),
            mount(DATA_CLAIM_NAME, "/var/lib/mysql", false),
            mount(volume::CONF_D, "/etc/mysql-conf.d", false),
            mount(volume::SHARED, "/shared", false),
        ]),
        resources: Some(fixed_resources("100m", "512Mi")),
        ..Container::default()
    }
}

/// Prefer spreading the cluster's Pods over nodes, when the template sets no affinity at all.
fn default_affinity(id: &ClusterId) -> Affinity {
    spread_over_nodes(&[
        (LABEL_NAME, APP_MYSQL),
        (LABEL_INSTANCE, &id.name),
        (LABEL_CREATED_BY, CREATED_BY),
    ])
}

/// A preferred (weight 100) anti-affinity on `kubernetes.io/hostname` to Pods carrying every
/// label of `labels`.
pub(super) fn spread_over_nodes(labels: &[(&str, &str)]) -> Affinity {
    let expressions = labels
        .iter()
        .map(|(key, value)| LabelSelectorRequirement {
            key: (*key).to_owned(),
            operator: "In".into(),
            values: Some(vec![(*value).to_owned()]),
        })
        .collect();
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        topology_key: "kubernetes.io/hostname".into(),
                        label_selector: Some(LabelSelector {
                            match_expressions: Some(expressions),
                            ..LabelSelector::default()
                        }),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// The container security context with the default user and group filled in where unset (or
/// only created, when the defaults are off).
pub fn with_default_user(sc: Option<SecurityContext>, defaults: bool) -> SecurityContext {
    let mut sc = sc.unwrap_or_default();
    if defaults {
        sc.run_as_user.get_or_insert(DEFAULT_UID);
        sc.run_as_group.get_or_insert(DEFAULT_UID);
    }
    sc
}

/// The pod security context: `fsGroup` so mysqld can write its volumes, changed only when the
/// volume root does not match (a full recursive chown of a large datadir delays start-up).
pub fn pod_security_context(sc: Option<PodSecurityContext>, defaults: bool) -> PodSecurityContext {
    let mut sc = sc.unwrap_or_default();
    if defaults {
        sc.fs_group.get_or_insert(DEFAULT_UID);
    }
    sc.fs_group_change_policy
        .get_or_insert_with(|| "OnRootMismatch".into());
    sc
}

fn overwritten_name(name: OverwriteableContainerName) -> &'static str {
    match name {
        OverwriteableContainerName::Agent => names::AGENT,
        OverwriteableContainerName::CopyMocoInit => names::COPY_INIT,
        OverwriteableContainerName::MocoInit => names::INIT,
        OverwriteableContainerName::SlowLog => names::SLOW_LOG,
        OverwriteableContainerName::MysqldExporter => names::EXPORTER,
    }
}

/// The Pod template of the StatefulSet.
pub fn pod_template(inputs: &PodInputs<'_>) -> PodTemplateSpec {
    let template = &inputs.spec.pod_template;
    let defaults = inputs.settings.default_security_context;
    let mut spec: PodSpec = template.spec.clone();

    spec.service_account_name = Some(inputs.id.prefixed());
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_SECONDS);
    spec.security_context = Some(pod_security_context(spec.security_context.take(), defaults));
    if spec.affinity.is_none() {
        spec.affinity = Some(default_affinity(inputs.id));
    }
    spec.volumes
        .get_or_insert_with(Vec::new)
        .extend(system_volumes(inputs));

    let mysqld = mysqld(inputs);
    let slow_log_on = inputs.slow_log_config_map.is_some();
    let exporter_on = !inputs.spec.collectors.is_empty();
    let mut system = vec![agent(inputs)];
    if slow_log_on {
        system.push(slow_log(inputs));
    }
    if exporter_on {
        system.push(exporter(inputs));
    }
    let mut init_system = vec![copy_init(inputs), init(inputs, mysqld.image.clone())];
    for c in system.iter_mut().chain(init_system.iter_mut()) {
        c.security_context = Some(with_default_user(c.security_context.take(), defaults));
    }
    for o in &template.overwrite_containers {
        let name = overwritten_name(o.name);
        for c in system.iter_mut().chain(init_system.iter_mut()) {
            if c.name == name {
                if let Some(r) = &o.resources {
                    c.resources = Some(r.clone());
                }
                if let Some(sc) = &o.security_context {
                    c.security_context = Some(sc.clone());
                }
            }
        }
    }

    let user_kept = template.spec.containers.iter().filter(|c| {
        let name = c.name.as_str();
        name != MYSQLD_CONTAINER_NAME
            && name != names::AGENT
            && !(slow_log_on && name == names::SLOW_LOG)
            && !(exporter_on && name == names::EXPORTER)
    });
    // The user's may not be named as MOCO's ([`super::checked`] refuses it).
    let user_init = template.spec.init_containers.iter().flatten();
    let with_defaults = |mut c: Container| {
        c.security_context = Some(with_default_user(c.security_context.take(), defaults));
        c
    };
    let mut containers = vec![with_defaults(mysqld)];
    containers.extend(system);
    containers.extend(user_kept.cloned().map(with_defaults));
    let mut init_containers = init_system;
    init_containers.extend(user_init.cloned().map(with_defaults));
    spec.containers = containers;
    spec.init_containers = Some(init_containers);

    let mut metadata = ObjectMeta {
        labels: Some(overlay(&template.metadata.labels, &inputs.id.labels())),
        annotations: (!template.metadata.annotations.is_empty())
            .then(|| template.metadata.annotations.clone()),
        ..ObjectMeta::default()
    };
    super::version::pod_template_metadata(inputs.reconciler_version, &mut metadata);
    PodTemplateSpec {
        metadata: Some(metadata),
        spec: Some(spec),
    }
}

/// What a Pod template holds of what decides a rollout
/// (`moco_core::resources::decide_statefulset`): the my.cnf ConfigMap it mounts and the images
/// of the containers the operator adds.
pub fn template_facts(template: &PodTemplateSpec) -> PodTemplateFacts {
    let spec = template.spec.as_ref();
    let image = |name: &str| {
        spec.into_iter()
            .flat_map(|s| &s.containers)
            .find(|c| c.name == name)
            .and_then(|c| c.image.clone())
    };
    let mycnf_config_map = spec
        .into_iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .find(|v| v.name == volume::CONF)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    PodTemplateFacts {
        mycnf_config_map,
        agent_image: image(names::AGENT).unwrap_or_default(),
        exporter_image: image(names::EXPORTER),
        fluent_bit_image: image(names::SLOW_LOG),
    }
}
