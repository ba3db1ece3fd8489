//! The backup CronJob and the restore Job of a cluster, each with the Role and RoleBinding its
//! Pod needs to record what it did on the MySQLCluster: the verbs its program calls, on the
//! objects it calls them on (`moco-operator/tests/rbac.rs` asks them as `kubectl auth can-i`).
//!
//! The program in the Job (`moco-backup`) is a separate image; this module only builds the
//! objects and their arguments, which are that program's command line contract.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretKeySelector, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use moco_api::annotations::{ARCHIVE_ANNOTATION, MAX_RATE_ANNOTATION, archive_interval};
use moco_api::backuppolicy::{BackupPolicy, BucketConfig, ConcurrencyPolicy, JobConfig};
use moco_api::cluster::{ClusterId, TLS_CA_FILE, TLS_MOUNT_PATH};
use moco_api::labels::{
    APP_MYSQL_BACKUP, ARCHIVE_COMPONENT, CREATED_BY, LABEL_COMPONENT, LABEL_CREATED_BY, LABEL_NAME,
};
use moco_api::mysqlcluster::{MySQLCluster, RestoreSpec};
use moco_core::facts::Flavor;
use moco_core::moco_accounts::Account;
use moco_core::resources::ByteRate;
use moco_core::validate::DATA_CLAIM_NAME;

use super::pod_template::{pod_security_context, spread_over_nodes, with_default_user};
use super::{JobObjects, RenderError, RenderSettings};

/// The name of the work volume and where the Job mounts it.
const WORK_VOLUME: &str = "work";
/// The volume of the cluster's agent certificate in a MariaDB backup Job, and where it is
/// mounted (`moco backup --grpc-cert-dir`'s default).
const GRPC_CERT_VOLUME: &str = "grpc-cert";
const GRPC_CERT_PATH: &str = "/grpc-cert";
/// The volume of the MySQL CA in MariaDB Jobs with TLS.
const MYSQL_CA_VOLUME: &str = "mysql-ca";

/// The time format of restore points and backup keys: UTC `YYYYMMDD-hhmmss`.
pub const BACKUP_TIME_FORMAT: &str = "%Y%m%d-%H%M%S";

/// The backup policy of a cluster, checked by [`super::checked::check`].
#[derive(Clone, Debug)]
pub struct CheckedBackup<'a> {
    /// The BackupPolicy `spec.backupPolicyName` names.
    pub policy: &'a BackupPolicy,
    /// Its work volume, with the size limit of [`work_size_limit`].
    pub work: Volume,
    /// `moco backup --max-rate=…` from `moco-rs/backup-max-rate`, when set.
    pub max_rate_arg: Option<String>,
}

/// A pending restore, checked by [`super::checked::check`].
#[derive(Clone, Debug)]
pub struct CheckedRestore<'a> {
    /// `spec.restore`.
    pub spec: &'a RestoreSpec,
    /// Its work volume, with the size limit of [`work_size_limit`].
    pub work: Volume,
}

fn bucket_args(bucket: &BucketConfig) -> Vec<String> {
    let mut args = Vec::new();
    if !bucket.region.is_empty() {
        args.push(format!("--region={}", bucket.region));
    }
    if !bucket.endpoint_url.is_empty() {
        args.push(format!("--endpoint={}", bucket.endpoint_url));
    }
    if bucket.use_path_style {
        args.push("--use-path-style".into());
    }
    args.push(format!("--backend-type={}", bucket.backend_type.as_str()));
    if !bucket.ca_cert.is_empty() {
        args.push(format!("--ca-cert={}", bucket.ca_cert));
    }
    args
}

fn password_env(id: &ClusterId, account: Account) -> EnvVar {
    secret_env("MYSQL_PASSWORD", id, account)
}

