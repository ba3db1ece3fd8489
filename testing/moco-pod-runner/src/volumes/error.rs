//! What can go wrong preparing, refreshing and mounting a Pod's volumes.

use std::io;
use std::path::PathBuf;

use super::downward::FieldError;

/// A volume that cannot be prepared, refreshed or mounted. Every variant names the volume and
/// the object (ConfigMap, Secret, claim, path, field) it is about.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A ConfigMap or Secret the volume needs is not there (and is not optional).
    #[error("volume {volume:?}: {kind} {namespace}/{name} not found")]
    ObjectMissing {
        /// The volume.
        volume: String,
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// An `items` entry names a key the object does not have (and is not optional).
    #[error("volume {volume:?}: {kind} {namespace}/{name} has no key {key:?}")]
    KeyMissing {
        /// The volume.
        volume: String,
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key.
        key: String,
    },
    /// Reading an object from the API server failed.
    #[error("volume {volume:?}: reading {kind} {namespace}/{name}: {source}")]
    Api {
        /// The volume.
        volume: String,
        /// The object's kind.
        kind: &'static str,
        /// Its namespace (empty for cluster-scoped objects).
        namespace: String,
        /// Its name.
        name: String,
        /// The error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The TokenRequest for a projected service account token failed.
    #[error("volume {volume:?}: token for ServiceAccount {namespace}/{service_account}: {source}")]
    Token {
        /// The volume.
        volume: String,
        /// The Pod's namespace.
        namespace: String,
        /// The Pod's ServiceAccount.
        service_account: String,
        /// The error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The claim does not exist (yet).
    #[error("volume {volume:?}: PersistentVolumeClaim {namespace}/{claim} not found")]
    ClaimMissing {
        /// The volume.
        volume: String,
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        claim: String,
    },
    /// The claim is not bound to a PersistentVolume yet (or is being deleted).
    #[error(
        "volume {volume:?}: PersistentVolumeClaim {namespace}/{claim} is not bound yet ({state})"
    )]
    ClaimNotBound {
        /// The volume.
        volume: String,
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        claim: String,
        /// Its phase and volume name, or why it cannot be used.
        state: String,
    },
    /// The claim's PersistentVolume does not exist (yet), or is bound to another claim.
    #[error("volume {volume:?}: PersistentVolume {pv:?} of claim {namespace}/{claim}: {state}")]
    PersistentVolume {
        /// The volume.
        volume: String,
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        claim: String,
        /// The PersistentVolume.
        pv: String,
        /// What is wrong.
        state: String,
    },
    /// A generic ephemeral volume's claim exists but was not made for this Pod.
    #[error(
        "volume {volume:?}: PersistentVolumeClaim {namespace}/{claim} was not created for this Pod"
    )]
    ClaimNotOwned {
        /// The volume.
        volume: String,
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        claim: String,
    },
    /// A `hostPath` (of the Pod or of a PersistentVolume) is not what its `type` asks.
    #[error("volume {volume:?}: hostPath {}: {reason}", path.display())]
    HostPath {
        /// The volume.
        volume: String,
        /// The path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
        /// Whether it may appear later (missing rather than of the wrong kind).
        missing: bool,
    },
    /// A downward API file or field cannot be read.
    #[error("volume {volume:?}: file {path:?}: {source}")]
    Field {
        /// The volume.
        volume: String,
        /// The file's path in the volume.
        path: String,
        /// Why.
        #[source]
        source: FieldError,
    },
    /// A volume kind (or a projection source, or a PersistentVolume source) the runner cannot
    /// provide.
    #[error("volume {volume:?}: {what} is not supported by the pod runner")]
    Unsupported {
        /// The volume.
        volume: String,
        /// What (`nfs`, `projected clusterTrustBundle`, `PersistentVolume pv-1 (csi)`).
        what: String,
    },
    /// A value of the Pod's spec the runner refuses (a file path with `..`, an ID out of range).
    #[error("volume {volume:?}: {field} {value:?}: {reason}")]
    Invalid {
        /// The volume.
        volume: String,
        /// The field (`items[0].path`, `securityContext.fsGroup`).
        field: String,
        /// Its value.
        value: String,
        /// Why.
        reason: String,
    },
    /// A filesystem operation on the volume failed.
    #[error("volume {volume:?}: {}: {source}", path.display())]
    Io {
        /// The volume.
        volume: String,
        /// What it was done to.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A container's `volumeMounts[index]` names a volume the Pod does not have.
    #[error(
        "container {container:?}: volumeMounts[{index}] names volume {volume:?}, which the Pod does not have"
    )]
    NoVolume {
        /// The container.
        container: String,
        /// The mount's index.
        index: usize,
        /// The volume named.
        volume: String,
    },
    /// A `subPath` or `subPathExpr` the kubelet refuses.
    #[error("container {container:?}: volume {volume:?}: {field} {value:?}: {reason}")]
    SubPath {
        /// The container.
        container: String,
        /// The volume.
        volume: String,
        /// `volumeMounts[i].subPath` or `volumeMounts[i].subPathExpr`.
        field: String,
        /// The value (expanded for `subPathExpr`).
        value: String,
        /// Why.
        reason: String,
    },
}

impl VolumeError {
    /// Whether trying again later may succeed without the Pod changing: an object, key, claim,
    /// PersistentVolume, token or host path that is not there yet, or an API server that did
    /// not answer. The Pod worker keeps the Pod waiting (`ContainerCreating`) and retries; the
    /// other errors say the Pod asks for something the runner will never provide.
    pub fn is_not_ready(&self) -> bool {
        match self {
            VolumeError::ObjectMissing { .. }
            | VolumeError::KeyMissing { .. }
            | VolumeError::Api { .. }
            | VolumeError::Token { .. }
            | VolumeError::ClaimMissing { .. }
            | VolumeError::ClaimNotBound { .. }
            | VolumeError::PersistentVolume { .. } => true,
            VolumeError::HostPath { missing, .. } => *missing,
            VolumeError::Field { source, .. } => source.is_not_ready(),
            VolumeError::ClaimNotOwned { .. }
            | VolumeError::Unsupported { .. }
            | VolumeError::Invalid { .. }
            | VolumeError::Io { .. }
            | VolumeError::NoVolume { .. }
            | VolumeError::SubPath { .. } => false,
        }
    }
}
