//! The partitioned rollout on the real control plane (issue 33): the StatefulSet webhook
//! registered with the API server for the test's namespace, the real StatefulSet controller
//! rolling the Pods the partition lets go, the operator's partition controller lowering it.
//! A writer inserts through the primary Service all along.
//!
//! * a my.cnf edit of a 3-instance cluster restarts every Pod exactly once, highest ordinal
//!   first, never two down at once, the primary's Pod last and only after a switchover moved
//!   the primary off it; no acknowledged write is lost, every instance ends with the new
//!   option, and the longest pause between acknowledged writes is printed;
//! * a my.cnf option the server refuses stops the rollout at the first Pod, leaves the others
//!   on their revision and the cluster Available, says why (condition and event naming the Pod
//!   and the exit); fixing the ConfigMap resumes and finishes the rollout.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use moco_tests::clustered::{
    CHANGE, ClusteredNamespace, PORT, pod_name, secs, setup_as_moco, setup_with,
};
use moco_tests::control_plane::{is_ready, wait_for};
use moco_tests::operated_namespace::{NAME, STS};
use moco_tests::operator_host::Options;
use mysql_async::prelude::Queryable;
use serde_json::json;

/// Limit of a whole rollout of three Pods (each restart of MariaDB on 2 busy cores).
const ROLLOUT: Duration = Duration::from_secs(600);

/// One look at the cluster's Pods: by ordinal, the Pod's UID, whether it is Ready and not
/// terminating, and whether it is terminating.
#[derive(Clone, Debug)]
struct Sample {
    primary: Option<u32>,
    pods: BTreeMap<u32, (String, bool, bool)>,
}

/// Samples taken every 200 ms while a rollout runs.
struct Observer {
    samples: Arc<Mutex<Vec<Sample>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    fn start(f: &ClusteredNamespace) -> Observer {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (pods, clusters) = (f.pods(), f.clusters());
        let out = Arc::clone(&samples);
        let task = tokio::spawn(async move {
            loop {
                let listed = pods
                    .list(
                        &ListParams::default()
                            .labels(&format!("app.kubernetes.io/instance={NAME}")),
                    )
                    .await;
                let primary = clusters
                    .get_opt(NAME)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|c| c.status)
                    .and_then(|s| u32::try_from(s.current_primary_index).ok());
                if let Ok(listed) = listed {
                    let pods = listed
                        .items
                        .iter()
                        .filter_map(|p: &Pod| {
                            let index = p
                                .metadata
                                .name
                                .as_deref()?
                                .rsplit('-')
                                .next()?
                                .parse()
                                .ok()?;
                            let terminating = p.metadata.deletion_timestamp.is_some();
                            Some((
                                index,
                                (
                                    p.metadata.uid.clone().unwrap_or_default(),
                                    is_ready(p) && !terminating,
                                    terminating,
                                ),
                            ))
                        })
                        .collect();
                    out.lock().unwrap().push(Sample { primary, pods });
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Observer { samples, task }
    }

    fn stop(self) -> Vec<Sample> {
        self.task.abort();
        self.samples.lock().unwrap().clone()
    }
}

/// What the samples say of a rollout of `replicas` Pods.
#[derive(Debug)]
struct Rolled {
    /// Ordinals in the order their Pods were first seen going (terminating or replaced).
    order: Vec<u32>,
    /// Per ordinal, how many Pods replaced the first one seen.
    restarts: BTreeMap<u32, usize>,
    /// The most Pods not Ready (or missing) in one sample.
    most_down: usize,
    /// Ordinals whose Pod went while it was the recorded primary.
    went_as_primary: Vec<u32>,
}

fn analyse(samples: &[Sample], replicas: u32) -> Rolled {
    let mut uids: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut order = Vec::new();
    let mut went_as_primary = Vec::new();
    let mut most_down = 0;
    let mut going: BTreeSet<(u32, String)> = BTreeSet::new();
    for s in samples {
        let down = (0..replicas)
            .filter(|i| !s.pods.get(i).is_some_and(|(_, ready, _)| *ready))
            .count();
        most_down = most_down.max(down);
        for i in 0..replicas {
            let seen = uids.entry(i).or_default();
            let current = s.pods.get(&i);
            let first_uid = seen.first().cloned();
            // Going: terminating, missing, or replaced, each Pod once.
            let gone = match current {
                Some((uid, _, terminating)) => {
                    *terminating
                        || first_uid
                            .as_ref()
                            .is_some_and(|f| f != uid && !seen.contains(uid))
                }
                None => !seen.is_empty(),
            };
            let key_uid = seen.last().cloned().unwrap_or_default();
            if gone && !key_uid.is_empty() && going.insert((i, key_uid)) {
                if !order.contains(&i) {
                    order.push(i);
                }
                if s.primary == Some(i) {
                    went_as_primary.push(i);
                }
            }
            if let Some((uid, _, _)) = current
                && !seen.contains(uid)
            {
                seen.push(uid.clone());
            }
        }
    }
    Rolled {
        order,
        restarts: uids
            .into_iter()
            .map(|(i, u)| (i, u.len().saturating_sub(1)))
            .collect(),
        most_down,
        went_as_primary,
    }
}

/// The StatefulSet's update revision.
async fn update_revision(f: &ClusteredNamespace) -> Option<String> {
    Api::<StatefulSet>::namespaced(f.cp.client.clone(), &f.ns)
        .get(STS)
        .await
        .ok()?
        .status?
        .update_revision
}

/// The StatefulSet's status: (updatedReplicas, currentRevision == updateRevision, partition).
async fn rollout_state(f: &ClusteredNamespace) -> (i32, bool, Option<i32>) {
    let sts = Api::<StatefulSet>::namespaced(f.cp.client.clone(), &f.ns)
        .get(STS)
        .await
        .unwrap();
    let status = sts.status.unwrap_or_default();
    let partition = sts
        .spec
        .and_then(|s| s.update_strategy)
        .and_then(|u| u.rolling_update)
        .and_then(|r| r.partition);
    (
        status.updated_replicas.unwrap_or(0),
        status.current_revision.is_some() && status.current_revision == status.update_revision,
        partition,
    )
}

/// Points the cluster at ConfigMap `name` holding `options` (made or replaced).
fn set_mycnf(f: &ClusteredNamespace, name: &str, options: serde_json::Value) {
    f.cp.apply(
        &f.ns,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": f.ns}, "data": options})
        .to_string(),
    );
}

async fn use_mycnf(f: &ClusteredNamespace, name: &str) {
    f.clusters()
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"mysqlConfigMapName": name}})),
        )
        .await
        .unwrap();
}