/// `name` set from `account`'s key of the cluster's password Secret.
fn secret_env(name: &str, id: &ClusterId, account: Account) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: id.prefixed(),
                key: account.secret_key().into(),
                ..SecretKeySelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn job_resources(config: &JobConfig) -> ResourceRequirements {
    let pick = |cpu: &Option<_>, memory: &Option<_>| {
        let mut m = BTreeMap::new();
        if let Some(q) = cpu {
            m.insert("cpu".to_owned(), Clone::clone(q));
        }
        if let Some(q) = memory {
            m.insert("memory".to_owned(), Clone::clone(q));
        }
        (!m.is_empty()).then_some(m)
    };
    ResourceRequirements {
        requests: pick(&config.cpu, &config.memory),
        limits: pick(&config.max_cpu, &config.max_memory),
        ..ResourceRequirements::default()
    }
}

/// The image of a Job. MySQL: MOCO's backup image (`--backup-image`), whose program takes
/// these arguments and writes MOCO's format, so MOCO's backups keep working both ways.
/// MariaDB: the agent image, which holds `moco` with `mariadb-backup`, `mariadb-binlog` and
/// the client, run as `/moco` in place of the image's entrypoint (`moco agent`).
fn job_image(settings: &RenderSettings, flavor: Flavor) -> (&str, Option<Vec<String>>) {
    match flavor {
        Flavor::Mysql => (&settings.images.backup, None),
        Flavor::Mariadb => (&settings.images.agent, Some(vec!["/moco".to_owned()])),
    }
}

/// The Job container: the program's arguments, the password of `account`, the user's
/// environment and mounts, a read-only root file system.
fn job_container(
    name: &str,
    (image, command): (&str, Option<Vec<String>>),
    args: Vec<String>,
    id: &ClusterId,
    account: Account,
    config: &JobConfig,
    security_context: SecurityContext,
) -> Container {
    let mut env = vec![password_env(id, account)];
    env.extend(config.env.iter().cloned());
    let mut mounts = vec![VolumeMount {
        name: WORK_VOLUME.into(),
        mount_path: "/work".into(),
        ..VolumeMount::default()
    }];
    mounts.extend(config.volume_mounts.iter().cloned());
    Container {
        name: name.into(),
        image: Some(image.to_owned()),
        command,
        args: Some(args),
        env: Some(env),
        env_from: (!config.env_from.is_empty()).then(|| config.env_from.clone()),
        volume_mounts: Some(mounts),
        resources: Some(job_resources(config)),
        security_context: Some(security_context),
        ..Container::default()
    }
}

/// `max_binlog_size` in GiB: its default, and the most MySQL and MariaDB accept.
const MAX_BINLOG_SIZE_GIB: u64 = 1;

