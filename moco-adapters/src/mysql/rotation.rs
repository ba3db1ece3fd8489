//! The SQL of a rotation of MOCO's passwords ([`moco_core::rotation`]): an account made to
//! accept two passwords, then only the new one, and a test login that tells which it accepts.
//!
//! Each statement list ends in the same state whatever the account held before, so the
//! manager may repeat a step after a restart or on a new primary:
//!
//! * MariaDB has no dual passwords but lets an account authenticate through any of several
//!   methods (`IDENTIFIED VIA … OR …`, 10.4+): the same plugin twice, with each password.
//!   Replicas' IO threads and every client accept either (measured, `mysql_mariadb.rs`).
//!   Each password travels as its hash ([`super::password`]): MariaDB's binary log keeps the
//!   statements as sent, and the application accounts may read it.
//! * MySQL 8 has dual passwords: `RETAIN CURRENT PASSWORD` keeps the current one as the
//!   secondary. The old one is set first, so that the secondary is the old password even
//!   when the step is repeated after the new one became the primary.
//!
//! The statements run on the primary with binary logging, so that every replica applies them.

use moco_cluster::ports::{PasswordPair, PortError};
use mysql_async::OptsBuilder;

use super::password::{identified_by, native_method};
use super::sql::{account, quote};
use super::{DEFAULT_ACCOUNT_HOST, MysqlInstance};
use moco_core::dialect::Dialect;

/// MySQL's `ER_ACCESS_DENIED_ERROR`: a login refused (wrong password or no such account).
const ER_ACCESS_DENIED: u16 = 1045;

/// `account` accepts both `old` and `new`.
pub fn both_passwords(d: Dialect, name: &str, old: &str, new: &str) -> Vec<String> {
    let who = account(name, DEFAULT_ACCOUNT_HOST);
    match d {
        Dialect::Mariadb => vec![format!(
            "ALTER USER {who} IDENTIFIED VIA {} OR {}",
            native_method(old),
            native_method(new)
        )],
        Dialect::Mysql80 | Dialect::Mysql84 => vec![
            format!("ALTER USER {who} IDENTIFIED BY {}", quote(old)),
            format!(
                "ALTER USER {who} IDENTIFIED BY {} RETAIN CURRENT PASSWORD",
                quote(new)
            ),
        ],
    }
}

/// `account` accepts only `new`.
pub fn new_password_only(d: Dialect, name: &str, new: &str) -> Vec<String> {
    let who = account(name, DEFAULT_ACCOUNT_HOST);
    let set = format!("ALTER USER {who} {}", identified_by(d, new));
    match d {
        // One method again: the old one goes with it.
        Dialect::Mariadb => vec![set],
        Dialect::Mysql80 | Dialect::Mysql84 => {
            vec![set, format!("ALTER USER {who} DISCARD OLD PASSWORD")]
        }
    }
}

impl MysqlInstance {
    /// Whether this server accepts a login as `user` with `password` (over the way this
    /// instance is reached, with its TLS). `Ok(false)` only for a refusal of the credentials;
    /// a server that cannot be reached is an error.
    pub async fn accepts(&self, user: &str, password: &str) -> Result<bool, PortError> {
        let opts = self.options();
        let builder = OptsBuilder::default()
            .ip_or_hostname(opts.host.clone())
            .tcp_port(opts.port)
            .user(Some(user.to_owned()))
            .pass(Some(password.to_owned()))
            .prefer_socket(false)
            .ssl_opts(opts.tls.as_ref().map(super::tls::MysqlTls::ssl_opts));
        let what = format!("log in as {user}");
        let attempt = mysql_async::Conn::new(builder);
        match tokio::time::timeout(opts.connect_timeout, attempt).await {
            Ok(Ok(conn)) => {
                let _ = conn.disconnect().await;
                Ok(true)
            }
            Ok(Err(mysql_async::Error::Server(e))) if e.code == ER_ACCESS_DENIED => Ok(false),
            Ok(Err(mysql_async::Error::Server(e))) => Err(PortError::Sql {
                target: opts.name.clone(),
                what,
                code: e.code,
                message: e.message,
            }),
            Ok(Err(e)) => Err(PortError::Unreachable {
                target: opts.name.clone(),
                message: format!("{what}: {e}"),
            }),
            Err(_) => Err(PortError::Timeout {
                target: opts.name.clone(),
                what,
                seconds: opts.connect_timeout.as_secs(),
            }),
        }
    }

    /// Makes each account accept both of its passwords ([`both_passwords`]).
    pub async fn add_new_passwords(&self, pairs: &[PasswordPair]) -> Result<(), PortError> {
        let d = self.server_info().await?.dialect;
        let statements: Vec<String> = pairs
            .iter()
            .flat_map(|p| both_passwords(d, &p.account, &p.old, &p.new))
            .collect();
        self.run_logged(&statements).await
    }

    /// Makes each account accept only its new password ([`new_password_only`]).
    pub async fn drop_old_passwords(&self, pairs: &[PasswordPair]) -> Result<(), PortError> {
        let d = self.server_info().await?.dialect;
        let statements: Vec<String> = pairs
            .iter()
            .flat_map(|p| new_password_only(d, &p.account, &p.new))
            .collect();
        self.run_logged(&statements).await
    }

    /// Runs `statements` in one session with binary logging on (the pool's sessions have it
    /// on; said again so that a session setting can never keep the change from the replicas).
    async fn run_logged(&self, statements: &[String]) -> Result<(), PortError> {
        let mut conn = self.conn().await?;
        let mut all = vec!["SET SESSION sql_log_bin=1".to_owned()];
        all.extend(statements.iter().cloned());
        self.exec_all(&mut conn, &all).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::password::native_password_hash;
    use super::*;

    /// Two methods, then one; only hashes travel (MariaDB's binary log keeps the statement).
    #[test]
    fn mariadb_lists_both_passwords_as_two_methods_and_then_one() {
        let (old, new) = (native_password_hash("o'ld"), native_password_hash("new"));
        assert_eq!(
            both_passwords(Dialect::Mariadb, "moco-repl", "o'ld", "new"),
            vec![format!(
                "ALTER USER 'moco-repl'@'%' IDENTIFIED VIA mysql_native_password USING \
                 '{old}' OR mysql_native_password USING '{new}'"
            )]
        );
        assert_eq!(
            new_password_only(Dialect::Mariadb, "moco-repl", "new"),
            vec![format!(
                "ALTER USER 'moco-repl'@'%' IDENTIFIED BY PASSWORD '{new}'"
            )]
        );
    }

    /// MySQL sets the old password first, so a repeated step keeps the old one as the
    /// secondary instead of retaining the new one twice.
    #[test]
    fn mysql_retains_the_old_password_and_then_discards_it() {
        for d in [Dialect::Mysql80, Dialect::Mysql84] {
            assert_eq!(
                both_passwords(d, "moco-admin", "old", "new"),
                vec![
                    "ALTER USER 'moco-admin'@'%' IDENTIFIED BY 'old'",
                    "ALTER USER 'moco-admin'@'%' IDENTIFIED BY 'new' RETAIN CURRENT PASSWORD",
                ]
            );
            assert_eq!(
                new_password_only(d, "moco-admin", "new"),
                vec![
                    "ALTER USER 'moco-admin'@'%' IDENTIFIED BY 'new'",
                    "ALTER USER 'moco-admin'@'%' DISCARD OLD PASSWORD",
                ]
            );
        }
    }
}
