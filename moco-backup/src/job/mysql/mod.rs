//! The Jobs' steps for a MySQL cluster: MOCO's own format ([`crate::mysql::format`]), so that a
//! MOCO user's backups restore here and backups taken here restore with MOCO.
//!
//! Backup (`backup/backup.go`): read every ready instance's `server_uuid`, choose the source
//! by MOCO's uuid-set rule, dump it with `mysqlsh` into the work dir, upload the `tar` of it
//! as `dump.tar`; from the second backup on, fetch the binlogs since the previous backup with
//! `mysqlbinlog` and upload `tar | zstd` of them into the **previous** backup's folder. A
//! failed or skipped binlog part is a warning and `BackupNoBinlog`, not a failed Job.
//!
//! Restore (`backup/restore.go`): plan from the keys (the newest dump at or before the
//! point, and its folder's binlogs), wait for instance 0's agent to finish (`super_read_only`
//! is on), open it for the load, load the dump with `mysqlsh`, replay the binlogs up to the
//! second with `mysqlbinlog | mysql`, and make it read-only again.
//!
//! What the steps ask the servers goes through [`BackupServers`] and [`RestoreServer`]; the
//! Jobs use [`SqlServers`]. No MySQL server runs where this project is tested, so the tests
//! drive these steps with tools and servers that stand in for MySQL's and check every command
//! line, password and object; `scripts/e2e-kind.sh` runs them against MySQL.
//!
//! Binlog archiving on MySQL ([`archive`]) runs its rounds with these servers and tools, and
//! keeps its records through [`archive_store`], which the restore reads too.

pub mod archive;
pub mod archive_store;

use std::future::Future;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_adapters::mysql::{ConnectOptions, MysqlInstance};

use moco_api::addresses::AddressResolver;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::BackupStatus;
use moco_cluster::ports::{Clock, Credentials};
use moco_core::dialect::Dialect;
use moco_core::facts::Role;
use moco_core::gtid::GtidSet;
use moco_core::resources::ByteRate;
use moco_core::time::Timestamp;
use moco_core::validate::duration::format_go_duration;
use mysql_async::prelude::Queryable as _;

use self::archive_store::ArchiveContents;
use super::JobError;
use super::server_tls::ServerTls;
use crate::bucket::Bucket;
use crate::layout;
use crate::mysql::command::{self, Input, Output, Tools};
use crate::mysql::format;
use crate::mysql::format::command_line::{Endpoint, Pipeline};
use crate::mysql::format::keys::RestorePlan;
use crate::mysql::format::restore::RestoreFilter;
use crate::mysql::format::source::{PreviousBackup, ReadyInstance};
use crate::mysql::format::{BINLOG_DIR, DUMP_DIR, TMP_DIR};

/// How far behind the Job's clock a server's may be when the restore leaves out the archive's
/// rounds read before a dump.
const ARCHIVE_CLOCK_MARGIN_S: i64 = 600;

/// The field a restore point nothing reaches is reported on.
const POINT_FIELD: &str = "spec.restore.restorePoint";

/// How the Jobs run MOCO's tools.
#[derive(Clone, Debug)]
pub struct MysqlTools {
    /// Where `mysqlsh`, `mysqlbinlog`, `mysql`, `tar` and `zstd` are.
    pub tools: Tools,
    /// The work directory (`--work-dir`): the dump and the binlogs pass through it.
    pub work_dir: PathBuf,
    /// `--threads`: `mysqlsh`'s and `zstd`'s workers.
    pub threads: NonZeroU32,
}

/// A source's binary logs, as the backup records and uses them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BinlogFiles {
    /// The file it writes now (`status.backup.binlogFilename`).
    pub current: String,
    /// Every file it has (`SHOW BINARY LOGS`).
    pub all: Vec<String>,
}

/// What the backup asks the instances.
pub trait BackupServers: Sync {
    /// `@@server_uuid` of instance `index`.
    fn server_uuid(&self, index: u32) -> impl Future<Output = Result<String, JobError>> + Send;
    /// The binary logs of instance `index`.
    fn binlog_files(
        &self,
        index: u32,
    ) -> impl Future<Output = Result<BinlogFiles, JobError>> + Send;
}

