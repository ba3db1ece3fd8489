//! MySQL and MariaDB over `mysql_async`: the [`moco_cluster::ports::MysqlPort`] implementation and
//! instance initialisation.
//!
//! [`MysqlInstance`] is one server behind a small connection pool. It learns its [`Dialect`]
//! from `@@version` on first use (MariaDB 10.11+, MySQL 8.0, MySQL 8.4) and sends the
//! statements of [`sql`], which holds every flavour-specific statement as a pure function.
//! Every call is bounded: connecting by [`ConnectOptions::connect_timeout`], each port call by
//! [`ConnectOptions::call_timeout`] (plus the wait itself for waits).
//!
//! Public API:
//! * [`ConnectOptions::new`]`(host, port, &Credentials)` (+ `with_name`, `with_socket`,
//!   `with_timeouts`, `with_max_connections`); [`MysqlInstance::new`]`(ConnectOptions)`;
//!   `impl MysqlPort for MysqlInstance`; [`MysqlInstance::server_info`],
//!   [`MysqlInstance::conn`] (a pooled connection for ad-hoc SQL),
//!   [`MysqlInstance::read_only_bypass_accounts`], [`MysqlInstance::disconnect`].
//! * [`initialize`]`(&bootstrap, &MocoPasswords, &InitOptions)`: MOCO's eight accounts,
//!   binlog/GTID reset, read-only; [`ensure_users`] for copies of another instance;
//!   [`admin_options`]; [`generate_passwords`]; [`redact`] (statements
//!   for logs).
//!
//! MariaDB's `read_only` stands for `super_read_only` only while no session holds
//! `READ_ONLY ADMIN`, yet 10.11 needs that privilege to *set* `read_only` (error 1227) and
//! to set `gtid_slave_pos` on a read-only server (error 1290). The admin therefore holds it
//! only through the non-default role [`READ_ONLY_ADMIN_ROLE`], enabled around exactly those
//! statements ([`sql::privileged`]).
//! * MariaDB clone seeding: [`seed_mariadb_clone`], [`clone_binlog_state`],
//!   [`parse_xtrabackup_binlog_info`], [`parse_xtrabackup_slave_info`].

pub mod accounts;
mod clone;
mod init;
pub mod password;
pub mod rotation;
pub mod sql;
pub mod tls;
mod users;

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use moco_core::dialect::{Dialect, SemiSyncNames};
use moco_core::facts::{
    CloneState, MysqldStatus, ReplicaHost, ReplicaStatus, SemiSyncFacts, ThreadState,
};
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::operation::ReplicationSource;
use mysql_async::prelude::{FromValue, Queryable};
use mysql_async::{Conn, OptsBuilder, Pool, PoolConstraints, PoolOpts, Row};

use moco_cluster::ports::{Credentials, MysqlPort, PasswordPair, PortError};

pub use clone::{
    BackupInfoError, clone_binlog_state, parse_xtrabackup_binlog_info, parse_xtrabackup_slave_info,
    seed_mariadb_clone,
};
pub use init::{InitOptions, admin_options, ensure_users, initialize};
pub use users::{DEFAULT_ACCOUNT_HOST, READ_ONLY_ADMIN_ROLE, generate_passwords, random_password};

/// How often [`MysqlInstance::wait_for_gtid`] re-reads a MariaDB primary's binlog state.
const GTID_POLL: Duration = Duration::from_millis(20);

/// Refusals for want of a privilege: `ER_SPECIFIC_ACCESS_DENIED_ERROR` (1227),
/// `ER_DBACCESS_DENIED_ERROR` (1044), `ER_TABLEACCESS_DENIED_ERROR` (1142),
/// `ER_COLUMNACCESS_DENIED_ERROR` (1143).
const PRIVILEGE_ERRORS: [u16; 4] = [1227, 1044, 1142, 1143];

/// "Table doesn't exist": `performance_schema.clone_status` without the clone plugin.
const ER_NO_SUCH_TABLE: u16 = 1146;

/// Where a server is and how to log in.
#[derive(Clone)]
pub struct ConnectOptions {
    /// How errors name the server, e.g. `instance 1 (127.0.0.1:3307)`.
    pub name: String,
    /// TCP host.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// UNIX socket; when set it is used instead of TCP (root's bootstrap login).
    pub socket: Option<PathBuf>,
    /// User.
    pub user: String,
    /// Password.
    pub password: String,
    /// Limit for establishing a connection.
    pub connect_timeout: Duration,
    /// Limit for one port call (waits add their own timeout on top).
    pub call_timeout: Duration,
    /// Pool size; at least 2 are used, since `set_super_read_only` kills connections from a
    /// second connection while the first still waits.
    pub max_connections: usize,
    /// TLS, verifying the server (TCP only; the socket needs none).
    pub tls: Option<tls::MysqlTls>,
    /// The CA file, as this server reads it from its own filesystem, that its replication
    /// channel trusts: when set, [`MysqlInstance`] configures the channel with TLS and
    /// verification of the source.
    pub replication_ca: Option<String>,
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("name", &self.name)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("socket", &self.socket)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("max_connections", &self.max_connections)
            .field("tls", &self.tls)
            .field("replication_ca", &self.replication_ca)
            .finish()
    }
}

impl ConnectOptions {
    /// TCP to `host:port` as `credentials`; MOCO's limits (connect 5 s, calls 60 s), a pool of 4.
    pub fn new(host: impl Into<String>, port: u16, credentials: &Credentials) -> Self {
        let host = host.into();
        ConnectOptions {
            name: format!("{host}:{port}"),
            host,
            port,
            socket: None,
            user: credentials.user.clone(),
            password: credentials.password.clone(),
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(60),
            max_connections: 4,
            tls: None,
            replication_ca: None,
        }
    }

