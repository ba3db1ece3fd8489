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
    FieldError, summary, validate_database, validate_database_update, validate_user,
    validate_user_update,
};
use crate::admission::{Access, ClusterLookup};

type Review = AdmissionReview<DynamicObject>;
type Request = AdmissionRequest<DynamicObject>;

/// The validating webhook of MySQLUser (CREATE, UPDATE), without asking who requests: the
/// object's rules only ([`admit_mysqluser`] is the webhook's).
pub fn validate_mysqluser(review: Review) -> Review {
    review_with::<MySQLUser>(review, "MySQLUser", validate_user, validate_user_update)
}

/// The verb a requester needs on `mysqlusers.moco-rs.io` to set `allowPrivilegedGrants`: the
/// opt-in lifts every refusal of the grants, so it is the requester's to have, not the
/// object's to claim (as RBAC's own `escalate` on roles).
pub const VERB_ESCALATE: &str = "escalate";

/// What the operator would do on the requester's behalf for this MySQLUser request, which
/// the requester must be allowed to do itself, each with the field that asks for it:
///
/// * `spec.allowPrivilegedGrants` set (on CREATE, when turned on, or when the grants change
///   while it is on): `escalate` on the object;
/// * `spec.passwordSecretKeyRef.name` (on CREATE, or when it names another Secret): `get` on
///   that Secret, which the operator (allowed to read every Secret) would otherwise read for
///   whoever may create a MySQLUser.
pub fn accesses_needed(
    namespace: &str,
    new: &MySQLUser,
    old: Option<&MySQLUser>,
) -> Vec<(&'static str, Access)> {
    let mut out = Vec::new();
    let spec = &new.spec;
    let privileged = spec.allow_privileged_grants
        && old.is_none_or(|o| !o.spec.allow_privileged_grants || o.spec.grants != spec.grants);
    if privileged {
        out.push((
            "spec.allowPrivilegedGrants",
            Access {
                verb: VERB_ESCALATE.to_owned(),
                group: super::GROUP.to_owned(),
                resource: "mysqlusers".to_owned(),
                namespace: namespace.to_owned(),
                name: new.metadata.name.clone().unwrap_or_default(),
            },
        ));
    }
    let secret = &spec.password_secret_key_ref.name;
    if old.is_none_or(|o| &o.spec.password_secret_key_ref.name != secret) {
        out.push((
            "spec.passwordSecretKeyRef.name",
            Access {
                verb: "get".to_owned(),
                group: String::new(),
                resource: "secrets".to_owned(),
                namespace: namespace.to_owned(),
                name: secret.clone(),
            },
        ));
    }
    out
}

