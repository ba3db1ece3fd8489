//! The integration tests of `moco-adapters`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-adapters --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod instance_procedures;
mod instance_rekey;
mod mysql_accounts;
mod mysql_launcher;
mod mysql_mariadb;
mod mysql_pool;
mod mysql_tls;
mod resources_mariadb;
mod resources_mysql;
