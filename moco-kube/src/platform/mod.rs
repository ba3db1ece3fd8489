//! The Kubernetes [`Platform`]: the same port `moco local` implements, over the API server.
//! The manager (`moco_cluster::manager`) drives it unchanged.
//!
//! * Observation: the MySQLCluster (spec facts, recorded status), read fresh each round, and
//!   its Pods (ready, terminating, demote and prevent-delete annotations, role label), from the
//!   Pod watch's store when the platform has one ([`KubePlatform::with_pod_cache`]), else
//!   listed.
//! * Actions: role labels and annotations are merge patches of the Pod; the status is a
//!   read-modify-write of the clustering fields only (reconcile owns the others); events go to
//!   the MySQLCluster with MOCO's reasons.
//! * SQL: `moco-admin` with the password from the cluster's Secret `moco-<name>`, at the
//!   address the [`AddressResolver`] gives.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Secret};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use moco_adapters::mysql::tls::MysqlTls;
use moco_adapters::mysql::{ConnectOptions, MysqlInstance};
use moco_api::addresses::AddressResolver;
use moco_api::annotations::{
    ROTATE_PASSWORDS_ANNOTATION, SWITCHOVER_REFUSED_ANNOTATION, SWITCHOVER_TO_ANNOTATION,
    annotation, flavor_of, is_true, switchover_refusal, switchover_to_of, tls_of,
};
use moco_api::cluster::{CLUSTER_API_VERSION, CLUSTER_KIND, ClusterId, TLS_CA_FILE, TLS_CA_KEY};
use moco_api::convert::{EngineSettings, spec_facts};
use moco_api::labels::{
    ANNOTATION_DEMOTE, ANNOTATION_PREVENT_DELETE, LABEL_ROLE, ROLE_PRIMARY, ROLE_REPLICA,
};
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::ports::{
    Credentials, ErrorCategory, InstanceSlot, MysqlPort, Observation, Platform, PortError,
    RotationRecord, RoundTiming,
};
use moco_core::Decision;
use moco_core::facts::ClusterFacts;
use moco_core::facts::{ExternalSource, Flavor, PodFacts, Role};
use moco_core::moco_accounts::{Account, MocoPasswords};
use moco_core::operation::{EventType, ReplicationSource};
use moco_core::status::{ClusteringStatus, ConditionStatus};
use serde_json::json;

use crate::api::{label_selector, retry};
use crate::metrics::{ClusterLabels, ClusterMetrics};
use crate::pods::PodCache;
use crate::rounds::LastRounds;
use moco_api::status::{cluster_status, merge_clustering_status};

mod rotation;

/// Limits of the manager's SQL connections: MOCO's connect timeout, and a call limit that
/// bounds every statement.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts of a status read-modify-write before a conflict is reported.
const STATUS_ATTEMPTS: u32 = 5;

/// The accounts a clone uses.
#[derive(Clone, Debug)]
pub struct CloneCredentials {
    /// The donor's (`moco-clone-donor`, or the external Secret's `USER`).
    pub donor: Credentials,
    /// The account that logs in to the copy (`moco-admin`, or the external Secret's
    /// `INIT_USER`).
    pub init: Credentials,
}

/// Copies the data of an instance from a donor: the agent's job in a Pod.
#[async_trait]
pub trait InstanceCloner: Send + Sync + fmt::Debug {
    /// Replaces instance `index`'s data of cluster `id` with a copy of `donor` and brings it
    /// back up.
    async fn clone_instance(
        &self,
        id: &ClusterId,
        index: u32,
        donor: &ReplicationSource,
        credentials: &CloneCredentials,
        boot_timeout: Duration,
    ) -> Result<(), PortError>;

    /// Gives the agent of instance `index` the passwords its Secret holds now (a rotation
    /// published them); returns whether it uses them.
    async fn move_agent(
        &self,
        _id: &ClusterId,
        index: u32,
        _passwords: &MocoPasswords,
    ) -> Result<bool, PortError> {
        Err(failed(
            format!("instance {index}"),
            "this controller cannot reach the agents",
        ))
    }
}

