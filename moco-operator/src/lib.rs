//! # moco-operator
//!
//! The library of the in-cluster process, `moco controller`: what the install manifests run
//! (`deploy/`, `charts/moco/`), configured by the flags of MOCO's `moco-controller`.
//!
//! What it serves, started together by [`Servers::start`] and run by [`run()`]:
//!
//! * the admission webhooks of [`moco_api::admission`] over HTTPS ([`webhook`], [`moco_http::tls`]), with
//!   the certificate re-read from `--cert-dir` every minute;
//! * `/healthz` and `/readyz` ([`health`]): ready once the webhook listener serves, not ready
//!   again once shutdown starts;
//! * `/metrics` ([`metrics`]) in the OpenMetrics text format;
//!
//! each within the connection, time and size bounds of [`moco_http::limits`].
//!
//! What it runs on the elected leader ([`operator`]): the MySQLCluster reconciler
//! ([`controller`], [`reconcile`], objects built by [`render`]) and one clustering manager per
//! cluster over the Kubernetes platform ([`clustering`]).
//!
//! [`run()`] does not wait for signals: it stops when the future it is given completes, so the
//! binary decides what stops it (SIGTERM/SIGINT) and tests stop it at will.
#![deny(missing_docs)]

pub mod accounts;
pub mod annotations;
pub mod clustering;
pub mod config;
pub mod controller;
pub mod error;
pub mod events;
pub mod health;
pub mod metrics;
pub mod operator;
pub mod partition;
pub mod reconcile;
pub mod render;
pub mod run;
pub mod servers;
pub mod webhook;

pub use config::{CompatFlags, ControllerArgs, ReconcilerFlags, ServeConfig};
pub use error::ControllerError;
pub use health::Readiness;
pub use metrics::Metrics;
pub use moco_http::listen::ListenAddr;
pub use run::{announce, run};
pub use servers::Servers;
