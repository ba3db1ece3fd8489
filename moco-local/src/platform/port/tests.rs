//! The local platform over a cluster directory whose instances never ran: what it reads and
//! writes in its files (`pods.json`, `status.json`, `state.json`, `events.jsonl`), with a server
//! binary that is a script, so that no server starts.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use moco_core::moco_accounts::Account;
use moco_core::status::{Condition, ConditionStatus};

use super::*;
use crate::platform::pods::KillHold;

/// A cluster directory with three instances that never ran: the server binary is a
/// script answering `--version` as MariaDB does, so nothing here starts a server.
fn cluster(tmp: &Path) -> LocalPlatform {
    let script = tmp.join("mariadbd");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'mariadbd  Ver 11.4.5-MariaDB for Linux on x86_64'\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let layout = Layout::new(&tmp.join("cluster"));
    let manifest = Manifest {
        server: script,
        ..Manifest::example()
    };
    std::fs::create_dir_all(layout.root()).unwrap();
    manifest.save(&layout).unwrap();
    Secret::generate().unwrap().save(&layout).unwrap();
    let binary = manifest.server_binary().unwrap();
    for index in 0..manifest.replicas {
        crate::platform::servers::write_instance(&layout, &manifest, &binary, index).unwrap();
    }
    LocalPlatform::open(&layout, LocalConfig::default()).unwrap()
}

#[tokio::test]
async fn labels_annotations_and_requests_live_in_pods_json() {
    let tmp = tempfile::tempdir().unwrap();
    let platform = cluster(tmp.path());
    platform
        .set_role_label(1, Some(Role::Replica))
        .await
        .unwrap();
    platform.set_prevent_delete(1, true).await.unwrap();
    PodsFile::update(platform.layout(), |p| {
        p.instances.entry(2).or_default().demote = true;
        p.instances.entry(0).or_default().kill_hold = Some(KillHold {
            since_ms: 0,
            until_ms: None,
        });
        p.switchover_to = Some(2);
    })
    .unwrap();
    platform.remove_demote(2).await.unwrap();
    let observed = platform.observe().await.unwrap();
    assert_eq!(observed.instances.len(), 3);
    let one = &observed.instances[1];
    assert_eq!((one.host.as_str(), one.port), ("127.0.0.1", 20003));
    assert_eq!(one.pod.role_label, Some(Role::Replica));
    assert!(one.pod.prevent_delete && one.pod.exists && !one.pod.ready);
    assert!(!observed.instances[2].pod.demote);
    assert_eq!(observed.switchover_to, Some(2));
    assert_eq!(observed.spec.replicas, 3);
    // An instance whose slot (my.cnf) is gone is a missing Pod.
    std::fs::remove_file(platform.layout().mycnf(2)).unwrap();
    let observed = platform.observe().await.unwrap();
    assert!(!observed.instances[2].pod.exists);
    // A request for an instance that is leaving is not passed on.
    PodsFile::update(platform.layout(), |p| p.switchover_to = Some(3)).unwrap();
    assert_eq!(platform.observe().await.unwrap().switchover_to, None);
}

#[tokio::test]
async fn a_refused_request_is_withdrawn_with_its_reason_in_one_write() {
    let tmp = tempfile::tempdir().unwrap();
    let platform = cluster(tmp.path());
    let layout = platform.layout().clone();
    PodsFile::update(&layout, |p| p.switchover_to = Some(2)).unwrap();
    // A withdrawal for another instance leaves the request (someone replaced it meanwhile).
    platform
        .clear_switchover_request(1, Some("its Pod is not Ready"))
        .await
        .unwrap();
    let pods = PodsFile::load(&layout).unwrap();
    assert_eq!(
        (pods.switchover_to, pods.switchover_refused),
        (Some(2), None)
    );
    platform
        .clear_switchover_request(2, Some("its Pod is not Ready"))
        .await
        .unwrap();
    let pods = PodsFile::load(&layout).unwrap();
    assert_eq!(pods.switchover_to, None);
    assert_eq!(
        pods.switchover_refused,
        Some((2, "its Pod is not Ready".to_owned()))
    );
    // A done request is withdrawn silently.
    PodsFile::update(&layout, |p| {
        p.switchover_to = Some(1);
        p.switchover_refused = None;
    })
    .unwrap();
    platform.clear_switchover_request(1, None).await.unwrap();
    let pods = PodsFile::load(&layout).unwrap();
    assert_eq!((pods.switchover_to, pods.switchover_refused), (None, None));
}

