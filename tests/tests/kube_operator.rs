//! The operator (`moco controller`, run on this machine by an [`OperatedNamespace`]'s
//! `OperatorHost`) against the real control plane (`scripts/kube.sh up`, `MOCO_KUBE_DIR`): what the fake API server could not
//! show, because it has no validation, no defaulting, no immutable fields, no quota and no
//! controllers. Each test has a namespace of its own and an operator watching only it
//! (`--watch-namespace`); MariaDB clusters, whose Pods the Pod runner runs.
//!
//! * claim-template edits of every kind (labels, annotations, `storageClassName`,
//!   `accessModes`) re-create the StatefulSet with its Pods orphaned and adopted, unrestarted,
//!   and the steps after it run (issue 31, defect 2);
//! * the four volume metrics by name and labels, on success and on the server's refusals: a
//!   PVC growth and a re-creation beyond a ResourceQuota (defect 3);
//! * an unchanged cluster's StatefulSet is never written again, across many rounds and an
//!   operator restart, and one spec edit writes it once (defect 4);
//! * an operator upgraded to a newer reconciler version writes no StatefulSet and restarts no
//!   Pod until the cluster's spec is edited, then renders it with its own version (defect 1);
//! * Pods the StatefulSet controller cannot create (a Pod quota) give one `PodsMissing` event
//!   per change of the missing set, not one per round (defect 6).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use moco_tests::control_plane::{is_ready, restarts, wait_for};
use moco_tests::operated_namespace::{LIMIT, NAME, OperatedNamespace, STS, mariadb_cluster};
use serde_json::{Value, json};

/// A MariaDB cluster `db` of `replicas` with one claim template `mysql-data` of `storage`.
fn cluster(ns: &str, replicas: u32, storage: &str) -> String {
    mariadb_cluster(ns, replicas, storage).to_string()
}

/// What only these tests ask of their [`OperatedNamespace`].
struct Fixture(OperatedNamespace);

impl std::ops::Deref for Fixture {
    type Target = OperatedNamespace;

    fn deref(&self) -> &OperatedNamespace {
        &self.0
    }
}

impl std::ops::DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut OperatedNamespace {
        &mut self.0
    }
}

async fn setup(test: &str) -> Option<Fixture> {
    OperatedNamespace::start(test).await.map(Fixture)
}

impl Fixture {
    fn statefulsets(&self) -> Api<StatefulSet> {
        Api::namespaced(self.cp.client.clone(), &self.ns)
    }

    /// Creates the cluster and the agents' certificate cert-manager would issue.
    async fn create(&self, replicas: u32, storage: &str) {
        self.cp
            .apply(&self.ns, &cluster(&self.ns, replicas, storage));
        self.issue_agent_certificate().await;
    }

