//! `moco archive`: binlog archiving on Kubernetes every few seconds, beyond MOCO, whose
//! recovery point is the backup schedule. It is opt-in per cluster with the MySQLCluster
//! annotation `moco-rs/binlog-archive-interval` (a Go duration such as `5s`; MOCO's API has no
//! field for it), on a cluster with a BackupPolicy: the archive goes to the policy's bucket with
//! its credentials. The operator then runs the Deployment `moco-archive-<name>` with the
//! policy's Job settings, and its one Pod runs this program.
//!
//! On MariaDB, each round is the backup Job's binlog step ([`round_through_primary`]): through
//! the instance the MySQLCluster records as primary (`status.currentPrimaryIndex`), the binlog
//! is closed when the archive lacks a transaction, and each closed file that adds to the
//! history is fetched with `mariadb-binlog --read-from-remote-server --raw` and stored. On
//! MySQL ([`ArchiveJob::mysql_round`], [`super::mysql::archive`]), `mysqlbinlog` fetches what
//! the primary executed that the archive lacks (from the newest backup on, at the start). Nothing here needs
//! the Pods' volumes, so the archiver follows a switchover or a failover by reading the status
//! again each round; a round against a demoted, read-only instance stores nothing.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use moco_adapters::mysql::{ConnectOptions, MysqlInstance};

use moco_api::addresses::{AddressResolver, PodNetwork};
use moco_api::annotations::flavor_of;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::ports::Credentials;
use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use tokio::sync::watch;

use super::JobError;
use super::args::{ArchiveArgs, PASSWORD_ENV, required};
use super::cluster::ClusterAccess;
use super::mysql::archive::{ArchiveServers, MysqlRound};
use super::mysql::{MysqlTools, SqlServers};
use super::server_tls::ServerTls;
use crate::bucket::Bucket;
use crate::layout;
use crate::mariadb::binlog::archive::Round;
use crate::mariadb::binlog::fetch::{BinlogFiles, RemoteFetch};
use crate::mariadb::binlog::{ArchiveError, Archiver};
use crate::mysql::command::Tools;
use crate::mysql::format::command_line::Endpoint;

/// How to reach the primary for a round.
#[derive(Clone)]
pub struct PrimaryAccess {
    /// Where the instances are.
    pub addresses: Arc<dyn AddressResolver>,
    /// The `moco-backup` account's password.
    pub backup_password: String,
    /// `mariadb-binlog`.
    pub binlog_tool: PathBuf,
    /// Where fetched files pass through.
    pub scratch: PathBuf,
    /// How the primary is verified, when the cluster has TLS.
    pub tls: ServerTls,
}

impl std::fmt::Debug for PrimaryAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrimaryAccess")
            .field("binlog_tool", &self.binlog_tool)
            .field("scratch", &self.scratch)
            .finish_non_exhaustive()
    }
}

/// The archiver of cluster `id` (keys under `moco/<ns>/<name>`).
pub fn archiver_of(bucket: Bucket, id: &ClusterId) -> Archiver {
    let prefix = layout::cluster_prefix(&id.namespace, &id.name);
    Archiver::new(bucket, prefix.trim_end_matches('/'))
}

/// One archiving round through the instance `cluster` records as its primary. A read-only
/// instance (the status is stale) is an error: nothing was archived.
pub async fn round_through_primary(
    archiver: &mut Archiver,
    id: &ClusterId,
    cluster: &MySQLCluster,
    access: &PrimaryAccess,
) -> Result<(u32, Round), ArchiveError> {
    let primary = cluster
        .status
        .as_ref()
        .map_or(0, |s| s.current_primary_index);
    let primary = u32::try_from(primary).unwrap_or(0);
    let (host, port) = access.addresses.peers(id, primary);
    let credentials = Credentials {
        user: Account::Backup.name().to_owned(),
        password: access.backup_password.clone(),
    };
    let server = MysqlInstance::new(
        access.tls.apply(
            ConnectOptions::new(host.clone(), port, &credentials)
                .with_name(format!("instance {primary}")),
        ),
    );
    let files = BinlogFiles::Remote(RemoteFetch {
        tool: access.binlog_tool.clone(),
        scratch: access.scratch.clone(),
        host,
        port,
        credentials,
        ssl_ca: access.tls.ca_file(),
    });
    let round = archiver.round(&server, &files).await;
    let target = server.target().to_owned();
    let _ = server.disconnect().await;
    let round = round?;
    if !round.primary {
        return Err(ArchiveError::Server {
            target,
            message: "read-only: not the primary".to_owned(),
        });
    }
    Ok((primary, round))
}

