//! my.cnf generation, as MOCO's `pkg/mycnf` does it, for MySQL and MariaDB.
//!
//! The text is hashed into the ConfigMap name, so any change of content rolls the StatefulSet;
//! the generator therefore has to be deterministic to the byte. Steps:
//!
//! 1. user keys are normalised (`-` → `_`) and laid over the defaults; a user key removes both
//!    `k` and `loose_k` from the defaults;
//! 2. `innodb_buffer_pool_size` defaults to 70 % of the mysqld memory (MiB-aligned, ≥ 128 MiB);
//! 3. keys that would disable the binary log or redirect the error log are dropped;
//! 4. forced values are laid over everything;
//! 5. sections and keys are written sorted, `_include` first in the server section verbatim,
//!    then `!includedir` for the per-instance snippet ([`instance_mycnf`]).
//!
//! [`Flavor::Mysql`] reproduces MOCO's output exactly. [`Flavor::Mariadb`] writes a
//! `[mariadbd]` section without the options MariaDB 10.11 refuses, and forces the settings its
//! GTID semi-sync replication needs (see `docs/resources.md`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::quantity::Quantity;
use crate::facts::Flavor;

/// Share of the mysqld container memory given to the InnoDB buffer pool when the user does not
/// size it.
pub const INNODB_BUFFER_POOL_RATIO_PERCENT: u64 = 70;

/// The smallest buffer pool the generator sets (MySQL's own default).
pub const MIN_INNODB_BUFFER_POOL_BYTES: u64 = 128 << 20;

/// The user key whose value is copied verbatim to the top of the server section.
pub const OPAQUE_KEY: &str = "_include";

/// User keys that are dropped: binary logging cannot be turned off (replication needs it) and
/// the error log must go to stderr (the container log).
const REMOVED_USER_KEYS: &[&str] = &[
    OPAQUE_KEY,
    "log_bin",
    "log_error",
    "skip_log_bin",
    "disable_log_bin",
];

/// MOCO's `DefaultMycnf` (overridable). `tmpdir` and `innodb_tmpdir` come from
/// [`MycnfPaths::tmpdir`].
const DEFAULTS: &[(&str, &str)] = &[
    ("character_set_server", "utf8mb4"),
    ("collation_server", "utf8mb4_unicode_ci"),
    ("default_time_zone", "+0:00"),
    ("back_log", "900"),
    ("max_connections", "100000"),
    ("max_allowed_packet", "1G"),
    ("max_heap_table_size", "64M"),
    ("sort_buffer_size", "4M"),
    ("join_buffer_size", "2M"),
    ("thread_cache_size", "100"),
    ("wait_timeout", "604800"),
    ("lock_wait_timeout", "60"),
    ("table_open_cache", "65536"),
    ("table_definition_cache", "65536"),
    ("transaction_isolation", "READ-COMMITTED"),
    ("tmp_table_size", "64M"),
    ("slow_query_log", "ON"),
    ("long_query_time", "2"),
    ("log_error_verbosity", "3"),
    ("log_slow_extra", "ON"),
    ("max_sp_recursion_depth", "20"),
    ("print_identified_with_as_hex", "ON"),
    ("loose_binlog_transaction_compression", "ON"),
    ("temptable_use_mmap", "OFF"),
    ("information_schema_stats_expiry", "0"),
    ("disabled_storage_engines", "MyISAM"),
    ("default_storage_engine", "InnoDB"),
    ("innodb_flush_method", "O_DIRECT"),
    ("innodb_lock_wait_timeout", "60"),
    ("innodb_print_all_deadlocks", "1"),
    ("innodb_online_alter_log_max_size", "1073741824"),
    ("innodb_adaptive_hash_index", "ON"),
    ("loose_innodb_numa_interleave", "ON"),
    ("innodb_buffer_pool_in_core_file", "OFF"),
    ("innodb_log_file_size", "800M"),
    ("innodb_log_files_in_group", "2"),
    ("innodb_buffer_pool_dump_pct", "100"),
    ("innodb_buffer_pool_dump_at_shutdown", "1"),
    ("innodb_buffer_pool_load_at_startup", "0"),
    ("loose_innodb_validate_tablespace_paths", "OFF"),
    ("innodb_flush_neighbors", "0"),
    ("innodb_random_read_ahead", "false"),
    ("innodb_read_ahead_threshold", "0"),
    ("innodb_log_write_ahead_size", "512"),
    ("innodb_undo_log_truncate", "OFF"),
];

