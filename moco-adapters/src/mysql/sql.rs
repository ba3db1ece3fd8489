//! The SQL each server flavour is sent, as pure functions so every statement can be checked
//! without a server.
//!
//! MySQL statements follow MOCO (`pkg/dbop`): `super_read_only`, `CHANGE REPLICATION SOURCE`
//! on 8.4 and later and `CHANGE MASTER` on 8.0, `WAIT_FOR_EXECUTED_GTID_SET`, semi-sync settings
//! in the names of the plugins the server runs ([`SemiSyncNames`]). MariaDB 10.11 statements follow the measured equivalents
//! (`read_only` with nobody holding `READ_ONLY ADMIN`, `MASTER_USE_GTID=slave_pos`,
//! `MASTER_GTID_WAIT`, no `wait_for_slave_count`).

use std::time::Duration;

use moco_core::dialect::{Dialect, SemiSyncNames};
use moco_core::gtid::{GtidSet, SourceId};

/// A string literal: `'` doubled and backslashes escaped (the connection clears
/// `NO_BACKSLASH_ESCAPES`, see [`SESSION_INIT`]), control characters escaped.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{1a}' => out.push_str("\\Z"),
            other => out.push(other),
        }
    }
    out.push('\'');
    out
}

/// An account name for `CREATE USER`/`GRANT`: `'user'@'host'`.
pub fn account(user: &str, host: &str) -> String {
    format!("{}@{}", quote(user), quote(host))
}

/// Run on every new connection so [`quote`]'s backslash escapes mean what they say even if
/// the server's `sql_mode` has `NO_BACKSLASH_ESCAPES`.
pub const SESSION_INIT: &str =
    "SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')";

/// MariaDB: the role holding `READ_ONLY ADMIN`, granted to the admin but never enabled by
/// default (see [`super::users`]); the statements below switch it on only where needed.
pub const READ_ONLY_ADMIN_ROLE: &str = "moco-read-only-admin";

/// MariaDB: `statements` run with [`READ_ONLY_ADMIN_ROLE`] enabled (`SET ROLE` … `SET ROLE
/// NONE`), since setting `read_only` or `gtid_slave_pos` on a read-only server needs
/// `READ_ONLY ADMIN`, which no session holds otherwise. MySQL: unchanged.
pub fn privileged(d: Dialect, statements: Vec<String>) -> Vec<String> {
    if !d.is_mariadb() {
        return statements;
    }
    let mut out = Vec::with_capacity(statements.len() + 2);
    out.push(format!("SET ROLE {}", quote(READ_ONLY_ADMIN_ROLE)));
    out.extend(statements);
    out.push(SET_ROLE_NONE.to_owned());
    out
}

/// Leaves any role enabled by [`privileged`].
pub const SET_ROLE_NONE: &str = "SET ROLE NONE";

/// `@@version`, to pick the dialect.
pub const VERSION: &str = "SELECT @@version";

/// Identity, GTID sets and read-only flags, in this column order: MariaDB `server_id,
/// gtid_binlog_state, read_only, log_bin`; MySQL `server_id, server_uuid, gtid_executed,
/// gtid_purged, read_only, super_read_only`.
pub fn global_variables(d: Dialect) -> &'static str {
    if d.is_mariadb() {
        "SELECT @@server_id, @@gtid_binlog_state, @@read_only, @@log_bin"
    } else {
        "SELECT @@server_id, @@server_uuid, @@gtid_executed, @@gtid_purged, @@read_only, @@super_read_only"
    }
}

/// Semi-sync settings, by name (absent when MySQL's plugins are not installed, so the probe
/// still works on a server that was never initialised).
pub const SEMI_SYNC_VARIABLES: &str = "SHOW GLOBAL VARIABLES LIKE 'rpl\\_semi\\_sync\\_%'";

/// Semi-sync counters (`Rpl_semi_sync_master_wait_sessions`, `…_clients`).
pub const SEMI_SYNC_STATUS: &str = "SHOW GLOBAL STATUS LIKE 'Rpl\\_semi\\_sync\\_%'";

/// The executed set: `@@gtid_binlog_state` on MariaDB (per server and domain, the set-like
/// view; `gtid_binlog_pos` would keep only the last GTID per domain).
pub fn executed_gtid(d: Dialect) -> &'static str {
    if d.is_mariadb() {
        "SELECT @@gtid_binlog_state"
    } else {
        "SELECT @@gtid_executed"
    }
}

/// Replication status of the default channel.
pub fn replica_status(d: Dialect) -> &'static str {
    if d.is_mariadb() {
        "SHOW SLAVE STATUS"
    } else {
        "SHOW REPLICA STATUS"
    }
}

/// Column names of [`replica_status`] in each dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaColumns {
    /// `Source_Host` / `Master_Host`.
    pub source_host: &'static str,
    /// `Source_Port` / `Master_Port`.
    pub source_port: &'static str,
    /// `Replica_IO_Running` / `Slave_IO_Running`.
    pub io_running: &'static str,
    /// `Replica_SQL_Running` / `Slave_SQL_Running`.
    pub sql_running: &'static str,
    /// `Retrieved_Gtid_Set` / `Gtid_IO_Pos`.
    pub retrieved: &'static str,
    /// `Seconds_Behind_Source` / `Seconds_Behind_Master`.
    pub lag: &'static str,
}

