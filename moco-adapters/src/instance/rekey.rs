//! Giving a copy of another cluster's datadir this cluster's passwords.
//!
//! A physical backup holds the source cluster's `mysql` schema: MOCO's eight accounts with
//! their grants (both clusters are moco-rs's) but the *source's* passwords, so nothing of
//! the new cluster could log in to the restored copy. The caller starts the copy once with
//! `--skip-grant-tables --skip-networking` (only a process of this host, on the socket, gets
//! in meanwhile, and it gets in without a password); [`rekey_accounts`] then loads the
//! grant tables and sets each account's password. `moco local restore` and `moco init` (a
//! restore on Kubernetes) run it.
//!
//! Re-keying `'<account>'@'%'` is not enough: the source's users may have made more accounts
//! (`moco-writable` holds `CREATE USER`). An account of a MOCO name on another host
//! (`'moco-admin'@'localhost'`, `'moco-agent'@'10.%'`) or an anonymous one (`''@'localhost'`)
//! is more specific than `'<account>'@'%'` and wins at login, with a password of the source's.
//! So these are dropped: a fresh instance has none (MOCO creates its accounts on `%` only and
//! drops the anonymous ones). The copy's other accounts are the source's users' and stay;
//! those with global privileges are reported ([`Rekeyed::privileged`]).
//!
//! MariaDB only (a physical copy is MariaDB's): the drop is one compound statement, so that
//! the `--init-file` of `moco local restore`, which cannot query, drops them too.

use std::path::Path;
use std::time::{Duration, Instant};

use moco_cluster::ports::PortError;
use mysql_async::prelude::Queryable as _;

use super::InstanceError;
use crate::mysql::password::identified_by;
use crate::mysql::{DEFAULT_ACCOUNT_HOST, redact, sql};
use moco_core::dialect::Dialect;
use moco_core::moco_accounts::{Account, MocoPasswords};

/// The accounts of the copy that win over MOCO's at login: a MOCO account name on another
/// host than [`DEFAULT_ACCOUNT_HOST`], and anonymous accounts (roles aside: they log in to
/// nothing). A condition on `mysql.user`.
fn stray_condition() -> String {
    let names: Vec<String> = Account::ALL.iter().map(|a| sql::quote(a.name())).collect();
    format!(
        "is_role = 'N' AND (User = '' OR (User IN ({}) AND Host <> {}))",
        names.join(", "),
        sql::quote(DEFAULT_ACCOUNT_HOST)
    )
}

/// Drops every account of [`stray_condition`], in one statement (a MariaDB compound
/// statement, one line, as an init file needs it).
fn drop_strays() -> String {
    format!(
        "BEGIN NOT ATOMIC FOR a IN (SELECT User, Host FROM mysql.user WHERE {}) DO \
         EXECUTE IMMEDIATE CONCAT('DROP USER ', QUOTE(a.User), '@', QUOTE(a.Host)); \
         END FOR; END",
        stray_condition()
    )
}

/// The statements, in order. No binary logging, and before the grant tables are loaded
/// (while the session may still do anything): the restored history must stay the source's,
/// so that the copy continues it. The session's `sql_mode` is made to read [`sql::quote`]'s
/// escapes first; the accounts that would win over MOCO's at login are dropped before MOCO's
/// get their passwords.
pub fn rekey_statements(passwords: &MocoPasswords) -> Vec<String> {
    let mut statements = vec![
        sql::SESSION_INIT.to_owned(),
        "SET SESSION sql_log_bin=0".to_owned(),
        "FLUSH PRIVILEGES".to_owned(),
        drop_strays(),
    ];
    // The hashes, not the passwords: the init file then holds nothing a login can use.
    statements.extend(Account::ALL.iter().map(|&account| {
        format!(
            "ALTER USER {} {}",
            sql::account(account.name(), DEFAULT_ACCOUNT_HOST),
            identified_by(Dialect::Mariadb, passwords.get(account))
        )
    }));
    statements
}