    /// Waits for the `PodsMissing` event naming exactly instance `missing`, then for 10
    /// clustering rounds; returns the events then (objects, times recorded, messages) and
    /// checks that those rounds recorded no event and did not write the cluster (MOCO's round
    /// does nothing). Events for sets the cluster passed through before (for example 1 and 2
    /// before the StatefulSet controller made Pod 2) are legitimate: one per change.
    async fn missing_window(&self, missing: u32) -> ((usize, i32, Vec<String>), String) {
        let naming = format!("instance(s) {missing} ");
        wait_for(
            &format!("{}: a PodsMissing event for instance {missing}", self.ns),
            LIMIT,
            || async {
                let (_, _, notes) = pods_missing_events(self).await;
                notes.iter().any(|n| n.contains(&naming)).then_some(())
            },
        )
        .await;
        let settled = pods_missing_events(self).await;
        let before = self.cluster().await.metadata.resource_version;
        let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let watch = tokio::spawn({
            let (api, writes) = (self.clusters(), Arc::clone(&writes));
            let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
            async move {
                let mut events = std::pin::pin!(watcher::watcher(api, config));
                while let Some(event) = events.next().await {
                    if let Ok(watcher::Event::Apply(_)) = event {
                        writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        });
        let start = self.checks().await;
        wait_for(
            &format!("{}: 10 rounds with instance {missing} missing", self.ns),
            LIMIT,
            || async { (self.checks().await >= start + 10.0).then_some(()) },
        )
        .await;
        let events = pods_missing_events(self).await;
        let after = self.cluster().await.metadata.resource_version;
        watch.abort();
        let summary = format!(
            "{} rounds: {} event object(s) recorded {} time(s); the MySQLCluster written {} \
             time(s) (resourceVersion {} -> {})",
            self.checks().await - start,
            events.0,
            events.1,
            writes.load(std::sync::atomic::Ordering::Relaxed),
            before.clone().unwrap_or_default(),
            after.clone().unwrap_or_default()
        );
        assert_eq!(
            after, before,
            "the cluster was written while Pods were missing: {summary}"
        );
        assert_eq!(
            (events.0, events.1),
            (settled.0, settled.1),
            "events recorded while the missing set stayed {missing}: {:?}",
            events.2
        );
        (events, summary)
    }

    /// Clustering rounds of this cluster so far.
    async fn checks(&self) -> f64 {
        self.counter("moco_cluster_checks_total").await
    }
}

/// The uid of the controller owning `pod`.
fn controller_uid(pod: &Pod) -> Option<String> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// Each container's start time and restart count.
fn container_starts(pod: &Pod) -> Vec<(String, String, i32)> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let started = c
                .state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.as_ref())
                .map(|t| t.0.to_string())
                .unwrap_or_default();
            (c.name.clone(), started, c.restart_count)
        })
        .collect()
}

fn uid(sts: &StatefulSet) -> String {
    sts.metadata.uid.clone().unwrap_or_default()
}

/// The deployed claim template `mysql-data`, as JSON.
fn deployed_template(sts: &StatefulSet) -> Value {
    let templates = sts
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_ref())
        .cloned()
        .unwrap_or_default();
    serde_json::to_value(&templates[0]).unwrap()
}

