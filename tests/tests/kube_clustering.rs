//! Clustering on Pods (issue 31): MariaDB clusters created with `kubectl apply` on the real
//! control plane (`scripts/kube.sh up`, `MOCO_KUBE_DIR`), their Pods run by the Pod runner,
//! managed by `moco controller --watch-namespace` run on this machine ([`OperatedNamespace`]).
//! A writer inserts where the `moco-db-primary` Service's EndpointSlice points (read through
//! the API server, as kube-proxy would: [`ServiceRoute`]) and records the ids acknowledged.
//! Every drill ends with every acknowledged row on the final primary and the replicas holding
//! exactly the primary's rows.
//!
//! * bring-up: Healthy, one primary and two replicas by role label, each Service's
//!   EndpointSlice naming them;
//! * switchover by `kubectl moco switchover` (the plugin through the real kubectl) and by
//!   deleting the primary's Pod (switched over while it terminates, within its grace period),
//!   with the longest pause between acknowledged writes around each printed;
//! * failover of a primary whose container is killed, that is frozen, and that is cut off the
//!   network, with the time from the fault to the Service naming the new primary and to the
//!   first acknowledged write printed;
//! * an errant replica reported and out of the replica Service; a wiped replica cloned by the
//!   agents; 3 → 5 → 3 under writes.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kube::api::Api;
use moco_tests::clustered::{BRING_UP, CHANGE, ClusteredNamespace, manifest, pod_name, secs, when};
use moco_tests::operated_namespace::NAME;
use moco_tests::operator_host::Options;
use moco_tests::writer::{self, Writer, WriterLog, stored_ids};

/// A [`ClusteredNamespace`] with what only these drills ask of it (faults, failovers).
struct Fixture(ClusteredNamespace);

impl std::ops::Deref for Fixture {
    type Target = ClusteredNamespace;

    fn deref(&self) -> &ClusteredNamespace {
        &self.0
    }
}

async fn setup(test: &str, replicas: u32) -> Option<Fixture> {
    moco_tests::clustered::setup(test, replicas)
        .await
        .map(Fixture)
}

/// Drill 1: a 3-instance cluster applied with kubectl becomes Healthy with one primary and two
/// replicas, each Service's EndpointSlice names them, and a writer through the primary
/// Service keeps every acknowledged write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_applied_with_kubectl_becomes_healthy_and_keeps_every_acknowledged_write() {
    let Some(f) = setup("cl_bring_up", 3).await else {
        return;
    };
    let w = f.healthy_with_writer("bring-up").await;
    assert_eq!(f.state().await, "Healthy");
    for (t, want) in [("Initialized", "True"), ("Available", "True")] {
        assert_eq!(
            f.condition(t).await.map(|(s, _)| s).as_deref(),
            Some(want),
            "condition {t}"
        );
    }
    w.wait_acked(200, CHANGE).await;
    let log = f.finish(w).await;
    assert!(log.acks.len() > 200);
    assert_eq!(f.counter("moco_cluster_failover_total").await, 0.0);
}

/// A generous bound on a switchover's write pause: a regression (a switchover waiting on a
/// timeout, or turned into a failover) shows, a busy machine does not; the time itself is
/// measured and recorded in `docs/benchmarks.md`.
const PAUSE_BOUND: Duration = Duration::from_secs(30);