/// [`rekey_statements`] as the `--init-file` of the copy's first start, one statement per
/// line. mysqld runs the file before it accepts any connection, with the grant tables loaded,
/// so a restore whose copy starts for the first time needs neither a start without grant
/// tables nor a second start. The file holds passwords: the caller writes it 0600 and removes
/// it once the server answers. (It cannot report what it found: [`rekey_accounts`] does.)
pub fn rekey_init_file(passwords: &MocoPasswords) -> String {
    rekey_statements(passwords)
        .iter()
        .map(|statement| format!("{statement};\n"))
        .collect()
}

/// What re-keying found in the copy besides MOCO's accounts.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Rekeyed {
    /// The accounts dropped, `'user'@'host'`: MOCO's names on other hosts, anonymous ones.
    pub dropped: Vec<String>,
    /// The copy's other accounts with global privileges (a `GRANT … ON *.*` beyond
    /// `USAGE`), kept: they are the source's users', and may be meant to come along. Each
    /// is `'user'@'host': PRIVILEGES`.
    pub privileged: Vec<String>,
}

/// The global privileges among `grants` (the lines of `SHOW GRANTS FOR`), unless they are
/// only `USAGE`.
pub fn global_privileges(grants: &[String]) -> Option<String> {
    grants.iter().find_map(|line| {
        let (privileges, _) = line.strip_prefix("GRANT ")?.split_once(" ON *.* TO ")?;
        (privileges != "USAGE").then(|| privileges.to_owned())
    })
}

