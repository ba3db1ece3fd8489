//! `operator_bench N…`: one operator process managing N clusters of 3 simulated instances
//! each, through the same controller, reconcile, Kubernetes platform and managers as `moco
//! controller`. The API server is the in-memory fake, served over HTTP on loopback by a child
//! process (this binary with `--apiserver N`), so that the operator process's memory and CPU
//! are its own: its resident memory includes the simulated servers (a few KiB per cluster)
//! and nothing of the API server. For each N it prints the time until every cluster is
//! Healthy, then, over a steady window, the operator's resident memory and CPU, and the API
//! server's resident memory for reference.
//!
//! `operator_bench --kube DIR [N]` (default 100): the same operator against the real control
//! plane `scripts/kube.sh up --dir DIR` started (see [`real`]), with the API requests it makes
//! read from kube-apiserver's own metrics.
//!
//! Usage: `cargo run --release -p moco-tests --bin operator_bench -- 10 100 1000`
//! (`BENCH_STEADY_SECS`, default 60: the steady window; `BENCH_CHECK_INTERVAL_SECS`, default
//! 60: `--check-interval`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use moco_api::addresses::AddressResolver;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::manager::ManagerConfig;
use moco_cluster::ports::{Credentials, MysqlPort};
use moco_core::facts::Flavor;
use moco_kube::api::Scope;
use moco_kube::metrics::ClusterMetrics;
use moco_kube::platform::SqlConnector;
use moco_kube::pods::PodCache;
use moco_operator::clustering::Managers;
use moco_operator::clustering::pods::watch_pods;
use moco_operator::controller::{Shared, run_controller};
use moco_operator::reconcile::{Context, existing, wall_clock};
use moco_operator::render::RenderSettings;
use moco_sim::{INSTANCE_PORT, SimCluster, SimConfig, instance_host};
use moco_testkit::apiserver::FakeApiServer;
use serde_json::{Value, json};

const NS: &str = "bench";

/// The simulated servers' own addresses (what their replication sources must name).
#[derive(Debug)]
struct SimAddresses;

impl AddressResolver for SimAddresses {
    fn manager(&self, _: &ClusterId, index: u32, _: &Pod, _: Flavor) -> Option<(String, u16)> {
        Some((instance_host(index), INSTANCE_PORT))
    }

    fn peers(&self, _: &ClusterId, index: u32) -> (String, u16) {
        (instance_host(index), INSTANCE_PORT)
    }
}

/// Simulated servers in place of TCP connections.
#[derive(Debug)]
struct SimConnector {
    sims: BTreeMap<String, SimCluster>,
}

impl SqlConnector for SimConnector {
    fn connect(
        &self,
        id: &ClusterId,
        index: u32,
        _: &str,
        _: u16,
        _: &Credentials,
        _: Option<&moco_adapters::mysql::tls::MysqlTls>,
    ) -> Arc<dyn MysqlPort> {
        match self.sims.get(&id.name) {
            Some(sim) => Arc::new(sim.instance(index)),
            None => panic!("no simulated cluster {}", id.name),
        }
    }
}

/// User plus system CPU seconds of process `pid`, from `/proc/PID/stat`.
fn cpu_seconds(pid: u32, ticks_per_second: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the state.
    (ticks(11) + ticks(12)) / ticks_per_second
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Cluster `c<i>` as admitted (serverIDBase set, the finalizer on), its Pods scheduled by
/// `scheduler` when given.
fn cluster_object(i: u32, scheduler: Option<&str>) -> Value {
    let mut pod_spec = json!({"containers": [{"name": "mysqld", "image": "mysql:8.4"}]});
    if let Some(s) = scheduler {
        pod_spec["schedulerName"] = json!(s);
    }
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": format!("c{i}"), "namespace": NS,
                     "finalizers": ["moco.cybozu.com/mysqlcluster"]},
        "spec": {
            "replicas": 3, "serverIDBase": 1000,
            "podTemplate": {"spec": pod_spec},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        }
    })
}

fn insert_cluster(fake: &FakeApiServer, i: u32) {
    let name = format!("c{i}");
    fake.insert(cluster_object(i, None));
    for index in 0..3 {
        fake.insert(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("moco-{name}-{index}"), "namespace": NS,
                "labels": {"app.kubernetes.io/name": "mysql",
                           "app.kubernetes.io/instance": name,
                           "app.kubernetes.io/created-by": "moco"}},
            "spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]},
            "status": {"podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}
        }));
    }
}

async fn healthy_count(client: &kube::Client) -> usize {
    let api: kube::Api<MySQLCluster> = kube::Api::namespaced(client.clone(), NS);
    let Ok(list) = api.list(&kube::api::ListParams::default()).await else {
        return 0;
    };
    list.items
        .iter()
        .filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Healthy" && c.status == "True")
            })
        })
        .count()
}

