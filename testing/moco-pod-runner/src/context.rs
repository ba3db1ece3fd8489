//! What every part of a running runner shares.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::state::NetworkState;

/// The runner's shared context, made once by `pod-runner run`.
#[derive(Clone)]
pub struct Context {
    /// A client with the runner's credentials (cluster admin).
    pub client: kube::Client,
    /// The state directory (layout in [`crate::state`]).
    pub state_dir: PathBuf,
    /// What `network-up` made.
    pub network: NetworkState,
    /// The `pod-runner` binary: containers start through its `container-init`.
    pub exe: PathBuf,
    /// The API server's address on the bridge; Pods get it as `KUBERNETES_SERVICE_HOST` and
    /// `KUBERNETES_SERVICE_PORT`, since the `kubernetes` Service's ClusterIP leads nowhere
    /// without kube-proxy.
    pub api_server: SocketAddr,
    /// The cluster's DNS domain (`cluster.local`) for the Pods' `/etc/hosts`.
    pub cluster_domain: String,
    /// The default StorageClass the runner provisions for.
    pub storage_class: String,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("state_dir", &self.state_dir)
            .field("network", &self.network)
            .field("api_server", &self.api_server)
            .finish_non_exhaustive()
    }
}
