//! The Pod runner's integration tests, one module per file, linked into one test binary (as
//! every crate of the workspace does: a binary per file links the dependency graph again).
//! `sandbox`: the network and containers on the real kernel; `volumes_fake_api`: volumes
//! against an in-memory API server; `kube`: `scripts/kube.sh` with a real control plane.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kube;
mod sandbox;
mod volumes_fake_api;
