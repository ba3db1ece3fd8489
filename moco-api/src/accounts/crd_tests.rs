//! The CRDs of MySQLUser and MySQLDatabase as installed: names, printer columns, defaults, and
//! the CEL rules evaluated client-side with kube's `cel` feature (the API server enforces them
//! without the webhook).

use kube::core::cel::{Validator, compile_schema};
use serde_json::{Value, json};

use crate::crd::{mysqldatabase_crd, mysqluser_crd, schema_of};

fn crd(which: &str) -> Value {
    let crd = match which {
        "user" => mysqluser_crd(),
        _ => mysqldatabase_crd(),
    };
    match crd.map(serde_json::to_value) {
        Ok(Ok(v)) => v,
        other => panic!("{other:?}"),
    }
}

fn schema(which: &str) -> Value {
    let crd = match which {
        "user" => mysqluser_crd(),
        _ => mysqldatabase_crd(),
    };
    match crd.and_then(|c| schema_of(&c)) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn user(metadata_name: &str, spec: Value) -> Value {
    let mut base = json!({
        "clusterName": "test",
        "host": "%",
        "passwordSecretKeyRef": {"name": "app-password", "key": "password"},
    });
    if let (Some(b), Value::Object(extra)) = (base.as_object_mut(), spec) {
        b.extend(extra);
    }
    json!({"apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLUser",
        "metadata": {"name": metadata_name, "namespace": "ns"}, "spec": base})
}

fn database(metadata_name: &str, spec: Value) -> Value {
    let mut base = json!({"clusterName": "test"});
    if let (Some(b), Value::Object(extra)) = (base.as_object_mut(), spec) {
        b.extend(extra);
    }
    json!({"apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLDatabase",
        "metadata": {"name": metadata_name, "namespace": "ns"}, "spec": base})
}

/// `field: message` of every failed rule.
fn failures(which: &str, new: &Value, old: Option<&Value>) -> Vec<String> {
    match Validator::new().validate(&schema(which), new, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[test]
fn names_group_version_scope_and_status() {
    for (which, kind, plural) in [
        ("user", "MySQLUser", "mysqlusers"),
        ("database", "MySQLDatabase", "mysqldatabases"),
    ] {
        let crd = crd(which);
        assert_eq!(
            str_at(&crd, "/metadata/name"),
            format!("{plural}.moco-rs.io")
        );
        assert_eq!(str_at(&crd, "/spec/group"), super::GROUP);
        assert_eq!(str_at(&crd, "/spec/scope"), "Namespaced");
        assert_eq!(str_at(&crd, "/spec/names/kind"), kind);
        assert_eq!(str_at(&crd, "/spec/names/listKind"), format!("{kind}List"));
        assert_eq!(str_at(&crd, "/spec/versions/0/name"), super::VERSION);
        assert!(
            crd.pointer("/spec/versions/0/subresources/status")
                .is_some()
        );
        assert_eq!(
            str_at(
                &crd,
                "/spec/versions/0/schema/openAPIV3Schema/properties/apiVersion/description"
            ),
            "APIVersion of the object: moco-rs.io/v1alpha1."
        );
    }
}

#[test]
fn printer_columns() {
    let columns = |which: &str| -> Vec<(String, String)> {
        crd(which)
            .pointer("/spec/versions/0/additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    str_at(c, "/name").to_owned(),
                    str_at(c, "/jsonPath").to_owned(),
                )
            })
            .collect()
    };
    let ready = ".status.conditions[?(@.type=='Ready')].status";
    let reason = ".status.conditions[?(@.type=='Ready')].reason";
    let want = |name_column: &str, extra: &[(&str, &str)]| {
        let mut v = vec![
            ("Cluster".to_owned(), ".spec.clusterName".to_owned()),
            (name_column.to_owned(), ".spec.name".to_owned()),
        ];
        v.extend(
            extra
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned())),
        );
        v.push(("Ready".to_owned(), ready.to_owned()));
        v.push(("Reason".to_owned(), reason.to_owned()));
        v.push(("Age".to_owned(), ".metadata.creationTimestamp".to_owned()));
        v
    };
    assert_eq!(columns("user"), want("User", &[("Host", ".spec.host")]));
    assert_eq!(columns("database"), want("Database", &[]));
}

