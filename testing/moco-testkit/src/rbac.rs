//! `kubectl auth can-i` over rendered objects: whether Roles and RoleBindings let a subject do
//! one request, by the rules of Kubernetes' RBAC authorizer (`k8s.io/component-helpers/auth/rbac`
//! `RuleAllows`, and the subject matching of `pkg/registry/rbac/validation`). No API server runs
//! here, so tests of the rendered Roles ask this instead.
//!
//! What is modelled: namespaced Roles bound by RoleBindings in the same namespace; subjects of
//! kind `User`, `Group` and `ServiceAccount` (its namespace defaulting to the binding's, as the
//! authorizer does); the groups every service account is in; `apiGroups`, `resources` with
//! subresources (`pods/log`, `*`, `*/status`), `resourceNames` and `verbs`, each with `*`.
//! A binding to a ClusterRole, ClusterRoleBindings and non-resource URLs grant nothing here.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, Subject};

/// Who asks: a user name and its groups, as the API server authenticated them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requester {
    /// `system:serviceaccount:<ns>:<name>` for a service account.
    pub user: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

impl Requester {
    /// The service account `namespace/name`, with the groups the API server gives every
    /// service account token.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Requester {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// An authenticated user outside every group but `system:authenticated`.
    pub fn user(name: &str) -> Self {
        Requester {
            user: name.into(),
            groups: vec!["system:authenticated".into()],
        }
    }
}

/// One resource request: `verb` on `resource[/subresource]` of `group`, object `name` (empty
/// for create, list, watch and deletecollection) in `namespace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: &'a str,
    /// The API group, `""` for the core group.
    pub group: &'a str,
    /// The resource, with its subresource after a slash: `mysqlclusters/status`.
    pub resource: &'a str,
    /// The object's name; empty when the request names none.
    pub name: &'a str,
    /// The namespace of the request.
    pub namespace: &'a str,
}

/// Whether `roles` and `bindings` allow `who` to make `request`.
pub fn can(
    roles: &[&Role],
    bindings: &[&RoleBinding],
    who: &Requester,
    request: &Request<'_>,
) -> bool {
    bindings
        .iter()
        .filter(|b| b.metadata.namespace.as_deref() == Some(request.namespace))
        .filter(|b| {
            b.subjects
                .iter()
                .flatten()
                .any(|s| applies_to(s, who, request.namespace))
        })
        .filter(|b| {
            b.role_ref.kind == "Role" && b.role_ref.api_group == "rbac.authorization.k8s.io"
        })
        .filter_map(|b| {
            roles.iter().find(|r| {
                r.metadata.namespace.as_deref() == Some(request.namespace)
                    && r.metadata.name.as_deref() == Some(b.role_ref.name.as_str())
            })
        })
        .flat_map(|r| r.rules.iter().flatten())
        .any(|rule| rule_allows(rule, request))
}

/// The authorizer's subject matching; a ServiceAccount subject without a namespace means the
/// binding's.
fn applies_to(subject: &Subject, who: &Requester, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => subject.name == who.user,
        "Group" => who.groups.contains(&subject.name),
        "ServiceAccount" => {
            let namespace = subject.namespace.as_deref().unwrap_or(binding_namespace);
            who.user == format!("system:serviceaccount:{namespace}:{}", subject.name)
        }
        _ => false,
    }
}

/// `RuleAllows` for a resource request.
fn rule_allows(rule: &PolicyRule, request: &Request<'_>) -> bool {
    let any_or = |list: &[String], value: &str| list.iter().any(|v| v == "*" || v == value);
    let (_, subresource) = request
        .resource
        .split_once('/')
        .unwrap_or((request.resource, ""));
    any_or(&rule.verbs, request.verb)
        && any_or(
            rule.api_groups.as_deref().unwrap_or_default(),
            request.group,
        )
        && rule
            .resources
            .iter()
            .flatten()
            .any(|r| resource_matches(r, request.resource, subresource))
        && match rule.resource_names.as_deref() {
            None | Some([]) => true,
            Some(names) => names.iter().any(|n| n == request.name),
        }
}

