//! Everything the local platform says to a server, through the mysql module
//! ([`crate::mysql`]): the manager's SQL ports, account creation on fresh datadirs, and the
//! statements around a clone.

use std::sync::Arc;
use std::time::Duration;

use moco_core::gtid::GtidSet;
use mysql_async::prelude::Queryable;

use super::error::LocalError;
use super::layout::Layout;
use super::manifest::Manifest;
use super::secret::Secret;
use crate::mysql::{self, Account, ConnectOptions, InitOptions, MocoPasswords, MysqlInstance};
use crate::ports::{Credentials, MocoUser, MysqlPort};

/// Limit for establishing a connection to a local server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Limit of one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The mysql module's password set from `secret.json`.
pub fn passwords(secret: &Secret) -> Result<MocoPasswords, LocalError> {
    let get = |a: Account| secret.password(a.name()).map(str::to_owned);
    Ok(MocoPasswords {
        admin: get(Account::Admin)?,
        agent: get(Account::Agent)?,
        repl: get(Account::Repl)?,
        clone_donor: get(Account::CloneDonor)?,
        exporter: get(Account::Exporter)?,
        backup: get(Account::Backup)?,
        readonly: get(Account::ReadOnly)?,
        writable: get(Account::Writable)?,
    })
}

fn name(manifest: &Manifest, index: u32) -> String {
    format!(
        "instance {index} (127.0.0.1:{})",
        manifest.instance_port(index)
    )
}

/// `moco-admin` over TCP to instance `index`.
pub fn admin_options(manifest: &Manifest, index: u32, secret: &Secret) -> ConnectOptions {
    ConnectOptions::new(
        "127.0.0.1",
        manifest.instance_port(index),
        &secret.credentials(MocoUser::Admin),
    )
    .with_name(name(manifest, index))
    .with_timeouts(CONNECT_TIMEOUT, CALL_TIMEOUT)
}

/// The manager's SQL port of instance `index` (as `moco-admin` over loopback TCP).
pub fn port(
    manifest: &Manifest,
    _layout: &Layout,
    index: u32,
    secret: &Secret,
) -> Arc<dyn MysqlPort> {
    Arc::new(MysqlInstance::new(admin_options(manifest, index, secret)))
}

/// Creates MOCO's accounts on a freshly initialised instance (root on the UNIX socket, no
/// password), resets its binlog and GTIDs and leaves it read-only.
pub async fn create_users(
    manifest: &Manifest,
    layout: &Layout,
    index: u32,
    secret: &Secret,
) -> Result<(), LocalError> {
    let root = Credentials {
        user: "root".to_owned(),
        password: String::new(),
    };
    let bootstrap = ConnectOptions::new("127.0.0.1", manifest.instance_port(index), &root)
        .with_name(name(manifest, index))
        .with_socket(layout.socket(index))
        .with_timeouts(CONNECT_TIMEOUT, CALL_TIMEOUT)
        .with_max_connections(1);
    mysql::initialize(&bootstrap, &passwords(secret)?, &InitOptions::default())
        .await
        .map(|_| ())
        .map_err(|e| LocalError::other(format!("instance {index}: create users"), e.to_string()))
}

/// Seeds a server restored from a MariaDB backup with the mysql module's helper:
/// replication cleared, `gtid_binlog_state` = `binlog_state`, `gtid_slave_pos` = `position`.
pub async fn seed_mariadb_clone(
    manifest: &Manifest,
    index: u32,
    secret: &Secret,
    binlog_state: &GtidSet,
    position: &GtidSet,
) -> Result<(), LocalError> {
    let instance = MysqlInstance::new(admin_options(manifest, index, secret));
    let result = mysql::seed_mariadb_clone(&instance, binlog_state, position)
        .await
        .map_err(|e| {
            LocalError::other(
                format!("instance {index}: seed GTID state after clone"),
                e.to_string(),
            )
        });
    let _ = instance.disconnect().await;
    result
}

/// MySQL: `CLONE INSTANCE FROM` the donor, run on the target as `moco-admin`. The server shuts
/// down after the copy (error 3707, "restart server failed", when no supervisor restarts it),
/// which is expected; the caller restarts it.
pub async fn mysql_clone_instance(
    manifest: &Manifest,
    target: u32,
    donor: u32,
    secret: &Secret,
) -> Result<(), LocalError> {
    const ER_CLONE_RESTART: u16 = 3707;
    let context = format!("instance {target}: CLONE INSTANCE from instance {donor}");
    let donor_port = manifest.instance_port(donor);
    let user = secret.credentials(MocoUser::CloneDonor);
    let instance = MysqlInstance::new(admin_options(manifest, target, secret));
    let mut conn = instance
        .conn()
        .await
        .map_err(|e| LocalError::other(&context, e.to_string()))?;
    conn.query_drop(format!(
        "SET GLOBAL clone_valid_donor_list = {}",
        mysql::sql::quote(&format!("127.0.0.1:{donor_port}"))
    ))
    .await
    .map_err(|e| LocalError::other(&context, e.to_string()))?;
    let clone = format!(
        "CLONE INSTANCE FROM {}:{donor_port} IDENTIFIED BY {}",
        mysql::sql::account(&user.user, "127.0.0.1"),
        mysql::sql::quote(&user.password)
    );
    match conn.query_drop(&clone).await {
        Ok(()) => Ok(()),
        Err(mysql_async::Error::Server(e)) if e.code == ER_CLONE_RESTART => Ok(()),
        // The server shutting down under the copy may also just drop the connection.
        Err(mysql_async::Error::Io(_)) => Ok(()),
        Err(e) => Err(LocalError::other(&context, e.to_string())),
    }
}
