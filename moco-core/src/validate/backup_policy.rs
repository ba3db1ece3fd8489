//! `BackupPolicy` validation rules (MOCO's validating webhook for CREATE, UPDATE and DELETE).

use super::cron::parse_standard;
use super::{FieldPath, Rule, Violation};

/// The fields of a `BackupPolicy` that the validation rules read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupPolicyView {
    /// `metadata.name`.
    pub name: String,
    /// `spec.schedule`.
    pub schedule: String,
}

/// A `MySQLCluster` in the policy's namespace and the policy it uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterReference {
    /// `metadata.name` of the cluster.
    pub cluster_name: String,
    /// `spec.backupPolicyName` of the cluster.
    pub backup_policy_name: Option<String>,
}

/// Rules checked on CREATE and UPDATE: the schedule must parse like a CronJob schedule
/// (robfig/cron `ParseStandard`).
pub fn validate_backup_policy(view: &BackupPolicyView) -> Vec<Violation> {
    match parse_standard(&view.schedule) {
        Ok(_) => Vec::new(),
        Err(e) => vec![Violation::new(
            Rule::BackupSchedule,
            FieldPath::root("spec").child("schedule"),
            format!(
                "schedule {:?} is not a valid cron schedule: {e}",
                view.schedule
            ),
        )],
    }
}

/// The DELETE rule: a policy that a `MySQLCluster` of the same namespace still names in
/// `spec.backupPolicyName` cannot be deleted. `clusters` are the clusters of that namespace.
pub fn validate_backup_policy_delete(
    policy_name: &str,
    clusters: &[ClusterReference],
) -> Vec<Violation> {
    let users: Vec<&str> = clusters
        .iter()
        .filter(|c| c.backup_policy_name.as_deref() == Some(policy_name))
        .map(|c| c.cluster_name.as_str())
        .collect();
    if users.is_empty() {
        return Vec::new();
    }
    vec![Violation::new(
        Rule::BackupPolicyInUse,
        FieldPath::root("metadata").child("name"),
        format!(
            "BackupPolicy {policy_name:?} cannot be deleted: it is still referenced by \
             spec.backupPolicyName of {} {}",
            if users.len() == 1 {
                "MySQLCluster"
            } else {
                "MySQLClusters"
            },
            users.join(", ")
        ),
    )]
}
