//! Shared helpers for the integration tests.

pub mod agent_pki;
pub mod azurite;
pub mod certs;
pub mod clustered;
pub mod control_plane;
pub mod job_bench;
pub mod kube;
pub mod kubectl_plugin;
pub mod local;
pub mod object_store;
pub mod operated_namespace;
pub mod operator_host;
pub mod pod;
pub mod s3;
pub mod writer;

/// `let (dir, status, writable, port) = started_or_skip!("test name", 3);`: a Healthy cluster
/// with the test table ([`local::started_with_table`]), or `return` from the test when it is
/// skipped for lack of a server.
#[macro_export]
macro_rules! started_or_skip {
    ($test:expr, $replicas:expr) => {
        match $crate::local::started_with_table($test, $replicas).await {
            Some(started) => started,
            None => return,
        }
    };
}
