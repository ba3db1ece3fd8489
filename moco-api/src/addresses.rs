//! Where the manager reaches each instance, and where the instances reach each other.
//!
//! In a cluster, both go through the Pod's stable DNS name (`moco-<name>-<i>.moco-<name>.<ns>.svc`,
//! which the headless Service publishes even for Pods that are not ready): the manager on the
//! admin port for MySQL (MariaDB has no admin interface, so its SQL port), replicas on the SQL
//! port. MOCO dials the Pod IP instead; the manager here keeps one connection pool per instance
//! address, and a name follows a rescheduled Pod where a cached IP would not. Drills and tests
//! that run real servers on loopback ports in place of Pods give their own table. The operator's
//! manager, the backup Jobs and `kubectl moco` all reach instances through an
//! [`AddressResolver`].

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::core::v1::Pod;
use moco_core::facts::Flavor;

use crate::cluster::{ADMIN_PORT, AGENT_PORT, ClusterId, MYSQL_PORT};

/// A host and port.
pub type Address = (String, u16);

/// Resolves instance addresses.
pub trait AddressResolver: Send + Sync + Debug {
    /// Where the manager connects to instance `index`, whose Pod is `pod`; `None` while the
    /// Pod has no address (the instance is then unreachable).
    fn manager(&self, id: &ClusterId, index: u32, pod: &Pod, flavor: Flavor) -> Option<Address>;
    /// Where the other instances (and clone recipients) reach instance `index`.
    fn peers(&self, id: &ClusterId, index: u32) -> Address;
    /// Where instance `index`'s agent listens; the host is also the name its certificate
    /// is checked for.
    fn agent(&self, id: &ClusterId, index: u32) -> Address {
        (
            id.pod_fqdn(index),
            u16::try_from(AGENT_PORT).unwrap_or(9080),
        )
    }
}

/// The Pod network: the Pod's DNS name for the manager and for peers.
#[derive(Clone, Copy, Debug, Default)]
pub struct PodNetwork;

impl AddressResolver for PodNetwork {
    fn manager(&self, id: &ClusterId, index: u32, pod: &Pod, flavor: Flavor) -> Option<Address> {
        // No IP yet: the Pod has no DNS record either.
        pod.status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .filter(|ip| !ip.is_empty())?;
        let port = match flavor {
            Flavor::Mysql => ADMIN_PORT,
            Flavor::Mariadb => MYSQL_PORT,
        };
        Some((id.pod_fqdn(index), u16::try_from(port).unwrap_or(3306)))
    }

    fn peers(&self, id: &ClusterId, index: u32) -> Address {
        (
            id.pod_fqdn(index),
            u16::try_from(MYSQL_PORT).unwrap_or(3306),
        )
    }
}

/// A fixed table of loopback addresses, for servers running outside Pods (drills).
#[derive(Clone, Debug, Default)]
pub struct StaticAddresses {
    /// Address per ordinal.
    pub by_index: BTreeMap<u32, Address>,
    /// Agent address per ordinal.
    pub agents: BTreeMap<u32, Address>,
}

impl AddressResolver for StaticAddresses {
    fn manager(&self, _: &ClusterId, index: u32, _: &Pod, _: Flavor) -> Option<Address> {
        self.by_index.get(&index).cloned()
    }

    fn peers(&self, _: &ClusterId, index: u32) -> Address {
        self.by_index
            .get(&index)
            .cloned()
            .unwrap_or_else(|| ("127.0.0.1".to_owned(), 0))
    }

    fn agent(&self, _: &ClusterId, index: u32) -> Address {
        self.agents
            .get(&index)
            .cloned()
            .unwrap_or_else(|| ("localhost".to_owned(), 0))
    }
}