/// What the restore asks instance 0.
pub trait RestoreServer: Sync {
    /// `Ok` once its agent has set it up (it answers as `moco-admin` and is
    /// `super_read_only`); otherwise what it is still missing.
    fn ready_to_load(&self) -> impl Future<Output = Result<(), String>> + Send;
    /// Lets the load in: `local_infile` on, `read_only` off (MOCO's `PrepareRestore`).
    fn open_for_load(&self) -> impl Future<Output = Result<(), JobError>> + Send;
    /// Read-only again, `local_infile` off (MOCO's `FinishRestore`).
    fn close_after_load(&self) -> impl Future<Output = Result<(), JobError>> + Send;
}

/// One MySQL backup to take.
#[derive(Clone, Debug)]
pub struct MysqlBackup<'a> {
    /// The cluster.
    pub id: &'a ClusterId,
    /// `status.backup` before this one.
    pub previous: PreviousBackup,
    /// The ready instances and their roles.
    pub ready: Vec<(u32, Role)>,
    /// The `moco-backup` password.
    pub password: &'a str,
    /// The cap on the dump's read rate (`mysqlsh`'s `maxRate`, shared among the threads).
    pub max_rate: Option<&'a ByteRate>,
}

/// What a MySQL backup stored.
#[derive(Clone, Debug, PartialEq)]
pub struct MysqlBackedUp {
    /// The new `status.backup`.
    pub status: BackupStatus,
    /// The dump's key.
    pub dump_key: String,
    /// The binlog tarball's key, when stored.
    pub binlog_key: Option<String>,
    /// Why there are no binlogs although a previous backup exists (`BackupNoBinlog`).
    pub no_binlog: Option<String>,
}

/// A restore that was planned and done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlRestored {
    /// What was loaded and replayed of MOCO's layout.
    pub plan: RestorePlan,
    /// The binlog archive's rounds replayed after the dump (a point MOCO's tarballs do not
    /// reach: [`crate::mysql::archive`]).
    pub archive_keys: Vec<String>,
}

impl MysqlTools {
    fn work(&self) -> String {
        self.work_dir.display().to_string()
    }

    /// Removes `dir` under the work dir (a previous attempt's leftovers: `mysqlsh` refuses a
    /// dump directory that is not empty) and returns its path; the work dir itself exists
    /// afterwards.
    pub(super) fn fresh(&self, dir: &str) -> Result<PathBuf, JobError> {
        let path = self.work_dir.join(dir);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&path, "empty", e)),
        }
        std::fs::create_dir_all(&self.work_dir)
            .map_err(|e| io_error(&self.work_dir, "create", e))?;
        Ok(path)
    }

    pub(super) fn remove(&self, dir: &str) {
        let _ = std::fs::remove_dir_all(self.work_dir.join(dir));
    }
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> JobError {
    JobError::input("--work-dir", format!("{what} {}: {e}", path.display()))
}

