//! Whether the cluster gets a PodDisruptionBudget, and how many Pods it lets go at once.
//!
//! A majority must stay up for semi-sync to keep acknowledging writes, so voluntary evictions
//! may take at most `floor(replicas / 2)` Pods. With fewer than three instances there is no
//! majority to protect, and an offline cluster has no Pods, so no budget exists then. While a
//! backup Job runs nothing may be evicted: losing the backup source aborts the backup.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Smallest cluster that gets a budget.
pub const MIN_REPLICAS_FOR_PDB: u32 = 3;

/// What the PDB decision depends on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PdbInput {
    /// `spec.replicas`.
    pub replicas: u32,
    /// `spec.offline`.
    #[serde(default)]
    pub offline: bool,
    /// The backup CronJob has at least one active Job.
    #[serde(default)]
    pub backup_job_active: bool,
}

/// The desired PodDisruptionBudget `moco-<cluster>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "pdb", rename_all = "camelCase", deny_unknown_fields)]
pub enum PdbDecision {
    /// No budget: delete it if it exists.
    Absent,
    /// Apply a budget selecting the cluster's Pods.
    Present {
        /// `spec.maxUnavailable`.
        #[serde(rename = "maxUnavailable")]
        max_unavailable: u32,
    },
}

/// Decides the PodDisruptionBudget.
pub fn decide_pdb(input: &PdbInput) -> PdbDecision {
    if input.offline || input.replicas < MIN_REPLICAS_FOR_PDB {
        return PdbDecision::Absent;
    }
    let max_unavailable = if input.backup_job_active {
        0
    } else {
        input.replicas / 2
    };
    PdbDecision::Present { max_unavailable }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_table() {
        use PdbDecision::{Absent, Present};
        // (replicas, offline, backup running) → decision
        let cases = [
            (0, false, false, Absent),
            (1, false, false, Absent),
            (1, false, true, Absent),
            (2, false, false, Absent),
            (3, false, false, Present { max_unavailable: 1 }),
            (3, false, true, Present { max_unavailable: 0 }),
            (3, true, false, Absent),
            (3, true, true, Absent),
            (4, false, false, Present { max_unavailable: 2 }),
            (5, false, false, Present { max_unavailable: 2 }),
            (5, false, true, Present { max_unavailable: 0 }),
            (7, false, false, Present { max_unavailable: 3 }),
            (9, true, false, Absent),
        ];
        for (replicas, offline, backup_job_active, want) in cases {
            let input = PdbInput {
                replicas,
                offline,
                backup_job_active,
            };
            assert_eq!(decide_pdb(&input), want, "{input:?}");
        }
    }

    #[test]
    fn serialises_as_tagged_object() {
        let present = serde_json::to_value(PdbDecision::Present { max_unavailable: 1 });
        assert_eq!(
            present.ok(),
            Some(serde_json::json!({"pdb": "present", "maxUnavailable": 1}))
        );
        let absent = serde_json::to_value(PdbDecision::Absent);
        assert_eq!(absent.ok(), Some(serde_json::json!({"pdb": "absent"})));
        let back: Result<PdbDecision, _> =
            serde_json::from_value(serde_json::json!({"pdb": "present", "maxUnavailable": 2}));
        assert_eq!(back.ok(), Some(PdbDecision::Present { max_unavailable: 2 }));
    }
}
