//! The rounds of binlog archiving for a MySQL cluster ([`crate::mysql::archive`] holds the
//! rules); [`super::archive_store`] reads and writes the archive's records (what a restore
//! reads too). What a round asks the primary goes through [`ArchiveServers`]; the archiver
//! uses [`SqlServers`]. No MySQL server runs where
//! this project is tested: the tests drive rounds with a stand-in server and a stand-in
//! `mysqlbinlog`, and `scripts/e2e-kind.sh` runs them against MySQL.

use std::future::Future;

use moco_core::gtid::GtidSet;

use super::archive_store::{read_record, write_record};
use super::{BackupServers, MysqlTools, SqlServers};
use crate::bucket::Bucket;
use crate::job::JobError;
use crate::mysql::archive::{
    self as mysql_archive, Progress, RECORD_FORMAT, ROUND_WORK, RoundPlan, RoundRecord,
};
use crate::mysql::command::{self, Input, Output};
use crate::mysql::format;
use crate::mysql::format::BINLOG_DIR;
use crate::mysql::format::command_line::Endpoint;

/// What a round reads of the primary, in one statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimarySnapshot {
    /// `@@gtid_executed`.
    pub executed: GtidSet,
    /// `@@gtid_purged`: what its binlogs no longer hold.
    pub purged: GtidSet,
    /// `@@server_uuid`.
    pub server_uuid: String,
    /// Neither `read_only` nor `super_read_only`: it is the primary.
    pub writable: bool,
    /// Its clock, milliseconds since the epoch.
    pub now_ms: i64,
}

/// What archiving asks the instances, besides their binary logs.
pub trait ArchiveServers: BackupServers {
    /// What instance `index` executed, and when.
    fn snapshot(
        &self,
        index: u32,
    ) -> impl Future<Output = Result<PrimarySnapshot, JobError>> + Send;
}

/// The statement of [`ArchiveServers::snapshot`]: the set and the clock read together.
pub const SNAPSHOT_STATEMENT: &str = "SELECT @@gtid_executed, @@gtid_purged, @@server_uuid, \
     @@read_only OR @@super_read_only, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";

impl ArchiveServers for SqlServers {
    async fn snapshot(&self, index: u32) -> Result<PrimarySnapshot, JobError> {
        let rows: Vec<(String, String, String, i64, i64)> =
            self.query(index, SNAPSHOT_STATEMENT).await?;
        let (executed, purged, server_uuid, read_only, now_ms) =
            rows.into_iter().next().ok_or_else(|| JobError::Instance {
                index,
                message: format!("{SNAPSHOT_STATEMENT}: no row"),
            })?;
        let parse = |name: &str, text: &str| {
            GtidSet::parse(text).map_err(|e| JobError::Instance {
                index,
                message: format!("{name}: {e}"),
            })
        };
        Ok(PrimarySnapshot {
            executed: parse("@@gtid_executed", &executed)?,
            purged: parse("@@gtid_purged", &purged)?,
            server_uuid,
            writable: read_only == 0,
            now_ms,
        })
    }
}

/// What one round did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlRound {
    /// The round stored, when there was anything new.
    pub stored: Option<RoundRecord>,
    /// The mark written.
    pub progress: Progress,
}

/// One round through instance `primary` (at `endpoint`) of the cluster under
/// `cluster_prefix`, whose newest dump holds `newest_dump`. A read-only instance is an error
/// and stores nothing: the caller's idea of the primary is stale.
#[allow(clippy::too_many_arguments)]
pub async fn round<S: ArchiveServers>(
    tools: &MysqlTools,
    servers: &S,
    bucket: &Bucket,
    cluster_prefix: &str,
    primary: u32,
    endpoint: &Endpoint,
    newest_dump: &GtidSet,
    password: &str,
) -> Result<MysqlRound, JobError> {
    let progress_key = mysql_archive::progress_key(cluster_prefix);
    // Read directly, not listed: the folder grows by a round every few seconds of writes.
    let progress: Option<Progress> = match read_record(bucket, &progress_key).await {
        Ok(p) => Some(p),
        Err(JobError::Bucket(e)) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let snapshot = servers.snapshot(primary).await?;
    if !snapshot.writable {
        return Err(JobError::Instance {
            index: primary,
            message: "read-only: not the primary".to_owned(),
        });
    }
    let exclude = match mysql_archive::plan_round(
        progress.as_ref(),
        newest_dump,
        &snapshot.executed,
        &snapshot.purged,
        snapshot.now_ms,
    ) {
        RoundPlan::Idle(progress) => {
            write_record(bucket, &progress_key, &progress).await?;
            return Ok(MysqlRound {
                stored: None,
                progress,
            });
        }
        RoundPlan::Fetch { exclude } => exclude,
    };
    let files = servers.binlog_files(primary).await?;
    let round_tools = MysqlTools {
        work_dir: tools.work_dir.join(ROUND_WORK),
        ..tools.clone()
    };
    let work = round_tools.work_dir.display().to_string();
    let dir = round_tools.fresh(BINLOG_DIR)?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| JobError::input("--work-dir", format!("create {}: {e}", dir.display())))?;
    let fetch = mysql_archive::round_fetch(endpoint, &work, &exclude, &files.all).map_err(|e| {
        JobError::Instance {
            index: primary,
            message: e.to_string(),
        }
    })?;
    let stored = async {
        command::run_one(&round_tools.tools, &fetch, password).await?;
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| JobError::input("--work-dir", format!("list {}: {e}", dir.display())))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        format::sort_binlog_files(&mut names);
        if names.is_empty() {
            return Err(JobError::Instance {
                index: primary,
                message: format!("{fetch}: fetched no binlog file"),
            });
        }
        let key = mysql_archive::round_object_key(cluster_prefix, snapshot.now_ms);
        let written = command::run(
            &round_tools.tools,
            &format::backup::binlog_archive(&work, tools.threads),
            "",
            Input::Nothing,
            Output::Object { bucket, key: &key },
        )
        .await?;
        Ok((names, written.written))
    }
    .await;
    round_tools.remove(BINLOG_DIR);
    let (names, bytes) = stored?;
    let record = RoundRecord {
        format: RECORD_FORMAT,
        read_at_ms: snapshot.now_ms,
        instance: primary,
        server_uuid: snapshot.server_uuid,
        excluded: exclude,
        covers: snapshot.executed,
        files: names,
        bytes,
    };
    write_record(
        bucket,
        &mysql_archive::round_record_key(cluster_prefix, record.read_at_ms),
        &record,
    )
    .await?;
    let progress = mysql_archive::progress_after(&record);
    write_record(bucket, &progress_key, &progress).await?;
    Ok(MysqlRound {
        stored: Some(record),
        progress,
    })
}
