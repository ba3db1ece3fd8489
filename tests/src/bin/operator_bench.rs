//! `operator_bench N…`: one operator process managing N clusters of 3 simulated instances
//! each, through the same controller, reconcile, Kubernetes platform and managers as `moco
//! controller`. The API server is the in-memory fake, served over HTTP on loopback by a child
//! process (this binary with `--apiserver N`), so that the operator process's memory and CPU
//! are its own: its resident memory includes the simulated servers (a few KiB per cluster)
//! and nothing of the API server. For each N it prints the time until every cluster is
//! Healthy, then, over a steady window, the operator's resident memory and CPU, and the API
//! server's resident memory for reference.
//!
//! Usage: `cargo run --release -p moco-tests --bin operator_bench -- 10 100 1000`
//! (`BENCH_STEADY_SECS`, default 60: the steady window; `BENCH_CHECK_INTERVAL_SECS`, default
//! 60: `--check-interval`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use moco_adapters::manager::ManagerConfig;
use moco_adapters::ports::{Credentials, MysqlPort};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::facts::Flavor;
use moco_operator::clustering::Managers;
use moco_operator::clustering::addresses::AddressResolver;
use moco_operator::clustering::platform::SqlConnector;
use moco_operator::controller::{Shared, run_controller};
use moco_operator::metrics::ClusterMetrics;
use moco_operator::reconcile::{Context, wall_clock};
use moco_operator::render::{ClusterId, RenderSettings};
use moco_sim::{INSTANCE_PORT, SimCluster, SimConfig, instance_host};
use moco_testkit::apiserver::FakeApiServer;
use serde_json::json;

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

/// User plus system CPU seconds of this process, from `/proc/self/stat`.
fn cpu_seconds(ticks_per_second: f64) -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
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

fn insert_cluster(fake: &FakeApiServer, i: u32) {
    let name = format!("c{i}");
    fake.insert(json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": name, "namespace": NS,
                     "finalizers": ["moco.cybozu.com/mysqlcluster"]},
        "spec": {
            "replicas": 3, "serverIDBase": 1000,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql:8.4"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }));
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
    let stdin_closed = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut sink);
    });
    tokio::select! {
        _ = server => {}
        _ = stdin_closed => {}
    }
}

fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

async fn run(n: u32, ticks: f64) {
    let steady = env_secs("BENCH_STEADY_SECS", 60);
    let check_interval = env_secs("BENCH_CHECK_INTERVAL_SECS", 60);
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
    let managers = Arc::new(Managers::new(
        client.clone(),
        Arc::new(SimAddresses),
        Arc::new(SimConnector { sims }),
        None,
        ManagerConfig {
            check_interval,
            ..ManagerConfig::default()
        },
        ClusterMetrics::default(),
    ));
    let shared = Arc::new(Shared {
        ctx: Context {
            client: client.clone(),
            settings: RenderSettings::new("moco-system"),
            history_limit: 10,
            pvc_sync_label_keys: vec![],
            pvc_sync_annotation_keys: vec![],
            metrics: ClusterMetrics::default(),
            now: Arc::new(wall_clock),
        },
        clustering: managers.clone(),
    });
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let controller = tokio::spawn(run_controller(shared, 8, async move {
        let _ = stopped.wait_for(|v| *v).await;
    }));

    let started = Instant::now();
    let deadline = started + Duration::from_secs(900);
    let total = usize::try_from(n).unwrap_or(usize::MAX);
    loop {
        let healthy = healthy_count(&client).await;
        if healthy >= total {
            break;
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
    let to_healthy = started.elapsed();

    let cpu0 = cpu_seconds(ticks);
    tokio::time::sleep(steady).await;
    let cpu = cpu_seconds(ticks) - cpu0;
    let rss = rss_of(std::process::id());
    let apiserver_rss = rss_of(child_pid);
    assert_eq!(
        healthy_count(&client).await,
        total,
        "a cluster left Healthy during the window"
    );
    println!(
        "RESULT {n} {} {rss} {} {apiserver_rss}",
        to_healthy.as_secs_f64(),
        cpu / steady.as_secs_f64()
    );
    let _ = stop.send(true);
    let _ = controller.await;
    managers.stop_all();
    let _ = stop_ticks.send(true);
    let _ = ticker.await;
    drop(child.stdin.take());
    let _ = child.wait().await;
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os("BENCH_DEBUG").is_some() {
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
    if args.first().map(String::as_str) == Some("--apiserver") {
        let n = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0);
        runtime.block_on(serve_apiserver(n));
        return;
    }
    if args.first().map(String::as_str) == Some("--one") {
        let n = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0);
        runtime.block_on(run(n, clock_ticks()));
        return;
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
