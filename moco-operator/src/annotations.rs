//! Admission rules of this build's own annotations (MOCO's API has no fields for them),
//! applied by the validating webhook after MOCO's rules. A backup's rate cap
//! ([`moco_api::annotations::MAX_RATE_ANNOTATION`]) is checked as a rate here, so a typo is refused at `apply`
//! rather than stopping the cluster's reconcile.
//!
//! Three annotations are fixed once the cluster exists: the server family
//! ([`FLAVOR_ANNOTATION`]), since the data directory belongs to one, the certificate's issuer
//! ([`TLS_ISSUER_ANNOTATION`]; the Certificate is created once), and TLS
//! ([`TLS_ANNOTATION`]), since the servers, the manager's connections and the replication
//! channels change together only at creation (turning it on later would leave replicas
//! unable to reach a source that already refuses plain TCP, mid rolling update).

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use moco_api::annotations::{
    FLAVOR_ANNOTATION, TLS_ANNOTATION, TLS_ISSUER_ANNOTATION, flavor_of, issuer_of, max_rate_of,
    switchover_to_of, tls_of,
};
use moco_api::mysqlcluster::MySQLCluster;

/// What is wrong with `new` (and, on update, with its change from `old`): one sentence per
/// problem, each naming the annotation.
pub fn annotation_violations(new: &MySQLCluster, old: Option<&MySQLCluster>) -> Vec<String> {
    let mut out = Vec::new();
    if let Err(e) = flavor_of(new) {
        out.push(e.to_string());
    }
    if let Err(e) = tls_of(new) {
        out.push(e.to_string());
    } else if let Err(e) = issuer_of(new) {
        out.push(e.to_string());
    }
    if let Err(e) = max_rate_of(new) {
        out.push(e.to_string());
    }
    if let Err(e) = switchover_to_of(new) {
        out.push(e.to_string());
    }
    let Some(old) = old else {
        return out;
    };
    let value = |c: &MySQLCluster, key: &str| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    // Compared as meant, not as written: no annotation and "false" are the same TLS.
    if flavor_of(old).ok() != flavor_of(new).ok() && flavor_of(new).is_ok() {
        out.push(format!(
            "metadata.annotations[\"{FLAVOR_ANNOTATION}\"]: cannot change from {:?} to {:?}: \
             the data directory belongs to one server family",
            value(old, FLAVOR_ANNOTATION).unwrap_or_else(|| "mysql".into()),
            value(new, FLAVOR_ANNOTATION).unwrap_or_else(|| "mysql".into()),
        ));
    }
    if let (Ok(before), Ok(after)) = (tls_of(old), tls_of(new))
        && before != after
    {
        out.push(format!(
            "metadata.annotations[\"{TLS_ANNOTATION}\"]: cannot change from {before} to \
             {after}: TLS is chosen when the cluster is created (restore a backup into a new \
             cluster to change it)"
        ));
    }
    if let (Ok(before), Ok(after)) = (issuer_of(old), issuer_of(new))
        && before != after
    {
        out.push(format!(
            "metadata.annotations[\"{TLS_ISSUER_ANNOTATION}\"]: cannot change from {before} to \
             {after}: the certificate's issuer is chosen when the cluster is created"
        ));
    }
    out
}