/// The longest pause between two acknowledged writes from the switchover (`since`) to the
/// first write the new primary (`new_primary`) acknowledged after it; printed and checked
/// against [`PAUSE_BOUND`].
async fn switchover_pause(
    f: &Fixture,
    w: &Writer,
    what: &str,
    since: Instant,
    new_primary: SocketAddr,
) -> Duration {
    let first = |log: &WriterLog| {
        log.acks
            .iter()
            .find(|a| a.at > since && a.by == new_primary)
            .map(|a| a.at)
    };
    when(
        &format!("{}: a write acknowledged by {new_primary}", f.ns),
        CHANGE,
        || async { first(&w.log()).is_some() },
    )
    .await;
    let log = w.log();
    let until = first(&log).unwrap();
    let pause = log
        .longest_pause_around(since, until)
        .expect("acknowledgements on both sides of the switchover");
    println!(
        "{}: {what}: longest pause between acknowledged writes {} (id {} by {} -> id {} by {}), \
         {} after the switchover began",
        f.ns,
        secs(pause.length()),
        pause.before.id,
        pause.before.by,
        pause.after.id,
        pause.after.by,
        secs(pause.after.at - since)
    );
    assert!(
        pause.length() < PAUSE_BOUND,
        "{}: {what}: writes paused {} (bound {PAUSE_BOUND:?})",
        f.ns,
        secs(pause.length())
    );
    pause.length()
}

