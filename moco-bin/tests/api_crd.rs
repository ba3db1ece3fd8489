//! `moco crd`: the printed CRDs and the committed copies under `deploy/crds/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn moco() -> Command {
    Command::new(env!("CARGO_BIN_EXE_moco"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn crds() -> Vec<Value> {
    let out = match moco().arg("crd").output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run moco: {e}"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    match serde_saphyr::from_multiple::<Value>(&text) {
        Ok(docs) => docs.into_iter().filter(|d| !d.is_null()).collect(),
        Err(e) => panic!("moco crd printed invalid YAML: {e}"),
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[test]
fn prints_both_crds_like_moco() {
    let crds = crds();
    // MOCO's two first, then moco-rs's own MySQLUser and MySQLDatabase (tested in moco-api).
    assert_eq!(crds.len(), 4);
    assert_eq!(str_at(&crds[2], "/metadata/name"), "mysqlusers.moco-rs.io");
    assert_eq!(
        str_at(&crds[3], "/metadata/name"),
        "mysqldatabases.moco-rs.io"
    );
    let cluster = &crds[0];
    let policy = &crds[1];
    assert_eq!(
        str_at(cluster, "/metadata/name"),
        "mysqlclusters.moco.cybozu.com"
    );
    assert_eq!(
        str_at(policy, "/metadata/name"),
        "backuppolicies.moco.cybozu.com"
    );
    for (crd, kind) in [(cluster, "MySQLCluster"), (policy, "BackupPolicy")] {
        assert_eq!(str_at(crd, "/spec/group"), "moco.cybozu.com");
        assert_eq!(str_at(crd, "/spec/scope"), "Namespaced");
        assert_eq!(str_at(crd, "/spec/names/kind"), kind);
        assert_eq!(str_at(crd, "/spec/names/listKind"), format!("{kind}List"));
        // MOCO defines no short names.
        assert!(crd.pointer("/spec/names/shortNames").is_none());
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        assert_eq!(versions.len(), 1);
        assert_eq!(str_at(&versions[0], "/name"), "v1beta2");
        assert_eq!(versions[0].pointer("/served"), Some(&Value::Bool(true)));
        assert_eq!(versions[0].pointer("/storage"), Some(&Value::Bool(true)));
    }
    let columns: Vec<(String, String, String)> = cluster
        .pointer("/spec/versions/0/additionalPrinterColumns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            (
                str_at(c, "/name").to_owned(),
                str_at(c, "/type").to_owned(),
                str_at(c, "/jsonPath").to_owned(),
            )
        })
        .collect();
    let want = [
        (
            "Available",
            "string",
            ".status.conditions[?(@.type=='Available')].status",
        ),
        (
            "Healthy",
            "string",
            ".status.conditions[?(@.type=='Healthy')].status",
        ),
        ("Primary", "integer", ".status.currentPrimaryIndex"),
        ("Synced replicas", "integer", ".status.syncedReplicas"),
        ("Errant replicas", "integer", ".status.errantReplicas"),
        (
            "Clustering Active",
            "string",
            ".status.conditions[?(@.type=='ClusteringActive')].status",
        ),
        (
            "Reconcile Active",
            "string",
            ".status.conditions[?(@.type=='ReconciliationActive')].status",
        ),
        ("Last backup", "string", ".status.backup.time"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(columns, want);
    assert!(
        cluster
            .pointer("/spec/versions/0/subresources/status")
            .is_some()
    );
    assert!(
        policy
            .pointer("/spec/versions/0/subresources/status")
            .is_none(),
        "BackupPolicy has no status"
    );

    let spec = |crd: &Value, field: &str| {
        crd.pointer(&format!(
            "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/{field}"
        ))
        .cloned()
        .unwrap_or(Value::Null)
    };
    assert_eq!(
        spec(cluster, "replicas").pointer("/default"),
        Some(&Value::from(1))
    );
    assert_eq!(
        spec(cluster, "maxDelaySeconds").pointer("/default"),
        Some(&Value::from(60))
    );
    assert_eq!(
        spec(cluster, "startupWaitSeconds").pointer("/default"),
        Some(&Value::from(3600))
    );
    assert_eq!(
        spec(cluster, "volumeClaimTemplates").pointer("/minItems"),
        Some(&Value::from(1))
    );
    assert_eq!(
        spec(policy, "concurrencyPolicy").pointer("/default"),
        Some(&Value::from("Allow"))
    );
    assert_eq!(
        spec(policy, "jobConfig").pointer("/properties/threads/default"),
        Some(&Value::from(4))
    );
    assert_eq!(
        spec(policy, "jobConfig").pointer("/properties/memory/default"),
        Some(&Value::from("4Gi"))
    );
    assert_eq!(
        spec(policy, "jobConfig").pointer("/properties/bucketConfig/properties/backendType/enum"),
        Some(&serde_json::json!(["s3", "gcs", "azure"]))
    );
    let required = cluster
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/required")
        .cloned();
    assert_eq!(
        required,
        Some(serde_json::json!(["podTemplate", "volumeClaimTemplates"]))
    );

    let rules: Vec<&str> = cluster
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| str_at(r, "/rule"))
        .collect();
    assert!(rules.contains(&"self.replicas % 2 == 1"), "{rules:?}");
    // MOCO's "replicas cannot be decreased" is gone: clusters shrink.
    assert!(
        !rules.iter().any(|r| r.contains("oldSelf.replicas")),
        "{rules:?}"
    );
    assert!(
        rules
            .iter()
            .any(|r| r.contains("oldSelf.replicationSourceSecretName")),
        "{rules:?}"
    );
    assert_eq!(
        spec(cluster, "restore").pointer("/x-kubernetes-validations/0/rule"),
        Some(&Value::from("self == oldSelf"))
    );
}

#[test]
fn committed_crds_are_up_to_date() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let status = moco()
        .args(["crd", "--output-dir"])
        .arg(dir.path())
        .status();
    assert!(matches!(status, Ok(s) if s.success()), "{status:?}");
    for name in [
        "moco.cybozu.com_mysqlclusters.yaml",
        "moco.cybozu.com_backuppolicies.yaml",
        "moco-rs.io_mysqlusers.yaml",
        "moco-rs.io_mysqldatabases.yaml",
    ] {
        let generated = std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
        assert!(!generated.is_empty(), "{name} was not generated");
        for target in ["deploy/crds", "charts/moco/crds"] {
            let committed =
                std::fs::read_to_string(repo().join(target).join(name)).unwrap_or_default();
            assert!(
                generated == committed,
                "{target}/{name} is out of date: run `moco crd --output-dir {target}`"
            );
        }
    }
}