/// Takes MOCO's backup of the cluster: see the module's documentation.
pub async fn backup<S: BackupServers>(
    tools: &MysqlTools,
    servers: &S,
    bucket: &Bucket,
    clock: &dyn Clock,
    endpoint: impl Fn(u32) -> Endpoint,
    job: MysqlBackup<'_>,
) -> Result<MysqlBackedUp, JobError> {
    let began = Instant::now();
    let mut ready = Vec::with_capacity(job.ready.len());
    for &(index, role) in &job.ready {
        ready.push(ReadyInstance {
            index,
            server_uuid: servers.server_uuid(index).await?,
            role,
        });
    }
    let choice = format::source::choose_source(&job.previous, &ready)
        .map_err(|e| cluster_error(job.id, e.to_string()))?;
    let source = endpoint(choice.index);
    let source_uuid = ready
        .iter()
        .find(|i| i.index == choice.index)
        .map(|i| i.server_uuid.clone())
        .unwrap_or_default();
    let files = servers.binlog_files(choice.index).await?;
    let (started_at, prefix) = layout::free_folder(
        bucket,
        &layout::cluster_prefix(&job.id.namespace, &job.id.name),
        clock,
    )
    .await?;
    let dump_key = format::keys::dump_key(&job.id.namespace, &job.id.name, started_at);
    tracing::info!(source = choice.index, %prefix, "dumping");

    let dump_dir = tools.fresh(DUMP_DIR)?;
    let work = tools.work();
    command::run_one(
        &tools.tools,
        &format::backup::dump_instance(&source, &work, tools.threads, job.max_rate),
        job.password,
    )
    .await?;
    let at_json = dump_dir.join("@.json");
    let metadata = std::fs::read_to_string(&at_json).map_err(|e| io_error(&at_json, "read", e))?;
    let gtid_set = format::backup::dump_gtid_executed(&metadata)
        .map_err(|e| cluster_error(job.id, e.to_string()))?;
    let mut usage = disk_usage(&dump_dir);
    let dumped = command::run(
        &tools.tools,
        &Pipeline {
            stages: vec![format::backup::dump_archive(&work)],
        },
        "",
        Input::Nothing,
        Output::Object {
            bucket,
            key: &dump_key,
        },
    )
    .await?;
    tools.remove(DUMP_DIR);

    let mut warnings = Vec::new();
    let mut binlog_key = None;
    let mut binlog_size = 0;
    let mut no_binlog = None;
    if let Some(warning) = choice.warning {
        warnings.push(warning.to_owned());
        no_binlog = Some(warning.to_owned());
    }
    if let (true, Some(previous_time)) = (choice.take_binlog, job.previous.time) {
        let key = format::keys::binlog_key(&job.id.namespace, &job.id.name, previous_time);
        match store_binlogs(tools, bucket, &source, &job, choice.index, &files, &key).await {
            Ok((size, used)) => {
                binlog_size = size;
                // The dump was removed before the fetch: the peak is the larger of the two.
                usage = usage.max(used);
                binlog_key = Some(key);
            }
            Err(e) => {
                tracing::warn!(error = %e, "the binlogs were not stored");
                let warning = crate::guard::tool_output::for_status(&format!(
                    "the binlogs were not stored: {e}"
                ));
                warnings.push(warning.clone());
                no_binlog = Some(warning);
            }
        }
        tools.remove(BINLOG_DIR);
    }

    let status = BackupStatus {
        time: k8s_openapi::jiff::Timestamp::from_second(started_at.0)
            .ok()
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
        elapsed: format_go_duration(Duration::from_secs(began.elapsed().as_secs())),
        source_index: i32::try_from(choice.index).unwrap_or(i32::MAX),
        source_uuid,
        uuid_set: choice.uuid_set,
        binlog_filename: files.current,
        gtid_set,
        dump_size: i64::try_from(dumped.written).unwrap_or(i64::MAX),
        binlog_size: i64::try_from(binlog_size).unwrap_or(i64::MAX),
        work_dir_usage: i64::try_from(usage).unwrap_or(i64::MAX),
        warnings: (!warnings.is_empty()).then_some(warnings),
    };
    Ok(MysqlBackedUp {
        status,
        dump_key,
        binlog_key,
        no_binlog,
    })
}

/// Fetches the binlogs since the previous backup and uploads them as `key`; returns the
/// object's size and the bytes they took in the work dir.
async fn store_binlogs(
    tools: &MysqlTools,
    bucket: &Bucket,
    source: &Endpoint,
    job: &MysqlBackup<'_>,
    source_index: u32,
    files: &BinlogFiles,
    key: &str,
) -> Result<(u64, u64), JobError> {
    let start = format::backup::binlog_start_file(&job.previous, source_index, &files.all)
        .map_err(|e| cluster_error(job.id, e.to_string()))?;
    let dir = tools.fresh(BINLOG_DIR)?;
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, "create", e))?;
    let work = tools.work();
    command::run_one(
        &tools.tools,
        &format::backup::binlog_fetch(source, &work, &job.previous.gtid_set, &start),
        job.password,
    )
    .await?;
    let used = disk_usage(&dir);
    let stored = command::run(
        &tools.tools,
        &format::backup::binlog_archive(&work, tools.threads),
        "",
        Input::Nothing,
        Output::Object { bucket, key },
    )
    .await?;
    Ok((stored.written, used))
}

