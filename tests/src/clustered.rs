//! A namespace of the real control plane with its operator ([`OperatedNamespace`]) and a
//! MariaDB cluster applied with kubectl, seen through its two Services as kube-proxy would
//! route them ([`ServiceRoute`]): the fixture of the drills that write through the primary
//! Service and check that no acknowledged write is lost (`kube_clustering`, `kube_rollout`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::control_plane::wait_for;
use crate::operated_namespace::{NAME, OperatedNamespace, mariadb_cluster};
use crate::operator_host::Options;
use crate::writer::{self, ServiceRoute, Writer, WriterLog, missing, stored_ids};

/// Limit of a bring-up: MariaDB's first start on 2 busy cores is the slowest step.
pub const BRING_UP: Duration = Duration::from_secs(300);
/// Limit of a switchover or failover and of the cluster becoming Healthy again.
pub const CHANGE: Duration = Duration::from_secs(180);
/// MariaDB serves clients and the operator on 3306.
pub const PORT: u16 = 3306;

/// An [`OperatedNamespace`] with the routes of the cluster's two Services.
#[allow(missing_debug_implementations)]
pub struct ClusteredNamespace {
    /// The namespace and its operator.
    pub on: OperatedNamespace,
    /// The route of the `-primary` Service.
    pub primary: ServiceRoute,
    /// The route of the `-replica` Service.
    pub replicas: ServiceRoute,
}

impl std::ops::Deref for ClusteredNamespace {
    type Target = OperatedNamespace;

    fn deref(&self) -> &OperatedNamespace {
        &self.on
    }
}

/// A MariaDB cluster `db` of `replicas`.
pub fn manifest(ns: &str, replicas: u32) -> String {
    mariadb_cluster(ns, replicas, "1Gi").to_string()
}

/// A namespace, its operator and a cluster of `replicas` applied with kubectl, with the
/// agents' certificate; None when the test is skipped (no `mariadbd`).
pub async fn setup(test: &str, replicas: u32) -> Option<ClusteredNamespace> {
    setup_with(test, replicas, |o| o).await
}

/// As [`setup`], with the operator's [`Options`] changed by `options`.
pub async fn setup_with(
    test: &str,
    replicas: u32,
    options: impl FnOnce(Options) -> Options,
) -> Option<ClusteredNamespace> {
    apply_cluster(test, options, |ns| mariadb_cluster(ns, replicas, "1Gi")).await
}

/// As [`setup_with`], with MOCO's timings throughout (the operator's preStop sleep, the
/// probe periods, the agents' lag limit): for benchmarks.
pub async fn setup_as_moco(
    test: &str,
    replicas: u32,
    options: impl FnOnce(Options) -> Options,
) -> Option<ClusteredNamespace> {
    apply_cluster(
        test,
        |o| options(o.moco_pre_stop()),
        |ns| {
            let mut cluster = mariadb_cluster(ns, replicas, "1Gi");
            crate::operated_namespace::with_moco_timings(&mut cluster);
            cluster
        },
    )
    .await
}

/// A namespace, its operator (`options`) and the cluster `cluster` makes for the namespace,
/// applied with kubectl, with the agents' certificate.
async fn apply_cluster(
    test: &str,
    options: impl FnOnce(Options) -> Options,
    cluster: impl FnOnce(&str) -> serde_json::Value,
) -> Option<ClusteredNamespace> {
    // The Pods' MariaDB image runs this machine's mariadbd: without one they never start.
    crate::local::server_or_skip(test)?;
    let on = OperatedNamespace::start_with(test, options).await?;
    on.cp.apply(&on.ns, &cluster(&on.ns).to_string());
    on.issue_agent_certificate().await;
    Some(ClusteredNamespace::routed(on))
}

pub fn pod_name(index: u32) -> String {
    format!("moco-{NAME}-{index}")
}

