//! A namespace of the real control plane with an operator of its own watching it
//! ([`OperatorHost`]), for the MySQLCluster `db` a test makes there: the fixture of the tests
//! that run the operator on the shared control plane (`kube_operator`, `kube_seeds`,
//! `kube_clustering`), with what they all ask of it: the cluster and its objects, the
//! operator's rounds (counted on its `/metrics`), a round caused at will, and waits for a
//! round of the current spec.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use moco_api::mysqlcluster::MySQLCluster;
use serde_json::{Value, json};

use crate::control_plane::{ControlPlane, control_plane, is_ready, wait_for};
use crate::operator_host::{OperatorHost, Options, issue_agent_certificate};

/// The cluster of every test.
pub const NAME: &str = "db";
/// Its StatefulSet and headless Service.
pub const STS: &str = "moco-db";
/// Limit of each wait: MariaDB's first start on 2 busy cores is the slowest step.
pub const LIMIT: Duration = Duration::from_secs(240);

/// A MariaDB cluster `db` of `replicas` in `ns` with one claim template `mysql-data` of
/// `storage`, as JSON (which `kubectl apply` takes as YAML). `serverIDBase` is set because the
/// webhook that would pick one is not installed.
pub fn mariadb_cluster(ns: &str, replicas: u32, storage: &str) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"namespace": ns, "name": NAME,
                     "annotations": {"moco-rs/flavor": "mariadb"}},
        "spec": {
            "replicas": replicas,
            "serverIDBase": 100,
            // The agents do not hold a replica's readiness on lag (`--max-delay 0`): a new
            // cluster has no writes yet, and a replica that has queued nothing is otherwise
            // held unready for its first minute (`--transaction-queueing-wait`), which no
            // drill measures. The rule itself is unit-tested in moco-agent.
            "maxDelaySeconds": 0,
            "podTemplate": {"spec": {"containers": [{
                "name": "mysqld", "image": "mariadb:10.11",
                // Probed every second or two rather than every ten (Kubernetes' default):
                // no drill measures the period, and each Pod start would otherwise wait up
                // to twenty seconds on it. The startup probe allows as long as the default
                // (startupWaitSeconds, 3600 s).
                "startupProbe": {"periodSeconds": 1, "failureThreshold": 3600},
                "readinessProbe": {"periodSeconds": 2}
            }]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "mysql-data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": storage}}}
            }]
        }
    })
}

/// `cluster` (from [`mariadb_cluster`]) with MOCO's timings instead of the drills' (Kubernetes'
/// probe periods, the agents' lag limit): for benchmarks, whose numbers a user's cluster should
/// see.
pub fn with_moco_timings(cluster: &mut Value) {
    if let Some(spec) = cluster["spec"].as_object_mut() {
        spec.remove("maxDelaySeconds");
    }
    if let Some(mysqld) = cluster["spec"]["podTemplate"]["spec"]["containers"][0].as_object_mut() {
        mysqld.remove("startupProbe");
        mysqld.remove("readinessProbe");
    }
}

/// A test's namespace and its operator; the operator is stopped and the namespaces deleted
/// when dropped.
pub struct OperatedNamespace {
    /// The shared control plane.
    pub cp: ControlPlane,
    /// The cluster's namespace, which the operator watches.
    pub ns: String,
    /// The operator's own namespace (`POD_NAMESPACE`): `ns` unless started apart.
    pub system: String,
    /// The operator.
    pub host: OperatorHost,
}

impl std::fmt::Debug for OperatedNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatedNamespace")
            .field("ns", &self.ns)
            .field("system", &self.system)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Drop for OperatedNamespace {
    fn drop(&mut self) {
        // The operator first, so that nothing re-creates what the namespaces' deletion takes.
        self.host.stop();
        let mut namespaces = vec![&self.ns];
        if self.system != self.ns {
            namespaces.push(&self.system);
        }
        for ns in namespaces {
            let _ = self
                .cp
                .kubectl(&["delete", "namespace", ns, "--wait=false"], None);
        }
    }
}

impl OperatedNamespace {
    /// A namespace named after `test` and an operator watching it, which is also its own,
    /// naming the Pods as cluster DNS would (for clusters whose Pods run); `None` when the
    /// control plane's tests are skipped.
    pub async fn start(test: &str) -> Option<OperatedNamespace> {
        Self::start_with(test, |o| o).await
    }

    /// As [`OperatedNamespace::start`], with the operator's [`Options`] changed by `options`.
    pub async fn start_with(
        test: &str,
        options: impl FnOnce(Options) -> Options,
    ) -> Option<OperatedNamespace> {
        let cp = control_plane(test).await?;
        let ns = cp.namespace(&test.replace('_', "-")).await;
        let host = OperatorHost::start_with(&cp, options(Options::watching(&ns))).await;
        Some(OperatedNamespace {
            cp,
            system: ns.clone(),
            ns,
            host,
        })
    }

