//! Reconciliation and clustering, run by the replica that holds the leader Lease.
//!
//! Every replica serves the webhooks. One holds the Lease `--leader-election-id` in the
//! controller's namespace (renewed by `kube-lease-manager`); while it does, it runs the
//! MySQLCluster controller, one clustering manager per cluster and the Pod watch. When the
//! Lease is lost, all of them stop before anything else is done, so two replicas never drive
//! the same cluster; the next holder starts from what the API server and the servers report.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use moco_api::addresses::{AddressResolver, PodNetwork};
use moco_cluster::manager::ManagerConfig;
use moco_kube::api::Scope;
use moco_kube::metrics::ClusterMetrics;
use moco_kube::platform::MysqlConnector;
use moco_kube::pods::PodCache;
use tokio::sync::watch;

use crate::accounts::run_accounts_controllers;
use crate::clustering::Managers;
use crate::clustering::agent::AgentCloner;
use crate::clustering::pods::watch_pods;
use crate::config::ControllerArgs;
use crate::controller::{Shared, run_controller_in};
use crate::partition::{PartitionConfig, run_partition_controller};
use crate::reconcile::{Context, existing, wall_clock};
use crate::render::{Images, RenderSettings};

/// Seconds a Lease stays valid without renewal.
pub const LEASE_DURATION: u64 = 15;
/// Seconds before expiry the holder renews.
pub const LEASE_GRACE: u64 = 5;
/// How long in-flight reconciles may take to finish once the lead is lost or shutdown starts.
const DRAIN: Duration = Duration::from_secs(5);
/// Pause before trying again to set up leader election after an API error.
const RETRY: Duration = Duration::from_secs(5);

/// What the operator loop needs from the flags.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// The controller's namespace.
    pub namespace: String,
    /// The Lease name.
    pub lease_name: String,
    /// Who this replica is in the Lease (the Pod name, or a random id).
    pub identity: String,
    /// Rendering settings.
    pub settings: RenderSettings,
    /// ConfigMaps kept per cluster.
    pub history_limit: i32,
    /// PVC label keys to sync.
    pub pvc_sync_label_keys: Vec<String>,
    /// PVC annotation keys to sync.
    pub pvc_sync_annotation_keys: Vec<String>,
    /// Clusters reconciled at once.
    pub concurrency: u16,
    /// The clustering managers' settings (`--check-interval`).
    pub manager: ManagerConfig,
    /// The client certificate for the agents (`--grpc-cert-dir`).
    pub grpc_cert_dir: std::path::PathBuf,
    /// The namespaces watched (`--watch-namespace`).
    pub scope: Scope,
    /// The partitioned rollout's settings (`--partition-update-interval`).
    pub partition: PartitionConfig,
}

impl OperatorConfig {
    /// The configuration the flags describe.
    pub fn from_args(args: &ControllerArgs, namespace: String) -> Self {
        let r = &args.reconciler;
        let defaults = Images::default();
        let identity = std::env::var("POD_NAME")
            .ok()
            .filter(|n| !n.is_empty())
            .or_else(|| moco_adapters::mysql::random_password().ok())
            .unwrap_or_else(|| format!("moco-{}", std::process::id()));
        OperatorConfig {
            settings: RenderSettings {
                system_namespace: namespace.clone(),
                images: Images {
                    agent: r.agent_image.clone().unwrap_or(defaults.agent),
                    backup: r.backup_image.clone().unwrap_or(defaults.backup),
                    fluent_bit: r.fluent_bit_image.clone().unwrap_or(defaults.fluent_bit),
                    mysqld_exporter: r
                        .mysqld_exporter_image
                        .clone()
                        .unwrap_or(defaults.mysqld_exporter),
                },
                default_security_context: !r.disable_default_security_context,
                latest_reconciler_version: r.latest_reconciler_version,
                pre_stop_seconds: r.pre_stop.mysqld_pre_stop_seconds,
            },
            namespace,
            lease_name: r.leader_election_id.clone(),
            identity,
            history_limit: r.mysql_configmap_history_limit,
            pvc_sync_label_keys: r.pvc_sync_label_keys.clone(),
            pvc_sync_annotation_keys: r.pvc_sync_annotation_keys.clone(),
            concurrency: u16::try_from(r.max_concurrent_reconciles.max(1)).unwrap_or(u16::MAX),
            manager: ManagerConfig {
                check_interval: r.check_interval,
                ..ManagerConfig::default()
            },
            grpc_cert_dir: r.grpc_cert_dir.clone(),
            scope: Scope::from_flag(&r.watch_namespace),
            partition: PartitionConfig {
                interval: r.partition_update_interval,
                ..PartitionConfig::default()
            },
        }
    }
}

/// Waits until `rx` holds `want`, or its sender is gone (returns false then).
async fn wait_for(rx: &mut watch::Receiver<bool>, want: bool) -> bool {
    rx.wait_for(|v| *v == want).await.is_ok()
}

