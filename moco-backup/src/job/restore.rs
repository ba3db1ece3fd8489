//! The restore Job (`moco restore BUCKET SRC_NS SRC_NAME NS NAME YYYYMMDD-hhmmss SCHEMA
//! USERS`). A MySQL cluster is restored from MOCO's own format ([`super::mysql`]); a MariaDB
//! cluster by MOCO's steps with a physical backup in place of `mysqlsh`'s load:
//!
//! 1. refused up front, before anything is touched: a cluster restored already, `SCHEMA` or
//!    `USERS` (a physical backup holds every schema and account), and a point no backup and
//!    archive reach (the error names what can be reached);
//! 2. instance 0 must answer (its agent's first start done), as MOCO waits for it;
//! 3. the base backup is streamed from the bucket to instance 0's agent (`PUT /v1/restore`),
//!    its size and SHA-256 checked on the way: a mismatch ends the upload with an error, so
//!    the agent drops the copy; the agent prepares it;
//! 4. the Pod is deleted: its StatefulSet brings it back, `moco init` puts the copy in place
//!    with this cluster's passwords, and the agent gives it the source's GTID history;
//! 5. the archived binlogs are replayed up to the point, through SQL as MOCO does. A run that
//!    finds instance 0 holding this base's copy and nothing after it (an earlier run failed
//!    after step 4) goes on from here;
//! 6. the instance is left read-only, `status.restoredTime` is recorded and the `Restored`
//!    Event created; the clustering then clones the other instances from it.
//!
//! Any failure is a `RestoreFailed` Warning Event with the reason (beyond MOCO, whose failed
//! Job only logs it), the Job fails and is kept, and the cluster stays read-only (it is
//! `Restoring` until `restoredTime` is set).
//!
//! MOCO's rule for the point: everything committed before that second. When the point is
//! exactly a backup's time (its folder name, what `status.backup.time` shows), that backup
//! is restored as it is, as MOCO does: its copy is consistent a few seconds after it
//! started, and no binlog can take it back to the second itself.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use moco_adapters::mysql::{ConnectOptions, MysqlInstance, clone_binlog_state, sql};
use moco_agent::api::{ClonePhase, RESTORE_DONOR, RestoreReceived};
use moco_agent::client::AgentClient;
use moco_api::addresses::{AddressResolver, PodNetwork};
use moco_api::annotations::flavor_of;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::ports::Credentials;
use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::time::Timestamp;
use mysql_async::prelude::Queryable as _;
use tokio::io::{AsyncReadExt as _, BufReader};

use super::JobError;
use super::args::{PASSWORD_ENV, RestoreArgs, required};
use super::cluster::{ClusterAccess, EventType, JobEvent, RESTORED};
use super::mysql::{MysqlTools, RestoreServer, SqlServers};
use super::server_tls::ServerTls;
use crate::bucket::Bucket;
use crate::catalog::{PlanRestoreError, PlannedRestore, list, plan_restore_under};
use crate::guard::bounded::{Bounded, drain_at_most};
use crate::layout;
use crate::mariadb::binlog::Point;
use crate::mariadb::binlog::replay::{ReplayTarget, Replayed, replay};
use crate::mariadb::physical::{self, Hashing, Manifest};
use crate::mariadb::xbstream::SafeNames;
use crate::mysql::command::Tools;
use crate::mysql::format;
use crate::mysql::format::command_line::Endpoint;

/// A restore failed (beyond MOCO's Events).
pub const RESTORE_FAILED: JobEvent = JobEvent {
    reason: "RestoreFailed",
    kind: EventType::Warning,
    message: "Restore failed",
};