    /// A namespace named after `test` and an operator watching it whose own namespace is
    /// another, named after `system`, as MOCO is deployed; with `args` besides and without
    /// the DNS stand-in (for tests whose Pods never run mysqld).
    pub async fn start_apart(test: &str, system: &str, args: &[&str]) -> Option<Self> {
        let cp = control_plane(test).await?;
        let ns = cp.namespace(&test.replace('_', "-")).await;
        let system = cp.namespace(system).await;
        let options = Options::watching(&ns)
            .system(&system)
            .without_dns()
            .args(args);
        let host = OperatorHost::start_with(&cp, options).await;
        Some(OperatedNamespace {
            cp,
            ns,
            system,
            host,
        })
    }

    /// Stops the operator and starts it again as before but with `args` (an upgrade, a
    /// restart).
    pub async fn restart_operator(&mut self, args: &[&str]) {
        self.host.stop();
        let options = self.host.options().clone().args(args);
        self.host = OperatorHost::start_with(&self.cp, options).await;
    }

    /// Kills the operator (SIGKILL) and starts it again as before.
    pub async fn kill_and_restart_operator(&mut self) {
        self.kill_operator().await;
        self.start_operator_again().await;
    }

    /// Kills the operator (SIGKILL); returns once it is gone, so that nothing it does
    /// afterwards can be confused with what it did before. Its leader Lease (`moco`, the
    /// default `--leader-election-id`) is deleted once it is dead, as no holder can renew it
    /// any more: the next operator leads at once instead of after the Lease's 15 s, which the
    /// drills that kill it do not measure (moco-operator's tests do).
    pub async fn kill_operator(&mut self) {
        self.host.kill();
        self.host.stop();
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.cp.client.clone(), &self.system);
        match leases.delete("moco", &Default::default()).await {
            Ok(_) => {}
            Err(e) if moco_kube::api::is_not_found(&e) => {}
            Err(e) => panic!("{}: deleting the dead operator's Lease: {e}", self.system),
        }
    }

    /// Starts the operator again as before (after [`OperatedNamespace::kill_operator`]).
    pub async fn start_operator_again(&mut self) {
        let options = self.host.options().clone();
        self.host = OperatorHost::start_with(&self.cp, options).await;
    }

    /// Writes the agents' certificate cert-manager would issue for the cluster.
    pub async fn issue_agent_certificate(&self) {
        issue_agent_certificate(&self.cp, &self.system, &self.ns, NAME).await;
    }

    /// The namespace's MySQLClusters.
    pub fn clusters(&self) -> Api<MySQLCluster> {
        Api::namespaced(self.cp.client.clone(), &self.ns)
    }

    /// The namespace's Pods.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.cp.client.clone(), &self.ns)
    }

    /// The cluster; panics when it cannot be read.
    pub async fn cluster(&self) -> MySQLCluster {
        self.clusters().get(NAME).await.unwrap()
    }

    /// The cluster, or `None` when it is not there or cannot be read (for polls).
    pub async fn try_cluster(&self) -> Option<MySQLCluster> {
        self.clusters().get_opt(NAME).await.ok().flatten()
    }

    /// The cluster's StatefulSet.
    pub async fn statefulset(&self) -> Option<StatefulSet> {
        self.get(STS).await
    }

    /// The Pod of instance `index`.
    pub async fn pod(&self, index: u32) -> Option<Pod> {
        self.cp.pod(&self.ns, &format!("moco-{NAME}-{index}")).await
    }

    /// A password of the cluster's Secret `moco-db` (key `ADMIN_PASSWORD`, …).
    pub async fn password(&self, key: &str) -> String {
        let secret: Secret = self
            .get(&format!("moco-{NAME}"))
            .await
            .unwrap_or_else(|| panic!("no Secret {}/moco-{NAME}", self.ns));
        let bytes = secret
            .data
            .and_then(|d| d.get(key).cloned())
            .unwrap_or_else(|| panic!("Secret {}/moco-{NAME} has no {key}", self.ns));
        String::from_utf8(bytes.0).unwrap()
    }

    /// Object `name` of the namespace.
    pub async fn get<K>(&self, name: &str) -> Option<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        self.get_in(&self.ns, name).await
    }

    /// Object `name` of namespace `ns` (the operator's own, say).
    pub async fn get_in<K>(&self, ns: &str, name: &str) -> Option<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::namespaced(self.cp.client.clone(), ns)
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("getting {ns}/{name}: {e}"))
    }

    /// Waits for `name` to exist and `check` to hold of it; returns it.
    pub async fn wait_object<K>(&self, what: &str, name: &str, check: impl Fn(&K) -> bool) -> K
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let mut last = None;
        let start = Instant::now();
        loop {
            let o: Option<K> = self.get(name).await;
            if let Some(o) = &o
                && check(o)
            {
                println!(
                    "{}: {what}: after {:.1} s",
                    self.ns,
                    start.elapsed().as_secs_f64()
                );
                return o.clone();
            }
            last = o.or(last);
            assert!(
                start.elapsed() < LIMIT,
                "{}: {what}: not within {LIMIT:?}; last seen: {last:#?}\nthe operator's last failures:\n{}",
                self.ns,
                self.failures()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits for `name` to be gone.
    pub async fn wait_gone<K>(&self, what: &str, name: &str)
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        wait_for(&format!("{}: {what} gone", self.ns), LIMIT, || async {
            self.get::<K>(name).await.is_none().then_some(())
        })
        .await;
    }

    /// The namespace's ConfigMaps whose name starts with `prefix`, by name.
    pub async fn config_maps(&self, prefix: &str) -> Vec<ConfigMap> {
        let api: Api<ConfigMap> = Api::namespaced(self.cp.client.clone(), &self.ns);
        let mut list: Vec<ConfigMap> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .collect();
        list.sort_by_key(|c| c.metadata.name.clone());
        list
    }

    /// Merge-patches the cluster; returns its generation then.
    pub async fn patch_cluster(&self, patch: Value) -> i64 {
        let c = self
            .clusters()
            .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patching MySQLCluster {}/{NAME}: {e}", self.ns));
        c.metadata.generation.unwrap()
    }

    /// The last reconcile failures the operator logged, for failure messages.
    pub fn failures(&self) -> String {
        let log = self.host.log();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("reconcile failed"))
            .collect();
        let from = lines.len().saturating_sub(3);
        lines[from..].join("\n")
    }

    /// The operator's last `n` log lines, for failure messages.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.host.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Waits for a successful round of the current spec (its generation recorded and
    /// `ReconcileSuccess` True for it); returns the cluster then.
    pub async fn wait_reconciled(&self, what: &str) -> MySQLCluster {
        let start = Instant::now();
        loop {
            let c = self.cluster().await;
            let generation = c.metadata.generation;
            let done = c.status.as_ref().is_some_and(|s| {
                Some(s.reconcile_info.generation) == generation
                    && s.conditions.iter().any(|c| {
                        c.type_ == "ReconcileSuccess"
                            && c.status == "True"
                            && c.reason == "ReconcileSuccess"
                            && c.observed_generation == generation
                    })
            });
            if done {
                println!("{}: {what}: reconciled", self.ns);
                return c;
            }
            assert!(
                start.elapsed() < LIMIT,
                "{}: {what}: the cluster's spec was not reconciled successfully within \
                 {LIMIT:?}; conditions {:?}; the operator's last failures:\n{}",
                self.ns,
                c.status.map(|s| s.conditions),
                self.failures()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until `n` Pods of the namespace are Ready; returns them by name.
    pub async fn ready_pods(&self, n: usize) -> BTreeMap<String, Pod> {
        wait_for(&format!("{}: {n} Ready Pods", self.ns), LIMIT, || async {
            let pods = self.pods().list(&ListParams::default()).await.ok()?;
            let ready: BTreeMap<String, Pod> = pods
                .items
                .into_iter()
                .filter(is_ready)
                .filter_map(|p| Some((p.metadata.name.clone()?, p)))
                .collect();
            (ready.len() == n).then_some(ready)
        })
        .await
    }

    /// Rounds the operator finished successfully so far.
    pub async fn rounds(&self) -> f64 {
        self.host
            .sample(
                "moco_controller_reconcile_total",
                &[("result", "success"), ("category", "none")],
            )
            .await
            .unwrap_or(0.0)
    }

    /// One more successful round, caused by a change of an object the cluster owns that
    /// does not change what the operator renders (an annotation of the headless Service).
    pub async fn poke(&self, n: u32) {
        let before = self.rounds().await;
        let services: Api<Service> = Api::namespaced(self.cp.client.clone(), &self.ns);
        let patch = json!({"metadata": {"annotations": {"test.moco-rs/poke": n.to_string()}}});
        services
            .patch(STS, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        wait_for(&format!("{}: round {n}", self.ns), LIMIT, || async {
            (self.rounds().await > before).then_some(())
        })
        .await;
    }

    /// The operator's counter `name` of the cluster (0 while it has never counted).
    pub async fn counter(&self, name: &str) -> f64 {
        self.host
            .sample(name, &[("name", NAME), ("namespace", &self.ns)])
            .await
            .unwrap_or(0.0)
    }
}