/// What the archiving program needs besides its arguments.
#[derive(Debug)]
pub struct ArchiveJob {
    /// The cluster through the API.
    pub cluster: ClusterAccess,
    /// Where the archive is.
    pub bucket: Bucket,
    /// How to reach the primary.
    pub access: PrimaryAccess,
    /// MOCO's tools and the work dir, for a MySQL cluster ([`super::mysql::archive`]).
    pub mysql: MysqlTools,
    /// The pause between rounds.
    pub every: Duration,
}

/// One round's outcome, for the caller to observe (tests, logs).
#[derive(Clone, Debug)]
pub struct RoundOutcome {
    /// The instance archived from, when the cluster could be read.
    pub primary: Option<u32>,
    /// What the round did, or why it failed.
    pub result: Result<Archived, String>,
}

/// What a good round did, by the cluster's flavor.
#[derive(Clone, Debug)]
pub enum Archived {
    /// A MariaDB cluster's round (closed binlog files).
    Mariadb(Round),
    /// A MySQL cluster's round (`mysqlbinlog` fetches).
    Mysql(MysqlRound),
}

impl Archived {
    /// The stored files and their bytes; `None` when the round stored nothing.
    fn stored(&self) -> Option<(Vec<String>, u64)> {
        match self {
            Archived::Mariadb(r) => (!r.stored.is_empty()).then(|| (r.stored.clone(), r.bytes)),
            Archived::Mysql(r) => r.stored.as_ref().map(|r| (r.files.clone(), r.bytes)),
        }
    }
}