/// The `sizeLimit` a work `emptyDir` without one gets, so that a bucket's bytes (issue 29)
/// end in the Pod's eviction instead of a full node disk; `None` leaves it unlimited.
///
/// MariaDB: the base backup streams both ways and is never stored; the only large file is one
/// binlog at a time (the archiver's closed file, the replay's segment, bounded by its declared
/// size), which may pass `max_binlog_size` by one transaction: twice that, plus 1 GiB. The
/// 1 GiB used is `max_binlog_size`'s default and the servers' maximum, so it bounds whatever
/// the mysqlConfigMap sets, and a restore's binlogs come from a source cluster whose setting
/// this one does not know.
///
/// MySQL: MOCO's dump is written and unpacked whole in `/work`, so no fixed size fits; a
/// compressed dump of the data is no larger than the data claim's request. Without a request
/// (`moco render` of a spec the webhook would refuse) there is no bound.
pub fn work_size_limit(cluster: &MySQLCluster, flavor: Flavor) -> Option<Quantity> {
    match flavor {
        Flavor::Mariadb => Some(Quantity(format!("{}Gi", 2 * MAX_BINLOG_SIZE_GIB + 1))),
        Flavor::Mysql => cluster
            .spec
            .volume_claim_templates
            .iter()
            .find(|t| t.metadata.name == DATA_CLAIM_NAME)
            .and_then(|t| t.spec.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .cloned(),
    }
}

/// The work volume of a Job: the user's as given (`field` names its JobConfig), except that
/// an `emptyDir` without a `sizeLimit` gets `work_limit` ([`work_size_limit`]).
pub fn work_volume(
    config: &JobConfig,
    field: &str,
    work_limit: Option<&Quantity>,
) -> Result<Volume, RenderError> {
    let mut work = config.work_volume.to_volume(WORK_VOLUME).map_err(|e| {
        RenderError::invalid(
            format!("{field}.workVolume"),
            format!("not a volume source: {e}"),
        )
    })?;
    if let Some(dir) = work.empty_dir.as_mut()
        && dir.size_limit.is_none()
    {
        dir.size_limit = work_limit.cloned();
    }
    Ok(work)
}

/// The Pod of a Job, with its `work` volume ([`work_volume`]).
fn job_pod_spec(
    config: &JobConfig,
    settings: &RenderSettings,
    container: Container,
    affinity: Option<Affinity>,
    work: Volume,
) -> PodSpec {
    let mut volumes = vec![work];
    volumes.extend(config.volumes.iter().cloned());
    PodSpec {
        restart_policy: Some("Never".into()),
        service_account_name: Some(config.service_account_name.clone()),
        volumes: Some(volumes),
        security_context: Some(pod_security_context(
            None,
            settings.default_security_context,
        )),
        affinity,
        containers: vec![container],
        ..PodSpec::default()
    }
}

/// Spread backup Pods over nodes unless the policy sets an affinity.
fn default_backup_affinity() -> Affinity {
    spread_over_nodes(&[
        (LABEL_NAME, APP_MYSQL_BACKUP),
        (LABEL_CREATED_BY, CREATED_BY),
    ])
}

/// The backup or restore program reads its own MySQLCluster and writes its status (a `PUT`
/// of `/status`: `status.backup`, `status.restoredTime`); nothing else of it. MOCO also granted
/// `update` on the cluster itself and `get` on the status, which neither program calls.
fn own_cluster_rules(id: &ClusterId) -> [PolicyRule; 2] {
    [
        rule("moco.cybozu.com", &["mysqlclusters"], &["get"], &[&id.name]),
        rule(
            "moco.cybozu.com",
            &["mysqlclusters/status"],
            &["update"],
            &[&id.name],
        ),
    ]
}

/// A rule of `verbs` on `resources` of `group`, on the objects `names` only (every object when
/// empty: `list` and `create` name none).
fn rule(group: &str, resources: &[&str], verbs: &[&str], names: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        resource_names: (!names.is_empty())
            .then(|| names.iter().map(|n| (*n).to_owned()).collect()),
        ..PolicyRule::default()
    }
}

fn rbac(
    id: &ClusterId,
    name: String,
    rules: Vec<PolicyRule>,
    service_account: &str,
) -> (Role, RoleBinding) {
    let role = Role {
        metadata: id.owned_meta(name.clone(), id.backup_labels()),
        rules: Some(rules),
    };
    let binding = RoleBinding {
        metadata: id.owned_meta(name.clone(), id.backup_labels()),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: service_account.to_owned(),
            namespace: Some(id.namespace.clone()),
            ..Subject::default()
        }]),
    };
    (role, binding)
}

fn labelled_meta(id: &ClusterId) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        labels: Some(id.backup_labels()),
        ..ObjectMeta::default()
    })
}

/// Secret `secret` as volume `volume`, mounted read-only at `path` in every container.
fn mount_secret(pod: &mut PodSpec, volume: &str, secret: String, path: &str) {
    pod.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: volume.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
    for container in &mut pod.containers {
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: volume.into(),
                mount_path: path.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
    }
}