/// What the restore Job needs besides its arguments.
pub struct RestoreJob {
    /// The cluster restored into, through the API.
    pub cluster: ClusterAccess,
    /// The source cluster's key prefix (`moco/<ns>/<name>`).
    pub source_prefix: String,
    /// `spec.restore.restorePoint`.
    pub point: Timestamp,
    /// `spec.restore.schema`.
    pub schema: String,
    /// `spec.restore.users`.
    pub users: String,
    /// Where the backups are.
    pub bucket: Bucket,
    /// Calls agents with the cluster's certificate; `None` when the Job has none (a MySQL
    /// restore needs no agent).
    pub agents: Option<AgentClient>,
    /// Where the instances and agents are.
    pub addresses: Arc<dyn AddressResolver>,
    /// This cluster's `moco-admin` password.
    pub admin_password: String,
    /// `mariadb-binlog`.
    pub binlog_tool: PathBuf,
    /// `mariadb`, the client.
    pub client_tool: PathBuf,
    /// The work directory (binlog files pass through it).
    pub work_dir: PathBuf,
    /// How long instance 0 may take to answer, before and after its restart.
    pub wait_limit: Duration,
    /// How the servers are verified, when the cluster has TLS.
    pub tls: ServerTls,
    /// MOCO's tools, for a MySQL cluster.
    pub tools: Tools,
    /// `--threads`: the MySQL tools' workers.
    pub threads: NonZeroU32,
}

impl std::fmt::Debug for RestoreJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestoreJob")
            .field("cluster", &self.cluster)
            .field("source_prefix", &self.source_prefix)
            .field("point", &self.point)
            .finish_non_exhaustive()
    }
}

/// What the Job did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreDone {
    /// The base backup's prefix (its folder).
    pub base: String,
    /// A MariaDB copy's GTID position (a MySQL dump's is `gtid_executed` of the restored
    /// instance, which the load sets).
    pub position: Option<GtidSet>,
    /// What the binlogs added (MariaDB).
    pub replayed: Replayed,
    /// What was loaded and replayed (MySQL).
    pub dump: Option<format::keys::RestorePlan>,
}

/// The base and binlogs chosen for a point.
#[derive(Clone, Debug)]
enum Chosen {
    /// A backup whose time is the point, as it is.
    AsItIs(String),
    /// A backup and the binlogs after it.
    Planned(PlannedRestore),
}

