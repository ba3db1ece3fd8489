//! The programs that run in a MySQLCluster's Pod next to mysqld, over the procedures of
//! [`moco_adapters::instance`] that `moco local` runs too:
//!
//! * [`init`]: `moco init`, the init container (datadir, time zones, per-instance snippet);
//! * the agent sidecar (`moco agent`): first start, probes, the clone service over mutual
//!   TLS, slow-log rotation and metrics.
//!
//! [`layout`] says which files on the data volume belong to whom.
#![deny(missing_docs)]

pub mod agent;
pub mod api;
pub mod client;
pub mod error;
pub mod init;
pub mod layout;
pub mod pod;
pub mod role;

pub use agent::config::AgentArgs;
pub use error::{AgentError, ErrorCategory};