/// Builds the manager's SQL port of an instance: MySQL over TCP in production, simulated
/// servers in benchmarks.
pub trait SqlConnector: Send + Sync + fmt::Debug {
    /// The port of instance `index` of `id` at `host:port`, logging in with `credentials`;
    /// with `tls` (the cluster has TLS), verifying the server with it.
    fn connect(
        &self,
        id: &ClusterId,
        index: u32,
        host: &str,
        port: u16,
        credentials: &Credentials,
        tls: Option<&MysqlTls>,
    ) -> Arc<dyn MysqlPort>;
}

/// `moco-admin` over TCP with MOCO's limits (connect 5 s, calls 60 s).
#[derive(Clone, Debug)]
pub struct MysqlConnector {
    /// The CA file as the instances read it: with TLS, their replication channels verify
    /// their source with it (in a Pod, [`TLS_CA_FILE`]).
    pub replication_ca: String,
}

impl Default for MysqlConnector {
    fn default() -> Self {
        MysqlConnector {
            replication_ca: TLS_CA_FILE.to_owned(),
        }
    }
}

impl SqlConnector for MysqlConnector {
    fn connect(
        &self,
        id: &ClusterId,
        index: u32,
        host: &str,
        port: u16,
        credentials: &Credentials,
        tls: Option<&MysqlTls>,
    ) -> Arc<dyn MysqlPort> {
        let mut options = ConnectOptions::new(host.to_owned(), port, credentials)
            .with_name(format!(
                "instance {index} (moco-{}-{index}) at {host}:{port}",
                id.name
            ))
            .with_timeouts(CONNECT_TIMEOUT, CALL_TIMEOUT);
        if let Some(tls) = tls {
            options = options
                .with_tls(tls.clone())
                .with_replication_ca(self.replication_ca.clone());
        }
        Arc::new(MysqlInstance::new(options))
    }
}

/// Removes MySQLCluster `name`'s `moco-rs/switchover-to` request if it names `index`
/// ([`withdraw_annotation`]); a `refusal` is written in the same patch
/// (`moco-rs/switchover-refused`), so no reader sees the withdrawal without it.
pub async fn withdraw_switchover_request(
    api: &Api<MySQLCluster>,
    name: &str,
    index: u32,
    refusal: Option<&str>,
) -> Result<(), kube::Error> {
    let also = refusal.map_or_else(
        || json!({}),
        |r| json!({SWITCHOVER_REFUSED_ANNOTATION: switchover_refusal(index, r)}),
    );
    withdraw_annotation(
        api,
        name,
        SWITCHOVER_TO_ANNOTATION,
        |v| v.parse::<u32>().ok() == Some(index),
        also,
    )
    .await
}

/// Removes MySQLCluster `name`'s request for a rotation of its passwords if it still is
/// `request` (the rotation that served it finished; a newer request stays).
pub async fn withdraw_rotation_request(
    api: &Api<MySQLCluster>,
    name: &str,
    request: &str,
) -> Result<(), kube::Error> {
    withdraw_annotation(
        api,
        name,
        ROTATE_PASSWORDS_ANNOTATION,
        |v| v == request,
        json!({}),
    )
    .await
}