    /// Connects with TLS, verifying the server as `tls` says.
    pub fn with_tls(mut self, tls: tls::MysqlTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Replicates over TLS, the source verified against `ca_path` (a file on this server's
    /// filesystem).
    pub fn with_replication_ca(mut self, ca_path: impl Into<String>) -> Self {
        self.replication_ca = Some(ca_path.into());
        self
    }

    /// Sets the name used in errors.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Connects over this UNIX socket instead of TCP.
    pub fn with_socket(mut self, socket: impl Into<PathBuf>) -> Self {
        self.socket = Some(socket.into());
        self
    }

    /// Sets the connect and per-call limits.
    pub fn with_timeouts(mut self, connect: Duration, call: Duration) -> Self {
        self.connect_timeout = connect;
        self.call_timeout = call;
        self
    }

    /// Sets the pool size (the pool still allows 2, see [`ConnectOptions::max_connections`]).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }
}

/// What the server said about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// The statement dialect.
    pub dialect: Dialect,
    /// `@@version`.
    pub version: String,
    /// The names of its semi-sync settings, from the plugins it ran when first asked.
    pub semi_sync: SemiSyncNames,
}

/// One MySQL or MariaDB server behind a small connection pool.
pub struct MysqlInstance {
    opts: ConnectOptions,
    /// The pool, replaced by [`MysqlPort::forget_connections`]; `Pool` is a cheap handle.
    pool: std::sync::Mutex<Pool>,
    /// What a replacement pool is made from (its password changes with
    /// [`MysqlInstance::set_password`]).
    pool_opts: std::sync::Mutex<mysql_async::Opts>,
    server: tokio::sync::OnceCell<ServerInfo>,
    /// MariaDB: the purged set last read from the first binlog's `Gtid_list`, reported while
    /// reading it would block (see [`commits_stuck`]). It only grows on one datadir;
    /// [`MysqlPort::forget_connections`] (a re-initialised or copied datadir) drops it.
    purged: std::sync::Mutex<Option<GtidSet>>,
}

impl fmt::Debug for MysqlInstance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlInstance")
            .field("opts", &self.opts)
            .field("server", &self.server.get())
            .finish_non_exhaustive()
    }
}

impl MysqlInstance {
    /// A pool for `opts`; nothing is connected until the first call.
    pub fn new(opts: ConnectOptions) -> Self {
        let constraints = PoolConstraints::new(0, opts.max_connections.max(2)).unwrap_or_default();
        let pool_opts = PoolOpts::default()
            .with_constraints(constraints)
            .with_inactive_connection_ttl(Duration::from_secs(30));
        let builder = OptsBuilder::default()
            .ip_or_hostname(opts.host.clone())
            .tcp_port(opts.port)
            .user(Some(opts.user.clone()))
            .pass(Some(opts.password.clone()))
            // Stay on TCP: with a loopback host mysql_async would otherwise switch to the
            // socket, and socket sessions are exempt from KillConnections.
            .prefer_socket(false)
            .socket(opts.socket.as_ref().map(|p| p.display().to_string()))
            // `setup` (unlike `init`) is re-run after the pool resets a connection.
            .setup(vec![sql::SESSION_INIT])
            .ssl_opts(
                opts.tls
                    .as_ref()
                    .filter(|_| opts.socket.is_none())
                    .map(tls::MysqlTls::ssl_opts),
            )
            .pool_opts(pool_opts);
        let pool_opts = mysql_async::Opts::from(builder);
        MysqlInstance {
            pool: std::sync::Mutex::new(Pool::new(pool_opts.clone())),
            pool_opts: std::sync::Mutex::new(pool_opts),
            opts,
            server: tokio::sync::OnceCell::new(),
            purged: std::sync::Mutex::new(None),
        }
    }

    /// The options this instance was built with.
    pub fn options(&self) -> &ConnectOptions {
        &self.opts
    }

    /// The name used in errors.
    pub fn target(&self) -> &str {
        &self.opts.name
    }

    /// Flavour and version, read once from `@@version`.
    pub async fn server_info(&self) -> Result<ServerInfo, PortError> {
        self.server
            .get_or_try_init(|| async {
                let mut conn = self.conn().await?;
                let version: String = self.value(&mut conn, sql::VERSION).await?;
                let dialect =
                    Dialect::from_version(&version).map_err(|e| self.failed(e.to_string()))?;
                let active: Vec<String> = if dialect.is_mariadb() {
                    Vec::new()
                } else {
                    let q = sql::ACTIVE_SEMI_SYNC_PLUGINS;
                    let mut names = Vec::new();
                    for row in self.rows(&mut conn, q).await? {
                        names.push(self.cell::<String>(&row, 0usize, q)?);
                    }
                    names
                };
                Ok(ServerInfo {
                    dialect,
                    version,
                    semi_sync: SemiSyncNames::from_active_plugins(dialect, &active),
                })
            })
            .await
            .cloned()
    }

    /// MySQL: a session waiting for a semi-sync acknowledgement ignores KILL and waits on,
    /// holding the commit lock `super_read_only` waits for (MariaDB's wait ends on KILL). Its
    /// client is gone: KILL closed the connection, and the client got "lost connection", never
    /// an OK (measured on 9.7.4). So the waits are ended by turning the source side off, which
    /// tells no client anything, unless a session that was not killed waits too (one over the
    /// socket, or of a system account): its client would be told that a commit no replica has
    /// was acknowledged, and the fence then waits for its acknowledgement instead.
    async fn end_killed_semi_sync_waits(&self) -> Result<(), PortError> {
        self.timed(
            "end killed semi-sync waits",
            Some(self.opts.call_timeout),
            async {
                let names = self.server_info().await?.semi_sync;
                let mut conn = self.conn().await?;
                let waiting: u64 = self.value(&mut conn, sql::UNKILLED_SEMI_SYNC_WAITS).await?;
                if waiting > 0 {
                    tracing::warn!(instance = %self.opts.name, waiting,
                        "sessions that were not killed wait for a semi-sync acknowledgement; \
                         the source side stays on");
                    return Ok(());
                }
                let off = format!("SET GLOBAL {}=OFF", names.source("enabled"));
                self.exec(&mut conn, &off).await
            },
        )
        .await
    }

