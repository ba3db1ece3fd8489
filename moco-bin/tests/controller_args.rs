//! The real `moco controller` binary with the args of the install manifests: it accepts them and
//! then stops at the missing `POD_NAMESPACE` (or the missing Kubernetes configuration) with a
//! clear message. (Parsing the manifests' args with the clap definition is moco-operator's
//! `controller_args` test.) And `moco render`, which takes the controller's flags that change
//! what it renders.

use std::process::{Command, Output};

use moco_testkit::{deploy_container, strings};

fn run_moco(args: &[String], env: &[(&str, &str)], remove: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_moco"));
    cmd.args(args);
    for name in remove {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run moco")
}

#[test]
fn binary_accepts_the_deploy_args_and_requires_pod_namespace() {
    let mut args = strings(&deploy_container()["args"]);
    let out = run_moco(&args, &[], &["POD_NAMESPACE"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "moco: the environment variable POD_NAMESPACE is not set (or empty); moco controller \
             needs the namespace it runs in"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
    assert!(
        stderr.contains("admission webhooks on every replica")
            && stderr
                .contains("reconciliation and clustering on the replica holding the leader Lease"),
        "the startup note says what this build does: {stderr}"
    );
    let out = run_moco(&args, &[("POD_NAMESPACE", "")], &[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("POD_NAMESPACE is not set (or empty)"),
        "empty POD_NAMESPACE"
    );

    // The same command with an argument MOCO does not have is a usage error, not this one.
    args.push("--no-such-flag".to_owned());
    let out = run_moco(&args, &[], &["POD_NAMESPACE"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("unexpected argument '--no-such-flag'"),
        "{stderr}"
    );
    assert!(!stderr.contains("POD_NAMESPACE"), "{stderr}");
}

#[test]
fn binary_without_kubernetes_configuration_says_so() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-kubeconfig");
    let args = strings(&deploy_container()["args"]);
    let out = run_moco(
        &args,
        &[
            ("POD_NAMESPACE", "moco-system"),
            ("HOME", home.path().to_str().unwrap()),
            ("KUBECONFIG", missing.to_str().unwrap()),
        ],
        &["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr
            .contains("moco: cannot configure a Kubernetes client: no in-cluster service account"),
        "{stderr}"
    );
}

/// `moco render` takes the controller's `--mysqld-pre-stop-seconds` and renders what the
/// controller would: the mysqld container's preStop sleep; out of range is a usage error
/// naming the flag.
#[test]
fn render_takes_the_pre_stop_flag() {
    let cluster = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/examples/three-replicas-anti-affinity.yaml");
    let cluster = cluster.to_str().unwrap().to_owned();
    let pre_stop = |extra: &[&str]| {
        let mut args = vec!["render".to_owned()];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.push(cluster.clone());
        let out = run_moco(&args, &[], &[]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
        let sts = docs
            .iter()
            .find(|d| d["kind"] == "StatefulSet")
            .expect("a StatefulSet");
        let mysqld = sts["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "mysqld")
            .unwrap()
            .clone();
        mysqld["lifecycle"]["preStop"]["exec"]["command"].clone()
    };
    assert_eq!(pre_stop(&[]), serde_json::json!(["sleep", "20"]));
    assert_eq!(
        pre_stop(&["--mysqld-pre-stop-seconds", "3"]),
        serde_json::json!(["sleep", "3"])
    );
    let out = run_moco(
        &[
            "render".to_owned(),
            "--mysqld-pre-stop-seconds=0".to_owned(),
            cluster.clone(),
        ],
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--mysqld-pre-stop-seconds"),
        "{out:?}"
    );
}