/// Removes MySQLCluster `name`'s annotation `key` if its value still is the request being
/// withdrawn (`still`), setting the annotations of `also` in the same patch. Each removal is
/// conditional on the resourceVersion read with it, so a request made meanwhile stays; a
/// conflict is read again (a few times).
async fn withdraw_annotation(
    api: &Api<MySQLCluster>,
    name: &str,
    key: &str,
    still: impl Fn(&str) -> bool,
    also: serde_json::Value,
) -> Result<(), kube::Error> {
    let mut attempt = 1;
    loop {
        let cluster = api.get(name).await?;
        if !annotation(&cluster.metadata, key).is_some_and(&still) {
            return Ok(());
        }
        let mut annotations = also.clone();
        annotations[key] = serde_json::Value::Null;
        let patch = Patch::Merge(json!({"metadata": {
            "resourceVersion": cluster.metadata.resource_version,
            "annotations": annotations,
        }}));
        match api.patch(name, &PatchParams::default(), &patch).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < STATUS_ATTEMPTS => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// How the manager reaches one instance as `moco-admin`.
struct AdminEndpoint {
    /// `instance N (moco-<name>-N)`, for errors.
    target: String,
    host: String,
    port: u16,
    credentials: Credentials,
    tls: Option<MysqlTls>,
}

/// One MySQLCluster on Kubernetes.
pub struct KubePlatform {
    client: Client,
    id: ClusterId,
    addresses: Arc<dyn AddressResolver>,
    connector: Arc<dyn SqlConnector>,
    cloner: Option<Arc<dyn InstanceCloner>>,
    reporter: Reporter,
    /// Per event reason, the message last recorded and the recorder that holds its Event.
    recorders: std::sync::Mutex<std::collections::HashMap<String, (String, Recorder)>>,
    metrics: ClusterMetrics,
    labels: ClusterLabels,
    /// When the current round observed the cluster (for the processing time).
    round_started: std::sync::Mutex<Option<std::time::Instant>>,
    /// Pods missing this round, and what was last reported of it.
    missing: std::sync::Mutex<MissingPods>,
    /// The Pod watch's store, if the process runs one.
    pod_cache: Option<PodCache>,
    /// Whether this platform wrote a Pod since its Pods were last listed: the store may not
    /// hold the write yet, and the next round must see it (a stale role label would be set
    /// again, a removed demote annotation read back).
    pods_written: AtomicBool,
    /// Where each round's facts are kept for the partition controller, if anywhere.
    last_rounds: Option<LastRounds>,
    /// The controller's namespace, where its password Secret keeps a rotation of MOCO's
    /// passwords; `None`: no rotation is ever in progress.
    system_namespace: Option<String>,
}

/// The reason of the engine's warning while Pods of the cluster do not exist.
pub const PODS_MISSING: &str = "PodsMissing";

/// Missing Pods as a manager saw them: in the current round (the engine's `PodsMissing`
/// message, which names the missing instances) and as last reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MissingPods {
    /// The message of this round's decision; `None` when every Pod exists.
    pub round: Option<String>,
    /// The message last recorded as an event, since Pods last went missing.
    pub reported: Option<String>,
}

impl MissingPods {
    /// A round whose decision says `message` (`None`: no Pod is missing): a new outage, or a
    /// change of the missing set, will be reported; the end of an outage forgets the report.
    pub fn observed(&mut self, message: Option<&str>) {
        self.round = message.map(str::to_owned);
        if message.is_none() {
            self.reported = None;
        }
    }

    /// Whether the status is written this round. MOCO's round does nothing while Pods are
    /// missing ("too few pods"): the status keeps what it said before the Pods went, and no
    /// condition flips while the StatefulSet re-creates a Pod.
    pub fn write_status(&self) -> bool {
        self.round.is_none()
    }

    /// Whether the `PodsMissing` event with `message` is recorded: once per missing set, not
    /// once per round.
    pub fn record(&self, message: &str) -> bool {
        self.reported.as_deref() != Some(message)
    }
}

impl fmt::Debug for KubePlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubePlatform")
            .field("cluster", &self.id)
            .field("addresses", &self.addresses)
            .field("connector", &self.connector)
            .field("cloner", &self.cloner)
            .finish_non_exhaustive()
    }
}

fn failed(target: impl Into<String>, message: impl fmt::Display) -> PortError {
    PortError::Failed {
        target: target.into(),
        message: message.to_string(),
    }
}

fn unreachable(target: impl Into<String>, error: &kube::Error) -> PortError {
    PortError::Unreachable {
        target: target.into(),
        message: error.to_string(),
    }
}

/// The ordinal of Pod `name` of StatefulSet `sts` (`<sts>-<ordinal>`).
pub fn pod_ordinal(name: &str, sts: &str) -> Option<u32> {
    name.strip_prefix(sts)?.strip_prefix('-')?.parse().ok()
}

fn pod_facts(pod: Option<&Pod>) -> PodFacts {
    let Some(pod) = pod else {
        return PodFacts::default();
    };
    let annotated = |key: &str| is_true(&pod.metadata, key);
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let role_label = match pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_ROLE))
        .map(String::as_str)
    {
        Some(ROLE_PRIMARY) => Some(Role::Primary),
        Some(ROLE_REPLICA) => Some(Role::Replica),
        _ => None,
    };
    PodFacts {
        exists: true,
        ready,
        deleting: pod.metadata.deletion_timestamp.is_some(),
        demote: annotated(ANNOTATION_DEMOTE),
        prevent_delete: annotated(ANNOTATION_PREVENT_DELETE),
        role_label,
    }
}

