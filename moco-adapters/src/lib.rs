//! # moco-adapters
//!
//! The implementations of the cluster manager's ports (`moco_cluster::ports`) for real servers:
//! MySQL and MariaDB over `mysql_async` ([`mysql`]), local mysqld processes ([`mysqld`]) and
//! the procedures that run next to one mysqld ([`instance`]). The platforms that place the
//! servers are elsewhere: Kubernetes in `moco-kube`, local processes in `moco-local`. No
//! decisions are made here: every choice comes from `moco-core`, and the loop that drives these
//! adapters is `moco-cluster`'s.
#![deny(missing_docs)]

pub mod failure;
pub mod greeting;
pub mod instance;
pub mod modes;
pub mod mysql;
pub mod mysqld;