impl RestoreJob {
    /// The Job as its Pod runs it (see [`super::backup::BackupJob::in_pod`]).
    pub async fn in_pod(
        args: &RestoreArgs,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, JobError> {
        let admin_password = required(env, PASSWORD_ENV)?;
        let point = layout::parse_backup_time(&args.restore_point)
            .map_err(|e| JobError::input("RESTORE_POINT", e.to_string()))?;
        let bucket = args.common.bucket_spec(&args.bucket)?.open(env)?;
        let client = kube::Client::try_default()
            .await
            .map_err(JobError::kube("connect to the Kubernetes API"))?;
        let source_prefix = layout::cluster_prefix(&args.source_namespace, &args.source_name)
            .trim_end_matches('/')
            .to_owned();
        Ok(RestoreJob {
            cluster: ClusterAccess::new(client, &args.namespace, &args.name),
            source_prefix,
            point,
            schema: args.schema.clone(),
            users: args.users.clone(),
            bucket,
            agents: super::backup::mounted_agent_client(&args.common)?,
            addresses: Arc::new(PodNetwork),
            admin_password,
            binlog_tool: PathBuf::from("mariadb-binlog"),
            client_tool: PathBuf::from("mariadb"),
            work_dir: args.common.work_dir.clone(),
            wait_limit: Duration::from_secs(600),
            tls: ServerTls::from_flag(args.common.mysql_tls_ca.as_deref())?,
            tools: Tools::from_path(),
            threads: NonZeroU32::new(args.common.threads).unwrap_or(NonZeroU32::MIN),
        })
    }

    /// Runs the Job once; a failure is also recorded as a Warning Event.
    pub async fn run(&self) -> Result<RestoreDone, JobError> {
        let result = self.restore().await;
        self.report(result).await
    }

    /// Runs the Job once for a MySQL cluster, with `server` answering for instance 0 (the
    /// Job's own is [`SqlServers`]).
    pub async fn run_mysql<S: RestoreServer>(&self, server: &S) -> Result<RestoreDone, JobError> {
        let result = async {
            let cluster = self.cluster.get().await?;
            self.refuse_if_restored(&cluster)?;
            self.restore_mysql(cluster, server).await
        }
        .await;
        self.report(result).await
    }

    /// Records a failure as the `RestoreFailed` Warning Event.
    async fn report(&self, result: Result<RestoreDone, JobError>) -> Result<RestoreDone, JobError> {
        if let Err(e) = &result {
            tracing::warn!(error = %e, "restore failed");
            if let Ok(cluster) = self.cluster.get().await {
                let message = format!("{}: {e}", RESTORE_FAILED.message);
                let _ = self
                    .cluster
                    .event_with_message(&cluster, RESTORE_FAILED, &message)
                    .await;
            }
        }
        result
    }

    async fn restore(&self) -> Result<RestoreDone, JobError> {
        let cluster = self.cluster.get().await?;
        self.refuse_if_restored(&cluster)?;
        if flavor_of(&cluster)? == Flavor::Mysql {
            let servers = SqlServers::new(
                self.addresses.clone(),
                ClusterId::of(&cluster)?,
                self.credentials(),
                self.tls.clone(),
            );
            return self.restore_mysql(cluster, &servers).await;
        }
        for (field, value) in [
            ("spec.restore.schema", &self.schema),
            ("spec.restore.users", &self.users),
        ] {
            if !value.is_empty() {
                return Err(JobError::input(
                    field,
                    format!(
                        "{value:?}: a MariaDB backup is a physical copy of the whole instance, \
                         so it restores every schema and account; leave it empty"
                    ),
                ));
            }
        }
        let id = ClusterId::of(&cluster)?;
        let chosen = choose(&self.bucket, &self.source_prefix, self.point).await?;
        let base = match &chosen {
            Chosen::AsItIs(base) => base.clone(),
            Chosen::Planned(p) => p.base.clone(),
        };
        tracing::info!(%base, point = %self.point, "restoring");

        let (host, port) = self.addresses.peers(&id, 0);
        let admin = MysqlInstance::new(self.tls.apply(ConnectOptions::new(
            host.clone(),
            port,
            &self.credentials(),
        )));
        self.wait_until(&admin, "instance 0 to answer as moco-admin", |_| true)
            .await?;
        let manifest = physical::manifest(&self.bucket, &base).await?;
        let position = match self.found_in_place(&admin, &base, &manifest).await? {
            Some(position) => position,
            None => {
                let received = self.push_base(&id, &base, &manifest).await?;
                tracing::info!(bytes = received.bytes, position = %received.position, "the copy is prepared");

                // The copy is put in place while no server runs: the Pod restarts.
                self.cluster
                    .delete_pod(&format!("{}-0", id.prefixed()))
                    .await?;
                // Instance 0's agent seeds the copy once it runs (a `RESET MASTER` when the
                // server's history is not the copy's): a replay before that loses its
                // transactions from the binlog, and the seed fails (MariaDB's error 1956).
                self.wait_for_seed(&id).await?;
                let expected =
                    clone_binlog_state(&manifest.binlog_state_before, &received.position);
                self.wait_until(
                    &admin,
                    "the restored copy to run with its history",
                    |state| *state == expected,
                )
                .await?;
                received.position
            }
        };

        let replayed = match &chosen {
            Chosen::AsItIs(_) => Replayed::default(),
            Chosen::Planned(planned) if planned.plan.steps.is_empty() => Replayed::default(),
            Chosen::Planned(planned) => {
                let target = ReplayTarget {
                    binlog_tool: self.binlog_tool.clone(),
                    client: self.client_tool.clone(),
                    host,
                    port,
                    credentials: self.credentials(),
                    ssl_ca: self.tls.ca_file(),
                    scratch: self.work_dir.join("replay"),
                    log: self.work_dir.join("replay.log"),
                };
                let replayed = replay(
                    &self.bucket,
                    &planned.prefix,
                    &planned.segments,
                    &planned.plan,
                    &target,
                    &admin,
                )
                .await;
                let _ = std::fs::remove_dir_all(&target.scratch);
                replayed?
            }
        };
        let mut c = admin
            .conn()
            .await
            .map_err(|e| self.cluster.refuse(format!("instance 0: {e}")))?;
        for statement in sql::set_super_read_only(moco_core::dialect::Dialect::Mariadb) {
            c.query_drop(&statement)
                .await
                .map_err(|e| self.cluster.refuse(format!("instance 0: {statement}: {e}")))?;
        }
        drop(c);
        let _ = admin.disconnect().await;

        self.finish(&cluster).await?;
        tracing::info!(%base, files = replayed.files, transactions = replayed.transactions, "restored");
        Ok(RestoreDone {
            base,
            position: Some(position),
            replayed,
            dump: None,
        })
    }

    /// The copy's position when an earlier run of this Job put the copy of `base` in place and
    /// replayed nothing after it (it failed in the replay, or died): the Job goes on from
    /// there instead of being refused by an instance that is no longer empty. `None` when
    /// instance 0 does not hold that copy; a copy with part of its binlogs replayed is an
    /// error, since a replay cut short is not resumed.
    async fn found_in_place(
        &self,
        admin: &MysqlInstance,
        base: &str,
        manifest: &Manifest,
    ) -> Result<Option<GtidSet>, JobError> {
        let Some(position) = &manifest.position else {
            return Ok(None);
        };
        let state = binlog_state(admin)
            .await
            .map_err(|e| self.cluster.refuse(format!("instance 0: {e}")))?;
        let copy = clone_binlog_state(&manifest.binlog_state_before, position);
        match in_place(&state, &copy) {
            InPlace::No => Ok(None),
            InPlace::Copy => {
                tracing::info!(%base, %position, "an earlier run put this copy in place: going on from it");
                Ok(Some(position.clone()))
            }
            InPlace::CopyAndMore => Err(self.cluster.refuse(format!(
                "instance 0 holds the copy of {base} and transactions after it ({state}): an \
                 earlier run of this Job was cut short during its replay, which cannot be \
                 resumed; delete the MySQLCluster and create it again"
            ))),
        }
    }

    /// MOCO's restore of a MySQL cluster from its dump and binlogs ([`super::mysql`]).
    async fn restore_mysql<S: RestoreServer>(
        &self,
        cluster: MySQLCluster,
        server: &S,
    ) -> Result<RestoreDone, JobError> {
        let filter =
            format::restore::RestoreFilter::new(&self.schema, &self.users).map_err(|e| {
                let field = match &e {
                    format::restore::RestoreSpecError::Users { field, .. }
                    | format::restore::RestoreSpecError::Schema { field, .. } => *field,
                };
                let message = e.to_string();
                let message = message
                    .strip_prefix(&format!("{field}: "))
                    .unwrap_or(&message)
                    .to_owned();
                JobError::input(field, message)
            })?;
        let id = ClusterId::of(&cluster)?;
        let source = self
            .source_prefix
            .strip_prefix(&format!("{}/", layout::KEY_ROOT))
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(|| {
                JobError::input(
                    "SRC_NAMESPACE",
                    format!("bad prefix {}", self.source_prefix),
                )
            })?;
        let (host, port) = self.addresses.peers(&id, 0);
        let tools = MysqlTools {
            tools: self.tools.clone(),
            work_dir: self.work_dir.clone(),
            threads: self.threads,
        };
        let restored = super::mysql::restore(
            &tools,
            server,
            &self.bucket,
            source,
            self.point,
            &filter,
            &Endpoint { host, port },
            &self.admin_password,
            self.wait_limit,
        )
        .await?;
        self.finish(&cluster).await?;
        let base = restored.plan.dump_key.rsplit_once('/').map_or_else(
            || restored.plan.dump_key.clone(),
            |(folder, _)| folder.to_owned(),
        );
        tracing::info!(%base, binlogs = ?restored.plan.binlog_keys, archive = ?restored.archive_keys, "restored");
        Ok(RestoreDone {
            base,
            position: None,
            replayed: Replayed::default(),
            dump: Some(restored.plan),
        })
    }

    /// A cluster restored once is never restored again.
    fn refuse_if_restored(&self, cluster: &MySQLCluster) -> Result<(), JobError> {
        if cluster
            .status
            .as_ref()
            .is_some_and(|s| s.restored_time.is_some())
        {
            return Err(self
                .cluster
                .refuse("status.restoredTime is set: this cluster was restored already"));
        }
        Ok(())
    }

    /// `status.restoredTime` and the `Restored` Event.
    async fn finish(&self, cluster: &MySQLCluster) -> Result<(), JobError> {
        let restored_at = k8s_openapi::jiff::Timestamp::now();
        self.cluster
            .update_status(|c| {
                c.status.get_or_insert_with(Default::default).restored_time = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(restored_at),
                );
            })
            .await?;
        self.cluster.event(cluster, RESTORED).await
    }

