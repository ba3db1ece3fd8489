//! `moco agent`'s flags: MOCO's names and defaults, plus the paths MOCO's agent did not need
//! (it never touched the datadir; ours streams MariaDB's physical copies).

use std::path::PathBuf;
use std::time::Duration;

use moco_http::listen::{ListenAddr, parse_listen_addr};

use crate::init::parse_duration;
use crate::pod;

/// `moco agent`'s flags.
#[derive(Clone, Debug, clap::Args)]
pub struct AgentArgs {
    /// The clone service (mutual TLS).
    #[arg(long, default_value = ":9080", value_parser = parse_listen_addr)]
    pub address: ListenAddr,
    /// `/healthz` and `/readyz`.
    #[arg(long, default_value = ":9081", value_parser = parse_listen_addr)]
    pub probe_address: ListenAddr,
    /// `/metrics`.
    #[arg(long, default_value = ":8080", value_parser = parse_listen_addr)]
    pub metrics_address: ListenAddr,
    /// MOCO's idle time of pooled SQL connections. Accepted; this agent keeps at most two
    /// connections on the socket.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub max_idle_time: Duration,
    /// Limit for connecting to mysqld.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub connection_timeout: Duration,
    /// Limit of one statement.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub read_timeout: Duration,
    /// A replica further behind is not ready (`0`: never checked).
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub max_delay: Duration,
    /// When to rotate the slow query log (cron, as `spec.logRotationSchedule`).
    #[arg(long, default_value = "*/5 * * * *")]
    pub log_rotation_schedule: String,
    /// Rotate the slow query log once it holds this many bytes (`0`: on schedule only).
    #[arg(long, default_value_t = 0)]
    pub log_rotation_size: u64,
    /// mysqld's UNIX socket, for every statement of the agent.
    #[arg(long, default_value = "/run/mysqld.sock")]
    pub socket_path: PathBuf,
    /// The agent's certificate (`tls.crt`, `tls.key`, `ca.crt`).
    #[arg(long, default_value = "/grpc-cert")]
    pub grpc_cert_dir: PathBuf,
    /// A replica that has received nothing is not ready until mysqld has run this long.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub transaction_queueing_wait: Duration,
    /// MOCO's `agentUseLocalhost`. Accepted; this agent always reaches mysqld on its socket
    /// (and on 127.0.0.1 for the backup tool), which needs no address.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub mysqld_localhost: bool,
    /// mysqld requires TLS (`moco-rs/tls`): the CA file that verifies it on 127.0.0.1, where
    /// `mariadb-backup` streams clones and backups and `moco-admin` first logs in.
    #[arg(long)]
    pub mysql_tls_ca: Option<PathBuf>,
    /// With `--mysql-tls-ca`: how often the TLS files beside it (`tls.crt`, `tls.key`,
    /// `ca.crt`) are checked; when cert-manager has renewed them, mysqld reloads them.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub mysql_tls_check_interval: Duration,
    /// mysqld's TCP port on loopback (the backup tool and the first login of `moco-admin`).
    #[arg(long, default_value_t = 3306)]
    pub mysqld_port: u16,
    /// The data volume (the datadir is `data/` under it).
    #[arg(long, default_value = "/var/lib/mysql")]
    pub data_dir: PathBuf,
    /// The per-instance snippet directory `moco init` writes (the agent keeps its replica role
    /// line in step).
    #[arg(long, default_value = "/etc/mysql-conf.d")]
    pub conf_dir: PathBuf,
    /// mysqld's my.cnf (the backup tool reads it).
    #[arg(long, default_value = "/etc/mysql/my.cnf")]
    pub defaults_file: PathBuf,
    /// The slow query log.
    #[arg(long, default_value = "/var/log/mysql/mysql.slow")]
    pub slow_log: PathBuf,
    /// The CN the controller's client certificate carries.
    #[arg(long, default_value = crate::api::CONTROLLER_NAME)]
    pub controller_name: String,
    /// The Pod's name.
    #[arg(long, env = pod::POD_NAME)]
    pub pod_name: String,
    /// The MySQLCluster's name.
    #[arg(long, env = pod::CLUSTER_NAME)]
    pub cluster_name: String,
}