    /// Logs in with `password` from now on (a rotation of the account's password): a new pool
    /// replaces the current one; sessions already open stay as they are.
    pub fn set_password(&self, password: &str) {
        {
            let mut opts = self
                .pool_opts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let builder = OptsBuilder::from_opts(opts.clone()).pass(Some(password.to_owned()));
            *opts = mysql_async::Opts::from(builder);
        }
        self.replace_pool();
    }

    /// A new pool in place of the current one, which closes its idle connections now and the
    /// busy ones when they come back; nothing waits for that.
    fn replace_pool(&self) {
        let old = std::mem::replace(
            &mut *self
                .pool
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            Pool::new(
                self.pool_opts
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone(),
            ),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = old.disconnect().await;
            });
        }
    }

    fn pool(&self) -> Pool {
        self.pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A pooled connection (returned to the pool, session reset, when dropped).
    pub async fn conn(&self) -> Result<Conn, PortError> {
        match tokio::time::timeout(self.opts.connect_timeout, self.pool().get_conn()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(mysql_async::Error::Server(e))) => Err(PortError::Sql {
                target: self.opts.name.clone(),
                what: format!("connect as {}", self.opts.user),
                code: e.code,
                message: e.message,
            }),
            Ok(Err(e)) => Err(PortError::Unreachable {
                target: self.opts.name.clone(),
                message: e.to_string(),
            }),
            Err(_) => Err(PortError::Timeout {
                target: self.opts.name.clone(),
                what: format!("connect as {}", self.opts.user),
                seconds: self.opts.connect_timeout.as_secs(),
            }),
        }
    }

    /// MariaDB: the accounts whose sessions may write through `read_only`: holders of
    /// `READ_ONLY ADMIN`, directly or through a default role (nested roles are not followed).
    /// After [`initialize`] there are none. MySQL has no such privilege: always none.
    pub async fn read_only_bypass_accounts(&self) -> Result<Vec<String>, PortError> {
        let info = self.server_info().await?;
        if info.dialect != Dialect::Mariadb {
            return Ok(Vec::new());
        }
        let mut conn = self.conn().await?;
        let q = sql::READ_ONLY_BYPASS_ACCOUNTS;
        let mut out = self
            .rows(&mut conn, q)
            .await?
            .iter()
            .map(|r| self.cell::<String>(r, 0usize, q))
            .collect::<Result<Vec<_>, _>>()?;
        for row in self.rows(&mut conn, sql::DEFAULT_ROLES).await? {
            let user: String = self.cell(&row, 0usize, sql::DEFAULT_ROLES)?;
            let host: String = self.cell(&row, 1usize, sql::DEFAULT_ROLES)?;
            let role: String = self.cell(&row, 2usize, sql::DEFAULT_ROLES)?;
            let q = sql::show_grants(&role, None);
            let grants = self.rows(&mut conn, &q).await?;
            for g in grants {
                let text: String = self.cell(&g, 0usize, &q)?;
                if text.contains("READ_ONLY ADMIN") || text.contains("ALL PRIVILEGES ON *.*") {
                    out.push(format!(
                        "{} (default role {role})",
                        sql::account(&user, &host)
                    ));
                    break;
                }
            }
        }
        Ok(out)
    }

    /// `@@read_only` and `SHOW REPLICA STATUS` only, with the server's dialect: what the
    /// agent's readiness probe needs, within `moco-agent`'s privileges (the whole
    /// [`MysqlPort::status`] also lists the replicas, which MariaDB reserves to `REPLICATION
    /// MASTER ADMIN`).
    pub async fn replication_view(
        &self,
    ) -> Result<(Dialect, bool, Option<ReplicaStatus>), PortError> {
        let d = self.dialect().await?;
        let mut conn = self.conn().await?;
        let read_only: i64 = self.value(&mut conn, "SELECT @@read_only").await?;
        let replica = self.replica_status(&mut conn, d).await?;
        Ok((d, read_only != 0, replica))
    }

    /// Closes the pool's connections.
    pub async fn disconnect(self) -> Result<(), PortError> {
        let name = self.opts.name.clone();
        self.pool()
            .disconnect()
            .await
            .map_err(|e| PortError::Unreachable {
                target: name,
                message: format!("disconnect: {e}"),
            })
    }

    // ----- helpers -------------------------------------------------------------------------

    fn failed(&self, message: impl Into<String>) -> PortError {
        PortError::Failed {
            target: self.opts.name.clone(),
            message: message.into(),
        }
    }

    fn sql_error(&self, statement: &str, e: mysql_async::Error) -> PortError {
        let what = redact(statement);
        match e {
            mysql_async::Error::Server(s) => {
                if PRIVILEGE_ERRORS.contains(&s.code) {
                    // The connection may have logged in before the account got its
                    // privileges, which a session keeps from its login: log in again next time.
                    self.replace_pool();
                }
                PortError::Sql {
                    target: self.opts.name.clone(),
                    what,
                    code: s.code,
                    message: s.message,
                }
            }
            mysql_async::Error::Io(io) => PortError::Unreachable {
                target: self.opts.name.clone(),
                message: format!("{what}: {io}"),
            },
            other => self.failed(format!("{what}: {other}")),
        }
    }

    /// Runs `fut` within `limit` (`None`: no limit), reporting a timeout of `what`.
    async fn timed<T>(
        &self,
        what: &str,
        limit: Option<Duration>,
        fut: impl Future<Output = Result<T, PortError>>,
    ) -> Result<T, PortError> {
        match limit {
            None => fut.await,
            Some(limit) => tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
                Err(PortError::Timeout {
                    target: self.opts.name.clone(),
                    what: what.to_owned(),
                    seconds: limit.as_secs(),
                })
            }),
        }
    }

    async fn exec(&self, conn: &mut Conn, statement: &str) -> Result<(), PortError> {
        tracing::debug!(target: "moco::sql", instance = %self.opts.name, sql = %redact(statement));
        conn.query_drop(statement)
            .await
            .map_err(|e| self.sql_error(statement, e))
    }

    async fn exec_all(&self, conn: &mut Conn, statements: &[String]) -> Result<(), PortError> {
        for s in statements {
            if let Err(e) = self.exec(conn, s).await {
                if statements.iter().any(|s| s.starts_with("SET ROLE")) {
                    // Do not hand a session with READ_ONLY ADMIN enabled back to the pool.
                    let _ = conn.query_drop(sql::SET_ROLE_NONE).await;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    async fn rows(&self, conn: &mut Conn, statement: &str) -> Result<Vec<Row>, PortError> {
        conn.query::<Row, _>(statement)
            .await
            .map_err(|e| self.sql_error(statement, e))
    }

    async fn first_row(&self, conn: &mut Conn, statement: &str) -> Result<Option<Row>, PortError> {
        Ok(self.rows(conn, statement).await?.into_iter().next())
    }

    /// The first column of the first row (NULL is an error unless `T` is an `Option`).
    async fn value<T: FromValue>(&self, conn: &mut Conn, statement: &str) -> Result<T, PortError> {
        let row = self
            .first_row(conn, statement)
            .await?
            .ok_or_else(|| self.failed(format!("{}: no row", redact(statement))))?;
        self.cell(&row, 0usize, statement)
    }

    fn cell<T: FromValue>(
        &self,
        row: &Row,
        index: impl mysql_async::prelude::ColumnIndex + fmt::Display + Copy,
        what: &str,
    ) -> Result<T, PortError> {
        match row.get_opt::<T, _>(index) {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(self.failed(format!(
                "{}: column {index}: unexpected value {:?}",
                redact(what),
                e.0
            ))),
            None => Err(self.failed(format!("{}: no column {index}", redact(what)))),
        }
    }

    fn gtid(&self, text: &str, what: &str) -> Result<GtidSet, PortError> {
        GtidSet::parse(text).map_err(|e| self.failed(format!("{what} {text:?}: {e}")))
    }

    async fn executed_gtid_on(&self, conn: &mut Conn, d: Dialect) -> Result<GtidSet, PortError> {
        let text: String = self.value(conn, sql::executed_gtid(d)).await?;
        self.gtid(&text, sql::executed_gtid(d))
    }

    async fn dialect(&self) -> Result<Dialect, PortError> {
        Ok(self.server_info().await?.dialect)
    }

    async fn probe(&self) -> Result<MysqldStatus, PortError> {
        let info = self.server_info().await?;
        let d = info.dialect;
        let mut conn = self.conn().await?;

        let q = sql::global_variables(d);
        let vars = self
            .first_row(&mut conn, q)
            .await?
            .ok_or_else(|| self.failed(format!("{q}: no row")))?;
        let server_id: u32 = self.cell(&vars, 0usize, q)?;
        let (server_uuid, gtid_executed, mut gtid_purged, read_only, super_read_only, log_bin) =
            if d == Dialect::Mariadb {
                let state: String = self.cell(&vars, 1usize, q)?;
                let read_only = self.cell::<i64>(&vars, 2usize, q)? != 0;
                let log_bin = self.cell::<i64>(&vars, 3usize, q)? != 0;
                let executed = self.gtid(&state, "@@gtid_binlog_state")?;
                // read_only stands for super_read_only: no account holds READ_ONLY ADMIN.
                (
                    None,
                    executed,
                    GtidSet::new(),
                    read_only,
                    read_only,
                    log_bin,
                )
            } else {
                let uuid: String = self.cell(&vars, 1usize, q)?;
                let executed: String = self.cell(&vars, 2usize, q)?;
                let purged: String = self.cell(&vars, 3usize, q)?;
                (
                    Some(uuid),
                    self.gtid(&executed, "@@gtid_executed")?,
                    self.gtid(&purged, "@@gtid_purged")?,
                    self.cell::<i64>(&vars, 4usize, q)? != 0,
                    self.cell::<i64>(&vars, 5usize, q)? != 0,
                    false,
                )
            };
        let semi_sync = self.semi_sync(&mut conn).await?;
        if d == Dialect::Mariadb && log_bin {
            gtid_purged = if commits_stuck(&semi_sync) {
                // `SHOW BINARY LOGS` and `SHOW BINLOG EVENTS` would wait for the binlog lock
                // until an acknowledgement that cannot come (issue 35).
                let cached = self.cached_purged();
                tracing::debug!(instance = %self.opts.name, wait_sessions = semi_sync.wait_sessions,
                    cached = cached.is_some(), "commits wait for acknowledgements no replica can give; binlogs not read");
                cached.unwrap_or_default()
            } else {
                let purged = self.mariadb_purged(&mut conn).await?;
                *self
                    .purged
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(purged.clone());
                purged
            };
        }
        let replica_status = self.replica_status(&mut conn, d).await?;

        let q = sql::replica_hosts(d);
        let mut replica_hosts = Vec::new();
        for row in self.rows(&mut conn, q).await? {
            replica_hosts.push(ReplicaHost {
                server_id: self.cell(&row, 0usize, q)?,
                host: self
                    .cell::<Option<String>>(&row, 1usize, q)?
                    .unwrap_or_default(),
                port: self
                    .cell::<Option<u16>>(&row, 2usize, q)?
                    .unwrap_or_default(),
            });
        }

        let clone_state = match sql::clone_status(d) {
            None => None,
            Some(q) => match conn.query::<Row, _>(q).await {
                Ok(rows) => match rows.first() {
                    Some(row) => parse_clone_state(&self.cell::<String>(row, 0usize, q)?),
                    None => None,
                },
                Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_TABLE => None,
                Err(e) => return Err(self.sql_error(q, e)),
            },
        };

        Ok(MysqldStatus {
            flavor: d.flavor(),
            version: info.version,
            server_id,
            server_uuid,
            gtid_executed,
            gtid_purged,
            read_only,
            super_read_only,
            semi_sync,
            replica_status,
            replica_hosts,
            clone_state,
        })
    }

    /// MariaDB has no `gtid_purged`: the `Gtid_list` event at the head of the oldest binlog
    /// is the state of everything no longer in the binlogs.
    fn cached_purged(&self) -> Option<GtidSet> {
        self.purged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn mariadb_purged(&self, conn: &mut Conn) -> Result<GtidSet, PortError> {
        let Some(first) = self.first_row(conn, sql::BINARY_LOGS).await? else {
            return Ok(GtidSet::new());
        };
        let log: String = self.cell(&first, 0usize, sql::BINARY_LOGS)?;
        let q = sql::binlog_head_events(&log);
        for row in self.rows(conn, &q).await? {
            let kind: String = self.cell(&row, "Event_type", &q)?;
            if kind == "Gtid_list" {
                let info: String = self.cell(&row, "Info", &q)?;
                return sql::parse_gtid_list_info(&info)
                    .ok_or_else(|| self.failed(format!("{q}: Gtid_list info {info:?}")));
            }
        }
        Ok(GtidSet::new())
    }

    async fn semi_sync(&self, conn: &mut Conn) -> Result<SemiSyncFacts, PortError> {
        let mut facts = SemiSyncFacts::default();
        let name_value = |row: &Row, q: &str| -> Result<(String, String), PortError> {
            Ok((
                self.cell::<String>(row, 0usize, q)?
                    .to_ascii_lowercase()
                    // MySQL 8.4's new plugins use source/replica names for the same settings.
                    .replace("_source_", "_master_")
                    .replace("_replica_", "_slave_"),
                self.cell::<Option<String>>(row, 1usize, q)?
                    .unwrap_or_default(),
            ))
        };
        for row in self.rows(conn, sql::SEMI_SYNC_VARIABLES).await? {
            let (name, value) = name_value(&row, sql::SEMI_SYNC_VARIABLES)?;
            let on = value.eq_ignore_ascii_case("ON") || value == "1";
            match name.as_str() {
                "rpl_semi_sync_master_enabled" => facts.source_enabled = on,
                "rpl_semi_sync_slave_enabled" => facts.replica_enabled = on,
                "rpl_semi_sync_master_wait_for_slave_count" => {
                    facts.wait_for_replica_count = value.parse().ok()
                }
                "rpl_semi_sync_master_timeout" => facts.source_timeout_ms = value.parse().ok(),
                _ => {}
            }
        }
        for row in self.rows(conn, sql::SEMI_SYNC_STATUS).await? {
            let (name, value) = name_value(&row, sql::SEMI_SYNC_STATUS)?;
            match name.as_str() {
                "rpl_semi_sync_master_wait_sessions" => {
                    facts.wait_sessions = value.parse().unwrap_or_default()
                }
                "rpl_semi_sync_master_clients" => facts.source_clients = value.parse().ok(),
                _ => {}
            }
        }
        Ok(facts)
    }

    async fn replica_status(
        &self,
        conn: &mut Conn,
        d: Dialect,
    ) -> Result<Option<ReplicaStatus>, PortError> {
        let q = sql::replica_status(d);
        let Some(row) = self.first_row(conn, q).await? else {
            return Ok(None);
        };
        let c = sql::replica_columns(d);
        let text = |col: &str| -> Result<String, PortError> {
            Ok(self
                .cell::<Option<String>>(&row, col, q)?
                .unwrap_or_default())
        };
        let retrieved = text(c.retrieved)?;
        Ok(Some(ReplicaStatus {
            source_host: text(c.source_host)?,
            source_port: self
                .cell::<Option<u16>>(&row, c.source_port, q)?
                .unwrap_or_default(),
            io_running: parse_thread_state(&text(c.io_running)?),
            sql_running: parse_thread_state(&text(c.sql_running)?),
            last_io_errno: self
                .cell::<Option<u32>>(&row, sql::LAST_IO_ERRNO, q)?
                .unwrap_or_default(),
            last_io_error: text(sql::LAST_IO_ERROR)?,
            last_sql_errno: self
                .cell::<Option<u32>>(&row, sql::LAST_SQL_ERRNO, q)?
                .unwrap_or_default(),
            last_sql_error: text(sql::LAST_SQL_ERROR)?,
            retrieved_gtid_set: self.gtid(&retrieved, c.retrieved)?,
            seconds_behind_source: self.cell::<Option<u64>>(&row, c.lag, q)?,
        }))
    }

    /// MariaDB without replication configured: `MASTER_GTID_WAIT` would return -1 at once
    /// (it tracks `gtid_slave_pos` only), so watch the server's own binlog state instead.
    async fn poll_binlog_state(
        &self,
        conn: &mut Conn,
        gtid: &GtidSet,
        timeout: Option<Duration>,
    ) -> Result<(), PortError> {
        let started = Instant::now();
        loop {
            if gtid.is_subset(&self.executed_gtid_on(conn, Dialect::Mariadb).await?) {
                return Ok(());
            }
            if timeout.is_some_and(|t| started.elapsed() >= t) {
                return Err(self.wait_timeout(gtid, timeout));
            }
            tokio::time::sleep(GTID_POLL).await;
        }
    }

    fn wait_timeout(&self, gtid: &GtidSet, timeout: Option<Duration>) -> PortError {
        PortError::Timeout {
            target: self.opts.name.clone(),
            what: format!("wait for GTID {gtid}"),
            seconds: timeout.map(|t| t.as_secs()).unwrap_or_default(),
        }
    }
}

fn parse_thread_state(text: &str) -> ThreadState {
    match text {
        "Yes" => ThreadState::Yes,
        "Connecting" | "Preparing" => ThreadState::Connecting,
        _ => ThreadState::No,
    }
}

fn parse_clone_state(text: &str) -> Option<CloneState> {
    match text {
        "Not Started" => Some(CloneState::NotStarted),
        "In Progress" => Some(CloneState::InProgress),
        "Completed" => Some(CloneState::Completed),
        "Failed" => Some(CloneState::Failed),
        _ => None,
    }
}

/// A statement fit for logs and errors: string literals after `PASSWORD`, `PASSWORD(`,
/// `IDENTIFIED BY` or `USING` (an authentication method's hash) become `'<redacted>'`.
pub fn redact(statement: &str) -> String {
    let upper = statement.to_ascii_uppercase();
    let mut out = String::with_capacity(statement.len());
    let mut rest = 0;
    let mut search = 0;
    while let Some(found) = ["PASSWORD", "IDENTIFIED BY", "USING"]
        .iter()
        .filter_map(|k| upper[search..].find(k).map(|i| (search + i, k.len())))
        .min()
    {
        let (at, len) = found;
        let after = at + len;
        // Skip `=`, `(` and spaces, then a quoted literal.
        let literal_start = statement[after..]
            .char_indices()
            .find(|(_, c)| *c != '=' && *c != '(' && !c.is_whitespace())
            .map(|(i, _)| after + i);
        search = after;
        let Some(start) = literal_start.filter(|&i| statement[i..].starts_with('\'')) else {
            continue;
        };
        let mut end = None;
        let mut chars = statement[start + 1..].char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '\'' if chars.peek().is_some_and(|(_, n)| *n == '\'') => {
                    chars.next();
                }
                '\'' => {
                    end = Some(start + 1 + i + 1);
                    break;
                }
                _ => {}
            }
        }
        let end = end.unwrap_or(statement.len());
        out.push_str(&statement[rest..start]);
        out.push_str("'<redacted>'");
        rest = end;
        search = end;
    }
    out.push_str(&statement[rest..]);
    out
}

/// True when a semi-sync primary has commits waiting for acknowledgements that fewer connected
/// replicas than it waits for cannot give: a primary whose replicas left, or a thawed former
/// primary. MariaDB then holds its binlog lock for commits queued behind the waiting one, so
/// `SHOW BINARY LOGS` and `SHOW BINLOG EVENTS` wait as long (measured on 10.11: blocked until
/// the waiting session was killed; one waiting session alone does not block them). The wait
/// ends only when the sessions are killed, which the fence does.
pub fn commits_stuck(s: &SemiSyncFacts) -> bool {
    let need = s.wait_for_replica_count.unwrap_or(1).max(1);
    s.source_enabled && s.wait_sessions > 0 && s.source_clients.unwrap_or(0) < need
}

#[async_trait]
impl MysqlPort for MysqlInstance {
    async fn status(&self) -> Result<MysqldStatus, PortError> {
        self.timed("status", Some(self.opts.call_timeout), self.probe())
            .await
    }

    async fn ping(&self) -> Result<(), PortError> {
        let mut conn = self.conn().await?;
        conn.ping().await.map_err(|e| self.sql_error("ping", e))
    }

    async fn forget_connections(&self) {
        self.replace_pool();
        *self
            .purged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    async fn executed_gtid(&self) -> Result<GtidSet, PortError> {
        self.timed("executed GTID", Some(self.opts.call_timeout), async {
            let d = self.dialect().await?;
            let mut conn = self.conn().await?;
            self.executed_gtid_on(&mut conn, d).await
        })
        .await
    }

    async fn set_super_read_only(&self, kill_after: Duration) -> Result<(), PortError> {
        let d = self.dialect().await?;
        let statements = sql::set_super_read_only(d);
        let mut conn = self.conn().await?;
        let started = Instant::now();
        let result = {
            let fut = self.exec_all(&mut conn, &statements);
            tokio::pin!(fut);
            match tokio::time::timeout(kill_after, &mut fut).await {
                Ok(result) => result,
                Err(_) => {
                    // A long global read lock or open transaction holds it up: kill clients,
                    // as MOCO does, then keep waiting.
                    tracing::warn!(instance = %self.opts.name, ?kill_after,
                        "read-only not set in time; killing client connections");
                    self.kill_connections().await?;
                    if !d.is_mariadb() {
                        self.end_killed_semi_sync_waits().await?;
                    }
                    self.timed("set read-only", Some(self.opts.call_timeout), fut)
                        .await
                }
            }
        };
        tracing::debug!(instance = %self.opts.name, elapsed = ?started.elapsed(), "read-only set");
        result
    }

    async fn kill_connections(&self) -> Result<(), PortError> {
        self.timed("kill connections", Some(self.opts.call_timeout), async {
            let mut conn = self.conn().await?;
            let q = sql::kill_candidates(&Account::system_user_names());
            let ids = self
                .rows(&mut conn, &q)
                .await?
                .iter()
                .map(|r| self.cell::<u64>(r, 0usize, &q))
                .collect::<Result<Vec<_>, _>>()?;
            for id in ids {
                let kill = sql::kill_connection(id);
                match conn.query_drop(&kill).await {
                    Ok(()) => {}
                    Err(mysql_async::Error::Server(e)) if e.code == sql::ER_NO_SUCH_THREAD => {}
                    Err(e) => return Err(self.sql_error(&kill, e)),
                }
            }
            Ok(())
        })
        .await
    }

    async fn wait_for_gtid(
        &self,
        gtid: &GtidSet,
        timeout: Option<Duration>,
    ) -> Result<(), PortError> {
        if gtid.is_empty() {
            return Ok(());
        }
        let limit = timeout.map(|t| t + self.opts.call_timeout);
        self.timed(&format!("wait for GTID {gtid}"), limit, async {
            let d = self.dialect().await?;
            let mut conn = self.conn().await?;
            if d == Dialect::Mariadb {
                if gtid.is_subset(&self.executed_gtid_on(&mut conn, d).await?) {
                    return Ok(());
                }
                if self
                    .first_row(&mut conn, sql::replica_status(d))
                    .await?
                    .is_none()
                {
                    return self.poll_binlog_state(&mut conn, gtid, timeout).await;
                }
            }
            let q = sql::wait_for_gtid(d, gtid, timeout);
            let result: Option<i64> = self.value(&mut conn, &q).await?;
            match result {
                Some(r) if sql::wait_reached(r) => {}
                Some(_) => return Err(self.wait_timeout(gtid, timeout)),
                None => return Err(self.failed(format!("{q}: returned NULL"))),
            }
            if d == Dialect::Mariadb {
                // MASTER_GTID_WAIT compares sequence numbers per domain; make sure the very
                // transactions arrived (a diverged replica can pass the number).
                let executed = self.executed_gtid_on(&mut conn, d).await?;
                if !gtid.is_subset(&executed) {
                    return Err(self.failed(format!(
                        "reached position {} but lacks {} (executed {executed}): diverged",
                        gtid.mariadb_position(),
                        gtid.subtract(&executed)
                    )));
                }
            }
            Ok(())
        })
        .await
    }

    async fn stop_replica_io(&self) -> Result<(), PortError> {
        self.timed(
            "stop replica IO thread",
            Some(self.opts.call_timeout),
            async {
                let d = self.dialect().await?;
                let mut conn = self.conn().await?;
                if d == Dialect::Mariadb {
                    // Stop it without waiting long for a possibly silent source (see the
                    // query's doc).
                    self.exec(&mut conn, sql::MARIADB_BOUND_KILL_CONN).await?;
                    let q = sql::MARIADB_IO_THREAD_ID;
                    for row in self.rows(&mut conn, q).await? {
                        let kill = sql::kill_connection(self.cell::<u64>(&row, 0usize, q)?);
                        tracing::debug!(target: "moco::sql", instance = %self.opts.name, sql = %kill);
                        match conn.query_drop(&kill).await {
                            Ok(()) => {}
                            Err(mysql_async::Error::Server(e))
                                if e.code == sql::ER_NO_SUCH_THREAD => {}
                            Err(e) => return Err(self.sql_error(&kill, e)),
                        }
                    }
                }
                self.exec(&mut conn, sql::stop_replica_io(d)).await
            },
        )
        .await
    }

    async fn start_replica(&self, sql_thread_only: bool) -> Result<(), PortError> {
        self.timed("start replica", Some(self.opts.call_timeout), async {
            let d = self.dialect().await?;
            let mut conn = self.conn().await?;
            self.exec(&mut conn, sql::start_replica(d, sql_thread_only))
                .await
        })
        .await
    }

    async fn set_replica_semi_sync(&self, enabled: bool) -> Result<(), PortError> {
        self.timed(
            "set replica semi-sync",
            Some(self.opts.call_timeout),
            async {
                let names = self.server_info().await?.semi_sync;
                let mut conn = self.conn().await?;
                for stmt in sql::set_replica_semi_sync(names, enabled) {
                    self.exec(&mut conn, &stmt).await?;
                }
                Ok(())
            },
        )
        .await
    }

    async fn configure_replication(
        &self,
        source: &ReplicationSource,
        credentials: &Credentials,
        semi_sync: bool,
    ) -> Result<(), PortError> {
        self.timed(
            "configure replication",
            Some(self.opts.call_timeout),
            async {
                let info = self.server_info().await?;
                let d = info.dialect;
                let (host, port) = source.address();
                let spec = sql::SourceSpec {
                    host,
                    port,
                    user: &credentials.user,
                    password: &credentials.password,
                    ssl_ca: self.opts.replication_ca.as_deref(),
                };
                let mut conn = self.conn().await?;
                let statements = sql::configure_replication(d, info.semi_sync, &spec, semi_sync);
                self.exec_all(&mut conn, &statements).await
            },
        )
        .await
    }

    async fn configure_primary_semi_sync(
        &self,
        wait_for_replica_count: u32,
        timeout_ms: u64,
    ) -> Result<(), PortError> {
        self.timed(
            "configure primary semi-sync",
            Some(self.opts.call_timeout),
            async {
                let info = self.server_info().await?;
                let mut conn = self.conn().await?;
                let statements = sql::configure_primary_semi_sync(
                    info.dialect,
                    info.semi_sync,
                    wait_for_replica_count,
                    timeout_ms,
                );
                self.exec_all(&mut conn, &statements).await
            },
        )
        .await
    }

    async fn set_writable(&self) -> Result<(), PortError> {
        self.timed("set writable", Some(self.opts.call_timeout), async {
            let d = self.dialect().await?;
            let mut conn = self.conn().await?;
            self.exec_all(&mut conn, &sql::set_writable(d)).await
        })
        .await
    }

    async fn accepts(&self, user: &str, password: &str) -> Result<bool, PortError> {
        MysqlInstance::accepts(self, user, password).await
    }

    async fn add_new_passwords(&self, pairs: &[PasswordPair]) -> Result<(), PortError> {
        self.timed("add new passwords", Some(self.opts.call_timeout), async {
            MysqlInstance::add_new_passwords(self, pairs).await
        })
        .await
    }

    async fn drop_old_passwords(&self, pairs: &[PasswordPair]) -> Result<(), PortError> {
        self.timed("drop old passwords", Some(self.opts.call_timeout), async {
            MysqlInstance::drop_old_passwords(self, pairs).await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits are stuck only while some wait and fewer replicas are connected than the
    /// primary waits for; a busy primary with its replicas (sessions waiting a moment for
    /// each acknowledgement) still has its binlogs read.
    #[test]
    fn commits_are_stuck_only_without_enough_replicas_to_acknowledge_them() {
        let facts = |enabled, waiting, clients, count| SemiSyncFacts {
            source_enabled: enabled,
            replica_enabled: false,
            wait_for_replica_count: count,
            source_timeout_ms: Some(86_400_000),
            wait_sessions: waiting,
            source_clients: clients,
        };
        // A thawed ex-primary, or a primary whose replicas left (MariaDB waits for one).
        assert!(commits_stuck(&facts(true, 1, Some(0), None)));
        assert!(commits_stuck(&facts(true, 3, None, None)));
        // MySQL waiting for two with one connected.
        assert!(commits_stuck(&facts(true, 1, Some(1), Some(2))));
        // A busy primary with its replicas: waits end.
        assert!(!commits_stuck(&facts(true, 5, Some(1), None)));
        assert!(!commits_stuck(&facts(true, 5, Some(2), Some(2))));
        // Nothing waits, or semi-sync is off (a replica).
        assert!(!commits_stuck(&facts(true, 0, Some(0), None)));
        assert!(!commits_stuck(&facts(false, 2, Some(0), None)));
    }

    #[test]
    fn redaction_hides_passwords_only() {
        assert_eq!(
            redact(
                "CHANGE MASTER TO MASTER_HOST='h', MASTER_PASSWORD='s''e\\'cret', MASTER_PORT=1"
            ),
            "CHANGE MASTER TO MASTER_HOST='h', MASTER_PASSWORD='<redacted>', MASTER_PORT=1"
        );
        assert_eq!(
            redact("ALTER USER 'a'@'%' IDENTIFIED BY 'pw'"),
            "ALTER USER 'a'@'%' IDENTIFIED BY '<redacted>'"
        );
        assert_eq!(
            redact(
                "ALTER USER 'a'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('o') \
                 OR mysql_native_password USING PASSWORD( 'n')"
            ),
            "ALTER USER 'a'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('<redacted>') \
             OR mysql_native_password USING PASSWORD( '<redacted>')"
        );
        assert_eq!(
            redact(
                "CHANGE REPLICATION SOURCE TO SOURCE_USER='u', SOURCE_PASSWORD = 'x', GET_SOURCE_PUBLIC_KEY=1"
            ),
            "CHANGE REPLICATION SOURCE TO SOURCE_USER='u', SOURCE_PASSWORD = '<redacted>', GET_SOURCE_PUBLIC_KEY=1"
        );
        assert_eq!(
            redact(
                "ALTER USER 'a'@'%' IDENTIFIED VIA mysql_native_password USING '*AB' OR \
                 mysql_native_password USING '*CD'"
            ),
            "ALTER USER 'a'@'%' IDENTIFIED VIA mysql_native_password USING '<redacted>' OR \
             mysql_native_password USING '<redacted>'"
        );
        assert_eq!(
            redact("CREATE USER 'a'@'%' IDENTIFIED BY PASSWORD '*AB' REQUIRE NONE"),
            "CREATE USER 'a'@'%' IDENTIFIED BY PASSWORD '<redacted>' REQUIRE NONE"
        );
        assert_eq!(redact("SELECT 1"), "SELECT 1");
        assert_eq!(redact("SET PASSWORD"), "SET PASSWORD");
    }

    #[test]
    fn thread_and_clone_states() {
        assert_eq!(parse_thread_state("Yes"), ThreadState::Yes);
        assert_eq!(parse_thread_state("Connecting"), ThreadState::Connecting);
        assert_eq!(parse_thread_state("Preparing"), ThreadState::Connecting);
        assert_eq!(parse_thread_state("No"), ThreadState::No);
        assert_eq!(parse_thread_state(""), ThreadState::No);
        assert_eq!(
            parse_clone_state("In Progress"),
            Some(CloneState::InProgress)
        );
        assert_eq!(parse_clone_state("Completed"), Some(CloneState::Completed));
        assert_eq!(parse_clone_state("Failed"), Some(CloneState::Failed));
        assert_eq!(
            parse_clone_state("Not Started"),
            Some(CloneState::NotStarted)
        );
        assert_eq!(parse_clone_state("?"), None);
    }

    #[test]
    fn options_debug_hides_the_password() {
        let creds = Credentials {
            user: "moco-admin".into(),
            password: "s3cret".into(),
        };
        let o = ConnectOptions::new("127.0.0.1", 3306, &creds).with_max_connections(0);
        assert_eq!(o.max_connections, 1);
        assert_eq!(o.name, "127.0.0.1:3306");
        assert!(!format!("{o:?}").contains("s3cret"));
        let inst = MysqlInstance::new(o);
        assert!(!format!("{inst:?}").contains("s3cret"));
    }
}
