//! Clustering drills through the Kubernetes platform: real `mariadbd` processes on loopback
//! ports stand in for the Pods of a MySQLCluster, and the fake API server holds the cluster,
//! its Secret and its Pods. The same manager and platform code that runs in a cluster drives
//! them; only the addresses (a table instead of Pod DNS names) and the kubelet differ: a
//! readiness loop here sets each Pod's `Ready` condition from whether its server answers, as
//! the agent's readiness probe would.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_adapters::mysqld::LocalMysqld;
use moco_api::addresses::StaticAddresses;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::manager::ManagerConfig;
use moco_core::moco_accounts::Account;
use moco_kube::metrics::{ClusterLabels, ClusterMetrics};
use moco_kube::platform::MysqlConnector;
use moco_local::platform::create::{self, CreateOptions};
use moco_local::platform::{Layout, Manifest};
use moco_operator::clustering::Managers;
use moco_operator::controller::ClusteringControl;
use moco_operator::reconcile::Clustering;
use moco_testkit::apiserver::FakeApiServer;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::local::{free_port_block, kill_processes_mentioning};

/// Namespace of the drill cluster.
pub const NS: &str = "drill";
/// Name of the drill cluster.
pub const NAME: &str = "db";
const PODS: &str = "v1/pods";
const CLUSTERS: &str = "moco.cybozu.com/v1beta2/mysqlclusters";

/// A drill cluster: servers, the fake API server, the managers.
pub struct KubeDrill {
    /// The fake API server.
    pub fake: FakeApiServer,
    /// The clustering managers (one, for this cluster).
    pub managers: Arc<Managers>,
    /// What the managers count.
    pub metrics: ClusterMetrics,
    /// Where the servers live.
    pub layout: Layout,
    /// The local cluster's manifest (ports, binary).
    pub manifest: Manifest,
    /// Passwords by account name.
    pub passwords: BTreeMap<String, String>,
    /// `spec.replicas` now (the manifest has room for more).
    size: std::sync::atomic::AtomicU32,
    stop_kubelet: watch::Sender<bool>,
    _dir: tempfile::TempDir,
    guard: String,
}

impl std::fmt::Debug for KubeDrill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeDrill")
            .field("dir", &self.guard)
            .field("replicas", &self.manifest.replicas)
            .finish_non_exhaustive()
    }
}

impl Drop for KubeDrill {
    fn drop(&mut self) {
        let _ = self.stop_kubelet.send(true);
        self.managers.stop_all();
        kill_processes_mentioning(&self.guard);
    }
}

fn pod(index: u32) -> String {
    format!("moco-{NAME}-{index}")
}

/// A new, not yet Ready Pod of instance `index`.
fn pod_object(index: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod(index), "namespace": NS,
            "labels": {"app.kubernetes.io/name": "mysql",
                       "app.kubernetes.io/instance": NAME,
                       "app.kubernetes.io/created-by": "moco"}},
        "spec": {"containers": [{"name": "mysqld", "image": "mariadb"}]},
        "status": {"podIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": "False"}]}
    })
}

/// Whether something accepts TCP connections on `port` within 300 ms: a stopped (SIGSTOP) or
/// killed server does not.
async fn answers(port: u16) -> bool {
    let connect = tokio::net::TcpStream::connect(("127.0.0.1", port));
    let Ok(Ok(mut stream)) = tokio::time::timeout(Duration::from_millis(300), connect).await else {
        return false;
    };
    // A frozen mysqld still completes the TCP handshake in the kernel; it never sends its
    // greeting.
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(
            Duration::from_millis(300),
            tokio::io::AsyncReadExt::read(&mut stream, &mut byte)
        )
        .await,
        Ok(Ok(n)) if n > 0
    )
}

impl KubeDrill {
    /// Creates `replicas` servers and the cluster's objects, and starts clustering. `None`
    /// when no server binary is available (see [`crate::local::server_or_skip`]).
    pub async fn start(test: &str, replicas: u32) -> Option<KubeDrill> {
        Self::start_with_room(test, replicas, replicas).await
    }

