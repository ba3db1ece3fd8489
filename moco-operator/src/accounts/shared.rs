//! What the accounts controllers' steps share, so that a cluster's thousand objects cost one
//! connection and no API read per step: the primary's connection, the password Secrets last
//! read, and which users name which Secret.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Secret;
use moco_adapters::mysql::MysqlInstance;
use moco_api::mysqlcluster::MySQLCluster;

/// `(namespace, name)`.
type Key = (String, String);

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_owned(), name.to_owned())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One cluster's primary as last connected.
struct Primary {
    /// The cluster's uid: a cluster deleted and made again under its name is another.
    uid: Option<String>,
    /// The ordinal of the primary connected to.
    index: u32,
    instance: Arc<MysqlInstance>,
}

/// Each cluster's `moco-admin` connection to its primary (a pool of one), shared by the
/// cluster's objects. It is used while the cluster's status names the same primary; a step
/// that fails to reach it forgets it, and the next connects again (a Pod with a new address,
/// a rotated password).
#[derive(Default)]
pub(super) struct Primaries(Mutex<HashMap<Key, Primary>>);

fn of(cluster: &MySQLCluster) -> (Key, Option<String>, Option<u32>) {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let index = cluster
        .status
        .as_ref()
        .and_then(|s| u32::try_from(s.current_primary_index).ok());
    ((namespace, name), cluster.metadata.uid.clone(), index)
}

impl Primaries {
    /// The shared connection to `cluster`'s primary, if it is the one its status names.
    pub(super) fn get(&self, cluster: &MySQLCluster) -> Option<Arc<MysqlInstance>> {
        let (key, uid, index) = of(cluster);
        let map = lock(&self.0);
        let p = map.get(&key)?;
        (p.uid == uid && Some(p.index) == index).then(|| p.instance.clone())
    }

    /// Shares `instance`, the primary `index` of `cluster`; what it replaces is closed once
    /// the steps using it are done.
    pub(super) fn put(
        &self,
        cluster: &MySQLCluster,
        index: u32,
        instance: MysqlInstance,
    ) -> Arc<MysqlInstance> {
        let (key, uid, _) = of(cluster);
        let instance = Arc::new(instance);
        let old = lock(&self.0).insert(
            key,
            Primary {
                uid,
                index,
                instance: instance.clone(),
            },
        );
        close(old);
        instance
    }

    /// Forgets the connection of cluster `name` of `namespace`.
    pub(super) fn forget(&self, namespace: &str, name: &str) {
        let old = lock(&self.0).remove(&key(namespace, name));
        close(old);
    }

    /// How many clusters have a shared connection.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.0).len()
    }
}

/// Closes a connection no step uses any more; one still in use closes when its last step
/// drops it.
fn close(old: Option<Primary>) {
    if let Some(instance) = old.and_then(|p| Arc::into_inner(p.instance))
        && let Ok(handle) = tokio::runtime::Handle::try_current()
    {
        handle.spawn(async move {
            let _ = instance.disconnect().await;
        });
    }
}

/// The password Secrets last read, by namespace and name.
#[derive(Default)]
pub(super) struct Passwords(Mutex<HashMap<Key, Secret>>);

impl Passwords {
    /// The Secret read last, if its resourceVersion is `version`.
    pub(super) fn get(&self, namespace: &str, name: &str, version: &str) -> Option<Secret> {
        lock(&self.0)
            .get(&key(namespace, name))
            .filter(|s| s.metadata.resource_version.as_deref() == Some(version))
            .cloned()
    }

    /// Keeps `secret` as read.
    pub(super) fn put(&self, namespace: &str, name: &str, secret: Secret) {
        lock(&self.0).insert(key(namespace, name), secret);
    }

    /// Forgets the Secret (deleted).
    pub(super) fn forget(&self, namespace: &str, name: &str) {
        lock(&self.0).remove(&key(namespace, name));
    }
}

