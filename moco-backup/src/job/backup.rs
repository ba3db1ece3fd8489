//! The backup Job (`moco backup BUCKET NAMESPACE NAME`). A MySQL cluster is backed up in
//! MOCO's own format ([`super::mysql`]); a MariaDB cluster by MOCO's steps with a physical
//! backup in place of `mysqlsh`'s dump:
//!
//! 1. the MySQLCluster must be online and have all its Pods;
//! 2. the source is MOCO's first choice: the ready replica of lowest ordinal, else the primary
//!    when it is ready;
//! 3. its agent streams `mariadb-backup` (`GET /v1/backup`, mutual TLS with the cluster's
//!    certificate and the clone-donor password), which goes compressed and hashed into the
//!    bucket under `moco/<ns>/<name>/<YYYYMMDD-hhmmss>/`, the manifest last;
//! 4. `status.backup` is written and the `BackupCreated` Event created.
//!
//! A failure before the manifest leaves no backup that looks complete; `status.backup` keeps
//! the previous one. MOCO's uuid-set rule guards the continuity of the binlogs it fetches at
//! each backup; a MariaDB backup here stands alone, and MariaDB has no `server_uuid`, so
//! `sourceUUID` and `uuidSet` stay empty.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_agent::api::CopyPurpose;
use moco_agent::client::AgentClient;
use moco_api::addresses::{AddressResolver, PodNetwork};
use moco_api::annotations::flavor_of;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::{BackupStatus, MySQLCluster};
use moco_cluster::ports::Credentials;
use moco_core::facts::Flavor;
use moco_core::moco_accounts::Account;
use moco_core::validate::duration::format_go_duration;

use super::JobError;
use super::archive::{PrimaryAccess, archiver_of, round_through_primary};
use super::args::{BackupArgs, CommonFlags, DONOR_PASSWORD_ENV, PASSWORD_ENV, required};
use super::cluster::{BACKUP_CREATED, BACKUP_NO_BINLOG, ClusterAccess, ready_ordinals};
use super::mysql::{BackupServers, MysqlBackup, MysqlTools, SqlServers};
use super::server_tls::ServerTls;
use crate::bucket::Bucket;
use crate::layout;
use crate::mariadb::binlog::ArchiveError;
use crate::mariadb::binlog::archive::Round;
use crate::mariadb::physical::{self, Manifest};
use crate::mysql::command::Tools;
use crate::mysql::format;
use crate::mysql::format::command_line::Endpoint;
use crate::mysql::format::source::{PreviousBackup, ReadyInstance};
use moco_core::facts::Role;
use moco_core::resources::ByteRate;

/// What the backup Job needs besides its arguments.
pub struct BackupJob {
    /// The cluster through the API.
    pub cluster: ClusterAccess,
    /// Where backups go.
    pub bucket: Bucket,
    /// Calls agents with the cluster's certificate; `None` when the Job has none: the
    /// operator mounts it into MariaDB clusters' Jobs only, and a MySQL backup needs no agent.
    pub agents: Option<AgentClient>,
    /// Where the agents are.
    pub addresses: Arc<dyn AddressResolver>,
    /// The cluster's `moco-clone-donor` password (MariaDB clusters' Jobs get it; empty
    /// otherwise).
    pub donor_password: String,
    /// The `moco-backup` account's password: the binlogs are fetched through the primary.
    pub backup_password: String,
    /// `mariadb-binlog`.
    pub binlog_tool: PathBuf,
    /// The work directory (fetched binlog files pass through it).
    pub work_dir: PathBuf,
    /// How the servers are verified, when the cluster has TLS.
    pub tls: ServerTls,
    /// MOCO's tools, for a MySQL cluster.
    pub tools: Tools,
    /// `--threads`: the MySQL tools' workers.
    pub threads: NonZeroU32,
    /// `--max-rate`: the cap on the backup's read rate.
    pub max_rate: Option<ByteRate>,
}

impl std::fmt::Debug for BackupJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupJob")
            .field("cluster", &self.cluster)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

/// What the Job did.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupDone {
    /// The instance backed up.
    pub source_index: u32,
    /// The backup's prefix in the bucket.
    pub prefix: String,
    /// Its manifest: a MariaDB physical backup's (a MySQL dump in MOCO's format has none).
    pub manifest: Option<Manifest>,
    /// What was recorded in `status.backup`.
    pub status: BackupStatus,
}

/// The instance to back up: MOCO's choice for a first backup, from the ready ordinals and
/// the recorded primary.
pub fn choose_source(
    ready: &std::collections::BTreeSet<u32>,
    primary: u32,
) -> Result<u32, format::FormatError> {
    let instances: Vec<ReadyInstance> = ready
        .iter()
        .map(|&index| ReadyInstance {
            index,
            server_uuid: String::new(),
            role: if index == primary {
                Role::Primary
            } else {
                Role::Replica
            },
        })
        .collect();
    format::source::choose_source(&PreviousBackup::default(), &instances).map(|c| c.index)
}

