//! Offline validation (`moco validate`'s engine) at the library level.

use moco_api::offline::{Document, OfflineValidator, parse_documents};

const CLUSTER: &str = r#"
apiVersion: moco.cybozu.com/v1beta2
kind: MySQLCluster
metadata:
  name: NAME
spec:
  replicas: REPLICAS
  podTemplate:
    spec:
      containers:
      - name: mysqld
        image: ghcr.io/cybozu-go/moco/mysql:8.4.8
  volumeClaimTemplates:
  - metadata:
      name: mysql-data
    spec:
      resources:
        requests:
          storage: 1Gi
"#;

fn cluster(name: &str, replicas: i32) -> String {
    CLUSTER
        .replace("NAME", name)
        .replace("REPLICAS", &replicas.to_string())
}

fn docs(file: &str, text: &str) -> Vec<Document> {
    parse_documents(file, text).unwrap_or_else(|e| panic!("{e}"))
}

fn lines(new: &[Document], old: &[Document]) -> Vec<String> {
    let validator = OfflineValidator::new().unwrap_or_else(|e| panic!("{e}"));
    validator
        .validate(new, old)
        .findings
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn documents_are_numbered_and_lists_flattened() {
    let text = format!(
        "---\n{}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: a}}\n- apiVersion: v1\n  kind: Secret\n  metadata: {{name: b}}\n",
        cluster("one", 1)
    );
    let parsed = docs("f.yaml", &text);
    let kinds: Vec<(usize, &str)> = parsed
        .iter()
        .map(|d| {
            (
                d.index,
                d.value
                    .pointer("/kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert_eq!(kinds[0].1, "MySQLCluster");
    assert_eq!((kinds[1].1, kinds[2].1), ("ConfigMap", "Secret"));
    assert_eq!(
        kinds[1].0, kinds[2].0,
        "list items share the list's position"
    );
    assert!(kinds[0].0 < kinds[1].0);
}

#[test]
fn only_moco_kinds_are_checked() {
    let validator = OfflineValidator::new().unwrap_or_else(|e| panic!("{e}"));
    let text = format!(
        "{}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n",
        cluster("one", 1)
    );
    let report = validator.validate(&docs("f.yaml", &text), &[]);
    assert_eq!(report.checked, 1);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn wrong_version_and_missing_name() {
    let v1beta1 = cluster("one", 1).replace("v1beta2", "v1beta1");
    assert_eq!(
        lines(&docs("f.yaml", &v1beta1), &[]),
        vec![
            "f.yaml:1: MySQLCluster/one: apiVersion: apiVersion \"moco.cybozu.com/v1beta1\" is not served: use moco.cybozu.com/v1beta2"
        ]
    );
    let nameless = cluster("one", 1).replace("  name: one\n", "  labels: {a: b}\n");
    assert_eq!(
        lines(&docs("f.yaml", &nameless), &[]),
        vec!["f.yaml:1: MySQLCluster/: metadata.name: name is required"]
    );
}

#[test]
fn schema_errors_stop_before_admission_rules() {
    let text = cluster("one", 2).replace(
        "      - name: mysqld\n",
        "      - name: mysqld\n        portz: []\n",
    );
    assert_eq!(
        lines(&docs("f.yaml", &text), &[]),
        vec![
            "f.yaml:1: MySQLCluster/one: spec.podTemplate.spec.containers[0].portz: unknown field \"portz\""
        ]
    );
}

#[test]
fn updates_match_namespace_and_name() {
    let old = docs("old.yaml", &cluster("one", 5));
    let replicating = cluster("one", 5).replacen(
        "spec:\n",
        "spec:\n  replicationSourceSecretName: donor\n",
        1,
    );
    // Same name, default namespace on both sides: an update.
    assert_eq!(
        lines(&docs("new.yaml", &replicating), &old),
        vec![
            "new.yaml:1: MySQLCluster/one: spec.replicationSourceSecretName: replicationSourceSecretName can only be removed on an existing cluster: replication can be initiated only with new clusters and the secret name cannot be changed"
        ]
    );
    // Another namespace: a create.
    let elsewhere = replicating.replace("  name: one\n", "  name: one\n  namespace: other\n");
    assert!(lines(&docs("new.yaml", &elsewhere), &old).is_empty());
}

#[test]
fn deleted_policy_still_in_use() {
    let policy = "apiVersion: moco.cybozu.com/v1beta2\nkind: BackupPolicy\nmetadata: {name: daily}\nspec:\n  schedule: '@daily'\n  jobConfig:\n    serviceAccountName: sa\n    bucketConfig: {bucketName: b}\n    workVolume: {emptyDir: {}}\n";
    let user = cluster("one", 1).replace(
        "  replicas: 1\n",
        "  replicas: 1\n  backupPolicyName: daily\n",
    );
    let old = docs("old.yaml", &format!("{policy}---\n{user}"));
    assert_eq!(
        lines(&docs("new.yaml", &user), &old),
        vec![
            "old.yaml:1: BackupPolicy/daily: metadata.name: DELETE refused: BackupPolicy \"daily\" cannot be deleted: it is still referenced by spec.backupPolicyName of MySQLCluster one"
        ]
    );
    // Deleting both together is fine.
    assert!(lines(&[], &old).is_empty());
}

/// Issue 12, item 9: a YAML error advised a Rust API change (`use Option<String>`). The
/// messages are for whoever wrote the manifest.
#[test]
fn yaml_errors_speak_to_the_author_of_the_manifest() {
    let text = "apiVersion: moco.cybozu.com/v1beta2\nkind: MySQLCluster\nmetadata:\n  name: x\n  labels:\n    ~: a\n";
    let err = parse_documents("bad.yaml", text).unwrap_err().to_string();
    assert!(err.contains("bad.yaml"), "{err}");
    assert!(err.contains("line 6 column 5"), "{err}");
    assert!(err.contains("null is not allowed here"), "{err}");
    assert!(!err.contains("Option<"), "{err}");
}

/// What held in the issue 12 review, kept passing: an alias bomb (a few hundred bytes that
/// expand to billions of nodes) is refused quickly instead of exhausting memory.
#[test]
fn a_yaml_alias_bomb_is_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    assert!(text.len() < 1024);
    let err = parse_documents("bomb.yaml", &text).unwrap_err().to_string();
    assert!(err.contains("bomb.yaml"), "{err}");
}
