//! What the agent's servers share: its instance, passwords, data volume, metrics and the
//! clone slot.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use moco_adapters::mysql::{ConnectOptions, MysqlInstance};

use moco_cluster::ports::Credentials;
use moco_core::moco_accounts::{Account, MocoPasswords};

use super::metrics::AgentMetrics;
use super::readiness::ReadinessLimits;
use crate::api::CloneStatus;
use crate::client::AgentClient;
use crate::layout::DataVolume;

/// The tools a MariaDB copy needs.
#[derive(Clone, Debug)]
pub struct BackupTools {
    /// `mariadb-backup`.
    pub backup: PathBuf,
    /// `mbstream`.
    pub mbstream: PathBuf,
}

/// Shared by the agent's servers and tasks.
#[derive(Debug)]
pub struct AgentState {
    /// The instance as `moco-agent` over the socket.
    pub agent: Arc<MysqlInstance>,
    /// The instance as `moco-admin` over the socket (seeding a copy needs it).
    pub admin: Arc<MysqlInstance>,
    /// The passwords of the eight accounts: from the environment at start, replaced by the
    /// controller during a rotation ([`super::credentials`]); read with
    /// [`AgentState::passwords`].
    pub passwords: std::sync::RwLock<MocoPasswords>,
    /// The data volume.
    pub volume: DataVolume,
    /// mysqld's my.cnf.
    pub defaults_file: PathBuf,
    /// mysqld's TCP port on loopback.
    pub mysqld_port: u16,
    /// With TLS, the CA file that verifies mysqld (`--mysql-tls-ca`) and its contents.
    pub mysql_tls: Option<moco_adapters::mysql::tls::CaFile>,
    /// The socket.
    pub socket: PathBuf,
    /// MariaDB's copy tools, when found.
    pub tools: Option<BackupTools>,
    /// Calls other agents (the donor).
    pub client: Option<AgentClient>,
    /// The controller's certificate CN.
    pub controller_name: String,
    /// The name this cluster's certificates give its Pods (`*.moco-<name>.<ns>.svc`, from the
    /// agent's own certificate): a client must carry it, or be the controller, to pull or push
    /// a copy ([`super::peers`]). `None` when the certificate names no cluster.
    pub cluster_dns_name: Option<String>,
    /// `/readyz`'s limits.
    pub readiness: ReadinessLimits,
    /// Metrics.
    pub metrics: Arc<AgentMetrics>,
    /// The running or last clone.
    pub clone: Mutex<CloneStatus>,
    /// Held by the one clone or backup that may run.
    pub busy: Arc<tokio::sync::Semaphore>,
    /// Where tool output goes.
    pub log_dir: PathBuf,
}

impl AgentState {
    /// The passwords now.
    pub fn passwords(&self) -> MocoPasswords {
        self.passwords
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Uses `passwords` from now on, in the agent's own connections too.
    pub fn set_passwords(&self, passwords: MocoPasswords) {
        self.agent.set_password(&passwords.agent);
        self.admin.set_password(&passwords.admin);
        *self
            .passwords
            .write()
            .unwrap_or_else(PoisonError::into_inner) = passwords;
    }

    /// The clone status now.
    pub fn clone_status(&self) -> CloneStatus {
        self.clone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes the clone status.
    pub fn update_clone(&self, f: impl FnOnce(&mut CloneStatus)) {
        f(&mut self.clone.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// The credentials of `account`.
pub fn credentials(account: Account, passwords: &MocoPasswords) -> Credentials {
    Credentials {
        user: account.name().to_owned(),
        password: passwords.get(account).to_owned(),
    }
}

/// The instance reached over `socket` with `credentials`.
pub fn on_socket(
    socket: &std::path::Path,
    credentials: &Credentials,
    connect: Duration,
    call: Duration,
) -> MysqlInstance {
    MysqlInstance::new(
        ConnectOptions::new("localhost", 0, credentials)
            .with_name(format!(
                "mysqld at {} as {}",
                socket.display(),
                credentials.user
            ))
            .with_socket(socket.to_owned())
            .with_timeouts(connect, call)
            .with_max_connections(2),
    )
}
