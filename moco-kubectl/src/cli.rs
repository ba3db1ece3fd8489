//! The command line: MOCO's plugin flags, kubectl's connection flags, and `status` and `plan`.
//! The binary parses [`Cli`] and hands it to [`crate::run`].

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use moco_core::moco_accounts::Account;

/// kubectl moco: the kubectl plugin of MOCO (moco-rs).
#[derive(Debug, Parser)]
#[command(name = "kubectl-moco", bin_name = "kubectl moco", version)]
pub struct Cli {
    /// Which cluster to talk to, as kubectl takes it.
    #[command(flatten)]
    pub kube: KubeFlags,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's connection flags, accepted before or after the command.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct KubeFlags {
    /// Path to the kubeconfig file [default: $KUBECONFIG, else ~/.kube/config, else the Pod's
    /// service account].
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use [default: its current context].
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace of the MySQLCluster [default: the context's namespace, else `default`].
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the mysql client in a MySQL instance (through `kubectl exec`).
    ///
    /// Execs `mysql --defaults-extra-file=/mysql-credentials/<USER>-my.cnf [ARGS]` in the
    /// `mysqld` container of Pod `moco-<CLUSTER_NAME>-<INDEX>`, the current primary unless
    /// `--index` is given. Arguments after `--` go to mysql.
    Mysql(MysqlArgs),
    /// Print the password of a MOCO user, from the Secret `moco-<CLUSTER_NAME>`; or, with
    /// `rotate`, give all eight of MOCO's accounts new passwords.
    Credential(CredentialArgs),
    /// Switch the primary instance to one of the replicas.
    ///
    /// Without `--to`, as MOCO: annotates the current primary's Pod with
    /// `moco.cybozu.com/demote: "true"`; the operator then switches over to a replica of its
    /// choice and removes the annotation, and nothing is printed. With `--to N`: refused at
    /// once unless instance N is a Ready replica without errant transactions; otherwise the
    /// MySQLCluster is annotated `moco-rs/switchover-to: "N"` and the command waits until N
    /// is the primary (or the operator refuses N, or `--timeout` passes and the request is
    /// withdrawn). Refused for a single-instance or offline cluster.
    Switchover(SwitchoverArgs),
    /// Stop the clustering or the reconciliation of a MySQLCluster.
    #[command(subcommand)]
    Stop(Switch),
    /// Start again the clustering or the reconciliation of a MySQLCluster.
    #[command(subcommand)]
    Start(Switch),
    /// Show a MySQLCluster's state, its instances and its recent events.
    ///
    /// Replication lag needs SQL: it is read from each instance as the operator does (Pod
    /// DNS names, admin port 33062), which works only where those addresses are reachable
    /// (inside the cluster network), or from `--address` (port-forwards). Elsewhere it is `-`.
    Status(StatusArgs),
    /// Print what the operator would decide for a MySQLCluster now, without acting.
    ///
    /// Gathers the facts the operator's clustering manager sees (the MySQLCluster, its Pods and
    /// each instance's status over SQL as moco-admin) and prints the engine's decision as JSON.
    /// It writes nothing: no status, no annotation, no event. The instances must be reachable
    /// over SQL: by default at their Pod DNS names on the admin port 33062 (3306 for MariaDB),
    /// which only works inside the cluster network; from outside, port-forward each Pod
    /// (`kubectl port-forward pod/moco-db-0 33062:33062`) and give `--address 0=127.0.0.1:33062`.
    /// An instance that cannot be reached counts as down, as it would for the operator.
    Plan(PlanArgs),
}

/// What `stop` and `start` act on.
#[derive(Debug, Subcommand)]
pub enum Switch {
    /// The clustering (annotation `moco.cybozu.com/clustering-stopped`).
    Clustering(ClusterArg),
    /// The reconciliation (annotation `moco.cybozu.com/reconciliation-stopped`).
    Reconciliation(ClusterArg),
}

/// Arguments of `switchover`.
#[derive(Debug, Clone, Args)]
pub struct SwitchoverArgs {
    /// The instance to make the primary (its ordinal) [default: the operator chooses].
    #[arg(long, value_name = "N")]
    pub to: Option<u32>,
    /// With `--to`, how long to wait for the switchover (a Go duration).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The MySQLCluster's name.
    #[arg(value_name = "CLUSTER_NAME")]
    pub cluster: String,
}

/// A command taking only the cluster's name.
#[derive(Debug, Clone, Args)]
pub struct ClusterArg {
    /// The MySQLCluster's name.
    #[arg(value_name = "CLUSTER_NAME")]
    pub cluster: String,
}

/// The MySQL users whose credentials the Pods mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MysqlUser {
    /// Read-only access (the default).
    #[value(name = "moco-readonly")]
    ReadOnly,
    /// Read and write access.
    #[value(name = "moco-writable")]
    Writable,
    /// The operator's administrator account.
    #[value(name = "moco-admin")]
    Admin,
}

impl MysqlUser {
    /// The account.
    pub fn account(self) -> Account {
        match self {
            MysqlUser::ReadOnly => Account::ReadOnly,
            MysqlUser::Writable => Account::Writable,
            MysqlUser::Admin => Account::Admin,
        }
    }
}

impl fmt::Display for MysqlUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.account().name())
    }
}

