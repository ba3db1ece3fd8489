//! TLS for mysqld (MOCO #544: `require_secure_transport=ON` broke MOCO), opted into with the
//! annotation [`TLS_ANNOTATION`] (MOCO's API has no field for it).
//!
//! cert-manager issues one certificate per cluster from the install manifests' CA
//! ([`MYSQL_ISSUER`]), in the controller namespace like the agent's. It names every instance
//! (`*.moco-<name>.<ns>.svc`, a wildcard because a StatefulSet's Pods share one template and
//! so one Secret), the primary and replica Services, and `localhost`/`127.0.0.1` for the
//! agent's own TCP connections. The operator copies it into the cluster's namespace twice:
//! the server's key pair for the Pods ([`server_secret`]), and the CA alone for clients
//! ([`ca_secret`]), so that reading the CA never means reading the key.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use moco_api::mysqlcluster::MySQLCluster;
use serde_json::{Value, json};

use super::RenderError;
use super::certificate::{certificate_object, copied_secret};
use super::meta::ClusterId;

/// MySQLCluster annotation: `"true"` serves TLS and refuses plain TCP; fixed at creation.
pub const TLS_ANNOTATION: &str = "moco-rs/tls";
/// The Issuer of the install manifests that signs mysqld certificates.
pub const MYSQL_ISSUER: &str = "moco-mysql-issuer";
/// MySQLCluster annotation naming another issuer for mysqld's certificate (an organisation's
/// own CA): `ClusterIssuer/<name>` only. An `Issuer` would be looked up in the controller
/// namespace, where the Certificate lives, and the Issuers there are the operator's own (the
/// agents' CA among them): a tenant could have them sign a key that then lands in the
/// tenant's namespace. Its Secret must carry `ca.crt`, as cert-manager's CA and Vault issuers
/// write it. Fixed at creation, like [`TLS_ANNOTATION`].
pub const TLS_ISSUER_ANNOTATION: &str = "moco-rs/tls-issuer";
/// Where the mysqld and agent containers (and the Jobs) find the files.
pub const MOUNT_PATH: &str = "/mysql-tls";
/// The CA file inside [`MOUNT_PATH`]: replication channels, `mariadb-backup` and
/// `mariadb-binlog` verify their server with it.
pub const CA_FILE: &str = "/mysql-tls/ca.crt";
/// The CA key of the cert-manager Secret and of both copies.
pub const CA_KEY: &str = "ca.crt";
/// The keys of the server's copy.
const SERVER_KEYS: [&str; 3] = [CA_KEY, "tls.crt", "tls.key"];

/// Whether `cluster` asked for TLS; a value other than `"true"`/`"false"` is an error naming
/// the annotation.
pub fn tls_of(cluster: &MySQLCluster) -> Result<bool, RenderError> {
    match cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TLS_ANNOTATION))
        .map(String::as_str)
    {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(RenderError::invalid(
            format!("metadata.annotations[\"{TLS_ANNOTATION}\"]"),
            format!("{other:?} is not a boolean: use \"true\" or \"false\""),
        )),
    }
}

/// A cert-manager issuer, as a Certificate's `issuerRef` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuerRef {
    /// `Issuer` (in the Certificate's namespace) or `ClusterIssuer`.
    pub kind: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for IssuerRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// The issuer of mysqld's certificate: from [`TLS_ISSUER_ANNOTATION`], else the install
/// manifests' [`MYSQL_ISSUER`]. A malformed value, an `Issuer`, or a value without TLS is an
/// error naming the annotation (the webhook refuses it, and reconcile too if one got past).
pub fn issuer_of(cluster: &MySQLCluster) -> Result<IssuerRef, RenderError> {
    let field = || format!("metadata.annotations[\"{TLS_ISSUER_ANNOTATION}\"]");
    let Some(value) = cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TLS_ISSUER_ANNOTATION))
    else {
        return Ok(IssuerRef {
            kind: "Issuer".to_owned(),
            name: MYSQL_ISSUER.to_owned(),
        });
    };
    if !tls_of(cluster)? {
        return Err(RenderError::invalid(
            field(),
            format!("an issuer needs TLS: set {TLS_ANNOTATION}: \"true\""),
        ));
    }
    let (kind, name) = value.split_once('/').unwrap_or(("", ""));
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if kind == "Issuer" {
        return Err(RenderError::invalid(
            field(),
            format!(
                "{value:?}: use \"ClusterIssuer/<name>\": an Issuer is looked up in the \
                 operator's namespace, whose Issuers are the operator's own"
            ),
        ));
    }
    if kind != "ClusterIssuer" || !name_ok {
        return Err(RenderError::invalid(
            field(),
            format!("{value:?}: use \"ClusterIssuer/<name>\""),
        ));
    }
    Ok(IssuerRef {
        kind: kind.to_owned(),
        name: name.to_owned(),
    })
}

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

