//! # moco-kube
//!
//! What talks to Kubernetes and is shared by the operator and `kubectl moco`: the cluster
//! manager's Kubernetes platform ([`platform::KubePlatform`], which the operator runs and the
//! plugin's `status` and `plan` gather through without writing), the store of the clusters'
//! Pods it reads ([`pods`]), each cluster's last round ([`rounds`]), the per-cluster metrics
//! with MOCO's names ([`metrics`]), and the API server's retries, label selectors and watched
//! namespaces ([`api`]). The pure vocabulary (names, annotations, addresses, the recorded
//! status as the engine sees it) is `moco-api`'s; the controller, rendering and
//! reconcile stay in `moco-operator`.
#![deny(missing_docs)]

pub mod api;
pub mod metrics;
pub mod platform;
pub mod pods;
pub mod rotation;
pub mod rounds;
