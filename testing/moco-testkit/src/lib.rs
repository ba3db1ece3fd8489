//! Test support shared by the crates' tests and the integration suite: the in-memory fake API
//! server ([`apiserver`]), throwaway certificates, a minimal HTTP/1.1 client over TCP and TLS,
//! AdmissionReview fixtures, a reader of the metrics exposition that checks its form, the
//! controller container of the install manifests, an RBAC evaluator (`kubectl auth can-i`
//! offline), and the test command's [`ledger`] of tests that ran against real parts.
//!
//! The fake API server is for fast tests of the operator's own logic (what it reads, renders
//! and writes). It models no validation, defaulting, immutable fields, webhooks, controllers or
//! RBAC: a behaviour that depends on those is proven on the real control plane
//! (`scripts/kube.sh`, the `kube_*` modules of the integration suite).
//!
//! The helpers panic on failure, with what failed, as test code does.

pub mod apiserver;
mod certs;
mod client;
mod exposition;
pub mod ledger;
mod manifests;
pub mod rbac;
mod reviews;

pub use certs::write_certificates;
pub use client::{Response, http, https};
pub use exposition::samples;
pub use manifests::{controller_container, deploy_container, repo, strings};
pub use reviews::{allowed, cluster, create_cluster_review, policy, review, static_lookup};

/// The value of `result`, or a panic naming `what` failed.
fn check<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    match result {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}