/// Edits the claim template with `edit` (over its current form) and waits for the
/// StatefulSet to be re-created with `check` true of its template, the Pods kept, adopted
/// and unrestarted, and the round to finish (status written for the new generation).
async fn re_created_for(
    f: &Fixture,
    what: &str,
    edit: impl Fn(&mut Value),
    check: impl Fn(&Value) -> bool,
) -> StatefulSet {
    let old = f.statefulset().await.unwrap();
    let pods_before = f.ready_pods(1).await;
    let recreated_before = f.counter("moco_cluster_statefulset_recreate_total").await;
    let cluster = f.cluster().await;
    let mut templates = serde_json::to_value(&cluster.spec.volume_claim_templates).unwrap();
    edit(&mut templates[0]);
    f.patch_cluster(json!({"spec": {"volumeClaimTemplates": templates}}))
        .await;
    let new = {
        let start = std::time::Instant::now();
        loop {
            if let Some(s) = f.statefulset().await
                && uid(&s) != uid(&old)
                && check(&deployed_template(&s))
            {
                break s;
            }
            assert!(
                start.elapsed() < LIMIT,
                "{}: {what}: the StatefulSet was not re-created with the new claim template \
                 within {LIMIT:?}; the operator's last failures:\n{}",
                f.ns,
                f.failures()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    println!(
        "{}: {what}: StatefulSet re-created ({} -> {})",
        f.ns,
        uid(&old),
        uid(&new)
    );
    // The steps after the StatefulSet ran: the status records the new generation.
    f.wait_reconciled(what).await;
    // The same Pods, now the new StatefulSet's, never restarted.
    let pods_after = wait_for(
        &format!("{}: {what}: Pods adopted", f.ns),
        LIMIT,
        || async {
            let pods = f.ready_pods(pods_before.len()).await;
            pods.values()
                .all(|p| controller_uid(p).as_deref() == Some(uid(&new).as_str()))
                .then_some(pods)
        },
    )
    .await;
    for (name, before) in &pods_before {
        let after = &pods_after[name];
        assert_eq!(
            after.metadata.uid, before.metadata.uid,
            "{what}: Pod {name} was re-created"
        );
        assert_eq!(
            container_starts(after),
            container_starts(before),
            "{what}: Pod {name}'s containers restarted"
        );
    }
    assert_eq!(
        f.counter("moco_cluster_statefulset_recreate_total").await,
        recreated_before + 1.0,
        "{what}: one re-creation counted"
    );
    new
}

/// Regression (issue 31, defect 2): only the template's name and size were compared, so any
/// other edit went to an in-place apply that the API server refuses (`spec: Forbidden:
/// updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template',
/// 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are
/// forbidden`), every round, so nothing after the StatefulSet step ran again.
#[tokio::test]
async fn every_kind_of_claim_template_edit_re_creates_the_statefulset_keeping_its_pods() {
    let Some(f) = setup("op_claim_templates").await else {
        return;
    };
    f.create(1, "1Gi").await;
    f.ready_pods(1).await;
    f.wait_reconciled("created").await;

    re_created_for(
        &f,
        "a label",
        |t| t["metadata"]["labels"] = json!({"tier": "gold"}),
        |t| t["metadata"]["labels"]["tier"] == "gold",
    )
    .await;
    re_created_for(
        &f,
        "an annotation",
        |t| t["metadata"]["annotations"] = json!({"example.com/backup": "daily"}),
        |t| t["metadata"]["annotations"]["example.com/backup"] == "daily",
    )
    .await;
    re_created_for(
        &f,
        "storageClassName",
        |t| t["spec"]["storageClassName"] = json!("standard"),
        |t| t["spec"]["storageClassName"] == "standard",
    )
    .await;
    re_created_for(
        &f,
        "accessModes",
        |t| t["spec"]["accessModes"] = json!(["ReadWriteOnce", "ReadOnlyMany"]),
        |t| t["spec"]["accessModes"] == json!(["ReadWriteOnce", "ReadOnlyMany"]),
    )
    .await;
    // A label removed is a difference too.
    re_created_for(
        &f,
        "a label removed",
        |t| {
            t["metadata"].as_object_mut().unwrap().remove("labels");
        },
        |t| t["metadata"].get("labels").is_none(),
    )
    .await;
    assert_eq!(
        f.counter("moco_cluster_statefulset_recreate_errors_total")
            .await,
        0.0
    );
}

/// Regression (issue 31, defect 3): the four metrics of the PVC seed, read by name and
/// labels from `/metrics`. A failed re-creation was never counted: once the StatefulSet was
/// deleted, the refused re-apply was a StatefulSet-step error, and the rounds after it (no
/// StatefulSet, so no volume step) did not count either.
#[tokio::test]
async fn the_volume_metrics_count_growth_and_re_creation_and_the_servers_refusals() {
    let Some(f) = setup("op_volume_metrics").await else {
        return;
    };
    f.create(1, "1Gi").await;
    f.ready_pods(1).await;
    f.wait_reconciled("created").await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let quotas: Api<ResourceQuota> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let storage = |c: &PersistentVolumeClaim| {
        c.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_default()
    };

    // Success: the claim grows, then the StatefulSet is re-created with the new size.
    re_created_for(
        &f,
        "growth to 2Gi",
        |t| t["spec"]["resources"]["requests"]["storage"] = json!("2Gi"),
        |t| t["spec"]["resources"]["requests"]["storage"] == "2Gi",
    )
    .await;
    let claim = claims.get("mysql-data-moco-db-0").await.unwrap();
    assert_eq!(storage(&claim), "2Gi");
    assert_eq!(f.counter("moco_cluster_volume_resized_total").await, 1.0);
    assert_eq!(
        f.counter("moco_cluster_statefulset_recreate_total").await,
        1.0
    );
    assert_eq!(
        f.counter("moco_cluster_volume_resized_errors_total").await,
        0.0
    );
    assert_eq!(
        f.counter("moco_cluster_statefulset_recreate_errors_total")
            .await,
        0.0
    );

    // A growth the server refuses (the namespace's storage quota): counted each round.
    let quota = |name: &str, hard: Value| -> ResourceQuota {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"hard": hard}})).unwrap()
    };
    let quota_ready = |name: &'static str| {
        let quotas = quotas.clone();
        async move {
            wait_for(&format!("quota {name} computed"), LIMIT, || async {
                let q = quotas.get(name).await.ok()?;
                q.status.and_then(|s| s.used).map(|_| ())
            })
            .await;
        }
    };
    quotas
        .create(
            &PostParams::default(),
            &quota("storage", json!({"requests.storage": "2500Mi"})),
        )
        .await
        .unwrap();
    quota_ready("storage").await;
    let mut cluster = f.cluster().await;
    cluster.spec.volume_claim_templates[0].spec.resources =
        Some(serde_json::from_value(json!({"requests": {"storage": "3Gi"}})).unwrap());
    let templates = serde_json::to_value(&cluster.spec.volume_claim_templates).unwrap();
    f.patch_cluster(json!({"spec": {"volumeClaimTemplates": templates}}))
        .await;
    wait_for("two refused growths counted", LIMIT, || async {
        (f.counter("moco_cluster_volume_resized_errors_total").await >= 2.0).then_some(())
    })
    .await;
    assert!(
        f.failures().contains("exceeded quota"),
        "the server's words: {}",
        f.failures()
    );
    let claim = claims.get("mysql-data-moco-db-0").await.unwrap();
    assert_eq!(storage(&claim), "2Gi", "the claim did not grow");
    assert_eq!(f.counter("moco_cluster_volume_resized_total").await, 1.0);
    // Back to 2Gi: nothing to grow, and the quota goes.
    let mut cluster = f.cluster().await;
    cluster.spec.volume_claim_templates[0].spec.resources =
        Some(serde_json::from_value(json!({"requests": {"storage": "2Gi"}})).unwrap());
    let templates = serde_json::to_value(&cluster.spec.volume_claim_templates).unwrap();
    f.patch_cluster(json!({"spec": {"volumeClaimTemplates": templates}}))
        .await;
    quotas
        .delete("storage", &DeleteParams::default())
        .await
        .unwrap();
    f.wait_reconciled("back to 2Gi").await;

    // A re-creation the server refuses (no StatefulSet may be created in the namespace):
    // counted in the round that deleted the StatefulSet and in every round after it until
    // the re-creation succeeds.
    quotas
        .create(
            &PostParams::default(),
            &quota("statefulsets", json!({"count/statefulsets.apps": "0"})),
        )
        .await
        .unwrap();
    quota_ready("statefulsets").await;
    let pod_uid = f.ready_pods(1).await["moco-db-0"].metadata.uid.clone();
    let mut cluster = f.cluster().await;
    cluster.spec.volume_claim_templates[0].metadata.labels =
        BTreeMap::from([("tier".to_owned(), "silver".to_owned())]);
    let templates = serde_json::to_value(&cluster.spec.volume_claim_templates).unwrap();
    f.patch_cluster(json!({"spec": {"volumeClaimTemplates": templates}}))
        .await;
    wait_for("the StatefulSet deleted for re-creation", LIMIT, || async {
        f.statefulset().await.is_none().then_some(())
    })
    .await;
    let mut counted = 0.0;
    for round in 1..=3 {
        counted = wait_for(
            &format!("re-creation errors counted in {round} round(s)"),
            LIMIT,
            || async {
                let n = f
                    .counter("moco_cluster_statefulset_recreate_errors_total")
                    .await;
                (n >= f64::from(round)).then_some(n)
            },
        )
        .await;
        assert!(
            f.statefulset().await.is_none(),
            "the server refused the StatefulSet"
        );
    }
    assert!(counted >= 3.0);
    assert!(
        f.failures().contains("volumes:") && f.failures().contains("exceeded quota"),
        "the re-creation fails in the volume step, in the server's words: {}",
        f.failures()
    );
    let volume_failures = f
        .host
        .sample(
            "moco_controller_reconcile_total",
            &[("result", "volumes"), ("category", "api")],
        )
        .await
        .unwrap_or(0.0);
    assert!(
        volume_failures >= 3.0,
        "{volume_failures} volume-step failures"
    );
    // The Pod stays, orphaned, while the StatefulSet cannot be made.
    let pod = f.pods().get("moco-db-0").await.unwrap();
    assert_eq!(pod.metadata.uid, pod_uid);
    assert_eq!(controller_uid(&pod), None);

    // Allowed again: re-created, and the Pod adopted.
    quotas
        .delete("statefulsets", &DeleteParams::default())
        .await
        .unwrap();
    let sts = wait_for("the StatefulSet re-created", LIMIT, || async {
        f.statefulset().await
    })
    .await;
    wait_for("the Pod adopted", LIMIT, || async {
        let pod = f.pods().get("moco-db-0").await.ok()?;
        (controller_uid(&pod).as_deref() == Some(uid(&sts).as_str()) && pod.metadata.uid == pod_uid)
            .then_some(())
    })
    .await;
    f.wait_reconciled("re-created").await;
    assert_eq!(
        f.counter("moco_cluster_statefulset_recreate_total").await,
        2.0
    );
    let errors = f
        .counter("moco_cluster_statefulset_recreate_errors_total")
        .await;
    assert!(errors >= counted);
    println!(
        "{}: volume_resized_total 1, volume_resized_errors_total {}, statefulset_recreate_total 2, statefulset_recreate_errors_total {errors}",
        f.ns,
        f.counter("moco_cluster_volume_resized_errors_total").await
    );
}

