//! Kubernetes resource decisions as pure functions (PDB, my.cnf, StatefulSet updates, volumes,
//! reconciler versions).
//!
//! Each submodule takes plain data an adapter observed and returns what the resource should
//! look like or which change to make; applying it is the adapter's job. `docs/resources.md`
//! describes each decision and where it departs from MOCO.

pub mod mycnf;
pub mod pdb;
pub mod quantity;
pub mod statefulset;
pub mod volumes;

pub use mycnf::{
    InstanceConfig, MycnfError, MycnfInput, MycnfPaths, MysqldMemory, fnv1a_32, generate_mycnf,
    innodb_buffer_pool_bytes, instance_mycnf, mycnf_config_map_name, server_section,
};
pub use pdb::{PdbDecision, PdbInput, decide_pdb};
pub use quantity::{Quantity, QuantityError, QuantityErrorKind};
pub use statefulset::{
    LATEST_RECONCILER_VERSION, PodTemplateFacts, ReconcileInfo, StatefulSetAction,
    StatefulSetDecision, StatefulSetInput, UpdateReason, choose_reconciler_version,
    decide_statefulset,
};
pub use volumes::{
    ClaimTemplate, DeployedVolumes, PvcFacts, PvcResize, RolloutFacts, StorageClassFacts,
    VolumeError, VolumeInput, VolumePlan, claim_name, plan_volumes, statefulset_is_updating,
};