/// `status.backup` for `manifest`, taken from `source_index` in `elapsed`.
pub fn backup_status(manifest: &Manifest, source_index: u32, elapsed: Duration) -> BackupStatus {
    BackupStatus {
        time: k8s_openapi::jiff::Timestamp::from_second(manifest.started_at.0)
            .ok()
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
        elapsed: format_go_duration(Duration::from_secs(elapsed.as_secs())),
        source_index: i32::try_from(source_index).unwrap_or(i32::MAX),
        gtid_set: manifest
            .position
            .as_ref()
            .map(moco_adapters::mysql::sql::mariadb_binlog_state_text)
            .unwrap_or_default(),
        dump_size: i64::try_from(manifest.base.size).unwrap_or(i64::MAX),
        ..BackupStatus::default()
    }
}

/// A client of the cluster's agents with the certificate in `--grpc-cert-dir`, or `None` when
/// that directory holds no certificate (a MySQL cluster's Job, which needs no agent).
pub(crate) fn mounted_agent_client(common: &CommonFlags) -> Result<Option<AgentClient>, JobError> {
    if !common.grpc_cert_dir.join("tls.crt").exists() {
        return Ok(None);
    }
    agent_client(common).map(Some)
}

/// The agents' client a MariaDB Job needs.
pub(crate) fn required_agents(agents: Option<&AgentClient>) -> Result<&AgentClient, JobError> {
    agents.ok_or_else(|| {
        JobError::input(
            "--grpc-cert-dir",
            "holds no tls.crt: a MariaDB cluster's copy goes through its agents, with the \
             cluster's agent certificate (moco-<name>-grpc, which the operator mounts into \
             MariaDB clusters' Jobs)",
        )
    })
}

/// A client of the cluster's agents with the certificate in `--grpc-cert-dir`.
fn agent_client(common: &CommonFlags) -> Result<AgentClient, JobError> {
    let dir = &common.grpc_cert_dir;
    let tls = moco_http::tls::mtls_client_config(
        &dir.join("tls.crt"),
        &dir.join("tls.key"),
        &dir.join("ca.crt"),
    )
    .map_err(|e| JobError::input("--grpc-cert-dir", e.to_string()))?;
    Ok(AgentClient::new(tls, Duration::from_secs(30)))
}

