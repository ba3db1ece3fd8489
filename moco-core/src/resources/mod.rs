//! Kubernetes resource decisions as pure functions (PDB, my.cnf, StatefulSet updates, volumes,
//! reconciler versions, a backup's rate cap, the partitioned rollout).
//!
//! Each submodule takes plain data an adapter observed and returns what the resource should
//! look like or which change to make; applying it is the adapter's job. `docs/resources.md`
//! describes each decision and where it departs from MOCO.

pub mod catch_up;
pub mod mycnf;
pub mod partition;
pub mod pdb;
pub mod quantity;
pub mod rate;
pub mod statefulset;
pub mod volumes;

pub use catch_up::{CatchUp, Incarnation};
pub use mycnf::{
    InstanceConfig, MycnfError, MycnfInput, MycnfPaths, MysqlLine, MysqldMemory, fnv1a_32,
    generate_mycnf, innodb_buffer_pool_bytes, instance_mycnf, mycnf_config_map_name,
    server_section,
};
pub use partition::{
    AdmittedPartition, Lacks, PartitionAdmission, PartitionDecision, PartitionInput, PartitionPod,
    RolloutWait, admit_partition, decide_partition,
};
pub use pdb::{PdbDecision, PdbInput, decide_pdb};
pub use quantity::{Quantity, QuantityError, QuantityErrorKind};
pub use rate::{ByteRate, RateError};
pub use statefulset::{
    LATEST_RECONCILER_VERSION, PodTemplateFacts, ReconcileInfo, StatefulSetAction,
    StatefulSetDecision, StatefulSetInput, UpdateReason, choose_reconciler_version,
    decide_statefulset, statefulset_replicas,
};
pub use volumes::{
    ClaimTemplate, DeployedVolumes, PvcFacts, PvcResize, RolloutFacts, StorageClassFacts,
    VolumeError, VolumeInput, VolumePlan, claim_name, plan_volumes, statefulset_is_updating,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON Schemas of the input and output types are what `moco plan` and the docs
    /// publish; generating them must work and keep the camelCase field names.
    #[test]
    fn schemas_use_camel_case_and_string_quantities() {
        let schemas = [
            serde_json::to_value(schemars::schema_for!(MycnfInput)),
            serde_json::to_value(schemars::schema_for!(InstanceConfig)),
            serde_json::to_value(schemars::schema_for!(PdbInput)),
            serde_json::to_value(schemars::schema_for!(PdbDecision)),
            serde_json::to_value(schemars::schema_for!(StatefulSetInput)),
            serde_json::to_value(schemars::schema_for!(StatefulSetDecision)),
            serde_json::to_value(schemars::schema_for!(VolumeInput)),
            serde_json::to_value(schemars::schema_for!(VolumePlan)),
        ];
        let text: Vec<String> = schemas
            .into_iter()
            .map(|s| s.map(|v| v.to_string()).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert!(text[0].contains("\"userConfig\"") && text[0].contains("\"slowQueryLogFile\""));
        assert!(text[4].contains("\"reconcileInfo\"") && !text[4].contains("reconcile_info"));
        assert!(text[6].contains("\"storageClasses\"") && text[6].contains("Kubernetes quantity"));
        assert!(text[7].contains("\"templateChanges\"") && text[7].contains("\"resizeDeferred\""));
    }
}
