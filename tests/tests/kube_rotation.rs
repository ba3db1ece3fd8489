//! Rotation of MOCO's own passwords on the real control plane (issue 34): a 3-instance
//! MariaDB cluster in Pods of the Pod runner, writes acknowledged through the primary Service
//! all along.
//!
//! * `kubectl moco credential rotate` while a backup Job (capped by `moco-rs/backup-max-rate`,
//!   its bucket on moto) runs: the command returns once the rotation finished; it printed that
//!   the rotation waited for the Job, which succeeded and recorded its backup; every instance
//!   refuses each of the eight old passwords and accepts the new; the Secrets `moco-<name>`
//!   and `moco-my-cnf-<name>` hold the new ones; the agents took them without restarting, no
//!   mysqld restarted; no write failed, none was lost; the operator recorded no warning (no
//!   failed step, no refused account).
//! * A MySQLUser declared before the rotation is still kept after it, every `moco-admin`
//!   session cut on the primary (the accounts controllers share one connection per cluster,
//!   made with the old password: the step that finds it broken forgets it, the next connects
//!   with the new): a new password in its Secret is applied.
//! * A second rotation whose operator is killed (SIGKILL) and started again after each step
//!   it records (drawn, published, each re-pointed channel, the Secrets moved) finishes, with
//!   the passwords drawn before the first kill.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use moco_api::annotations::{ROTATE_PASSWORDS_ANNOTATION, annotation};
use moco_api::mysqlcluster::MySQLCluster;
use moco_kube::rotation;
use moco_tests::clustered::{BRING_UP, CHANGE, ClusteredNamespace, setup, when};
use moco_tests::control_plane::restarts;
use moco_tests::kubectl_plugin::PluginPath;
use moco_tests::operated_namespace::NAME;
use moco_tests::s3::{Moto, bridge_moto, create_bucket_at, moto_job_config};
use moco_tests::writer::{self, opts_at};
use serde_json::json;

/// How long a rotation may take on a busy machine (each step waits for a healthy round).
const ROTATION: Duration = Duration::from_secs(600);
/// The backup's bucket, its policy (a schedule that never fires while the test runs: the test
/// starts the Job itself) and the Jobs' ServiceAccount.
const BUCKET: &str = "rotation";
const POLICY: &str = "manual";
const JOB_ACCOUNT: &str = "backup";
/// The backup Job started from the CronJob.
const BACKUP_JOB: &str = "backup-during-rotation";
/// The backup's cap: slow enough that it runs through the rotation's first steps.
const BACKUP_RATE: &str = "1Mi";

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
    writer::logs_in(f.addr(index).await.unwrap(), user, password).await
}

/// Whether `user` logs in to the primary with `password`.
async fn logs_in_primary(f: &ClusteredNamespace, user: &str, password: &str) -> bool {
    match f.primary_index().await {
        Some(index) => logs_in(f, index, user, password).await,
        None => false,
    }
}

/// A MySQLUser `app` whose Secret holds `password`.
fn declare_user(f: &ClusteredNamespace, password: &str) {
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: app-password}}\n\
         stringData: {{password: \"{password}\"}}\n---\n\
         apiVersion: moco-rs.io/v1alpha1\nkind: MySQLUser\nmetadata: {{name: app}}\n\
         spec:\n  clusterName: {NAME}\n  passwordSecretKeyRef: {{name: app-password, key: password}}\n\
         \x20 grants: [{{privileges: [SELECT], \"on\": \"app.*\"}}]\n"
    );
    f.cp.apply(&f.ns, &yaml);
}