/// Restores the newest dump at or before `point` under `source_prefix`'s cluster and replays
/// its binlogs up to the point into instance 0: see the module's documentation.
#[allow(clippy::too_many_arguments)]
pub async fn restore<S: RestoreServer>(
    tools: &MysqlTools,
    server: &S,
    bucket: &Bucket,
    source: (&str, &str),
    point: Timestamp,
    filter: &RestoreFilter,
    target: &Endpoint,
    password: &str,
    wait_limit: Duration,
) -> Result<MysqlRestored, JobError> {
    let (namespace, name) = source;
    let keys: Vec<String> = bucket
        .list(&layout::cluster_prefix(namespace, name))
        .await?
        .into_iter()
        .map(|o| o.key)
        .collect();
    let (plan, archive) = match format::keys::plan_restore(namespace, name, &keys, point) {
        Ok(plan) => (plan, None),
        Err(e) => {
            let prefix = layout::cluster_prefix(namespace, name);
            let (plan, contents) = through_archive(bucket, &prefix, source, &e).await?;
            (plan, Some((prefix, contents)))
        }
    };
    tracing::info!(dump = %plan.dump_key, binlogs = ?plan.binlog_keys, archive = archive.is_some(), "restoring");

    let deadline = Instant::now() + wait_limit;
    loop {
        match server.ready_to_load().await {
            Ok(()) => break,
            Err(why) if Instant::now() >= deadline => {
                return Err(JobError::Instance {
                    index: 0,
                    message: format!(
                        "not ready for the load after {} s: {why}",
                        wait_limit.as_secs()
                    ),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    server.open_for_load().await?;
    let loaded = load(
        tools,
        bucket,
        &plan,
        archive.as_ref(),
        filter,
        target,
        password,
    )
    .await;
    if let Err(e) = &loaded {
        // The cluster stays read-only after a failed restore, as after a good one: the
        // clustering leaves a restoring cluster alone.
        tracing::warn!(error = %e, "the load failed; instance 0 is made read-only again");
        if let Err(close) = server.close_after_load().await {
            tracing::warn!(error = %close, "instance 0 could not be made read-only again");
        }
    }
    let archive_keys = loaded?;
    server.close_after_load().await?;
    Ok(MysqlRestored { plan, archive_keys })
}

/// The plan for a point MOCO's tarballs do not reach (`refused`: after the newest backup, or
/// past a backup that stored no binlogs), when the binlog archive may: the newest dump at or
/// before it, then the archive. Whether the archive reaches the point from that dump is known
/// only from the dump's own GTID set, which [`load`] reads before loading anything; here the
/// point is refused when it is after everything the archive holds.
async fn through_archive(
    bucket: &Bucket,
    prefix: &str,
    (namespace, name): (&str, &str),
    refused: &format::keys::RestorePointError,
) -> Result<(RestorePlan, ArchiveContents), JobError> {
    let refuse = |more: String| JobError::input(POINT_FIELD, format!("{refused}{more}"));
    let (point, dump_time) = match refused {
        format::keys::RestorePointError::AfterLatestBackup { point, latest } => (*point, *latest),
        format::keys::RestorePointError::BinlogMissing {
            point, dump_time, ..
        } => (*point, *dump_time),
        _ => return Err(refuse(String::new())),
    };
    // Rounds read before the dump hold nothing it lacks; the margin covers a server clock
    // behind the Job's (the dump's folder is the Job's second, a round's time the server's).
    let since_ms = dump_time
        .0
        .saturating_sub(ARCHIVE_CLOCK_MARGIN_S)
        .saturating_mul(1000);
    let contents = archive_store::load_since(bucket, prefix, since_ms).await?;
    let Some(latest_ms) = contents.latest_ms() else {
        return Err(refuse(String::new()));
    };
    if latest_ms < point.0.saturating_mul(1000) {
        return Err(refuse(format!(
            "; the binlog archive reaches {} at most",
            crate::mysql::archive::show_ms(latest_ms)
        )));
    }
    let plan = RestorePlan {
        dump_key: format::keys::dump_key(namespace, name, dump_time),
        dump_time,
        binlog_keys: Vec::new(),
        stop_at: Some(point),
    };
    Ok((plan, contents))
}

/// Loads the plan's dump into the target and replays its binlogs, MOCO's tarballs or the
/// archive's rounds (`archive`: the cluster's prefix and what its archive holds); returns the
/// rounds' keys.
async fn load(
    tools: &MysqlTools,
    bucket: &Bucket,
    plan: &RestorePlan,
    archive: Option<&(String, ArchiveContents)>,
    filter: &RestoreFilter,
    target: &Endpoint,
    password: &str,
) -> Result<Vec<String>, JobError> {
    let work = tools.work();
    let dump_dir = unpack(
        tools,
        bucket,
        &plan.dump_key,
        DUMP_DIR,
        &Pipeline {
            stages: vec![format::restore::dump_extract(&work)],
        },
    )
    .await?;
    // The archive's plan needs the dump's GTID set; it is made before anything is loaded.
    let rounds = match (archive, plan.stop_at) {
        (Some((prefix, contents)), Some(stop_at)) => {
            let at_json = dump_dir.join("@.json");
            let metadata =
                std::fs::read_to_string(&at_json).map_err(|e| io_error(&at_json, "read", e))?;
            let dump_set = format::backup::dump_gtid_executed(&metadata)
                .ok()
                .and_then(|text| GtidSet::parse(&text).ok())
                .ok_or_else(|| {
                    JobError::input(
                        plan.dump_key.as_str(),
                        "@.json: no readable gtidExecuted".to_owned(),
                    )
                })?;
            let replay = crate::mysql::archive::plan_replay(
                prefix,
                &dump_set,
                plan.dump_time.0,
                &contents.rounds,
                contents.progress.as_ref(),
                stop_at.0,
            )
            .map_err(|e| JobError::input(POINT_FIELD, e.to_string()))?;
            Some((replay, stop_at))
        }
        _ => None,
    };
    command::run_one(
        &tools.tools,
        &format::restore::load_dump(target, &work, tools.threads, filter),
        password,
    )
    .await?;
    tools.remove(DUMP_DIR);

    if let Some(stop_at) = plan.stop_at {
        for key in &plan.binlog_keys {
            replay_object(tools, bucket, key, password, |files| {
                format::restore::binlog_replay(target, &work, stop_at, files, filter)
            })
            .await?;
        }
    }
    let Some((replay, stop_at)) = rounds else {
        return Ok(Vec::new());
    };
    if !replay.include.is_empty() {
        for key in &replay.keys {
            replay_object(tools, bucket, key, password, |files| {
                crate::mysql::archive::round_replay(
                    target,
                    &work,
                    stop_at,
                    files,
                    filter,
                    &replay.include,
                )
            })
            .await?;
        }
    }
    Ok(replay.keys)
}

/// Unpacks the tarball `key` with `extract` into the work dir, whose `dir` (emptied first) it
/// fills; returns that directory's path. The extraction names `dir` as its one member, and
/// whatever it left there must be plain files and directories ([`crate::guard::unpacked`]).
async fn unpack(
    tools: &MysqlTools,
    bucket: &Bucket,
    key: &str,
    dir: &str,
    extract: &Pipeline,
) -> Result<PathBuf, JobError> {
    let path = tools.fresh(dir)?;
    command::run(
        &tools.tools,
        extract,
        "",
        Input::Object { bucket, key },
        Output::Log,
    )
    .await?;
    crate::guard::unpacked::check_tree(&tools.work_dir, &path)
        .map_err(|e| JobError::input(key, e.to_string()))?;
    Ok(path)
}

/// Unpacks the binlog tarball `key` into the work dir and applies its files with the
/// pipeline `replay` builds for them.
async fn replay_object(
    tools: &MysqlTools,
    bucket: &Bucket,
    key: &str,
    password: &str,
    replay: impl FnOnce(&[String]) -> Pipeline,
) -> Result<(), JobError> {
    let work = tools.work();
    let dir = unpack(
        tools,
        bucket,
        key,
        BINLOG_DIR,
        &format::restore::binlog_extract(&work),
    )
    .await?;
    let names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| io_error(&dir, "list", e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let files = format::restore::replay_files(&work, &names)
        .map_err(|e| JobError::input(key, e.to_string()))?;
    let tmp = tools.fresh(TMP_DIR)?;
    std::fs::create_dir_all(&tmp).map_err(|e| io_error(&tmp, "create", e))?;
    command::run(
        &tools.tools,
        &replay(&files),
        password,
        Input::Nothing,
        Output::Log,
    )
    .await?;
    tools.remove(BINLOG_DIR);
    tools.remove(TMP_DIR);
    Ok(())
}

fn cluster_error(id: &ClusterId, message: String) -> JobError {
    JobError::Cluster {
        namespace: id.namespace.clone(),
        name: id.name.clone(),
        message,
    }
}

/// The bytes of the files under `dir` (MOCO's `workDirUsage`).
fn disk_usage(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => disk_usage(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// The previous backup as the source choice reads it, from `status.backup`.
pub fn previous_backup(status: &BackupStatus) -> PreviousBackup {
    PreviousBackup {
        time: status.time.as_ref().map(|t| Timestamp(t.0.as_second())),
        source_index: u32::try_from(status.source_index).unwrap_or(0),
        source_uuid: status.source_uuid.clone(),
        uuid_set: status.uuid_set.clone(),
        binlog_filename: status.binlog_filename.clone(),
        gtid_set: status.gtid_set.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// The servers through SQL
// ---------------------------------------------------------------------------------------------

/// The instances of a cluster through SQL, as the Jobs connect: the Pods' MySQL port, one
/// account.
pub struct SqlServers {
    addresses: Arc<dyn AddressResolver>,
    id: ClusterId,
    credentials: Credentials,
    tls: ServerTls,
}

impl std::fmt::Debug for SqlServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlServers")
            .field("cluster", &self.id)
            .field("user", &self.credentials.user)
            .finish_non_exhaustive()
    }
}

impl SqlServers {
    /// The instances of `id` at `addresses`, as `credentials`.
    pub fn new(
        addresses: Arc<dyn AddressResolver>,
        id: ClusterId,
        credentials: Credentials,
        tls: ServerTls,
    ) -> Self {
        SqlServers {
            addresses,
            id,
            credentials,
            tls,
        }
    }

    fn instance(&self, index: u32) -> MysqlInstance {
        let (host, port) = self.addresses.peers(&self.id, index);
        MysqlInstance::new(
            self.tls.apply(
                ConnectOptions::new(host, port, &self.credentials)
                    .with_name(format!("instance {index}")),
            ),
        )
    }

    pub(super) async fn query<T: mysql_async::prelude::FromRow + Send + 'static>(
        &self,
        index: u32,
        statement: &str,
    ) -> Result<Vec<T>, JobError> {
        let instance = self.instance(index);
        let result = async {
            let mut c = instance.conn().await.map_err(|e| e.to_string())?;
            c.query(statement).await.map_err(|e| e.to_string())
        }
        .await;
        let _ = instance.disconnect().await;
        result.map_err(|message| sql_error(index, statement, message))
    }

    async fn execute(&self, index: u32, statements: &[&str]) -> Result<(), JobError> {
        let instance = self.instance(index);
        let result = async {
            let mut c = instance
                .conn()
                .await
                .map_err(|e| ("connect", e.to_string()))?;
            for statement in statements {
                c.query_drop(*statement)
                    .await
                    .map_err(|e| (*statement, e.to_string()))?;
            }
            Ok::<(), (&str, String)>(())
        }
        .await;
        let _ = instance.disconnect().await;
        result.map_err(|(statement, message)| sql_error(index, statement, message))
    }

    async fn dialect(&self, index: u32) -> Result<Dialect, JobError> {
        let version: Vec<String> = self.query(index, "SELECT @@version").await?;
        let version = version.into_iter().next().unwrap_or_default();
        Dialect::from_version(&version)
            .map_err(|e| sql_error(index, "SELECT @@version", e.to_string()))
    }
}

fn sql_error(index: u32, statement: &str, message: String) -> JobError {
    JobError::Instance {
        index,
        message: format!("{statement}: {message}"),
    }
}

impl BackupServers for SqlServers {
    async fn server_uuid(&self, index: u32) -> Result<String, JobError> {
        let rows: Vec<String> = self.query(index, "SELECT @@server_uuid").await?;
        rows.into_iter()
            .next()
            .ok_or_else(|| sql_error(index, "SELECT @@server_uuid", "no row".to_owned()))
    }

    async fn binlog_files(&self, index: u32) -> Result<BinlogFiles, JobError> {
        let statement = format::backup::binlog_status_statement(self.dialect(index).await?);
        let current: Vec<mysql_async::Row> = self.query(index, statement).await?;
        let current = current
            .into_iter()
            .next()
            .and_then(|row| row.get_opt::<String, usize>(0)?.ok())
            .ok_or_else(|| sql_error(index, statement, "no binary log is written".to_owned()))?;
        let all: Vec<mysql_async::Row> = self.query(index, "SHOW BINARY LOGS").await?;
        let all = all
            .into_iter()
            .filter_map(|row| row.get_opt::<String, usize>(0)?.ok())
            .collect();
        Ok(BinlogFiles { current, all })
    }
}

impl RestoreServer for SqlServers {
    async fn ready_to_load(&self) -> Result<(), String> {
        let rows: Vec<i64> = self
            .query(0, "SELECT @@super_read_only")
            .await
            .map_err(|e| e.to_string())?;
        match rows.first() {
            Some(1) => Ok(()),
            _ => Err("super_read_only is off: its agent has not finished".to_owned()),
        }
    }

    async fn open_for_load(&self) -> Result<(), JobError> {
        self.execute(0, &format::restore::OPEN_FOR_LOAD).await
    }

    async fn close_after_load(&self) -> Result<(), JobError> {
        self.execute(0, &format::restore::CLOSE_AFTER_LOAD).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::BucketSpec;

    /// Every entry under `dir`, relative to it (symlinks not followed).
    fn entries(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                }
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
        out.sort();
        out
    }

    /// A tarball made by the real `tar` of what `build` puts in a fresh directory.
    fn tarball(build: impl FnOnce(&Path)) -> Vec<u8> {
        let src = tempfile::tempdir().unwrap();
        build(src.path());
        let mut top: Vec<_> = std::fs::read_dir(src.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        top.sort();
        let out = std::process::Command::new("tar")
            .arg("-c")
            .arg("-f")
            .arg("-")
            .arg("-C")
            .arg(src.path())
            .args(top)
            .output()
            .unwrap();
        assert!(out.status.success());
        out.stdout
    }

    /// Regression (issue 29, item 1): a MOCO `dump.tar` from the bucket was unpacked whole
    /// into the work dir, so its entries could replace the Job's option files beside `dump/`
    /// (`moco-admin.cnf`) or leave a symlink in `dump/` for `mysqlsh` to load a file of the
    /// Job's Pod (its service account token) into a table. Only `dump/` is unpacked now,
    /// and an entry that is neither a file nor a directory refuses the tarball, by name.
    #[tokio::test]
    async fn a_dump_tarball_unpacks_only_plain_files_under_dump() {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        let tools = MysqlTools {
            tools: Tools::from_path(),
            work_dir: work.clone(),
            threads: NonZeroU32::MIN,
        };
        let bucket = BucketSpec::from_url(&root.path().join("bucket").display().to_string())
            .unwrap()
            .open(&Default::default())
            .unwrap();
        let hostile = tarball(|dir| {
            std::fs::create_dir_all(dir.join("dump")).unwrap();
            std::fs::write(dir.join("dump/@.json"), b"{}").unwrap();
            std::fs::write(dir.join("moco-admin.cnf"), b"[client]\nuser=attacker\n").unwrap();
            std::os::unix::fs::symlink(
                "/var/run/secrets/kubernetes.io/serviceaccount/token",
                dir.join("dump/app@t@@0.tsv.zst"),
            )
            .unwrap();
        });
        bucket
            .upload("moco/ns/db/20261124-000000/dump.tar", &hostile[..])
            .await
            .unwrap();
        let e = unpack(
            &tools,
            &bucket,
            "moco/ns/db/20261124-000000/dump.tar",
            DUMP_DIR,
            &Pipeline {
                stages: vec![format::restore::dump_extract(&tools.work())],
            },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains("dump/app@t@@0.tsv.zst"), "{e}");
        assert!(e.contains("a symbolic link"), "{e}");
        assert!(
            entries(&work)
                .iter()
                .all(|e| e == "dump" || e.starts_with("dump/")),
            "{:?}",
            entries(&work)
        );
    }
}
