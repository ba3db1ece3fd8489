//! # moco-api
//!
//! The MOCO-compatible Kubernetes API of moco-rs: group `moco.cybozu.com`, version `v1beta2`,
//! kinds [`MySQLCluster`](mysqlcluster::MySQLCluster) and [`BackupPolicy`](backuppolicy::BackupPolicy),
//! with the same fields, defaults, printer columns, labels and annotations as MOCO.
//!
//! * [`crd`]: the CustomResourceDefinitions (with CEL rules) as installed;
//! * [`convert`]: views of the objects for the pure rules of `moco_core::validate`;
//! * [`offline`]: schema + CEL + admission checks of manifests without a cluster (`moco validate`);
//! * [`admission`]: the admission webhooks, `AdmissionReview` in and out (served over HTTPS by
//!   `moco-operator`);
//! * [`labels`]: MOCO's label, annotation and finalizer keys; [`annotations`]: this build's
//!   own annotations, their parsers, and the reader of a `"true"` annotation;
//! * [`cluster`]: a cluster's identity and the names of its objects and ports;
//!   [`addresses`]: where its instances and agents are reached;
//! * [`accounts`]: moco-rs's own kinds `MySQLUser` and `MySQLDatabase` (`moco-rs.io/v1alpha1`):
//!   accounts and databases as code, their admission rules and webhooks.
#![deny(missing_docs)]

pub mod accounts;
pub mod addresses;
pub mod admission;
pub mod annotations;
pub mod backuppolicy;
pub mod cluster;
pub mod convert;
pub mod crd;
pub mod labels;
pub mod mysqlcluster;
pub mod offline;
pub mod schema_check;
pub mod status;

pub use backuppolicy::{BackupPolicy, BackupPolicySpec, BucketConfig, JobConfig};
pub use mysqlcluster::{MySQLCluster, MySQLClusterSpec, MySQLClusterStatus};