/// The webhook of MySQLUser: the object's rules ([`validate_mysqluser`]), then whether the
/// requester may do what the object asks the operator to do for it ([`accesses_needed`],
/// asked through `lookup`: a SubjectAccessReview). A lookup that fails refuses (500): the
/// webhook fails closed.
pub async fn admit_mysqluser<L: ClusterLookup>(lookup: &L, review: Review) -> Review {
    // Through `TryFrom`, which keeps the review's apiVersion and kind for the answer (a
    // cloned `review.request` has none, and the API server refuses such an answer).
    let request: Option<Request> = review.clone().try_into().ok();
    let answered = validate_mysqluser(review);
    let allowed = answered.response.as_ref().is_some_and(|r| r.allowed);
    let Some(req) = request.filter(|_| allowed) else {
        return answered;
    };
    let new = match req.operation {
        Operation::Create | Operation::Update => decode::<MySQLUser>(req.object.as_ref(), "object"),
        _ => return answered,
    };
    let old = match req.operation {
        Operation::Update => decode::<MySQLUser>(req.old_object.as_ref(), "oldObject").map(Some),
        _ => Ok(None),
    };
    let (Ok(new), Ok(old)) = (new, old) else {
        return answered;
    };
    let namespace = req.namespace.clone().unwrap_or_default();
    let who = if req
        .user_info
        .username
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        "the requester".to_owned()
    } else {
        format!(
            "{:?}",
            req.user_info.username.as_deref().unwrap_or_default()
        )
    };
    let mut refused = Vec::new();
    for (field, access) in accesses_needed(&namespace, &new, old.as_ref()) {
        match lookup.may(&req.user_info, &access).await {
            Ok(true) => {}
            Ok(false) => refused.push(format!(
                "{field}: {who} may not {access}, and the operator would do it on their behalf{}",
                if access.verb == VERB_ESCALATE {
                    " (grant the verb escalate on mysqlusers.moco-rs.io to let them set the opt-in)"
                } else {
                    " (read the Secret's password)"
                }
            )),
            Err(e) => return refuse(&req, format!("internal error: {e}"), 500, ""),
        }
    }
    if refused.is_empty() {
        return answered;
    }
    let name = if req.name.is_empty() {
        "<generated>"
    } else {
        req.name.as_str()
    };
    let message = format!("MySQLUser {name:?} is forbidden: {}", refused.join("; "));
    refuse(&req, message, 403, "Forbidden")
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
    let message = format!("{kind} {name:?} is invalid: {}", summary(&errors));
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

    fn access(verb: &str, group: &str, resource: &str, name: &str) -> Access {
        Access {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn escalate() -> Access {
        access("escalate", "moco-rs.io", "mysqlusers", "app")
    }

    fn get_secret(name: &str) -> Access {
        access("get", "", "secrets", name)
    }

    fn parsed(v: Value) -> MySQLUser {
        match serde_json::from_value(v) {
            Ok(u) => u,
            Err(e) => panic!("{e}"),
        }
    }

    /// What is asked of the requester: the opt-in when set, turned on or its grants changed;
    /// the Secret when created or pointed elsewhere; nothing for an unchanged spec.
    #[test]
    fn the_requester_is_asked_for_what_the_operator_would_do_for_them() {
        let plain = parsed(user(
            json!({"clusterName": "c", "passwordSecretKeyRef": secret()}),
        ));
        let privileged = parsed(user(
            json!({"clusterName": "c", "passwordSecretKeyRef": secret(),
            "allowPrivilegedGrants": true, "grants": [{"on": "*.*", "privileges": ["SUPER"]}]}),
        ));
        let needed = |new: &MySQLUser, old: Option<&MySQLUser>| -> Vec<(&str, Access)> {
            accesses_needed("ns", new, old)
        };
        assert_eq!(
            needed(&plain, None),
            vec![("spec.passwordSecretKeyRef.name", get_secret("app-password"))]
        );
        assert_eq!(
            needed(&privileged, None),
            vec![
                ("spec.allowPrivilegedGrants", escalate()),
                ("spec.passwordSecretKeyRef.name", get_secret("app-password")),
            ]
        );
        assert_eq!(needed(&privileged, Some(&privileged)), vec![]);
        assert_eq!(needed(&plain, Some(&privileged)), vec![]);
        assert_eq!(
            needed(&privileged, Some(&plain)),
            vec![("spec.allowPrivilegedGrants", escalate())]
        );
        let mut more = privileged.clone();
        more.spec.grants[0].privileges.push("CREATE USER".into());
        assert_eq!(
            needed(&more, Some(&privileged)),
            vec![("spec.allowPrivilegedGrants", escalate())]
        );
        let mut other_secret = plain.clone();
        other_secret.spec.password_secret_key_ref.name = "admin-secret".into();
        assert_eq!(
            needed(&other_secret, Some(&plain)),
            vec![("spec.passwordSecretKeyRef.name", get_secret("admin-secret"))]
        );
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        match tokio::runtime::Builder::new_current_thread().build() {
            Ok(rt) => rt.block_on(f),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_requester_without_escalate_or_the_secret_is_refused_naming_the_field() {
        let privileged = user(json!({"clusterName": "c", "passwordSecretKeyRef": secret(),
            "allowPrivilegedGrants": true, "grants": [{"on": "*.*", "privileges": ["SUPER"]}]}));
        let lookup = |refused: Vec<Access>| crate::admission::StaticLookup {
            refused,
            ..Default::default()
        };
        let everyone = lookup(Vec::new());
        let created = review("CREATE", "MySQLUser", privileged.clone(), Value::Null);
        assert!(answer(&block_on(admit_mysqluser(&everyone, created.clone()))).0);

        let refusal = block_on(admit_mysqluser(
            &lookup(vec![escalate(), get_secret("app-password")]),
            created,
        ));
        // The answer is an AdmissionReview the API server takes (regression: the refusals
        // had no apiVersion or kind, and the API server failed the request).
        assert_eq!(
            (
                refusal.types.api_version.as_str(),
                refusal.types.kind.as_str()
            ),
            ("admission.k8s.io/v1", "AdmissionReview")
        );
        let (allowed, code, reason, message) = answer(&refusal);
        assert!(!allowed);
        assert_eq!((code, reason.as_str()), (403, "Forbidden"));
        assert!(
            message.starts_with("MySQLUser \"app\" is forbidden: spec.allowPrivilegedGrants: the requester may not escalate mysqlusers.moco-rs.io \"app\" in namespace ns"),
            "{message}"
        );
        assert!(
            message.contains("; spec.passwordSecretKeyRef.name: the requester may not get secrets \"app-password\" in namespace ns"),
            "{message}"
        );
        // The object's own rules come first: nothing is asked of an invalid object.
        let invalid = user(
            json!({"clusterName": "c", "name": "moco-admin", "passwordSecretKeyRef": secret()}),
        );
        let (_, code, _, message) = answer(&block_on(admit_mysqluser(
            &lookup(vec![get_secret("app-password")]),
            review("CREATE", "MySQLUser", invalid, Value::Null),
        )));
        assert_eq!(code, 422, "{message}");
        // An update that changes neither asks nothing, so a finalizer can always be removed.
        let (allowed, ..) = answer(&block_on(admit_mysqluser(
            &lookup(vec![escalate(), get_secret("app-password")]),
            review("UPDATE", "MySQLUser", privileged.clone(), privileged),
        )));
        assert!(allowed);
    }
}