/// Defaults MySQL 9.0 removed (it refuses to start on them). `innodb_log_file_size` ×
/// `innodb_log_files_in_group` gave the redo log its size; 9's [`MYSQL9_REDO_LOG`] keeps it.
const NOT_FOR_MYSQL9: &[&str] = &[
    "innodb_log_file_size",
    "innodb_log_files_in_group",
    "temptable_use_mmap",
];

/// The redo log's size on MySQL 9, where `innodb_redo_log_capacity` (8.0.30 and later) is the
/// only way to set it: the 2 × 800M of MOCO's defaults.
const MYSQL9_REDO_LOG: (&str, &str) = ("innodb_redo_log_capacity", "1600M");

/// Defaults MariaDB 10.11 does not know (it refuses to start on them, or warns on every start
/// for the `loose_` ones) or has removed (`innodb_log_files_in_group`). Checked against
/// `mariadbd --help --verbose` 10.11.
const NOT_FOR_MARIADB: &[&str] = &[
    "log_error_verbosity",
    "log_slow_extra",
    "print_identified_with_as_hex",
    "loose_binlog_transaction_compression",
    "temptable_use_mmap",
    "information_schema_stats_expiry",
    "disabled_storage_engines",
    "innodb_buffer_pool_in_core_file",
    "innodb_log_files_in_group",
    "loose_innodb_validate_tablespace_paths",
];

/// Where mysqld keeps its files and which ports it listens on. The defaults are the paths of
/// MOCO's Pods; the local mode passes per-instance directories and loopback ports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MycnfPaths {
    /// `datadir` (forced).
    pub datadir: String,
    /// `socket` of the server and the clients (forced).
    pub socket: String,
    /// `pid_file` (forced).
    pub pid_file: String,
    /// Default of `tmpdir` and `innodb_tmpdir` (the user may override both).
    pub tmpdir: String,
    /// `slow_query_log_file` (forced; the slow-log sidecar tails it).
    pub slow_query_log_file: String,
    /// The directory of the per-instance snippet, read through `!includedir`.
    pub include_dir: String,
    /// The SQL port of the server and the clients (forced).
    pub port: u16,
    /// `mysqlx_port` (MySQL only).
    pub mysqlx_port: u16,
    /// `admin_port` (MySQL only).
    pub admin_port: u16,
}

impl Default for MycnfPaths {
    fn default() -> Self {
        MycnfPaths {
            datadir: "/var/lib/mysql/data".into(),
            socket: "/run/mysqld.sock".into(),
            pid_file: "/run/mysqld.pid".into(),
            tmpdir: "/tmp".into(),
            slow_query_log_file: "/var/log/mysql/mysql.slow".into(),
            include_dir: "/etc/mysql-conf.d".into(),
            port: 3306,
            mysqlx_port: 33060,
            admin_port: 33062,
        }
    }
}

impl MycnfPaths {
    /// The layout of one local instance under `dir`: `data/`, `tmp/`, `conf.d/`, socket, pid
    /// file and slow log directly in `dir`.
    pub fn local(dir: &str, port: u16, mysqlx_port: u16, admin_port: u16) -> Self {
        let dir = dir.trim_end_matches('/');
        MycnfPaths {
            datadir: format!("{dir}/data"),
            socket: format!("{dir}/mysqld.sock"),
            pid_file: format!("{dir}/mysqld.pid"),
            tmpdir: format!("{dir}/tmp"),
            slow_query_log_file: format!("{dir}/mysql.slow"),
            include_dir: format!("{dir}/conf.d"),
            port,
            mysqlx_port,
            admin_port,
        }
    }
}

/// The memory of the mysqld container, which sizes the buffer pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MysqldMemory {
    /// `resources.requests.memory`; preferred because it is what the node guarantees.
    #[serde(default)]
    pub requests: Option<Quantity>,
    /// `resources.limits.memory`; used when there is no (or a zero) request.
    #[serde(default)]
    pub limits: Option<Quantity>,
}

impl MysqldMemory {
    /// The bytes to size from: a non-zero request, else a non-zero limit, else 0. Fractions
    /// round up and negative values count as 0.
    pub fn bytes(&self) -> u64 {
        let pick =
            |q: &Option<Quantity>| q.as_ref().filter(|q| !q.is_zero()).map(|q| q.units_ceil());
        let units = pick(&self.requests)
            .or_else(|| pick(&self.limits))
            .unwrap_or(0);
        u64::try_from(units.max(0)).unwrap_or(u64::MAX)
    }
}