impl ArchiveJob {
    /// The program as its Pod runs it (see [`super::backup::BackupJob::in_pod`]).
    pub async fn in_pod(
        args: &ArchiveArgs,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, JobError> {
        let backup_password = required(env, PASSWORD_ENV)?;
        let bucket = args.common.bucket_spec(&args.bucket)?.open(env)?;
        let every = moco_core::validate::duration::parse_std_duration(&args.every)
            .ok()
            .filter(|d| *d >= Duration::from_secs(1))
            .ok_or_else(|| {
                JobError::input(
                    "--every",
                    format!("{:?}: a Go duration of 1s or more", args.every),
                )
            })?;
        let client = kube::Client::try_default()
            .await
            .map_err(JobError::kube("connect to the Kubernetes API"))?;
        Ok(ArchiveJob {
            cluster: ClusterAccess::new(client, &args.namespace, &args.name),
            bucket,
            access: PrimaryAccess {
                addresses: Arc::new(PodNetwork),
                backup_password,
                binlog_tool: PathBuf::from("mariadb-binlog"),
                scratch: args.common.work_dir.join("binlog"),
                tls: ServerTls::from_flag(args.common.mysql_tls_ca.as_deref())?,
            },
            mysql: MysqlTools {
                tools: Tools::from_path(),
                work_dir: args.common.work_dir.clone(),
                threads: NonZeroU32::new(args.common.threads).unwrap_or(NonZeroU32::MIN),
            },
            every,
        })
    }

    /// Archives every `every` until `stop` turns true; `observe` sees each round.
    pub async fn run(
        &self,
        mut stop: watch::Receiver<bool>,
        mut observe: impl FnMut(&RoundOutcome),
    ) {
        let mut archiver: Option<(ClusterId, Archiver)> = None;
        loop {
            let outcome = self.round(&mut archiver).await;
            match outcome.result.as_ref().map(Archived::stored) {
                Ok(Some((files, bytes))) => {
                    tracing::info!(primary = ?outcome.primary, ?files, bytes, "binlogs archived");
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(primary = ?outcome.primary, error = %e, "archiving round failed")
                }
            }
            observe(&outcome);
            tokio::select! {
                _ = stop.changed() => {}
                _ = tokio::time::sleep(self.every) => {}
            }
            if *stop.borrow() {
                return;
            }
        }
    }

    async fn round(&self, archiver: &mut Option<(ClusterId, Archiver)>) -> RoundOutcome {
        let cluster = match self.cluster.get().await {
            Ok(c) => c,
            Err(e) => {
                return RoundOutcome {
                    primary: None,
                    result: Err(e.to_string()),
                };
            }
        };
        if cluster.spec.offline {
            return RoundOutcome {
                primary: None,
                result: Err("spec.offline is true: no server to archive from".to_owned()),
            };
        }
        let id = match ClusterId::of(&cluster) {
            Ok(id) => id,
            Err(e) => {
                return RoundOutcome {
                    primary: None,
                    result: Err(e.to_string()),
                };
            }
        };
        if matches!(flavor_of(&cluster), Ok(Flavor::Mysql)) {
            let servers = SqlServers::new(
                self.access.addresses.clone(),
                id.clone(),
                Credentials {
                    user: Account::Backup.name().to_owned(),
                    password: self.access.backup_password.clone(),
                },
                self.access.tls.clone(),
            );
            return self.mysql_round(&cluster, &id, &servers).await;
        }
        // The archiver keeps what it learnt (files seen, the timeline) between rounds.
        if archiver.as_ref().is_some_and(|(known, _)| *known != id) {
            *archiver = None;
        }
        let (_, a) =
            archiver.get_or_insert_with(|| (id.clone(), archiver_of(self.bucket.clone(), &id)));
        match round_through_primary(a, &id, &cluster, &self.access).await {
            Ok((primary, round)) => RoundOutcome {
                primary: Some(primary),
                result: Ok(Archived::Mariadb(round)),
            },
            Err(e) => RoundOutcome {
                primary: None,
                result: Err(e.to_string()),
            },
        }
    }
}

impl ArchiveJob {
    /// One round of the MySQL cluster `cluster` through `servers` (the program's own are
    /// [`SqlServers`]): through the instance `status.currentPrimaryIndex` names, from the newest
    /// backup's `gtidSet` on. Before the first backup there is nothing a restore could start
    /// from, so nothing is archived.
    pub async fn mysql_round<S: ArchiveServers>(
        &self,
        cluster: &MySQLCluster,
        id: &ClusterId,
        servers: &S,
    ) -> RoundOutcome {
        let status = cluster.status.as_ref();
        let primary = u32::try_from(status.map_or(0, |s| s.current_primary_index)).unwrap_or(0);
        let newest_dump = status
            .map(|s| s.backup.gtid_set.as_str())
            .unwrap_or_default();
        if newest_dump.is_empty() {
            return RoundOutcome {
                primary: None,
                result: Err(
                    "no backup yet (status.backup.gtidSet is empty): archiving starts after the first backup"
                        .to_owned(),
                ),
            };
        }
        let newest_dump = match GtidSet::parse(newest_dump) {
            Ok(set) => set,
            Err(e) => {
                return RoundOutcome {
                    primary: None,
                    result: Err(format!("status.backup.gtidSet: {e}")),
                };
            }
        };
        let (host, port) = self.access.addresses.peers(id, primary);
        let round = super::mysql::archive::round(
            &self.mysql,
            servers,
            &self.bucket,
            &layout::cluster_prefix(&id.namespace, &id.name),
            primary,
            &Endpoint { host, port },
            &newest_dump,
            &self.access.backup_password,
        )
        .await;
        RoundOutcome {
            primary: Some(primary),
            result: round.map(Archived::Mysql).map_err(|e| e.to_string()),
        }
    }
}
