//! `kubectl moco mysql`: which instance, what `kubectl exec` gets, and the whole command with a
//! fake `kubectl` placed first on the search path that records its arguments.

// Helpers panic on failure as the tests do.

use crate::common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use common::{NS, cluster, fake_with, pod, run_in, running_status, writes};
use moco_api::mysqlcluster::MySQLCluster;
use moco_kubectl::cli::{KubeFlags, MysqlUser};
use moco_kubectl::mysql::{exec_args, target_index};
use moco_kubectl::{Context, Error};
use serde_json::json;

fn typed(replicas: u32, primary: u32) -> MySQLCluster {
    serde_json::from_value(cluster(replicas, running_status(primary))).unwrap()
}

fn strings(args: &[OsString]) -> Vec<String> {
    args.iter()
        .map(|a| a.to_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_primary_is_the_default_instance_and_indexes_stay_below_replicas() {
    let c = typed(3, 2);
    assert_eq!(target_index(NS, &c, None).unwrap(), 2);
    assert_eq!(target_index(NS, &c, Some(0)).unwrap(), 0);
    let err = target_index(NS, &c, Some(3)).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 3, .. }));
    assert_eq!(
        err.to_string(),
        "--index 3 is out of range: MySQLCluster shop/db has 3 instance(s), indexes 0 to 2"
    );
    // A recorded primary beyond a scaled-down cluster.
    let err = target_index(NS, &typed(1, 2), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "MySQLCluster shop/db: status.currentPrimaryIndex 2 is not below spec.replicas 1; give --index"
    );
}

#[test]
fn kubectl_exec_gets_the_connection_flags_the_container_and_the_users_option_file() {
    let bare = exec_args(
        &KubeFlags::default(),
        "shop",
        "moco-db-0",
        MysqlUser::ReadOnly,
        false,
        false,
        &[],
    );
    assert_eq!(
        strings(&bare),
        [
            "--namespace",
            "shop",
            "exec",
            "moco-db-0",
            "--container",
            "mysqld",
            "--",
            "mysql",
            "--defaults-extra-file=/mysql-credentials/moco-readonly-my.cnf"
        ]
    );
    let flags = KubeFlags {
        kubeconfig: Some(PathBuf::from("/home/me/.kube/prod")),
        context: Some("prod".into()),
        namespace: None,
    };
    let full = exec_args(
        &flags,
        "shop",
        "moco-db-2",
        MysqlUser::Writable,
        true,
        true,
        &["-e".into(), "SELECT 1".into()],
    );
    assert_eq!(
        strings(&full),
        [
            "--kubeconfig",
            "/home/me/.kube/prod",
            "--context",
            "prod",
            "--namespace",
            "shop",
            "exec",
            "moco-db-2",
            "--container",
            "mysqld",
            "--stdin",
            "--tty",
            "--",
            "mysql",
            "--defaults-extra-file=/mysql-credentials/moco-writable-my.cnf",
            "-e",
            "SELECT 1"
        ]
    );
    let admin = exec_args(
        &KubeFlags::default(),
        "x",
        "p",
        MysqlUser::Admin,
        false,
        false,
        &[],
    );
    assert_eq!(
        strings(&admin).last().unwrap(),
        "--defaults-extra-file=/mysql-credentials/moco-admin-my.cnf"
    );
}