/// `moco-<name>-mysql-tls`: the certificate, key and CA the Pods mount at [`MOUNT_PATH`].
pub fn server_secret(id: &ClusterId, source: &BTreeMap<String, ByteString>) -> Secret {
    copied_secret(id, id.mysql_tls_secret(), &SERVER_KEYS, source)
}

/// `moco-<name>-mysql-ca`: the CA only (`ca.crt`), for clients and the Jobs.
pub fn ca_secret(id: &ClusterId, source: &BTreeMap<String, ByteString>) -> Secret {
    copied_secret(id, id.mysql_ca_secret(), &[CA_KEY], source)
}

/// The server options of my.cnf; they replace the user's options of the same names.
pub fn mycnf_options() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("ssl_ca".to_owned(), CA_FILE.to_owned()),
        ("ssl_cert".to_owned(), format!("{MOUNT_PATH}/tls.crt")),
        ("ssl_key".to_owned(), format!("{MOUNT_PATH}/tls.key")),
        ("require_secure_transport".to_owned(), "ON".to_owned()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(annotation: Option<&str>) -> MySQLCluster {
        let mut c: MySQLCluster = serde_json::from_value(json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"podTemplate": {"spec": {"containers": []}}, "volumeClaimTemplates": []}
        }))
        .unwrap();
        if let Some(v) = annotation {
            c.metadata.annotations = Some(BTreeMap::from([(TLS_ANNOTATION.into(), v.into())]));
        }
        c
    }

    #[test]
    fn the_annotation_is_a_boolean_and_off_by_default() {
        assert!(!tls_of(&cluster(None)).unwrap());
        assert!(!tls_of(&cluster(Some("false"))).unwrap());
        assert!(tls_of(&cluster(Some("true"))).unwrap());
        let e = tls_of(&cluster(Some("yes"))).unwrap_err().to_string();
        assert!(e.contains("metadata.annotations[\"moco-rs/tls\"]"), "{e}");
        assert!(e.contains("\"yes\""), "{e}");
    }

    #[test]
    fn the_issuer_is_the_install_manifests_unless_named_and_needs_tls() {
        let with = |pairs: &[(&str, &str)]| {
            let mut c = cluster(None);
            c.metadata.annotations = Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
            issuer_of(&c)
        };
        assert_eq!(
            with(&[(TLS_ANNOTATION, "true")]).unwrap().to_string(),
            "Issuer/moco-mysql-issuer"
        );
        assert_eq!(
            with(&[
                (TLS_ANNOTATION, "true"),
                (TLS_ISSUER_ANNOTATION, "ClusterIssuer/corp-ca")
            ])
            .unwrap(),
            IssuerRef {
                kind: "ClusterIssuer".to_owned(),
                name: "corp-ca".to_owned()
            }
        );
        for bad in [
            "corp-ca",
            "ClusterIssuer/",
            "Certificate/x",
            "ClusterIssuer/Corp_CA",
            "Issuer/corp-ca",
            "Issuer/moco-grpc-issuer",
        ] {
            let e = with(&[(TLS_ANNOTATION, "true"), (TLS_ISSUER_ANNOTATION, bad)])
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("metadata.annotations[\"moco-rs/tls-issuer\"]: ")
                    && e.contains("ClusterIssuer/<name>"),
                "{bad}: {e}"
            );
        }
        let e = with(&[(TLS_ISSUER_ANNOTATION, "ClusterIssuer/corp-ca")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("an issuer needs TLS"), "{e}");
    }

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