/// Drill 2: `kubectl moco switchover` (the plugin on `PATH`, run by the real kubectl) moves
/// the primary, and so does deleting the primary's Pod: the operator switches over while the
/// Pod terminates (its `preStop` keeps mysqld up 20 s; the runner honours it), before mysqld
/// stops, so it is a switchover, not a failover. No acknowledged write is lost, and the
/// longest pause between two acknowledged writes around each switchover is printed (and
/// bounded generously).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switchover_by_kubectl_moco_and_by_deleting_the_primary_pod_loses_no_acknowledged_write() {
    // The operator's own 20 s preStop: the switchover away from the deleted primary's Pod
    // happens within it.
    let Some(f) = moco_tests::clustered::setup_with("cl_switchover", 3, Options::moco_pre_stop)
        .await
        .map(Fixture)
    else {
        return;
    };
    // Built while the cluster comes up, not under the writer: the build may wait minutes on
    // the shared target directory's lock.
    let plugin = moco_tests::kubectl_plugin::PluginPath::install(&f.cp);
    let w = f.healthy_with_writer("bring-up").await;
    let plugins = plugin.kubectl_ok(&["plugin", "list"]);
    assert!(
        plugins.contains("kubectl-moco"),
        "kubectl plugin list: {plugins}"
    );

    // 1. kubectl moco switchover.
    let first = f.primary_index().await.unwrap();
    let switched_before = f.counter("moco_cluster_switchover_total").await;
    let t0 = Instant::now();
    let out = plugin.kubectl_ok(&["moco", "-n", &f.ns, "switchover", NAME]);
    assert_eq!(out, "", "kubectl moco switchover prints nothing");
    when("a new primary recorded", CHANGE, || async {
        f.primary_index().await.is_some_and(|p| p != first)
    })
    .await;
    let second = f.primary_index().await.unwrap();
    f.wait_healthy("after kubectl moco switchover", CHANGE)
        .await;
    f.check_routes(second).await;
    let routed = f.primary.first_alone_since(&pod_name(second), t0).unwrap();
    println!(
        "{}: kubectl moco switchover {first} -> {second}: the primary Service named {} after {}",
        f.ns,
        pod_name(second),
        secs(routed - t0)
    );
    let annotations = f
        .pod(first)
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(
        !annotations.contains_key("moco.cybozu.com/demote"),
        "the demote annotation is removed: {annotations:?}"
    );
    assert!(f.event_reasons().await.contains(&"SwitchOver".to_owned()));
    assert_eq!(
        f.counter("moco_cluster_switchover_total").await,
        switched_before + 1.0
    );
    w.wait_acked(w.acked() + 20, CHANGE).await;
    let by_plugin = switchover_pause(
        &f,
        &w,
        "kubectl moco switchover",
        t0,
        f.addr(second).await.unwrap(),
    )
    .await;

    // The plugin's status reaches the instances' SQL from this machine through the Pod
    // addresses (`--address`; the Pods' DNS names do not resolve here).
    let mut args: Vec<String> = ["moco", "-n", &f.ns, "status"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for i in 0..3 {
        args.push("--address".into());
        args.push(format!("{i}={}", f.addr(i).await.unwrap()));
    }
    args.push(NAME.into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let status = plugin.kubectl_ok(&args);
    println!("{status}");
    assert!(
        status.contains(&format!(
            "Primary:      {} (index {second})",
            pod_name(second)
        )),
        "{status}"
    );
    let reachable = status
        .lines()
        .filter(|l| {
            l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains("moco-db-")
        })
        .filter(|l| l.contains("reachable") && !l.contains("unreachable"))
        .count();
    assert_eq!(reachable, 3, "every instance's SQL reached:\n{status}");

    // 1b. `kubectl moco switchover --to N` (beyond MOCO): refused at once for an instance that
    // does not exist, nothing to do for the primary, done for a Ready replica (the request's
    // annotation withdrawn afterwards), and refused by the operator for a replica that stopped
    // answering (the plugin's pre-checks see a Ready Pod; the operator's event is its error).
    let to = |n: u32| {
        let n = n.to_string();
        plugin.kubectl(&["moco", "-n", &f.ns, "switchover", NAME, "--to", &n])
    };
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let out = to(7);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "cannot switch over to instance 7: instance 7 does not exist (spec.replicas: 3)"
        ),
        "{}",
        stderr(&out)
    );
    let out = to(second);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("instance {second} is already the primary")
    );
    let chosen = (0..3).find(|&i| i != first && i != second).unwrap();
    let t_to = Instant::now();
    let out = to(chosen);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        printed.starts_with(&format!(
            "primary moved from instance {second} to instance {chosen} in "
        )),
        "{printed}"
    );
    assert_eq!(f.primary_index().await, Some(chosen));
    when(
        "the switchover request withdrawn once done",
        CHANGE,
        || async { f.switchover_request().await.is_none() },
    )
    .await;
    f.wait_healthy("after kubectl moco switchover --to", CHANGE)
        .await;
    f.check_routes(chosen).await;
    w.wait_acked(w.acked() + 20, CHANGE).await;
    let by_choice = switchover_pause(
        &f,
        &w,
        "kubectl moco switchover --to",
        t_to,
        f.addr(chosen).await.unwrap(),
    )
    .await;
    Fault::Freeze.apply(&f, first).await;
    let out = to(first);
    Fault::Freeze.undo(&f, first).await;
    assert!(!out.status.success(), "a frozen replica was switched to");
    let err = stderr(&out);
    println!("{}: switchover --to a frozen replica: {}", f.ns, err.trim());
    assert!(
        err.contains(&format!(
            "the operator refused: switchover to instance {first} refused: "
        )) || err.contains(&format!(
            "cannot switch over to instance {first}: instance {first}'s Pod is not Ready"
        )),
        "{err}"
    );
    assert_eq!(f.primary_index().await, Some(chosen));
    assert_eq!(
        f.switchover_request().await,
        None,
        "the refused request is gone"
    );
    f.wait_healthy("after the refused switchover", CHANGE).await;

    // 2. Deleting the primary's Pod.
    let old = f.pod(chosen).await.unwrap();
    let old_uid = old.metadata.uid.clone().unwrap();
    let failovers = f.counter("moco_cluster_failover_total").await;
    let switched_before = f.counter("moco_cluster_switchover_total").await;
    let t1 = Instant::now();
    let out = f.cp.kubectl(
        &[
            "-n",
            &f.ns,
            "delete",
            "pod",
            &pod_name(chosen),
            "--wait=false",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The new primary is recorded while the old Pod is still there, terminating.
    let recorded = when("a new primary recorded", CHANGE, || async {
        f.primary_index().await.is_some_and(|p| p != chosen)
    })
    .await;
    let old_still_there = f
        .pod(chosen)
        .await
        .is_some_and(|p| p.metadata.uid.as_deref() == Some(old_uid.as_str()));
    let third = f.primary_index().await.unwrap();
    let gone = when("the deleted Pod gone", CHANGE, || async {
        f.pod(chosen)
            .await
            .is_none_or(|p| p.metadata.uid.as_deref() != Some(old_uid.as_str()))
    })
    .await;
    println!(
        "{}: Pod {} deleted: new primary {third} recorded after {}, the Pod gone after {}",
        f.ns,
        pod_name(chosen),
        secs(recorded - t1),
        secs(gone - t1)
    );
    assert!(
        old_still_there,
        "the new primary was recorded only after the old primary's Pod was gone"
    );
    // The runner ran the 20 s preStop before stopping mysqld.
    assert!(
        gone - t1 >= Duration::from_secs(20),
        "the Pod was gone after {}, before its preStop's 20 s",
        secs(gone - t1)
    );
    assert_eq!(f.counter("moco_cluster_failover_total").await, failovers);
    assert_eq!(
        f.counter("moco_cluster_switchover_total").await,
        switched_before + 1.0
    );
    let routed = f.primary.first_alone_since(&pod_name(third), t1).unwrap();
    println!(
        "{}: the primary Service named {} after {}",
        f.ns,
        pod_name(third),
        secs(routed - t1)
    );
    assert!(
        routed < gone,
        "the Service named the new primary only after the old Pod was gone"
    );
    // The StatefulSet makes the Pod again; it comes back as a replica.
    f.wait_healthy("after the primary's Pod was deleted", CHANGE)
        .await;
    f.check_routes(third).await;
    w.wait_acked(w.acked() + 20, CHANGE).await;
    let third_addr = f.addr(third).await.unwrap();
    let by_deletion = switchover_pause(&f, &w, "Pod deleted", t1, third_addr).await;
    let log = f.finish(w).await;
    let first_ack = log
        .acks
        .iter()
        .find(|a| a.at > t1 && a.by == third_addr)
        .map(|a| a.at - t1)
        .unwrap();
    println!(
        "{}: first write acknowledged by the new primary {} after the deletion",
        f.ns,
        secs(first_ack)
    );
    println!(
        "{}: switchover write pauses: kubectl moco switchover {}, --to {}, Pod deletion {}",
        f.ns,
        secs(by_plugin),
        secs(by_choice),
        secs(by_deletion)
    );
}

/// A fault of the Pod runner's (`testing/moco-pod-runner/src/pod/worker.rs`), put on the primary's
/// Pod as an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `kill: mysqld@N`: SIGKILL of the mysqld container's process; the runner restarts it.
    Kill,
    /// `freeze: "true"`: every process of the Pod frozen until the annotation goes.
    Freeze,
    /// `network: cut`: the Pod's veth down until the annotation goes.
    Cut,
}