/// Runs while this replica leads: the controller, the managers, the Pod watch and the
/// partition controller, until `leading` turns false or `shutdown` turns true.
pub async fn lead(
    client: Client,
    config: &OperatorConfig,
    metrics: ClusterMetrics,
    mut leading: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let addresses: Arc<dyn AddressResolver> = Arc::new(PodNetwork);
    let accounts_addresses = addresses.clone();
    let cloner = AgentCloner::new(
        client.clone(),
        config.grpc_cert_dir.clone(),
        addresses.clone(),
    );
    let (pods, pod_store) = PodCache::new(&config.scope);
    let (existing, existing_stores) = existing::stores();
    let managers = Arc::new(
        Managers::new(
            client.clone(),
            addresses,
            Arc::new(MysqlConnector::default()),
            Some(Arc::new(cloner)),
            config.manager.clone(),
            metrics.clone(),
        )
        .with_pod_cache(pods)
        .with_system_namespace(config.settings.system_namespace.clone()),
    );
    let shared = Arc::new(Shared {
        ctx: Context {
            client: client.clone(),
            settings: config.settings.clone(),
            history_limit: config.history_limit,
            pvc_sync_label_keys: config.pvc_sync_label_keys.clone(),
            pvc_sync_annotation_keys: config.pvc_sync_annotation_keys.clone(),
            metrics: metrics.clone(),
            now: Arc::new(wall_clock),
            existing,
        },
        clustering: managers.clone(),
    });
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let mut partition_stop = stop_tx.subscribe();
    let partition = run_partition_controller(
        &config.scope,
        client.clone(),
        managers.clone(),
        metrics.clone(),
        config.partition,
        async move {
            let _ = partition_stop.wait_for(|v| *v).await;
        },
    );
    let controller = run_controller_in(
        &config.scope,
        shared,
        existing_stores,
        config.concurrency,
        async move {
            let _ = stop_rx.wait_for(|v| *v).await;
        },
    );
    let mut accounts_stop = stop_tx.subscribe();
    let accounts = run_accounts_controllers(
        &config.scope,
        client.clone(),
        accounts_addresses,
        metrics.clone(),
        async move {
            let _ = accounts_stop.wait_for(|v| *v).await;
        }
        .shared(),
    );
    let controller = async move {
        tokio::join!(controller, partition, accounts);
    };
    tokio::pin!(controller);
    let stop = async {
        tokio::select! {
            _ = wait_for(&mut leading, false) => {}
            _ = wait_for(&mut shutdown, true) => {}
        }
    };
    tokio::select! {
        () = &mut controller => {}
        () = stop => {
            // Let in-flight rounds finish, but never wait on them without limit: the next
            // leader may already be acting.
            let _ = stop_tx.send(true);
            if tokio::time::timeout(DRAIN, &mut controller).await.is_err() {
                tracing::warn!("reconciles still running {DRAIN:?} after losing the lead; dropped");
            }
        }
        () = watch_pods(client, &config.scope, managers.clone(), pod_store) => {}
    }
    managers.stop_all();
}

/// Takes part in leader election until `shutdown` turns true, leading whenever it holds the
/// Lease. API errors while setting up are retried.
pub async fn run_operator(
    client: Client,
    config: OperatorConfig,
    metrics: ClusterMetrics,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        let built = LeaseManagerBuilder::new(client.clone(), &config.lease_name)
            .with_namespace(&config.namespace)
            .with_identity(&config.identity)
            .with_duration(LEASE_DURATION)
            .with_grace(LEASE_GRACE)
            .build()
            .await;
        let lease = match built {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, lease = %config.lease_name, "cannot set up leader election; retrying");
                tokio::select! {
                    () = tokio::time::sleep(RETRY) => continue,
                    _ = wait_for(&mut shutdown, true) => return,
                }
            }
        };
        let (mut leading, task) = lease.watch().await;
        loop {
            tokio::select! {
                // Shutdown first: after `lead` returns because of it, the Lease is still held.
                biased;
                _ = wait_for(&mut shutdown, true) => {
                    drop(leading);
                    let _ = task.await;
                    return;
                }
                held = wait_for(&mut leading, true) => {
                    if !held {
                        break;
                    }
                }
            }
            tracing::info!(identity = %config.identity, lease = %config.lease_name, "leading: reconciling MySQLClusters");
            lead(
                client.clone(),
                &config,
                metrics.clone(),
                leading.clone(),
                shutdown.clone(),
            )
            .await;
            tracing::info!("no longer leading: reconciliation and clustering stopped");
        }
        // The lease task ended (an API error it could not recover from): start over.
        match task.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "leader election failed; retrying"),
            Err(e) => tracing::warn!(error = %e, "leader election task failed; retrying"),
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            _ = wait_for(&mut shutdown, true) => return,
        }
    }
}