/// One observed version of the StatefulSet: what the operator's writes change.
#[derive(Clone, Debug, PartialEq)]
struct Version {
    resource_version: String,
    generation: i64,
    /// The `moco-controller` apply entry of `managedFields` (its time and fields).
    applied: Option<Value>,
}

impl Version {
    fn of(sts: &StatefulSet) -> Version {
        Version {
            resource_version: sts.metadata.resource_version.clone().unwrap_or_default(),
            generation: sts.metadata.generation.unwrap_or(0),
            applied: sts
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .find(|m| {
                    m.manager.as_deref() == Some("moco-controller")
                        && m.operation.as_deref() == Some("Apply")
                })
                .map(|m| json!({"time": m.time, "fields": m.fields_v1})),
        }
    }
}

/// Every version of the StatefulSet the API server's watch reports.
struct Versions {
    seen: Arc<Mutex<Vec<Version>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Versions {
    fn watch(api: Api<StatefulSet>) -> Versions {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let config = watcher::Config::default().fields(&format!("metadata.name={STS}"));
            let mut events = std::pin::pin!(watcher::watcher(api, config));
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::Apply(sts) | watcher::Event::InitApply(sts)) = event {
                    let v = Version::of(&sts);
                    let mut seen = out.lock().unwrap();
                    if seen.last() != Some(&v) {
                        seen.push(v);
                    }
                }
            }
        });
        Versions { seen, task }
    }

    /// How many versions the operator wrote: the first, and each that changed the
    /// generation or the operator's apply entry (status updates change neither).
    fn writes(&self) -> usize {
        let seen = self.seen.lock().unwrap();
        let mut writes = usize::from(!seen.is_empty());
        for pair in seen.windows(2) {
            if pair[0].generation != pair[1].generation || pair[0].applied != pair[1].applied {
                writes += 1;
            }
        }
        writes
    }
}

