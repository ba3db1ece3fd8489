//! The integration tests of `moco-api`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-api --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admission;
mod cel_rules;
mod offline;
mod prevent_delete_policy;
mod statefulset_webhook;
