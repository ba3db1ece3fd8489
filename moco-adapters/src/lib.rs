//! # moco-adapters
//!
//! The ports (traits) the cluster manager drives, and their implementations. No decisions are
//! made here: every choice comes from `moco-core`.
#![deny(missing_docs)]

pub mod health;
pub mod instance;
pub mod local;
pub mod manager;
pub mod mysql;
pub mod mysqld;
pub mod ports;