async fn max_connections(f: &ClusteredNamespace, index: u32) -> Option<u64> {
    let ip: std::net::IpAddr = f.pod(index).await?.status?.pod_ip?.parse().ok()?;
    let admin = f.password("ADMIN_PASSWORD").await;
    let opts = moco_tests::writer::opts_at(SocketAddr::new(ip, PORT), "moco-admin", &admin);
    let mut conn = mysql_async::Conn::new(opts).await.ok()?;
    let value: Option<u64> = conn.query_first("SELECT @@max_connections").await.ok()?;
    let _ = conn.disconnect().await;
    value
}

/// Waits until the StatefulSet has an update revision other than `before`, every Pod runs
/// it and the cluster is Healthy.
async fn wait_rolled(f: &ClusteredNamespace, replicas: i32, before: &Option<String>) {
    wait_for(&format!("{}: a new revision", f.ns), CHANGE, || async {
        (update_revision(f).await != *before).then_some(())
    })
    .await;
    wait_for(
        &format!("{}: every Pod updated and the cluster Healthy", f.ns),
        ROLLOUT,
        || async {
            let (updated, complete, _) = rollout_state(f).await;
            (updated == replicas && complete && f.healthy().await).then_some(())
        },
    )
    .await;
}

async fn webhook_setup(test: &str) -> Option<ClusteredNamespace> {
    setup_with(test, 3, Options::statefulset_webhook).await
}

/// What one rollout of a my.cnf edit did, watched from the edit to every Pod updated and the
/// cluster Healthy.
struct Rollout {
    rolled: Rolled,
    edited: Instant,
    took: Duration,
}

