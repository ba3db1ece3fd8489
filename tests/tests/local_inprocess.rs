//! `LocalPlatform` + `Manager` driven in-process (no `moco` binary): creation through the
//! library, the manager process body started and stopped from the test, the status and
//! events files, and the endpoints cutting a client of a demoted primary.

use std::time::{Duration, Instant};

use moco_core::facts::Role;
use moco_core::state::ClusterState;
use moco_core::status::ClusterStatus;
use moco_local::platform::create::{self, CreateOptions};
use moco_local::platform::pods::PodsFile;
use moco_local::platform::run::{RunOptions, RunningCluster, running_manager};
use moco_local::platform::snapshot::ClusterSnapshot;
use moco_local::platform::{Layout, Manifest};
use moco_tests::local::{
    connect, free_port_block, kill_processes_mentioning, opts, server_or_skip,
};
use mysql_async::prelude::Queryable;

async fn wait_snapshot(
    layout: &Layout,
    what: &str,
    limit: Duration,
    pred: impl Fn(&ClusterSnapshot) -> bool,
) -> ClusterSnapshot {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = ClusterSnapshot::load(layout).unwrap()
            && pred(&s)
        {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            ClusterSnapshot::load(layout).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stops every process of the directory even when the test panics.
struct Guard(String);

impl Drop for Guard {
    fn drop(&mut self) {
        kill_processes_mentioning(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn platform_and_manager_in_process() {
    if server_or_skip("platform_and_manager_in_process").is_none() {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("moco-inproc-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("c");
    let _guard = Guard(dir.display().to_string());
    let mut options = CreateOptions::new(&dir, 3);
    options.base_port = Some(free_port_block(5));
    let prepared = create::prepare(options).unwrap();
    let layout = prepared.layout().clone();
    let started = Instant::now();
    let manifest: Manifest = create::create(prepared).await.unwrap();
    println!(
        "created {} instances in {:.1} s",
        manifest.replicas,
        started.elapsed().as_secs_f64()
    );
    assert!(running_manager(&layout).unwrap().is_none());

    let cluster = RunningCluster::start(
        &layout,
        RunOptions {
            check_interval: Duration::from_millis(500),
            ..RunOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(running_manager(&layout).unwrap().is_some());
    // A second manager on the same directory is refused.
    let second = RunningCluster::start(&layout, RunOptions::default()).await;
    assert!(second.is_err(), "two managers on one directory");

    let healthy = wait_snapshot(&layout, "Healthy", Duration::from_secs(120), |s| {
        s.is(ClusterState::Healthy)
    })
    .await;
    println!("Healthy after {:.1} s", started.elapsed().as_secs_f64());
    let status: ClusterStatus = moco_local::platform::files::read_json(&layout.status()).unwrap();
    assert_eq!(status.current_primary_index, healthy.current_primary_index);
    let pods = PodsFile::load(&layout).unwrap();
    let primary = healthy.current_primary_index;
    assert_eq!(pods.get(primary).role, Some(Role::Primary));

    // A client on the primary endpoint.
    let secret = cluster.platform().await.secret().clone();
    let writable = secret.password("moco-writable").unwrap().to_owned();
    let ep = cluster.endpoints().primary_addr().port();
    let mut client = connect(
        &opts(ep, "moco-writable", &writable),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let before: u32 = client
        .query_first("SELECT @@server_id")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, manifest.server_id(primary));

    // Switchover through pods.json, as `moco local switchover` does.
    PodsFile::update(&layout, |p| {
        p.instances.entry(primary).or_default().demote = true;
    })
    .unwrap();
    let moved = wait_snapshot(&layout, "switchover", Duration::from_secs(60), |s| {
        s.current_primary_index != primary && s.is(ClusterState::Healthy)
    })
    .await;
    // The old client's connection is gone: the switchover's KILL of client sessions on the
    // old primary or the endpoint's cut when the backend lost the primary label ends it,
    // whichever comes first. (Regression: asserting the endpoint's cut counter failed under
    // load, when the server's kill came first; the proxy's unit tests prove the cut itself.)
    let cut = client.query_drop("SELECT 1").await;
    assert!(
        cut.is_err(),
        "a client of the demoted primary kept its connection"
    );
    let mut client = connect(
        &opts(ep, "moco-writable", &writable),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let after: u32 = client
        .query_first("SELECT @@server_id")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, manifest.server_id(moved.current_primary_index));
    drop(client);
    assert!(!PodsFile::load(&layout).unwrap().get(primary).demote);

    let events = std::fs::read_to_string(layout.events()).unwrap();
    assert!(events.contains("\"reason\":\"SwitchOver\""), "{events}");

    // Stopping the manager stops every server and releases the directory.
    cluster.stop().await.unwrap();
    assert!(running_manager(&layout).unwrap().is_none());
    assert_eq!(kill_processes_mentioning(&dir.display().to_string()), 0);
}
