//! Giving a copy of another cluster's datadir this cluster's passwords.
//!
//! A physical backup holds the source cluster's `mysql` schema: MOCO's eight accounts with
//! their grants (both clusters are moco-rs's) but the *source's* passwords, so nothing of
//! the new cluster could log in to the restored copy. The caller starts the copy once with
//! `--skip-grant-tables --skip-networking` (only a process of this host, on the socket, gets
//! in meanwhile, and it gets in without a password); [`rekey_accounts`] then loads the
//! grant tables and sets each account's password. `moco local restore` and `moco init` (a
//! restore on Kubernetes) run it.

use std::path::Path;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable as _;

use super::InstanceError;
use crate::mysql::{Account, DEFAULT_ACCOUNT_HOST, MocoPasswords, redact, sql};
use crate::ports::PortError;

/// The statements, in order. No binary logging, and before the grant tables are loaded
/// (while the session may still do anything): the restored history must stay the source's,
/// so that the copy continues it.
pub fn rekey_statements(passwords: &MocoPasswords) -> Vec<String> {
    let mut statements = vec![
        "SET SESSION sql_log_bin=0".to_owned(),
        "FLUSH PRIVILEGES".to_owned(),
    ];
    statements.extend(Account::ALL.iter().map(|&account| {
        format!(
            "ALTER USER {} IDENTIFIED BY {}",
            sql::account(account.name(), DEFAULT_ACCOUNT_HOST),
            sql::quote(passwords.get(account))
        )
    }));
    statements
}

/// [`rekey_statements`] as the `--init-file` of the copy's first start, one statement per
/// line. mysqld runs the file before it accepts any connection, with the grant tables loaded,
/// so a restore whose copy starts for the first time needs neither a start without grant
/// tables nor a second start. The file holds passwords: the caller writes it 0600 and removes
/// it once the server answers.
pub fn rekey_init_file(passwords: &MocoPasswords) -> String {
    rekey_statements(passwords)
        .iter()
        .map(|statement| format!("{statement};\n"))
        .collect()
}

/// Waits up to `boot` for the copy started with `--skip-grant-tables --skip-networking` to
/// answer on `socket`, then gives MOCO's accounts `passwords` ([`rekey_statements`]). The
/// caller stops the server afterwards.
pub async fn rekey_accounts(
    socket: &Path,
    passwords: &MocoPasswords,
    boot: Duration,
) -> Result<(), InstanceError> {
    let target = format!("the copy's mysqld on {}", socket.display());
    let deadline = Instant::now() + boot;
    while !crate::local::platform::socket_greets(socket, Duration::from_secs(2)).await {
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
    for statement in rekey_statements(passwords) {
        conn.query_drop(&statement).await.map_err(|e| {
            let what = redact(&statement);
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
        })?;
    }
    conn.disconnect().await.map_err(|e| PortError::Failed {
        target,
        message: format!("disconnecting: {e}"),
    })?;
    Ok(())
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
        assert_eq!(statements[0], "SET SESSION sql_log_bin=0");
        assert_eq!(statements[1], "FLUSH PRIVILEGES");
        assert_eq!(statements.len(), 2 + Account::ALL.len());
        assert_eq!(
            statements[2],
            format!(
                "ALTER USER 'moco-admin'@'%' IDENTIFIED BY {}",
                sql::quote("new-moco-admin'x")
            )
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
            !redact(&statements[2]).contains("new-"),
            "{}",
            statements[2]
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
        assert_eq!(lines.len(), 2 + Account::ALL.len());
        assert!(file.ends_with(";\n"));
    }
}
