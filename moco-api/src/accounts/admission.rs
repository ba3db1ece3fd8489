//! The validating webhooks of MySQLUser and MySQLDatabase: `AdmissionReview` in,
//! `AdmissionReview` out, the rules those of [`validate`](super::validate). Neither looks
//! anything up: whether the cluster, the Secret or a privilege exists is the controller's to
//! report in the `Ready` condition.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde::de::DeserializeOwned;

use super::database::MySQLDatabase;
use super::user::MySQLUser;
use super::validate::{
    FieldError, validate_database, validate_database_update, validate_user, validate_user_update,
};

type Review = AdmissionReview<DynamicObject>;
type Request = AdmissionRequest<DynamicObject>;

/// The validating webhook of MySQLUser (CREATE, UPDATE).
pub fn validate_mysqluser(review: Review) -> Review {
    review_with::<MySQLUser>(review, "MySQLUser", validate_user, validate_user_update)
}

/// The validating webhook of MySQLDatabase (CREATE, UPDATE).
pub fn validate_mysqldatabase(review: Review) -> Review {
    review_with::<MySQLDatabase>(
        review,
        "MySQLDatabase",
        validate_database,
        validate_database_update,
    )
}

fn review_with<T: DeserializeOwned>(
    review: Review,
    kind: &str,
    create: fn(&T) -> Vec<FieldError>,
    update: fn(&T, &T) -> Vec<FieldError>,
) -> Review {
    let req: Request = match review.try_into() {
        Ok(r) => r,
        Err(_) => {
            return AdmissionResponse::invalid("the AdmissionReview has no request").into_review();
        }
    };
    let errors = match req.operation {
        Operation::Create => match decode::<T>(req.object.as_ref(), "object") {
            Ok(new) => create(&new),
            Err(e) => return refuse(&req, e, 400, ""),
        },
        Operation::Update => {
            let new = decode::<T>(req.object.as_ref(), "object");
            let old = decode::<T>(req.old_object.as_ref(), "oldObject");
            match (new, old) {
                (Ok(new), Ok(old)) => update(&new, &old),
                (Err(e), _) | (_, Err(e)) => return refuse(&req, e, 400, ""),
            }
        }
        _ => Vec::new(),
    };
    if errors.is_empty() {
        return AdmissionResponse::from(&req).into_review();
    }
    let name = if req.name.is_empty() {
        "<generated>"
    } else {
        req.name.as_str()
    };
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let message = format!("{kind} {name:?} is invalid: {}", lines.join("; "));
    refuse(&req, message, 422, "Invalid")
}

