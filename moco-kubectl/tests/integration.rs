//! The integration tests of `moco-kubectl`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-kubectl --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod commands;
mod connect;
mod mysql;
mod plan;
mod real_server;
mod status;