    fn credentials(&self) -> Credentials {
        Credentials {
            user: Account::Admin.name().to_owned(),
            password: self.admin_password.clone(),
        }
    }

    /// Streams the base backup, decompressed, to instance 0's agent; the stored object's
    /// size and hash are checked as it goes, and a mismatch fails the upload before its end.
    async fn push_base(
        &self,
        id: &ClusterId,
        base: &str,
        manifest: &Manifest,
    ) -> Result<RestoreReceived, JobError> {
        let key = format!("{base}/{}", manifest.base.key);
        let stored = self.bucket.download(&key).await?;
        let record = manifest.base.clone();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let mut feeder = tokio::spawn(async move {
            let mut checked = Hashing::new(stored);
            let mut buffer = vec![0u8; 1 << 20];
            let decoded = {
                let decoder = async_compression::tokio::bufread::ZstdDecoder::new(BufReader::new(
                    &mut checked,
                ));
                // The agent unpacks what it is sent: no more than the manifest declares, and
                // no entry that would leave its datadir.
                let mut decoder =
                    SafeNames::new(Bounded::new(decoder, record.uncompressed_size, &record.key));
                loop {
                    match decoder.read(&mut buffer).await {
                        Ok(0) => break Ok(()),
                        Ok(n) => {
                            if tx
                                .send(Ok(Bytes::copy_from_slice(&buffer[..n])))
                                .await
                                .is_err()
                            {
                                // The agent stopped reading: its answer says why.
                                return Ok(());
                            }
                        }
                        Err(e) => break Err(e),
                    }
                }
            };
            // Drain what the decoder left, so the hash covers the whole object; past the
            // stored size the manifest declares, the rest is not read.
            let room = record.size.saturating_sub(checked.bytes);
            let drained = drain_at_most(&mut checked, room).await;
            let verdict = match (decoded, drained) {
                (Err(e), _) | (_, Err(e)) => Err(e),
                _ if checked.bytes != record.size || checked.hex() != record.sha256 => {
                    Err(std::io::Error::other(format!(
                        "{} is damaged: {} bytes with SHA-256 {}, the manifest says {} bytes \
                         with {}",
                        record.key,
                        checked.bytes,
                        checked.hex(),
                        record.size,
                        record.sha256
                    )))
                }
                _ => Ok(()),
            };
            match verdict {
                Ok(()) => Ok(()),
                Err(e) => {
                    let message = e.to_string();
                    let _ = tx.send(Err(e)).await;
                    Err(message)
                }
            }
        });
        let body = tokio_stream_of(rx);
        let (host, port) = self.addresses.agent(id, 0);
        let received = super::backup::required_agents(self.agents.as_ref())?
            .restore(
                &host,
                port,
                &self.admin_password,
                &manifest.binlog_state_before,
                body,
            )
            .await;
        let received = match received {
            Ok(r) => r,
            Err(e) => {
                // When the stored object failed its check, that is the reason; the agent only
                // saw the upload end with an error.
                let ours = tokio::time::timeout(Duration::from_secs(5), &mut feeder).await;
                feeder.abort();
                let reason = match ours {
                    Ok(Ok(Err(damaged))) => format!("{key}: {damaged}"),
                    _ => e.to_string(),
                };
                return Err(self.cluster.refuse(format!(
                    "instance 0 did not take the backup {base}: {reason}"
                )));
            }
        };
        feeder.abort();
        Ok(received)
    }

