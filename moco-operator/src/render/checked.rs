//! Every check of a cluster's objects, in one step before anything is built.
//!
//! [`check`] parses and checks whatever the builders need from the cluster and from what
//! reconcile read (its annotations, the `mysqld` container and its memory, the user's my.cnf
//! options, the slow-log template, the Jobs' work volumes, the BackupPolicy), and returns the
//! results as values, beside what the round read. The builders take a [`Checked`] and nothing
//! else, and cannot fail: a round either stops here with one error naming the field, before it
//! has written anything, or builds every object. They never see the cluster's metadata or
//! status: what they need of them is a field here.

use k8s_openapi::ByteString;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;
use moco_api::annotations::{
    ARCHIVE_ANNOTATION, IssuerRef, annotation, flavor_of, issuer_of, max_rate_of, tls_of,
};
use moco_api::backuppolicy::JobConfig;
use moco_api::cluster::ClusterId;
use moco_api::labels::ANNOTATION_FORCE_ROLLING_UPDATE;
use moco_api::mysqlcluster::{MySQLCluster, MySQLClusterSpec};
use moco_core::facts::Flavor;
use moco_core::moco_accounts::MocoPasswords;

use super::config_maps::{self, SlowLogConfig};
use super::jobs;
pub use super::jobs::{CheckedBackup, CheckedRestore};
use super::pod_template::names;
use super::{ClusterInputs, RenderError, RenderSettings};

/// A cluster that passed every check, with what the checks parsed and what the round read:
/// everything the builders are given.
#[derive(Clone, Debug)]
pub struct Checked<'a> {
    /// The admitted spec, for its plain fields (those that need parsing are below).
    pub spec: &'a MySQLClusterSpec,
    /// Its identity.
    pub id: ClusterId,
    /// Its server family (`moco-rs/flavor`).
    pub flavor: Flavor,
    /// mysqld's certificate issuer, when the cluster has TLS (`moco-rs/tls`).
    pub tls: Option<IssuerRef>,
    /// `spec.replicas`.
    pub replicas: u32,
    /// The user's `mysqld` container of `spec.podTemplate`.
    pub mysqld: &'a Container,
    /// The text of my.cnf: the user's options, the memory-derived ones and, with TLS, the
    /// server's certificate options.
    pub mycnf: String,
    /// The slow-log sidecar's configuration, unless the sidecar is disabled.
    pub slow_log: Option<SlowLogConfig>,
    /// The backup CronJob's settings, while `spec.backupPolicyName` is set.
    pub backup: Option<CheckedBackup<'a>>,
    /// The binlog archiver's pause between rounds ([`ARCHIVE_ANNOTATION`]), when asked for.
    pub archive_interval: Option<&'a str>,
    /// The restore Job's settings, while `spec.restore` is set and not yet done.
    pub restore: Option<CheckedRestore<'a>>,
    /// `moco.cybozu.com/force-rolling-update`, copied to the StatefulSet.
    pub force_rolling_update: Option<&'a str>,
    /// The status lets a shrink's leaving instances go
    /// (`moco_core::status::ClusterStatus::leaving_may_go`).
    pub leaving_may_go: bool,
    /// `lower_case_table_names` of the user's options: the init program's, since it can
    /// only be set when the data directory is created.
    pub lower_case_table_names: Option<String>,
    /// The passwords of MOCO's accounts.
    pub passwords: &'a MocoPasswords,
    /// The agent certificate's Secret data, once cert-manager wrote it.
    pub certificate_secret: Option<&'a BTreeMap<String, ByteString>>,
    /// mysqld's certificate Secret data, once cert-manager wrote it (with TLS only).
    pub mysql_certificate_secret: Option<&'a BTreeMap<String, ByteString>>,
    /// The backup CronJob has an active Job.
    pub backup_job_active: bool,
    /// The deployed `slow-log` container to keep ([`ClusterInputs::deployed_slow_log`]).
    pub deployed_slow_log: Option<&'a Container>,
    /// `spec.replicas` of the deployed StatefulSet.
    pub deployed_replicas: Option<u32>,
    /// The reconciler version this round renders with.
    pub reconciler_version: u32,
}

