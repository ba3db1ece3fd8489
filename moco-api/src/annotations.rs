//! This build's own annotations (MOCO's API has no fields for them), with their parsers, and the
//! one reader of a `"true"` annotation. MOCO's keys are in [`crate::labels`].
//!
//! The operator renders from them and its webhook refuses what they cannot parse; the backup
//! Jobs and `kubectl moco` read the same ones, so every side parses a value one way.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use moco_core::facts::Flavor;
use moco_core::resources::ByteRate;

use crate::cluster::ObjectError;
use crate::mysqlcluster::MySQLCluster;

/// MySQLCluster annotation naming the server family of its `mysqld` image: `mysql` (MOCO's,
/// the default) or `mariadb` (this build's extension; MOCO's API has no field for it).
pub const FLAVOR_ANNOTATION: &str = "moco-rs/flavor";

/// MySQLCluster annotation: `"true"` serves TLS and refuses plain TCP; fixed at creation.
pub const TLS_ANNOTATION: &str = "moco-rs/tls";

/// MySQLCluster annotation naming another issuer for mysqld's certificate (an organisation's
/// own CA): `ClusterIssuer/<name>` only. An `Issuer` would be looked up in the controller
/// namespace, where the Certificate lives, and the Issuers there are the operator's own (the
/// agents' CA among them): a tenant could have them sign a key that then lands in the
/// tenant's namespace. Its Secret must carry `ca.crt`, as cert-manager's CA and Vault issuers
/// write it. Fixed at creation, like [`TLS_ANNOTATION`].
pub const TLS_ISSUER_ANNOTATION: &str = "moco-rs/tls-issuer";

/// The Issuer of the install manifests that signs mysqld certificates, when
/// [`TLS_ISSUER_ANNOTATION`] names none.
pub const MYSQL_ISSUER: &str = "moco-mysql-issuer";

/// MySQLCluster annotation turning on binlog archiving every few seconds (beyond MOCO, whose
/// API has no field for it): the pause between rounds, a Go duration from `1s` to `1h`.
pub const ARCHIVE_ANNOTATION: &str = "moco-rs/binlog-archive-interval";

/// MySQLCluster annotation capping the backup Job's read rate (beyond MOCO): bytes per second
/// as a Kubernetes quantity (`60Mi`), passed as `moco backup --max-rate`. A backup of a
/// replica that shares a node with the primary otherwise slows the primary's writes more.
pub const MAX_RATE_ANNOTATION: &str = "moco-rs/backup-max-rate";

/// MySQLCluster annotation asking for a switchover to one instance, by ordinal
/// (`kubectl moco switchover --to N`; beyond MOCO, whose demote annotation lets the operator
/// choose). The clustering manager removes it once that instance is the primary, or with a
/// `SwitchOverRefused` event when it cannot take over (not Ready, errant, not replicating).
pub const SWITCHOVER_TO_ANNOTATION: &str = "moco-rs/switchover-to";

/// MySQLCluster annotation the clustering manager writes in the same patch that withdraws a
/// refused [`SWITCHOVER_TO_ANNOTATION`]: `N: reason` ([`switchover_refusal`]), so that
/// `kubectl moco switchover --to N` reads the refusal with the withdrawal, whenever the
/// refusal's event arrives. A new request removes it.
pub const SWITCHOVER_REFUSED_ANNOTATION: &str = "moco-rs/switchover-refused";

/// MySQLCluster annotation asking for new passwords for MOCO's eight accounts (`kubectl moco
/// credential rotate`; beyond MOCO): any new value (the command writes the time) starts one
/// rotation, which the operator records as served in its password Secret, so the annotation
/// may stay. See `docs/accounts.md`.
pub const ROTATE_PASSWORDS_ANNOTATION: &str = "moco-rs/rotate-passwords";

/// Pod-template annotation by which reconciler version 2 (an upgrade test) differs from
/// version 1.
pub const UPGRADE_TEST_ANNOTATION: &str = "moco-rs/reconciler-version";

/// StatefulSet annotation holding the hash of the rendering last applied, so that a drift is
/// told from a change of the rendering.
pub const RENDERED_HASH_ANNOTATION: &str = "moco-rs/rendered-hash";

/// The value of annotation `key` of `meta`, if it has one.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether annotation `key` of `meta` is `"true"`, as MOCO reads its boolean annotations
/// (`demote`, `prevent-delete`, `clustering-stopped`, …): any other value, or none, is false.
pub fn is_true(meta: &ObjectMeta, key: &str) -> bool {
    annotation(meta, key) == Some("true")
}

fn invalid(key: &'static str, message: impl Into<String>) -> ObjectError {
    ObjectError::InvalidAnnotation {
        key,
        message: message.into(),
    }
}