/// What a MariaDB Job adds to MOCO's: a backup streams from an instance's agent and a
/// restore streams to one, so the Job presents the cluster's agent certificate (mounted
/// read-only); a backup also gets the clone-donor password the agent asks for (a restore
/// proves itself with the admin password it already has).
fn with_agent_access(id: &ClusterId, pod: &mut PodSpec, donor_password: bool) {
    mount_secret(pod, GRPC_CERT_VOLUME, id.grpc_secret(), GRPC_CERT_PATH);
    for container in &mut pod.containers {
        if donor_password {
            // After MYSQL_PASSWORD, before the user's variables (which may not override it).
            container.env.get_or_insert_with(Vec::new).insert(
                1,
                secret_env("CLONE_DONOR_PASSWORD", id, Account::CloneDonor),
            );
        }
    }
}

/// What a MariaDB Job adds with TLS: the CA alone (never the server's key), and the flag that
/// makes its SQL connections and `mariadb-binlog` verify the servers with it.
fn with_mysql_ca(id: &ClusterId, pod: &mut PodSpec) {
    mount_secret(pod, MYSQL_CA_VOLUME, id.mysql_ca_secret(), TLS_MOUNT_PATH);
    for container in &mut pod.containers {
        // After the subcommand, before the positional arguments.
        let args = container.args.get_or_insert_with(Vec::new);
        let at = args.len().min(1);
        args.insert(at, format!("--mysql-tls-ca={}", TLS_CA_FILE));
    }
}

/// The Pod of a program that runs with `policy`'s Job settings as `moco-backup` (the backup
/// CronJob's and the archiver's): `leading` arguments, then the bucket flags and `BUCKET NS
/// NAME`; a read-only root file system; the policy's affinity, else spread over nodes.
fn policy_pod(
    id: &ClusterId,
    settings: &RenderSettings,
    backup: &CheckedBackup<'_>,
    flavor: Flavor,
    name: &str,
    leading: Vec<String>,
) -> PodSpec {
    let config = &backup.policy.spec.job_config;
    let mut args = leading;
    args.extend(bucket_args(&config.bucket_config));
    args.extend([
        config.bucket_config.bucket_name.clone(),
        id.namespace.clone(),
        id.name.clone(),
    ]);
    let mut sc = with_default_user(None, settings.default_security_context);
    sc.read_only_root_filesystem = Some(true);
    let container = job_container(
        name,
        job_image(settings, flavor),
        args,
        id,
        Account::Backup,
        config,
        sc,
    );
    let affinity = config
        .affinity
        .clone()
        .unwrap_or_else(default_backup_affinity);
    job_pod_spec(
        config,
        settings,
        container,
        Some(affinity),
        backup.work.clone(),
    )
}

/// `moco backup --max-rate`, when the image's program knows the flag.
pub fn max_rate_arg(
    settings: &RenderSettings,
    flavor: Flavor,
    rate: &ByteRate,
) -> Result<String, RenderError> {
    // A MySQL cluster's Job runs the backup image; MOCO's `moco-backup` has no such flag and
    // its Job would fail at every run.
    if flavor == Flavor::Mysql && settings.images.backup == super::DEFAULT_BACKUP_IMAGE {
        return Err(RenderError::invalid(
            format!("metadata.annotations[\"{MAX_RATE_ANNOTATION}\"]"),
            format!(
                "a MySQL cluster's backup is capped by moco-rs's backup image (the Dockerfile's \
                 `backup` target); the operator's --backup-image is MOCO's ({}), which has no \
                 --max-rate",
                super::DEFAULT_BACKUP_IMAGE
            ),
        ));
    }
    Ok(format!("--max-rate={rate}"))
}

