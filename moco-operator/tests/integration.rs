//! The integration tests of `moco-operator`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-operator --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod controller_args;
mod limits;
mod operator;
mod partition;
mod pods;
mod rbac;
mod reconcile;
mod render;
mod servers;
mod webhook_tls;
