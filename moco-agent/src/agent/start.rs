//! What the agent does once per server start:
//!
//! * **first start** of a new datadir: root still logs in on the socket without a password
//!   (what `moco init` leaves), so MOCO's accounts are created, root dropped, binlogs and
//!   GTIDs reset and the server left read-only ([`moco_adapters::instance::accounts`], the
//!   code `moco local` runs). Root being refused means this was done before.
//! * **a copy's first start**: `moco-clone-seed.json` is there (see [`super::clone`]), so the
//!   copy gets its GTID state, and the clone is `Completed`.
//!
//! Unlike MOCO's agent, which exits after a minute without a server (and is restarted), this
//! waits as long as the server takes; `/readyz` says why it is not ready meanwhile.

use std::time::{Duration, Instant};

use moco_adapters::instance::accounts::{FreshServer, create_accounts};
use moco_adapters::instance::clone as procedures;
use moco_cluster::ports::MysqlPort as _;
use moco_core::moco_accounts::Account;

use super::clone::{Seed, now, record_result, wait_for_login};
use super::state::{AgentState, credentials, on_socket};
use crate::api::ClonePhase;
use crate::error::AgentError;

/// How often the server is tried while it is not up.
const RETRY: Duration = Duration::from_secs(3);

/// What the start found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstStart {
    /// The accounts were created now.
    Initialized,
    /// Root is refused: done before.
    AlreadyInitialized,
}

/// MySQL and MariaDB errors that mean root's passwordless login is gone: access denied
/// (1045), denied by the socket plugin (1698), the plugin not loaded (1524).
const ROOT_REFUSED: [u16; 3] = [1045, 1698, 1524];

/// Creates MOCO's accounts unless this was done before; waits for the server.
pub async fn first_start(state: &AgentState) -> Result<FirstStart, AgentError> {
    let root = mysql_async::OptsBuilder::default()
        .user(Some("root"))
        .socket(Some(state.socket.to_string_lossy().into_owned()));
    let mut last_logged = Instant::now() - Duration::from_secs(3600);
    loop {
        match mysql_async::Conn::new(root.clone()).await {
            Ok(conn) => {
                let _ = conn.disconnect().await;
                break;
            }
            Err(mysql_async::Error::Server(e)) if ROOT_REFUSED.contains(&e.code) => {
                return Ok(FirstStart::AlreadyInitialized);
            }
            Err(e) => {
                if last_logged.elapsed() > Duration::from_secs(60) {
                    tracing::info!(socket = %state.socket.display(), error = %e, "waiting for mysqld");
                    last_logged = Instant::now();
                }
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    let server = FreshServer {
        name: format!("mysqld at {}", state.socket.display()),
        host: "127.0.0.1".to_owned(),
        port: state.mysqld_port,
        socket: state.socket.clone(),
        connect_timeout: Duration::from_secs(5),
        call_timeout: Duration::from_secs(60),
        tls: state.mysql_tls.as_ref().map(|ca| ca.tls.clone()),
    };
    let info = create_accounts(&server, &state.passwords()).await?;
    // The server checks global privileges when a session logs in: a probe that logged in as
    // `moco-agent` between its CREATE USER and its GRANT keeps a session without RELOAD (the
    // slow log's FLUSH was refused for good). Sessions start over with the grants in place.
    state.agent.forget_connections().await;
    state.admin.forget_connections().await;
    tracing::info!(version = %info.version, "created MOCO's accounts");
    Ok(FirstStart::Initialized)
}

/// Reads the last clone's result into memory (it survives the Pod's restart on disk).
pub fn load_clone_result(state: &AgentState) {
    let path = state.volume.clone_result();
    if let Ok(text) = std::fs::read(&path)
        && let Ok(status) = serde_json::from_slice(&text)
    {
        state.update_clone(|s| *s = status);
    }
}

/// Gives a copy that waits to be seeded its GTID state and accounts; `false` when there is
/// none.
pub async fn seed_copy(state: &AgentState) -> Result<bool, AgentError> {
    let path = state.volume.clone_seed();
    let Some(seed) = Seed::load(&state.volume)? else {
        return Ok(false);
    };
    if state.volume.clone_ready().exists() || state.volume.clone_staging().exists() {
        // moco init has not put the copy in place (or the copy never became ready): this
        // server still runs the old datadir.
        return Ok(false);
    }
    if seed.rekey {
        // Its accounts still carry the source cluster's passwords: nothing of this cluster
        // could log in, and waiting would not change that.
        return Err(AgentError::Refused(
            "the restored copy runs with the source cluster's passwords: moco init did not \
             re-key it (the init container needs the cluster's Secret in its environment)"
                .to_owned(),
        ));
    }
    state.update_clone(|s| {
        *s = seed.status.clone();
        s.phase = ClonePhase::Seeding;
    });
    let admin = on_socket(
        &state.socket,
        &credentials(Account::Admin, &state.passwords()),
        Duration::from_secs(5),
        Duration::from_secs(60),
    );
    wait_for_login(&admin, Duration::from_secs(24 * 3600)).await?;
    // The copy holds the cluster's own accounts (the donor is a member of the cluster, or
    // moco init re-keyed a restored copy): only its GTID state is the donor's and must be
    // set.
    procedures::seed(&admin, &seed.donor_state, &seed.position).await?;
    let _ = admin.disconnect().await;
    state.update_clone(|s| {
        s.phase = ClonePhase::Completed;
        s.finished_at = Some(now());
    });
    if let Some(started) = seed.status.started_at {
        state
            .metrics
            .clone_duration
            .observe(u32::try_from((now().0 - started.0).max(0)).map_or(0.0, f64::from));
    }
    state.metrics.clone_in_progress.set(0);
    record_result(state);
    std::fs::remove_file(&path).map_err(|e| AgentError::io(&path, "remove", e))?;
    tracing::info!(position = %seed.position, "the copy runs; GTID state and accounts set");
    Ok(true)
}