/// The server family of `cluster`, from [`FLAVOR_ANNOTATION`].
pub fn flavor_of(cluster: &MySQLCluster) -> Result<Flavor, ObjectError> {
    match annotation(&cluster.metadata, FLAVOR_ANNOTATION) {
        None | Some("mysql") => Ok(Flavor::Mysql),
        Some("mariadb") => Ok(Flavor::Mariadb),
        Some(other) => Err(invalid(
            FLAVOR_ANNOTATION,
            format!("{other:?} is not a server family: use \"mysql\" or \"mariadb\""),
        )),
    }
}

/// Whether `cluster` asked for TLS ([`TLS_ANNOTATION`]); a value other than `"true"`/`"false"`
/// is an error naming the annotation.
pub fn tls_of(cluster: &MySQLCluster) -> Result<bool, ObjectError> {
    match annotation(&cluster.metadata, TLS_ANNOTATION) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(invalid(
            TLS_ANNOTATION,
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
pub fn issuer_of(cluster: &MySQLCluster) -> Result<IssuerRef, ObjectError> {
    let Some(value) = annotation(&cluster.metadata, TLS_ISSUER_ANNOTATION) else {
        return Ok(IssuerRef {
            kind: "Issuer".to_owned(),
            name: MYSQL_ISSUER.to_owned(),
        });
    };
    if !tls_of(cluster)? {
        return Err(invalid(
            TLS_ISSUER_ANNOTATION,
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
        return Err(invalid(
            TLS_ISSUER_ANNOTATION,
            format!(
                "{value:?}: use \"ClusterIssuer/<name>\": an Issuer is looked up in the \
                 operator's namespace, whose Issuers are the operator's own"
            ),
        ));
    }
    if kind != "ClusterIssuer" || !name_ok {
        return Err(invalid(
            TLS_ISSUER_ANNOTATION,
            format!("{value:?}: use \"ClusterIssuer/<name>\""),
        ));
    }
    Ok(IssuerRef {
        kind: kind.to_owned(),
        name: name.to_owned(),
    })
}

/// The cap [`MAX_RATE_ANNOTATION`] sets on `cluster`'s backups, if any; a value that is not
/// a rate is an error naming the annotation.
pub fn max_rate_of(cluster: &MySQLCluster) -> Result<Option<ByteRate>, ObjectError> {
    let Some(text) = annotation(&cluster.metadata, MAX_RATE_ANNOTATION) else {
        return Ok(None);
    };
    ByteRate::parse(text)
        .map(Some)
        .map_err(|e| invalid(MAX_RATE_ANNOTATION, e.to_string()))
}

/// The instance [`SWITCHOVER_TO_ANNOTATION`] asks the primary to move to, if any: a decimal
/// ordinal below `spec.replicas`; anything else is an error naming the annotation.
pub fn switchover_to_of(cluster: &MySQLCluster) -> Result<Option<u32>, ObjectError> {
    let Some(text) = annotation(&cluster.metadata, SWITCHOVER_TO_ANNOTATION) else {
        return Ok(None);
    };
    let index: u32 = text.parse().map_err(|_| {
        invalid(
            SWITCHOVER_TO_ANNOTATION,
            format!("{text:?} is not an instance ordinal (0, 1, 2, ...)"),
        )
    })?;
    let replicas = cluster.spec.replicas;
    if i64::from(index) >= i64::from(replicas) {
        return Err(invalid(
            SWITCHOVER_TO_ANNOTATION,
            format!("{index} is not an instance of the cluster (spec.replicas: {replicas})"),
        ));
    }
    Ok(Some(index))
}

/// The value of [`SWITCHOVER_REFUSED_ANNOTATION`] for a refused request for instance `index`.
pub fn switchover_refusal(index: u32, reason: &str) -> String {
    format!("{index}: {reason}")
}

/// The refused instance and the reason recorded in [`SWITCHOVER_REFUSED_ANNOTATION`], if any
/// (a value that does not parse is no refusal).
pub fn switchover_refusal_of(meta: &ObjectMeta) -> Option<(u32, &str)> {
    let (index, reason) = annotation(meta, SWITCHOVER_REFUSED_ANNOTATION)?.split_once(": ")?;
    Some((index.parse().ok()?, reason))
}

/// The pause between binlog archiving rounds that [`ARCHIVE_ANNOTATION`]'s value `interval`
/// asks for: a Go duration from 1s to 1h.
pub fn archive_interval(interval: &str) -> Result<Duration, ObjectError> {
    let every = moco_core::validate::duration::parse_std_duration(interval)
        .map_err(|e| invalid(ARCHIVE_ANNOTATION, format!("{interval:?}: {e}")))?;
    if every < Duration::from_secs(1) || every > Duration::from_secs(3600) {
        return Err(invalid(
            ARCHIVE_ANNOTATION,
            format!("{interval:?}: between 1s and 1h"),
        ));
    }
    Ok(every)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn cluster(pairs: &[(&str, &str)]) -> MySQLCluster {
        let mut c: MySQLCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"podTemplate": {"spec": {"containers": []}}, "volumeClaimTemplates": []}
        }))
        .unwrap();
        if !pairs.is_empty() {
            c.metadata.annotations = Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            );
        }
        c
    }

    #[test]
    fn only_true_is_true() {
        let meta = |v: &str| cluster(&[("k", v)]).metadata;
        assert!(is_true(&meta("true"), "k"));
        for other in ["True", "TRUE", "1", "yes", "false", ""] {
            assert!(!is_true(&meta(other), "k"), "{other:?}");
        }
        assert!(!is_true(&meta("true"), "other"));
        assert!(!is_true(&ObjectMeta::default(), "k"));
        assert_eq!(annotation(&meta("x"), "k"), Some("x"));
    }

    #[test]
    fn the_flavor_is_mysql_unless_mariadb_and_nothing_else() {
        assert_eq!(flavor_of(&cluster(&[])), Ok(Flavor::Mysql));
        assert_eq!(
            flavor_of(&cluster(&[(FLAVOR_ANNOTATION, "mysql")])),
            Ok(Flavor::Mysql)
        );
        assert_eq!(
            flavor_of(&cluster(&[(FLAVOR_ANNOTATION, "mariadb")])),
            Ok(Flavor::Mariadb)
        );
        let e = flavor_of(&cluster(&[(FLAVOR_ANNOTATION, "MariaDB")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "metadata.annotations[\"moco-rs/flavor\"]: \"MariaDB\" is not a server family: use \
             \"mysql\" or \"mariadb\""
        );
        assert_eq!(e.path(), "metadata.annotations[\"moco-rs/flavor\"]");
    }

    #[test]
    fn the_tls_annotation_is_a_boolean_and_off_by_default() {
        let tls = |v: Option<&str>| match v {
            Some(v) => tls_of(&cluster(&[(TLS_ANNOTATION, v)])),
            None => tls_of(&cluster(&[])),
        };
        assert_eq!(tls(None), Ok(false));
        assert_eq!(tls(Some("false")), Ok(false));
        assert_eq!(tls(Some("true")), Ok(true));
        let e = tls(Some("yes")).unwrap_err().to_string();
        assert!(e.contains("metadata.annotations[\"moco-rs/tls\"]"), "{e}");
        assert!(e.contains("\"yes\""), "{e}");
    }

    #[test]
    fn a_refusal_reads_back_as_written() {
        let refused = |v: &str| {
            let c = cluster(&[(SWITCHOVER_REFUSED_ANNOTATION, v)]);
            switchover_refusal_of(&c.metadata).map(|(i, r)| (i, r.to_owned()))
        };
        let value = switchover_refusal(2, "its Pod is not Ready: 1: x");
        assert_eq!(value, "2: its Pod is not Ready: 1: x");
        assert_eq!(
            refused(&value),
            Some((2, "its Pod is not Ready: 1: x".to_owned()))
        );
        assert_eq!(switchover_refusal_of(&cluster(&[]).metadata), None);
        for bad in ["", "2", "two: reason", "-1: reason"] {
            assert_eq!(refused(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_switchover_request_names_an_ordinal_below_replicas() {
        let to = |v: &str| {
            let mut c = cluster(&[(SWITCHOVER_TO_ANNOTATION, v)]);
            c.spec.replicas = 3;
            switchover_to_of(&c)
        };
        assert_eq!(switchover_to_of(&cluster(&[])), Ok(None));
        assert_eq!(to("0"), Ok(Some(0)));
        assert_eq!(to("2"), Ok(Some(2)));
        for bad in ["3", "-1", "one", "", " 1"] {
            let e = to(bad).unwrap_err();
            assert_eq!(
                e.path(),
                "metadata.annotations[\"moco-rs/switchover-to\"]",
                "{bad}"
            );
        }
        assert!(
            to("3")
                .unwrap_err()
                .to_string()
                .contains("spec.replicas: 3"),
            "the bound is named"
        );
    }

    #[test]
    fn the_issuer_is_the_install_manifests_unless_named_and_needs_tls() {
        let with = |pairs: &[(&str, &str)]| issuer_of(&cluster(pairs));
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
    fn a_rate_cap_is_a_rate_and_an_archive_interval_between_a_second_and_an_hour() {
        assert_eq!(max_rate_of(&cluster(&[])), Ok(None));
        assert!(
            max_rate_of(&cluster(&[(MAX_RATE_ANNOTATION, "60Mi")]))
                .unwrap()
                .is_some()
        );
        let e = max_rate_of(&cluster(&[(MAX_RATE_ANNOTATION, "60m")])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("metadata.annotations[\"moco-rs/backup-max-rate\"]: \"60m\""),
            "{e}"
        );
        assert_eq!(archive_interval("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(archive_interval("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["500ms", "2h", "soon"] {
            let e = archive_interval(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("metadata.annotations[\"moco-rs/binlog-archive-interval\"]: "),
                "{bad}: {e}"
            );
        }
    }
}