impl KubePlatform {
    /// The platform of `id`, reaching instances at the addresses `addresses` gives through
    /// `connector`; `cloner` copies data into empty instances (`None`: clone operations fail
    /// with a message saying so).
    pub fn new(
        client: Client,
        id: ClusterId,
        addresses: Arc<dyn AddressResolver>,
        connector: Arc<dyn SqlConnector>,
        cloner: Option<Arc<dyn InstanceCloner>>,
        metrics: ClusterMetrics,
    ) -> Self {
        let reporter = Reporter {
            controller: "moco-controller".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let labels = ClusterLabels {
            name: id.name.clone(),
            namespace: id.namespace.clone(),
        };
        KubePlatform {
            client,
            id,
            addresses,
            connector,
            cloner,
            reporter,
            recorders: std::sync::Mutex::new(std::collections::HashMap::new()),
            metrics,
            labels,
            round_started: std::sync::Mutex::new(None),
            missing: std::sync::Mutex::new(MissingPods::default()),
            pod_cache: None,
            pods_written: AtomicBool::new(false),
            last_rounds: None,
            system_namespace: None,
        }
    }

    /// Reads and advances rotations of MOCO's passwords kept in the controller's password
    /// Secret in `namespace` (see [`crate::rotation`]).
    #[must_use]
    pub fn with_system_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.system_namespace = Some(namespace.into());
        self
    }

    /// Keeps each round's facts in `rounds` (the partition controller reads how far each
    /// instance got from them).
    #[must_use]
    pub fn with_last_rounds(mut self, rounds: LastRounds) -> Self {
        self.last_rounds = Some(rounds);
        self
    }

    /// Reads the cluster's Pods from `cache` instead of listing them each round. A round
    /// still lists them while the cache has not listed them itself, and the round after this
    /// platform wrote a Pod.
    #[must_use]
    pub fn with_pod_cache(mut self, cache: PodCache) -> Self {
        self.pod_cache = Some(cache);
        self
    }

    /// The recorder of an event `reason` with `message`. kube's recorder makes a repeat of
    /// an Event of the same reason within minutes one more of its series, keeping the first
    /// one's note: a second switchover would read "changed to instance 1" again, a new set of
    /// missing Pods the old set. The same message repeats the Event (client-go's recorder,
    /// which MOCO uses, does that too); another message starts an Event of its own.
    fn recorder(&self, reason: &str, message: &str) -> Recorder {
        let mut recorders = self
            .recorders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match recorders.get(reason) {
            Some((last, recorder)) if last == message => recorder.clone(),
            _ => {
                let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
                recorders.insert(reason.to_owned(), (message.to_owned(), recorder.clone()));
                recorder
            }
        }
    }

    fn missing(&self) -> std::sync::MutexGuard<'_, MissingPods> {
        self.missing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn target(&self) -> String {
        format!("MySQLCluster {}/{}", self.id.namespace, self.id.name)
    }

    fn pod_name(&self, index: u32) -> String {
        format!("{}-{index}", self.id.prefixed())
    }

    async fn cluster(&self) -> Result<MySQLCluster, PortError> {
        let api: Api<MySQLCluster> = Api::namespaced(self.client.clone(), &self.id.namespace);
        retry(|| api.get(&self.id.name))
            .await
            .map_err(|e| unreachable(self.target(), &e))
    }

