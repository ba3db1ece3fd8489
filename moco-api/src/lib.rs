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
//!   `moco-operator`).
#![deny(missing_docs)]

pub mod admission;
pub mod backuppolicy;
pub mod convert;
pub mod crd;
pub mod labels;
pub mod mysqlcluster;
pub mod offline;
pub mod schema_check;

pub use backuppolicy::{BackupPolicy, BackupPolicySpec, BucketConfig, JobConfig};
pub use mysqlcluster::{MySQLCluster, MySQLClusterSpec, MySQLClusterStatus};
