//! The agent's serving certificate: a cert-manager `Certificate` in the controller namespace
//! (issued by the gRPC CA the install manifests create) and the copy of its Secret that the
//! cluster's Pods mount. The controller presents the client half of the same CA; agents
//! present their own certificate to each other when one streams a copy to another.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use moco_api::cluster::ClusterId;
use serde_json::{Value, json};

/// The Issuer of the install manifests that signs agent certificates.
pub const GRPC_ISSUER: &str = "moco-grpc-issuer";
/// The keys copied from the cert-manager Secret.
pub const CERTIFICATE_KEYS: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

/// The `Certificate` `moco-agent-<ns>.<name>`: valid for every Pod of the headless Service.
pub fn certificate(id: &ClusterId, system_namespace: &str) -> Value {
    let name = id.certificate();
    certificate_object(
        id,
        system_namespace,
        &name,
        json!({
            "secretName": name,
            "dnsNames": [format!("*.{}.{}.svc", id.prefixed(), id.namespace)],
            // Client auth too: a recipient agent presents it to the donor's agent.
            "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
            "issuerRef": {"kind": "Issuer", "name": GRPC_ISSUER},
        }),
    )
}

/// A cert-manager `Certificate` `name` of cluster `id` in the controller namespace.
pub(super) fn certificate_object(
    id: &ClusterId,
    system_namespace: &str,
    name: &str,
    spec: Value,
) -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {
            "name": name,
            "namespace": system_namespace,
            "labels": id.system_labels(),
        },
        "spec": spec,
    })
}

/// `moco-<name>-grpc`: the certificate, key and CA from cert-manager's Secret (other keys are
/// not copied).
pub fn grpc_secret(id: &ClusterId, source: &BTreeMap<String, ByteString>) -> Secret {
    copied_secret(id, id.grpc_secret(), &CERTIFICATE_KEYS, source)
}

/// Secret `name` in the cluster's namespace, owned by the cluster, holding `keys` of
/// cert-manager's Secret `source` (other keys are not copied).
pub(super) fn copied_secret(
    id: &ClusterId,
    name: String,
    keys: &[&str],
    source: &BTreeMap<String, ByteString>,
) -> Secret {
    let data = keys
        .iter()
        .filter_map(|k| source.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    Secret {
        metadata: id.owned_meta(name, id.labels()),
        data: Some(data),
        ..Secret::default()
    }
}