/// The error columns have the same names everywhere.
pub const LAST_IO_ERRNO: &str = "Last_IO_Errno";
/// See [`LAST_IO_ERRNO`].
pub const LAST_IO_ERROR: &str = "Last_IO_Error";
/// See [`LAST_IO_ERRNO`].
pub const LAST_SQL_ERRNO: &str = "Last_SQL_Errno";
/// See [`LAST_IO_ERRNO`].
pub const LAST_SQL_ERROR: &str = "Last_SQL_Error";

/// The column names [`replica_status`] returns.
pub fn replica_columns(d: Dialect) -> ReplicaColumns {
    if d.is_mariadb() {
        ReplicaColumns {
            source_host: "Master_Host",
            source_port: "Master_Port",
            io_running: "Slave_IO_Running",
            sql_running: "Slave_SQL_Running",
            retrieved: "Gtid_IO_Pos",
            lag: "Seconds_Behind_Master",
        }
    } else {
        ReplicaColumns {
            source_host: "Source_Host",
            source_port: "Source_Port",
            io_running: "Replica_IO_Running",
            sql_running: "Replica_SQL_Running",
            retrieved: "Retrieved_Gtid_Set",
            lag: "Seconds_Behind_Source",
        }
    }
}

/// The replicas connected to this server; columns 0..3 are server id, host, port in both.
pub fn replica_hosts(d: Dialect) -> &'static str {
    if d.is_mariadb() {
        "SHOW SLAVE HOSTS"
    } else {
        "SHOW REPLICAS"
    }
}

/// Clone progress (MySQL only: MariaDB has no clone plugin; its copies are tracked by the
/// platform that runs mariadb-backup).
pub fn clone_status(d: Dialect) -> Option<&'static str> {
    if d.is_mariadb() {
        None
    } else {
        Some("SELECT STATE FROM performance_schema.clone_status")
    }
}

/// MariaDB: the binary logs, oldest first (the first one's `Gtid_list` is the purged state).
pub const BINARY_LOGS: &str = "SHOW BINARY LOGS";

/// Makes the server read its certificate, key and CA files again (a renewed certificate),
/// without a restart; connections already open keep their session.
pub fn reload_tls(d: Dialect) -> &'static str {
    match d {
        Dialect::Mariadb => "FLUSH SSL",
        Dialect::Mysql80 | Dialect::Mysql84 => "ALTER INSTANCE RELOAD TLS",
    }
}

/// MariaDB: the first events of one binary log, to read its `Gtid_list` event.
pub fn binlog_head_events(log_name: &str) -> String {
    format!("SHOW BINLOG EVENTS IN {} LIMIT 4", quote(log_name))
}

/// Parses a `Gtid_list` event's info (`[0-1-5,0-2-7]`).
pub fn parse_gtid_list_info(info: &str) -> Option<GtidSet> {
    let inner = info.trim().strip_prefix('[')?.strip_suffix(']')?;
    GtidSet::from_mariadb(inner).ok()
}

/// Read-only for every client but the replication threads.
pub fn set_super_read_only(d: Dialect) -> Vec<String> {
    if d.is_mariadb() {
        // No session holds READ_ONLY ADMIN, so read_only fences everyone (10.11 semantics).
        privileged(d, vec!["SET GLOBAL read_only=1".to_owned()])
    } else {
        vec!["SET GLOBAL super_read_only=1".to_owned()]
    }
}

/// Connection ids to kill: everything but our own connection, `excluded_users`, the server's
/// own threads (`system user`, `event_scheduler`), replication threads, and sessions over the
/// local socket (`Host = 'localhost'`, as MOCO does).
pub fn kill_candidates(excluded_users: &[&str]) -> String {
    let mut users: Vec<String> = ["system user", "event_scheduler"]
        .iter()
        .chain(excluded_users)
        .map(|u| quote(u))
        .collect();
    users.dedup();
    format!(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() \
         AND USER NOT IN ({}) AND HOST <> 'localhost' \
         AND COMMAND NOT IN ('Binlog Dump', 'Binlog Dump GTID', 'Daemon', 'Slave_IO', \
         'Slave_SQL', 'Slave_worker')",
        users.join(", ")
    )
}

/// Kills one connection (error 1094 "unknown thread" means it is already gone).
pub fn kill_connection(id: u64) -> String {
    format!("KILL CONNECTION {id}")
}

/// "Unknown thread id": the connection ended before `KILL` reached it.
pub const ER_NO_SUCH_THREAD: u16 = 1094;