/// Edits the cluster's my.cnf (`max_connections` = `value`) and waits for the rollout.
async fn roll_mycnf(f: &ClusteredNamespace, replicas: u32, value: u32) -> Rollout {
    let observer = Observer::start(f);
    let before = update_revision(f).await;
    set_mycnf(
        f,
        "db-options",
        json!({"max_connections": value.to_string()}),
    );
    let edited = Instant::now();
    use_mycnf(f, "db-options").await;
    wait_rolled(f, i32::try_from(replicas).unwrap(), &before).await;
    let took = edited.elapsed();
    let rolled = analyse(&observer.stop(), replicas);
    println!("{}: rollout in {}: {rolled:?}", f.ns, secs(took));
    for i in 0..replicas {
        assert_eq!(
            max_connections(f, i).await,
            Some(u64::from(value)),
            "instance {i}"
        );
    }
    Rollout {
        rolled,
        edited,
        took,
    }
}

/// Drill: a my.cnf edit rolled one Pod at a time, the primary last after a switchover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_my_cnf_edit_rolls_one_pod_at_a_time_and_the_primary_last_after_a_switchover() {
    let Some(f) = webhook_setup("ro_mycnf").await else {
        return;
    };
    let w = f.healthy_with_writer("bring-up").await;
    // The webhook held the new StatefulSet at its replicas.
    assert_eq!(
        rollout_state(&f).await.2,
        Some(3),
        "partition after creation"
    );
    let primary = f.primary_index().await.unwrap();
    assert_eq!(primary, 0);
    let Rollout {
        rolled,
        edited,
        took,
    } = roll_mycnf(&f, 3, 321).await;
    assert_eq!(rolled.order, [2, 1, 0], "restart order");
    assert_eq!(
        rolled.restarts,
        BTreeMap::from([(0, 1), (1, 1), (2, 1)]),
        "each Pod restarted exactly once"
    );
    assert_eq!(rolled.most_down, 1, "never more than one Pod down");
    assert!(
        rolled.went_as_primary.is_empty(),
        "restarted while primary: {:?}",
        rolled.went_as_primary
    );
    // To the highest updated replica, by name: one switchover, and the new primary is not
    // rolled again (the lowest candidate, Pod 1, was updated too, so both would do here; the
    // request names it all the same).
    assert_eq!(f.primary_index().await, Some(2), "switched over to Pod 2");
    assert_eq!(
        f.event_notes("MySQLCluster", "SwitchOver").await,
        ["primary instance was changed from 0 to 2 due to a switchover"]
    );
    assert_eq!(
        f.switchover_request().await,
        None,
        "the request is withdrawn once done"
    );
    assert_eq!(
        f.event_notes("StatefulSet", "PartitionUpdate").await,
        [
            "Updated partition from 3 to 2",
            "Updated partition from 2 to 1",
            "Updated partition from 1 to 0"
        ]
    );
    let labels = [("name", NAME), ("namespace", f.ns.as_str())];
    assert_eq!(
        f.host
            .sample("moco_cluster_updated_replicas", &labels)
            .await,
        Some(3.0)
    );
    assert!(
        f.host
            .sample("moco_cluster_last_partition_updated", &labels)
            .await
            .is_some_and(|t| t > 1.7e9)
    );
    let log = f.finish(w).await;
    let pause = log
        .longest_pause_around(edited, Instant::now())
        .map(|p| p.length())
        .unwrap_or_default();
    println!(
        "{}: rollout of 3: {} total, longest pause between acknowledged writes {}, {} \
         writes acknowledged, 0 lost",
        f.ns,
        secs(took),
        secs(pause),
        log.acks.len()
    );
    assert!(pause < CHANGE, "writes paused {}", secs(pause));
}