/// `*`, the exact `resource/subresource`, or `*/subresource`; never `resource/*`, which the
/// authorizer does not expand.
fn resource_matches(rule_resource: &str, combined: &str, subresource: &str) -> bool {
    rule_resource == "*"
        || rule_resource == combined
        || (!subresource.is_empty() && rule_resource.strip_prefix("*/") == Some(subresource))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(rules: serde_json::Value) -> Role {
        serde_json::from_value(
            json!({"metadata": {"name": "r", "namespace": "ns"}, "rules": rules}),
        )
        .unwrap()
    }

    fn binding(subjects: serde_json::Value) -> RoleBinding {
        serde_json::from_value(json!({
            "metadata": {"name": "b", "namespace": "ns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": subjects
        }))
        .unwrap()
    }

    fn req<'a>(verb: &'a str, group: &'a str, resource: &'a str, name: &'a str) -> Request<'a> {
        Request {
            verb,
            group,
            resource,
            name,
            namespace: "ns",
        }
    }

    #[test]
    fn the_authorizer_rules_one_by_one() {
        let r = role(json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["p0"]},
            {"apiGroups": ["g"], "resources": ["things/status"], "verbs": ["update"]},
            {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["*"]},
            {"apiGroups": ["h"], "resources": ["widgets/*"], "verbs": ["get"]}
        ]));
        let b = binding(json!([{"kind": "ServiceAccount", "name": "sa"}]));
        let sa = Requester::service_account("ns", "sa");
        let ok = |r2: &Request<'_>| can(&[&r], &[&b], &sa, r2);
        assert!(ok(&req("get", "", "pods", "p0")));
        assert!(!ok(&req("get", "", "pods", "p1")), "resourceNames");
        assert!(!ok(&req("list", "", "pods", "")), "a list names no object");
        assert!(!ok(&req("delete", "", "pods", "p0")), "verb");
        assert!(
            !ok(&req("get", "", "pods/log", "p0")),
            "a subresource is its own resource"
        );
        assert!(ok(&req("update", "g", "things/status", "any")));
        assert!(!ok(&req("update", "g", "things", "any")), "status only");
        assert!(
            !ok(&req("update", "other", "things/status", "any")),
            "group"
        );
        assert!(
            ok(&req("patch", "apps", "deployments/scale", "d")),
            "*/subresource and *"
        );
        assert!(!ok(&req("patch", "apps", "deployments", "d")));
        assert!(
            !ok(&req("get", "h", "widgets/status", "w")),
            "resource/* is not expanded"
        );
        let elsewhere = Request {
            namespace: "other",
            ..req("get", "", "pods", "p0")
        };
        assert!(!ok(&elsewhere), "a Role grants in its namespace only");
        let other_sa = Requester::service_account("other", "sa");
        assert!(!can(&[&r], &[&b], &other_sa, &req("get", "", "pods", "p0")));
        assert!(!can(
            &[&r],
            &[&b],
            &Requester::user("sa"),
            &req("get", "", "pods", "p0")
        ));
    }

    #[test]
    fn groups_and_users_are_subjects_too() {
        let r = role(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]));
        let all_sas = binding(json!([{"kind": "Group", "name": "system:serviceaccounts:ns"}]));
        let alice = binding(json!([{"kind": "User", "name": "alice"}]));
        let get = req("get", "", "pods", "x");
        assert!(can(
            &[&r],
            &[&all_sas],
            &Requester::service_account("ns", "any"),
            &get
        ));
        assert!(!can(
            &[&r],
            &[&all_sas],
            &Requester::service_account("o", "any"),
            &get
        ));
        assert!(can(&[&r], &[&alice], &Requester::user("alice"), &get));
        assert!(!can(&[&r], &[&alice], &Requester::user("bob"), &get));
    }
}
