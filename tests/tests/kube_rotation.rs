//! Rotation of MOCO's own passwords on the real control plane (issue 34): a 3-instance
//! MariaDB cluster in Pods of the Pod runner, writes acknowledged through the primary Service
//! all along.
//!
//! * `kubectl moco credential rotate` returns once the rotation finished: every instance
//!   refuses each of the eight old passwords and accepts the new; the Secrets `moco-<name>`
//!   and `moco-my-cnf-<name>` hold the new ones; the agents took them without restarting, no
//!   mysqld restarted; no write failed, none was lost; the operator recorded no warning (no
//!   failed step, no refused account).
//! * A second rotation whose operator is killed (SIGKILL) once it published finishes after
//!   the operator starts again, with the passwords drawn before the kill.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use moco_tests::clustered::{CHANGE, ClusteredNamespace, setup, when};
use moco_tests::control_plane::restarts;
use moco_tests::kubectl_plugin::PluginPath;
use moco_tests::operated_namespace::NAME;
use moco_tests::writer::opts_at;

/// How long a rotation may take on a busy machine (each step waits for a healthy round).
const ROTATION: Duration = Duration::from_secs(600);

const KEYS: [(&str, &str); 8] = [
    ("ADMIN_PASSWORD", "moco-admin"),
    ("AGENT_PASSWORD", "moco-agent"),
    ("REPLICATION_PASSWORD", "moco-repl"),
    ("CLONE_DONOR_PASSWORD", "moco-clone-donor"),
    ("EXPORTER_PASSWORD", "moco-exporter"),
    ("BACKUP_PASSWORD", "moco-backup"),
    ("READONLY_PASSWORD", "moco-readonly"),
    ("WRITABLE_PASSWORD", "moco-writable"),
];

async fn passwords(f: &ClusteredNamespace) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    for (key, user) in KEYS {
        out.insert(user, f.password(key).await);
    }
    out
}

/// Whether `user` logs in to instance `index` with `password` (`false` only for error 1045).
async fn logs_in(f: &ClusteredNamespace, index: u32, user: &str, password: &str) -> bool {
    let addr = f.addr(index).await.unwrap();
    let attempt = mysql_async::Conn::new(opts_at(addr, user, password));
    match tokio::time::timeout(Duration::from_secs(10), attempt).await {
        Ok(Ok(c)) => {
            let _ = c.disconnect().await;
            true
        }
        Ok(Err(mysql_async::Error::Server(e))) if e.code == 1045 => false,
        other => panic!("logging in as {user} to instance {index}: {other:?}"),
    }
}

/// Every instance accepts `now` and refuses `before`, for every account.
async fn only(
    f: &ClusteredNamespace,
    now: &BTreeMap<&str, String>,
    before: &BTreeMap<&str, String>,
) {
    for index in 0..3 {
        for (_, user) in KEYS {
            assert!(
                logs_in(f, index, user, &now[user]).await,
                "instance {index} refuses the new password of {user}"
            );
            assert!(
                !logs_in(f, index, user, &before[user]).await,
                "instance {index} accepts the old password of {user}"
            );
        }
    }
}

async fn container_restarts(f: &ClusteredNamespace, container: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for i in 0..3 {
        out.push(restarts(&f.pod(i).await.unwrap(), container));
    }
    out
}

fn controller_secret(f: &ClusteredNamespace) -> (Api<Secret>, String) {
    (
        Api::namespaced(f.cp.client.clone(), &f.system),
        format!("mysql-{}.{NAME}", f.ns),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_password_is_rotated_under_writes_and_a_killed_operator_finishes_the_rotation() {
    let Some(mut f) = setup("rotation", 3).await else {
        return;
    };
    let plugin = PluginPath::install(&f.cp);
    let w = f.healthy_with_writer("bring-up").await;
    let old = passwords(&f).await;
    let mysqld_before = container_restarts(&f, "mysqld").await;
    let agent_before = container_restarts(&f, "agent").await;

    // 1. kubectl moco credential rotate.
    let t = std::time::Instant::now();
    let out = plugin.kubectl_ok(&[
        "moco",
        "-n",
        &f.ns,
        "credential",
        "rotate",
        NAME,
        "--timeout",
        "10m",
    ]);
    println!(
        "{}: rotated in {:.1} s:\n{out}",
        f.ns,
        t.elapsed().as_secs_f64()
    );
    assert!(out.contains("password rotation finished"), "{out}");
    for step in [
        "accepts the new passwords",
        "given to every reader",
        "no longer accepts the old passwords",
    ] {
        assert!(out.contains(step), "no step {step:?} in:\n{out}");
    }
    let new = passwords(&f).await;
    for (_, user) in KEYS {
        assert_ne!(new[user], old[user], "{user} kept its password");
    }
    only(&f, &new, &old).await;
    let mycnf: Secret = f.get(&format!("moco-my-cnf-{NAME}")).await.unwrap();
    for (key, value) in mycnf.data.unwrap_or_default() {
        let text = String::from_utf8_lossy(&value.0).into_owned();
        assert!(
            old.values().all(|o| !text.contains(o.as_str())),
            "{key} of moco-my-cnf-{NAME} keeps an old password"
        );
    }
    let mysqld_after = container_restarts(&f, "mysqld").await;
    assert_eq!(mysqld_after, mysqld_before, "a mysqld restarted");
    // The agents took the new passwords without restarting (a restarting container makes
    // its Pod NotReady: the primary would leave its Service for that time).
    assert_eq!(
        container_restarts(&f, "agent").await,
        agent_before,
        "an agent restarted"
    );
    let reasons = f.event_reasons().await;
    for bad in [
        "PasswordRotationFailed",
        "AccountRefused",
        "OperationFailed",
    ] {
        assert!(!reasons.contains(&bad.to_owned()), "{bad} in {reasons:?}");
    }

    // 2. A second rotation, the operator killed once it published.
    let (secrets, name) = controller_secret(&f);
    f.patch_cluster(serde_json::json!({"metadata": {"annotations": {
        "moco-rs/rotate-passwords": "second"
    }}}))
    .await;
    // The new passwords, read from the Secret that says the rotation published them.
    let started = std::time::Instant::now();
    let drawn: BTreeMap<&str, String> = loop {
        let s = secrets.get(&name).await.unwrap();
        let annotations = s.metadata.annotations.clone().unwrap_or_default();
        if annotations
            .get("moco-rs/password-rotation")
            .map(String::as_str)
            == Some("published")
        {
            let data = s.data.unwrap_or_default();
            break KEYS
                .iter()
                .map(|(key, user)| {
                    let v = &data[&format!("ROTATION_NEW_{key}")];
                    (*user, String::from_utf8(v.0.clone()).unwrap())
                })
                .collect();
        }
        assert!(
            started.elapsed() < ROTATION,
            "the second rotation never published"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("{}: published; killing the operator", f.ns);
    f.on.kill_and_restart_operator().await;
    when("the second rotation finished", ROTATION, || async {
        let c = f.cluster().await;
        !c.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("moco-rs/rotate-passwords")
    })
    .await;
    let last = passwords(&f).await;
    assert_eq!(last, drawn, "the resumed rotation drew other passwords");
    only(&f, &last, &new).await;
    f.wait_healthy("after the second rotation", CHANGE).await;
    let log = f.finish(w).await;
    assert_eq!(
        log.failures, 0,
        "writes failed during the rotations: {:?}",
        log.errors
    );
    assert_eq!(
        container_restarts(&f, "mysqld").await,
        mysqld_before,
        "a mysqld restarted"
    );
}
