//! `MySQLCluster` validation rules (MOCO's validating webhook, create and update).

use std::cmp::Ordering;

use serde_json::Value;

pub use crate::resources::volumes::StorageClassFacts;

use super::cron::parse_standard;
use super::quantity::Quantity;
use super::{
    DATA_CLAIM_NAME, FieldPath, MAX_CLUSTER_NAME_LENGTH, MYSQLD_CONTAINER_NAME,
    RESERVED_INIT_CONTAINER_NAME, RESERVED_MYSQLD_PORT_NAMES, RESERVED_MYSQLD_PORTS,
    RESERVED_VOLUME_NAMES, Rule, Violation,
};

/// The fields of a `MySQLCluster` that the validation rules read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterView {
    /// `metadata.name`.
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `spec.podTemplate.spec.containers`.
    pub containers: Vec<ContainerView>,
    /// `spec.podTemplate.spec.initContainers`.
    pub init_containers: Vec<ContainerView>,
    /// Names of `spec.podTemplate.spec.volumes` (`None` where a volume has no name).
    pub volume_names: Vec<Option<String>>,
    /// `spec.volumeClaimTemplates`.
    pub claim_templates: Vec<ClaimTemplateView>,
    /// `spec.serverIDBase`.
    pub server_id_base: i32,
    /// `spec.logRotationSchedule` (empty = agent default).
    pub log_rotation_schedule: String,
    /// `spec.logRotationSize`.
    pub log_rotation_size: i64,
    /// `spec.collectors`.
    pub collectors: Vec<String>,
    /// `spec.disableSlowQueryLogContainer`.
    pub disable_slow_query_log_container: bool,
    /// `spec.restore` as an opaque value, compared for equality only.
    pub restore: Option<Value>,
    /// `spec.replicationSourceSecretName`.
    pub replication_source_secret_name: Option<String>,
}

/// A container of the Pod template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerView {
    /// `name`, if given.
    pub name: Option<String>,
    /// `ports`.
    pub ports: Vec<ContainerPortView>,
}

/// A declared container port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerPortView {
    /// `name`, if given.
    pub name: Option<String>,
    /// `containerPort`, if given.
    pub container_port: Option<i32>,
}

/// A volume claim template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimTemplateView {
    /// `metadata.name`.
    pub name: String,
    /// `spec.resources.requests.storage` as written (e.g. `10Gi`).
    pub storage_request: Option<String>,
    /// `spec.storageClassName`.
    pub storage_class_name: Option<String>,
}

/// The StorageClasses of the cluster, as far as the caller knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageFacts {
    /// The caller could not look StorageClasses up; the volume expansion rule is skipped
    /// (use [`storage_growth`] to report what went unchecked).
    Unknown,
    /// Every StorageClass of the cluster.
    Known(Vec<StorageClassFacts>),
}

/// A volume claim template whose storage request grows on update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageGrowth {
    /// Index in the new `spec.volumeClaimTemplates`.
    pub index: usize,
    /// Claim template name.
    pub name: String,
    /// Old request as written.
    pub from: String,
    /// New request as written.
    pub to: String,
    /// Explicit StorageClass of the new template.
    pub storage_class_name: Option<String>,
}

fn claim_path(index: usize) -> FieldPath {
    FieldPath::root("spec")
        .child("volumeClaimTemplates")
        .index(index)
}

/// Rules checked on create and, again, on every update.
pub fn validate_cluster_create(view: &ClusterView) -> Vec<Violation> {
    let mut out = Vec::new();
    if view.name.chars().count() > MAX_CLUSTER_NAME_LENGTH {
        out.push(Violation::new(
            Rule::NameTooLong,
            FieldPath::root("metadata").child("name"),
            format!(
                "name must be at most {MAX_CLUSTER_NAME_LENGTH} characters long because names of \
                 generated StatefulSets and CronJobs derive from it; {:?} has {}",
                view.name,
                view.name.chars().count()
            ),
        ));
    }
    spec_rules(view, &mut out);
    out
}

