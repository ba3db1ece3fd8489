//! Clustering on Pods (issue 31): MariaDB clusters created with `kubectl apply` on the real
//! control plane (`scripts/kube.sh up`, `MOCO_KUBE_DIR`), their Pods run by the Pod runner,
//! managed by `moco controller --watch-namespace` run on this machine ([`OperatorHost`]).
//! A writer inserts where the `moco-db-primary` Service's EndpointSlice points (read through
//! the API server, as kube-proxy would: [`ServiceRoute`]) and records the ids acknowledged.
//! Every drill ends with every acknowledged row on the final primary and the replicas holding
//! exactly the primary's rows.
//!
//! * bring-up: Healthy, one primary and two replicas by role label, each Service's
//!   EndpointSlice naming them;
//! * switchover by `kubectl moco switchover` (the plugin through the real kubectl) and by
//!   deleting the primary's Pod (switched over while it terminates, within its grace period);
//! * failover of a primary whose container is killed, that is frozen, and that is cut off the
//!   network, with the time from the fault to the Service naming the new primary and to the
//!   first acknowledged write printed;
//! * an errant replica reported and out of the replica Service; a wiped replica cloned by the
//!   agents; 3 → 5 → 3 under writes.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use moco_api::mysqlcluster::MySQLCluster;
use moco_tests::control_plane::{ControlPlane, control_plane, wait_for};
use moco_tests::operator_host::{OperatorHost, issue_agent_certificate};
use moco_tests::writer::{self, ServiceRoute, Writer, WriterLog, missing, stored_ids};
use serde_json::json;

/// Limit of a bring-up: MariaDB's first start on 2 busy cores is the slowest step.
const BRING_UP: Duration = Duration::from_secs(300);
/// Limit of a switchover or failover and of the cluster becoming Healthy again.
const CHANGE: Duration = Duration::from_secs(180);
/// The cluster of every test.
const NAME: &str = "db";
/// MariaDB serves clients and the operator on 3306.
const PORT: u16 = 3306;

struct Fixture {
    cp: ControlPlane,
    ns: String,
    host: OperatorHost,
    primary: ServiceRoute,
    replicas: ServiceRoute,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // The operator first, so that nothing re-creates what the namespace's deletion takes.
        self.host.stop();
        let _ = self
            .cp
            .kubectl(&["delete", "namespace", &self.ns, "--wait=false"], None);
    }
}

/// A MariaDB cluster `db` of `replicas`. `serverIDBase` is set because the webhook that
/// would pick one is not installed.
fn manifest(ns: &str, replicas: u32) -> String {
    format!(
        r#"
apiVersion: moco.cybozu.com/v1beta2
kind: MySQLCluster
metadata:
  namespace: {ns}
  name: {NAME}
  annotations:
    moco-rs/flavor: mariadb
spec:
  replicas: {replicas}
  serverIDBase: 100
  podTemplate:
    spec:
      containers:
      - name: mysqld
        image: mariadb:10.11
  volumeClaimTemplates:
  - metadata:
      name: mysql-data
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 1Gi
"#
    )
}

/// A namespace, its operator and a cluster of `replicas` applied with kubectl.
async fn setup(test: &str, replicas: u32) -> Option<Fixture> {
    // The Pods' MariaDB image runs this machine's mariadbd: without one they never start.
    moco_tests::local::server_or_skip(test)?;
    let cp = control_plane(test).await?;
    let ns = cp.namespace(&test.replace('_', "-")).await;
    let host = OperatorHost::start(&cp, &ns, &[]).await;
    cp.apply(&ns, &manifest(&ns, replicas));
    issue_agent_certificate(&cp, &ns, &ns, NAME).await;
    let primary = ServiceRoute::follow(&cp.client, &ns, &format!("moco-{NAME}-primary"));
    let replicas = ServiceRoute::follow(&cp.client, &ns, &format!("moco-{NAME}-replica"));
    Some(Fixture {
        cp,
        ns,
        host,
        primary,
        replicas,
    })
}

fn pod_name(index: u32) -> String {
    format!("moco-{NAME}-{index}")
}