fn decode<T: DeserializeOwned>(object: Option<&DynamicObject>, which: &str) -> Result<T, String> {
    let object = object.ok_or_else(|| format!("the request has no {which}"))?;
    let value = serde_json::to_value(object).map_err(|e| format!("cannot encode {which}: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("cannot decode {which}: {e}"))
}

fn refuse(req: &Request, message: String, code: u16, reason: &str) -> Review {
    let mut response = AdmissionResponse::from(req).deny(message);
    response.result.code = code;
    if !reason.is_empty() {
        response.result.reason = reason.to_owned();
    }
    response.into_review()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn review(operation: &str, kind: &str, object: Value, old: Value) -> Review {
        let value = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "moco-rs.io", "version": "v1alpha1", "kind": kind},
                "resource": {"group": "moco-rs.io", "version": "v1alpha1", "resource": "x"},
                "name": "app",
                "namespace": "ns",
                "operation": operation,
                "userInfo": {},
                "object": object,
                "oldObject": old,
            }
        });
        match serde_json::from_value(value) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    fn user(spec: Value) -> Value {
        json!({
            "apiVersion": "moco-rs.io/v1alpha1",
            "kind": "MySQLUser",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": spec,
        })
    }

    fn database(spec: Value) -> Value {
        json!({
            "apiVersion": "moco-rs.io/v1alpha1",
            "kind": "MySQLDatabase",
            "metadata": {"name": "appdb", "namespace": "ns"},
            "spec": spec,
        })
    }

    /// `(allowed, code, reason, message)`.
    fn answer(review: &Review) -> (bool, u16, String, String) {
        match &review.response {
            Some(r) => (
                r.allowed,
                r.result.code,
                r.result.reason.clone(),
                r.result.message.clone(),
            ),
            None => panic!("no response"),
        }
    }

    fn secret() -> Value {
        json!({"name": "app-password", "key": "password"})
    }

    #[test]
    fn a_valid_user_is_allowed_and_an_invalid_one_refused_with_every_field() {
        let good = user(
            json!({"clusterName": "test", "passwordSecretKeyRef": secret(),
            "grants": [{"privileges": ["SELECT"], "on": "appdb.*"}]}),
        );
        let (allowed, ..) = answer(&validate_mysqluser(review(
            "CREATE",
            "MySQLUser",
            good,
            Value::Null,
        )));
        assert!(allowed);
        let bad = user(
            json!({"clusterName": "test", "name": "moco-repl", "host": "a b",
            "passwordSecretKeyRef": secret(),
            "grants": [{"privileges": ["CREATE USER"], "on": "*.*"}]}),
        );
        let (allowed, code, reason, message) = answer(&validate_mysqluser(review(
            "CREATE",
            "MySQLUser",
            bad,
            Value::Null,
        )));
        assert!(!allowed);
        assert_eq!((code, reason.as_str()), (422, "Invalid"));
        assert!(
            message.starts_with("MySQLUser \"app\" is invalid: spec.name: \"moco-repl\" is one of MOCO's own accounts"),
            "{message}"
        );
        assert!(
            message.contains("; spec.host: \"a b\" contains ' '"),
            "{message}"
        );
        assert!(
            message.contains("; spec.grants[0].privileges[0]: CREATE USER on *.* would let"),
            "{message}"
        );
    }

    #[test]
    fn an_update_of_an_immutable_field_is_refused() {
        let old = user(json!({"clusterName": "a", "passwordSecretKeyRef": secret()}));
        let new = user(json!({"clusterName": "b", "passwordSecretKeyRef": secret()}));
        let (allowed, code, _, message) =
            answer(&validate_mysqluser(review("UPDATE", "MySQLUser", new, old)));
        assert!(!allowed);
        assert_eq!(code, 422);
        assert!(
            message.contains("spec.clusterName: is immutable: \"a\" cannot become \"b\""),
            "{message}"
        );
    }

    #[test]
    fn databases_are_checked_on_create_and_update() {
        let good = database(
            json!({"clusterName": "test", "characterSet": "utf8mb4", "collation": "utf8mb4_bin"}),
        );
        let (allowed, ..) = answer(&validate_mysqldatabase(review(
            "CREATE",
            "MySQLDatabase",
            good.clone(),
            Value::Null,
        )));
        assert!(allowed);
        let bad =
            database(json!({"clusterName": "test", "name": "mysql", "collation": "latin1_bin"}));
        let (allowed, code, _, message) = answer(&validate_mysqldatabase(review(
            "CREATE",
            "MySQLDatabase",
            bad,
            Value::Null,
        )));
        assert!(!allowed);
        assert_eq!(code, 422);
        assert!(
            message.starts_with("MySQLDatabase \"app\" is invalid: spec.name: \"mysql\" is a schema of the server itself; spec.collation: collation \"latin1_bin\" is not of character set \"utf8mb4\""),
            "{message}"
        );
        let renamed = database(json!({"clusterName": "test", "name": "other"}));
        let (allowed, _, _, message) = answer(&validate_mysqldatabase(review(
            "UPDATE",
            "MySQLDatabase",
            renamed,
            good,
        )));
        assert!(!allowed);
        assert!(message.contains("spec.name: is immutable"), "{message}");
    }

    #[test]
    fn an_object_that_does_not_decode_is_refused_with_400() {
        let broken = user(json!({"clusterName": "test"}));
        let (allowed, code, _, message) = answer(&validate_mysqluser(review(
            "CREATE",
            "MySQLUser",
            broken,
            Value::Null,
        )));
        assert!(!allowed);
        assert_eq!(code, 400);
        assert!(message.contains("passwordSecretKeyRef"), "{message}");
    }

    #[test]
    fn delete_and_connect_pass() {
        for operation in ["DELETE", "CONNECT"] {
            let (allowed, ..) = answer(&validate_mysqluser(review(
                operation,
                "MySQLUser",
                Value::Null,
                user(
                    json!({"clusterName": "test", "name": "moco-admin", "passwordSecretKeyRef": secret()}),
                ),
            )));
            assert!(allowed, "{operation}");
        }
    }

    #[test]
    fn a_review_without_request_is_answered() {
        let review: Review = match serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
        })) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let answered = validate_mysqldatabase(review);
        assert!(answered.response.is_some_and(|r| !r.allowed));
    }
}