/// Which users (by name) name each Secret (by namespace and name), as their last steps saw
/// them. An entry left by a user that is gone without its cleanup only wakes a step that finds
/// nothing to do.
#[derive(Default)]
pub(super) struct SecretIndex(Mutex<Index>);

#[derive(Default)]
struct Index {
    /// Secret → the users that name it.
    users: HashMap<Key, BTreeSet<String>>,
    /// User → the Secret it names.
    secret: HashMap<Key, String>,
}

impl Index {
    fn unlink(&mut self, namespace: &str, user: &str) {
        if let Some(old) = self.secret.remove(&key(namespace, user)) {
            let k = key(namespace, &old);
            if let Some(users) = self.users.get_mut(&k) {
                users.remove(user);
                if users.is_empty() {
                    self.users.remove(&k);
                }
            }
        }
    }
}

impl SecretIndex {
    /// Records that user `user` of `namespace` names Secret `secret`, and no other.
    pub(super) fn record(&self, namespace: &str, user: &str, secret: &str) {
        let mut index = lock(&self.0);
        if index.secret.get(&key(namespace, user)).map(String::as_str) == Some(secret) {
            return;
        }
        index.unlink(namespace, user);
        index.secret.insert(key(namespace, user), secret.to_owned());
        index
            .users
            .entry(key(namespace, secret))
            .or_default()
            .insert(user.to_owned());
    }

    /// Forgets user `user` of `namespace` (deleted).
    pub(super) fn remove(&self, namespace: &str, user: &str) {
        lock(&self.0).unlink(namespace, user);
    }

    /// The users of `namespace` that name Secret `secret`.
    pub(super) fn users(&self, namespace: &str, secret: &str) -> Vec<String> {
        lock(&self.0)
            .users
            .get(&key(namespace, secret))
            .map(|u| u.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_found_under_the_secret_it_names_last_and_only_there() {
        let index = SecretIndex::default();
        index.record("ns", "app", "s1");
        index.record("ns", "reader", "s1");
        index.record("other", "app", "s1");
        assert_eq!(index.users("ns", "s1"), ["app", "reader"]);
        index.record("ns", "app", "s2");
        assert_eq!(index.users("ns", "s1"), ["reader"]);
        assert_eq!(index.users("ns", "s2"), ["app"]);
        assert_eq!(index.users("other", "s1"), ["app"]);
        index.remove("ns", "reader");
        assert!(index.users("ns", "s1").is_empty());
        assert!(!lock(&index.0).users.contains_key(&key("ns", "s1")));
    }

    fn cluster(uid: &str, primary: i64) -> MySQLCluster {
        let mut value = moco_testkit::cluster("db", 3);
        value["metadata"]["uid"] = uid.into();
        value["status"] = serde_json::json!({"currentPrimaryIndex": primary});
        serde_json::from_value(value).unwrap()
    }

    #[tokio::test]
    async fn a_shared_primary_serves_only_the_cluster_and_primary_it_was_made_for() {
        let primaries = Primaries::default();
        let instance = || {
            MysqlInstance::new(moco_adapters::mysql::ConnectOptions::new(
                "127.0.0.1",
                1,
                &moco_cluster::ports::Credentials {
                    user: "moco-admin".into(),
                    password: "x".into(),
                },
            ))
        };
        assert!(primaries.get(&cluster("u1", 0)).is_none());
        let shared = primaries.put(&cluster("u1", 0), 0, instance());
        let got = primaries.get(&cluster("u1", 0)).unwrap();
        assert!(Arc::ptr_eq(&shared, &got));
        // Another primary, another cluster under the same name: not shared.
        assert!(primaries.get(&cluster("u1", 1)).is_none());
        assert!(primaries.get(&cluster("u2", 0)).is_none());
        primaries.forget("default", "db");
        assert!(primaries.get(&cluster("u1", 0)).is_none());
        assert_eq!(primaries.len(), 0);
    }
}
