//! Instance initialisation, as moco-agent does it once per fresh datadir.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::sql::{self, Dialect};
use super::users::{
    Account, DEFAULT_ACCOUNT_HOST, MocoPasswords, account_statements, required_plugins,
};
use super::{ConnectOptions, MysqlInstance, ServerInfo};
use crate::ports::{Credentials, PortError};

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
    opts
}

/// Initialises a fresh server reached through `bootstrap` (root without a password, usually
/// on the socket): creates MOCO's eight accounts with `sql_log_bin=0` (so no GTID exists
/// before replication is set up), installs MySQL's plugins, checks that `moco-admin` can log
/// in over TCP, drops the bootstrap accounts (per `options`), resets binlogs and GTIDs and
/// leaves the server read-only. Refuses a server that already executed transactions, since
/// the reset would destroy their history.
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
        create_accounts(&boot, &mut conn, d, passwords, &options.account_host).await?;
        for (name, library) in required_plugins(d) {
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
    }
    boot.disconnect().await?;

    // From here on as moco-admin over TCP: proves the way in works before root goes.
    let admin = MysqlInstance::new(admin_options(bootstrap, passwords));
    let mut conn = admin.conn().await?;
    admin.exec(&mut conn, "SET SESSION sql_log_bin=0").await?;
    if options.drop_root {
        let q = match d {
            Dialect::Mariadb => "SELECT User, Host FROM mysql.user WHERE User IN ('root', '')",
            _ => "SELECT User, Host FROM mysql.user WHERE User = 'root' AND Host = 'localhost'",
        };
        for row in admin.rows(&mut conn, q).await? {
            let user: String = admin.cell(&row, 0usize, q)?;
            let host: String = admin.cell(&row, 1usize, q)?;
            admin
                .exec(
                    &mut conn,
                    &format!("DROP USER IF EXISTS {}", sql::account(&user, &host)),
                )
                .await?;
        }
    }
    admin.exec(&mut conn, "FLUSH PRIVILEGES").await?;
    admin
        .exec_all(&mut conn, &sql::reset_binlog_and_gtids(d))
        .await?;
    admin
        .exec_all(&mut conn, &sql::set_super_read_only(d))
        .await?;
    drop(conn);
    admin.disconnect().await?;
    tracing::info!(instance = %bootstrap.name, version = %info.version, "initialised MOCO accounts");
    Ok(info)
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
    // MySQL: read_only=0 also clears super_read_only, which blocks even CREATE USER.
    set_read_only(instance, conn, d, false).await?;
    if d != Dialect::Mariadb {
        instance.exec(conn, "SET GLOBAL partial_revokes=ON").await?;
    }
    for acct in Account::ALL {
        let statements = account_statements(d, acct, passwords.get(acct), host);
        instance.exec_all(conn, &statements).await?;
    }
    Ok(())
}