/// The MySQL line my.cnf is written for, where the lines differ in the options they know.
/// MariaDB ignores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MysqlLine {
    /// MySQL 8.0 and 8.4: MOCO's options, to the byte.
    #[default]
    Mysql8,
    /// MySQL 9.0 to 9.7: without the options 9.0 removed, the redo log sized by
    /// `innodb_redo_log_capacity`.
    Mysql9,
}

impl MysqlLine {
    /// The line of the MySQL version `version` starts with (`9.7.4`, `8.4.4-log`); 8 for
    /// anything else, which is what MOCO's images run.
    pub fn of_version(version: &str) -> Self {
        match version.split('.').next().map(str::trim) {
            Some("9") => MysqlLine::Mysql9,
            _ => MysqlLine::Mysql8,
        }
    }
}

/// Everything my.cnf depends on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MycnfInput {
    /// The server family to write for.
    #[serde(default)]
    pub flavor: Flavor,
    /// The data of the ConfigMap named by `spec.mysqlConfigMapName` (options of the server
    /// section; `_include` holds opaque text).
    #[serde(default)]
    pub user_config: BTreeMap<String, String>,
    /// The mysqld container memory.
    #[serde(default)]
    pub memory: MysqldMemory,
    /// Paths and ports.
    #[serde(default)]
    pub paths: MycnfPaths,
    /// The MySQL line (ignored for MariaDB).
    #[serde(default)]
    pub mysql_line: MysqlLine,
}

/// Input that would produce a broken or subverted my.cnf.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MycnfError {
    /// An option name my.cnf cannot carry.
    #[error("my.cnf option {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A value with a line break would add options of its own (possibly overriding forced
    /// ones, since later lines win).
    #[error("my.cnf option {key:?}: the value contains a line break")]
    LineBreakInValue {
        /// The key whose value (or the input field) holds the line break.
        key: String,
    },
    /// A section header inside `_include` would move every following option (the forced ones
    /// included) out of the server section.
    #[error("my.cnf `_include` line {line}: section headers are not allowed ({text:?})")]
    SectionInOpaque {
        /// 1-based line number within the `_include` value.
        line: usize,
        /// The offending line.
        text: String,
    },
    /// `server_id` must be 1..=2^32-1: 0 disables replication and larger values do not exist.
    #[error("serverIDBase {base} + ordinal {ordinal} is not a valid server_id (1..=4294967295)")]
    InvalidServerId {
        /// `spec.serverIDBase`.
        base: u32,
        /// The instance ordinal.
        ordinal: u32,
    },
}

/// The group mysqld reads its options from: `[mysqld]` for MySQL; `[mariadbd]` for MariaDB,
/// which MySQL tools ignore, so MySQL-only tooling is not fed MariaDB options.
pub fn server_section(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mysql => "mysqld",
        Flavor::Mariadb => "mariadbd",
    }
}

/// `innodb_buffer_pool_size` for a container with `memory_bytes` of memory: 70 % rounded down
/// to MiB, at least 128 MiB. Same integer arithmetic as MOCO so the text matches.
pub fn innodb_buffer_pool_bytes(memory_bytes: u64) -> u64 {
    let pool = ((memory_bytes / 100 * INNODB_BUFFER_POOL_RATIO_PERCENT) >> 20) << 20;
    pool.max(MIN_INNODB_BUFFER_POOL_BYTES)
}

