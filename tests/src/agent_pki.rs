//! The certificates cert-manager issues for a cluster's agents and for the operator that calls
//! them, from one CA (MOCO's `moco-grpc-issuer`): the agents' Secret
//! `moco-agent-<namespace>.<name>` in the operator's namespace (which the operator copies for
//! the Pods) and the operator's client certificate, `CN=moco-controller`, the agents accept
//! (in a real install the Secret `moco-controller-grpc`, mounted at `--grpc-cert-dir`).
//! [`crate::operator_host::issue_agent_certificate`] issues the agents' half only, from a CA
//! it forgets, so an operator started with it cannot clone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use moco_adapters::mysql::tls::Authority;

use crate::control_plane::ControlPlane;

/// Writes the agents' Secret for cluster `namespace/name` into `system` and the operator's
/// client certificate (`ca.crt`, `tls.crt`, `tls.key`) into `grpc_dir`.
pub async fn issue(cp: &ControlPlane, system: &str, namespace: &str, name: &str, grpc_dir: &Path) {
    let ca = Authority::generate("test agent CA").unwrap();
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
    let controller = ca.issue("moco-controller", &[]).unwrap();
    std::fs::create_dir_all(grpc_dir).unwrap();
    std::fs::write(grpc_dir.join("ca.crt"), ca.cert_pem()).unwrap();
    std::fs::write(grpc_dir.join("tls.crt"), &controller.cert_pem).unwrap();
    std::fs::write(grpc_dir.join("tls.key"), &controller.key_pem).unwrap();
}