/// Waits until `gtid` is applied. MySQL: `WAIT_FOR_EXECUTED_GTID_SET` (0 = done, 1 = timed
/// out), whole seconds, no argument = no limit. MariaDB: `MASTER_GTID_WAIT` on the position
/// (highest sequence number per domain; strict mode makes that cover the rest), 0 = done,
/// -1 = timed out. It only tracks `gtid_slave_pos`, so callers check `@@gtid_binlog_state`
/// first and do not use it where replication is not configured.
pub fn wait_for_gtid(d: Dialect, gtid: &GtidSet, timeout: Option<Duration>) -> String {
    if d.is_mariadb() {
        let pos = quote(&gtid.mariadb_position());
        match timeout {
            Some(t) => format!("SELECT MASTER_GTID_WAIT({pos}, {:.3})", t.as_secs_f64()),
            None => format!("SELECT MASTER_GTID_WAIT({pos})"),
        }
    } else {
        let set = quote(&gtid.to_string());
        match timeout {
            // 0 would mean "no limit" to MySQL: round up to at least one second.
            Some(t) => format!(
                "SELECT WAIT_FOR_EXECUTED_GTID_SET({set}, {})",
                (t.as_secs() + u64::from(t.subsec_nanos() > 0)).max(1)
            ),
            None => format!("SELECT WAIT_FOR_EXECUTED_GTID_SET({set})"),
        }
    }
}

/// True when [`wait_for_gtid`] returned "reached".
pub fn wait_reached(result: i64) -> bool {
    result == 0
}

/// `STOP REPLICA IO_THREAD`.
/// MariaDB: the replication IO thread's connection id, to kill it before `STOP SLAVE
/// IO_THREAD`. A semi-sync replica's `STOP SLAVE` first connects to the source to end its dump
/// thread; against a source that answers nothing (frozen, cut off) that takes up to
/// `rpl_semi_sync_slave_kill_conn_timeout` (measured: 2.0 s at the default 5, per replica).
/// Killing the IO thread on the replica stops it at once (measured: 8 ms) and the following
/// `STOP SLAVE IO_THREAD` finds it stopped.
pub const MARIADB_IO_THREAD_ID: &str =
    "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO'";

/// MariaDB: the stopping IO thread of a semi-sync replica connects to its source to kill its
/// dump thread and waits up to this many seconds (0 = without limit) for a silent one.
pub const MARIADB_BOUND_KILL_CONN: &str = "SET GLOBAL rpl_semi_sync_slave_kill_conn_timeout = 1";

/// MySQL: sessions waiting for a semi-sync acknowledgement that were not killed (a killed one
/// shows `Killed` as its command and waits on: MySQL's wait ignores KILL).
pub const UNKILLED_SEMI_SYNC_WAITS: &str = "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
     WHERE STATE LIKE 'Waiting for semi-sync ACK%' AND COMMAND <> 'Killed'";

/// MySQL: the semi-sync plugins that run, whose names name the settings
/// ([`SemiSyncNames::from_active_plugins`]).
pub const ACTIVE_SEMI_SYNC_PLUGINS: &str = "SELECT PLUGIN_NAME FROM information_schema.PLUGINS \
     WHERE PLUGIN_NAME LIKE 'rpl\\_semi\\_sync\\_%' AND PLUGIN_STATUS = 'ACTIVE'";

/// `STOP REPLICA IO_THREAD` (MariaDB: `STOP SLAVE IO_THREAD`).
pub fn stop_replica_io(d: Dialect) -> &'static str {
    if d.is_mariadb() {
        "STOP SLAVE IO_THREAD"
    } else {
        "STOP REPLICA IO_THREAD"
    }
}

/// The semi-sync replica flag on, the primary side off, in the names the server's plugins use.
pub fn set_replica_semi_sync(names: SemiSyncNames, enabled: bool) -> [String; 2] {
    [
        format!(
            "SET GLOBAL {}={}",
            names.replica("enabled"),
            if enabled { "ON" } else { "OFF" }
        ),
        format!("SET GLOBAL {}=OFF", names.source("enabled")),
    ]
}

/// `START REPLICA` (both threads) or only its SQL thread.
pub fn start_replica(d: Dialect, sql_thread_only: bool) -> &'static str {
    match (d.is_mariadb(), sql_thread_only) {
        (true, false) => "START SLAVE",
        (true, true) => "START SLAVE SQL_THREAD",
        (false, false) => "START REPLICA",
        (false, true) => "START REPLICA SQL_THREAD",
    }
}

/// Where and as whom to replicate.
#[derive(Clone, Copy, Debug)]
pub struct SourceSpec<'a> {
    /// Source host.
    pub host: &'a str,
    /// Source port.
    pub port: u16,
    /// Replication user.
    pub user: &'a str,
    /// Its password.
    pub password: &'a str,
    /// The CA file, on the replica's own filesystem, that the replica trusts for its source:
    /// when set the channel uses TLS and checks the source's certificate and name (MOCO #544:
    /// a source with `require_secure_transport=ON` refuses a plain channel).
    pub ssl_ca: Option<&'a str>,
}