/// Drill: an option the server refuses stops the rollout at the first Pod; fixing it resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_option_stops_the_rollout_at_one_pod_and_fixing_it_resumes() {
    let Some(f) = webhook_setup("ro_broken").await else {
        return;
    };
    let w = f.healthy_with_writer("bring-up").await;
    let uid = |p: Option<Pod>| p.and_then(|p| p.metadata.uid);
    let (uid0, uid1) = (uid(f.pod(0).await), uid(f.pod(1).await));
    let before = update_revision(&f).await;
    set_mycnf(&f, "db-options", json!({"innodb_bogus_option": "1"}));
    use_mycnf(&f, "db-options").await;
    let message = wait_for(
        &format!("{}: the RolloutStalled condition", f.ns),
        ROLLOUT,
        || async {
            let status = f.try_cluster().await?.status?;
            status
                .conditions
                .into_iter()
                .find(|c| c.type_ == "RolloutStalled" && c.status == "True")
                .map(|c| c.message)
        },
    )
    .await;
    println!("{}: stalled: {message}", f.ns);
    assert!(message.contains(&pod_name(2)), "{message}");
    // mysqld's log (reconciler version 2: FallbackToLogsOnError) names what it refused.
    assert!(message.contains("mysqld exited"), "{message}");
    assert!(
        message.contains("unknown variable 'innodb_bogus_option=1'"),
        "{message}"
    );
    let events = f.event_notes("MySQLCluster", "RolloutStalled").await;
    assert!(events.iter().any(|n| n == &message), "{events:?}");
    // The others kept their Pods; the cluster stays Available; the partition stays at 2.
    assert_eq!(uid(f.pod(0).await), uid0);
    assert_eq!(uid(f.pod(1).await), uid1);
    assert_eq!(rollout_state(&f).await.2, Some(2));
    assert_eq!(
        f.condition("Available").await.map(|(s, _)| s).as_deref(),
        Some("True")
    );
    // Fixed: the rollout resumes and finishes, and the condition clears.
    let broken = update_revision(&f).await;
    assert_ne!(broken, before);
    set_mycnf(&f, "db-options", json!({"max_connections": "222"}));
    wait_rolled(&f, 3, &broken).await;
    for i in 0..3 {
        assert_eq!(max_connections(&f, i).await, Some(222), "instance {i}");
    }
    let cleared = f
        .try_cluster()
        .await
        .and_then(|c| c.status)
        .and_then(|s| {
            s.conditions
                .into_iter()
                .find(|c| c.type_ == "RolloutStalled")
        })
        .map(|c| c.status);
    assert_eq!(cleared.as_deref(), Some("False"));
    f.finish(w).await;
}

/// Benchmark (ignored by `cargo test`; `cargo test -p moco-tests --test integration
/// kube_rollout::bench -- --ignored --nocapture` with `MOCO_KUBE_DIR`): a my.cnf edit rolled
/// under writes by the partition controller and, as the baseline, by the StatefulSet
/// controller alone (MOCO's `force-rolling-update` annotation), on 3 and 5 instances. Prints
/// per rollout the total time, the longest pause between acknowledged writes, the Pods down at
/// once and the Pods restarted while primary; every run checks that no acknowledged write was
/// lost. Numbers in `docs/benchmarks.md`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: run by hand, numbers in docs/benchmarks.md"]
async fn bench_rollouts_managed_and_unmanaged() {
    let mut table = Vec::new();
    for (replicas, managed) in [(3, true), (3, false), (5, true), (5, false)] {
        let test = format!("ro_bench_{replicas}_{}", if managed { "m" } else { "u" });
        let Some(f) = setup_as_moco(&test, replicas, Options::statefulset_webhook).await else {
            return;
        };
        if !managed {
            f.clusters()
                .patch(
                    NAME,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"metadata": {"annotations": {
                        "moco.cybozu.com/force-rolling-update": "true"}}})),
                )
                .await
                .unwrap();
        }
        let w = f.healthy_with_writer("bring-up").await;
        if !managed {
            wait_for(&format!("{}: no partition", f.ns), CHANGE, || async {
                rollout_state(&f).await.2.is_none().then_some(())
            })
            .await;
        }
        let r = roll_mycnf(&f, replicas, 300 + replicas).await;
        let log = f.finish(w).await;
        let pause = log
            .longest_pause_around(r.edited, Instant::now())
            .map(|p| p.length())
            .unwrap_or_default();
        table.push(format!(
            "| {replicas} | {} | {} | {} | {} | {:?} | {} |",
            if managed {
                "partition controller"
            } else {
                "StatefulSet controller (forced)"
            },
            secs(r.took),
            secs(pause),
            r.rolled.most_down,
            r.rolled.went_as_primary,
            log.acks.len(),
        ));
    }
    println!(
        "| instances | rolled by | total | longest write pause | most Pods down | restarted as primary | writes acknowledged (0 lost) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in table {
        println!("{row}");
    }
}
