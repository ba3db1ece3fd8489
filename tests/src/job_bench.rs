//! What the tests of the Pod programs and the backup, restore and archive Jobs' programs share
//! (`agent_restore`, `kube_clone`, `kube_backup`, `kube_restore`, `kube_archive`, the
//! `bench_kube_backup` benchmark): a real server and the agents' certificates in a temporary
//! directory ([`AgentBench`]), moto beside them for the Jobs ([`JobBench`]); Pods with their
//! agents standing in for a cluster's; the MySQLCluster and Pods as the fake API server holds
//! them; the addresses and the backup Job; a backup pulled from an agent.
#![allow(clippy::unwrap_used)]

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use moco_adapters::mysql::sql;

use moco_core::moco_accounts::Account;

use moco_adapters::mysqld::ServerBinary;
use moco_agent::AgentError;
use moco_agent::api::CopyPurpose;
use moco_agent::client::AgentClient;
use moco_api::addresses::StaticAddresses;
use moco_backup::Bucket;
use moco_backup::job::backup::BackupJob;
use moco_backup::job::cluster::ClusterAccess;
use moco_backup::job::server_tls::ServerTls;
use moco_backup::mariadb::binlog;
use moco_backup::mysql::command::Tools;
use moco_core::dialect::Dialect;
use moco_core::gtid::GtidSet;
use moco_testkit::apiserver::FakeApiServer;
use mysql_async::prelude::Queryable;
use serde_json::{Value, json};
use tokio::io::AsyncRead;

use crate::certs::TestCerts;
use crate::local::server_or_skip;
use crate::pod::{AgentProcess, MysqlTlsFiles, TestPod, test_password, test_passwords};
use crate::s3::{Moto, moto, moto_bucket};

/// The server-id base of the bench's Pods unless a test names another.
pub const SERVER_ID_BASE: u32 = 10;

/// A Pod program test's machine: the server, a temporary directory, the agents' certificates
/// in it.
#[derive(Debug)]
pub struct AgentBench {
    pub binary: ServerBinary,
    pub root: tempfile::TempDir,
    pub certs: TestCerts,
}

impl AgentBench {
    /// The bench of `test` (which the real-server ledger records), with the crypto provider
    /// installed; `None` when the test is skipped for lack of a server.
    pub fn start(test: &str) -> Option<AgentBench> {
        let binary = server_or_skip(test)?;
        Some(AgentBench::on(binary))
    }

    fn on(binary: ServerBinary) -> AgentBench {
        moco_http::tls::install_crypto_provider();
        let root = tempfile::tempdir().unwrap();
        let certs = TestCerts::write(&root.path().join("certs"));
        AgentBench {
            binary,
            root,
            certs,
        }
    }

    /// Pods `0..N` under `dir` (requiring TLS with `tls`), initialised with server-id base
    /// [`SERVER_ID_BASE`] and started, then their agents (with `flags`), waited for: their
    /// first start creates MOCO's accounts with the test passwords.
    pub async fn pods_with_agents<const N: usize>(
        &self,
        dir: &Path,
        tls: Option<&MysqlTlsFiles>,
        flags: &[&str],
        limit: Duration,
    ) -> ([TestPod; N], [AgentProcess; N]) {
        self.cluster_pods_with_agents(dir, SERVER_ID_BASE, test_passwords, tls, flags, limit)
            .await
    }

    /// [`AgentBench::pods_with_agents`] of a cluster of its own: server-id base `base`, its
    /// Secret's `passwords` (e.g. [`crate::pod::other_passwords`]) given to its agents.
    pub async fn cluster_pods_with_agents<const N: usize>(
        &self,
        dir: &Path,
        base: u32,
        passwords: fn() -> Vec<(&'static str, String)>,
        tls: Option<&MysqlTlsFiles>,
        flags: &[&str],
        limit: Duration,
    ) -> ([TestPod; N], [AgentProcess; N]) {
        let mut pods = Vec::new();
        for i in 0..N {
            let pod = TestPod::with_tls(&self.binary, dir, u32::try_from(i).unwrap(), tls);
            pod.init_and_start(base).await;
            pods.push(pod);
        }
        let agents: Vec<AgentProcess> = pods
            .iter()
            .map(|p| AgentProcess::start_with_passwords(p, &self.certs.agent.0, flags, passwords()))
            .collect();
        for a in &agents {
            a.wait_started(limit).await;
        }
        let (Ok(pods), Ok(agents)) = (pods.try_into(), agents.try_into()) else {
            unreachable!("N of each");
        };
        (pods, agents)
    }

    /// The backup Job of cluster `ns/db` storing into `bucket`, reaching the instances at
    /// `addresses` and presenting the cluster's agent certificate (the Secret it mounts), its
    /// work directory `work_dir` under the bench's root.
    pub fn backup_job(
        &self,
        fake: &FakeApiServer,
        ns: &str,
        bucket: &Bucket,
        addresses: &StaticAddresses,
        donor_password: String,
        work_dir: &str,
    ) -> BackupJob {
        BackupJob {
            cluster: ClusterAccess::new(fake.client(), ns, "db"),
            bucket: bucket.clone(),
            agents: Some(self.certs.agent.client(&self.certs.agent)),
            addresses: Arc::new(addresses.clone()),
            donor_password,
            backup_password: test_password(Account::Backup),
            binlog_tool: self.binary.tool("mariadb-binlog").unwrap(),
            work_dir: self.root.path().join(work_dir),
            tls: ServerTls::default(),
            tools: Tools::from_path(),
            threads: NonZeroU32::MIN,
            max_rate: None,
        }
    }
}

/// A Job test's machine: an [`AgentBench`] (its fields and methods through `Deref`) and moto on
/// loopback.
#[derive(Debug)]
pub struct JobBench {
    pub agents: AgentBench,
    pub store: Moto,
}

impl std::ops::Deref for JobBench {
    type Target = AgentBench;