/// The TLS clause of a channel: `prefix` is `MASTER` or `SOURCE`. Empty without a CA, so a
/// cluster without TLS gets MOCO's statement unchanged.
fn channel_tls(prefix: &str, ssl_ca: Option<&str>) -> String {
    ssl_ca.map_or_else(String::new, |ca| {
        format!(
            ", {prefix}_SSL=1, {prefix}_SSL_CA={}, {prefix}_SSL_VERIFY_SERVER_CERT=1",
            quote(ca)
        )
    })
}

/// Replicates from `source` with GTID auto-positioning, semi-sync replica side `semi_sync`,
/// primary side off, and starts the threads.
///
/// MariaDB first resets `gtid_slave_pos` to `@@gtid_binlog_pos` (its own binlog, which holds
/// everything it applied or wrote): a demoted primary's `gtid_slave_pos` is stale or empty and
/// would request old events that strict mode rejects.
pub fn configure_replication(
    d: Dialect,
    names: SemiSyncNames,
    source: &SourceSpec<'_>,
    semi_sync: bool,
) -> Vec<String> {
    let (host, user, password) = (
        quote(source.host),
        quote(source.user),
        quote(source.password),
    );
    let port = source.port;
    let on_off = |b: bool| if b { "ON" } else { "OFF" };
    let mut out = Vec::new();
    match d {
        Dialect::Mariadb => {
            out.push("STOP SLAVE".to_owned());
            out.extend(privileged(
                d,
                vec!["SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos".to_owned()],
            ));
            out.push(format!(
                "CHANGE MASTER TO MASTER_HOST={host}, MASTER_PORT={port}, MASTER_USER={user}, \
                 MASTER_PASSWORD={password}, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, \
                 MASTER_HEARTBEAT_PERIOD=1{}",
                channel_tls("MASTER", source.ssl_ca)
            ));
        }
        Dialect::Mysql84 => {
            out.push("STOP REPLICA".to_owned());
            out.push(format!(
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST={host}, SOURCE_PORT={port}, \
                 SOURCE_USER={user}, SOURCE_PASSWORD={password}, SOURCE_AUTO_POSITION=1, \
                 GET_SOURCE_PUBLIC_KEY=1{}",
                channel_tls("SOURCE", source.ssl_ca)
            ));
        }
        Dialect::Mysql80 => {
            out.push("STOP REPLICA".to_owned());
            out.push(format!(
                "CHANGE MASTER TO MASTER_HOST={host}, MASTER_PORT={port}, MASTER_USER={user}, \
                 MASTER_PASSWORD={password}, MASTER_AUTO_POSITION=1, GET_MASTER_PUBLIC_KEY=1{}",
                channel_tls("MASTER", source.ssl_ca)
            ));
        }
    }
    out.push(format!(
        "SET GLOBAL {}={}",
        names.replica("enabled"),
        on_off(semi_sync)
    ));
    out.push(format!("SET GLOBAL {}=OFF", names.source("enabled")));
    out.push(
        if d.is_mariadb() {
            "START SLAVE"
        } else {
            "START REPLICA"
        }
        .to_owned(),
    );
    out
}

/// Semi-sync as the primary: replica side off; `AFTER_SYNC`; the timeout; the ACK count
/// (MySQL only: MariaDB always waits for exactly one); primary side on.
pub fn configure_primary_semi_sync(
    d: Dialect,
    names: SemiSyncNames,
    wait_for_replica_count: u32,
    timeout_ms: u64,
) -> Vec<String> {
    let mut out = vec![
        format!("SET GLOBAL {}=OFF", names.replica("enabled")),
        format!("SET GLOBAL {}=AFTER_SYNC", names.source("wait_point")),
        format!("SET GLOBAL {}={timeout_ms}", names.source("timeout")),
    ];
    if !d.is_mariadb() {
        out.push(format!(
            "SET GLOBAL {}={wait_for_replica_count}",
            names.wait_for_replica_count()
        ));
    }
    out.push(format!("SET GLOBAL {}=ON", names.source("enabled")));
    out
}

/// Opens the primary for writes. `RESET … ALL` also forgets the source, so a promoted
/// primary reports no replica status and keeps no stale source (MOCO issue #926).
pub fn set_writable(d: Dialect) -> Vec<String> {
    let (stop, reset) = if d.is_mariadb() {
        ("STOP SLAVE", "RESET SLAVE ALL")
    } else {
        ("STOP REPLICA", "RESET REPLICA ALL")
    };
    let mut out = vec![stop.to_owned(), reset.to_owned()];
    out.extend(privileged(d, vec!["SET GLOBAL read_only=0".to_owned()]));
    out
}

/// Forgets the binary logs and GTID history of a freshly initialised server, so no instance
/// owns a transaction before replication is set up.
pub fn reset_binlog_and_gtids(d: Dialect) -> Vec<String> {
    match d {
        Dialect::Mariadb => {
            let mut out = vec!["RESET MASTER".to_owned()];
            out.extend(privileged(
                d,
                vec!["SET GLOBAL gtid_slave_pos=''".to_owned()],
            ));
            out
        }
        _ => reset_binlog_and_gtids_as_root(d),
    }
}