/// Kills every session of `user` on instance `index` (as `moco-admin` with `admin`).
async fn cut_sessions(f: &ClusteredNamespace, index: u32, user: &str, admin: &str) {
    use mysql_async::prelude::Queryable;
    let addr = f.addr(index).await.unwrap();
    let mut c = mysql_async::Conn::new(opts_at(addr, "moco-admin", admin))
        .await
        .unwrap();
    let ids: Vec<u64> = c
        .exec(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND ID <> CONNECTION_ID()",
            (user,),
        )
        .await
        .unwrap();
    for id in &ids {
        // A session may end on its own meanwhile (1094: unknown thread).
        let _ = c.query_drop(format!("KILL CONNECTION {id}")).await;
    }
    println!(
        "{}: cut {} sessions of {user} on instance {index}",
        f.ns,
        ids.len()
    );
    c.disconnect().await.unwrap();
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

/// A BackupPolicy on moto whose schedule does not fire, the cluster's backups capped at
/// [`BACKUP_RATE`]; returns once its CronJob exists.
async fn backup_policy(f: &ClusteredNamespace, moto: &Moto) {
    create_bucket_at(&moto.endpoint, BUCKET).await;
    f.cp.apply(
        &f.ns,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"namespace": f.ns, "name": JOB_ACCOUNT}})
        .to_string(),
    );
    f.cp.apply(
        &f.ns,
        &json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "BackupPolicy",
            "metadata": {"namespace": f.ns, "name": POLICY},
            "spec": {
                "schedule": "0 0 1 1 *",
                "concurrencyPolicy": "Forbid",
                "backoffLimit": 0,
                "jobConfig": moto_job_config(JOB_ACCOUNT, BUCKET, &moto.endpoint)
            }
        })
        .to_string(),
    );
    f.patch_cluster(json!({
        "metadata": {"annotations": {"moco-rs/backup-max-rate": BACKUP_RATE}},
        "spec": {"backupPolicyName": POLICY}
    }))
    .await;
    let cronjobs: Api<CronJob> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let name = format!("moco-backup-{NAME}");
    when("the backup CronJob", BRING_UP, || async {
        cronjobs.get_opt(&name).await.ok().flatten().is_some()
    })
    .await;
}

