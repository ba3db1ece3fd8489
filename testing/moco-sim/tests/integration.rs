//! The integration tests of `moco-sim`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-sim --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod sim_faults;
mod sim_growth;
mod sim_hung;
mod sim_liveness;
mod sim_model;
mod sim_rotation;
mod sim_shrink;
mod slow_primary;