/// Polls until all `n` clusters are Healthy, at most 900 s; returns how long it took.
async fn wait_healthy(client: &kube::Client, n: u32, started: Instant) -> Duration {
    let deadline = started + Duration::from_secs(900);
    let total = usize::try_from(n).unwrap_or(usize::MAX);
    loop {
        let healthy = healthy_count(client).await;
        if healthy >= total {
            return started.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "only {healthy} of {n} clusters Healthy after 900 s"
        );
        if std::env::var_os("BENCH_DEBUG").is_some() {
            let api: kube::Api<MySQLCluster> = kube::Api::namespaced(client.clone(), NS);
            if let Ok(c) = api.get("c0").await {
                eprintln!(
                    "{healthy}/{n} healthy; c0 status: {:?}",
                    c.status.map(|s| s.conditions)
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The child: serves a fake API server holding `n` clusters on a loopback port, printed on
/// standard output, until its standard input closes.
async fn serve_apiserver(n: u32) {
    let fake = FakeApiServer::new();
    for i in 0..n {
        insert_cluster(&fake, i);
    }
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", 0)).await {
        Ok(l) => l,
        Err(e) => panic!("bind: {e}"),
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    println!("listening {port}");
    let server = axum::serve(listener, fake.router());
    tokio::select! {
        _ = server => {}
        () = stdin_closed() => {}
    }
}

/// Completes when standard input closes (the parent's way of stopping a child).
async fn stdin_closed() {
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut sink);
    })
    .await;
}

fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// What `moco controller` runs while it leads, over `n` simulated clusters `c0…`: the
/// controller (8 reconciles at once, clusters deleted without their finalizer included), one
/// manager per cluster at `BENCH_CHECK_INTERVAL_SECS`, and with `pod_watches` the Pod watch
/// `moco_operator::operator::lead` adds (its store serves the rounds' Pods, which are listed
/// each round without it).
struct BenchOperator {
    managers: Arc<Managers>,
    stop: tokio::sync::watch::Sender<bool>,
    controller: tokio::task::JoinHandle<()>,
    watches: Vec<tokio::task::JoinHandle<()>>,
    stop_ticks: tokio::sync::watch::Sender<bool>,
    ticker: tokio::task::JoinHandle<()>,
}

impl BenchOperator {
    fn start(client: &kube::Client, n: u32, pod_watches: bool) -> BenchOperator {
        let check_interval = env_secs("BENCH_CHECK_INTERVAL_SECS", 60);
        let mut sims = BTreeMap::new();
        for i in 0..n {
            sims.insert(
                format!("c{i}"),
                SimCluster::new(SimConfig::new(3, Flavor::Mysql)),
            );
        }
        let ticking: Vec<SimCluster> = sims.values().cloned().collect();
        let (stop_ticks, mut ticks_stopped) = tokio::sync::watch::channel(false);
        let ticker = tokio::spawn(async move {
            loop {
                for s in &ticking {
                    s.tick();
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = ticks_stopped.changed() => return,
                }
            }
        });
        let mut managers = Managers::new(
            client.clone(),
            Arc::new(SimAddresses),
            Arc::new(SimConnector { sims }),
            None,
            ManagerConfig {
                check_interval,
                ..ManagerConfig::default()
            },
            ClusterMetrics::default(),
        );
        let mut pod_store = None;
        if pod_watches {
            let (cache, writer) = PodCache::new(&Scope::All);
            managers = managers.with_pod_cache(cache);
            pod_store = Some(writer);
        }
        let managers = Arc::new(managers);
        let (existing, existing_stores) = existing::stores();
        let shared = Arc::new(Shared {
            ctx: Context {
                client: client.clone(),
                settings: RenderSettings::new("moco-system"),
                history_limit: 10,
                pvc_sync_label_keys: vec![],
                pvc_sync_annotation_keys: vec![],
                metrics: ClusterMetrics::default(),
                now: Arc::new(wall_clock),
                existing,
            },
            clustering: managers.clone(),
        });
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let controller = tokio::spawn(run_controller(shared, existing_stores, 8, async move {
            let _ = stopped.wait_for(|v| *v).await;
        }));
        let mut watches = Vec::new();
        if let Some(writer) = pod_store {
            let (c, m) = (client.clone(), managers.clone());
            watches.push(tokio::spawn(async move {
                watch_pods(c, &Scope::All, m, writer).await;
            }));
        }
        BenchOperator {
            managers,
            stop,
            controller,
            watches,
            stop_ticks,
            ticker,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.controller.await;
        for w in self.watches {
            w.abort();
        }
        self.managers.stop_all();
        let _ = self.stop_ticks.send(true);
        let _ = self.ticker.await;
    }
}

async fn run(n: u32, ticks: f64) {
    let steady = env_secs("BENCH_STEADY_SECS", 60);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => panic!("current_exe: {e}"),
    };
    let mut child = match tokio::process::Command::new(exe)
        .args(["--apiserver", &n.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("spawn the API server: {e}"),
    };
    let child_pid = child.id().unwrap_or(0);
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
        child.stdout.take().unwrap_or_else(|| panic!("no stdout")),
    ));
    let port: u16 = match lines.next_line().await {
        Ok(Some(l)) => l.trim_start_matches("listening ").parse().unwrap_or(0),
        other => panic!("the API server did not start: {other:?}"),
    };
    let url = format!("http://127.0.0.1:{port}")
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let client = kube::Client::try_from(kube::Config::new(url)).unwrap_or_else(|e| panic!("{e}"));

    let operator = BenchOperator::start(&client, n, false);
    let to_healthy = wait_healthy(&client, n, Instant::now()).await;

    let me = std::process::id();
    let cpu0 = cpu_seconds(me, ticks);
    tokio::time::sleep(steady).await;
    let cpu = cpu_seconds(me, ticks) - cpu0;
    let rss = rss_of(me);
    let apiserver_rss = rss_of(child_pid);
    assert_eq!(
        healthy_count(&client).await,
        usize::try_from(n).unwrap_or(usize::MAX),
        "a cluster left Healthy during the window"
    );
    println!(
        "RESULT {n} {} {rss} {} {apiserver_rss}",
        to_healthy.as_secs_f64(),
        cpu / steady.as_secs_f64()
    );
    operator.stop().await;
    drop(child.stdin.take());
    let _ = child.wait().await;
}

/// The benchmark against the real control plane of `scripts/kube.sh up --dir DIR`.
///
/// Processes: this one (`--kube DIR N`) plays kwok's part for the clusters' Pods and reads
/// the API server's metrics; a child (`--kube-operator DIR N`) is the operator, as in the
/// fake mode, with the admin kubeconfig of DIR, so that its memory and CPU are its own.
///
/// The Pods' template names a scheduler of their own ([`SCHEDULER`]), so that the Pod runner
/// (which binds only default-scheduler Pods and runs only Pods bound to its own Nodes) leaves
/// them alone. This process binds each to a Node of its own ([`NODE`], tainted so that the
/// runner schedules nothing there, its Lease renewed as a kubelet renews it) and writes the
/// status a kubelet would write once the containers run and pass their probes: Running,
/// Ready, a Pod IP. The StatefulSet controller, the Pod runner's PV provisioning and the
/// rest of kube-controller-manager are real.
///
/// Windows: once every cluster is Healthy, a steady window with the operator running, then
/// the operator is stopped and a baseline window of the same length runs with the same
/// objects (kube-controller-manager, the Pod runner and this process's Lease renewals go
/// on). `apiserver_request_total` (which has no client label) over the first minus the
/// second is the operator's. The operator also counts what its own client sends (from
/// kube-client's `HTTP` trace span), which needs no subtraction.
mod real {
    use super::*;

    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};

    use http_body_util::BodyExt;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
    use k8s_openapi::jiff::Timestamp;
    use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
    use kube::config::{KubeConfigOptions, Kubeconfig};
    use moco_tests::control_plane::ControlPlane;

    /// The scheduler name the bench's Pods carry: nothing but this process binds them.
    pub(crate) const SCHEDULER: &str = "moco-bench";
    /// The Node the bench's Pods are bound to; no kubelet runs it.
    pub(crate) const NODE: &str = "moco-bench-node";
    /// The Node's address (never dialled: the operator reaches the simulated servers).
    const NODE_IP: &str = "10.255.255.254";
    /// The kubelet's Lease renewal period and duration.
    const LEASE_RENEW: Duration = Duration::from_secs(10);
    const LEASE_SECONDS: i32 = 40;

    /// A client with DIR's admin kubeconfig.
    pub(crate) async fn admin_client(dir: &Path) -> kube::Client {
        let path = dir.join("kubeconfig");
        let kubeconfig = Kubeconfig::read_from(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        kube::Client::try_from(config).unwrap_or_else(|e| panic!("client: {e}"))
    }

    fn time_now() -> Value {
        serde_json::to_value(Time(Timestamp::now())).unwrap_or(Value::Null)
    }

    fn micro_now() -> Value {
        serde_json::to_value(MicroTime(Timestamp::now())).unwrap_or(Value::Null)
    }

    /// Creates `object` with `api`, or leaves it if it exists.
    async fn create_or_keep<K>(api: &Api<K>, object: Value)
    where
        K: kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let typed: K =
            serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{object}: {e}"));
        match api.create(&PostParams::default(), &typed).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating {object}: {e}"),
        }
    }

    /// Registers [`NODE`] Ready and renews its Lease every [`LEASE_RENEW`], as a kubelet does,
    /// so that the node lifecycle controller never marks it (and its Pods) not ready.
    pub(crate) async fn run_node(client: kube::Client) {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        create_or_keep(
            &nodes,
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE,
                    "kubernetes.io/os": "linux", "type": "moco-bench"}},
                "spec": {"taints": [{"key": "moco-bench", "value": "no-kubelet",
                    "effect": "NoSchedule"}]}}),
        )
        .await;
        let capacity = json!({"cpu": "64", "memory": "256Gi", "pods": "1000"});
        let status = json!({"status": {
            "capacity": capacity, "allocatable": capacity,
            "addresses": [{"type": "InternalIP", "address": NODE_IP},
                          {"type": "Hostname", "address": NODE}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "moco-bench stands in for a kubelet",
                "lastHeartbeatTime": time_now(), "lastTransitionTime": time_now()}]}});
        nodes
            .patch_status(NODE, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap_or_else(|e| panic!("Node {NODE} status: {e}"));
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client, "kube-node-lease");
        create_or_keep(
            &leases,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": NODE, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": NODE, "leaseDurationSeconds": LEASE_SECONDS,
                         "renewTime": micro_now()}}),
        )
        .await;
        loop {
            let renew = json!({"spec": {"renewTime": micro_now()}});
            if let Err(e) = leases
                .patch(NODE, &PatchParams::default(), &Patch::Merge(&renew))
                .await
            {
                eprintln!("renewing Lease {NODE}: {e}");
            }
            tokio::time::sleep(LEASE_RENEW).await;
        }
    }

    /// The scheduler's and the kubelet's part for the Pods of [`NS`]: a watch (LIST, then
    /// WATCH from its resourceVersion, again after each timeout) whose every event goes to
    /// [`Kubelet::handle`].
    pub(crate) async fn run_pods(client: kube::Client) {
        let kubelet = Kubelet {
            api: Api::namespaced(client.clone(), NS),
            next_ip: AtomicU32::new(0),
        };
        loop {
            let list = match kubelet.api.list(&ListParams::default()).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("listing Pods: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            for pod in list.items {
                kubelet.handle(pod).await;
            }
            let mut version = list.metadata.resource_version.unwrap_or_default();
            // WATCH until the server says the version is gone.
            while let Some(next) = kubelet.watch(&client, &version).await {
                version = next;
            }
        }
    }

    /// What the bench's kubelet does.
    struct Kubelet {
        api: Api<Pod>,
        next_ip: AtomicU32,
    }

    impl Kubelet {
        /// One WATCH from `version` until the server ends it: the last version seen, or
        /// `None` when a new LIST is needed. The stream is read by hand (newline-separated
        /// watch events) since this crate has no `Stream` combinators outside its tests.
        async fn watch(&self, client: &kube::Client, version: &str) -> Option<String> {
            let uri = format!(
                "/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={version}&timeoutSeconds=290"
            );
            let request = hyper::Request::get(uri)
                .body(kube::client::Body::empty())
                .unwrap_or_else(|e| panic!("watch request: {e}"));
            let mut body = match client.send(request).await {
                Ok(r) if r.status().is_success() => r.into_body(),
                Ok(r) => {
                    eprintln!("watching Pods: {}", r.status());
                    return None;
                }
                Err(e) => {
                    eprintln!("watching Pods: {e}");
                    return None;
                }
            };
            let mut seen = version.to_owned();
            let mut buffer: Vec<u8> = Vec::new();
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame.map(|f| f.into_data().unwrap_or_default()) else {
                    return Some(seen);
                };
                buffer.extend_from_slice(&data);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                        continue;
                    };
                    if event["type"] == "ERROR" {
                        return None;
                    }
                    let Ok(pod) = serde_json::from_value::<Pod>(event["object"].clone()) else {
                        continue;
                    };
                    if let Some(v) = &pod.metadata.resource_version {
                        seen.clone_from(v);
                    }
                    if event["type"] != "DELETED" {
                        self.handle(pod).await;
                    }
                }
            }
            Some(seen)
        }

        /// Binds an unbound Pod of [`SCHEDULER`] to [`NODE`]; writes a bound Pod's status
        /// once, Running and Ready; confirms a deleted Pod's end at once (grace 0), as a
        /// kubelet does after stopping its containers.
        async fn handle(&self, pod: Pod) {
            let Some(spec) = &pod.spec else { return };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if spec.scheduler_name.as_deref() != Some(SCHEDULER) {
                return;
            }
            if pod.metadata.deletion_timestamp.is_some() {
                if spec.node_name.as_deref() == Some(NODE) {
                    let params = kube::api::DeleteParams::default().grace_period(0);
                    if let Err(e) = self.api.delete(&name, &params).await {
                        eprintln!("deleting Pod {name}: {e}");
                    }
                }
                return;
            }
            match spec.node_name.as_deref() {
                None | Some("") => {
                    let binding = json!({"apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}});
                    match self
                        .api
                        .create_subresource::<Value, Value>(
                            "binding",
                            &name,
                            &PostParams::default(),
                            &binding,
                        )
                        .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 409 => {}
                        Err(e) => eprintln!("binding Pod {name}: {e}"),
                    }
                }
                Some(NODE) if !moco_tests::control_plane::is_ready(&pod) => {
                    let status = self.running_status(spec);
                    if let Err(e) = self
                        .api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                        .await
                    {
                        eprintln!("Pod {name} status: {e}");
                    }
                }
                Some(_) => {}
            }
        }

        /// The status a kubelet writes once every container runs and is ready.
        fn running_status(&self, spec: &k8s_openapi::api::core::v1::PodSpec) -> Value {
            let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
            let ip = format!("10.254.{}.{}", (n / 250) % 250, n % 250 + 1);
            let now = time_now();
            let condition =
                |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
            let running = |c: &k8s_openapi::api::core::v1::Container| {
                json!({"name": c.name, "image": c.image, "imageID": "", "ready": true,
                       "started": true, "restartCount": 0,
                       "state": {"running": {"startedAt": now}}})
            };
            let done = |c: &k8s_openapi::api::core::v1::Container| {
                json!({"name": c.name, "image": c.image, "imageID": "", "ready": true,
                       "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                       "reason": "Completed", "startedAt": now, "finishedAt": now}}})
            };
            let conditions: Vec<Value> = [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ]
            .into_iter()
            .map(condition)
            .collect();
            json!({"status": {
                "phase": "Running", "hostIP": NODE_IP, "hostIPs": [{"ip": NODE_IP}],
                "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
                "conditions": conditions,
                "containerStatuses": spec.containers.iter().map(running).collect::<Vec<_>>(),
                "initContainerStatuses": spec.init_containers.iter().flatten().map(done)
                    .collect::<Vec<_>>()}})
        }
    }

    /// Requests by (verb, resource), as `apiserver_request_total` names them: the verb `GET`,
    /// `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY` (a server-side apply; the client side
    /// cannot tell it from `PATCH`) or `DELETE`; the resource `plural[.group][/subresource]`,
    /// with the response code after it when it is not a success (server side only).
    pub(crate) type Requests = BTreeMap<(String, String), f64>;

    fn resource_key(group: &str, resource: &str, subresource: &str) -> String {
        let mut key = resource.to_owned();
        if !group.is_empty() {
            key = format!("{key}.{group}");
        }
        if !subresource.is_empty() {
            key = format!("{key}/{subresource}");
        }
        key
    }

    /// The verb and resource of a request to `url` with `method`, by the API's URL layout
    /// (`/api/v1/...`, `/apis/GROUP/VERSION/...`, `namespaces/NS/` before namespaced ones);
    /// `None` for other paths.
    pub(crate) fn classify(method: &str, url: &str) -> Option<(String, String)> {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let path_and_query = rest.find('/').map_or("", |i| &rest[i..]);
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (resource, name, sub) = match rest {
            ["namespaces", _ns, resource, more @ ..] => (*resource, more.first(), more.get(1)),
            [resource, more @ ..] => (*resource, more.first(), more.get(1)),
            [] => return None,
        };
        let watch = query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1");
        let verb = match (method, name.is_some()) {
            ("GET", _) if watch => "WATCH",
            ("GET", true) => "GET",
            ("GET", false) => "LIST",
            (other, _) => other,
        };
        Some((
            verb.to_owned(),
            resource_key(group, resource, sub.copied().unwrap_or("")),
        ))
    }

    /// The series of metric `name` in Prometheus text, each as its labels and value.
    fn series<'a>(
        text: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = (BTreeMap<&'a str, &'a str>, f64)> + 'a {
        text.lines().filter_map(move |line| {
            let rest = line.strip_prefix(name)?.strip_prefix('{')?;
            let (labels, value) = rest.rsplit_once("} ")?;
            let labels = labels
                .split("\",")
                .filter_map(|p| {
                    let (k, v) = p.split_once("=\"")?;
                    Some((k, v.trim_end_matches('"')))
                })
                .collect();
            Some((labels, value.trim().parse().ok()?))
        })
    }

    /// A counter by its `verb_label` and resource, summed over the other labels (resource
    /// requests only): `apiserver_request_total` by verb (the code shown when not a
    /// success), `etcd_requests_total` (what kube-apiserver asks of etcd) by operation.
    pub(crate) fn totals(metrics: &str, metric: &str, verb_label: &str) -> Requests {
        let mut out = Requests::new();
        for (labels, value) in series(metrics, metric) {
            let label = |k: &str| labels.get(k).copied().unwrap_or("");
            if label("resource").is_empty() {
                continue;
            }
            let mut key = resource_key(label("group"), label("resource"), label("subresource"));
            if !label("code").is_empty() && !label("code").starts_with('2') {
                key = format!("{key} ({})", label("code"));
            }
            *out.entry((label(verb_label).to_owned(), key)).or_default() += value;
        }
        out
    }

    /// The WATCH requests open (`apiserver_longrunning_requests`), by resource.
    pub(crate) fn open_watches(metrics: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (labels, value) in series(metrics, "apiserver_longrunning_requests") {
            if labels.get("verb") != Some(&"WATCH") {
                continue;
            }
            let label = |k: &str| labels.get(k).copied().unwrap_or("");
            *out.entry(resource_key(label("group"), label("resource"), ""))
                .or_default() += value;
        }
        out
    }

    /// `after - before`, keys of either.
    pub(crate) fn difference(after: &Requests, before: &Requests) -> Requests {
        let mut out = after.clone();
        for (k, v) in before {
            *out.entry(k.clone()).or_default() -= v;
        }
        out
    }

    /// The requests the operator's client sent, counted from kube-client's `HTTP` trace span
    /// (one `requesting` event per request sent, retries included), by [`classify`].
    #[derive(Clone, Default)]
    pub(crate) struct ClientRequests(Arc<Mutex<Requests>>);

    impl ClientRequests {
        pub(crate) fn snapshot(&self) -> Requests {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        }
    }

    /// The tracing writer: counts each `requesting` line, echoes every line with `echo`.
    pub(crate) struct CountingWriter {
        pub counts: ClientRequests,
        pub echo: bool,
    }

    impl std::io::Write for CountingWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let text = String::from_utf8_lossy(buf);
            for line in text.lines().filter(|l| l.ends_with("requesting")) {
                let field = |key: &str| {
                    let start = line.find(key)? + key.len();
                    line[start..].split([' ', '}']).next()
                };
                if let Some(key) = field("http.method=")
                    .zip(field("http.url="))
                    .and_then(|(m, u)| classify(m, u))
                {
                    *self
                        .counts
                        .0
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .entry(key)
                        .or_default() += 1.0;
                }
            }
            if self.echo {
                std::io::Write::write_all(&mut std::io::stderr(), buf)?;
            }
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The child: the operator over `n` simulated clusters against DIR's API server, counting
    /// its requests. It prints `started`, then answers each `counts` line on standard input
    /// with `COUNT VERB RESOURCE N` lines and `END`, and stops when standard input closes.
    pub(crate) async fn operator(dir: &Path, n: u32, counts: ClientRequests) {
        let client = admin_client(dir).await;
        let operator = BenchOperator::start(&client, n, true);
        println!("started");
        // Standard input read on a thread (tokio's is not built here).
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        while let Some(line) = lines.recv().await {
            if line.trim() == "counts" {
                for ((verb, resource), n) in counts.snapshot() {
                    println!("COUNT {verb} {resource} {n}");
                }
                println!("END");
            }
        }
        operator.stop().await;
    }

    /// The operator child process and its protocol.
    struct Child {
        process: tokio::process::Child,
        stdin: Option<tokio::process::ChildStdin>,
        stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
        pid: u32,
    }

    impl Child {
        async fn start(dir: &Path, n: u32) -> Child {
            let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
            let mut process = tokio::process::Command::new(exe)
                .arg("--kube-operator")
                .arg(dir)
                .arg(n.to_string())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("spawn the operator: {e}"));
            let pid = process.id().unwrap_or(0);
            let stdin = process.stdin.take();
            let stdout = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
                process.stdout.take().unwrap_or_else(|| panic!("no stdout")),
            ));
            let mut child = Child {
                process,
                stdin,
                stdout,
                pid,
            };
            let line = tokio::time::timeout(Duration::from_secs(60), child.stdout.next_line())
                .await
                .unwrap_or_else(|_| panic!("the operator did not start within 60 s"));
            assert!(
                matches!(line, Ok(Some(ref l)) if l == "started"),
                "the operator did not start: {line:?}"
            );
            child
        }

        async fn counts(&mut self) -> Requests {
            use tokio::io::AsyncWriteExt;
            let stdin = self
                .stdin
                .as_mut()
                .unwrap_or_else(|| panic!("stdin closed"));
            stdin
                .write_all(b"counts\n")
                .await
                .unwrap_or_else(|e| panic!("asking the operator for counts: {e}"));
            let mut out = Requests::new();
            let read = async {
                while let Ok(Some(line)) = self.stdout.next_line().await {
                    if line == "END" {
                        return true;
                    }
                    let parts: Vec<&str> = line.split_whitespace().collect();
                    if let ["COUNT", verb, resource, n] = parts.as_slice() {
                        out.insert(
                            ((*verb).to_owned(), (*resource).to_owned()),
                            n.parse().unwrap_or(0.0),
                        );
                    }
                }
                false
            };
            let done = tokio::time::timeout(Duration::from_secs(30), read).await;
            assert!(
                matches!(done, Ok(true)),
                "the operator did not answer with its counts"
            );
            out
        }

        /// Closes its standard input and waits (60 s at most, then kills it).
        async fn stop(mut self) {
            drop(self.stdin.take());
            if tokio::time::timeout(Duration::from_secs(60), self.process.wait())
                .await
                .is_err()
            {
                eprintln!("the operator did not stop within 60 s: killing it");
                let _ = self.process.kill().await;
            }
        }
    }

    /// The pid DIR/pids records for `name` (`NAME PID` lines).
    fn pid_of(dir: &Path, name: &str) -> u32 {
        std::fs::read_to_string(dir.join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(n, _)| *n == name)
            .and_then(|(_, p)| p.trim().parse().ok())
            .unwrap_or(0)
    }

    fn load() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    }

    async fn metrics(client: &kube::Client) -> String {
        let request = hyper::Request::get("/metrics")
            .body(Vec::new())
            .unwrap_or_else(|e| panic!("metrics request: {e}"));
        client
            .request_text(request)
            .await
            .unwrap_or_else(|e| panic!("kube-apiserver /metrics: {e}"))
    }

    /// One window: the requests the API server counted (from `/metrics`), those the
    /// operator's client sent (when it runs), the operator's CPU (cores) and the watches
    /// open at its end.
    struct Window {
        server: Requests,
        etcd: Requests,
        client: Requests,
        cpu: f64,
        /// kube-apiserver's, etcd's and kube-controller-manager's CPU (cores).
        control_plane_cpu: [f64; 3],
        watches: BTreeMap<String, f64>,
        load: (String, String),
    }

    async fn window(
        client: &kube::Client,
        operator: Option<&mut Child>,
        length: Duration,
        control_plane: &ControlPlaneCpu,
    ) -> Window {
        let ticks = control_plane.ticks;
        let load0 = load();
        let m0 = metrics(client).await;
        let cp0 = control_plane.seconds();
        let (client_requests, cpu) = match operator {
            Some(op) => {
                let c0 = op.counts().await;
                let cpu0 = cpu_seconds(op.pid, ticks);
                tokio::time::sleep(length).await;
                let cpu = (cpu_seconds(op.pid, ticks) - cpu0) / length.as_secs_f64();
                let c1 = op.counts().await;
                (difference(&c1, &c0), cpu)
            }
            None => {
                tokio::time::sleep(length).await;
                (Requests::new(), 0.0)
            }
        };
        let cp1 = control_plane.seconds();
        let m1 = metrics(client).await;
        Window {
            control_plane_cpu: [0, 1, 2].map(|i| (cp1[i] - cp0[i]) / length.as_secs_f64()),
            server: difference(
                &totals(&m1, "apiserver_request_total", "verb"),
                &totals(&m0, "apiserver_request_total", "verb"),
            ),
            etcd: difference(
                &totals(&m1, "etcd_requests_total", "operation"),
                &totals(&m0, "etcd_requests_total", "operation"),
            ),
            client: client_requests,
            cpu,
            watches: open_watches(&m1),
            load: (load0, load()),
        }
    }

    /// The CPU seconds used so far by kube-apiserver, etcd and kube-controller-manager.
    struct ControlPlaneCpu {
        pids: [u32; 3],
        ticks: f64,
    }

    impl ControlPlaneCpu {
        fn seconds(&self) -> [f64; 3] {
            self.pids.map(|p| cpu_seconds(p, self.ticks))
        }
    }

    /// Prints a server-side counter over the two windows with the operator and the baseline,
    /// with the operator's share (a window minus the baseline), per cluster-minute
    /// (`cluster_minutes`: clusters × window minutes) for the second window.
    fn share_table(
        title: &str,
        verb: &str,
        [first, second, baseline]: [&Requests; 3],
        cluster_minutes: f64,
    ) {
        println!(
            "\n{title} over each window; the operator's share is a window minus the baseline:"
        );
        println!(
            "| {verb} | resource | first | second | baseline | first − baseline | second − baseline | second − baseline, per cluster per minute |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        let shares = [first, second].map(|w| difference(w, baseline));
        let get = |m: &Requests, k: &(String, String)| m.get(k).copied().unwrap_or(0.0);
        for key in keys(&[first, second, baseline]) {
            let row = [first, second, baseline].map(|m| get(m, key));
            if row.iter().all(|v| *v == 0.0) {
                continue;
            }
            let [a, b] = shares.each_ref().map(|m| get(m, key));
            println!(
                "| {} | {} | {:.0} | {:.0} | {:.0} | {a:.0} | {b:.0} | {:.2} |",
                key.0,
                key.1,
                row[0],
                row[1],
                row[2],
                b / cluster_minutes
            );
        }
        let total = |m: &Requests| m.values().sum::<f64>();
        println!(
            "| all | | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
            total(first),
            total(second),
            total(baseline),
            total(&shares[0]),
            total(&shares[1]),
            total(&shares[1]) / cluster_minutes
        );
    }

    /// Every key of `maps`, once, in order.
    fn keys<'a, V: 'a>(maps: &[&'a BTreeMap<(String, String), V>]) -> Vec<&'a (String, String)> {
        let mut keys: Vec<&(String, String)> = maps.iter().flat_map(|m| m.keys()).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    pub(crate) async fn run(dir: PathBuf, n: u32, ticks: f64) {
        let steady = env_secs("BENCH_STEADY_SECS", 60);
        let client = admin_client(&dir).await;
        let version = client
            .apiserver_version()
            .await
            .unwrap_or_else(|e| panic!("the API server of {} does not answer: {e}", dir.display()));
        println!(
            "kube-apiserver {} ({}), {n} clusters, load {}",
            version.git_version,
            dir.display(),
            load()
        );
        let cp = ControlPlane {
            dir: dir.clone(),
            client: client.clone(),
        };
        moco_tests::operator_host::install_crds(&cp).await;
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        for ns in [NS, "moco-system"] {
            create_or_keep(
                &namespaces,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .await;
        }
        let node = tokio::spawn(run_node(client.clone()));
        let pods = tokio::spawn(run_pods(client.clone()));

        let control_plane = ControlPlaneCpu {
            pids: ["kube-apiserver", "etcd", "kube-controller-manager"].map(|p| pid_of(&dir, p)),
            ticks,
        };
        let mut operator = Child::start(&dir, n).await;
        let rss_start = rss_of(operator.pid);
        let started = Instant::now();
        let cpu_start = (cpu_seconds(operator.pid, ticks), control_plane.seconds());
        let clusters: Api<MySQLCluster> = Api::namespaced(client.clone(), NS);
        for i in 0..n {
            let object = cluster_object(i, Some(SCHEDULER));
            let cluster: MySQLCluster =
                serde_json::from_value(object).unwrap_or_else(|e| panic!("cluster c{i}: {e}"));
            if let Err(e) = clusters.create(&PostParams::default(), &cluster).await {
                panic!("creating cluster c{i} (the bench wants a fresh control plane): {e}");
            }
        }
        let to_healthy = wait_healthy(&client, n, started).await;
        let bring_up = operator.counts().await;
        let cp = control_plane.seconds();
        println!(
            "to Healthy: {:.1} s ({:.0} requests from the operator's client), load {}; CPU seconds meanwhile: operator {:.1}, kube-apiserver {:.1}, etcd {:.1}, kube-controller-manager {:.1}",
            to_healthy.as_secs_f64(),
            bring_up.values().sum::<f64>(),
            load(),
            cpu_seconds(operator.pid, ticks) - cpu_start.0,
            cp[0] - cpu_start.1[0],
            cp[1] - cpu_start.1[1],
            cp[2] - cpu_start.1[2],
        );

        // The first window begins at Healthy (as the fake mode's); the second follows it.
        let first = window(&client, Some(&mut operator), steady, &control_plane).await;
        let second = window(&client, Some(&mut operator), steady, &control_plane).await;
        let rss = rss_of(operator.pid);
        let [apiserver, etcd, kcm] = control_plane.pids.map(rss_of);
        assert_eq!(
            healthy_count(&client).await,
            usize::try_from(n).unwrap_or(usize::MAX),
            "a cluster left Healthy during the windows"
        );
        operator.stop().await;
        let baseline = window(&client, None, steady, &control_plane).await;
        node.abort();
        pods.abort();

        let mib = |b: u64| b as f64 / 1_048_576.0;
        let per = f64::from(n.max(1));
        let minutes = steady.as_secs_f64() / 60.0;
        for (name, w) in [
            ("first window (from Healthy)", &first),
            ("second window", &second),
            ("baseline window (operator stopped)", &baseline),
        ] {
            println!(
                "{name}: load {} -> {}; operator CPU {:.3} cores ({:.1} ms per cluster per minute); kube-apiserver {:.3}, etcd {:.3}, kube-controller-manager {:.3} cores",
                w.load.0,
                w.load.1,
                w.cpu,
                w.cpu * 60_000.0 / per,
                w.control_plane_cpu[0],
                w.control_plane_cpu[1],
                w.control_plane_cpu[2],
            );
        }
        println!(
            "operator RSS {:.1} MiB at the end of the second window (at start, no cluster: {:.1} MiB; {:.1} KiB per cluster above it)",
            mib(rss),
            mib(rss_start),
            (rss.saturating_sub(rss_start)) as f64 / 1024.0 / per,
        );
        println!(
            "kube-apiserver RSS {:.1} MiB, etcd RSS {:.1} MiB, kube-controller-manager RSS {:.1} MiB",
            mib(apiserver),
            mib(etcd),
            mib(kcm)
        );

        share_table(
            "kube-apiserver's apiserver_request_total",
            "verb",
            [&first.server, &second.server, &baseline.server],
            per * minutes,
        );
        share_table(
            "kube-apiserver's etcd_requests_total (its requests to etcd)",
            "operation",
            [&first.etcd, &second.etcd, &baseline.etcd],
            per * minutes,
        );
        let get = |m: &Requests, k: &(String, String)| m.get(k).copied().unwrap_or(0.0);
        let total = |m: &Requests| m.values().sum::<f64>();

        println!("\nthe operator's client (PATCH: the server's APPLY or PATCH):");
        println!(
            "| verb | resource | first | second | second, per cluster per minute | bring-up |"
        );
        println!("|---|---|---|---|---|---|");
        for key in keys(&[&first.client, &second.client, &bring_up]) {
            let row = [&first.client, &second.client, &bring_up].map(|m| get(m, key));
            println!(
                "| {} | {} | {:.0} | {:.0} | {:.2} | {:.0} |",
                key.0,
                key.1,
                row[0],
                row[1],
                row[1] / per / minutes,
                row[2]
            );
        }
        println!(
            "| all | | {:.0} | {:.0} | {:.2} | {:.0} |",
            total(&first.client),
            total(&second.client),
            total(&second.client) / per / minutes,
            total(&bring_up)
        );

        println!(
            "\nWATCH requests open at the end of each window (apiserver_longrunning_requests):"
        );
        for key in second.watches.keys().chain(
            baseline
                .watches
                .keys()
                .filter(|k| !second.watches.contains_key(*k)),
        ) {
            let [a, b] =
                [&second.watches, &baseline.watches].map(|m| m.get(key).copied().unwrap_or(0.0));
            if a != b {
                println!("  {key}: {a:.0} with the operator, {b:.0} without");
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let debug = std::env::var_os("BENCH_DEBUG").is_some();
    let kube_operator = args.first().map(String::as_str) == Some("--kube-operator");
    let counts = real::ClientRequests::default();
    if kube_operator {
        // kube-client's request spans (debug level) counted, the rest filtered as RUST_LOG says
        // (echoed only with BENCH_DEBUG).
        let mut filter = String::from("kube_client::client::builder=debug");
        if debug && let Ok(more) = std::env::var("RUST_LOG") {
            filter = format!("{more},{filter}");
        }
        let writer_counts = counts.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(false)
            .with_writer(move || real::CountingWriter {
                counts: writer_counts.clone(),
                echo: debug,
            })
            .init();
    } else if debug {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => panic!("runtime: {e}"),
    };
    let number =
        |i: usize, default: u32| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("--apiserver") => {
            runtime.block_on(serve_apiserver(number(1, 0)));
            return;
        }
        Some("--one") => {
            runtime.block_on(run(number(1, 0), clock_ticks()));
            return;
        }
        Some("--kube-operator") => {
            let dir = std::path::PathBuf::from(args.get(1).cloned().unwrap_or_default());
            runtime.block_on(real::operator(&dir, number(2, 100), counts));
            return;
        }
        Some("--kube") => {
            let dir = args
                .get(1)
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| {
                    panic!("--kube DIR [N]: DIR is the directory of scripts/kube.sh up")
                });
            let dir = std::fs::canonicalize(&dir)
                .unwrap_or_else(|e| panic!("--kube {}: {e}", dir.display()));
            runtime.block_on(real::run(dir, number(2, 100), clock_ticks()));
            return;
        }
        _ => {}
    }
    let sizes: Vec<u32> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![10, 100, 1000]
    } else {
        sizes
    };
    // Each size in a fresh process, after a baseline with no cluster: the allocator keeps
    // what an earlier run freed.
    let measure = |n: u32| -> Vec<f64> {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
        let out = std::process::Command::new(exe)
            .args(["--one", &n.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("run {n}: {e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("RESULT "))
            .unwrap_or_else(|| panic!("run {n} printed no result: {text}"));
        line.split_whitespace()
            .map(|v| v.parse().unwrap_or(0.0))
            .collect()
    };
    let base = measure(0);
    println!(
        "baseline (no cluster): operator RSS {:.1} MiB, CPU {:.3} cores",
        base[2] / 1048576.0,
        base[3]
    );
    println!(
        "| clusters | to Healthy | operator RSS | RSS above baseline per cluster | operator CPU (cores) | CPU per cluster per minute | API server RSS |"
    );
    println!("|---|---|---|---|---|---|---|");
    for n in sizes {
        let r = measure(n);
        let per = (r[2] - base[2]).max(0.0) / 1024.0 / f64::from(n.max(1));
        let cpu_per_minute = (r[3] - base[3]).max(0.0) * 60.0 * 1000.0 / f64::from(n.max(1));
        println!(
            "| {n} | {:.1} s | {:.1} MiB | {per:.1} KiB | {:.3} | {cpu_per_minute:.1} ms | {:.1} MiB |",
            r[1],
            r[2] / 1048576.0,
            r[3],
            r[4] / 1048576.0,
        );
    }
}