/// `kubectl create job --from=cronjob/…` (what a person does for a backup now); returns once
/// the Job's Pod runs.
async fn start_backup(f: &ClusteredNamespace) {
    let out = f.cp.kubectl(
        &[
            "-n",
            &f.ns,
            "create",
            "job",
            BACKUP_JOB,
            &format!("--from=cronjob/moco-backup-{NAME}"),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods: Api<Pod> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let params = ListParams::default().labels(&format!("job-name={BACKUP_JOB}"));
    when("the backup Job's Pod running", BRING_UP, || async {
        pods.list(&params).await.is_ok_and(|l| {
            l.items
                .iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        })
    })
    .await;
}

/// The controller Secret's record of the rotation's persisted steps (`None`: no rotation),
/// read as the operator reads it.
fn recorded_step(secret: &Secret) -> Option<String> {
    let record = rotation::read(secret).expect("the rotation's format")?;
    let mut step = record.phase.as_str().to_owned();
    if !record.channels_moved.is_empty() {
        let moved: Vec<String> = record.channels_moved.iter().map(u32::to_string).collect();
        step.push_str(&format!(", channels {}", moved.join(",")));
    }
    if rotation::secrets_moved_at(secret).is_some() {
        step.push_str(", Secrets moved");
    }
    Some(step)
}

/// The new passwords of the rotation in progress, by account.
fn drawn_passwords(secret: &Secret) -> BTreeMap<&'static str, String> {
    let record = rotation::read(secret)
        .expect("the rotation's format")
        .expect("a rotation in progress");
    KEYS.iter()
        .map(|(_, user)| {
            let pair = record.pairs.iter().find(|p| p.account == *user).unwrap();
            (*user, pair.new.clone())
        })
        .collect()
}

fn rotation_requested(c: &MySQLCluster) -> bool {
    annotation(&c.metadata, ROTATE_PASSWORDS_ANNOTATION).is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn passwords_rotate_under_writes_and_a_backup_and_after_a_kill_at_each_step() {
    let Some(mut f) = setup("rotation", 3).await else {
        return;
    };
    let plugin = PluginPath::install(&f.cp);
    let moto = bridge_moto(&f.cp, "kube_rotation");
    let w = f.healthy_with_writer("bring-up").await;
    let old = passwords(&f).await;
    let mysqld_before = container_restarts(&f, "mysqld").await;
    let agent_before = container_restarts(&f, "agent").await;

    // An application's account, kept by the operator across the rotation.
    declare_user(&f, "Before-rotation-1");
    when("app: Applied", CHANGE, || async {
        logs_in_primary(&f, "app", "Before-rotation-1").await
    })
    .await;

    // 1. kubectl moco credential rotate, a backup running since before.
    backup_policy(&f, &moto).await;
    start_backup(&f).await;
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
        &format!("the Job {BACKUP_JOB} (running since before the rotation)"),
        "no longer accepts the old passwords",
    ] {
        assert!(out.contains(step), "no step {step:?} in:\n{out}");
    }
    // The rotation waited for the Job: it had ended when the old passwords went.
    let jobs: Api<Job> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let job = jobs.get(BACKUP_JOB).await.unwrap();
    let status = job.status.unwrap_or_default();
    assert_eq!(
        (status.active.unwrap_or(0), status.succeeded),
        (0, Some(1)),
        "the backup Job: {status:?}"
    );
    println!(
        "{}: the backup ran from {:?} to {:?}",
        f.ns, status.start_time, status.completion_time
    );
    assert_eq!(
        f.event_notes("MySQLCluster", "BackupCreated").await.len(),
        1
    );
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
        "BackupFailed",
    ] {
        assert!(!reasons.contains(&bad.to_owned()), "{bad} in {reasons:?}");
    }

    // The accounts' shared connection was made with the old password: cut (after the events
    // are read: the clustering manager's sessions go too), it is made again.
    let primary = f.primary_index().await.unwrap();
    cut_sessions(&f, primary, "moco-admin", &new["moco-admin"]).await;
    declare_user(&f, "After-rotation-1");
    when("app: the new password applied", CHANGE, || async {
        logs_in_primary(&f, "app", "After-rotation-1").await
    })
    .await;
    assert!(!logs_in_primary(&f, "app", "Before-rotation-1").await);

    // 2. A second rotation, the operator killed after each step it records. The Secret is
    // watched, not polled: every state it passes through is seen in order, however fast the
    // operator takes the next step (a round after a step follows at once).
    let (secrets, name) = controller_secret(&f);
    let mut states = watcher::watcher(
        secrets,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .applied_objects()
    .boxed();
    f.patch_cluster(json!({"metadata": {"annotations": {
        ROTATE_PASSWORDS_ANNOTATION: "second"
    }}}))
    .await;
    let started = std::time::Instant::now();
    let mut killed_after: Vec<String> = Vec::new();
    let mut drawn: Option<BTreeMap<&str, String>> = None;
    while rotation_requested(&f.cluster().await) {
        assert!(
            started.elapsed() < ROTATION,
            "the second rotation never finished; killed after {killed_after:?}"
        );
        let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(1), states.next()).await
        else {
            continue;
        };
        let secret = event.expect("watching the controller's Secret");
        let Some(step) = recorded_step(&secret) else {
            continue;
        };
        if killed_after.last() == Some(&step) {
            continue;
        }
        // The new passwords are stored when drawn, before anything uses them.
        if drawn.is_none() {
            drawn = Some(drawn_passwords(&secret));
        }
        // The kill follows the step the operator had recorded when it died, which is the
        // one just seen unless it took the next before the kill landed: read once it is
        // gone, so that a step it ran past is not counted as killed after.
        f.on.kill_operator().await;
        let (secrets, name) = controller_secret(&f);
        let at_death = secrets
            .get(&name)
            .await
            .ok()
            .and_then(|s| recorded_step(&s));
        match &at_death {
            Some(dead) if *dead == step => {
                println!("{}: {step}: killed the operator", f.ns);
            }
            other => println!(
                "{}: {step}: the operator ran on before the kill, to {other:?}",
                f.ns
            ),
        }
        f.on.start_operator_again().await;
        if let Some(dead) = at_death
            && killed_after.last() != Some(&dead)
        {
            killed_after.push(dead);
        }
    }
    println!(
        "{}: the second rotation finished in {:.1} s, the operator killed after {killed_after:?}",
        f.ns,
        started.elapsed().as_secs_f64()
    );
    // Each persisted step killed after: the two phases, each replica's channel (the second
    // replica's recorded beside the first's), the Secrets seen moved (recorded once they
    // hold the new passwords, whichever channel step comes first).
    for step in ["drawn", "published"] {
        assert!(
            killed_after.iter().any(|k| k == step),
            "no kill after {step:?}: {killed_after:?}"
        );
    }
    let channel_kills = killed_after
        .iter()
        .filter(|k| k.contains("channels"))
        .map(|k| k.replace(", Secrets moved", ""))
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        channel_kills.len(),
        2,
        "not killed after each re-pointed channel: {killed_after:?}"
    );
    assert!(
        killed_after.iter().any(|k| k.ends_with("Secrets moved")),
        "no kill after the Secrets moved: {killed_after:?}"
    );
    let last = passwords(&f).await;
    assert_eq!(
        Some(&last),
        drawn.as_ref(),
        "the resumed rotation drew other passwords"
    );
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
