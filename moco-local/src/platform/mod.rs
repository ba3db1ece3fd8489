//! The local platform behind `moco local`: a replicated cluster as local processes, driven by
//! the same engine and manager as the operator, with role-following TCP endpoints instead of
//! Services.
//!
//! * [`create`]: `moco local up` (checks that touch nothing, then datadirs and accounts);
//! * [`servers`]: each instance's my.cnf, first initialisation and stopping;
//! * [`port::LocalPlatform`]: the [`moco_cluster::ports::Platform`] port (files instead of API
//!   objects, processes instead of Pods, a supervisor instead of the kubelet);
//! * [`proxy`]: the primary and replica endpoints;
//! * [`clone`]: copying an instance (mariadb-backup streaming, MySQL `CLONE INSTANCE`);
//! * [`run`]: the manager process (manager loop, supervisor, endpoints, `state.json`);
//! * [`scale`]: `moco local scale` (new instances, then the new size);
//! * [`layout`], [`manifest`], [`pods`], [`secret`], [`snapshot`], [`files`]: the directory.

pub mod clone;
pub mod create;
pub mod error;
pub mod files;
pub mod layout;
pub mod manifest;
pub mod pods;
pub mod port;
pub mod proxy;
pub mod run;
pub mod scale;
pub mod secret;
pub mod servers;
pub mod snapshot;
pub mod sql;
pub mod tls;

pub use error::LocalError;
pub use layout::Layout;
pub use manifest::Manifest;
pub use port::{EventRecord, LocalConfig, LocalPlatform};