impl BackupJob {
    /// The Job as its Pod runs it: the API through the in-cluster configuration (or a
    /// kubeconfig), the agents at their Pods' DNS names with the certificate in
    /// `--grpc-cert-dir`, the bucket's credentials and the passwords from `env`.
    pub async fn in_pod(
        args: &BackupArgs,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, JobError> {
        let backup_password = required(env, PASSWORD_ENV)?;
        // Only MariaDB clusters' Jobs get it (and the agent certificate): it is checked where
        // a MariaDB backup needs it, since the flavour is known only from the cluster.
        let donor_password = env.get(DONOR_PASSWORD_ENV).cloned().unwrap_or_default();
        let bucket = args.common.bucket_spec(&args.bucket)?.open(env)?;
        let client = kube::Client::try_default()
            .await
            .map_err(JobError::kube("connect to the Kubernetes API"))?;
        Ok(BackupJob {
            cluster: ClusterAccess::new(client, &args.namespace, &args.name),
            bucket,
            agents: mounted_agent_client(&args.common)?,
            addresses: Arc::new(PodNetwork),
            donor_password,
            backup_password,
            binlog_tool: PathBuf::from("mariadb-binlog"),
            work_dir: args.common.work_dir.clone(),
            tls: ServerTls::from_flag(args.common.mysql_tls_ca.as_deref())?,
            tools: Tools::from_path(),
            threads: NonZeroU32::new(args.common.threads).unwrap_or(NonZeroU32::MIN),
            max_rate: args.max_rate.clone(),
        })
    }

    /// Runs the Job once: a MariaDB cluster's physical backup, or MOCO's dump of a MySQL
    /// cluster ([`super::mysql`]).
    pub async fn run(&self) -> Result<BackupDone, JobError> {
        let cluster = self.cluster.get().await?;
        if flavor_of(&cluster)? == Flavor::Mysql {
            let servers = SqlServers::new(
                self.addresses.clone(),
                ClusterId::of(&cluster)?,
                Credentials {
                    user: Account::Backup.name().to_owned(),
                    password: self.backup_password.clone(),
                },
                self.tls.clone(),
            );
            return self.run_mysql(cluster, &servers).await;
        }
        self.run_mariadb(cluster).await
    }

    /// MOCO's backup of the MySQL cluster `cluster`, with `servers` answering for its
    /// instances (the Job's own are [`SqlServers`]): `status.backup` with all of MOCO's
    /// fields, `BackupCreated`, and `BackupNoBinlog` when a second or later backup has no
    /// binlogs.
    pub async fn run_mysql<S: BackupServers>(
        &self,
        cluster: MySQLCluster,
        servers: &S,
    ) -> Result<BackupDone, JobError> {
        let (id, ready, primary) = self.check(&cluster).await?;
        let previous = cluster
            .status
            .as_ref()
            .map(|s| super::mysql::previous_backup(&s.backup))
            .unwrap_or_default();
        let ready = ready
            .into_iter()
            .map(|i| {
                (
                    i,
                    if i == primary {
                        Role::Primary
                    } else {
                        Role::Replica
                    },
                )
            })
            .collect();
        let tools = MysqlTools {
            tools: self.tools.clone(),
            work_dir: self.work_dir.clone(),
            threads: self.threads,
        };
        let job = MysqlBackup {
            id: &id,
            previous,
            ready,
            password: &self.backup_password,
            max_rate: self.max_rate.as_ref(),
        };
        let endpoint = |index| {
            let (host, port) = self.addresses.peers(&id, index);
            Endpoint { host, port }
        };
        let done = super::mysql::backup(
            &tools,
            servers,
            &self.bucket,
            &moco_cluster::ports::SystemClock,
            endpoint,
            job,
        )
        .await?;
        self.cluster.record_backup(done.status.clone()).await?;
        self.cluster.event(&cluster, BACKUP_CREATED).await?;
        if done.no_binlog.is_some() {
            self.cluster.event(&cluster, BACKUP_NO_BINLOG).await?;
        }
        tracing::info!(key = %done.dump_key, bytes = done.status.dump_size, "backup created");
        let prefix = done
            .dump_key
            .rsplit_once('/')
            .map_or_else(|| done.dump_key.clone(), |(folder, _)| folder.to_owned());
        Ok(BackupDone {
            source_index: u32::try_from(done.status.source_index).unwrap_or(0),
            prefix,
            manifest: None,
            status: done.status,
        })
    }

    async fn run_mariadb(&self, cluster: MySQLCluster) -> Result<BackupDone, JobError> {
        let began = Instant::now();
        let (id, ready, primary) = self.check(&cluster).await?;
        let source_index =
            choose_source(&ready, primary).map_err(|e| self.cluster.refuse(e.to_string()))?;
        let (started_at, prefix) = layout::free_folder(
            &self.bucket,
            &layout::cluster_prefix(&id.namespace, &id.name),
            &moco_cluster::ports::SystemClock,
        )
        .await?;
        let (host, port) = self.addresses.agent(&id, source_index);
        tracing::info!(source = source_index, agent = %format!("{host}:{port}"), %prefix, "backing up");
        let agents = required_agents(self.agents.as_ref())?;
        if self.donor_password.is_empty() {
            return Err(JobError::input(
                DONOR_PASSWORD_ENV,
                "not set: a MariaDB cluster's backup is read from an agent with the clone-donor \
                 password",
            ));
        }
        let (state, stream) = agents
            .backup(&host, port, &self.donor_password, CopyPurpose::Backup)
            .await?;
        let manifest = physical::store_stream(
            stream,
            started_at,
            state,
            &self.bucket,
            &prefix,
            self.max_rate.as_ref(),
        )
        .await?;
        let binlogs = self.archive_binlogs(&id, &cluster).await;
        let mut status = backup_status(&manifest, source_index, began.elapsed());
        match &binlogs {
            Ok(round) => status.binlog_size = i64::try_from(round.bytes).unwrap_or(i64::MAX),
            Err(e) => {
                tracing::warn!(error = %e, "the binlogs were not archived");
                status.warnings = Some(vec![crate::guard::tool_output::for_status(&format!(
                    "the binlogs were not archived: {e}"
                ))]);
            }
        }
        self.cluster.record_backup(status.clone()).await?;
        self.cluster.event(&cluster, BACKUP_CREATED).await?;
        if binlogs.is_err() {
            self.cluster.event(&cluster, BACKUP_NO_BINLOG).await?;
        }
        tracing::info!(%prefix, bytes = manifest.base.size, "backup created");
        Ok(BackupDone {
            source_index,
            prefix,
            manifest: Some(manifest),
            status,
        })
    }

    /// One archiving round through the primary: the binlogs it closed since the archive's
    /// last file, so that every second between this backup and the next becomes restorable
    /// once the next has run (MOCO's binlog part; `moco archive` runs rounds every few
    /// seconds instead). A failure is MOCO's `BackupNoBinlog`, not a failed Job.
    async fn archive_binlogs(
        &self,
        id: &ClusterId,
        cluster: &MySQLCluster,
    ) -> Result<Round, ArchiveError> {
        let access = PrimaryAccess {
            addresses: self.addresses.clone(),
            backup_password: self.backup_password.clone(),
            binlog_tool: self.binlog_tool.clone(),
            scratch: self.work_dir.join("binlog"),
            tls: self.tls.clone(),
        };
        let mut archiver = archiver_of(self.bucket.clone(), id);
        let (_, round) = round_through_primary(&mut archiver, id, cluster, &access).await?;
        tracing::info!(files = ?round.stored, bytes = round.bytes, "binlogs archived");
        Ok(round)
    }

    /// MOCO's checks; then the ready ordinals and the recorded primary.
    async fn check(
        &self,
        cluster: &MySQLCluster,
    ) -> Result<(ClusterId, std::collections::BTreeSet<u32>, u32), JobError> {
        if cluster.spec.offline {
            return Err(self
                .cluster
                .refuse("spec.offline is true: an offline cluster has no server to back up"));
        }
        let id = ClusterId::of(cluster)?;
        let pods = self.cluster.pods().await?;
        let replicas = cluster.spec.replicas;
        if i64::try_from(pods.len()).ok() != Some(i64::from(replicas)) {
            return Err(self.cluster.refuse(format!(
                "{} Pods exist for spec.replicas {replicas}; a backup waits for all of them",
                pods.len()
            )));
        }
        let primary = cluster
            .status
            .as_ref()
            .map_or(0, |s| s.current_primary_index);
        let primary = u32::try_from(primary).unwrap_or(0);
        let ready = ready_ordinals(&id.name, &pods);
        Ok((id, ready, primary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moco_core::time::Timestamp;
    use std::collections::BTreeSet;

    #[test]
    fn the_source_is_the_first_ready_replica_else_the_primary() {
        let ready = |v: &[u32]| v.iter().copied().collect::<BTreeSet<u32>>();
        assert_eq!(choose_source(&ready(&[0, 1, 2]), 0).unwrap(), 1);
        assert_eq!(choose_source(&ready(&[0, 1, 2]), 1).unwrap(), 0);
        assert_eq!(choose_source(&ready(&[0, 2]), 0).unwrap(), 2);
        assert_eq!(choose_source(&ready(&[1]), 1).unwrap(), 1);
        assert!(choose_source(&ready(&[]), 0).is_err());
    }

    /// Regression: a MySQL cluster's Job gets no agent certificate and no clone-donor
    /// password (the operator renders them for MariaDB Jobs only), and `in_pod` required both,
    /// so every MySQL backup and restore Job would have failed before looking at the cluster.
    #[test]
    fn the_agent_certificate_is_optional_until_a_mariadb_copy_needs_it() {
        let dir = tempfile::tempdir().unwrap();
        let flags = CommonFlags::for_tests(dir.path());
        let none = mounted_agent_client(&flags).unwrap();
        let e = required_agents(none.as_ref()).unwrap_err().to_string();
        assert!(e.starts_with("--grpc-cert-dir: holds no tls.crt"), "{e}");
        // A certificate that is there but unreadable is an error at once.
        std::fs::write(dir.path().join("tls.crt"), "not a certificate").unwrap();
        let e = mounted_agent_client(&flags).unwrap_err().to_string();
        assert!(e.starts_with("--grpc-cert-dir: "), "{e}");
    }

    #[test]
    fn the_status_carries_mocos_fields() {
        let manifest = Manifest {
            format_version: physical::FORMAT_VERSION,
            kind: "mariadb-physical".into(),
            started_at: Timestamp(1_795_000_000),
            finished_at: Timestamp(1_795_000_062),
            binlog_state_before: moco_core::gtid::GtidSet::from_mariadb("0-1-10").unwrap(),
            position: Some(moco_core::gtid::GtidSet::from_mariadb("0-1-12").unwrap()),
            base: physical::ObjectRecord {
                key: physical::BASE_KEY.into(),
                size: 1234,
                uncompressed_size: 5678,
                sha256: "ab".into(),
            },
        };
        let s = backup_status(&manifest, 2, Duration::from_millis(62_700));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["time"], "2026-11-18T11:06:40Z");
        assert_eq!(json["elapsed"], "1m2s");
        assert_eq!(json["sourceIndex"], 2);
        assert_eq!(json["gtidSet"], "0-1-12");
        assert_eq!(json["dumpSize"], 1234);
        assert_eq!(json["binlogSize"], 0);
    }
}