#[test]
fn defaults_in_the_schema() {
    let spec = |which: &str, field: &str| {
        schema(which)
            .pointer(&format!("/properties/spec/properties/{field}/default"))
            .cloned()
    };
    assert_eq!(spec("user", "host"), Some(json!("%")));
    assert_eq!(spec("user", "deletionPolicy"), Some(json!("Retain")));
    assert_eq!(spec("user", "requireTLS"), Some(json!(false)));
    assert_eq!(spec("user", "maxUserConnections"), Some(json!(0)));
    assert_eq!(spec("user", "allowPrivilegedGrants"), Some(json!(false)));
    assert_eq!(spec("database", "characterSet"), Some(json!("utf8mb4")));
    assert_eq!(spec("database", "deletionPolicy"), Some(json!("Retain")));
    assert_eq!(spec("database", "collation"), None);
}

#[test]
fn rules_compile() {
    for which in ["user", "database"] {
        let compiled = compile_schema(&schema(which));
        assert!(
            !compiled.has_errors(),
            "{:?}",
            compiled.compilation_errors()
        );
    }
}

#[test]
fn cluster_name_is_immutable() {
    let old = user("app", json!({}));
    assert_eq!(failures("user", &old, Some(&old)), Vec::<String>::new());
    let moved = user("app", json!({"clusterName": "other"}));
    let got = failures("user", &moved, Some(&old));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("clusterName is immutable"), "{got:?}");
    let old = database("appdb", json!({}));
    let moved = database("appdb", json!({"clusterName": "other"}));
    let got = failures("database", &moved, Some(&old));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("clusterName is immutable"), "{got:?}");
}

#[test]
fn host_is_immutable() {
    let old = user("app", json!({}));
    let got = failures("user", &user("app", json!({"host": "10.%"})), Some(&old));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("host is immutable"), "{got:?}");
}

#[test]
fn the_effective_name_is_immutable() {
    for which in ["user", "database"] {
        let make = |spec: Value| {
            if which == "user" {
                user("app", spec)
            } else {
                database("app", spec)
            }
        };
        let unset = make(json!({}));
        // Writing out the default is no change, either way.
        for (old, new) in [
            (&unset, make(json!({"name": "app"}))),
            (&make(json!({"name": "app"})), unset.clone()),
        ] {
            assert_eq!(failures(which, &new, Some(old)), Vec::<String>::new());
        }
        for (old, new) in [
            (&unset, make(json!({"name": "other"}))),
            (&make(json!({"name": "one"})), make(json!({"name": "two"}))),
            (&make(json!({"name": "other"})), unset.clone()),
        ] {
            let got = failures(which, &new, Some(old));
            assert_eq!(got.len(), 1, "{which}: {got:?}");
            assert!(got[0].contains("name is immutable"), "{which}: {got:?}");
        }
        // On create the rule does not apply.
        assert_eq!(
            failures(which, &make(json!({"name": "other"})), None),
            Vec::<String>::new()
        );
    }
}

#[test]
fn a_grant_gives_on_once_under_either_key() {
    let with = |grant: Value| user("app", json!({"grants": [grant]}));
    for ok in [
        json!({"privileges": ["SELECT"], "on": "appdb.*"}),
        json!({"privileges": ["SELECT"], "true": "appdb.*"}),
    ] {
        assert_eq!(failures("user", &with(ok), None), Vec::<String>::new());
    }
    for bad in [
        json!({"privileges": ["SELECT"]}),
        json!({"privileges": ["SELECT"], "on": "a.*", "true": "b.*"}),
    ] {
        let got = failures("user", &with(bad), None);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("give the grant's on once"), "{got:?}");
    }
}

#[test]
fn a_bare_on_key_read_as_true_is_the_grants_on() {
    // What kubectl sends for the manifest: YAML 1.1 reads `on:` as `true`.
    let object = user(
        "app",
        json!({"grants": [{"privileges": ["SELECT"], "true": "appdb.*"}]}),
    );
    let parsed: super::MySQLUser = match serde_json::from_value(object) {
        Ok(u) => u,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(parsed.spec.grants[0].on, "appdb.*");
    // Written back under its own name.
    let written = serde_json::to_value(&parsed.spec.grants[0]).ok();
    assert_eq!(
        written,
        Some(json!({"privileges": ["SELECT"], "on": "appdb.*"}))
    );
    assert_eq!(super::validate::validate_user(&parsed), vec![]);
    // Neither key: an empty on, which admission names.
    let object = user("app", json!({"grants": [{"privileges": ["SELECT"]}]}));
    let parsed: super::MySQLUser = match serde_json::from_value(object) {
        Ok(u) => u,
        Err(e) => panic!("{e}"),
    };
    let errors: Vec<String> = super::validate::validate_user(&parsed)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0], "spec.grants[0].on: must not be empty");
}