impl Versions {
    /// Checks that `sts` is the version `rv` of `generation`, written once (its creation):
    /// its resourceVersion may only have moved if every version since changed its status
    /// alone (the StatefulSet controller's writes when a Pod's readiness changed under load).
    fn unchanged_since(
        &self,
        sts: &StatefulSet,
        rv: Option<&str>,
        generation: Option<i64>,
        when: &str,
    ) {
        assert_eq!(
            sts.metadata.generation, generation,
            "generation changed {when}"
        );
        assert_eq!(
            self.writes(),
            1,
            "the operator wrote the StatefulSet {when}"
        );
        if sts.metadata.resource_version.as_deref() != rv {
            let seen = self.seen.lock().unwrap();
            let since = seen
                .iter()
                .skip_while(|v| Some(v.resource_version.as_str()) != rv)
                .count();
            println!(
                "resourceVersion {rv:?} -> {:?} {when}: {} status-only version(s) of the StatefulSet controller",
                sts.metadata.resource_version,
                since.saturating_sub(1)
            );
        }
    }
}

impl Drop for Versions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Regression (issue 31, defect 4): on a real server the StatefulSet carries the fields it
/// defaults (`imagePullPolicy`, `terminationMessagePath`, the probes' periods, …). The
/// slow-log container was copied from the deployed StatefulSet with those defaults, so the
/// rendering changed once more after every apply: the StatefulSet was written twice on
/// creation and twice per spec edit.
#[tokio::test]
async fn an_unchanged_cluster_s_statefulset_is_never_written_again_and_an_edit_writes_it_once() {
    let Some(mut f) = setup("op_no_rewrites").await else {
        return;
    };
    let versions = Versions::watch(f.statefulsets());
    f.create(1, "1Gi").await;
    f.ready_pods(1).await;
    f.wait_reconciled("created").await;
    wait_for("the StatefulSet settled", LIMIT, || async {
        let s = f.statefulset().await?;
        let status = s.status.as_ref()?;
        (status.ready_replicas == Some(1)
            && status.observed_generation == s.metadata.generation
            && status.current_revision == status.update_revision)
            .then_some(())
    })
    .await;
    assert_eq!(versions.writes(), 1, "written once on creation");

    let sts = f.statefulset().await.unwrap();
    let (rv, generation) = (
        sts.metadata.resource_version.clone(),
        sts.metadata.generation,
    );
    let rounds_before = f.rounds().await;
    for n in 1..=20 {
        f.poke(n).await;
    }
    let sts = f.statefulset().await.unwrap();
    versions.unchanged_since(&sts, rv.as_deref(), generation, "in 20 rounds");
    let rounds = f.rounds().await - rounds_before;

    // Another operator process: the same.
    f.restart_operator(&[]).await;
    wait_for("the new operator's first round", LIMIT, || async {
        (f.rounds().await >= 1.0).then_some(())
    })
    .await;
    for n in 21..=30 {
        f.poke(n).await;
    }
    let restarted_rounds = f.rounds().await;
    let sts = f.statefulset().await.unwrap();
    versions.unchanged_since(&sts, rv.as_deref(), generation, "by a restarted operator");
    println!(
        "{}: {} rounds before and {} after a restart without a write (resourceVersion {})",
        f.ns,
        rounds,
        restarted_rounds,
        rv.unwrap_or_default()
    );

    // One spec edit: one write.
    f.patch_cluster(json!({"spec": {"podTemplate": {"metadata": {"annotations": {"example.com/edited": "1"}}}}}))
        .await;
    wait_for("the edit applied and rolled out", LIMIT, || async {
        let s = f.statefulset().await?;
        let status = s.status.as_ref()?;
        (s.metadata.generation == generation.map(|g| g + 1)
            && status.observed_generation == s.metadata.generation
            && status.ready_replicas == Some(1)
            && status.updated_replicas == Some(1)
            && status.current_revision == status.update_revision)
            .then_some(())
    })
    .await;
    f.wait_reconciled("edited").await;
    for n in 31..=35 {
        f.poke(n).await;
    }
    let sts = f.statefulset().await.unwrap();
    assert_eq!(sts.metadata.generation, generation.map(|g| g + 1));
    assert_eq!(versions.writes(), 2, "one write for the edit");
}

