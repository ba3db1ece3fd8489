//! The integration tests of `moco-core`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-core --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod facts_schema;
mod failover_errant_rebase;
mod properties;
mod resources_mycnf;
mod scenarios;
mod validate_backup_policy;
mod validate_cluster;
mod validate_cron;