impl ClusteredNamespace {
    /// `on` with the routes of its cluster's two Services.
    fn routed(on: OperatedNamespace) -> ClusteredNamespace {
        let primary = ServiceRoute::follow(&on.cp.client, &on.ns, &format!("moco-{NAME}-primary"));
        let replicas = ServiceRoute::follow(&on.cp.client, &on.ns, &format!("moco-{NAME}-replica"));
        ClusteredNamespace {
            on,
            primary,
            replicas,
        }
    }

    /// The status of condition `type_` (`True`/`False`) and its reason (the state).
    pub async fn condition(&self, type_: &str) -> Option<(String, String)> {
        let c = self.try_cluster().await?;
        c.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason))
    }

    /// `Healthy: True`, and every Pod the spec asks for there and Ready (while a Pod is
    /// missing the operator writes no status, so the condition alone may be stale).
    pub async fn healthy(&self) -> bool {
        let size = self.size().await;
        let mut ready = 0;
        for i in 0..size {
            if self.pod(i).await.is_some_and(|p| {
                crate::control_plane::is_ready(&p) && p.metadata.deletion_timestamp.is_none()
            }) {
                ready += 1;
            }
        }
        ready == size
            && self
                .condition("Healthy")
                .await
                .is_some_and(|(s, _)| s == "True")
    }

    pub async fn state(&self) -> String {
        self.condition("Healthy")
            .await
            .map(|(_, r)| r)
            .unwrap_or_default()
    }

    /// The cluster's `moco-rs/switchover-to` annotation (`kubectl moco switchover --to`).
    pub async fn switchover_request(&self) -> Option<String> {
        let c = self.try_cluster().await?;
        moco_api::annotations::annotation(
            &c.metadata,
            moco_api::annotations::SWITCHOVER_TO_ANNOTATION,
        )
        .map(str::to_owned)
    }

    pub async fn primary_index(&self) -> Option<u32> {
        let c = self.try_cluster().await?;
        u32::try_from(c.status?.current_primary_index).ok()
    }

    pub async fn errant(&self) -> Vec<u32> {
        self.try_cluster()
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
    pub async fn size(&self) -> u32 {
        self.try_cluster()
            .await
            .and_then(|c| u32::try_from(c.spec.replicas).ok())
            .unwrap_or(0)
    }

    /// Waits for `Healthy: True`; panics with the state and the operator's last lines.
    pub async fn wait_healthy(&self, what: &str, limit: Duration) {
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

    /// The address of instance `index` (its Pod's IP, port 3306).
    pub async fn addr(&self, index: u32) -> Option<SocketAddr> {
        let ip = self.pod(index).await?.status?.pod_ip?;
        Some(SocketAddr::new(ip.parse().ok()?, PORT))
    }

    /// The role label of each Pod of the cluster, by index.
    pub async fn roles(&self) -> Vec<(u32, Option<String>)> {
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

    /// The notes of the events of `reason` about objects of `kind` in the namespace, oldest
    /// first.
    pub async fn event_notes(&self, kind: &str, reason: &str) -> Vec<String> {
        let mut items = Api::<Event>::namespaced(self.cp.client.clone(), &self.ns)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        items.retain(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some(kind)
        });
        items.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        items.into_iter().filter_map(|e| e.note).collect()
    }

    /// The reasons of the events about the cluster, oldest first.
    pub async fn event_reasons(&self) -> Vec<String> {
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

    pub async fn annotate_pod(&self, index: u32, key: &str, value: Option<&str>) {
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
    pub async fn healthy_with_writer(&self, what: &str) -> Writer {
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
    pub async fn check_routes(&self, primary: u32) {
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
    pub async fn finish(&self, w: Writer) -> WriterLog {
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

/// The moment `pred` first holds, polled every 100 ms; panics naming `what` after `limit`.
pub async fn when<F, Fut>(what: &str, limit: Duration, mut pred: F) -> Instant
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if pred().await {
            return Instant::now();
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