#[tokio::test]
async fn status_writes_keep_the_reconcilers_fields_and_end_a_switchover_request() {
    let tmp = tempfile::tempdir().unwrap();
    let platform = cluster(tmp.path());
    let layout = platform.layout().clone();
    let mut stored = ClusterStatus {
        current_primary_index: 0,
        restored_time: Some(Timestamp(1_700_000_000)),
        ..ClusterStatus::default()
    };
    stored.conditions.push(Condition {
        type_: "Unrelated".to_owned(),
        status: ConditionStatus::True,
        reason: "Reconciler".to_owned(),
        message: String::new(),
        last_transition_time: Timestamp(0),
    });
    files::write_json(&layout.status(), &stored, 0o644).unwrap();
    PodsFile::update(&layout, |p| p.switchover_to = Some(1)).unwrap();
    let clustering = ClusteringStatus {
        current_primary_index: 1,
        synced_replicas: 3,
        ..ClusteringStatus::default()
    };
    platform.write_status(&clustering).await.unwrap();
    let written: ClusterStatus = files::read_json_opt(&layout.status()).unwrap().unwrap();
    assert_eq!(written.current_primary_index, 1);
    assert_eq!(written.synced_replicas, 3);
    assert_eq!(written.restored_time, Some(Timestamp(1_700_000_000)));
    assert!(written.conditions.iter().any(|c| c.type_ == "Unrelated"));
    assert_eq!(PodsFile::load(&layout).unwrap().switchover_to, None);
    // The snapshot `moco local status` reads was written with it.
    let snapshot = ClusterSnapshot::load(&layout).unwrap().unwrap();
    assert_eq!(snapshot.current_primary_index, 1);
    assert_eq!(snapshot.flavor, "mariadb");
    assert_eq!(snapshot.instances.len(), 3);
    assert!(
        snapshot
            .instances
            .iter()
            .all(|i| i.pid.is_none() && !i.ready)
    );
    assert_eq!(snapshot.endpoints.primary, "127.0.0.1:20000");
}

#[tokio::test]
async fn events_credentials_and_refusals() {
    let tmp = tempfile::tempdir().unwrap();
    let platform = cluster(tmp.path());
    platform
        .record_event(&Event::warning("Something", "went wrong"))
        .await
        .unwrap();
    let text = std::fs::read_to_string(platform.layout().events()).unwrap();
    let record: EventRecord = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(record.type_, EventType::Warning);
    assert_eq!(
        (record.reason.as_str(), record.message.as_str()),
        ("Something", "went wrong")
    );
    let repl = platform.credentials(Account::Repl).await.unwrap();
    assert_eq!(repl.user, "moco-repl");
    assert_eq!(repl.password.len(), 32);
    assert!(platform.external_credentials().await.is_err());
    let slot = |index| InstanceSlot {
        index,
        host: "127.0.0.1".to_owned(),
        port: 1,
        pod: PodFacts::default(),
    };
    assert!(platform.mysql(&slot(2)).await.is_ok());
    let err = platform.mysql(&slot(3)).await.unwrap_err();
    assert!(err.to_string().contains("the cluster has 3"), "{err}");
    let external = ReplicationSource::External {
        host: "db.example".to_owned(),
        port: 3306,
    };
    let err = platform
        .clone_instance(1, &external, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("external source (db.example:3306)"),
        "{err}"
    );
}

#[test]
fn a_cluster_that_up_did_not_finish_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let platform = cluster(tmp.path());
    let layout = platform.layout().clone();
    let manifest = Manifest {
        phase: super::super::manifest::Phase::Initializing,
        ..platform.manifest().clone()
    };
    manifest.save(&layout).unwrap();
    let err = LocalPlatform::open(&layout, LocalConfig::default()).unwrap_err();
    assert!(err.to_string().contains("never fully created"), "{err}");
}
