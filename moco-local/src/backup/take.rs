//! Taking a physical backup of a local cluster: mariadb-backup's copy of a ready replica (the
//! primary only when there is none, as MOCO chooses), under MOCO's key layout
//! `moco/<namespace>/<name>/<YYYYMMDD-hhmmss>/` with the namespace `local`.

use std::path::Path;

use moco_adapters::instance::clone::BackupSource;
use moco_adapters::mysql::MysqlInstance;
use moco_adapters::mysqld::tool_beside;
use moco_backup::Bucket;
use moco_backup::layout;
use moco_backup::mariadb::physical::{self, Manifest as BackupManifest};
use moco_cluster::ports::MysqlPort as _;
use moco_core::facts::Flavor;
use moco_core::moco_accounts::Account;

use super::error::LocalBackupError;
use crate::platform::secret::Secret;
use crate::platform::snapshot::ClusterSnapshot;
use crate::platform::sql::admin_options;
use crate::platform::tls;
use crate::platform::{Layout, Manifest};

/// The namespace part of the keys of local clusters.
pub const LOCAL_NAMESPACE: &str = "local";

/// A backup taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    /// The instance it was taken from.
    pub source_index: u32,
    /// Its prefix in the bucket.
    pub prefix: String,
    /// Its manifest.
    pub manifest: BackupManifest,
}

/// The prefix of the backups of cluster `name`.
pub fn cluster_prefix(name: &str) -> String {
    format!("moco/{LOCAL_NAMESPACE}/{name}")
}

/// The instance to back up: the ready, reachable, non-errant replica least behind, else the
/// primary when it is ready.
pub fn choose_source(snapshot: &ClusterSnapshot) -> Option<u32> {
    let usable = |i: &&crate::platform::snapshot::InstanceSnapshot| {
        i.ready && i.reachable && !i.errant && !i.held_down
    };
    snapshot
        .instances
        .iter()
        .filter(usable)
        .filter(|i| i.role == "replica" && i.replication_error.is_none())
        .min_by_key(|i| (i.lag.unwrap_or(u64::MAX), i.index))
        .or_else(|| {
            snapshot
                .instances
                .iter()
                .filter(usable)
                .find(|i| i.index == snapshot.current_primary_index)
        })
        .map(|i| i.index)
}

/// Backs up the cluster in `dir` into `bucket`, named by the second `clock` gives when it
/// starts, reading the tool's stream at most at `max_rate`.
pub async fn backup(
    dir: &Path,
    bucket: &Bucket,
    clock: &dyn moco_cluster::ports::Clock,
    max_rate: Option<&moco_core::resources::ByteRate>,
) -> Result<Taken, LocalBackupError> {
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.display().to_string(),
        message,
    };
    let layout = Layout::new(dir);
    let manifest = Manifest::load(&layout).map_err(|e| fail(e.to_string()))?;
    if manifest.flavor != Flavor::Mariadb {
        return Err(fail(
            "a MySQL cluster: physical backups use MariaDB's mariadb-backup, and MOCO's MySQL \
             format (mysqlsh) is not built yet"
                .to_owned(),
        ));
    }
    let secret = Secret::load(&layout).map_err(|e| fail(e.to_string()))?;
    let snapshot = ClusterSnapshot::load(&layout)
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| {
            fail("the manager has not observed the cluster yet: is it up?".to_owned())
        })?;
    let index = choose_source(&snapshot).ok_or_else(|| {
        fail("no instance is ready to be backed up (see `moco local status`)".to_owned())
    })?;
    let tool = tool_beside(&manifest.server, "mariadb-backup")
        .or_else(|_| tool_beside(&manifest.server, "mariabackup"))
        .map_err(|e| fail(e.to_string()))?;
    let port = manifest.instance_port(index);
    let admin = MysqlInstance::new(
        admin_options(&manifest, &layout, index, &secret).map_err(|e| fail(e.to_string()))?,
    );
    let state = admin
        .executed_gtid()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let _ = admin.disconnect().await;
    let instance_dir = layout.instance_dir(index);
    let source = BackupSource {
        tool,
        defaults_file: layout.mycnf(index),
        datadir: layout.datadir(index),
        host: "127.0.0.1".to_owned(),
        port,
        credentials: secret.credentials(Account::CloneDonor),
        ssl_ca: tls::ca_file(&layout, &manifest),
        scratch_dir: instance_dir.join("backup-scratch"),
        log: instance_dir.join("backup.log"),
        nice: moco_adapters::instance::clone::BACKUP_NICE,
    };
    moco_adapters::instance::clone::wipe_dir(&source.scratch_dir)
        .map_err(|e| fail(e.to_string()))?;
    let (_, prefix) = layout::free_folder(
        bucket,
        &format!("{}/", cluster_prefix(&manifest.name)),
        clock,
    )
    .await?;
    let taken = physical::backup(&source, state, bucket, &prefix, max_rate).await?;
    let _ = std::fs::remove_dir_all(&source.scratch_dir);
    Ok(Taken {
        source_index: index,
        prefix,
        manifest: taken,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::snapshot::InstanceSnapshot;
    use moco_backup::layout::backup_time_text;
    use moco_core::time::Timestamp;

    #[test]
    fn folder_names_are_mocos() {
        let t = Timestamp::parse("2026-11-23T22:15:07Z").unwrap();
        assert_eq!(backup_time_text(t), "20261123-221507");
        assert_eq!(cluster_prefix("db"), "moco/local/db");
    }

    fn instance(index: u32, role: &str, lag: Option<u64>) -> InstanceSnapshot {
        InstanceSnapshot {
            index,
            role: role.into(),
            port: 0,
            pid: Some(1),
            reachable: true,
            ready: true,
            executed_gtids: String::new(),
            lag,
            errant: false,
            read_only: Some(role != "primary"),
            source: None,
            replication_error: None,
            held_down: false,
        }
    }

    #[test]
    fn the_source_is_the_replica_least_behind_else_the_primary() {
        let mut s: ClusterSnapshot = serde_json::from_value(serde_json::json!({
            "updatedAt": "", "updatedAtMs": 0, "managerPid": 1, "state": "Healthy",
            "action": "none", "currentPrimaryIndex": 0, "candidates": [],
            "endpoints": {"primary": "", "replica": ""}, "conditions": [], "flavor": "mariadb",
            "instances": [], "lastError": null
        }))
        .unwrap();
        s.instances = vec![
            instance(0, "primary", None),
            instance(1, "replica", Some(5)),
            instance(2, "replica", Some(0)),
        ];
        assert_eq!(choose_source(&s), Some(2));
        s.instances[2].errant = true;
        assert_eq!(choose_source(&s), Some(1));
        s.instances[1].replication_error = Some("1236".into());
        assert_eq!(choose_source(&s), Some(0), "no usable replica: the primary");
        s.instances[0].ready = false;
        assert_eq!(choose_source(&s), None);
    }
}