/// `moco-backup-<name>`: the CronJob of the checked backup policy, its Role and RoleBinding.
pub fn backup(
    id: &ClusterId,
    settings: &RenderSettings,
    backup: &CheckedBackup<'_>,
    flavor: Flavor,
    tls: bool,
) -> JobObjects<CronJob> {
    let p = &backup.policy.spec;
    let config = &p.job_config;
    let mut leading = vec!["backup".to_owned(), format!("--threads={}", config.threads)];
    leading.extend(backup.max_rate_arg.clone());
    let mut pod = policy_pod(id, settings, backup, flavor, "backup", leading);
    if flavor == Flavor::Mariadb {
        with_agent_access(id, &mut pod, true);
        if tls {
            with_mysql_ca(id, &mut pod);
        }
    }
    let cronjob = CronJob {
        metadata: id.owned_meta(id.backup(), id.backup_labels()),
        spec: Some(CronJobSpec {
            schedule: p.schedule.clone(),
            time_zone: p.time_zone.clone(),
            starting_deadline_seconds: p.starting_deadline_seconds,
            concurrency_policy: Some(
                match p.concurrency_policy {
                    ConcurrencyPolicy::Allow => "Allow",
                    ConcurrencyPolicy::Forbid => "Forbid",
                    ConcurrencyPolicy::Replace => "Replace",
                }
                .into(),
            ),
            successful_jobs_history_limit: p.successful_jobs_history_limit,
            failed_jobs_history_limit: p.failed_jobs_history_limit,
            job_template: JobTemplateSpec {
                metadata: labelled_meta(id),
                spec: Some(JobSpec {
                    active_deadline_seconds: p.active_deadline_seconds,
                    backoff_limit: p.backoff_limit,
                    template: PodTemplateSpec {
                        metadata: labelled_meta(id),
                        spec: Some(pod),
                    },
                    ..JobSpec::default()
                }),
            },
            ..CronJobSpec::default()
        }),
        ..CronJob::default()
    };
    // Both programs (MOCO's and `moco backup`) and the archiver, which runs as the same
    // account, list the cluster's Pods by label and create Events; a list cannot be limited
    // to names. MOCO also granted Pods get/watch and Events update/patch, which none calls.
    let mut rules = own_cluster_rules(id).to_vec();
    rules.extend([
        rule("", &["pods"], &["list"], &[]),
        rule("", &["events"], &["create"], &[]),
    ]);
    let (role, role_binding) = rbac(id, id.backup(), rules, &config.service_account_name);
    JobObjects {
        workload: cronjob,
        role,
        role_binding,
    }
}

/// `moco-restore-<name>`: the Job of the checked restore, its Role and RoleBinding.
///
/// The Role reaches instance 0's Pod only: MOCO's program reads it for its address, and on
/// MariaDB the Job deletes it once its agent has prepared the copy (the copy replaces the
/// datadir while no server runs). Reconcile makes the Job the owner of both RBAC objects
/// ([`owned_by_job`]), so they go with it.
pub fn restore(
    id: &ClusterId,
    settings: &RenderSettings,
    checked: &CheckedRestore<'_>,
    flavor: Flavor,
    tls: bool,
) -> JobObjects<Job> {
    let restore = checked.spec;
    let config = &restore.job_config;
    let point = restore
        .restore_point
        .0
        .strftime(BACKUP_TIME_FORMAT)
        .to_string();
    let mut args = vec![
        "restore".to_owned(),
        format!("--threads={}", config.threads),
    ];
    args.extend(bucket_args(&config.bucket_config));
    args.extend([
        config.bucket_config.bucket_name.clone(),
        restore.source_namespace.clone(),
        restore.source_name.clone(),
        id.namespace.clone(),
        id.name.clone(),
        point,
        restore.schema.clone(),
        restore.users.clone(),
    ]);
    let sc = SecurityContext {
        read_only_root_filesystem: Some(true),
        ..SecurityContext::default()
    };
    let container = job_container(
        "restore",
        job_image(settings, flavor),
        args,
        id,
        Account::Admin,
        config,
        sc,
    );
    let mut pod = job_pod_spec(config, settings, container, None, checked.work.clone());
    let pod_verbs: &[&str] = if flavor == Flavor::Mariadb {
        with_agent_access(id, &mut pod, false);
        if tls {
            with_mysql_ca(id, &mut pod);
        }
        &["get", "delete"]
    } else {
        &["get"]
    };
    let job = Job {
        metadata: id.owned_meta(id.restore(), id.backup_labels()),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: labelled_meta(id),
                spec: Some(pod),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    let mut rules = own_cluster_rules(id).to_vec();
    rules.extend([
        rule("", &["pods"], pod_verbs, &[&id.pod(0)]),
        rule("", &["events"], &["create"], &[]),
    ]);
    let (role, role_binding) = rbac(id, id.restore(), rules, &config.service_account_name);
    JobObjects {
        workload: job,
        role,
        role_binding,
    }
}

/// `rbac` (a restore Job's Role and RoleBinding) owned by `job` alone instead of the
/// cluster: garbage collection then removes them with the Job, and they never outlive the
/// restore that needed them. `None` when the Job has no uid yet (it was not created).
pub fn owned_by_job(rbac: &JobObjects<Job>, job: &Job) -> Option<(Role, RoleBinding)> {
    let uid = job.metadata.uid.clone()?;
    let name = job.metadata.name.clone()?;
    let owner = OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name,
        uid,
        // Not the controller: no controller manages a Role. No blockOwnerDeletion: it would
        // need `update` on jobs/finalizers, and a foreground deletion of the Job need not
        // wait for its Role.
        controller: None,
        block_owner_deletion: None,
    };
    let mut role = rbac.role.clone();
    let mut binding = rbac.role_binding.clone();
    role.metadata.owner_references = Some(vec![owner.clone()]);
    binding.metadata.owner_references = Some(vec![owner]);
    Some((role, binding))
}