    /// As [`KubeDrill::start`], with servers for `room` instances: those past `replicas` run
    /// empty (as a new Pod's mysqld after its init container) until [`KubeDrill::grow`] adds
    /// their Pods and raises `spec.replicas`.
    pub async fn start_with_room(test: &str, replicas: u32, room: u32) -> Option<KubeDrill> {
        Self::start_opts(test, replicas, room, false).await
    }

    /// As [`KubeDrill::start`], with TLS (the annotation `moco-rs/tls: "true"`): the servers
    /// require TLS with certificates from a CA made here (cert-manager's part), and the fake
    /// API server holds that CA in `moco-db-mysql-ca`, as reconcile copies it.
    pub async fn start_tls(test: &str, replicas: u32) -> Option<KubeDrill> {
        Self::start_opts(test, replicas, replicas, true).await
    }

    async fn start_opts(test: &str, replicas: u32, room: u32, tls: bool) -> Option<KubeDrill> {
        crate::local::server_or_skip(test)?;
        let dir = tempfile::Builder::new()
            .prefix("moco-kube-drill-")
            .tempdir()
            .unwrap_or_else(|e| panic!("tempdir: {e}"));
        let root = dir.path().join("c");
        let guard = root.display().to_string();
        let mut options = CreateOptions::new(&root, room);
        options.base_port = Some(free_port_block(u16::try_from(room + 2).unwrap_or(5)));
        options.tls = tls;
        let prepared = create::prepare(options).unwrap_or_else(|e| panic!("prepare: {e}"));
        let layout = prepared.layout().clone();
        let manifest = create::create(prepared)
            .await
            .unwrap_or_else(|e| panic!("create: {e}"));
        let secret = moco_local::platform::secret::Secret::load(&layout)
            .unwrap_or_else(|e| panic!("secret: {e}"));
        let passwords: BTreeMap<String, String> = Account::ALL
            .iter()
            .map(|a| {
                let p = secret
                    .password(a.name())
                    .unwrap_or_else(|e| panic!("{e}"))
                    .to_owned();
                (a.name().to_owned(), p)
            })
            .collect();

        let fake = FakeApiServer::new();
        let mut annotations = json!({"moco-rs/flavor": "mariadb"});
        if tls {
            annotations["moco-rs/tls"] = json!("true");
            let ca = std::fs::read(layout.ca_cert()).unwrap_or_else(|e| panic!("CA: {e}"));
            let mut ca_secret = json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("moco-{NAME}-mysql-ca"), "namespace": NS}
            });
            ca_secret["data"] =
                serde_json::to_value(BTreeMap::from([("ca.crt", k8s_openapi::ByteString(ca))]))
                    .unwrap_or_else(|e| panic!("{e}"));
            fake.insert(ca_secret);
        }
        let cluster = fake.insert(json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
            "metadata": {"name": NAME, "namespace": NS, "annotations": annotations},
            "spec": {
                "replicas": replicas,
                "serverIDBase": manifest.server_id_base,
                "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mariadb"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                    "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
            }
        }));
        // k8s-openapi writes the values base64-encoded, as the API server stores them.
        let data: BTreeMap<String, k8s_openapi::ByteString> = Account::ALL
            .iter()
            .map(|a| {
                let bytes = passwords[a.name()].as_bytes().to_vec();
                (a.secret_key().to_owned(), k8s_openapi::ByteString(bytes))
            })
            .collect();
        let mut user_secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("moco-{NAME}"), "namespace": NS,
                         "annotations": {"moco.cybozu.com/secret-version": "1"}}
        });
        user_secret["data"] = serde_json::to_value(&data).unwrap_or_else(|e| panic!("{e}"));
        fake.insert(user_secret);
        for index in 0..replicas {
            fake.insert(pod_object(index));
        }
        let addresses = StaticAddresses {
            by_index: (0..room)
                .map(|i| (i, ("127.0.0.1".to_owned(), manifest.instance_port(i))))
                .collect(),
            agents: Default::default(),
        };
        let metrics = ClusterMetrics::default();
        let managers = Arc::new(Managers::new(
            fake.client(),
            Arc::new(addresses),
            // The servers read the CA where `moco local` keeps it, not at the Pod's path.
            Arc::new(MysqlConnector {
                replication_ca: layout.ca_cert().display().to_string(),
            }),
            None,
            ManagerConfig {
                check_interval: Duration::from_millis(500),
                ..ManagerConfig::default()
            },
            metrics.clone(),
        ));
        let (stop_kubelet, stopped) = watch::channel(false);
        tokio::spawn(kubelet(
            fake.clone(),
            (0..room).map(|i| manifest.instance_port(i)).collect(),
            stopped,
        ));
        let cluster: MySQLCluster =
            serde_json::from_value(cluster).unwrap_or_else(|e| panic!("cluster: {e}"));
        managers.control(&cluster, Clustering::Run);
        Some(KubeDrill {
            fake,
            managers,
            metrics,
            layout,
            manifest,
            passwords,
            size: std::sync::atomic::AtomicU32::new(replicas),
            stop_kubelet,
            _dir: dir,
            guard,
        })
    }

    /// The cluster's current `spec.replicas`.
    pub fn size(&self) -> u32 {
        self.size.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What a StatefulSet does when `spec.replicas` rises to `to`: the new Pods appear (their
    /// servers already run, empty), and the MySQLCluster says `to`.
    pub fn grow(&self, to: u32) {
        assert!(to <= self.manifest.replicas, "no room for {to} instances");
        for index in self.size()..to {
            self.fake.insert(pod_object(index));
        }
        self.fake.modify(CLUSTERS, NS, NAME, |c| {
            c["spec"]["replicas"] = json!(to);
        });
        self.size.store(to, std::sync::atomic::Ordering::SeqCst);
        self.managers.wake(NS, NAME);
    }

    /// `spec.replicas` drops to `to`. The Pods stay: [`KubeDrill::follow_statefulset`] plays
    /// the StatefulSet controller.
    pub fn shrink(&self, to: u32) {
        self.fake.modify(CLUSTERS, NS, NAME, |c| {
            c["spec"]["replicas"] = json!(to);
        });
        self.managers.wake(NS, NAME);
    }

    /// What the StatefulSet controller does with the `replicas` the reconciler renders
    /// (`moco_core::resources::statefulset_replicas` over the stored status): the Pods past it
    /// are deleted and their servers stopped (SIGTERM, then SIGKILL after 20 s). Returns the
    /// Pods left.
    pub async fn follow_statefulset(&self) -> u32 {
        let cluster: MySQLCluster =
            serde_json::from_value(self.cluster()).unwrap_or_else(|e| panic!("cluster: {e}"));
        let spec = u32::try_from(cluster.spec.replicas).unwrap_or(0);
        let may_go = cluster
            .status
            .as_ref()
            .is_some_and(|s| moco_api::status::cluster_status(s).leaving_may_go(spec));
        let pods = self.size();
        let held = moco_core::resources::statefulset_replicas(spec, Some(pods), may_go);
        for index in (held..pods).rev() {
            self.fake.delete_now(PODS, NS, &pod(index));
            self.server(index)
                .stop(Duration::from_secs(20))
                .await
                .unwrap_or_else(|e| panic!("stopping instance {index}: {e}"));
        }
        self.size
            .store(held.min(pods), std::sync::atomic::Ordering::SeqCst);
        held.min(pods)
    }

    /// Options to log in as `user` at `port`: over TLS, trusting the drill's CA only, when the
    /// cluster has TLS.
    pub fn opts(&self, port: u16, user: &str) -> mysql_async::Opts {
        let password = self.password(user);
        if self.manifest.tls {
            let ca = std::fs::read(self.layout.ca_cert()).unwrap_or_else(|e| panic!("CA: {e}"));
            crate::local::tls_opts(port, user, password, ca)
        } else {
            crate::local::opts(port, user, password)
        }
    }

    /// The password of `account` (`moco-writable`, …).
    pub fn password(&self, account: &str) -> &str {
        &self.passwords[account]
    }

    /// The cluster as stored.
    pub fn cluster(&self) -> Value {
        self.fake
            .get_json(CLUSTERS, NS, NAME)
            .unwrap_or_else(|| panic!("the cluster is gone"))
    }

    /// Pod `index` as stored.
    pub fn pod(&self, index: u32) -> Value {
        self.fake
            .get_json(PODS, NS, &pod(index))
            .unwrap_or_else(|| panic!("Pod {index} is gone"))
    }

    /// The value of condition `type_` in the status.
    pub fn condition(&self, type_: &str) -> Option<String> {
        self.cluster()["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == type_)
            .and_then(|c| c["status"].as_str())
            .map(str::to_owned)
    }

    /// `status.currentPrimaryIndex`.
    pub fn primary(&self) -> u32 {
        self.cluster()["status"]["currentPrimaryIndex"]
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0)
    }

    /// The role label of Pod `index`.
    pub fn role(&self, index: u32) -> Option<String> {
        self.pod(index)["metadata"]["labels"]["moco.cybozu.com/role"]
            .as_str()
            .map(str::to_owned)
    }

    /// The port of the instance whose Pod is labelled primary: where the `-primary` Service
    /// would route.
    pub fn routed_primary_port(&self) -> Option<u16> {
        (0..self.size())
            .find(|i| self.role(*i).as_deref() == Some("primary"))
            .map(|i| self.manifest.instance_port(i))
    }

    /// Healthy with every role label in place.
    pub fn healthy(&self) -> bool {
        self.condition("Healthy").as_deref() == Some("True")
            && (0..self.size()).all(|i| {
                let want = if i == self.primary() {
                    "primary"
                } else {
                    "replica"
                };
                self.role(i).as_deref() == Some(want)
            })
    }

    /// Waits until `pred` holds, polling; panics with `what` and the status after `limit`.
    pub async fn wait(&self, what: &str, limit: Duration, pred: impl Fn(&KubeDrill) -> bool) {
        let deadline = Instant::now() + limit;
        while !pred(self) {
            assert!(
                Instant::now() < deadline,
                "timed out after {limit:?} waiting for {what}; cluster: {}",
                self.cluster()["status"]
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Annotates the primary Pod to step down, as `kubectl moco switchover` does.
    pub fn demote(&self, index: u32) {
        self.fake.modify(PODS, NS, &pod(index), |p| {
            p["metadata"]["annotations"] = json!({"moco.cybozu.com/demote": "true"});
        });
        self.managers.wake(NS, NAME);
    }

    /// The server of instance `index`.
    pub fn server(&self, index: u32) -> LocalMysqld {
        let binary = self
            .manifest
            .server_binary()
            .unwrap_or_else(|e| panic!("{e}"));
        LocalMysqld::open(binary, &self.layout.instance_dir(index))
            .unwrap_or_else(|e| panic!("instance {index}: {e}"))
    }

    /// The labels of this cluster's metric series.
    pub fn labels(&self) -> ClusterLabels {
        ClusterLabels {
            name: NAME.into(),
            namespace: NS.into(),
        }
    }

    /// Events recorded in the drill's namespace, as stored.
    pub fn events(&self) -> Vec<Value> {
        self.fake.list_json("events.k8s.io/v1/events", Some(NS))
    }

    /// Events recorded on the cluster: reasons in order.
    pub fn event_reasons(&self) -> Vec<String> {
        let mut events = self.fake.list_json("events.k8s.io/v1/events", Some(NS));
        events.sort_by_key(|e| {
            e["metadata"]["creationTimestamp"]
                .as_str()
                .map(str::to_owned)
        });
        events
            .iter()
            .filter_map(|e| e["reason"].as_str().map(str::to_owned))
            .collect()
    }
}

/// Sets each Pod's `Ready` condition from whether its server answers, every 100 ms.
async fn kubelet(fake: FakeApiServer, ports: Vec<u16>, mut stop: watch::Receiver<bool>) {
    let mut last: Vec<Option<bool>> = vec![None; ports.len()];
    loop {
        for (i, port) in ports.iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(0);
            if fake.get_json(PODS, NS, &pod(index)).is_none() {
                continue;
            }
            let ready = answers(*port).await;
            if last[i] != Some(ready) {
                fake.modify(PODS, NS, &pod(index), |p| {
                    p["status"]["conditions"] = json!([{"type": "Ready",
                        "status": if ready { "True" } else { "False" }}]);
                });
                last[i] = Some(ready);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.changed() => return,
        }
    }
}
