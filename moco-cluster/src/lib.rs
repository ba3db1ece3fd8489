//! # moco-cluster
//!
//! The cluster manager and the ports it drives. [`manager::Manager`] runs one
//! observe → decide → act loop per cluster: it observes through a [`ports::Platform`] and one
//! [`ports::MysqlPort`] per instance, asks `moco-core` what to do, and carries the steps out
//! through the same ports, while [`health`] pings every instance in the background. No
//! decision is made here (they all come from `moco-core`) and no server, process or API is
//! reached here: the adapters (`moco-adapters` for MySQL and local processes, the operator
//! for Kubernetes, `moco-sim` in memory) implement the ports, so that every one of them runs
//! the same manager.
#![deny(missing_docs)]

pub mod health;
pub mod manager;
pub mod ports;