/// Generates the my.cnf text. Deterministic: the same input always gives the same bytes.
pub fn generate_mycnf(input: &MycnfInput) -> Result<String, MycnfError> {
    validate_user_config(&input.user_config)?;
    validate_paths(&input.paths)?;
    let flavor = input.flavor;
    let paths = &input.paths;

    let mut server: BTreeMap<String, String> = BTreeMap::new();
    server.insert("tmpdir".into(), paths.tmpdir.clone());
    server.insert("innodb_tmpdir".into(), paths.tmpdir.clone());
    let mysql9 = flavor == Flavor::Mysql && input.mysql_line == MysqlLine::Mysql9;
    for (k, v) in DEFAULTS {
        if flavor == Flavor::Mariadb && NOT_FOR_MARIADB.contains(k) {
            continue;
        }
        if mysql9 && NOT_FOR_MYSQL9.contains(k) {
            continue;
        }
        server.insert((*k).to_owned(), (*v).to_owned());
    }
    if mysql9 {
        server.insert(MYSQL9_REDO_LOG.0.to_owned(), MYSQL9_REDO_LOG.1.to_owned());
    }
    for (k, v) in &input.user_config {
        overlay(&mut server, normalize_key(k), v.clone());
    }
    if !server.contains_key("innodb_buffer_pool_size") {
        let bytes = innodb_buffer_pool_bytes(input.memory.bytes());
        server.insert("innodb_buffer_pool_size".into(), bytes.to_string());
    }
    for k in REMOVED_USER_KEYS {
        server.remove(*k);
        server.remove(&format!("loose_{k}"));
    }

    let mut sections: BTreeMap<&'static str, BTreeMap<String, String>> = BTreeMap::new();
    sections.insert(server_section(flavor), server);
    for (section, forced) in forced_options(flavor, paths) {
        let target = sections.entry(section).or_default();
        for (k, v) in forced {
            overlay(target, k.to_owned(), v);
        }
    }

    let opaque = input
        .user_config
        .get(OPAQUE_KEY)
        .map(String::as_str)
        .unwrap_or("");
    let mut out = String::new();
    for (section, options) in &sections {
        out.push('[');
        out.push_str(section);
        out.push_str("]\n");
        if *section == server_section(flavor) && !opaque.is_empty() {
            out.push_str(opaque);
            out.push('\n');
        }
        for (k, v) in options {
            out.push_str(k);
            out.push_str(" = ");
            out.push_str(v);
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str("!includedir ");
    out.push_str(&paths.include_dir);
    out.push('\n');
    Ok(out)
}

/// The forced options per section (they win over defaults and user input).
fn forced_options(
    flavor: Flavor,
    p: &MycnfPaths,
) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    let s = |v: &str| v.to_owned();
    let mut server: Vec<(&'static str, String)> = vec![
        ("port", p.port.to_string()),
        ("socket", p.socket.clone()),
        ("datadir", p.datadir.clone()),
        ("pid_file", p.pid_file.clone()),
        ("slow_query_log_file", p.slow_query_log_file.clone()),
        ("skip_name_resolve", s("ON")),
        ("binlog_format", s("ROW")),
        ("relay_log_recovery", s("OFF")),
        ("read_only", s("ON")),
    ];
    match flavor {
        Flavor::Mysql => server.extend([
            // NULL disables LOAD DATA INFILE and SELECT … INTO OUTFILE.
            ("secure_file_priv", s("NULL")),
            ("enforce_gtid_consistency", s("ON")),
            ("gtid_mode", s("ON")),
            ("log_replica_updates", s("ON")),
            ("mysqlx_port", p.mysqlx_port.to_string()),
            ("admin_port", p.admin_port.to_string()),
            ("super_read_only", s("ON")),
            ("skip_replica_start", s("ON")),
            (
                "loose_replication_optimize_for_static_plugin_config",
                s("ON"),
            ),
            ("loose_replication_sender_observe_commit_only", s("OFF")),
        ]),
        Flavor::Mariadb => server.extend([
            // MariaDB has no NULL value (it refuses to start on it). A device is not a
            // directory, so no file can lie under it: import and export stay disabled.
            ("secure_file_priv", s("/dev/null")),
            // MySQL writes binlog.NNNNNN into the datadir by default; MariaDB needs it named.
            ("log_bin", s("binlog")),
            ("log_slave_updates", s("ON")),
            ("skip_slave_start", s("ON")),
            ("gtid_strict_mode", s("ON")),
            // Semi-sync is built in; the agent flips master/slave on promotion and demotion.
            ("rpl_semi_sync_master_enabled", s("OFF")),
            ("rpl_semi_sync_slave_enabled", s("ON")),
            // MariaDB's default is AFTER_COMMIT, which loses MOCO's lossless guarantee.
            ("rpl_semi_sync_master_wait_point", s("AFTER_SYNC")),
            // The default relay log name embeds the host name, which changes with the Pod.
            ("relay_log", s("relay-bin")),
        ]),
    }
    vec![
        (server_section(flavor), server),
        (
            "client",
            vec![
                ("port", p.port.to_string()),
                ("socket", p.socket.clone()),
                ("loose_default_character_set", s("utf8mb4")),
            ],
        ),
        (
            "mysql",
            vec![
                ("auto_rehash", s("OFF")),
                ("init_command", s("\"SET autocommit=0\"")),
            ],
        ),
    ]
}

/// `-` and `_` are interchangeable in option names; one spelling keeps overrides reliable.
fn normalize_key(key: &str) -> String {
    key.replace('-', "_")
}

/// Sets `key`, first removing both the plain and the `loose_` variant of the option.
fn overlay(options: &mut BTreeMap<String, String>, key: String, value: String) {
    let base = key.strip_prefix("loose_").unwrap_or(&key);
    options.remove(base);
    options.remove(&format!("loose_{base}"));
    options.insert(key, value);
}

fn validate_user_config(config: &BTreeMap<String, String>) -> Result<(), MycnfError> {
    for (key, value) in config {
        if key == OPAQUE_KEY {
            for (i, line) in value.lines().enumerate() {
                if line.trim_start().starts_with('[') {
                    return Err(MycnfError::SectionInOpaque {
                        line: i + 1,
                        text: line.to_owned(),
                    });
                }
            }
            continue;
        }
        validate_key(key)?;
        check_single_line(key, value)?;
    }
    Ok(())
}

fn validate_key(key: &str) -> Result<(), MycnfError> {
    let reason = if key.is_empty() {
        Some("empty option name")
    } else if key.starts_with('!') {
        Some("`!` starts a directive, not an option")
    } else if key
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '=' | '[' | ']' | '#' | ';'))
    {
        Some(
            "option names cannot contain whitespace, control characters, `=`, `[`, `]`, `#` or `;`",
        )
    } else {
        None
    };
    match reason {
        Some(reason) => Err(MycnfError::InvalidKey {
            key: key.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

fn check_single_line(key: &str, value: &str) -> Result<(), MycnfError> {
    if value.contains(['\n', '\r']) {
        return Err(MycnfError::LineBreakInValue {
            key: key.to_owned(),
        });
    }
    Ok(())
}

fn validate_paths(p: &MycnfPaths) -> Result<(), MycnfError> {
    for (field, value) in [
        ("datadir", &p.datadir),
        ("socket", &p.socket),
        ("pid_file", &p.pid_file),
        ("tmpdir", &p.tmpdir),
        ("slow_query_log_file", &p.slow_query_log_file),
        ("include_dir", &p.include_dir),
    ] {
        check_single_line(field, value)?;
    }
    Ok(())
}

/// 32-bit FNV-1a, the hash MOCO uses for ConfigMap name suffixes.
pub fn fnv1a_32(bytes: &[u8]) -> u32 {
    const OFFSET_BASIS: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    bytes.iter().fold(OFFSET_BASIS, |hash, b| {
        (hash ^ u32::from(*b)).wrapping_mul(PRIME)
    })
}

/// The name of the ConfigMap holding `mycnf`: `moco-<cluster>.<fnv-1a hex>`. A new name per
/// content makes the Pod template change, which is what rolls the Pods.
pub fn mycnf_config_map_name(cluster: &str, mycnf: &str) -> String {
    format!("moco-{cluster}.{:08x}", fnv1a_32(mycnf.as_bytes()))
}

/// The per-instance options written next to the shared my.cnf (MOCO's moco-init writes
/// `server_id` and `admin_address`; the local mode also needs addresses and, for MariaDB run
/// as root, `user=root`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceConfig {
    /// `spec.serverIDBase`.
    pub server_id_base: u32,
    /// The instance ordinal; `server_id = server_id_base + ordinal`.
    pub ordinal: u32,
    /// MySQL `admin_address`: the Pod name (or `localhost`). MariaDB has no admin interface,
    /// so it is not written for MariaDB.
    #[serde(default)]
    pub admin_address: Option<String>,
    /// `bind_address` (local mode: the loopback address).
    #[serde(default)]
    pub bind_address: Option<String>,
    /// `report_host`: what the primary shows for this replica.
    #[serde(default)]
    pub report_host: Option<String>,
    /// `report_port`.
    #[serde(default)]
    pub report_port: Option<u16>,
    /// Write `user = root`, without which mariadbd refuses to run as root.
    #[serde(default)]
    pub run_as_root: bool,
}

impl InstanceConfig {
    /// What moco-init writes in a Pod: `admin_address` is the Pod name, or `localhost` when
    /// the agent talks to mysqld over loopback.
    pub fn kubernetes(
        server_id_base: u32,
        ordinal: u32,
        pod_name: &str,
        mysqld_localhost: bool,
    ) -> Self {
        InstanceConfig {
            server_id_base,
            ordinal,
            admin_address: Some(if mysqld_localhost {
                "localhost".into()
            } else {
                pod_name.into()
            }),
            bind_address: None,
            report_host: None,
            report_port: None,
            run_as_root: false,
        }
    }

    /// One local instance listening on `127.0.0.1:port` and reporting that address.
    pub fn local(server_id_base: u32, ordinal: u32, port: u16, run_as_root: bool) -> Self {
        InstanceConfig {
            server_id_base,
            ordinal,
            admin_address: Some("127.0.0.1".into()),
            bind_address: Some("127.0.0.1".into()),
            report_host: Some("127.0.0.1".into()),
            report_port: Some(port),
            run_as_root,
        }
    }
}

/// The per-instance snippet (the file in [`MycnfPaths::include_dir`]).
pub fn instance_mycnf(flavor: Flavor, instance: &InstanceConfig) -> Result<String, MycnfError> {
    let server_id = instance
        .server_id_base
        .checked_add(instance.ordinal)
        .filter(|id| *id != 0)
        .ok_or(MycnfError::InvalidServerId {
            base: instance.server_id_base,
            ordinal: instance.ordinal,
        })?;
    let mut lines: Vec<(&str, String)> = vec![("server_id", server_id.to_string())];
    if flavor == Flavor::Mysql
        && let Some(admin) = &instance.admin_address
    {
        lines.push(("admin_address", admin.clone()));
    }
    if let Some(bind) = &instance.bind_address {
        lines.push(("bind_address", bind.clone()));
    }
    if let Some(host) = &instance.report_host {
        lines.push(("report_host", host.clone()));
    }
    if let Some(port) = instance.report_port {
        lines.push(("report_port", port.to_string()));
    }
    if instance.run_as_root {
        lines.push(("user", "root".into()));
    }
    let mut out = format!("[{}]\n", server_section(flavor));
    for (k, v) in lines {
        check_single_line(k, &v)?;
        out.push_str(k);
        out.push_str(" = ");
        out.push_str(&v);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(flavor: Flavor, user: &[(&str, &str)]) -> MycnfInput {
        MycnfInput {
            flavor,
            user_config: user
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            ..MycnfInput::default()
        }
    }

    fn server_options(text: &str, section: &str) -> Vec<String> {
        let header = format!("[{section}]");
        text.lines()
            .skip_while(|l| *l != header)
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn fnv1a_matches_reference_vectors() {
        assert_eq!(fnv1a_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a_32(b"foobar"), 0xbf9c_f968);
        assert_eq!(mycnf_config_map_name("test", "a"), "moco-test.e40c292c");
        assert_eq!(mycnf_config_map_name("x", ""), "moco-x.811c9dc5");
    }

    #[test]
    fn buffer_pool_sizing_table() {
        const MI: u64 = 1 << 20;
        let cases = [
            (0, 128 * MI),
            (100 * MI, 128 * MI),
            (182 * MI, 128 * MI),
            (1000 * MI, 700 * MI),
            (1 << 30, 716 * MI), // 1073741824/100*70 = 751619240 → 716.8 MiB → 716 MiB
            (u64::MAX, (u64::MAX / 100 * 70) >> 20 << 20),
        ];
        for (mem, want) in cases {
            assert_eq!(innodb_buffer_pool_bytes(mem), want, "memory {mem}");
        }
    }

    #[test]
    fn memory_prefers_non_zero_requests() {
        let q = |t: &str| Some(Quantity::parse(t).unwrap_or_else(|e| panic!("{e}")));
        let m = |requests, limits| MysqldMemory { requests, limits };
        assert_eq!(m(q("1Gi"), q("2Gi")).bytes(), 1 << 30);
        assert_eq!(m(q("0"), q("2Gi")).bytes(), 2 << 30);
        assert_eq!(m(None, q("2Gi")).bytes(), 2 << 30);
        assert_eq!(m(None, None).bytes(), 0);
        assert_eq!(m(q("1500m"), None).bytes(), 2);
        assert_eq!(m(q("-1Gi"), q("2Gi")).bytes(), 0);
    }

    #[test]
    fn user_key_replaces_plain_and_loose_defaults() {
        let text = generate_mycnf(&input(
            Flavor::Mysql,
            &[
                ("innodb-numa-interleave", "OFF"),
                ("loose_temptable_use_mmap", "ON"),
            ],
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let opts = server_options(&text, "mysqld");
        assert!(opts.contains(&"innodb_numa_interleave = OFF".to_owned()));
        assert!(
            !opts
                .iter()
                .any(|l| l.starts_with("loose_innodb_numa_interleave"))
        );
        assert!(opts.contains(&"loose_temptable_use_mmap = ON".to_owned()));
        assert!(!opts.iter().any(|l| l.starts_with("temptable_use_mmap")));
    }

    #[test]
    fn binlog_and_error_log_keys_are_dropped_in_any_spelling() {
        let text = generate_mycnf(&input(
            Flavor::Mysql,
            &[
                ("log-bin", "OFF"),
                ("log_error", "/tmp/err"),
                ("skip-log-bin", ""),
                ("disable_log_bin", "1"),
                ("loose_skip_log_bin", "1"),
            ],
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("log_bin"), "{text}");
        assert!(!text.contains("log_error ="), "{text}");
    }

    #[test]
    fn forced_values_win_over_user_values() {
        for flavor in [Flavor::Mysql, Flavor::Mariadb] {
            let text = generate_mycnf(&input(
                flavor,
                &[
                    ("read_only", "OFF"),
                    ("loose-read-only", "OFF"),
                    ("port", "1"),
                ],
            ))
            .unwrap_or_else(|e| panic!("{e}"));
            let opts = server_options(&text, server_section(flavor));
            assert!(opts.contains(&"read_only = ON".to_owned()), "{text}");
            assert!(opts.contains(&"port = 3306".to_owned()), "{text}");
            assert!(
                !opts.iter().any(|l| l.starts_with("loose_read_only")),
                "{text}"
            );
        }
    }

    #[test]
    fn mariadb_forces_its_replication_settings() {
        let text = generate_mycnf(&input(
            Flavor::Mariadb,
            &[
                ("gtid_strict_mode", "OFF"),
                ("rpl_semi_sync_master_wait_point", "AFTER_COMMIT"),
            ],
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let opts = server_options(&text, "mariadbd");
        for want in [
            "log_bin = binlog",
            "gtid_strict_mode = ON",
            "binlog_format = ROW",
            "read_only = ON",
            "log_slave_updates = ON",
            "skip_slave_start = ON",
            "rpl_semi_sync_master_enabled = OFF",
            "rpl_semi_sync_slave_enabled = ON",
            "rpl_semi_sync_master_wait_point = AFTER_SYNC",
            "relay_log = relay-bin",
            "secure_file_priv = /dev/null",
        ] {
            assert!(opts.contains(&want.to_owned()), "missing {want}: {text}");
        }
        for absent in [
            "gtid_mode",
            "enforce_gtid_consistency",
            "super_read_only",
            "mysqlx_port",
            "admin_port",
            "log_replica_updates",
            "skip_replica_start",
            "log_slow_extra",
            "innodb_log_files_in_group",
        ] {
            assert!(
                !opts.iter().any(|l| l.starts_with(absent)),
                "{absent}: {text}"
            );
        }
        assert!(!text.contains("[mysqld]"));
    }

    #[test]
    fn rejects_injection_attempts() {
        let cases: Vec<(Vec<(&str, &str)>, MycnfError)> = vec![
            (
                vec![("foo", "1\nsuper_read_only = OFF")],
                MycnfError::LineBreakInValue { key: "foo".into() },
            ),
            (
                vec![("a b", "1")],
                MycnfError::InvalidKey {
                    key: "a b".into(),
                    reason: "option names cannot contain whitespace, control characters, `=`, `[`, `]`, `#` or `;`",
                },
            ),
            (
                vec![("", "1")],
                MycnfError::InvalidKey {
                    key: "".into(),
                    reason: "empty option name",
                },
            ),
            (
                vec![("!include", "/x")],
                MycnfError::InvalidKey {
                    key: "!include".into(),
                    reason: "`!` starts a directive, not an option",
                },
            ),
            (
                vec![(OPAQUE_KEY, "a=1\n  [client]\nb=2")],
                MycnfError::SectionInOpaque {
                    line: 2,
                    text: "  [client]".into(),
                },
            ),
        ];
        for (user, want) in cases {
            assert_eq!(generate_mycnf(&input(Flavor::Mysql, &user)), Err(want));
        }
        // Each character that would end or split the option line is refused on its own.
        for key in ["a=b", "a[b", "a]b", "a#b", "a;b", "a\tb", "a\u{7}b"] {
            assert!(
                matches!(
                    generate_mycnf(&input(Flavor::Mysql, &[(key, "1")])),
                    Err(MycnfError::InvalidKey { .. })
                ),
                "{key:?}"
            );
        }
        let mut bad_paths = input(Flavor::Mysql, &[]);
        bad_paths.paths.datadir = "/x\nread_only=OFF".into();
        assert_eq!(
            generate_mycnf(&bad_paths),
            Err(MycnfError::LineBreakInValue {
                key: "datadir".into()
            })
        );
    }

    #[test]
    fn opaque_text_may_span_lines_and_keeps_its_dashes() {
        let text = generate_mycnf(&input(
            Flavor::Mysql,
            &[(
                OPAQUE_KEY,
                "performance-schema-instrument='memory/%=ON'\nfoo-bar = 1",
            )],
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains(
            "[mysqld]\nperformance-schema-instrument='memory/%=ON'\nfoo-bar = 1\nadmin_port = 33062\n"
        ));
    }

    #[test]
    fn instance_snippet_table() {
        let k8s = InstanceConfig::kubernetes(10, 2, "moco-test-2", false);
        let local = InstanceConfig::local(1, 0, 13306, true);
        let cases = [
            (
                Flavor::Mysql,
                &k8s,
                "[mysqld]\nserver_id = 12\nadmin_address = moco-test-2\n",
            ),
            (
                Flavor::Mysql,
                &InstanceConfig::kubernetes(10, 2, "moco-test-2", true),
                "[mysqld]\nserver_id = 12\nadmin_address = localhost\n",
            ),
            (Flavor::Mariadb, &k8s, "[mariadbd]\nserver_id = 12\n"),
            (
                Flavor::Mariadb,
                &local,
                "[mariadbd]\nserver_id = 1\nbind_address = 127.0.0.1\nreport_host = 127.0.0.1\nreport_port = 13306\nuser = root\n",
            ),
            (
                Flavor::Mysql,
                &local,
                "[mysqld]\nserver_id = 1\nadmin_address = 127.0.0.1\nbind_address = 127.0.0.1\nreport_host = 127.0.0.1\nreport_port = 13306\nuser = root\n",
            ),
        ];
        for (flavor, inst, want) in cases {
            assert_eq!(instance_mycnf(flavor, inst).as_deref(), Ok(want));
        }
    }

    #[test]
    fn instance_snippet_rejects_bad_server_ids() {
        for (base, ordinal) in [(0, 0), (u32::MAX, 1)] {
            let inst = InstanceConfig::local(base, ordinal, 1, false);
            assert_eq!(
                instance_mycnf(Flavor::Mysql, &inst),
                Err(MycnfError::InvalidServerId { base, ordinal })
            );
        }
        assert_eq!(
            instance_mycnf(Flavor::Mysql, &InstanceConfig::local(u32::MAX, 0, 1, false))
                .map(|s| s.contains("server_id = 4294967295")),
            Ok(true)
        );
        let mut inst = InstanceConfig::local(1, 0, 1, false);
        inst.report_host = Some("a\nb".into());
        assert_eq!(
            instance_mycnf(Flavor::Mariadb, &inst),
            Err(MycnfError::LineBreakInValue {
                key: "report_host".into()
            })
        );
    }

    #[test]
    fn local_paths_live_under_the_instance_directory() {
        let p = MycnfPaths::local("/tmp/n0/", 13306, 23306, 33306);
        assert_eq!(p.datadir, "/tmp/n0/data");
        assert_eq!(p.include_dir, "/tmp/n0/conf.d");
        assert_eq!(p.socket, "/tmp/n0/mysqld.sock");
        assert_eq!((p.port, p.mysqlx_port, p.admin_port), (13306, 23306, 33306));
    }

    #[test]
    fn mysql9_gets_no_option_it_removed_and_the_same_redo_log() {
        let mut nine = input(Flavor::Mysql, &[]);
        nine.mysql_line = MysqlLine::Mysql9;
        let text = generate_mycnf(&nine).unwrap();
        let options = server_options(&text, "mysqld");
        for removed in NOT_FOR_MYSQL9 {
            assert!(
                !options
                    .iter()
                    .any(|o| o.starts_with(&format!("{removed} "))),
                "{removed} in {options:?}"
            );
        }
        assert!(options.contains(&"innodb_redo_log_capacity = 1600M".to_owned()));
        // The 8 line stays MOCO's, byte for byte.
        let eight = generate_mycnf(&input(Flavor::Mysql, &[])).unwrap();
        assert!(eight.contains("innodb_log_file_size = 800M\n"));
        assert!(!eight.contains("innodb_redo_log_capacity"));
        // A user's capacity wins.
        nine.user_config
            .insert("innodb_redo_log_capacity".into(), "8G".into());
        let text = generate_mycnf(&nine).unwrap();
        assert!(text.contains("innodb_redo_log_capacity = 8G\n"));
        assert_eq!(MysqlLine::of_version("9.7.4-2"), MysqlLine::Mysql9);
        assert_eq!(MysqlLine::of_version("8.4.4"), MysqlLine::Mysql8);
        assert_eq!(MysqlLine::of_version("latest"), MysqlLine::Mysql8);
    }
}