const FAULT_KILL: &str = "pod-runner.moco-rs.test/kill";
const FAULT_FREEZE: &str = "pod-runner.moco-rs.test/freeze";
const FAULT_NETWORK: &str = "pod-runner.moco-rs.test/network";

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "killed mysqld",
            Fault::Freeze => "frozen",
            Fault::Cut => "cut off the network",
        }
    }

    async fn apply(self, f: &Fixture, index: u32) {
        match self {
            Fault::Kill => {
                let nonce = format!("mysqld@{}", rand_nonce());
                f.annotate_pod(index, FAULT_KILL, Some(&nonce)).await;
            }
            Fault::Freeze => f.annotate_pod(index, FAULT_FREEZE, Some("true")).await,
            Fault::Cut => f.annotate_pod(index, FAULT_NETWORK, Some("cut")).await,
        }
    }

    async fn undo(self, f: &Fixture, index: u32) {
        match self {
            Fault::Kill => f.annotate_pod(index, FAULT_KILL, None).await,
            Fault::Freeze => f.annotate_pod(index, FAULT_FREEZE, None).await,
            Fault::Cut => f.annotate_pod(index, FAULT_NETWORK, None).await,
        }
    }
}

/// A value that differs between calls (the kill fault acts once per distinct value).
fn rand_nonce() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// What one failover took, from the fault.
#[derive(Debug)]
struct Measured {
    fault: Fault,
    /// How many times the fault was put on (kills of a crash-looping container).
    faults: u32,
    recorded: Duration,
    routed: Duration,
    first_ack: Duration,
    returned_errant: bool,
}

