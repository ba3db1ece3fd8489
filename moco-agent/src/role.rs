//! Which role a MariaDB instance starts in. `init_rpl_role = SLAVE` makes crash recovery roll
//! back the transactions at the end of the binary log that no replica acknowledged and
//! truncate the log there, so an ex-primary that crashed comes back without the commits the
//! cluster never had (measured: 1 kill -9 in 5 leaves one). It must not be used on an
//! instance that stays the primary (MDEV-33465: it could drop what replicas already hold).
//!
//! `moco init` decides it when the Pod starts, from the primary the MySQLCluster records: an
//! instance that is not it starts as a replica. While the Pod runs, the agent keeps the line
//! in step with what its server is ([`keep_replica_role`]), because a crashed mysqld container
//! is restarted by the kubelet without the init container: a crashed replica then comes back
//! as a replica. A crashed *primary* restarted that way comes back in the default role, as
//! MOCO's do: the agent cannot know in time whether the operator failed over.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

/// The option line.
pub const REPLICA_ROLE: &str = "init_rpl_role = SLAVE";

/// `snippet` with the replica role line when `replica`, without it otherwise.
pub fn with_replica_role(snippet: &str, replica: bool) -> String {
    let mut out: String = snippet
        .lines()
        .filter(|l| l.trim() != REPLICA_ROLE)
        .map(|l| format!("{l}\n"))
        .collect();
    if replica {
        out.push_str(REPLICA_ROLE);
        out.push('\n');
    }
    out
}

/// The MySQLCluster's name from a Pod's (`moco-<cluster>-<ordinal>`).
pub fn cluster_of(pod_name: &str) -> Option<&str> {
    let (sts, ordinal) = pod_name.rsplit_once('-')?;
    ordinal.parse::<u32>().ok()?;
    sts.strip_prefix("moco-").filter(|n| !n.is_empty())
}

/// The primary the MySQLCluster records, read with the Pod's own credentials (the operator
/// lets the Pods read their cluster); `None` when it records none yet or cannot be read, which
/// is logged: the instance then starts as MOCO's do.
pub async fn recorded_primary(pod_name: &str) -> Option<u32> {
    let name = cluster_of(pod_name)?;
    let lookup = async {
        let config = kube::Config::infer().await.map_err(|e| e.to_string())?;
        let namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        // Only the status is read, untyped: a spec this build does not know must not stop a
        // Pod from starting.
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("moco.cybozu.com", "v1beta2", "MySQLCluster"),
            "mysqlclusters",
        );
        let api: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &resource);
        api.get(name).await.map_err(|e| e.to_string())
    };
    let cluster = match tokio::time::timeout(Duration::from_secs(10), lookup).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::warn!(cluster = name, error = %e, "cannot read the MySQLCluster; starting in the default role");
            return None;
        }
        Err(_) => {
            tracing::warn!(
                cluster = name,
                "reading the MySQLCluster timed out; starting in the default role"
            );
            return None;
        }
    };
    let status = cluster.data.get("status")?;
    // No condition yet: clustering never ran, so no primary was chosen.
    if status
        .get("conditions")
        .and_then(|c| c.as_array())
        .is_none_or(Vec::is_empty)
    {
        return None;
    }
    status
        .get("currentPrimaryIndex")
        .and_then(serde_json::Value::as_u64)
        .and_then(|i| u32::try_from(i).ok())
}

/// Whether a server that is `read_only` and has replication configured (or not) restarts as a
/// replica. A writable server never does, whatever replication it still has configured: the
/// role would let a primary drop what its replicas hold (MDEV-33465).
pub fn starts_as_replica(read_only: bool, replicating: bool) -> bool {
    read_only && replicating
}

/// How often the agent looks at its server's role.
const ROLE_CHECK: Duration = Duration::from_secs(5);

/// Keeps the replica role line of `snippet` (`<conf-dir>/my.cnf`) in step with `server`:
/// present while it is a read-only replica, absent while it is writable. MariaDB only; runs
/// until aborted.
pub async fn keep_replica_role(server: Arc<moco_adapters::mysql::MysqlInstance>, snippet: PathBuf) {
    loop {
        tokio::time::sleep(ROLE_CHECK).await;
        let Ok((dialect, read_only, replica)) = server.replication_view().await else {
            continue;
        };
        if dialect.flavor() != moco_core::facts::Flavor::Mariadb {
            return;
        }
        let Ok(text) = std::fs::read_to_string(&snippet) else {
            continue;
        };
        let wanted = with_replica_role(&text, starts_as_replica(read_only, replica.is_some()));
        if wanted != text {
            match crate::layout::write_atomically(&snippet, wanted.as_bytes()) {
                Ok(()) => tracing::info!(
                    replica = read_only,
                    snippet = %snippet.display(),
                    "the next start of mysqld follows the role it has now"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, snippet = %snippet.display(), "cannot update the role line")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_added_once_and_removed() {
        let base = "[mariadbd]\nserver_id = 11\n";
        let replica = with_replica_role(base, true);
        assert_eq!(
            replica,
            "[mariadbd]\nserver_id = 11\ninit_rpl_role = SLAVE\n"
        );
        assert_eq!(with_replica_role(&replica, true), replica);
        assert_eq!(with_replica_role(&replica, false), base);
    }

    #[test]
    fn only_a_read_only_replicating_server_restarts_as_a_replica() {
        assert!(starts_as_replica(true, true));
        assert!(
            !starts_as_replica(false, true),
            "a primary with stale replication"
        );
        assert!(!starts_as_replica(true, false), "not replicating yet");
        assert!(!starts_as_replica(false, false));
    }

    #[test]
    fn cluster_names_from_pod_names() {
        assert_eq!(cluster_of("moco-db-2"), Some("db"));
        assert_eq!(cluster_of("moco-my-db-10"), Some("my-db"));
        assert_eq!(cluster_of("moco--1"), None);
        assert_eq!(cluster_of("db-1"), None);
        assert_eq!(cluster_of("moco-db"), None);
    }
}