/// Checks the cluster of `inputs` with the user's my.cnf options (the data of the ConfigMap
/// `spec.mysqlConfigMapName`) and the BackupPolicy read for it.
pub fn check<'a>(
    settings: &RenderSettings,
    inputs: &ClusterInputs<'a>,
) -> Result<Checked<'a>, RenderError> {
    let cluster = inputs.cluster;
    let (user_config, backup_policy) = (inputs.user_config, inputs.backup_policy);
    let id = ClusterId::of(cluster)?;
    let spec = &cluster.spec;
    let flavor = flavor_of(cluster)?;
    let tls = if tls_of(cluster)? {
        Some(issuer_of(cluster)?)
    } else {
        // An issuer without TLS is refused too.
        issuer_of(cluster)?;
        None
    };
    let replicas = u32::try_from(spec.replicas)
        .map_err(|_| RenderError::invalid("spec.replicas", "must not be negative"))?;
    let (index, mysqld) = config_maps::mysqld_container(cluster)?;
    check_init_containers(cluster)?;
    let mycnf =
        config_maps::mycnf_text(cluster, (index, mysqld), user_config, flavor, tls.is_some())?;
    let slow_log = if spec.disable_slow_query_log_container {
        None
    } else {
        Some(config_maps::slow_log_config(
            spec.slow_query_log_config_tmpl.as_deref(),
        )?)
    };

    let work_limit = jobs::work_size_limit(cluster, flavor);
    let policy_work = |config: &JobConfig| {
        jobs::work_volume(config, "BackupPolicy spec.jobConfig", work_limit.as_ref())
    };
    let backup = match (&spec.backup_policy_name, backup_policy) {
        (None, _) => None,
        (Some(name), None) => {
            return Err(RenderError::BackupPolicyNotFound {
                namespace: id.namespace.clone(),
                name: name.clone(),
            });
        }
        (Some(_), Some(policy)) => Some(CheckedBackup {
            policy,
            work: policy_work(&policy.spec.job_config)?,
            max_rate_arg: max_rate_of(cluster)?
                .map(|rate| jobs::max_rate_arg(settings, flavor, &rate))
                .transpose()?,
        }),
    };
    let archive_interval = match annotation(&cluster.metadata, ARCHIVE_ANNOTATION) {
        None => None,
        Some(interval) if backup.is_some() => {
            jobs::check_archive_interval(settings, flavor, interval)?;
            Some(interval)
        }
        Some(_) => {
            return Err(RenderError::invalid(
                format!("metadata.annotations[\"{ARCHIVE_ANNOTATION}\"]"),
                "needs spec.backupPolicyName: the binlogs go to the backup policy's bucket",
            ));
        }
    };
    let restored = cluster
        .status
        .as_ref()
        .is_some_and(|s| s.restored_time.is_some());
    let restore = match &spec.restore {
        Some(restore) if !restored => Some(CheckedRestore {
            spec: restore,
            work: jobs::work_volume(
                &restore.job_config,
                "spec.restore.jobConfig",
                work_limit.as_ref(),
            )?,
        }),
        _ => None,
    };

    Ok(Checked {
        spec,
        id,
        flavor,
        tls,
        replicas,
        mysqld,
        mycnf,
        slow_log,
        backup,
        archive_interval,
        restore,
        force_rolling_update: annotation(&cluster.metadata, ANNOTATION_FORCE_ROLLING_UPDATE),
        leaving_may_go: cluster
            .status
            .as_ref()
            .is_some_and(|s| moco_api::status::cluster_status(s).leaving_may_go(replicas)),
        lower_case_table_names: user_config.get("lower_case_table_names").cloned(),
        passwords: inputs.passwords,
        certificate_secret: inputs.certificate_secret,
        mysql_certificate_secret: inputs.mysql_certificate_secret,
        backup_job_active: inputs.backup_job_active,
        deployed_slow_log: inputs.deployed_slow_log,
        deployed_replicas: inputs.deployed_replicas,
        reconciler_version: inputs.reconciler_version,
    })
}

/// The init containers MOCO adds cannot be replaced by the user's.
fn check_init_containers(cluster: &MySQLCluster) -> Result<(), RenderError> {
    let user_init = cluster
        .spec
        .pod_template
        .spec
        .init_containers
        .iter()
        .flatten();
    for (i, c) in user_init.enumerate() {
        if c.name == names::COPY_INIT || c.name == names::INIT {
            return Err(RenderError::invalid(
                format!("spec.podTemplate.spec.initContainers[{i}].name"),
                format!("{:?} is the name of an init container MOCO adds", c.name),
            ));
        }
    }
    Ok(())
}