impl Fixture {
    /// Puts `fault` on the primary under `w`, waits for the failover, the Service naming the
    /// new primary and a write it acknowledged, then lifts the fault and waits for the old
    /// primary to be back as a replica (re-cloned first when it came back errant) and Healthy.
    async fn fail_over(&self, w: &Writer, fault: Fault) -> Measured {
        let old = self.primary_index().await.unwrap();
        let failovers = self.counter("moco_cluster_failover_total").await;
        w.wait_acked(w.acked() + 20, CHANGE).await;
        let t0 = Instant::now();
        // A killed container is restarted by the runner at once, as by the kubelet, and the
        // operator may well keep a primary that is back within a second; it is killed again
        // each time it runs (a crash loop: the restarts back off 10 s, 20 s, …) until the
        // operator fails it over.
        let mut faults = 0;
        let mut last = None::<Instant>;
        let recorded = loop {
            if self.primary_index().await.is_some_and(|p| p != old) {
                break Instant::now();
            }
            if faults == 0
                || (fault == Fault::Kill
                    && last.is_none_or(|l| l.elapsed() >= Duration::from_secs(2)))
            {
                fault.apply(self, old).await;
                faults += 1;
                last = Some(Instant::now());
            }
            assert!(
                t0.elapsed() < CHANGE,
                "{}: no failover from {old} ({}) within {CHANGE:?} ({faults} fault(s)); state {:?}\n{}",
                self.ns,
                fault.name(),
                self.state().await,
                self.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let new = self.primary_index().await.unwrap();
        let new_pod = pod_name(new);
        self.primary
            .wait(&format!("naming {new_pod} alone"), CHANGE, |e| {
                e.len() == 1 && e[0].pod.as_deref() == Some(new_pod.as_str())
            })
            .await;
        let routed = self.primary.first_alone_since(&new_pod, t0).unwrap();
        let new_addr = self.addr(new).await.unwrap();
        let first_ack = when(
            "a write acknowledged by the new primary",
            CHANGE,
            || async { w.log().acks.iter().any(|a| a.at > t0 && a.by == new_addr) },
        )
        .await;
        let first_ack = w
            .log()
            .acks
            .iter()
            .find(|a| a.at > t0 && a.by == new_addr)
            .map_or(first_ack, |a| a.at);
        assert_eq!(
            self.counter("moco_cluster_failover_total").await,
            failovers + 1.0,
            "one failover counted"
        );
        assert!(self.event_reasons().await.contains(&"FailOver".to_owned()));
        let m = Measured {
            fault,
            faults,
            recorded: recorded - t0,
            routed: routed - t0,
            first_ack: first_ack - t0,
            returned_errant: false,
        };
        println!(
            "{}: primary {old} {} ({faults} time(s)): failover to {new} recorded after {}, the \
             primary Service named {new_pod} after {}, first write acknowledged by it after {}",
            self.ns,
            fault.name(),
            secs(m.recorded),
            secs(m.routed),
            secs(m.first_ack)
        );
        fault.undo(self, old).await;
        // Back as a replica, or errant: a primary stopped mid-write may hold a transaction no
        // replica received; it must then stay out, and is re-cloned as MOCO's runbook says.
        when(
            &format!("{}: instance {old} back as a replica or errant", self.ns),
            CHANGE,
            || async { self.healthy().await || self.errant().await.contains(&old) },
        )
        .await;
        let returned_errant = self.errant().await.contains(&old);
        if returned_errant {
            println!(
                "{}: instance {old} came back errant: re-cloning it",
                self.ns
            );
            self.check_routes(new).await;
            self.reclone(old).await;
        }
        self.wait_healthy(&format!("after the {} primary", fault.name()), CHANGE)
            .await;
        self.check_routes(new).await;
        Measured {
            returned_errant,
            ..m
        }
    }

    /// Deletes instance `index`'s claim and Pod; the StatefulSet makes both again and the
    /// operator clones the empty instance from the primary through the agents. The primary's
    /// binlogs are purged first, as a cluster that has run a while has them: while MariaDB's
    /// primary holds every binlog, an empty replica replays them instead (`plan/configure.rs`).
    async fn reclone(&self, index: u32) {
        let primary = self.primary.single().unwrap();
        let admin = self.password("ADMIN_PASSWORD").await;
        moco_tests::local::purge_binary_logs(&writer::opts_at(primary.addr, "moco-admin", &admin))
            .await;
        let claim = format!("mysql-data-{}", pod_name(index));
        let old_uid = self.pod(index).await.and_then(|p| p.metadata.uid);
        let cloned = self
            .event_reasons()
            .await
            .iter()
            .filter(|r| *r == "Cloned")
            .count();
        for args in [
            vec!["-n", &self.ns, "delete", "pvc", &claim, "--wait=false"],
            vec![
                "-n",
                &self.ns,
                "delete",
                "pod",
                &pod_name(index),
                "--wait=false",
                "--grace-period=1",
            ],
        ] {
            let out = self.cp.kubectl(&args, None);
            assert!(
                out.status.success(),
                "kubectl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        when(
            &format!("{}: Pod {} made again", self.ns, pod_name(index)),
            CHANGE,
            || async {
                self.pod(index)
                    .await
                    .is_some_and(|p| p.metadata.uid != old_uid)
            },
        )
        .await;
        self.wait_healthy(&format!("instance {index} re-cloned"), BRING_UP)
            .await;
        let now = self
            .event_reasons()
            .await
            .iter()
            .filter(|r| *r == "Cloned")
            .count();
        assert!(now > cloned, "a Cloned event for instance {index}");
    }
}

/// Drill 3: a primary whose mysqld is killed, one that is frozen and one cut off the network
/// are failed over under writes; the time from the fault to the new primary recorded, to the
/// primary Service naming it and to its first acknowledged write is printed. Each old primary
/// comes back as a replica (re-cloned if it came back errant). No acknowledged write is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_a_frozen_and_a_cut_off_primary_are_failed_over_without_losing_acknowledged_writes()
 {
    let Some(f) = setup("cl_failover", 3).await else {
        return;
    };
    let w = f.healthy_with_writer("bring-up").await;
    let mut measured = Vec::new();
    for fault in [Fault::Kill, Fault::Freeze, Fault::Cut] {
        measured.push(f.fail_over(&w, fault).await);
    }
    w.wait_acked(w.acked() + 20, CHANGE).await;
    f.finish(w).await;
    println!("{}: failovers measured:", f.ns);
    for m in &measured {
        println!(
            "  {:<20} ({} time(s)) recorded {:>6}  Service {:>6}  first write {:>6}  came back errant: {}",
            m.fault.name(),
            m.faults,
            secs(m.recorded),
            secs(m.routed),
            secs(m.first_ack),
            m.returned_errant
        );
    }
}

/// Drill 4: a transaction written straight on a replica (made writable by mistake, binlogged)
/// makes it errant: reported in the status and the metrics, unlabelled, out of the replica
/// Service's EndpointSlice, never the primary; with its claim and Pod deleted it comes back
/// empty and is cloned from the primary through the agents. Then `spec.replicas` 3 → 5 → 3
/// (kubectl apply) under writes. No acknowledged write is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_errant_replica_is_excluded_and_recloned_and_the_cluster_scales_3_5_3_under_writes() {
    use moco_core::dialect::Dialect;
    use mysql_async::prelude::Queryable;

    let Some(f) = setup("cl_errant_scale", 3).await else {
        return;
    };
    let w = f.healthy_with_writer("bring-up").await;
    let primary = f.primary_index().await.unwrap();
    let errant = (0..3).find(|i| *i != primary).unwrap();
    let addr = f.addr(errant).await.unwrap();

    // The mistake: the replica made writable (MariaDB: through the admin's role) and a row
    // written on it with the binlog on.
    let admin = f.password("ADMIN_PASSWORD").await;
    let mut c = moco_tests::local::connect(
        &writer::opts_at(addr, "moco-admin", &admin),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let open = vec!["SET GLOBAL read_only = 0".to_owned()];
    for statement in moco_adapters::mysql::sql::privileged(Dialect::Mariadb, open) {
        c.query_drop(statement).await.unwrap();
    }
    drop(c);
    let writable = f.password("WRITABLE_PASSWORD").await;
    let mut c = moco_tests::local::connect(
        &writer::opts_at(addr, "moco-writable", &writable),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let log_bin: Option<u8> = c.query_first("SELECT @@sql_log_bin").await.unwrap();
    assert_eq!(log_bin, Some(1), "the errant write is binlogged");
    c.query_drop("INSERT INTO moco_test.t (id) VALUES (1000000000)")
        .await
        .unwrap();
    drop(c);
    let t0 = Instant::now();
    when(
        &format!("{}: instance {errant} reported errant", f.ns),
        CHANGE,
        || async { f.errant().await == vec![errant] },
    )
    .await;
    let pod = pod_name(errant);
    f.replicas
        .wait(&format!("{pod} out"), CHANGE, |e| {
            e.len() == 1 && e.iter().all(|e| e.pod.as_deref() != Some(pod.as_str()))
        })
        .await;
    println!(
        "{}: errant instance {errant} reported and out of the replica Service after {}",
        f.ns,
        secs(t0.elapsed())
    );
    let status = f.try_cluster().await.unwrap().status.unwrap();
    assert_eq!(status.errant_replicas, 1);
    assert_eq!(f.state().await, "Degraded");
    assert_eq!(
        f.host
            .sample(
                "moco_cluster_errant_replicas",
                &[("name", NAME), ("namespace", &f.ns)]
            )
            .await,
        Some(1.0)
    );
    f.check_routes(primary).await;
    // Writes go on while it is out.
    w.wait_acked(w.acked() + 50, CHANGE).await;
    assert_eq!(f.primary_index().await, Some(primary));

    // Its claim and Pod deleted: an empty instance, cloned through the agents.
    let t1 = Instant::now();
    f.reclone(errant).await;
    println!(
        "{}: instance {errant} re-cloned and the cluster Healthy after {}",
        f.ns,
        secs(t1.elapsed())
    );
    assert!(f.errant().await.is_empty());
    f.check_routes(primary).await;
    let on_recloned = stored_ids(f.addr(errant).await.unwrap(), &admin)
        .await
        .unwrap();
    assert!(
        !on_recloned.contains(&1_000_000_000),
        "the errant row is gone with the old data"
    );

    // 3 -> 5 -> 3 under writes.
    for (to, limit) in [(5u32, BRING_UP), (3, CHANGE)] {
        let before = w.acked();
        let t = Instant::now();
        f.cp.apply(&f.ns, &manifest(&f.ns, to));
        let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> =
            Api::namespaced(f.cp.client.clone(), &f.ns);
        when(&format!("{}: {to} instances", f.ns), limit, || async {
            let ready = f
                .try_cluster()
                .await
                .and_then(|c| c.status)
                .map(|s| s.synced_replicas);
            let sts_size = sts
                .get(&format!("moco-{NAME}"))
                .await
                .ok()
                .and_then(|s| s.spec)
                .and_then(|s| s.replicas);
            f.healthy().await && ready == Some(to as i32) && sts_size == Some(to as i32)
        })
        .await;
        f.check_routes(primary).await;
        let acked = w.acked() - before;
        println!(
            "{}: scaled to {to}: Healthy after {}, {acked} writes acknowledged meanwhile",
            f.ns,
            secs(t.elapsed())
        );
        assert!(acked > 0, "no write acknowledged while scaling to {to}");
        w.wait_acked(w.acked() + 20, CHANGE).await;
    }
    let log = f.finish(w).await;
    let pause = log.longest_pause();
    println!(
        "{}: longest pause between acknowledgements: {}",
        f.ns,
        secs(pause)
    );
}
