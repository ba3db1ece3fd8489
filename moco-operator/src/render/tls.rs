//! TLS for mysqld (MOCO #544: `require_secure_transport=ON` broke MOCO), opted into with the
//! annotation `moco-rs/tls` (MOCO's API has no field for it; [`moco_api::annotations`] reads it
//! and `moco-rs/tls-issuer`).
//!
//! cert-manager issues one certificate per cluster from the install manifests' CA
//! ([`moco_api::annotations::MYSQL_ISSUER`]) or the issuer the annotation names, in the controller namespace like the agent's. It names every instance
//! (`*.moco-<name>.<ns>.svc`, a wildcard because a StatefulSet's Pods share one template and
//! so one Secret), the primary and replica Services, and `localhost`/`127.0.0.1` for the
//! agent's own TCP connections. The operator copies it into the cluster's namespace twice:
//! the server's key pair for the Pods ([`server_secret`]), and the CA alone for clients
//! ([`ca_secret`]), so that reading the CA never means reading the key.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use moco_api::annotations::IssuerRef;
use moco_api::cluster::{ClusterId, TLS_CA_FILE, TLS_CA_KEY, TLS_MOUNT_PATH};
use serde_json::{Value, json};

use super::certificate::{certificate_object, copied_secret};

/// The keys of the server's copy.
const SERVER_KEYS: [&str; 3] = [TLS_CA_KEY, "tls.crt", "tls.key"];

/// The `Certificate` `moco-mysql-<ns>.<name>` in the controller namespace, signed by `issuer`.
pub fn certificate(id: &ClusterId, system_namespace: &str, issuer: &IssuerRef) -> Value {
    let name = id.mysql_certificate();
    let ns = &id.namespace;
    certificate_object(
        id,
        system_namespace,
        &name,
        json!({
            "secretName": name,
            "dnsNames": [
                format!("*.{}.{ns}.svc", id.prefixed()),
                format!("{}.{ns}.svc", id.primary_service()),
                format!("{}.{ns}.svc", id.replica_service()),
                format!("{}.{ns}", id.primary_service()),
                format!("{}.{ns}", id.replica_service()),
                "localhost",
            ],
            "ipAddresses": ["127.0.0.1"],
            "usages": ["digital signature", "key encipherment", "server auth"],
            "issuerRef": {"kind": issuer.kind, "name": issuer.name},
        }),
    )
}

/// `moco-<name>-mysql-tls`: the certificate, key and CA the Pods mount at [`TLS_MOUNT_PATH`].
pub fn server_secret(id: &ClusterId, source: &BTreeMap<String, ByteString>) -> Secret {
    copied_secret(id, id.mysql_tls_secret(), &SERVER_KEYS, source)
}

/// `moco-<name>-mysql-ca`: the CA only (`ca.crt`), for clients and the Jobs.
pub fn ca_secret(id: &ClusterId, source: &BTreeMap<String, ByteString>) -> Secret {
    copied_secret(id, id.mysql_ca_secret(), &[TLS_CA_KEY], source)
}

/// The server options of my.cnf; they replace the user's options of the same names.
pub fn mycnf_options() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("ssl_ca".to_owned(), TLS_CA_FILE.to_owned()),
        ("ssl_cert".to_owned(), format!("{TLS_MOUNT_PATH}/tls.crt")),
        ("ssl_key".to_owned(), format!("{TLS_MOUNT_PATH}/tls.key")),
        ("require_secure_transport".to_owned(), "ON".to_owned()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_take_only_their_keys() {
        let id = ClusterId {
            name: "db".into(),
            namespace: "ns".into(),
            uid: "u".into(),
        };
        let source: BTreeMap<String, ByteString> = ["ca.crt", "tls.crt", "tls.key", "extra"]
            .iter()
            .map(|k| ((*k).to_owned(), ByteString(k.as_bytes().to_vec())))
            .collect();
        let server = server_secret(&id, &source);
        assert_eq!(server.metadata.name.as_deref(), Some("moco-db-mysql-tls"));
        let keys: Vec<_> = server.data.unwrap().into_keys().collect();
        assert_eq!(keys, ["ca.crt", "tls.crt", "tls.key"]);
        let ca = ca_secret(&id, &source);
        assert_eq!(ca.metadata.name.as_deref(), Some("moco-db-mysql-ca"));
        let keys: Vec<_> = ca.data.unwrap().into_keys().collect();
        assert_eq!(keys, ["ca.crt"]);
    }
}