/// The `PodsMissing` events of the cluster: how many objects, and how many times they were
/// recorded (`series.count`, 1 without a series).
async fn pods_missing_events(f: &Fixture) -> (usize, i32, Vec<String>) {
    let events: Api<Event> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let list = events.list(&ListParams::default()).await.unwrap();
    let mine: Vec<&Event> = list
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("PodsMissing"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME))
        .collect();
    let recorded = mine
        .iter()
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    let notes = mine.iter().filter_map(|e| e.note.clone()).collect();
    (mine.len(), recorded, notes)
}

/// `status.reconcileInfo` of the cluster: (generation, reconcileVersion).
async fn reconcile_info(f: &Fixture) -> (i64, i32) {
    let info = f
        .cluster()
        .await
        .status
        .map(|s| s.reconcile_info)
        .unwrap_or_default();
    (info.generation, info.reconcile_version)
}

/// Regression (issue 31, defect 1): the operator recorded `reconcileVersion: 1` whatever
/// rendered, and rendered every cluster with the newest code, so a release that renders the
/// Pods differently restarted every mysqld without a spec edit. An operator whose latest
/// version is 3 (the upgrade-test version, `--latest-reconciler-version 3`) taking over a
/// cluster reconciled by version 2 writes no StatefulSet and restarts no Pod; the next spec
/// edit renders it with version 3, once.
#[tokio::test]
async fn an_upgraded_operator_keeps_each_cluster_on_its_reconciler_version_until_a_spec_edit() {
    let Some(mut f) = setup("op_upgrade").await else {
        return;
    };
    let versions = Versions::watch(f.statefulsets());
    f.create(1, "1Gi").await;
    let pods = f.ready_pods(1).await;
    f.wait_reconciled("created").await;
    let generation = f.cluster().await.metadata.generation.unwrap();
    assert_eq!(reconcile_info(&f).await, (generation, 2));
    let sts = f.statefulset().await.unwrap();
    let (rv, sts_generation) = (
        sts.metadata.resource_version.clone(),
        sts.metadata.generation,
    );
    let uid = |pods: &BTreeMap<String, Pod>| {
        pods.values()
            .map(|p| p.metadata.uid.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    };

    f.restart_operator(&["--latest-reconciler-version", "3"])
        .await;
    wait_for("the upgraded operator's first round", LIMIT, || async {
        (f.rounds().await >= 1.0).then_some(())
    })
    .await;
    for n in 1..=10 {
        f.poke(n).await;
    }
    let sts = f.statefulset().await.unwrap();
    versions.unchanged_since(
        &sts,
        rv.as_deref(),
        sts_generation,
        "by the upgraded operator",
    );
    assert_eq!(
        reconcile_info(&f).await,
        (generation, 2),
        "the cluster stays on version 2"
    );
    let same = f.ready_pods(1).await;
    assert_eq!(uid(&same), uid(&pods), "no Pod was replaced");
    assert!(
        same.values().all(|p| restarts(p, "mysqld") == 0),
        "no mysqld restarted"
    );

    f.patch_cluster(json!({"spec": {"podTemplate": {"metadata": {"annotations": {"example.com/edited": "1"}}}}}))
        .await;
    wait_for("the edit rendered with version 3", LIMIT, || async {
        let (g, v) = reconcile_info(&f).await;
        (g == generation + 1 && v == 3).then_some(())
    })
    .await;
    let sts = f.statefulset().await.unwrap();
    let annotations = sts
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    assert_eq!(
        annotations
            .get("moco-rs/reconciler-version")
            .map(String::as_str),
        Some("3"),
        "{annotations:?}"
    );
    wait_for("the Pod rolled to version 3", LIMIT, || async {
        let pods = f.pods().list(&ListParams::default()).await.ok()?;
        let p = pods.items.first()?;
        let a = p.metadata.annotations.as_ref()?;
        (a.get("moco-rs/reconciler-version").map(String::as_str) == Some("3") && is_ready(p))
            .then_some(())
    })
    .await;
    for n in 11..=15 {
        f.poke(n).await;
    }
    assert_eq!(
        versions.writes(),
        2,
        "one write on creation, one for the edit"
    );
}

/// Regression (issue 31, defect 6): MOCO's round does nothing while Pods are missing; this
/// operator recorded a `PodsMissing` warning every round (each a write to the Event's
/// series). Now one per change of the missing set. The Pods are kept from existing by a
/// ResourceQuota the StatefulSet controller runs into (`exceeded quota: pods`).
#[tokio::test]
async fn missing_pods_are_reported_once_per_change_of_the_missing_set() {
    let Some(f) = setup("op_pods_missing").await else {
        return;
    };
    let quotas: Api<ResourceQuota> = Api::namespaced(f.cp.client.clone(), &f.ns);
    let set_quota = |pods: u32| {
        let quotas = quotas.clone();
        async move {
            let q: ResourceQuota = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": "pods"},
                "spec": {"hard": {"pods": pods.to_string()}}
            }))
            .unwrap();
            quotas
                .patch(
                    "pods",
                    &PatchParams::apply("moco-tests").force(),
                    &Patch::Apply(&q),
                )
                .await
                .unwrap();
            wait_for(&format!("quota of {pods} Pods in force"), LIMIT, || async {
                let q = quotas.get("pods").await.ok()?;
                let hard = q.status?.hard?.get("pods")?.0.clone();
                (hard == pods.to_string()).then_some(())
            })
            .await;
        }
    };
    set_quota(2).await;
    f.create(3, "1Gi").await;
    let names = |pods: &[Pod]| -> Vec<String> {
        let mut n: Vec<String> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        n.sort();
        n
    };
    let existing = wait_for("two of the three Pods", LIMIT, || async {
        let pods = f.pods().list(&ListParams::default()).await.ok()?;
        let n = names(&pods.items);
        (n.len() == 2).then_some(n)
    })
    .await;
    let missing = (0..3)
        .find(|i| !existing.contains(&format!("{STS}-{i}")))
        .unwrap();
    let (first, events) = f.missing_window(missing).await;
    println!("{}: instance {missing} missing: {events:?}", f.ns);
    once_per_set(&first, missing);

    // Every Pod exists for a while; then another one goes and cannot come back: one more
    // event, for the new set.
    set_quota(3).await;
    // The StatefulSet controller retries a refused creation with a growing back-off (up to
    // minutes); a change of one of its Pods makes it try again at once.
    let nudges = std::sync::atomic::AtomicU32::new(0);
    wait_for("the third Pod", LIMIT, || async {
        let pods = f.pods().list(&ListParams::default()).await.ok()?;
        if pods.items.len() == 3 {
            return Some(());
        }
        let n = nudges.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n.is_multiple_of(8) {
            let patch = json!({"metadata": {"annotations": {"test.moco-rs/nudge": n.to_string()}}});
            let name = existing[0].clone();
            let _ = f
                .pods()
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
        None
    })
    .await;
    let start = f.checks().await;
    wait_for("3 rounds with every Pod", LIMIT, || async {
        (f.checks().await >= start + 3.0).then_some(())
    })
    .await;
    set_quota(2).await;
    let gone = if missing == 1 { 2 } else { 1 };
    f.pods()
        .delete(&format!("{STS}-{gone}"), &DeleteParams::default())
        .await
        .unwrap();
    let (second, events) = f.missing_window(gone).await;
    println!("{}: then instance {gone} missing: {events:?}", f.ns);
    once_per_set(&second, gone);
    assert_eq!(
        second.0,
        first.0 + 1,
        "one more event, naming instance {gone}: {:?}",
        second.2
    );
}

/// Each missing set was reported by one event recorded once, and exactly one names the set
/// `{missing}` alone.
fn once_per_set(events: &(usize, i32, Vec<String>), missing: u32) {
    let (objects, recorded, notes) = events;
    let distinct: std::collections::BTreeSet<&String> = notes.iter().collect();
    assert_eq!(
        (*recorded, distinct.len()),
        (*objects as i32, *objects),
        "one event recorded once per missing set: {notes:?}"
    );
    let naming = format!("instance(s) {missing} ");
    assert_eq!(
        notes.iter().filter(|n| n.contains(&naming)).count(),
        1,
        "one event for instance {missing} alone: {notes:?}"
    );
}
