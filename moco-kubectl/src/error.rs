//! The one error type of `kubectl moco`. Every variant names what it concerns (the
//! MySQLCluster, the Pod, the Secret key, the flag), so the message alone tells the user what to
//! look at.

use std::time::Duration;

use moco_cluster::manager::ManagerError;
use moco_core::FactsError;
use thiserror::Error;

/// A failed `kubectl moco` command.
#[derive(Debug, Error)]
pub enum Error {
    /// No Kubernetes client could be configured from the flags and the environment.
    #[error("cannot configure a Kubernetes client ({flags}): {message}")]
    Config {
        /// The flags that were given, or "no flags" (`--kubeconfig x --context y`).
        flags: String,
        /// kube's error.
        message: String,
    },
    /// An object does not exist.
    #[error("{kind} {namespace}/{name} not found{hint}")]
    NotFound {
        /// `MySQLCluster`, `Pod`, `Secret`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What usually explains it, starting with `: ` (or empty).
        hint: &'static str,
    },
    /// A rotation of MOCO's passwords did not finish while the command followed it.
    #[error(
        "MySQLCluster {namespace}/{cluster}: the password rotation did not finish within {seconds} s; it goes on in the operator (run the command again to follow it; `kubectl moco status` shows its events)"
    )]
    RotationUnfinished {
        /// Namespace.
        namespace: String,
        /// The cluster.
        cluster: String,
        /// The time followed.
        seconds: u64,
    },
    /// An API request failed.
    #[error("{action} {kind} {namespace}/{name}: {}", chain(.source))]
    Api {
        /// `get`, `patch`, `list`.
        action: &'static str,
        /// The kind, plural for lists.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name (or the selector of a list).
        name: String,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A password Secret lacks a key.
    #[error("Secret {namespace}/{secret} has no key {key} (the password of {user})")]
    MissingKey {
        /// Namespace.
        namespace: String,
        /// Secret name.
        secret: String,
        /// The key, e.g. `READONLY_PASSWORD`.
        key: &'static str,
        /// The MySQL user it belongs to.
        user: &'static str,
    },
    /// A password Secret's value is not text.
    #[error("Secret {namespace}/{secret}: the value of key {key} is empty or not UTF-8")]
    BadKey {
        /// Namespace.
        namespace: String,
        /// Secret name.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// `--index` names no instance.
    #[error(
        "--index {index} is out of range: MySQLCluster {namespace}/{cluster} has {replicas} instance(s), indexes 0 to {last}"
    )]
    IndexOutOfRange {
        /// The index given.
        index: u32,
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// `spec.replicas`.
        replicas: u32,
        /// `replicas - 1` (0 when there are none).
        last: u32,
    },
    /// The recorded primary index names no instance.
    #[error(
        "MySQLCluster {namespace}/{cluster}: status.currentPrimaryIndex {index} is not below spec.replicas {replicas}; give --index"
    )]
    PrimaryOutOfRange {
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// `status.currentPrimaryIndex`.
        index: i64,
        /// `spec.replicas`.
        replicas: u32,
    },
    /// A switchover of a cluster that cannot switch.
    #[error("MySQLCluster {namespace}/{cluster}: {reason}")]
    CannotSwitch {
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// Why (single instance, offline, the target cannot take over).
        reason: String,
    },
    /// `switchover --to` did not happen in time; the request was withdrawn.
    #[error(
        "MySQLCluster {namespace}/{cluster}: instance {target} is not the primary after {}s \
         (the primary is instance {primary}{detail}); the request was withdrawn",
        .waited.as_secs()
    )]
    SwitchoverTimedOut {
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// The requested instance.
        target: u32,
        /// The primary at the end.
        primary: i64,
        /// How long it waited.
        waited: std::time::Duration,
        /// The cluster's conditions that are not as they should be, as `; …`.
        detail: String,
    },
    /// The Pod did not reach phase Running in time.
    #[error(
        "Pod {namespace}/{pod} is not Running after {}s (phase {phase}); see `kubectl describe pod {pod} -n {namespace}`",
        .waited.as_secs()
    )]
    PodNotRunning {
        /// Namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// How long it was waited for (`--pod-running-timeout`).
        waited: Duration,
        /// The last phase seen, or `missing`.
        phase: String,
    },
    /// `kubectl` is not on the search path.
    #[error(
        "kubectl not found on PATH: `kubectl moco mysql` runs `kubectl exec` (install kubectl, or run the plugin through it)"
    )]
    KubectlNotFound,
    /// `kubectl` could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program's path.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The same `--address` index twice.
    #[error("--address: instance {index} is given twice")]
    DuplicateAddress {
        /// The index.
        index: u32,
    },
    /// `--address` names an instance the cluster does not have.
    #[error(
        "--address {index}=...: MySQLCluster {namespace}/{cluster} has {replicas} instance(s), indexes 0 to {last}"
    )]
    AddressOutOfRange {
        /// The index.
        index: u32,
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// `spec.replicas`.
        replicas: u32,
        /// `replicas - 1` (0 when there are none).
        last: u32,
    },
    /// The MySQLCluster lacks metadata the operator's platform needs.
    #[error("MySQLCluster {namespace}/{cluster}: {message}")]
    Cluster {
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// What is wrong.
        message: String,
    },
    /// Gathering the facts failed.
    #[error("gathering the facts of MySQLCluster {namespace}/{cluster}: {source}")]
    Gather {
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// The manager's error.
        #[source]
        source: Box<ManagerError>,
    },
    /// The engine refused the gathered facts.
    #[error("the facts of MySQLCluster {namespace}/{cluster} are inconsistent: {source}")]
    Facts {
        /// Namespace.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// The engine's error (it names the JSON path).
        #[source]
        source: FactsError,
    },
    /// Encoding JSON output failed.
    #[error("cannot encode the output: {0}")]
    Encode(#[from] serde_json::Error),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// `error` and its sources, `: `-separated, each once (kube's transport errors keep the cause,
/// such as the refused connection, in their sources).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let part = source.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = source.source();
    }
    text
}

impl Error {
    /// The error of a failed request on one object: `NotFound` (with `hint`) for a 404.
    pub(crate) fn api(
        action: &'static str,
        kind: &'static str,
        namespace: &str,
        name: &str,
        hint: &'static str,
        source: kube::Error,
    ) -> Self {
        match source {
            kube::Error::Api(status) if status.code == 404 => Error::NotFound {
                kind,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                hint,
            },
            source => Error::Api {
                action,
                kind,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source: Box::new(source),
            },
        }
    }
}
