//! How the local platform reaches its servers: the manager's SQL ports (as `moco-admin` over
//! loopback TCP), the password set from `secret.json`, and account creation on fresh
//! datadirs ([`moco_adapters::instance::accounts`]).

use std::sync::Arc;
use std::time::Duration;

use moco_cluster::ports::MysqlPort;

use super::error::LocalError;
use super::layout::Layout;
use super::manifest::Manifest;
use super::secret::Secret;
use moco_adapters::instance::accounts::{FreshServer, create_accounts};
use moco_adapters::mysql::{ConnectOptions, MysqlInstance};
use moco_core::moco_accounts::{Account, MocoPasswords};

/// Limit for establishing a connection to a local server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Limit of one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The mysql module's password set from `secret.json`.
pub fn passwords(secret: &Secret) -> Result<MocoPasswords, LocalError> {
    MocoPasswords::try_from_fn(|a: Account| secret.password(a.name()).map(str::to_owned))
}

fn name(manifest: &Manifest, index: u32) -> String {
    format!(
        "instance {index} (127.0.0.1:{})",
        manifest.instance_port(index)
    )
}

/// `moco-admin` over TCP to instance `index`; with the cluster's TLS, the connection verifies
/// the server and the instance's replication channel verifies its source.
pub fn admin_options(
    manifest: &Manifest,
    layout: &Layout,
    index: u32,
    secret: &Secret,
) -> Result<ConnectOptions, LocalError> {
    let mut opts = ConnectOptions::new(
        "127.0.0.1",
        manifest.instance_port(index),
        &secret.credentials(Account::Admin),
    )
    .with_name(name(manifest, index))
    .with_timeouts(CONNECT_TIMEOUT, CALL_TIMEOUT);
    if let Some(tls) = super::tls::client(layout, manifest)? {
        opts = opts
            .with_tls(tls)
            .with_replication_ca(layout.ca_cert().display().to_string());
    }
    Ok(opts)
}

/// The manager's SQL port of instance `index` (as `moco-admin` over loopback TCP).
pub fn port(
    manifest: &Manifest,
    layout: &Layout,
    index: u32,
    secret: &Secret,
) -> Result<Arc<dyn MysqlPort>, LocalError> {
    Ok(Arc::new(MysqlInstance::new(admin_options(
        manifest, layout, index, secret,
    )?)))
}

/// Creates MOCO's accounts on a freshly initialised instance (root on the UNIX socket, no
/// password), resets its binlog and GTIDs and leaves it read-only.
pub async fn create_users(
    manifest: &Manifest,
    layout: &Layout,
    index: u32,
    secret: &Secret,
) -> Result<(), LocalError> {
    let server = FreshServer {
        name: name(manifest, index),
        host: "127.0.0.1".to_owned(),
        port: manifest.instance_port(index),
        socket: layout.socket(index),
        connect_timeout: CONNECT_TIMEOUT,
        call_timeout: CALL_TIMEOUT,
        tls: super::tls::client(layout, manifest)?,
    };
    create_accounts(&server, &passwords(secret)?)
        .await
        .map(|_| ())
        .map_err(|e| LocalError::other(format!("instance {index}: create users"), e.to_string()))
}
