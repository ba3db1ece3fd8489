//! The certificates cert-manager issues for the clusters' agents and for the operator that calls
//! them, from one CA (MOCO's `moco-grpc-issuer`): the agents' Secret
//! `moco-agent-<namespace>.<name>` in the operator's namespace (which the operator copies for
//! the Pods) and the operator's client certificate, `CN=moco-controller`, that the agents accept
//! (in an install the Secret `moco-controller-grpc`, mounted at `--grpc-cert-dir`).
//!
//! One CA serves the whole test process, as one serves a whole install: every
//! [`crate::operator_host::OperatorHost`] gets its client certificate from it and every
//! agents' Secret is issued by it, so that any operator of the process can clone any cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use moco_adapters::mysql::tls::Authority;

use crate::control_plane::ControlPlane;

/// The CA's certificate and key, made once per test process (kept as PEM: the issuer is
/// loaded again where it is used, so nothing needs to be shared between threads).
static CA: OnceLock<(String, String)> = OnceLock::new();

/// The test process's agent CA.
fn authority() -> Authority {
    let (cert, key) = CA.get_or_init(|| {
        let ca = Authority::generate("test agent CA").unwrap();
        (ca.cert_pem().to_owned(), ca.key_pem().to_owned())
    });
    Authority::load("test agent CA", cert, key).unwrap()
}

/// Writes the Secret cert-manager would issue for the agents of cluster `namespace/name`
/// (`moco-agent-<namespace>.<name>` in the operator's namespace `system`), which the
/// operator copies into the cluster's namespace for the Pods.
pub async fn issue_agent_certificate(cp: &ControlPlane, system: &str, namespace: &str, name: &str) {
    let ca = authority();
    let agent = ca
        .issue("moco-agent", &[format!("*.moco-{name}.{namespace}.svc")])
        .unwrap();
    let secret_name = format!("moco-agent-{namespace}.{name}");
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": secret_name, "namespace": system},
        "type": "kubernetes.io/tls",
        "stringData": {
            "ca.crt": ca.cert_pem(),
            "tls.crt": agent.cert_pem,
            "tls.key": agent.key_pem,
        }
    }))
    .unwrap();
    Api::<Secret>::namespaced(cp.client.clone(), system)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("creating Secret {system}/{secret_name}: {e}"));
}

/// Writes the operator's client certificate (`ca.crt`, `tls.crt`, `tls.key`, as the Secret
/// `moco-controller-grpc` is mounted) into `grpc_dir`.
pub fn write_controller_certificate(grpc_dir: &Path) {
    let ca = authority();
    let controller = ca.issue("moco-controller", &[]).unwrap();
    std::fs::create_dir_all(grpc_dir).unwrap();
    std::fs::write(grpc_dir.join("ca.crt"), ca.cert_pem()).unwrap();
    std::fs::write(grpc_dir.join("tls.crt"), &controller.cert_pem).unwrap();
    std::fs::write(grpc_dir.join("tls.key"), &controller.key_pem).unwrap();
}