/// Waits up to `boot` for the copy started with `--skip-grant-tables --skip-networking` to
/// answer on `socket`, then gives MOCO's accounts `passwords` ([`rekey_statements`]); returns
/// what it dropped and the privileged accounts it left, both also logged. The caller stops
/// the server afterwards.
pub async fn rekey_accounts(
    socket: &Path,
    passwords: &MocoPasswords,
    boot: Duration,
) -> Result<Rekeyed, InstanceError> {
    let target = format!("the copy's mysqld on {}", socket.display());
    let deadline = Instant::now() + boot;
    while !crate::greeting::socket_greets(socket, Duration::from_secs(2)).await {
        if Instant::now() > deadline {
            return Err(InstanceError::Timeout {
                what: format!("waiting for {target}"),
                seconds: boot.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The grant tables are skipped: any user gets in on the socket.
    let opts = mysql_async::OptsBuilder::default()
        .user(Some("root"))
        .socket(Some(socket.display().to_string()));
    let mut conn = mysql_async::Conn::new(opts)
        .await
        .map_err(|e| PortError::Unreachable {
            target: target.clone(),
            message: e.to_string(),
        })?;
    let failed = |statement: &str, e: mysql_async::Error| {
        let what = redact(statement);
        match e {
            mysql_async::Error::Server(s) => PortError::Sql {
                target: target.clone(),
                what,
                code: s.code,
                message: s.message,
            },
            other => PortError::Failed {
                target: target.clone(),
                message: format!("{what}: {other}"),
            },
        }
    };
    let strays = format!(
        "SELECT User, Host FROM mysql.user WHERE {} ORDER BY User, Host",
        stray_condition()
    );
    let dropped: Vec<(String, String)> =
        conn.query(&strays).await.map_err(|e| failed(&strays, e))?;
    for statement in rekey_statements(passwords) {
        conn.query_drop(&statement)
            .await
            .map_err(|e| failed(&statement, e))?;
    }
    let names: Vec<String> = Account::ALL.iter().map(|a| sql::quote(a.name())).collect();
    let others = format!(
        "SELECT User, Host FROM mysql.user WHERE is_role = 'N' AND User NOT IN ({}) \
         ORDER BY User, Host",
        names.join(", ")
    );
    let others: Vec<(String, String)> =
        conn.query(&others).await.map_err(|e| failed(&others, e))?;
    let mut privileged = Vec::new();
    for (user, host) in others {
        let show = format!("SHOW GRANTS FOR {}", sql::account(&user, &host));
        let grants: Vec<String> = conn.query(&show).await.map_err(|e| failed(&show, e))?;
        if let Some(p) = global_privileges(&grants) {
            privileged.push(format!("{}: {p}", sql::account(&user, &host)));
        }
    }
    conn.disconnect().await.map_err(|e| PortError::Failed {
        target,
        message: format!("disconnecting: {e}"),
    })?;
    let rekeyed = Rekeyed {
        dropped: dropped
            .iter()
            .map(|(user, host)| sql::account(user, host))
            .collect(),
        privileged,
    };
    if !rekeyed.dropped.is_empty() {
        tracing::warn!(accounts = ?rekeyed.dropped, "dropped the copy's accounts that would win over MOCO's at login (other hosts of MOCO's names, anonymous)");
    }
    if !rekeyed.privileged.is_empty() {
        tracing::warn!(accounts = ?rekeyed.privileged, "the copy brought other accounts with global privileges; they are kept");
    }
    Ok(rekeyed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_account_gets_its_password_after_the_grant_tables_load() {
        let passwords =
            MocoPasswords::try_from_fn(|a: Account| Ok::<_, ()>(format!("new-{}'x", a.name())))
                .unwrap();
        let statements = rekey_statements(&passwords);
        assert_eq!(statements[0], sql::SESSION_INIT);
        assert_eq!(statements[1], "SET SESSION sql_log_bin=0");
        assert_eq!(statements[2], "FLUSH PRIVILEGES");
        assert!(
            statements[3].starts_with("BEGIN NOT ATOMIC"),
            "{}",
            statements[3]
        );
        assert_eq!(statements.len(), 4 + Account::ALL.len());
        assert_eq!(
            statements[4],
            format!(
                "ALTER USER 'moco-admin'@'%' IDENTIFIED BY PASSWORD '{}'",
                crate::mysql::password::native_password_hash("new-moco-admin'x")
            )
        );
        assert!(
            !rekey_init_file(&passwords).contains("new-"),
            "the init file holds hashes only"
        );
        for account in Account::ALL {
            assert!(
                statements
                    .iter()
                    .any(|s| s.contains(&format!("'{}'@'%'", account.name()))),
                "{account:?}"
            );
        }
        assert!(
            !redact(&statements[4]).contains("new-"),
            "{}",
            statements[4]
        );
    }

    /// The drop names every MOCO account on another host than `%`, and anonymous accounts,
    /// never roles; one line.
    #[test]
    fn the_strays_are_other_hosts_of_mocos_names_and_anonymous_accounts() {
        let drop = drop_strays();
        assert!(!drop.contains('\n'), "{drop}");
        assert!(
            drop.contains("is_role = 'N' AND (User = '' OR (User IN ('moco-admin', "),
            "{drop}"
        );
        assert!(drop.contains(") AND Host <> '%'))"), "{drop}");
        for account in Account::ALL {
            assert!(
                drop.contains(&format!("'{}'", account.name())),
                "{account:?}"
            );
        }
    }

    #[test]
    fn global_privileges_beyond_usage_only() {
        let lines = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            global_privileges(&lines(&[
                "GRANT RELOAD, PROCESS ON *.* TO `ops`@`%` IDENTIFIED BY PASSWORD '*AB'",
                "GRANT SELECT ON `app`.* TO `ops`@`%`",
            ]))
            .as_deref(),
            Some("RELOAD, PROCESS")
        );
        assert_eq!(
            global_privileges(&lines(&[
                "GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*AB'",
                "GRANT ALL PRIVILEGES ON `app`.* TO `app`@`%`",
            ])),
            None
        );
        assert_eq!(
            global_privileges(&lines(&["GRANT `role1` TO `app`@`%`"])),
            None
        );
    }

    /// A password with a newline must not split its statement: mysqld reads the init file a
    /// line at a time.
    #[test]
    fn the_init_file_has_one_statement_per_line() {
        let passwords =
            MocoPasswords::try_from_fn(|a: Account| Ok::<_, ()>(format!("{}\nx;", a.name())))
                .unwrap();
        let file = rekey_init_file(&passwords);
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(
            lines,
            rekey_statements(&passwords)
                .iter()
                .map(|s| format!("{s};"))
                .collect::<Vec<_>>()
        );
        assert_eq!(lines.len(), 4 + Account::ALL.len());
        assert!(file.ends_with(";\n"));
    }
}
