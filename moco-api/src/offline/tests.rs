//! Offline validation of moco-rs's own kinds, MySQLUser and MySQLDatabase: the rules of their
//! CRDs and webhooks, reported in the same lines as MOCO's kinds.

use super::*;

const USER: &str = r#"
apiVersion: moco-rs.io/v1alpha1
kind: MySQLUser
metadata:
  name: app
  namespace: shop
spec:
  clusterName: test
  passwordSecretKeyRef: {name: app-password, key: password}
  grants:
  - privileges: [SELECT, INSERT]
    on: "appdb.*"
"#;

const DATABASE: &str = r#"
apiVersion: moco-rs.io/v1alpha1
kind: MySQLDatabase
metadata:
  name: appdb
  namespace: shop
spec:
  clusterName: test
  collation: utf8mb4_bin
"#;

fn docs(file: &str, text: &str) -> Vec<Document> {
    parse_documents(file, text).unwrap_or_else(|e| panic!("{e}"))
}

fn report(new: &[Document], old: &[Document]) -> Report {
    let validator = OfflineValidator::new().unwrap_or_else(|e| panic!("{e}"));
    validator.validate(new, old)
}

fn lines(new: &[Document], old: &[Document]) -> Vec<String> {
    report(new, old)
        .findings
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_accounts_api_version_is_the_groups() {
    assert_eq!(
        ACCOUNTS_API_VERSION,
        format!("{}/{}", crate::accounts::GROUP, crate::accounts::VERSION)
    );
}

#[test]
fn valid_users_and_databases_are_counted_and_pass() {
    let text = format!(
        "{USER}---\n{DATABASE}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: app-password, namespace: shop}}\nstringData: {{password: x}}\n"
    );
    let got = report(&docs("f.yaml", &text), &[]);
    assert_eq!(got.findings, Vec::<Finding>::new());
    assert_eq!(got.checked, 2);
}

#[test]
fn a_user_gets_the_webhooks_create_rules() {
    let text = USER
        .replace(
            "  clusterName: test\n",
            "  clusterName: test\n  name: moco-admin\n",
        )
        .replace("[SELECT, INSERT]", "[SELECT, SUPER]")
        .replace("appdb.*", "*.*");
    assert_eq!(
        lines(&docs("f.yaml", &text), &[]),
        vec![
            "f.yaml:1: MySQLUser/app: spec.name: \"moco-admin\" is one of MOCO's own accounts: the operator creates it and holds its password, and would lose its way into the cluster if it changed",
            "f.yaml:1: MySQLUser/app: spec.grants[0].privileges[1]: SUPER on *.* would let the account manage accounts (MOCO's among them), the server or replication, or bypass read-only; set spec.allowPrivilegedGrants: true to grant it anyway",
        ]
    );
    // The opt-in lets the privilege through; the name stays refused.
    let allowed = text.replace("  grants:\n", "  allowPrivilegedGrants: true\n  grants:\n");
    assert_eq!(lines(&docs("f.yaml", &allowed), &[]).len(), 1);
}

#[test]
fn a_database_gets_the_webhooks_create_rules_after_the_crd_defaults() {
    // The collation is checked against the defaulted character set, utf8mb4.
    let text = DATABASE
        .replace("  name: appdb\n", "  name: mysql\n")
        .replace("utf8mb4_bin", "latin1_bin");
    assert_eq!(
        lines(&docs("f.yaml", &text), &[]),
        vec![
            "f.yaml:1: MySQLDatabase/mysql: metadata.name: \"mysql\" is a schema of the server itself",
            "f.yaml:1: MySQLDatabase/mysql: spec.collation: collation \"latin1_bin\" is not of character set \"utf8mb4\"",
        ]
    );
}

#[test]
fn the_accounts_group_and_version_are_checked() {
    let v1beta1 = DATABASE.replace("v1alpha1", "v1beta1");
    assert_eq!(
        lines(&docs("f.yaml", &v1beta1), &[]),
        vec![
            "f.yaml:1: MySQLDatabase/appdb: apiVersion: apiVersion \"moco-rs.io/v1beta1\" is not served: use moco-rs.io/v1alpha1"
        ]
    );
    // A kind of the same name in another group is someone else's.
    let elsewhere = USER.replace("moco-rs.io/v1alpha1", "example.com/v1");
    let got = report(&docs("f.yaml", &elsewhere), &[]);
    assert_eq!((got.checked, got.findings.len()), (0, 0));
    // MOCO's kinds are not served in moco-rs's group.
    let cluster = "apiVersion: moco-rs.io/v1alpha1\nkind: MySQLCluster\nmetadata: {name: c}\n";
    assert_eq!(report(&docs("f.yaml", cluster), &[]).checked, 0);
}

#[test]
fn schema_errors_stop_before_the_webhooks_rules() {
    let text = USER
        .replace(
            "  clusterName: test\n",
            "  clusterName: test\n  name: root\n",
        )
        .replace("  grants:\n", "  password: secret\n  grants:\n");
    assert_eq!(
        lines(&docs("f.yaml", &text), &[]),
        vec!["f.yaml:1: MySQLUser/app: spec.password: unknown field \"password\""]
    );
}

/// The grants go to CEL as written: decoding reads `"true"` as `on` and would hide a grant
/// that gives both, or neither.
#[test]
fn a_grant_must_give_its_on_once_under_either_key() {
    let bare = USER.replace("    on: \"appdb.*\"", "    \"true\": \"appdb.*\"");
    assert_eq!(lines(&docs("f.yaml", &bare), &[]), Vec::<String>::new());
    let once = "give the grant's on once: write the key as \"on\" (quoted), or bare (read as \"true\" by YAML 1.1), not both";
    let both = USER.replace(
        "    on: \"appdb.*\"",
        "    on: \"appdb.*\"\n    \"true\": \"other.*\"",
    );
    assert_eq!(
        lines(&docs("f.yaml", &both), &[]),
        vec![format!("f.yaml:1: MySQLUser/app: spec.grants[0]: {once}")]
    );
    let neither = USER.replace("    on: \"appdb.*\"\n", "");
    assert_eq!(
        lines(&docs("f.yaml", &neither), &[]),
        vec![format!("f.yaml:1: MySQLUser/app: spec.grants[0]: {once}")]
    );
}

#[test]
fn updates_get_the_cel_transition_rules_first() {
    let old = docs("old.yaml", USER);
    let moved = USER.replace("clusterName: test", "clusterName: other");
    assert_eq!(
        lines(&docs("new.yaml", &moved), &old),
        vec![
            "new.yaml:1: MySQLUser/app: spec.clusterName: clusterName is immutable: declare the account again for the other cluster"
        ]
    );
    // The old host is the default, "%": another host is another account.
    let host = USER.replace("  grants:\n", "  host: 10.%\n  grants:\n");
    assert_eq!(
        lines(&docs("new.yaml", &host), &old),
        vec![
            "new.yaml:1: MySQLUser/app: spec.host: host is immutable: 'name'@'host' is another account; declare another MySQLUser instead"
        ]
    );
    // Writing out the default name is no change; another name is.
    let db_old = docs("old.yaml", DATABASE);
    let same = DATABASE.replace(
        "  clusterName: test\n",
        "  clusterName: test\n  name: appdb\n",
    );
    assert_eq!(
        lines(&docs("new.yaml", &same), &db_old),
        Vec::<String>::new()
    );
    let renamed = DATABASE.replace(
        "  clusterName: test\n",
        "  clusterName: test\n  name: other\n",
    );
    assert_eq!(
        lines(&docs("new.yaml", &renamed), &db_old),
        vec![
            "new.yaml:1: MySQLDatabase/appdb: spec.name: name is immutable: it names the database on the server (default metadata.name); declare another MySQLDatabase instead"
        ]
    );
    // In another namespace it is a create.
    let elsewhere = moved.replace("namespace: shop", "namespace: bank");
    assert_eq!(
        lines(&docs("new.yaml", &elsewhere), &old),
        Vec::<String>::new()
    );
}

#[test]
fn updates_get_the_webhooks_update_rules() {
    let privileged = USER
        .replace("[SELECT, INSERT]", "[SUPER]")
        .replace("appdb.*", "*.*");
    let refused = "f.yaml:1: MySQLUser/app: spec.grants[0].privileges[0]: SUPER on *.* would let the account manage accounts (MOCO's among them), the server or replication, or bypass read-only; set spec.allowPrivilegedGrants: true to grant it anyway";
    let refused_new = refused.replace("f.yaml", "new.yaml");
    assert_eq!(lines(&docs("f.yaml", &privileged), &[]), vec![refused]);
    // An object admitted by a more lenient version may stay as it is (and be deleted)...
    let old = docs("old.yaml", &privileged);
    assert_eq!(
        lines(&docs("new.yaml", &privileged), &old),
        Vec::<String>::new()
    );
    // ...but a change of its spec is checked in full.
    let changed = privileged.replace("  grants:\n", "  requireTLS: true\n  grants:\n");
    assert_eq!(lines(&docs("new.yaml", &changed), &old), vec![refused_new]);
    // The same for a database.
    let system = DATABASE.replace("  name: appdb\n", "  name: sys\n");
    let old = docs("old.yaml", &system);
    assert_eq!(
        lines(&docs("new.yaml", &system), &old),
        Vec::<String>::new()
    );
    let changed = system.replace("utf8mb4_bin", "utf8mb4_general_ci");
    assert_eq!(
        lines(&docs("new.yaml", &changed), &old),
        vec![
            "new.yaml:1: MySQLDatabase/sys: metadata.name: \"sys\" is a schema of the server itself"
        ]
    );
}