    fn deref(&self) -> &AgentBench {
        &self.agents
    }
}

impl JobBench {
    /// The bench of `test` (which the real-server ledger records), with the crypto provider
    /// installed; `None` when the test is skipped for lack of a server or of moto.
    pub fn start(test: &str) -> Option<JobBench> {
        let binary = server_or_skip(test)?;
        let store = moto(test)?;
        Some(JobBench {
            agents: AgentBench::on(binary),
            store,
        })
    }

    /// The bucket `backups` on moto, created and opened as a Job opens it.
    pub async fn bucket(&self) -> Bucket {
        moto_bucket(self.store.port, "backups").await
    }
}

/// A backup (`GET /v1/backup`, for a backup) through `client` from `agent` with the test
/// clone-donor password: the donor's binlog state and the stream.
pub async fn agent_backup(
    client: &AgentClient,
    agent: &AgentProcess,
) -> Result<(GtidSet, impl AsyncRead + Unpin + Send + 'static), AgentError> {
    client
        .backup(
            "localhost",
            agent.agent.port(),
            &test_password(Account::CloneDonor),
            CopyPurpose::Backup,
        )
        .await
}

/// The MariaDB MySQLCluster `db` of `ns` (uid `uid`) as the fake API server holds it:
/// `replicas` instances, instance 0 the primary.
pub fn cluster_object(ns: &str, uid: &str, replicas: u32) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": ns, "uid": uid,
                     "annotations": {"moco-rs/flavor": "mariadb"}},
        "spec": {
            "replicas": replicas,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mariadb"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        },
        "status": {"currentPrimaryIndex": 0}
    })
}

/// Pod `moco-db-<index>` of cluster `db` in `ns` at 127.0.0.1, ready or not.
pub fn pod_object(ns: &str, index: u32, ready: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("moco-db-{index}"), "namespace": ns,
                     "labels": {"app.kubernetes.io/name": "mysql",
                                "app.kubernetes.io/instance": "db",
                                "app.kubernetes.io/created-by": "moco"}},
        "spec": {"containers": [{"name": "mysqld", "image": "mariadb"}]},
        "status": {"podIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

/// Instance `i` at 127.0.0.1 on `ports[i]`, its agent at localhost on `agents[i]` (none
/// when `agents` is shorter).
pub fn addresses(ports: &[u16], agents: &[u16]) -> StaticAddresses {
    let index = |i: usize| u32::try_from(i).unwrap();
    StaticAddresses {
        by_index: ports
            .iter()
            .enumerate()
            .map(|(i, p)| (index(i), ("127.0.0.1".to_owned(), *p)))
            .collect(),
        agents: agents
            .iter()
            .enumerate()
            .map(|(i, p)| (index(i), ("localhost".to_owned(), *p)))
            .collect(),
    }
}

/// Opens the MariaDB server of `c` for writes, as the manager opens a primary.
pub async fn set_writable(c: &mut mysql_async::Conn) {
    for s in sql::set_writable(Dialect::Mariadb) {
        c.query_drop(s).await.unwrap();
    }
}

/// Makes the MariaDB server of `c` read-only, as the manager leaves a replica.
pub async fn set_super_read_only(c: &mut mysql_async::Conn) {
    for s in sql::set_super_read_only(Dialect::Mariadb) {
        c.query_drop(s).await.unwrap();
    }
}

/// A primary of the tests' data: writable, with the table `app.t` of `columns`.
pub async fn writable_with_table(c: &mut mysql_async::Conn, columns: &str) {
    set_writable(c).await;
    c.query_drop("CREATE DATABASE app").await.unwrap();
    c.query_drop(format!("CREATE TABLE app.t ({columns})"))
        .await
        .unwrap();
}

/// The (first) position of the MariaDB server of `c`'s `@@gtid_binlog_pos`.
pub async fn binlog_position(c: &mut mysql_async::Conn) -> binlog::Gtid {
    let pos: String = c
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    binlog::events::parse_position(&pos).unwrap()[0]
}
