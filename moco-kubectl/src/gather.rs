//! The facts the operator would see, gathered by the operator's own code without acting.
//!
//! [`KubePlatform`] observes the MySQLCluster and its Pods and builds each instance's SQL port
//! exactly as the operator does, and [`Manager::gather`] probes every instance into
//! [`ClusterFacts`]. The manager is only ever asked to gather (never `run_once`), and the
//! platform it gets is wrapped in [`ReadOnly`], whose writes fail and whose events are kept
//! instead of recorded: gathering reports an instance that refuses the operator's account as
//! an event, and `kubectl moco` must not write one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use moco_api::addresses::{Address, AddressResolver, PodNetwork};
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::manager::{Manager, ManagerConfig};
use moco_cluster::ports::{Credentials, InstanceSlot, MysqlPort, Observation, Platform, PortError};
use moco_core::facts::{ClusterFacts, Flavor, Role};
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, ReplicationSource};
use moco_core::status::ClusteringStatus;
use moco_kube::metrics::ClusterMetrics;
use moco_kube::platform::{KubePlatform, MysqlConnector};

use crate::cli::AddressOverride;
use crate::context::Context;
use crate::error::Error;
use crate::objects;

/// Where the manager reaches each instance: the operator's Pod network, except for the
/// instances given with `--address`. The addresses instances give each other (the facts'
/// `host`/`port`, replication sources) stay the Pod DNS names, as in the operator's facts.
#[derive(Clone, Debug, Default)]
pub struct Addresses {
    /// `--address` by instance index.
    pub overrides: BTreeMap<u32, Address>,
}

impl Addresses {
    /// The overrides of `--address`, refusing an index given twice.
    pub fn from_flags(flags: &[AddressOverride]) -> Result<Self, Error> {
        let mut overrides = BTreeMap::new();
        for a in flags {
            if overrides
                .insert(a.index, (a.host.clone(), a.port))
                .is_some()
            {
                return Err(Error::DuplicateAddress { index: a.index });
            }
        }
        Ok(Addresses { overrides })
    }
}

impl AddressResolver for Addresses {
    fn manager(&self, id: &ClusterId, index: u32, pod: &Pod, flavor: Flavor) -> Option<Address> {
        match self.overrides.get(&index) {
            Some(address) => Some(address.clone()),
            None => PodNetwork.manager(id, index, pod, flavor),
        }
    }

    fn peers(&self, id: &ClusterId, index: u32) -> Address {
        PodNetwork.peers(id, index)
    }
}

/// A platform that reads through `inner` and never writes: label, annotation and status
/// changes and clones fail, events are kept in memory.
#[derive(Debug)]
pub struct ReadOnly<P> {
    inner: P,
    events: Mutex<Vec<Event>>,
}

impl<P> ReadOnly<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        ReadOnly {
            inner,
            events: Mutex::new(Vec::new()),
        }
    }

    /// The events the manager asked to record.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn refused(what: &str) -> PortError {
    PortError::Failed {
        target: "kubectl moco".to_owned(),
        message: format!("refusing to {what}: this command only reads"),
    }
}

#[async_trait]
impl<P: Platform> Platform for ReadOnly<P> {
    async fn observe(&self) -> Result<Observation, PortError> {
        self.inner.observe().await
    }

    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError> {
        self.inner.mysql(slot).await
    }

    async fn credentials(&self, account: Account) -> Result<Credentials, PortError> {
        self.inner.credentials(account).await
    }

    async fn external_credentials(&self) -> Result<Credentials, PortError> {
        self.inner.external_credentials().await
    }

    async fn set_role_label(&self, _: u32, _: Option<Role>) -> Result<(), PortError> {
        Err(refused("set a role label"))
    }

    async fn set_prevent_delete(&self, _: u32, _: bool) -> Result<(), PortError> {
        Err(refused("change the prevent-delete annotation"))
    }

    async fn remove_demote(&self, _: u32) -> Result<(), PortError> {
        Err(refused("remove the demote annotation"))
    }

    async fn clear_switchover_request(&self, _: u32, _: Option<&str>) -> Result<(), PortError> {
        Err(refused("withdraw a switchover request"))
    }

    async fn write_status(&self, _: &ClusteringStatus) -> Result<(), PortError> {
        Err(refused("write the status"))
    }

    async fn record_event(&self, event: &Event) -> Result<(), PortError> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        Ok(())
    }

    async fn clone_instance(
        &self,
        _: u32,
        _: &ReplicationSource,
        _: Duration,
    ) -> Result<(), PortError> {
        Err(refused("clone an instance"))
    }
}

/// What gathering found.
#[derive(Debug, Clone)]
pub struct Gathered {
    /// The facts, as the operator's manager would build them now.
    pub facts: ClusterFacts,
    /// Events the operator would record while gathering (an instance refusing its account).
    pub events: Vec<Event>,
}

/// Gathers the facts of `cluster` (as read from the API) the way the operator's manager does,
/// reaching the instances at `addresses`.
pub async fn gather(
    ctx: &Context,
    cluster: &MySQLCluster,
    addresses: Addresses,
) -> Result<Gathered, Error> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let id = ClusterId::of(cluster).map_err(|e| Error::Cluster {
        namespace: ctx.namespace.clone(),
        cluster: name.clone(),
        message: e.to_string(),
    })?;
    let replicas = objects::replicas(cluster);
    if let Some(index) = addresses.overrides.keys().find(|i| **i >= replicas) {
        return Err(Error::AddressOutOfRange {
            index: *index,
            namespace: ctx.namespace.clone(),
            cluster: name,
            replicas,
            last: replicas.saturating_sub(1),
        });
    }
    let platform = Arc::new(ReadOnly::new(KubePlatform::new(
        ctx.client.clone(),
        id,
        Arc::new(addresses),
        Arc::new(MysqlConnector::default()),
        None,
        ClusterMetrics::default(),
    )));
    let manager = Manager::new(
        Arc::clone(&platform) as Arc<dyn Platform>,
        ManagerConfig::default(),
    );
    let result = manager.gather().await;
    // Dropping the manager stops the health watches of the instances.
    drop(manager);
    let (_, facts) = result.map_err(|source| Error::Gather {
        namespace: ctx.namespace.clone(),
        cluster: name,
        source: Box::new(source),
    })?;
    Ok(Gathered {
        facts,
        events: platform.events(),
    })
}
