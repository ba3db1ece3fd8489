//! Which of the objects a round may delete exist, as the controller's watches see them.
//!
//! A cluster without `backupPolicyName` (most of them) never had a backup CronJob, Role,
//! RoleBinding or archiver Deployment, and a cluster below three instances no
//! PodDisruptionBudget; deleting each of them by name in every round cost the API server a
//! DELETE answered 404 apiece. A restored cluster asked for its restore Job and deleted the
//! restore's Role and RoleBinding in every round, for as long as it lived. The controller
//! watches these kinds anyway (they are owned), so the watches keep a store of each (metadata
//! only), and the read step looks there first: a round deletes (or asks for) only what the
//! store holds.
//!
//! A store may lag behind the API server. An object created a moment ago that the store does
//! not hold yet is left this round; its creation event then reaches the store (first) and the
//! controller (next), which reconciles the owner again: the lag delays the deletion to that
//! reconcile, it does not lose it. Until a store has listed its kind once, it knows nothing,
//! and the round sends the DELETE as it always did. Only objects carrying the owned watch's
//! label (`app.kubernetes.io/created-by=moco`, which the operator and MOCO put on all of them)
//! are seen.

use std::fmt;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Resource;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};

/// What a store of `K`'s metadata says of one name.
pub struct Known<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Option<Store<PartialObjectMeta<K>>>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Known<K> {
    /// Knows nothing: every object may exist.
    pub fn unknown() -> Self {
        Known { store: None }
    }

    /// An empty store and the writer that fills it.
    fn store() -> (Self, Writer<PartialObjectMeta<K>>) {
        let (reader, writer) = reflector::store();
        (
            Known {
                store: Some(reader),
            },
            writer,
        )
    }

    /// Whether `namespace/name` may exist: `false` only when the store has listed `K` and
    /// does not hold it.
    pub fn may_exist(&self, namespace: &str, name: &str) -> bool {
        let Some(store) = &self.store else {
            return true;
        };
        let synced = matches!(store.wait_until_ready().now_or_never(), Some(Ok(())));
        !synced || store.get(&ObjectRef::new(name).within(namespace)).is_some()
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Clone for Known<K> {
    fn clone(&self) -> Self {
        Known {
            store: self.store.clone(),
        }
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Default for Known<K> {
    fn default() -> Self {
        Known::unknown()
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> fmt::Debug for Known<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.store {
            None => f.write_str("unknown"),
            Some(s) => write!(f, "{} in store", s.len()),
        }
    }
}

/// The stores of the kinds a round deletes when the cluster no longer needs them. The default
/// knows nothing (every delete is sent): reconcile run without the controller, as in tests.
#[derive(Clone, Debug, Default)]
pub struct Existing {
    /// Backup CronJobs.
    pub cronjobs: Known<CronJob>,
    /// Backup Roles.
    pub roles: Known<Role>,
    /// Backup RoleBindings.
    pub role_bindings: Known<RoleBinding>,
    /// Archiver Deployments.
    pub deployments: Known<Deployment>,
    /// PodDisruptionBudgets.
    pub pdbs: Known<PodDisruptionBudget>,
    /// Backup and restore Jobs (a restored cluster's round asks for its restore Job only
    /// while one may exist).
    pub jobs: Known<Job>,
}

/// The writers of [`Existing`]'s stores, for the controller's watches of those kinds.
pub struct ExistingWriters {
    /// Fills [`Existing::cronjobs`].
    pub cronjobs: Writer<PartialObjectMeta<CronJob>>,
    /// Fills [`Existing::roles`].
    pub roles: Writer<PartialObjectMeta<Role>>,
    /// Fills [`Existing::role_bindings`].
    pub role_bindings: Writer<PartialObjectMeta<RoleBinding>>,
    /// Fills [`Existing::deployments`].
    pub deployments: Writer<PartialObjectMeta<Deployment>>,
    /// Fills [`Existing::pdbs`].
    pub pdbs: Writer<PartialObjectMeta<PodDisruptionBudget>>,
    /// Fills [`Existing::jobs`].
    pub jobs: Writer<PartialObjectMeta<Job>>,
}

impl fmt::Debug for ExistingWriters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExistingWriters").finish_non_exhaustive()
    }
}

/// Empty stores (they know nothing until their watch has listed once) and their writers.
pub fn stores() -> (Existing, ExistingWriters) {
    let (cronjobs, cronjobs_writer) = Known::store();
    let (roles, roles_writer) = Known::store();
    let (role_bindings, role_bindings_writer) = Known::store();
    let (deployments, deployments_writer) = Known::store();
    let (pdbs, pdbs_writer) = Known::store();
    let (jobs, jobs_writer) = Known::store();
    (
        Existing {
            cronjobs,
            roles,
            role_bindings,
            deployments,
            pdbs,
            jobs,
        },
        ExistingWriters {
            cronjobs: cronjobs_writer,
            roles: roles_writer,
            role_bindings: role_bindings_writer,
            deployments: deployments_writer,
            pdbs: pdbs_writer,
            jobs: jobs_writer,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    fn meta(namespace: &str, name: &str) -> PartialObjectMeta<CronJob> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": namespace}
        }))
        .unwrap()
    }

    #[test]
    fn only_a_synced_store_rules_an_object_out() {
        assert!(Known::<CronJob>::unknown().may_exist("ns", "moco-backup-db"));
        let (known, mut writer) = Known::<CronJob>::store();
        // Not listed yet: it may exist.
        assert!(known.may_exist("ns", "moco-backup-db"));
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(meta("ns", "moco-backup-a")));
        assert!(known.may_exist("ns", "moco-backup-db"), "still listing");
        writer.apply_watcher_event(&Event::InitDone);
        assert!(!known.may_exist("ns", "moco-backup-db"));
        assert!(known.may_exist("ns", "moco-backup-a"));
        assert!(!known.may_exist("other", "moco-backup-a"));
        writer.apply_watcher_event(&Event::Apply(meta("ns", "moco-backup-db")));
        assert!(known.may_exist("ns", "moco-backup-db"));
        writer.apply_watcher_event(&Event::Delete(meta("ns", "moco-backup-db")));
        assert!(!known.may_exist("ns", "moco-backup-db"));
    }
}