/// The webhook's answer: `review` as MOCO's rules answered it, with the violations of
/// [`annotation_violations`] added: an allowed request is denied (422 `Invalid`) for them, and
/// a request MOCO's rules found invalid lists them after MOCO's, so one answer names every
/// problem. Other answers (a request that could not be decoded) stay as they are.
pub fn apply_annotation_rules(
    request: &AdmissionRequest<DynamicObject>,
    mut review: AdmissionReview<DynamicObject>,
) -> AdmissionReview<DynamicObject> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return review;
    }
    let Some(answer) = review.response.as_mut() else {
        return review;
    };
    let invalid = !answer.allowed && answer.result.code == 422;
    if !answer.allowed && !invalid {
        return review;
    }
    let decode = |object: Option<&DynamicObject>| -> Option<MySQLCluster> {
        serde_json::to_value(object?)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
    };
    // MOCO's rules decoded both already; what does not decode was answered there.
    let Some(new) = decode(request.object.as_ref()) else {
        return review;
    };
    let old = match request.operation {
        Operation::Update => decode(request.old_object.as_ref()),
        _ => None,
    };
    let violations = annotation_violations(&new, old.as_ref());
    if violations.is_empty() {
        return review;
    }
    if invalid {
        answer.result.message = format!("{}; {}", answer.result.message, violations.join("; "));
        return review;
    }
    let name = if request.name.is_empty() {
        "<generated>"
    } else {
        request.name.as_str()
    };
    let mut response = AdmissionResponse::from(request).deny(format!(
        "MySQLCluster {name:?} is invalid: {}",
        violations.join("; ")
    ));
    response.result.code = 422;
    response.result.reason = "Invalid".to_owned();
    response.into_review()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use moco_api::annotations::{MAX_RATE_ANNOTATION, SWITCHOVER_TO_ANNOTATION};

    use super::*;

    fn cluster(annotations: &[(&str, &str)]) -> MySQLCluster {
        let mut c: MySQLCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"podTemplate": {"spec": {"containers": []}}, "volumeClaimTemplates": []}
        }))
        .unwrap();
        if !annotations.is_empty() {
            c.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            );
        }
        c
    }

    #[test]
    fn tls_and_the_flavor_are_fixed_at_creation_and_their_values_checked() {
        let plain = cluster(&[]);
        let tls = cluster(&[(TLS_ANNOTATION, "true")]);
        let off = cluster(&[(TLS_ANNOTATION, "false")]);
        let maria = cluster(&[(FLAVOR_ANNOTATION, "mariadb")]);
        assert!(annotation_violations(&tls, None).is_empty());
        assert!(annotation_violations(&tls, Some(&tls)).is_empty());
        assert!(
            annotation_violations(&off, Some(&plain)).is_empty(),
            "\"false\" is no annotation"
        );
        let e = annotation_violations(&tls, Some(&plain));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(
                "metadata.annotations[\"moco-rs/tls\"]: cannot change from false to true"
            ),
            "{e:?}"
        );
        let e = annotation_violations(&plain, Some(&tls));
        assert!(e[0].contains("from true to false"), "{e:?}");
        let e = annotation_violations(&maria, Some(&plain));
        assert_eq!(
            e,
            [
                "metadata.annotations[\"moco-rs/flavor\"]: cannot change from \"mysql\" to \
              \"mariadb\": the data directory belongs to one server family"
            ]
        );
        let bad = cluster(&[(TLS_ANNOTATION, "yes"), (FLAVOR_ANNOTATION, "postgres")]);
        let e = annotation_violations(&bad, None);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].contains("moco-rs/flavor") && e[1].contains("moco-rs/tls"));
        // A bad new value is reported once, not also as a change.
        assert_eq!(annotation_violations(&bad, Some(&plain)).len(), 2);

        // The issuer: checked, and fixed at creation too.
        let corp = cluster(&[
            (TLS_ANNOTATION, "true"),
            (TLS_ISSUER_ANNOTATION, "ClusterIssuer/corp-ca"),
        ]);
        assert!(annotation_violations(&corp, None).is_empty());
        let e = annotation_violations(&corp, Some(&tls));
        assert_eq!(
            e,
            [
                "metadata.annotations[\"moco-rs/tls-issuer\"]: cannot change from \
              Issuer/moco-mysql-issuer to ClusterIssuer/corp-ca: the certificate's issuer is \
              chosen when the cluster is created"
            ]
        );
        let e = annotation_violations(&cluster(&[(TLS_ISSUER_ANNOTATION, "x")]), None);
        assert!(e.len() == 1 && e[0].contains("moco-rs/tls-issuer"), "{e:?}");
    }

    #[test]
    fn a_switchover_request_must_name_an_instance() {
        let mut ok = cluster(&[(SWITCHOVER_TO_ANNOTATION, "0")]);
        ok.spec.replicas = 3;
        assert!(annotation_violations(&ok, None).is_empty());
        let e = annotation_violations(&cluster(&[(SWITCHOVER_TO_ANNOTATION, "1")]), None);
        assert_eq!(
            e,
            [
                "metadata.annotations[\"moco-rs/switchover-to\"]: 1 is not an instance of the \
              cluster (spec.replicas: 1)"
            ]
        );
    }

    #[test]
    fn a_backup_rate_cap_must_be_a_rate() {
        assert!(annotation_violations(&cluster(&[(MAX_RATE_ANNOTATION, "60Mi")]), None).is_empty());
        let e = annotation_violations(&cluster(&[(MAX_RATE_ANNOTATION, "60m")]), None);
        assert_eq!(
            e,
            [
                "metadata.annotations[\"moco-rs/backup-max-rate\"]: \"60m\": `m` means \
                 thousandths in a quantity: write Mi (MiB/s) or M (MB/s)"
            ]
        );
        // It may change at any time (the next backup takes it).
        let slow = cluster(&[(MAX_RATE_ANNOTATION, "30Mi")]);
        let fast = cluster(&[(MAX_RATE_ANNOTATION, "200Mi")]);
        assert!(annotation_violations(&fast, Some(&slow)).is_empty());
    }
}