/// A directory holding an executable `kubectl` that writes one argument per line to
/// `args` next to it and exits with status 7.
fn fake_kubectl(dir: &Path) -> PathBuf {
    let record = dir.join("args");
    let script = dir.join("kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nexit 7\n",
            record.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    record
}

fn search_path(first: &Path) -> OsString {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![first.to_path_buf()];
    dirs.extend(std::env::split_paths(&rest));
    std::env::join_paths(dirs).unwrap()
}

/// Every run that starts a process is in this one test, so no other test of this binary forks
/// while the script is being written (which could make executing it fail with ETXTBSY).
#[tokio::test]
async fn mysql_runs_kubectl_exec_in_the_chosen_pod_and_returns_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let record = fake_kubectl(dir.path());
    let fake = fake_with(
        cluster(3, running_status(1)),
        vec![
            pod(0, Some("replica"), true, "Running"),
            pod(1, Some("primary"), true, "Running"),
            pod(2, Some("replica"), false, "Pending"),
        ],
    );
    let ctx = || Context::new(fake.client(), NS).with_path(search_path(dir.path()));
    let recorded = || -> Vec<String> {
        std::fs::read_to_string(&record)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    };

    // Defaults: the primary, moco-readonly, no stdin or TTY.
    let run1 = run_in(&fake, ctx(), &["mysql", "db"]).await;
    assert!(matches!(run1.result, Ok(7)), "{run1:?}");
    assert_eq!(
        recorded(),
        [
            "--namespace",
            "shop",
            "exec",
            "moco-db-1",
            "--container",
            "mysqld",
            "--",
            "mysql",
            "--defaults-extra-file=/mysql-credentials/moco-readonly-my.cnf"
        ]
    );

    // Everything given: flags before and after the command, mysql's own flags after `--`.
    let run2 = run_in(
        &fake,
        ctx(),
        &[
            "--kubeconfig",
            "/k/config",
            "mysql",
            "--context",
            "prod",
            "-u",
            "moco-admin",
            "--index",
            "0",
            "-i",
            "-t",
            "db",
            "--",
            "-e",
            "SELECT 1",
            "--batch",
        ],
    )
    .await;
    assert!(matches!(run2.result, Ok(7)), "{run2:?}");
    assert_eq!(
        recorded(),
        [
            "--kubeconfig",
            "/k/config",
            "--context",
            "prod",
            "--namespace",
            "shop",
            "exec",
            "moco-db-0",
            "--container",
            "mysqld",
            "--stdin",
            "--tty",
            "--",
            "mysql",
            "--defaults-extra-file=/mysql-credentials/moco-admin-my.cnf",
            "-e",
            "SELECT 1",
            "--batch"
        ]
    );

    // A Pod that does not run: a clear error after the timeout, and kubectl is not run.
    std::fs::remove_file(&record).unwrap();
    let started = std::time::Instant::now();
    let run3 = run_in(
        &fake,
        ctx(),
        &["mysql", "--index", "2", "--pod-running-timeout", "1s", "db"],
    )
    .await;
    assert_eq!(
        run3.error(),
        "Pod shop/moco-db-2 is not Running after 1s (phase Pending); see `kubectl describe pod moco-db-2 -n shop`"
    );
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    assert!(!record.exists());

    // A Pod that starts running while the command waits.
    let kubelet = fake.clone();
    let started_later = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        kubelet.set_status(
            "v1/pods",
            NS,
            "moco-db-2",
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        );
    });
    let run_later = run_in(
        &fake,
        ctx(),
        &[
            "mysql",
            "--index",
            "2",
            "--pod-running-timeout",
            "10s",
            "db",
        ],
    )
    .await;
    started_later.await.unwrap();
    assert!(matches!(run_later.result, Ok(7)), "{run_later:?}");
    assert_eq!(recorded()[3], "moco-db-2");

    // Out of range: refused before anything runs.
    std::fs::remove_file(&record).unwrap();
    let run4 = run_in(&fake, ctx(), &["mysql", "--index", "3", "db"]).await;
    assert_eq!(
        run4.error(),
        "--index 3 is out of range: MySQLCluster shop/db has 3 instance(s), indexes 0 to 2"
    );
    assert!(!record.exists());

    // No kubectl on the search path.
    let empty = tempfile::tempdir().unwrap();
    let nowhere = Context::new(fake.client(), NS).with_path(empty.path());
    let run5 = run_in(&fake, nowhere, &["mysql", "db"]).await;
    assert!(
        matches!(run5.result, Err(Error::KubectlNotFound)),
        "{run5:?}"
    );

    // The offline cluster has no instance to exec into.
    let mut offline = cluster(3, running_status(0));
    offline["spec"]["offline"] = json!(true);
    let offline_fake = fake_with(offline, vec![]);
    let run6 = run_in(
        &offline_fake,
        Context::new(offline_fake.client(), NS).with_path(search_path(dir.path())),
        &["mysql", "db"],
    )
    .await;
    assert_eq!(
        run6.error(),
        "MySQLCluster shop/db: the cluster is offline (spec.offline: true): no instance runs"
    );

    assert!(writes(&fake).is_empty());
}
