//! Instance initialisation, as moco-agent does it once per fresh datadir.

use moco_cluster::ports::{Credentials, PortError};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::sql;

use super::users::{DEFAULT_ACCOUNT_HOST, account_statements, required_plugins};
use super::{ConnectOptions, MysqlInstance, ServerInfo};
use moco_core::dialect::Dialect;
use moco_core::moco_accounts::{Account, MocoPasswords};

/// Choices of [`initialize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitOptions {
    /// Host part of the accounts (`%`, as MOCO; covers loopback TCP).
    pub account_host: String,
    /// Drop the passwordless bootstrap accounts afterwards, as MOCO drops `root@localhost`
    /// (on MariaDB: every `root` and anonymous account `mariadb-install-db` created). The
    /// admin account over TCP remains the way in.
    pub drop_root: bool,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions {
            account_host: DEFAULT_ACCOUNT_HOST.to_owned(),
            drop_root: true,
        }
    }
}

/// How to reach the server as `moco-admin` over TCP, given how it was reached for bootstrap.
pub fn admin_options(bootstrap: &ConnectOptions, passwords: &MocoPasswords) -> ConnectOptions {
    let credentials = Credentials {
        user: Account::Admin.name().to_owned(),
        password: passwords.admin.clone(),
    };
    let mut opts = ConnectOptions::new(bootstrap.host.clone(), bootstrap.port, &credentials)
        .with_name(bootstrap.name.clone())
        .with_timeouts(bootstrap.connect_timeout, bootstrap.call_timeout)
        .with_max_connections(bootstrap.max_connections);
    opts.socket = None;
    // The admin's way in is TCP: with the server's TLS when the bootstrap names it.
    opts.tls = bootstrap.tls.clone();
    opts
}

/// Initialises a fresh server reached through `bootstrap` (root without a password, usually
/// on the socket): resets binlogs and GTIDs, makes the server read-only for everyone but root,
/// creates MOCO's eight accounts with `sql_log_bin=0` (so no GTID exists before replication
/// is set up), installs MySQL's plugins, checks that `moco-admin` can log in over TCP, drops
/// the bootstrap accounts (per `options`) and leaves the server super-read-only. Refuses a
/// server that already executed transactions, since the reset would destroy their history.
///
/// The order matters: once an account exists the manager may log in (it probes every few
/// seconds), and a client too. So the reset comes before any account exists, and the server
/// is never writable meanwhile; an earlier order (accounts on a writable server, then the
/// reset) let a manager open the server and a client commit before the reset wiped the
/// commit's binlog and GTID. If the manager opens the server for writes while this runs, it
/// stays open: the final fence is skipped rather than undoing the manager's decision.
pub async fn initialize(
    bootstrap: &ConnectOptions,
    passwords: &MocoPasswords,
    options: &InitOptions,
) -> Result<ServerInfo, PortError> {
    let boot = MysqlInstance::new(bootstrap.clone());
    let info = boot.server_info().await?;
    let d = info.dialect;
    {
        let mut conn = boot.conn().await?;
        let executed = boot.executed_gtid_on(&mut conn, d).await?;
        if !executed.is_empty() {
            return Err(boot.failed(format!(
                "refusing to initialise: the server already executed {executed}"
            )));
        }
        boot.exec(&mut conn, "SET SESSION sql_log_bin=0").await?;
        boot.exec_all(&mut conn, &sql::reset_binlog_and_gtids_as_root(d))
            .await?;
        boot.exec_all(&mut conn, &read_only_but_root(d)).await?;
        create_accounts(&boot, &mut conn, d, passwords, &options.account_host).await?;
        for (name, library) in required_plugins(d, info.semi_sync) {
            let q = format!(
                "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = {}",
                sql::quote(name)
            );
            let status: Option<String> = match boot.first_row(&mut conn, &q).await? {
                Some(row) => boot.cell(&row, 0usize, &q)?,
                None => None,
            };
            if status.as_deref() != Some("ACTIVE") {
                boot.exec(
                    &mut conn,
                    &format!("INSTALL PLUGIN {name} SONAME {}", sql::quote(library)),
                )
                .await?;
            }
        }

        // The way in works before root goes: moco-admin logs in over TCP.
        let admin = MysqlInstance::new(admin_options(bootstrap, passwords));
        admin.server_info().await?;
        admin.disconnect().await?;

        // Root drops the bootstrap accounts itself (its session outlives its account): on a
        // read-only MariaDB server only root holds the privilege to.
        if options.drop_root {
            let q = match d {
                Dialect::Mariadb => "SELECT User, Host FROM mysql.user WHERE User IN ('root', '')",
                _ => "SELECT User, Host FROM mysql.user WHERE User = 'root' AND Host = 'localhost'",
            };
            for row in boot.rows(&mut conn, q).await? {
                let user: String = boot.cell(&row, 0usize, q)?;
                let host: String = boot.cell(&row, 1usize, q)?;
                boot.exec(
                    &mut conn,
                    &format!("DROP USER IF EXISTS {}", sql::account(&user, &host)),
                )
                .await?;
            }
        }
        boot.exec(&mut conn, "FLUSH PRIVILEGES").await?;
    }
    boot.disconnect().await?;

    // MariaDB's read_only is its super_read_only; MySQL's is raised unless the manager opened
    // the server meanwhile.
    if d != Dialect::Mariadb {
        let admin = MysqlInstance::new(admin_options(bootstrap, passwords));
        let mut conn = admin.conn().await?;
        let q = "SELECT @@global.read_only";
        let still: Option<i64> = match admin.first_row(&mut conn, q).await? {
            Some(row) => admin.cell(&row, 0usize, q)?,
            None => None,
        };
        if still == Some(1) {
            admin
                .exec_all(&mut conn, &sql::set_super_read_only(d))
                .await?;
        }
        drop(conn);
        admin.disconnect().await?;
    }
    tracing::info!(instance = %bootstrap.name, version = %info.version, "initialised MOCO accounts");
    Ok(info)
}