/// Arguments of `mysql`.
#[derive(Debug, Clone, Args)]
pub struct MysqlArgs {
    /// User for login to mysql.
    #[arg(short = 'u', long = "mysql-user", value_enum, default_value_t = MysqlUser::ReadOnly)]
    pub user: MysqlUser,
    /// Index of the target instance [default: the current primary].
    #[arg(long, value_name = "N")]
    pub index: Option<u32>,
    /// Pass stdin to the mysql container.
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Allocate a TTY for stdin.
    #[arg(short = 't', long)]
    pub tty: bool,
    /// How long to wait for the Pod to be Running (a Go duration).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub pod_running_timeout: Duration,
    /// The MySQLCluster's name.
    #[arg(value_name = "CLUSTER_NAME")]
    pub cluster: String,
    /// Arguments of mysql, after `--` (e.g. `-- -e 'SELECT 1'`).
    #[arg(
        value_name = "MYSQL_ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
}

/// Output formats of `credential`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CredentialFormat {
    /// The password alone.
    Plain,
    /// A `[client]` option file with the user and the password.
    Mycnf,
}

/// Arguments of `credential`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CredentialArgs {
    /// `rotate`; without it, MOCO's `credential`: print a password.
    #[command(subcommand)]
    pub action: Option<CredentialAction>,
    /// User for login to mysql.
    #[arg(short = 'u', long = "mysql-user", value_enum, default_value_t = MysqlUser::ReadOnly)]
    pub user: MysqlUser,
    /// The format of the output.
    #[arg(long, value_enum, default_value_t = CredentialFormat::Plain)]
    pub format: CredentialFormat,
    /// The MySQLCluster's name.
    #[arg(value_name = "CLUSTER_NAME", required = true)]
    pub cluster: Option<String>,
}

/// What `credential` does besides printing a password.
#[derive(Debug, Clone, Subcommand)]
pub enum CredentialAction {
    /// New random passwords for MOCO's eight accounts, without a failed login on the way.
    ///
    /// Annotates the MySQLCluster `moco-rs/rotate-passwords` with the time; the operator
    /// draws the new passwords, its manager adds them beside the old ones, gives them to
    /// every reader (the Secrets, the agents, the archiver; replicas' channels re-pointed,
    /// backup Jobs already running waited for) and then drops the old ones. Waits until the
    /// operator withdraws the annotation (the rotation finished), printing its steps. A
    /// rotation interrupted (this command's end, an operator restart) goes on regardless.
    Rotate(RotateArgs),
}

/// Arguments of `credential rotate`.
#[derive(Debug, Clone, Args)]
pub struct RotateArgs {
    /// How long to follow the rotation (a Go duration); it goes on in the operator after.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The MySQLCluster's name.
    #[arg(value_name = "CLUSTER_NAME")]
    pub cluster: String,
}

/// Output formats of `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned text for people.
    Text,
    /// One JSON document.
    Json,
}

/// Where the SQL of one instance is reached instead of its Pod address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressOverride {
    /// The instance's index.
    pub index: u32,
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// How `status` and `plan` reach the instances' SQL.
#[derive(Debug, Clone, Default, Args)]
pub struct SqlArgs {
    /// Reach instance INDEX at HOST:PORT instead of its Pod address (repeatable), e.g. through
    /// `kubectl port-forward pod/moco-<CLUSTER_NAME>-INDEX 33062:33062`.
    #[arg(long = "address", value_name = "INDEX=HOST:PORT", value_parser = parse_address)]
    pub addresses: Vec<AddressOverride>,
}

/// Arguments of `status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Do not connect to the instances (no replication lag).
    #[arg(long, conflicts_with = "addresses")]
    pub no_sql: bool,
    /// Where the instances are.
    #[command(flatten)]
    pub sql: SqlArgs,
    /// The MySQLCluster's name.
    #[arg(value_name = "CLUSTER_NAME")]
    pub cluster: String,
}

/// Arguments of `plan`.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// Print `{"facts": ..., "decision": ...}` instead of the decision alone.
    #[arg(long)]
    pub show_facts: bool,
    /// Print compact JSON on one line.
    #[arg(long)]
    pub compact: bool,
    /// Where the instances are.
    #[command(flatten)]
    pub sql: SqlArgs,
    /// The MySQLCluster's name.
    #[arg(value_name = "CLUSTER_NAME")]
    pub cluster: String,
}

/// Parses a Go duration (`60s`, `1m30s`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    moco_core::validate::duration::parse_std_duration(text).map_err(|e| e.to_string())
}

/// Parses `INDEX=HOST:PORT` (`0=127.0.0.1:33062`, `1=[::1]:33063`).
pub fn parse_address(text: &str) -> Result<AddressOverride, String> {
    let expected = "expected INDEX=HOST:PORT, e.g. 0=127.0.0.1:33062";
    let (index, address) = text.split_once('=').ok_or(expected)?;
    let index = index
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("{index:?} is not an instance index; {expected}"))?;
    let (host, port) = address.rsplit_once(':').ok_or(expected)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(format!("the host is empty; {expected}"));
    }
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("{port:?} is not a TCP port; {expected}"))?;
    Ok(AddressOverride {
        index,
        host: host.to_owned(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_with_ipv6_and_name_what_is_wrong() {
        assert_eq!(
            parse_address("1=[::1]:33063"),
            Ok(AddressOverride {
                index: 1,
                host: "::1".into(),
                port: 33063
            })
        );
        assert_eq!(
            parse_address("0=db.example:3306"),
            Ok(AddressOverride {
                index: 0,
                host: "db.example".into(),
                port: 3306
            })
        );
        for (bad, says) in [
            ("127.0.0.1:3306", "expected INDEX=HOST:PORT"),
            ("x=h:1", "\"x\" is not an instance index"),
            ("0=h", "expected INDEX=HOST:PORT"),
            ("0=:1", "the host is empty"),
            ("0=h:0", "\"0\" is not a TCP port"),
            ("0=h:70000", "\"70000\" is not a TCP port"),
        ] {
            let err = parse_address(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