    /// The cluster's Pods by ordinal: from the cache when it can answer, unless `fresh`
    /// asks for a LIST after this platform's own writes.
    async fn pods(&self, fresh: bool) -> Result<BTreeMap<u32, Pod>, PortError> {
        let labels = self.id.labels();
        let cached = match &self.pod_cache {
            Some(cache) if !(fresh && self.pods_written.swap(false, Ordering::SeqCst)) => {
                cache.pods(&self.id.namespace, &labels)
            }
            _ => None,
        };
        let pods = match cached {
            Some(pods) => pods,
            None => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.id.namespace);
                let params = ListParams::default().labels(&label_selector(&labels));
                match retry(|| api.list(&params)).await {
                    Ok(list) => list.items,
                    Err(e) => {
                        if fresh && self.pod_cache.is_some() {
                            // Not listed after all: the next round tries again.
                            self.pods_written.store(true, Ordering::SeqCst);
                        }
                        return Err(unreachable(self.target(), &e));
                    }
                }
            }
        };
        let sts = self.id.prefixed();
        Ok(pods
            .into_iter()
            .filter_map(|p| {
                let ordinal = pod_ordinal(p.metadata.name.as_deref()?, &sts)?;
                Some((ordinal, p))
            })
            .collect())
    }

    async fn passwords(&self) -> Result<MocoPasswords, PortError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let name = self.id.prefixed();
        let target = format!("Secret {}/{name}", self.id.namespace);
        let secret = retry(|| api.get(&name))
            .await
            .map_err(|e| unreachable(target.clone(), &e))?;
        let data: BTreeMap<String, Vec<u8>> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        MocoPasswords::from_secret_data(&data)
            .map_err(|key| failed(target, format!("key {key} is missing, empty or not UTF-8")))
    }

    async fn patch_pod(&self, index: u32, patch: serde_json::Value) -> Result<(), PortError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let name = self.pod_name(index);
        let patch = Patch::Merge(patch);
        let params = PatchParams::default();
        // Before sending: a patch that fails on the way back may still have been applied.
        self.pods_written.store(true, Ordering::SeqCst);
        retry(|| api.patch(&name, &params, &patch))
            .await
            .map(|_| ())
            .map_err(|e| unreachable(format!("Pod {}/{name}", self.id.namespace), &e))
    }

    /// Where and as whom the manager reaches instance `index` of `cluster`: its address,
    /// `moco-admin`'s credentials, and with TLS the CA it trusts.
    async fn admin_endpoint(
        &self,
        cluster: &MySQLCluster,
        index: u32,
    ) -> Result<AdminEndpoint, PortError> {
        let flavor = flavor_of(cluster).unwrap_or(Flavor::Mysql);
        let pods = self.pods(false).await?;
        let target = format!("instance {index} ({})", self.pod_name(index));
        let pod = pods
            .get(&index)
            .ok_or_else(|| failed(target.clone(), "the Pod does not exist"))?;
        let (host, port) = self
            .addresses
            .manager(&self.id, index, pod, flavor)
            .ok_or_else(|| failed(target.clone(), "the Pod has no IP address yet"))?;
        let passwords = self.passwords().await?;
        let credentials = Credentials {
            user: Account::Admin.name().to_owned(),
            password: passwords.get(Account::Admin).to_owned(),
        };
        let tls = self.client_tls(cluster).await?;
        Ok(AdminEndpoint {
            target,
            host,
            port,
            credentials,
            tls,
        })
    }

    /// `moco-admin` on the primary's mysqld, as the manager reaches it, with the primary's
    /// ordinal: for the work beside clustering that only the primary may do (declared
    /// accounts and databases).
    pub async fn primary_admin(&self) -> Result<(MysqlInstance, u32), PortError> {
        let cluster = self.cluster().await?;
        let index = cluster
            .status
            .as_ref()
            .and_then(|s| u32::try_from(s.current_primary_index).ok())
            .unwrap_or(0);
        let e = self.admin_endpoint(&cluster, index).await?;
        let mut options = ConnectOptions::new(e.host.clone(), e.port, &e.credentials)
            .with_name(format!("{} at {}:{}", e.target, e.host, e.port))
            .with_timeouts(CONNECT_TIMEOUT, CALL_TIMEOUT)
            .with_max_connections(1);
        if let Some(tls) = e.tls {
            options = options.with_tls(tls);
        }
        Ok((MysqlInstance::new(options), index))
    }

    /// Removes the cluster's switchover request if it still names `index`, recording the
    /// `refusal` with it.
    async fn withdraw_switchover(
        &self,
        index: u32,
        refusal: Option<&str>,
    ) -> Result<(), PortError> {
        let api: Api<MySQLCluster> = Api::namespaced(self.client.clone(), &self.id.namespace);
        withdraw_switchover_request(&api, &self.id.name, index, refusal)
            .await
            .map_err(|e| unreachable(self.target(), &e))
    }

    /// With TLS, what the manager trusts: the CA of `moco-<name>-mysql-ca` (the CA alone,
    /// copied from cert-manager's Secret by reconcile).
    async fn client_tls(&self, cluster: &MySQLCluster) -> Result<Option<MysqlTls>, PortError> {
        if !tls_of(cluster).map_err(|e| failed(self.target(), e))? {
            return Ok(None);
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let name = self.id.mysql_ca_secret();
        let target = format!("Secret {}/{name}", self.id.namespace);
        let secret = retry(|| api.get_opt(&name))
            .await
            .map_err(|e| unreachable(target.clone(), &e))?
            .ok_or_else(|| {
                failed(
                    target.clone(),
                    "not found: the cluster has TLS, and reconcile copies the CA here once \
                     cert-manager has issued the certificate",
                )
            })?;
        let pem = secret
            .data
            .unwrap_or_default()
            .remove(TLS_CA_KEY)
            .filter(|v| !v.0.is_empty())
            .ok_or_else(|| failed(target, "key ca.crt is missing or empty"))?;
        Ok(Some(MysqlTls::new(pem.0)))
    }

    async fn external_secret(
        &self,
        cluster: &MySQLCluster,
    ) -> Result<Option<BTreeMap<String, String>>, PortError> {
        let Some(name) = &cluster.spec.replication_source_secret_name else {
            return Ok(None);
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let target = format!("Secret {}/{name}", self.id.namespace);
        let secret = retry(|| api.get(name))
            .await
            .map_err(|e| unreachable(target.clone(), &e))?;
        Ok(Some(
            secret
                .data
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(k, v)| String::from_utf8(v.0).ok().map(|v| (k, v)))
                .collect(),
        ))
    }
}