/// Read-only for every session without `SUPER` (MySQL) or `READ_ONLY ADMIN` (MariaDB), which
/// root holds: root can create the accounts, nobody else can write. MySQL's
/// `super_read_only` (my.cnf starts the server with it) would stop root too.
fn read_only_but_root(d: Dialect) -> Vec<String> {
    match d {
        Dialect::Mariadb => vec!["SET GLOBAL read_only=1".to_owned()],
        _ => vec![
            "SET GLOBAL super_read_only=0".to_owned(),
            "SET GLOBAL read_only=1".to_owned(),
        ],
    }
}

/// Makes sure MOCO's accounts exist with these passwords on a server that already holds data
/// (a copy of another instance): `sql_log_bin=0`, writes opened briefly, then read-only
/// again. Nothing is reset.
pub async fn ensure_users(
    instance: &MysqlInstance,
    passwords: &MocoPasswords,
    options: &InitOptions,
) -> Result<(), PortError> {
    let d = instance.server_info().await?.dialect;
    let mut conn = instance.conn().await?;
    instance
        .exec(&mut conn, "SET SESSION sql_log_bin=0")
        .await?;
    // MySQL: read_only=0 also clears super_read_only, which blocks even CREATE USER.
    set_read_only(instance, &mut conn, d, false).await?;
    create_accounts(instance, &mut conn, d, passwords, &options.account_host).await?;
    set_read_only(instance, &mut conn, d, true).await?;
    instance.exec(&mut conn, "SET SESSION sql_log_bin=1").await
}

/// `read_only` on or off for a session that may or may not hold `READ_ONLY ADMIN` itself
/// (root does; the admin needs its role on MariaDB, error 1227 without).
async fn set_read_only(
    instance: &MysqlInstance,
    conn: &mut Conn,
    d: Dialect,
    on: bool,
) -> Result<(), PortError> {
    let plain = match (d, on) {
        (Dialect::Mariadb, true) => "SET GLOBAL read_only=1",
        (_, true) => "SET GLOBAL super_read_only=1",
        // MySQL: read_only=0 also clears super_read_only.
        (_, false) => "SET GLOBAL read_only=0",
    };
    match conn.query_drop(plain).await {
        Ok(()) => Ok(()),
        Err(mysql_async::Error::Server(e))
            if d == Dialect::Mariadb && e.code == ER_SPECIFIC_ACCESS_DENIED =>
        {
            instance
                .exec_all(conn, &sql::privileged(d, vec![plain.to_owned()]))
                .await
        }
        Err(e) => Err(instance.sql_error(plain, e)),
    }
}

/// "Access denied; you need (at least one of) the … privilege(s)".
const ER_SPECIFIC_ACCESS_DENIED: u16 = 1227;

async fn create_accounts(
    instance: &MysqlInstance,
    conn: &mut Conn,
    d: Dialect,
    passwords: &MocoPasswords,
    host: &str,
) -> Result<(), PortError> {
    if d != Dialect::Mariadb {
        instance.exec(conn, "SET GLOBAL partial_revokes=ON").await?;
    }
    for acct in Account::ALL {
        let statements = account_statements(d, acct, passwords.get(acct), host);
        instance.exec_all(conn, &statements).await?;
    }
    Ok(())
}
