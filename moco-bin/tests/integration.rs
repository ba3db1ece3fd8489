//! The integration tests of `moco-bin`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-bin --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_crd;
mod api_validate;
mod closed_output;
mod controller_args;
mod controller_server;
mod plan_cli;