impl Fixture {
    fn clusters(&self) -> Api<MySQLCluster> {
        Api::namespaced(self.cp.client.clone(), &self.ns)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.cp.client.clone(), &self.ns)
    }

    async fn cluster(&self) -> Option<MySQLCluster> {
        self.clusters().get_opt(NAME).await.ok().flatten()
    }

    /// The status of condition `type_` (`True`/`False`) and its reason (the state).
    async fn condition(&self, type_: &str) -> Option<(String, String)> {
        let c = self.cluster().await?;
        c.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason))
    }

    async fn healthy(&self) -> bool {
        self.condition("Healthy")
            .await
            .is_some_and(|(s, _)| s == "True")
    }

    async fn state(&self) -> String {
        self.condition("Healthy")
            .await
            .map(|(_, r)| r)
            .unwrap_or_default()
    }

    async fn primary_index(&self) -> Option<u32> {
        let c = self.cluster().await?;
        u32::try_from(c.status?.current_primary_index).ok()
    }

    async fn errant(&self) -> Vec<u32> {
        self.cluster()
            .await
            .and_then(|c| c.status)
            .map(|s| {
                s.errant_replica_list
                    .into_iter()
                    .filter_map(|i| u32::try_from(i).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The size the spec asks for.
    async fn size(&self) -> u32 {
        self.cluster()
            .await
            .and_then(|c| u32::try_from(c.spec.replicas).ok())
            .unwrap_or(0)
    }

    /// Waits for `Healthy: True`; panics with the state and the operator's last lines.
    async fn wait_healthy(&self, what: &str, limit: Duration) {
        let started = Instant::now();
        loop {
            if self.healthy().await {
                println!(
                    "{}: {what}: Healthy after {:.1} s",
                    self.ns,
                    started.elapsed().as_secs_f64()
                );
                return;
            }
            assert!(
                started.elapsed() < limit,
                "{}: {what}: not Healthy within {limit:?} (state {:?}, errant {:?})\n{}",
                self.ns,
                self.state().await,
                self.errant().await,
                self.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn log_tail(&self, n: usize) -> String {
        let log = self.host.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// A password of the cluster's Secret `moco-db` (key `ADMIN_PASSWORD`, …).
    async fn password(&self, key: &str) -> String {
        let secrets: Api<Secret> = Api::namespaced(self.cp.client.clone(), &self.ns);
        let secret = secrets
            .get(&format!("moco-{NAME}"))
            .await
            .unwrap_or_else(|e| panic!("Secret {}/moco-{NAME}: {e}", self.ns));
        let bytes = secret
            .data
            .and_then(|d| d.get(key).cloned())
            .unwrap_or_else(|| panic!("Secret {}/moco-{NAME} has no {key}", self.ns));
        String::from_utf8(bytes.0).unwrap()
    }

    async fn pod(&self, index: u32) -> Option<Pod> {
        self.cp.pod(&self.ns, &pod_name(index)).await
    }

    /// The address of instance `index` (its Pod's IP, port 3306).
    async fn addr(&self, index: u32) -> Option<SocketAddr> {
        let ip = self.pod(index).await?.status?.pod_ip?;
        Some(SocketAddr::new(ip.parse().ok()?, PORT))
    }

    /// The role label of each Pod of the cluster, by index.
    async fn roles(&self) -> Vec<(u32, Option<String>)> {
        let pods = self
            .pods()
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={NAME}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let mut out: Vec<(u32, Option<String>)> = pods
            .iter()
            .filter_map(|p| {
                let name = p.metadata.name.as_deref()?;
                let index = name.rsplit('-').next()?.parse().ok()?;
                let role = p
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("moco.cybozu.com/role").cloned());
                Some((index, role))
            })
            .collect();
        out.sort();
        out
    }

    /// The reasons of the events about the cluster, oldest first.
    async fn event_reasons(&self) -> Vec<String> {
        let events: Api<Event> = Api::namespaced(self.cp.client.clone(), &self.ns);
        let mut items = events
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        items.retain(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("MySQLCluster")
        });
        items.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        items.into_iter().filter_map(|e| e.reason).collect()
    }

    async fn counter(&self, name: &str) -> f64 {
        self.host
            .sample(name, &[("name", NAME), ("namespace", &self.ns)])
            .await
            .unwrap_or(0.0)
    }

    async fn annotate_pod(&self, index: u32, key: &str, value: Option<&str>) {
        let patch = json!({"metadata": {"annotations": {key: value}}});
        self.pods()
            .patch(
                &pod_name(index),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap_or_else(|e| panic!("annotating Pod {}/{}: {e}", self.ns, pod_name(index)));
    }

    /// Waits for Healthy, checks the roles and Services, creates the table and starts a
    /// writer that has 20 writes acknowledged.
    async fn healthy_with_writer(&self, what: &str) -> Writer {
        self.wait_healthy(what, BRING_UP).await;
        let primary = self.primary_index().await.unwrap();
        self.check_routes(primary).await;
        let addr = self.primary.single().unwrap().addr;
        let writable = self.password("WRITABLE_PASSWORD").await;
        writer::create_table(addr, &writable)
            .await
            .unwrap_or_else(|e| panic!("creating the table at {addr}: {e}"));
        let w = Writer::start(&self.primary, "moco-writable", &writable);
        w.wait_acked(20, CHANGE).await;
        w
    }

    /// One Pod labelled primary (`primary`), the others replicas (but the errant ones,
    /// unlabelled), the primary Service naming the primary alone and the replica Service
    /// the replicas.
    async fn check_routes(&self, primary: u32) {
        let size = self.size().await;
        let errant = self.errant().await;
        let want_roles: Vec<(u32, Option<String>)> = (0..size)
            .map(|i| {
                let role = if i == primary {
                    Some("primary".to_owned())
                } else if errant.contains(&i) {
                    None
                } else {
                    Some("replica".to_owned())
                };
                (i, role)
            })
            .collect();
        let roles = wait_for(
            &format!("{}: role labels for primary {primary}", self.ns),
            CHANGE,
            || async {
                let roles = self.roles().await;
                (roles == want_roles).then_some(roles)
            },
        )
        .await;
        println!("{}: roles {roles:?}", self.ns);
        let primary_pod = pod_name(primary);
        self.primary
            .wait(&format!("naming {primary_pod} alone"), CHANGE, |e| {
                e.len() == 1 && e[0].pod.as_deref() == Some(primary_pod.as_str())
            })
            .await;
        let mut want: Vec<String> = (0..size)
            .filter(|i| *i != primary && !errant.contains(i))
            .map(pod_name)
            .collect();
        want.sort();
        self.replicas
            .wait(&format!("naming {want:?}"), CHANGE, |e| {
                let mut pods: Vec<String> = e.iter().filter_map(|e| e.pod.clone()).collect();
                pods.sort();
                pods == want
            })
            .await;
    }

    /// Stops `w` and checks that every acknowledged id is on the primary the Service names
    /// (the recorded primary), that the replicas converge to exactly the primary's rows, and
    /// that the primary Service never named two endpoints at once.
    async fn finish(&self, w: Writer) -> WriterLog {
        let log = w.finish().await;
        let primary = self.primary_index().await.unwrap();
        let primary_pod = pod_name(primary);
        let routed = self
            .primary
            .wait(&format!("naming {primary_pod} alone"), CHANGE, |e| {
                e.len() == 1 && e[0].pod.as_deref() == Some(primary_pod.as_str())
            })
            .await;
        let admin = self.password("ADMIN_PASSWORD").await;
        let acked = log.ids();
        let on_primary = stored_ids(routed[0].addr, &admin)
            .await
            .unwrap_or_else(|e| panic!("reading the primary {primary_pod}: {e}"));
        let lost = missing(&acked, &on_primary);
        assert!(
            lost.is_empty(),
            "{}: {} acknowledged rows lost on the primary {primary_pod}: {lost:?}",
            self.ns,
            lost.len()
        );
        let errant = self.errant().await;
        let size = self.size().await;
        for i in (0..size).filter(|i| *i != primary && !errant.contains(i)) {
            let addr = self.addr(i).await.unwrap();
            let started = Instant::now();
            loop {
                let ids = stored_ids(addr, &admin).await;
                if ids.as_ref().is_ok_and(|ids| *ids == on_primary) {
                    break;
                }
                assert!(
                    started.elapsed() < CHANGE,
                    "{}: replica {i} did not converge to the primary's {} rows: {}",
                    self.ns,
                    on_primary.len(),
                    match ids {
                        Ok(ids) => format!(
                            "{} rows, {} of the primary's missing",
                            ids.len(),
                            missing(&on_primary, &ids).len()
                        ),
                        Err(e) => e,
                    }
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        assert_eq!(
            self.primary.most_at_once(),
            1,
            "the primary Service named several endpoints at once: {:?}",
            self.primary.history()
        );
        println!(
            "{}: {} writes acknowledged ({} failed attempts), {} rows on primary {primary_pod}, \
             replicas converged (errant: {errant:?}); longest pause between acknowledgements \
             {:.1} s; by endpoint {:?}",
            self.ns,
            acked.len(),
            log.failures,
            on_primary.len(),
            log.longest_pause().as_secs_f64(),
            writer::acks_by_endpoint(&log)
        );
        log
    }
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