#[async_trait]
impl Platform for KubePlatform {
    async fn observe(&self) -> Result<Observation, PortError> {
        *self
            .round_started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::time::Instant::now());
        let cluster = self.cluster().await?;
        let flavor = flavor_of(&cluster).map_err(|e| failed(self.target(), e))?;
        let spec = &cluster.spec;
        let external_source = match self.external_secret(&cluster).await? {
            None => None,
            Some(data) => {
                let target = format!(
                    "Secret {}/{} (spec.replicationSourceSecretName)",
                    self.id.namespace,
                    spec.replication_source_secret_name
                        .clone()
                        .unwrap_or_default()
                );
                let host = data
                    .get("HOST")
                    .cloned()
                    .ok_or_else(|| failed(target.clone(), "key HOST is missing"))?;
                let port = data
                    .get("PORT")
                    .and_then(|p| p.trim().parse::<u16>().ok())
                    .filter(|p| *p > 0)
                    .ok_or_else(|| failed(target, "key PORT is missing or not a port number"))?;
                Some(ExternalSource { host, port })
            }
        };
        // The one conversion of a MySQLCluster's spec into the engine's facts (the webhook
        // refuses what it refuses; this guards objects admitted around it).
        let settings = EngineSettings {
            flavor,
            external_source,
            reclone_errant: false,
        };
        let spec_facts = spec_facts(&cluster, &settings).map_err(|e| failed(self.target(), e))?;
        let replicas = spec_facts.replicas;
        let pods = self.pods(true).await?;
        // A shrink's leaving instances are the Pods past `spec.replicas` that the StatefulSet
        // still holds (the reconciler keeps them until the engine lets them go).
        let listed = pods
            .keys()
            .map(|i| i + 1)
            .filter(|&n| n <= moco_core::MAX_REPLICAS)
            .max()
            .unwrap_or(0)
            .max(replicas);
        let instances = (0..listed)
            .map(|index| {
                let (host, port) = self.addresses.peers(&self.id, index);
                InstanceSlot {
                    index,
                    host,
                    port,
                    pod: pod_facts(pods.get(&index)),
                }
            })
            .collect();
        let status = cluster.status.clone().unwrap_or_default();
        Ok(Observation {
            spec: spec_facts,
            status: cluster_status(&status),
            instances,
            switchover_to: match switchover_to_of(&cluster) {
                Ok(to) => to,
                // The webhook refuses such a value; one that got past (a shrink below it, no
                // webhook) is no request, and the manager says so rather than stopping.
                Err(e) => {
                    tracing::warn!(cluster = %self.target(), error = %e, "ignoring the switchover request");
                    None
                }
            },
        })
    }

    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError> {
        let cluster = self.cluster().await?;
        let e = self.admin_endpoint(&cluster, slot.index).await?;
        Ok(self.connector.connect(
            &self.id,
            slot.index,
            &e.host,
            e.port,
            &e.credentials,
            e.tls.as_ref(),
        ))
    }

    async fn credentials(&self, account: Account) -> Result<Credentials, PortError> {
        let passwords = self.passwords().await?;
        Ok(Credentials {
            user: account.name().to_owned(),
            password: passwords.get(account).to_owned(),
        })
    }

    async fn external_credentials(&self) -> Result<Credentials, PortError> {
        let cluster = self.cluster().await?;
        let data = self
            .external_secret(&cluster)
            .await?
            .ok_or_else(|| failed(self.target(), "spec.replicationSourceSecretName is not set"))?;
        let get = |key: &str| {
            data.get(key).cloned().ok_or_else(|| {
                failed(
                    self.target(),
                    format!("the replication source Secret has no key {key}"),
                )
            })
        };
        Ok(Credentials {
            user: get("USER")?,
            password: get("PASSWORD")?,
        })
    }

    async fn rotation(&self) -> Result<Option<RotationRecord>, PortError> {
        self.read_rotation().await
    }

    async fn publish_rotation(&self, record: &RotationRecord) -> Result<(), PortError> {
        self.publish(record).await
    }

    async fn record_channel_moved(&self, index: u32) -> Result<(), PortError> {
        self.channel_moved(index).await
    }

    async fn move_readers(&self, record: &RotationRecord) -> Result<Vec<String>, PortError> {
        self.move_all(record).await
    }

    async fn finish_rotation(&self) -> Result<(), PortError> {
        self.finish().await
    }

    async fn set_role_label(&self, index: u32, role: Option<Role>) -> Result<(), PortError> {
        let value = role.map(Role::as_str);
        self.patch_pod(index, json!({"metadata": {"labels": {LABEL_ROLE: value}}}))
            .await
    }

    async fn set_prevent_delete(&self, index: u32, enabled: bool) -> Result<(), PortError> {
        let value = enabled.then_some("true");
        self.patch_pod(
            index,
            json!({"metadata": {"annotations": {ANNOTATION_PREVENT_DELETE: value}}}),
        )
        .await
    }

    async fn remove_demote(&self, index: u32) -> Result<(), PortError> {
        self.patch_pod(
            index,
            json!({"metadata": {"annotations": {ANNOTATION_DEMOTE: null}}}),
        )
        .await
    }

    async fn clear_switchover_request(
        &self,
        index: u32,
        refusal: Option<&str>,
    ) -> Result<(), PortError> {
        self.withdraw_switchover(index, refusal).await
    }

    async fn write_status(&self, status: &ClusteringStatus) -> Result<(), PortError> {
        if !self.missing().write_status() {
            return Ok(());
        }
        let api: Api<MySQLCluster> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let mut attempt = 1;
        loop {
            let mut current = retry(|| api.get_status(&self.id.name))
                .await
                .map_err(|e| unreachable(self.target(), &e))?;
            let mut recorded = current.status.clone().unwrap_or_default();
            if !merge_clustering_status(&mut recorded, status) {
                return Ok(());
            }
            current.status = Some(recorded);
            match api
                .replace_status(&self.id.name, &PostParams::default(), &current)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < STATUS_ATTEMPTS => {
                    attempt += 1;
                }
                Err(e) => return Err(unreachable(self.target(), &e)),
            }
        }
    }

    async fn record_event(&self, event: &moco_core::operation::Event) -> Result<(), PortError> {
        let missing = event.reason == PODS_MISSING;
        if missing && !self.missing().record(&event.message) {
            return Ok(());
        }
        let reference = ObjectReference {
            api_version: Some(CLUSTER_API_VERSION.into()),
            kind: Some(CLUSTER_KIND.into()),
            name: Some(self.id.name.clone()),
            namespace: Some(self.id.namespace.clone()),
            uid: Some(self.id.uid.clone()),
            ..ObjectReference::default()
        };
        let kube_event = KubeEvent {
            type_: match event.type_ {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.reason.clone(),
            note: Some(event.message.clone()),
            action: event.reason.clone(),
            secondary: None,
        };
        match event.reason.as_str() {
            "SwitchOver" => self.metrics.switchover.get_or_create(&self.labels).inc(),
            "FailOver" => self.metrics.failover.get_or_create(&self.labels).inc(),
            _ => 0,
        };
        self.recorder(&event.reason, &event.message)
            .publish(&kube_event, &reference)
            .await
            .map_err(|e| unreachable(self.target(), &e))?;
        if missing {
            self.missing().reported = Some(event.message.clone());
        }
        Ok(())
    }

    async fn clone_instance(
        &self,
        index: u32,
        donor: &ReplicationSource,
        boot_timeout: Duration,
    ) -> Result<(), PortError> {
        let Some(cloner) = &self.cloner else {
            return Err(failed(
                format!("instance {index} ({})", self.pod_name(index)),
                "cloning on Kubernetes needs the agents' client certificate \
                 (--grpc-cert-dir), which this controller could not load",
            ));
        };
        let credentials = match donor {
            ReplicationSource::Instance { .. } => CloneCredentials {
                donor: self.credentials(Account::CloneDonor).await?,
                init: self.credentials(Account::Admin).await?,
            },
            ReplicationSource::External { .. } => {
                let cluster = self.cluster().await?;
                let data = self.external_secret(&cluster).await?.unwrap_or_default();
                let get = |key: &str| {
                    data.get(key).cloned().ok_or_else(|| {
                        failed(
                            self.target(),
                            format!("the replication source Secret has no key {key}"),
                        )
                    })
                };
                CloneCredentials {
                    donor: Credentials {
                        user: get("USER")?,
                        password: get("PASSWORD")?,
                    },
                    init: Credentials {
                        user: get("INIT_USER")?,
                        password: get("INIT_PASSWORD")?,
                    },
                }
            }
        };
        cloner
            .clone_instance(&self.id, index, donor, &credentials, boot_timeout)
            .await
    }

    async fn observed(&self, facts: &ClusterFacts, decision: &Decision) {
        if let Some(rounds) = &self.last_rounds {
            rounds.record(&self.id.namespace, &self.id.name, facts);
        }
        self.missing().observed(
            decision
                .events
                .iter()
                .find(|e| e.reason == PODS_MISSING)
                .map(|e| e.message.as_str()),
        );
        let m = &self.metrics;
        let l = &self.labels;
        m.checks.get_or_create(l).inc();
        let condition = |type_: &str| {
            let on = decision
                .status
                .conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == ConditionStatus::True);
            if on { 1.0 } else { 0.0 }
        };
        m.available.get_or_create(l).set(condition("Available"));
        m.healthy.get_or_create(l).set(condition("Healthy"));
        m.replicas
            .get_or_create(l)
            .set(f64::from(facts.spec.replicas));
        m.ready_replicas
            .get_or_create(l)
            .set(f64::from(decision.status.synced_replicas));
        m.errant_replicas
            .get_or_create(l)
            .set(f64::from(decision.status.errant_replicas));
        let started = self
            .round_started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(started) = started {
            m.processing_time
                .get_or_create(l)
                .observe(started.elapsed().as_secs_f64());
        }
    }

    async fn round_failed(&self, _category: ErrorCategory) {
        self.metrics.errors.get_or_create(&self.labels).inc();
    }

    async fn round_finished(&self, timing: &RoundTiming) {
        let m = &self.metrics;
        m.round_duration
            .get_or_create(&self.labels)
            .observe(timing.took.as_secs_f64());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        m.last_round.get_or_create(&self.labels).set(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 31, defect 6): a `PodsMissing` warning and a status write every
    /// round while a Pod was missing. One event per missing set, no status write.
    #[test]
    fn missing_pods_are_reported_once_per_missing_set_and_hold_the_status() {
        let mut m = MissingPods::default();
        m.observed(None);
        assert!(m.write_status());
        let two = "waiting for the Pods of instance(s) 2 to exist again";
        let one = "waiting for the Pods of instance(s) 1 to exist again";
        m.observed(Some(two));
        assert!(!m.write_status());
        assert!(m.record(two));
        m.reported = Some(two.into());
        for _ in 0..3 {
            m.observed(Some(two));
            assert!(!m.record(two) && !m.write_status());
        }
        // Another set: reported.
        m.observed(Some(one));
        assert!(m.record(one));
        m.reported = Some(one.into());
        // Back, then missing again: reported again.
        m.observed(None);
        assert!(m.write_status());
        m.observed(Some(one));
        assert!(m.record(one));
    }

    #[test]
    fn pod_ordinals_come_from_the_name_suffix() {
        assert_eq!(pod_ordinal("moco-db-2", "moco-db"), Some(2));
        assert_eq!(pod_ordinal("moco-db-10", "moco-db"), Some(10));
        assert_eq!(pod_ordinal("moco-dbx-1", "moco-db"), None);
        assert_eq!(pod_ordinal("moco-db-x", "moco-db"), None);
    }
}