/// The create rule set without the create-only name rule (re-run on every update).
fn spec_rules(view: &ClusterView, out: &mut Vec<Violation>) {
    let spec = FieldPath::root("spec");
    if !view
        .claim_templates
        .iter()
        .any(|c| c.name == DATA_CLAIM_NAME)
    {
        out.push(Violation::new(
            Rule::MissingDataClaim,
            spec.child("volumeClaimTemplates"),
            format!("volumeClaimTemplates must contain a claim template named {DATA_CLAIM_NAME:?}"),
        ));
    }
    for (i, claim) in view.claim_templates.iter().enumerate() {
        let path = claim_path(i)
            .child("spec")
            .child("resources")
            .child("requests")
            .child("storage");
        match &claim.storage_request {
            None => out.push(Violation::new(
                Rule::MissingStorageRequest,
                path,
                format!(
                    "volume claim template {:?} must set spec.resources.requests.storage",
                    claim.name
                ),
            )),
            Some(s) => match Quantity::parse(s) {
                Err(e) => out.push(Violation::new(
                    Rule::InvalidStorageRequest,
                    path,
                    format!(
                        "storage request of volume claim template {:?}: {e}",
                        claim.name
                    ),
                )),
                Ok(q) if q.nanos() <= 0 => out.push(Violation::new(
                    Rule::InvalidStorageRequest,
                    path,
                    format!(
                        "storage request of volume claim template {:?} must be greater than zero, got {s:?}",
                        claim.name
                    ),
                )),
                Ok(_) => {}
            },
        }
    }
    if view.server_id_base <= 0 {
        out.push(Violation::new(
            Rule::ServerIdBase,
            spec.child("serverIDBase"),
            format!(
                "serverIDBase must be a positive integer, got {}",
                view.server_id_base
            ),
        ));
    }
    if !view.log_rotation_schedule.is_empty()
        && let Err(e) = parse_standard(&view.log_rotation_schedule)
    {
        out.push(Violation::new(
            Rule::LogRotationSchedule,
            spec.child("logRotationSchedule"),
            format!(
                "logRotationSchedule {:?} is not a valid cron schedule: {e}",
                view.log_rotation_schedule
            ),
        ));
    }
    if view.log_rotation_size < 0 {
        out.push(Violation::new(
            Rule::LogRotationSize,
            spec.child("logRotationSize"),
            format!(
                "logRotationSize must not be negative, got {}",
                view.log_rotation_size
            ),
        ));
    }
    if view.replicas % 2 == 0 {
        out.push(Violation::new(
            Rule::ReplicasEven,
            spec.child("replicas"),
            format!(
                "replicas must be a positive odd number, got {}",
                view.replicas
            ),
        ));
    }
    if view.replicas <= 0 {
        out.push(Violation::new(
            Rule::ReplicasNotPositive,
            spec.child("replicas"),
            format!("replicas must be a positive integer, got {}", view.replicas),
        ));
    }
    // MOCO has no upper bound; the engine refuses facts beyond it, so a larger cluster would
    // be accepted here and then never managed. Refused where the user can see it.
    if i64::from(view.replicas) > i64::from(crate::MAX_REPLICAS) {
        out.push(Violation::new(
            Rule::ReplicasTooMany,
            spec.child("replicas"),
            format!(
                "replicas must be at most {}, the most the clustering engine manages, got {}",
                crate::MAX_REPLICAS,
                view.replicas
            ),
        ));
    }
    container_rules(view, out);
    let pod_spec = spec.child("podTemplate").child("spec");
    for (i, c) in view.init_containers.iter().enumerate() {
        let path = pod_spec.child("initContainers").index(i);
        match &c.name {
            None => out.push(Violation::new(
                Rule::ContainerNameMissing,
                path,
                "every init container must have a name",
            )),
            Some(name) if name == RESERVED_INIT_CONTAINER_NAME => out.push(Violation::new(
                Rule::ReservedInitContainerName,
                path,
                format!("init container name {name:?} is reserved for MOCO's init container"),
            )),
            Some(_) => {}
        }
    }
    for (i, name) in view.volume_names.iter().enumerate() {
        if let Some(name) = name
            && RESERVED_VOLUME_NAMES.contains(&name.as_str())
        {
            out.push(Violation::new(
                Rule::ReservedVolumeName,
                pod_spec.child("volumes").index(i),
                format!("volume name {name:?} is reserved for a volume that MOCO adds to the Pod"),
            ));
        }
    }
}

fn container_rules(view: &ClusterView, out: &mut Vec<Violation>) {
    let containers = FieldPath::root("spec")
        .child("podTemplate")
        .child("spec")
        .child("containers");
    let mut mysqld = None;
    for (i, c) in view.containers.iter().enumerate() {
        let path = containers.index(i);
        let Some(name) = &c.name else {
            out.push(Violation::new(
                Rule::ContainerNameMissing,
                path,
                "every container must have a name",
            ));
            continue;
        };
        if name == MYSQLD_CONTAINER_NAME {
            mysqld = Some(i);
        }
        let reserved_for = match name.as_str() {
            "agent" => Some("the moco-agent sidecar"),
            "slow-log" if !view.disable_slow_query_log_container => {
                Some("the slow query log sidecar unless spec.disableSlowQueryLogContainer is true")
            }
            "mysqld-exporter" if !view.collectors.is_empty() => {
                Some("the mysqld_exporter sidecar while spec.collectors is not empty")
            }
            _ => None,
        };
        if let Some(what) = reserved_for {
            out.push(Violation::new(
                Rule::ReservedContainerName,
                path,
                format!("container name {name:?} is reserved for {what}"),
            ));
        }
    }
    let Some(index) = mysqld else {
        out.push(Violation::new(
            Rule::MysqldContainerMissing,
            containers,
            format!("containers must include a container named {MYSQLD_CONTAINER_NAME:?}"),
        ));
        return;
    };
    let ports = containers.index(index).child("ports");
    for (j, port) in view.containers[index].ports.iter().enumerate() {
        if let Some(number) = port.container_port
            && RESERVED_MYSQLD_PORTS.contains(&number)
        {
            out.push(Violation::new(
                Rule::ReservedPort,
                ports.index(j).child("containerPort"),
                format!(
                    "containerPort {number} of the mysqld container is reserved by MOCO \
                         (3306, 33060, 33062 and 9081 are declared by MOCO itself)"
                ),
            ));
        }
        if let Some(name) = &port.name
            && RESERVED_MYSQLD_PORT_NAMES.contains(&name.as_str())
        {
            out.push(Violation::new(
                Rule::ReservedPortName,
                ports.index(j).child("name"),
                format!(
                    "port name {name:?} of the mysqld container is reserved by MOCO \
                         (mysql, mysqlx, mysql-admin and health are declared by MOCO itself)"
                ),
            ));
        }
    }
}