/// Checks [`ARCHIVE_ANNOTATION`]'s `interval`: a Go duration from 1s to 1h, on a cluster whose
/// backup image has the archiver.
pub fn check_archive_interval(
    settings: &RenderSettings,
    flavor: Flavor,
    interval: &str,
) -> Result<(), RenderError> {
    let field = format!("metadata.annotations[\"{ARCHIVE_ANNOTATION}\"]");
    // A MySQL cluster's archiver runs the backup image, as its Jobs do; MOCO's own has no
    // archiver, and its Pod would only fail with "unknown command".
    if flavor == Flavor::Mysql && settings.images.backup == super::DEFAULT_BACKUP_IMAGE {
        return Err(RenderError::invalid(
            field,
            format!(
                "binlog archiving of a MySQL cluster runs moco-rs's backup image (the Dockerfile's \
                 `backup` target); the operator's --backup-image is MOCO's ({}), which has no \
                 archiver",
                super::DEFAULT_BACKUP_IMAGE
            ),
        ));
    }
    archive_interval(interval)?;
    Ok(())
}

/// `moco-archive-<name>`: the Deployment whose one Pod archives the binlogs of the cluster
/// every `interval` ([`check_archive_interval`]; `moco archive`, on MySQL from this project's
/// backup image), with the backup policy's Job settings (service account, bucket,
/// credentials, work volume), so it may do what the backup Job does. A Deployment and not a
/// CronJob: a round every few seconds is a process, not a schedule. `Recreate`: never two
/// archivers of one cluster at once.
pub fn archive(
    id: &ClusterId,
    settings: &RenderSettings,
    backup: &CheckedBackup<'_>,
    flavor: Flavor,
    interval: &str,
    tls: bool,
) -> Deployment {
    let mut pod = policy_pod(
        id,
        settings,
        backup,
        flavor,
        "archive",
        vec!["archive".to_owned(), format!("--every={interval}")],
    );
    pod.restart_policy = Some("Always".into());
    if tls {
        with_mysql_ca(id, &mut pod);
    }
    let mut labels = id.backup_labels();
    labels.insert(LABEL_COMPONENT.into(), ARCHIVE_COMPONENT.into());
    Deployment {
        metadata: id.owned_meta(id.archive(), labels.clone()),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..DeploymentStrategy::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}