/// [`reset_binlog_and_gtids`] for a session that holds every privilege itself (root on a
/// fresh server, before MOCO's role exists).
pub fn reset_binlog_and_gtids_as_root(d: Dialect) -> Vec<String> {
    match d {
        Dialect::Mariadb => vec![
            "RESET MASTER".to_owned(),
            "SET GLOBAL gtid_slave_pos=''".to_owned(),
        ],
        Dialect::Mysql84 => vec!["RESET BINARY LOGS AND GTIDS".to_owned()],
        Dialect::Mysql80 => vec!["RESET MASTER".to_owned()],
    }
}

/// MariaDB `gtid_binlog_state` text with the entries of each domain in ascending sequence
/// order. MariaDB takes the *last* entry of a domain as its current position
/// (`@@gtid_binlog_pos`), so `0-1-100,0-2-50` would make `0-2-50` the position; the
/// canonical (sorted by server id) text is not safe to set.
pub fn mariadb_binlog_state_text(state: &GtidSet) -> String {
    let mut entries: Vec<(u32, u64, u32)> = state
        .sources()
        .filter_map(|s| match s {
            SourceId::MariaDb { domain, server_id } => state
                .intervals(s)
                .last()
                .map(|&(_, end)| (*domain, end, *server_id)),
            SourceId::Uuid { .. } => None,
        })
        .collect();
    entries.sort_unstable();
    entries
        .iter()
        .map(|(domain, seq, server)| format!("{domain}-{server}-{seq}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The text of MariaDB's binlog state file (`<log_bin>.state`): one GTID per line, in
/// [`mariadb_binlog_state_text`]'s order (the last line of a domain is its position). A server
/// that starts with no binlog file takes its `gtid_binlog_state` from this file, so a copy
/// given one starts with the donor's history and the seed need not set it.
pub fn mariadb_binlog_state_file(state: &GtidSet) -> String {
    let text = mariadb_binlog_state_text(state);
    if text.is_empty() {
        return text;
    }
    let mut lines = text.replace(',', "\n");
    lines.push('\n');
    lines
}

/// Seeds a server restored from a mariadb-backup copy: it has the donor's data, the donor's
/// stale `gtid_slave_pos`, and (`current`) the `gtid_binlog_state` it started with.
/// Replication is cleared, the binlog state set to the donor's history and the replica
/// position to the copy's position.
///
/// Setting the binlog state rotates the binlog and waits for InnoDB's next checkpoint: 0.8 s
/// on a just-recovered copy (measured), as does `RESET MASTER`. So neither is sent when the
/// copy already started with that state (from [`mariadb_binlog_state_file`]); when it started
/// with none, the state is set without the reset; only a server that has logged other GTIDs
/// is reset first.
pub fn mariadb_seed_clone(
    binlog_state: &GtidSet,
    slave_pos: &GtidSet,
    current: &GtidSet,
) -> Vec<String> {
    let mut out = vec![
        "SET GLOBAL rpl_semi_sync_master_enabled=OFF".to_owned(),
        "STOP SLAVE".to_owned(),
        "RESET SLAVE ALL".to_owned(),
    ];
    let text = mariadb_binlog_state_text(binlog_state);
    // The server keeps one sequence number per source: compare in that form.
    let already = GtidSet::from_mariadb(&text).is_ok_and(|wanted| wanted == *current);
    if !already {
        if !current.is_empty() {
            out.push("RESET MASTER".to_owned());
        }
        out.push(format!("SET GLOBAL gtid_binlog_state={}", quote(&text)));
    }
    out.extend(privileged(
        Dialect::Mariadb,
        vec![format!(
            "SET GLOBAL gtid_slave_pos={}",
            quote(&slave_pos.mariadb_position())
        )],
    ));
    out
}

/// MariaDB: accounts holding `READ_ONLY ADMIN` directly, which may write through `read_only`
/// (there must be none for `read_only` to stand for `super_read_only`).
pub const READ_ONLY_BYPASS_ACCOUNTS: &str = "SELECT GRANTEE FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'READ_ONLY ADMIN'";

/// MariaDB: accounts with a default role (enabled in every session), as `user, host, role`.
pub const DEFAULT_ROLES: &str = "SELECT User, Host, JSON_VALUE(Priv, '$.default_role') FROM mysql.global_priv WHERE IFNULL(JSON_VALUE(Priv, '$.default_role'), '') <> ''";

/// The grants of an account or role.
pub fn show_grants(user: &str, host: Option<&str>) -> String {
    match host {
        Some(host) => format!("SHOW GRANTS FOR {}", account(user, host)),
        None => format!("SHOW GRANTS FOR {}", quote(user)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Dialect; 3] = [Dialect::Mariadb, Dialect::Mysql80, Dialect::Mysql84];

    fn set(s: &str) -> GtidSet {
        GtidSet::parse(s).unwrap()
    }

    #[test]
    fn quoting_escapes_quotes_backslashes_and_controls() {
        assert_eq!(quote("a'b\\c\n\0"), "'a''b\\\\c\\n\\0'");
        assert_eq!(account("moco-admin", "%"), "'moco-admin'@'%'");
    }

    #[test]
    fn read_only_and_status_queries_per_flavour() {
        assert_eq!(
            set_super_read_only(Dialect::Mariadb),
            vec![
                "SET ROLE 'moco-read-only-admin'",
                "SET GLOBAL read_only=1",
                "SET ROLE NONE"
            ]
        );
        assert_eq!(
            set_super_read_only(Dialect::Mysql80),
            vec!["SET GLOBAL super_read_only=1"]
        );
        assert_eq!(
            set_super_read_only(Dialect::Mysql84),
            vec!["SET GLOBAL super_read_only=1"]
        );
        assert_eq!(
            executed_gtid(Dialect::Mariadb),
            "SELECT @@gtid_binlog_state"
        );
        assert_eq!(executed_gtid(Dialect::Mysql84), "SELECT @@gtid_executed");
        assert!(global_variables(Dialect::Mysql84).contains("@@super_read_only"));
        assert!(!global_variables(Dialect::Mariadb).contains("super_read_only"));
        assert_eq!(replica_status(Dialect::Mariadb), "SHOW SLAVE STATUS");
        assert_eq!(replica_status(Dialect::Mysql80), "SHOW REPLICA STATUS");
        assert_eq!(replica_hosts(Dialect::Mariadb), "SHOW SLAVE HOSTS");
        assert_eq!(replica_hosts(Dialect::Mysql84), "SHOW REPLICAS");
        assert_eq!(replica_columns(Dialect::Mariadb).retrieved, "Gtid_IO_Pos");
        assert_eq!(
            replica_columns(Dialect::Mysql80).retrieved,
            "Retrieved_Gtid_Set"
        );
        assert_eq!(
            replica_columns(Dialect::Mysql84).io_running,
            "Replica_IO_Running"
        );
        assert_eq!(clone_status(Dialect::Mariadb), None);
        assert_eq!(
            clone_status(Dialect::Mysql80),
            Some("SELECT STATE FROM performance_schema.clone_status")
        );
        assert_eq!(stop_replica_io(Dialect::Mariadb), "STOP SLAVE IO_THREAD");
        assert_eq!(stop_replica_io(Dialect::Mysql84), "STOP REPLICA IO_THREAD");
        assert_eq!(
            set_replica_semi_sync(SemiSyncNames::Master, true),
            [
                "SET GLOBAL rpl_semi_sync_slave_enabled=ON",
                "SET GLOBAL rpl_semi_sync_master_enabled=OFF"
            ]
        );
        assert_eq!(start_replica(Dialect::Mariadb, false), "START SLAVE");
        assert_eq!(
            start_replica(Dialect::Mariadb, true),
            "START SLAVE SQL_THREAD"
        );
        assert_eq!(start_replica(Dialect::Mysql80, false), "START REPLICA");
        assert_eq!(
            start_replica(Dialect::Mysql84, true),
            "START REPLICA SQL_THREAD"
        );
    }

    #[test]
    fn kill_candidates_exclude_system_users_and_replication_threads() {
        let q = kill_candidates(&["moco-admin", "moco-repl"]);
        assert!(q.contains("ID <> CONNECTION_ID()"), "{q}");
        assert!(
            q.contains("USER NOT IN ('system user', 'event_scheduler', 'moco-admin', 'moco-repl')"),
            "{q}"
        );
        for cmd in [
            "'Binlog Dump'",
            "'Binlog Dump GTID'",
            "'Slave_IO'",
            "'Slave_SQL'",
            "'Slave_worker'",
        ] {
            assert!(q.contains(cmd), "{q}");
        }
        assert_eq!(kill_connection(42), "KILL CONNECTION 42");
    }

    #[test]
    fn wait_for_gtid_per_flavour() {
        let uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let my = set(&format!("{uuid}:1-5"));
        assert_eq!(
            wait_for_gtid(Dialect::Mysql84, &my, Some(Duration::from_secs(50))),
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{uuid}:1-5', 50)")
        );
        assert_eq!(
            wait_for_gtid(Dialect::Mysql80, &my, Some(Duration::from_millis(200))),
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{uuid}:1-5', 1)")
        );
        assert_eq!(
            wait_for_gtid(Dialect::Mysql80, &my, Some(Duration::from_millis(2500))),
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{uuid}:1-5', 3)")
        );
        assert_eq!(
            wait_for_gtid(Dialect::Mysql80, &my, None),
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{uuid}:1-5')")
        );
        let maria = set("0-1-5,0-2-7,1-3-2");
        assert_eq!(
            wait_for_gtid(Dialect::Mariadb, &maria, Some(Duration::from_millis(1500))),
            "SELECT MASTER_GTID_WAIT('0-2-7,1-3-2', 1.500)"
        );
        assert_eq!(
            wait_for_gtid(Dialect::Mariadb, &maria, None),
            "SELECT MASTER_GTID_WAIT('0-2-7,1-3-2')"
        );
        assert!(wait_reached(0));
        assert!(!wait_reached(1) && !wait_reached(-1));
    }

    #[test]
    fn configure_replication_per_flavour() {
        let src = SourceSpec {
            host: "127.0.0.1",
            port: 3307,
            user: "moco-repl",
            password: "pw'x",
            ssl_ca: None,
        };
        assert_eq!(
            configure_replication(Dialect::Mariadb, SemiSyncNames::Master, &src, true),
            vec![
                "STOP SLAVE",
                "SET ROLE 'moco-read-only-admin'",
                "SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos",
                "SET ROLE NONE",
                "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=3307, MASTER_USER='moco-repl', \
                 MASTER_PASSWORD='pw''x', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, \
                 MASTER_HEARTBEAT_PERIOD=1",
                "SET GLOBAL rpl_semi_sync_slave_enabled=ON",
                "SET GLOBAL rpl_semi_sync_master_enabled=OFF",
                "START SLAVE",
            ]
        );
        assert_eq!(
            configure_replication(Dialect::Mysql84, SemiSyncNames::Master, &src, false),
            vec![
                "STOP REPLICA",
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=3307, \
                 SOURCE_USER='moco-repl', SOURCE_PASSWORD='pw''x', SOURCE_AUTO_POSITION=1, \
                 GET_SOURCE_PUBLIC_KEY=1",
                "SET GLOBAL rpl_semi_sync_slave_enabled=OFF",
                "SET GLOBAL rpl_semi_sync_master_enabled=OFF",
                "START REPLICA",
            ]
        );
        let v80 = configure_replication(Dialect::Mysql80, SemiSyncNames::Master, &src, true);
        assert_eq!(
            v80[1],
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=3307, MASTER_USER='moco-repl', \
             MASTER_PASSWORD='pw''x', MASTER_AUTO_POSITION=1, GET_MASTER_PUBLIC_KEY=1"
        );
        assert_eq!(v80.last().map(String::as_str), Some("START REPLICA"));
    }

    /// A renewed certificate is read again in each flavour's words.
    #[test]
    fn tls_reload_per_flavour() {
        assert_eq!(reload_tls(Dialect::Mariadb), "FLUSH SSL");
        for d in [Dialect::Mysql80, Dialect::Mysql84] {
            assert_eq!(reload_tls(d), "ALTER INSTANCE RELOAD TLS");
        }
    }

    /// With a CA the channel uses TLS and verifies the source, in each flavour's words.
    #[test]
    fn configure_replication_with_tls() {
        let src = SourceSpec {
            host: "127.0.0.1",
            port: 3307,
            user: "moco-repl",
            password: "p",
            ssl_ca: Some("/d/tls/ca's.pem"),
        };
        let change = |d| {
            configure_replication(d, SemiSyncNames::Master, &src, true)
                [if d == Dialect::Mariadb { 4 } else { 1 }]
            .clone()
        };
        assert!(
            change(Dialect::Mariadb).ends_with(
                "MASTER_HEARTBEAT_PERIOD=1, MASTER_SSL=1, MASTER_SSL_CA='/d/tls/ca''s.pem', \
                 MASTER_SSL_VERIFY_SERVER_CERT=1"
            ),
            "{}",
            change(Dialect::Mariadb)
        );
        assert!(change(Dialect::Mysql84).ends_with(
            "GET_SOURCE_PUBLIC_KEY=1, SOURCE_SSL=1, SOURCE_SSL_CA='/d/tls/ca''s.pem', \
             SOURCE_SSL_VERIFY_SERVER_CERT=1"
        ));
        assert!(change(Dialect::Mysql80).ends_with(
            "GET_MASTER_PUBLIC_KEY=1, MASTER_SSL=1, MASTER_SSL_CA='/d/tls/ca''s.pem', \
             MASTER_SSL_VERIFY_SERVER_CERT=1"
        ));
    }

    #[test]
    fn primary_semi_sync_per_flavour() {
        assert_eq!(
            configure_primary_semi_sync(Dialect::Mariadb, SemiSyncNames::Master, 2, 86_400_000),
            vec![
                "SET GLOBAL rpl_semi_sync_slave_enabled=OFF",
                "SET GLOBAL rpl_semi_sync_master_wait_point=AFTER_SYNC",
                "SET GLOBAL rpl_semi_sync_master_timeout=86400000",
                "SET GLOBAL rpl_semi_sync_master_enabled=ON",
            ]
        );
        let my =
            configure_primary_semi_sync(Dialect::Mysql80, SemiSyncNames::Master, 2, 86_400_000);
        assert!(my.contains(&"SET GLOBAL rpl_semi_sync_master_wait_for_slave_count=2".to_owned()));
        assert_eq!(
            my.last().map(String::as_str),
            Some("SET GLOBAL rpl_semi_sync_master_enabled=ON")
        );
        // MySQL 9.5 and later: the only plugins there are, with their names.
        assert_eq!(
            configure_primary_semi_sync(Dialect::Mysql84, SemiSyncNames::Source, 1, 1000),
            vec![
                "SET GLOBAL rpl_semi_sync_replica_enabled=OFF",
                "SET GLOBAL rpl_semi_sync_source_wait_point=AFTER_SYNC",
                "SET GLOBAL rpl_semi_sync_source_timeout=1000",
                "SET GLOBAL rpl_semi_sync_source_wait_for_replica_count=1",
                "SET GLOBAL rpl_semi_sync_source_enabled=ON",
            ]
        );
        assert_eq!(
            set_replica_semi_sync(SemiSyncNames::Source, true),
            [
                "SET GLOBAL rpl_semi_sync_replica_enabled=ON",
                "SET GLOBAL rpl_semi_sync_source_enabled=OFF"
            ]
        );
    }

    #[test]
    fn writable_and_reset_per_flavour() {
        assert_eq!(
            set_writable(Dialect::Mariadb),
            vec![
                "STOP SLAVE",
                "RESET SLAVE ALL",
                "SET ROLE 'moco-read-only-admin'",
                "SET GLOBAL read_only=0",
                "SET ROLE NONE"
            ]
        );
        assert_eq!(
            set_writable(Dialect::Mysql84),
            vec![
                "STOP REPLICA",
                "RESET REPLICA ALL",
                "SET GLOBAL read_only=0"
            ]
        );
        assert_eq!(
            reset_binlog_and_gtids(Dialect::Mariadb),
            vec![
                "RESET MASTER",
                "SET ROLE 'moco-read-only-admin'",
                "SET GLOBAL gtid_slave_pos=''",
                "SET ROLE NONE"
            ]
        );
        assert_eq!(
            reset_binlog_and_gtids(Dialect::Mysql84),
            vec!["RESET BINARY LOGS AND GTIDS"]
        );
        assert_eq!(
            reset_binlog_and_gtids(Dialect::Mysql80),
            vec!["RESET MASTER"]
        );
        for d in ALL {
            assert!(
                set_writable(d)
                    .iter()
                    .all(|s| !s.contains("super_read_only"))
            );
        }
    }

    #[test]
    fn binlog_state_text_puts_the_highest_sequence_last_per_domain() {
        let state = set("0-1-100,0-2-50,1-3-7,1-1-9");
        assert_eq!(
            mariadb_binlog_state_text(&state),
            "0-2-50,0-1-100,1-3-7,1-1-9"
        );
        let pos = set("0-1-100,1-1-9");
        let other = set("0-3-5");
        assert_eq!(
            mariadb_seed_clone(&state, &pos, &other)[3..],
            [
                "RESET MASTER".to_owned(),
                "SET GLOBAL gtid_binlog_state='0-2-50,0-1-100,1-3-7,1-1-9'".to_owned(),
                "SET ROLE 'moco-read-only-admin'".to_owned(),
                "SET GLOBAL gtid_slave_pos='0-1-100,1-1-9'".to_owned(),
                "SET ROLE NONE".to_owned(),
            ]
        );
        let fresh = mariadb_seed_clone(&state, &pos, &GtidSet::new());
        assert!(!fresh.contains(&"RESET MASTER".to_owned()), "{fresh:?}");
        assert_eq!(
            fresh[3],
            "SET GLOBAL gtid_binlog_state='0-2-50,0-1-100,1-3-7,1-1-9'"
        );
        // A copy that started with the state (from its state file) is only given its position.
        let started_with = GtidSet::from_mariadb("0-2-50,0-1-100,1-3-7,1-1-9").unwrap();
        let seeded = mariadb_seed_clone(&state, &pos, &started_with);
        assert_eq!(
            seeded[3..],
            [
                "SET ROLE 'moco-read-only-admin'".to_owned(),
                "SET GLOBAL gtid_slave_pos='0-1-100,1-1-9'".to_owned(),
                "SET ROLE NONE".to_owned(),
            ]
        );
        assert_eq!(
            mariadb_binlog_state_file(&state),
            "0-2-50\n0-1-100\n1-3-7\n1-1-9\n"
        );
        assert_eq!(mariadb_binlog_state_file(&GtidSet::new()), "");
        assert_eq!(mariadb_binlog_state_text(&GtidSet::new()), "");
    }

    #[test]
    fn privileged_wraps_only_on_mariadb() {
        let s = vec!["X".to_owned()];
        assert_eq!(privileged(Dialect::Mysql84, s.clone()), s);
        assert_eq!(
            privileged(Dialect::Mariadb, s),
            vec!["SET ROLE 'moco-read-only-admin'", "X", "SET ROLE NONE"]
        );
        assert_eq!(show_grants("r", None), "SHOW GRANTS FOR 'r'");
        assert_eq!(show_grants("u", Some("%")), "SHOW GRANTS FOR 'u'@'%'");
    }

    #[test]
    fn gtid_list_info_parses() {
        assert_eq!(
            parse_gtid_list_info("[0-1-5,0-2-7]"),
            Some(set("0-1-5,0-2-7"))
        );
        assert_eq!(parse_gtid_list_info("[]"), Some(GtidSet::new()));
        assert_eq!(parse_gtid_list_info("binlog.000001"), None);
        assert_eq!(
            binlog_head_events("binlog.000001"),
            "SHOW BINLOG EVENTS IN 'binlog.000001' LIMIT 4"
        );
    }
}