/// Volume claim templates whose storage request grows from `old` to `new` (matched by name).
/// Templates with a missing or unparsable request on either side are not reported.
///
/// Linear in the templates (the old ones are indexed by name, the first of a name kept): the
/// lists are the object's, unbounded, and admission must stay cheap whatever it is sent.
pub fn storage_growth(new: &ClusterView, old: &ClusterView) -> Vec<StorageGrowth> {
    let mut before_by_name = std::collections::HashMap::with_capacity(old.claim_templates.len());
    for c in &old.claim_templates {
        before_by_name.entry(c.name.as_str()).or_insert(c);
    }
    let mut out = Vec::new();
    for (index, claim) in new.claim_templates.iter().enumerate() {
        let Some(before) = before_by_name.get(claim.name.as_str()) else {
            continue;
        };
        let (Some(to), Some(from)) = (&claim.storage_request, &before.storage_request) else {
            continue;
        };
        let (Ok(to_q), Ok(from_q)) = (Quantity::parse(to), Quantity::parse(from)) else {
            continue;
        };
        if to_q.cmp(&from_q) == Ordering::Greater {
            out.push(StorageGrowth {
                index,
                name: claim.name.clone(),
                from: from.clone(),
                to: to.clone(),
                storage_class_name: claim.storage_class_name.clone(),
            });
        }
    }
    out
}

/// Rules checked on update: the update-only rules first, then the create rule set again
/// (without the create-only name length rule), like MOCO.
pub fn validate_cluster_update(
    new: &ClusterView,
    old: &ClusterView,
    storage: &StorageFacts,
) -> Vec<Violation> {
    let spec = FieldPath::root("spec");
    let mut out = Vec::new();
    // A smaller `replicas` is a shrink (MOCO refuses it): the engine and the reconciler keep
    // the leaving instances until no acknowledged commit needs them.
    if let Some(name) = &new.replication_source_secret_name {
        let path = spec.child("replicationSourceSecretName");
        match &old.replication_source_secret_name {
            None => out.push(Violation::new(
                Rule::ReplicationSourceAdded,
                path,
                "replicationSourceSecretName cannot be set on an existing cluster: replication \
                 can be initiated only with new clusters",
            )),
            Some(before) if before != name => out.push(Violation::new(
                Rule::ReplicationSourceChanged,
                path,
                format!(
                    "replicationSourceSecretName cannot be changed (from {before:?} to {name:?}); \
                     it can only be removed to stop replication"
                ),
            )),
            Some(_) => {}
        }
    }
    if new.restore != old.restore {
        out.push(Violation::new(
            Rule::RestoreChanged,
            spec.child("restore"),
            "restore is not editable once the cluster exists",
        ));
    }
    if let StorageFacts::Known(classes) = storage {
        for growth in storage_growth(new, old) {
            expansion_rule(&growth, classes, &mut out);
        }
    }
    spec_rules(new, &mut out);
    out
}

fn expansion_rule(growth: &StorageGrowth, classes: &[StorageClassFacts], out: &mut Vec<Violation>) {
    let what = format!(
        "storage request of volume claim template {:?} grows from {} to {}",
        growth.name, growth.from, growth.to
    );
    match &growth.storage_class_name {
        Some(name) => {
            let path = claim_path(growth.index)
                .child("spec")
                .child("storageClassName");
            match classes.iter().find(|c| &c.name == name) {
                None => out.push(Violation::new(
                    Rule::StorageClassUnknown,
                    path,
                    format!("{what} but storage class {name:?} was not found"),
                )),
                Some(sc) if !sc.allow_volume_expansion => out.push(Violation::new(
                    Rule::VolumeExpansionNotAllowed,
                    path,
                    format!("{what} but storage class {name:?} does not allow volume expansion"),
                )),
                Some(_) => {}
            }
        }
        None => {
            let path = claim_path(growth.index);
            match classes.iter().find(|c| c.is_default) {
                None => out.push(Violation::new(
                    Rule::StorageClassUnknown,
                    path,
                    format!("{what} but no default storage class was found"),
                )),
                Some(sc) if !sc.allow_volume_expansion => out.push(Violation::new(
                    Rule::VolumeExpansionNotAllowed,
                    path,
                    format!(
                        "{what} but the default storage class {:?} does not allow volume expansion",
                        sc.name
                    ),
                )),
                Some(_) => {}
            }
        }
    }
}
