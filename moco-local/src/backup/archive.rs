//! Binlog archiving for a `moco local` cluster, opt-in: `archive.json` in the cluster
//! directory turns it on (`moco local backup archive`), and the manager process runs
//! [`run`] beside the cluster manager: each round archives from the instance the manager last
//! recorded as primary (`state.json`), so archiving follows a switchover or a failover. Each
//! round's outcome goes to `archive-status.json` for `moco local backup list` and for tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::platform::Layout;
use crate::platform::Manifest;
use crate::platform::files::{read_json_opt, write_json};
use crate::platform::secret::Secret;
use crate::platform::snapshot::ClusterSnapshot;
use moco_adapters::mysql::MysqlInstance;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use moco_backup::BucketSpec;
use moco_backup::mariadb::binlog::fetch::BinlogFiles;
use moco_backup::mariadb::binlog::{Archiver, Progress};

use super::take::cluster_prefix;

/// The default pause between rounds: the recovery point is about this plus an upload.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(5);

/// `archive.json`: archiving is on while it exists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArchiveConfig {
    /// Where the binlogs go (the bucket URL of `moco local backup --to`).
    pub url: String,
    /// Seconds between rounds.
    pub every_seconds: u64,
}

/// `archive-status.json`: the last round.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveStatus {
    /// When the last round ended (Unix second).
    pub round_at: i64,
    /// Rounds run since the manager started.
    pub rounds: u64,
    /// The instance archived from.
    pub primary_index: Option<u32>,
    /// The archive's last progress mark.
    pub progress: Option<Progress>,
    /// Files stored since the manager started.
    pub files_stored: u64,
    /// Why the last round failed, when it did.
    pub last_error: Option<String>,
}

/// Where the configuration is.
pub fn config_path(layout: &Layout) -> PathBuf {
    layout.root().join("archive.json")
}

/// Where the status is.
pub fn status_path(layout: &Layout) -> PathBuf {
    layout.root().join("archive-status.json")
}

/// The configuration, when archiving is on.
pub fn config(layout: &Layout) -> Result<Option<ArchiveConfig>, String> {
    read_json_opt(&config_path(layout)).map_err(|e| e.to_string())
}

/// The last round's status.
pub fn status(layout: &Layout) -> Option<ArchiveStatus> {
    read_json_opt(&status_path(layout)).ok().flatten()
}

/// Archives until `shutdown` turns true, while `archive.json` exists (read each round, so
/// turning archiving on or off needs no restart).
pub async fn run(layout: Layout, mut shutdown: watch::Receiver<bool>) {
    let mut current: Option<(ArchiveConfig, Archiver)> = None;
    let mut status = ArchiveStatus::default();
    loop {
        let every = match config(&layout) {
            Ok(Some(config)) => {
                let every = Duration::from_secs(config.every_seconds.max(1));
                if current.as_ref().is_none_or(|(c, _)| c.url != config.url) {
                    current = match open(&layout, &config) {
                        Ok(archiver) => Some((config.clone(), archiver)),
                        Err(e) => {
                            status.last_error = Some(e);
                            None
                        }
                    };
                }
                if let Some((_, archiver)) = &mut current {
                    let outcome = round(&layout, archiver).await;
                    status.rounds += 1;
                    status.round_at =
                        moco_cluster::ports::Clock::now(&moco_cluster::ports::SystemClock)
                            .seconds();
                    match outcome {
                        Ok((index, r)) => {
                            status.primary_index = Some(index);
                            status.files_stored += r.stored.len() as u64;
                            if r.progress.is_some() {
                                status.progress = r.progress;
                            }
                            status.last_error = None;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "binlog archiving");
                            status.last_error = Some(e);
                        }
                    }
                }
                if let Err(e) = write_json(&status_path(&layout), &status, 0o600) {
                    tracing::warn!(error = %e, "writing the archive status");
                }
                every
            }
            Ok(None) => {
                current = None;
                DEFAULT_EVERY
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the archive configuration");
                DEFAULT_EVERY
            }
        };
        tokio::select! {
            _ = shutdown.changed() => {}
            _ = tokio::time::sleep(every) => {}
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

fn open(layout: &Layout, config: &ArchiveConfig) -> Result<Archiver, String> {
    let manifest = Manifest::load(layout).map_err(|e| e.to_string())?;
    let spec = BucketSpec::from_url(&config.url).map_err(|e| format!("{}: {e}", config.url))?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let bucket = spec
        .open(&env)
        .map_err(|e| format!("{}: {e}", config.url))?;
    Ok(Archiver::new(bucket, cluster_prefix(&manifest.name)))
}

async fn round(
    layout: &Layout,
    archiver: &mut Archiver,
) -> Result<(u32, moco_backup::mariadb::binlog::archive::Round), String> {
    let manifest = Manifest::load(layout).map_err(|e| e.to_string())?;
    let secret = Secret::load(layout).map_err(|e| e.to_string())?;
    let snapshot = ClusterSnapshot::load(layout)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the manager has not observed the cluster yet".to_owned())?;
    let index = snapshot.current_primary_index;
    let admin = MysqlInstance::new(
        crate::platform::sql::admin_options(&manifest, layout, index, &secret)
            .map_err(|e| e.to_string())?,
    );
    let outcome = archiver.round(&admin, &BinlogFiles::Local(None)).await;
    let _ = admin.disconnect().await;
    outcome.map(|r| (index, r)).map_err(|e| e.to_string())
}
