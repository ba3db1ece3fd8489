//! MOCO's accounts on a freshly initialised server, reached as root without a password on its
//! UNIX socket (what [`super::datadir`] leaves behind). The SQL per flavour is
//! [`crate::mysql::initialize`]; this is the way in.

use std::path::PathBuf;
use std::time::Duration;

use moco_cluster::ports::Credentials;

use super::InstanceError;
use crate::mysql::{self, ConnectOptions, InitOptions, ServerInfo};
use moco_core::moco_accounts::MocoPasswords;

/// Where the fresh server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreshServer {
    /// Name for messages (`instance 2 (127.0.0.1:3307)`).
    pub name: String,
    /// Host of its TCP port: the admin account's way in once root is gone.
    pub host: String,
    /// Its MySQL port.
    pub port: u16,
    /// Its UNIX socket, where root logs in without a password.
    pub socket: PathBuf,
    /// Limit for connecting.
    pub connect_timeout: Duration,
    /// Limit of one statement.
    pub call_timeout: Duration,
    /// TLS of the admin's TCP login, when the server requires it.
    pub tls: Option<crate::mysql::tls::MysqlTls>,
}

/// Creates MOCO's eight accounts with `passwords`, drops the passwordless bootstrap accounts,
/// resets binlogs and GTIDs and leaves the server read-only. Refuses a server that already
/// executed transactions.
pub async fn create_accounts(
    server: &FreshServer,
    passwords: &MocoPasswords,
) -> Result<ServerInfo, InstanceError> {
    let root = Credentials {
        user: "root".to_owned(),
        password: String::new(),
    };
    let bootstrap = ConnectOptions::new(server.host.clone(), server.port, &root)
        .with_name(server.name.clone())
        .with_socket(server.socket.clone())
        .with_timeouts(server.connect_timeout, server.call_timeout)
        .with_max_connections(1);
    let bootstrap = match &server.tls {
        Some(tls) => bootstrap.with_tls(tls.clone()),
        None => bootstrap,
    };
    Ok(mysql::initialize(&bootstrap, passwords, &InitOptions::default()).await?)
}