    /// Waits until instance 0's agent reports the restored copy seeded; its failure is the
    /// Job's.
    async fn wait_for_seed(&self, id: &ClusterId) -> Result<(), JobError> {
        let agents = super::backup::required_agents(self.agents.as_ref())?;
        let (host, port) = self.addresses.agent(id, 0);
        let deadline = Instant::now() + self.wait_limit;
        loop {
            let last = match agents.clone_status(&host, port).await {
                Ok(s) if s.donor.as_deref() == Some(RESTORE_DONOR) => match s.phase {
                    ClonePhase::Completed => return Ok(()),
                    ClonePhase::Failed => {
                        return Err(self.cluster.refuse(format!(
                            "instance 0's agent failed to seed the restored copy: {}",
                            s.error.unwrap_or_default()
                        )));
                    }
                    phase => format!("the copy is {phase:?}"),
                },
                Ok(s) => format!("the agent reports a copy from {:?}", s.donor),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(self.cluster.refuse(format!(
                    "waited {} s for instance 0's agent to seed the restored copy: {last}",
                    self.wait_limit.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Waits until `admin` logs in and `ready` holds for the instance's `gtid_binlog_state`.
    async fn wait_until(
        &self,
        admin: &MysqlInstance,
        what: &str,
        ready: impl Fn(&GtidSet) -> bool,
    ) -> Result<(), JobError> {
        let deadline = Instant::now() + self.wait_limit;
        loop {
            let last = match binlog_state(admin).await {
                Ok(state) if ready(&state) => return Ok(()),
                Ok(state) => format!("gtid_binlog_state is {state}"),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(self.cluster.refuse(format!(
                    "waited {} s for {what}: {last}",
                    self.wait_limit.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// The backup of `prefix` (`moco/<ns>/<name>`) whose time is `point`, as it is; else the
/// plan that reaches `point`. A point nothing reaches is an error naming
/// `spec.restore.restorePoint` and what can be reached; a store that fails is its own error.
async fn choose(bucket: &Bucket, prefix: &str, point: Timestamp) -> Result<Chosen, JobError> {
    let backups = list(bucket, prefix).await?;
    let folder = layout::backup_time_text(point);
    if let Some(b) = backups
        .iter()
        .find(|b| b.manifest.is_some() && b.prefix.ends_with(&format!("/{folder}")))
    {
        return Ok(Chosen::AsItIs(b.prefix.clone()));
    }
    match plan_restore_under(bucket, prefix.to_owned(), prefix, Point::Before(point.0)).await {
        Ok(planned) => Ok(Chosen::Planned(planned)),
        Err(
            e @ (PlanRestoreError::Plan(_)
            | PlanRestoreError::NoSource(_)
            | PlanRestoreError::NoPosition { .. }),
        ) => Err(JobError::input("spec.restore.restorePoint", e.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// What instance 0 holds of a copy whose history, once in place, is `copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InPlace {
    /// Not that copy: empty (the restore goes ahead) or something else (the agent refuses).
    No,
    /// That copy and nothing after it.
    Copy,
    /// That copy and transactions after it.
    CopyAndMore,
}

fn in_place(state: &GtidSet, copy: &GtidSet) -> InPlace {
    if copy.is_empty() || !copy.is_subset(state) {
        InPlace::No
    } else if state == copy {
        InPlace::Copy
    } else {
        InPlace::CopyAndMore
    }
}

async fn binlog_state(admin: &MysqlInstance) -> Result<GtidSet, String> {
    let mut c = admin.conn().await.map_err(|e| e.to_string())?;
    let text: Option<String> = c
        .query_first("SELECT @@gtid_binlog_state")
        .await
        .map_err(|e| e.to_string())?;
    drop(c);
    GtidSet::from_mariadb(&text.unwrap_or_default()).map_err(|e| e.to_string())
}

/// The receiving half of a channel as a stream.
fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).fuse()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::BucketSpec;
    use moco_core::gtid::GtidSet;

    #[test]
    fn a_copy_in_place_is_told_from_an_empty_or_other_instance() {
        let set = |text: &str| GtidSet::from_mariadb(text).unwrap();
        let copy = set("0-10-120,0-12-2");
        assert_eq!(in_place(&set(""), &copy), InPlace::No);
        assert_eq!(in_place(&copy, &copy), InPlace::Copy);
        assert_eq!(
            in_place(&set("0-10-121,0-12-2"), &copy),
            InPlace::CopyAndMore
        );
        // Another history, shorter or beside it.
        assert_eq!(in_place(&set("0-10-119,0-12-2"), &copy), InPlace::No);
        assert_eq!(in_place(&set("0-10-120"), &copy), InPlace::No);
        assert_eq!(in_place(&set("0-30-500"), &copy), InPlace::No);
        // A backup of an empty source tells nothing apart.
        assert_eq!(in_place(&set(""), &set("")), InPlace::No);
    }

    fn manifest(started: i64, position: &str) -> Manifest {
        Manifest {
            format_version: physical::FORMAT_VERSION,
            kind: "mariadb-physical".into(),
            started_at: Timestamp(started),
            finished_at: Timestamp(started + 5),
            binlog_state_before: GtidSet::from_mariadb(position).unwrap(),
            position: Some(GtidSet::from_mariadb(position).unwrap()),
            base: physical::ObjectRecord {
                key: physical::BASE_KEY.into(),
                size: 1,
                uncompressed_size: 1,
                sha256: String::new(),
            },
        }
    }

    async fn put(bucket: &Bucket, key: &str, bytes: &[u8]) {
        bucket.upload(key, bytes).await.unwrap();
    }

    #[tokio::test]
    async fn a_point_at_a_backups_time_restores_it_as_it_is_and_other_points_are_planned() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&Default::default())
            .unwrap();
        let prefix = "moco/old/db";
        // 2026-11-24 01:00:00 UTC: a complete backup; 02:00:00: one without its manifest.
        let (t1, t2) = (1_795_568_400, 1_795_572_000);
        let complete = format!("{prefix}/{}", layout::backup_time_text(Timestamp(t1)));
        let incomplete = format!("{prefix}/{}", layout::backup_time_text(Timestamp(t2)));
        put(&bucket, &format!("{complete}/{}", physical::BASE_KEY), b"x").await;
        let text = serde_json::to_vec(&manifest(t1, "0-1-10")).unwrap();
        put(
            &bucket,
            &format!("{complete}/{}", physical::MANIFEST_KEY),
            &text,
        )
        .await;
        put(
            &bucket,
            &format!("{incomplete}/{}", physical::BASE_KEY),
            b"x",
        )
        .await;

        match choose(&bucket, prefix, Timestamp(t1)).await.unwrap() {
            Chosen::AsItIs(base) => assert_eq!(base, complete),
            other => panic!("{other:?}"),
        }
        // The incomplete backup's time is not taken as it is; no archive reaches it either.
        for point in [t2, t1 + 60, t1 - 1] {
            let e = choose(&bucket, prefix, Timestamp(point))
                .await
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("spec.restore.restorePoint: "), "{point}: {e}");
        }
    }
}
