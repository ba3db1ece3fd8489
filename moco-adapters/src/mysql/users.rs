//! MOCO's accounts, their passwords and their grants per flavour.
//!
//! MySQL grants are MOCO's (moco-agent `InitializeOnce`). MariaDB 10.11 has other privilege
//! names (`BINLOG MONITOR`, `SLAVE MONITOR`, `REPLICATION SLAVE ADMIN`, `CONNECTION ADMIN`)
//! and, crucially, `READ_ONLY ADMIN`: whoever holds it writes through `read_only`, so no
//! account may hold it for `read_only` to fence like MySQL's `super_read_only`. The admin gets
//! `ALL` minus `READ_ONLY ADMIN`; the writable account never gets it.
//!
//! But 10.11 also requires `READ_ONLY ADMIN` to *set* `read_only` (and to write
//! `gtid_slave_pos` while read-only; measured: error 1227 / 1290 without it). So the admin is
//! granted the role [`READ_ONLY_ADMIN_ROLE`], which holds only that privilege and is never a
//! default role: sessions run without it and the adapter enables it (`SET ROLE`) for exactly
//! those statements ([`super::sql::privileged`]).
//!
//! No application account may touch the operator's accounts or the grant tables: an account
//! dropped, locked or re-keyed behind the operator's back stops failover. On MySQL the
//! operator's accounts are system accounts (`SYSTEM_USER`), which `CREATE USER` cannot reach,
//! and the writable account's rights on `mysql.*` are revoked (`partial_revokes`). MariaDB has
//! neither: `CREATE USER` reaches every account, and it has no partial revokes. So there the
//! writable account gets no `CREATE USER` (it cannot create, drop, lock or rename any account;
//! the admin creates application users) and its data privileges are granted on every database
//! but `mysql` ([`MARIADB_WRITABLE_DATA_PRIVILEGES`]).

use moco_core::dialect::{Dialect, SemiSyncNames};
use moco_core::moco_accounts::{Account, MocoPasswords};

use super::password::identified_by;
use super::sql::{account, quote};

pub use super::sql::READ_ONLY_ADMIN_ROLE;

/// The host part of MOCO's accounts: any host, which covers loopback TCP in local mode.
pub const DEFAULT_ACCOUNT_HOST: &str = "%";

/// Fresh passwords for the eight accounts from the OS CSPRNG (the engine's crate, which holds
/// [`MocoPasswords`], never touches a random number generator).
pub fn generate_passwords() -> Result<MocoPasswords, getrandom::Error> {
    MocoPasswords::try_from_fn(|_| random_password())
}

/// 16 bytes from the OS CSPRNG as 32 lower-case hex characters.
pub fn random_password() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Global privileges of `account` (before any revoke).
pub(super) fn privileges(d: Dialect, account: Account) -> &'static [&'static str] {
    let mariadb = d == Dialect::Mariadb;
    match account {
        Account::Admin => &["ALL PRIVILEGES"],
        Account::Agent if mariadb => &[
            "BINLOG ADMIN",
            "BINLOG MONITOR",
            "CONNECTION ADMIN",
            "RELOAD",
            "REPLICATION SLAVE ADMIN",
            "SELECT",
            "SLAVE MONITOR",
        ],
        Account::Agent => &[
            "BINLOG_ADMIN",
            "CLONE_ADMIN",
            "RELOAD",
            "REPLICATION CLIENT",
            "SELECT",
            "SERVICE_CONNECTION_ADMIN",
            "SYSTEM_VARIABLES_ADMIN",
        ],
        Account::Repl if mariadb => &["BINLOG MONITOR", "REPLICATION SLAVE", "SLAVE MONITOR"],
        Account::Repl => &["REPLICATION CLIENT", "REPLICATION SLAVE"],
        // What mariadb-backup needs on the donor (with --slave-info --safe-slave-backup).
        Account::CloneDonor if mariadb => &[
            "BINLOG MONITOR",
            "CONNECTION ADMIN",
            "LOCK TABLES",
            "PROCESS",
            "RELOAD",
            "REPLICATION SLAVE ADMIN",
            "SELECT",
            "SLAVE MONITOR",
        ],
        Account::CloneDonor => &["BACKUP_ADMIN", "SERVICE_CONNECTION_ADMIN"],
        Account::Exporter if mariadb => &["BINLOG MONITOR", "PROCESS", "SELECT", "SLAVE MONITOR"],
        Account::Exporter => &["PROCESS", "REPLICATION CLIENT", "SELECT"],
        Account::Backup if mariadb => &[
            "BINLOG MONITOR",
            "CONNECTION ADMIN",
            "EVENT",
            "LOCK TABLES",
            "PROCESS",
            "RELOAD",
            "REPLICATION SLAVE",
            "REPLICATION SLAVE ADMIN",
            "SELECT",
            "SHOW VIEW",
            "SLAVE MONITOR",
            "TRIGGER",
        ],
        Account::Backup => &[
            "BACKUP_ADMIN",
            "EVENT",
            "RELOAD",
            "SELECT",
            "SHOW VIEW",
            "TRIGGER",
            "REPLICATION CLIENT",
            "REPLICATION SLAVE",
            "SERVICE_CONNECTION_ADMIN",
        ],
        Account::ReadOnly if mariadb => &[
            "BINLOG MONITOR",
            "PROCESS",
            "REPLICATION SLAVE",
            "SELECT",
            "SHOW DATABASES",
            "SHOW VIEW",
            "SLAVE MONITOR",
        ],
        Account::ReadOnly => &[
            "PROCESS",
            "REPLICATION CLIENT",
            "REPLICATION SLAVE",
            "SELECT",
            "SHOW DATABASES",
            "SHOW VIEW",
        ],
        // Only what is not data: the data privileges are granted per database
        // ([`MARIADB_WRITABLE_DATA_PRIVILEGES`]), and CREATE USER is withheld (module docs).
        Account::Writable if mariadb => &[
            "BINLOG MONITOR",
            "PROCESS",
            "REPLICATION SLAVE",
            "SHOW DATABASES",
            "SLAVE MONITOR",
        ],
        Account::Writable => &[
            "ALTER",
            "ALTER ROUTINE",
            "CREATE",
            "CREATE ROLE",
            "CREATE ROUTINE",
            "CREATE TEMPORARY TABLES",
            "CREATE USER",
            "CREATE VIEW",
            "DELETE",
            "DROP",
            "DROP ROLE",
            "EVENT",
            "EXECUTE",
            "INDEX",
            "INSERT",
            "LOCK TABLES",
            "PROCESS",
            "REFERENCES",
            "REPLICATION CLIENT",
            "REPLICATION SLAVE",
            "SELECT",
            "SHOW DATABASES",
            "SHOW VIEW",
            "TRIGGER",
            "UPDATE",
        ],
    }
}

/// Privileges MOCO revokes from the writable account on `mysql.*` (MySQL with
/// `partial_revokes`), plus `ALTER` and `ALTER ROUTINE`, which MOCO leaves: nothing of the
/// grant tables is the application's to change.
const WRITABLE_MYSQL_SCHEMA_REVOKES: &str = "ALTER, ALTER ROUTINE, CREATE, CREATE ROUTINE, CREATE TEMPORARY TABLES, CREATE VIEW, DELETE, DROP, EVENT, EXECUTE, INDEX, INSERT, LOCK TABLES, REFERENCES, TRIGGER, UPDATE";

/// MariaDB: the writable account's data privileges, granted on every database (`` `%`.* ``)
/// with GRANT OPTION. The server uses the *first* matching database-level row, and an exact
/// name sorts before a pattern, so the account's `SELECT`-only row on `mysql` shadows this one
/// there (measured on 10.11: every write, DDL and account statement on `mysql` is refused).
pub(super) const MARIADB_WRITABLE_DATA_PRIVILEGES: &[&str] = &[
    "ALTER",
    "ALTER ROUTINE",
    "CREATE",
    "CREATE ROUTINE",
    "CREATE TEMPORARY TABLES",
    "CREATE VIEW",
    "DELETE",
    "DROP",
    "EVENT",
    "EXECUTE",
    "INDEX",
    "INSERT",
    "LOCK TABLES",
    "REFERENCES",
    "SELECT",
    "SHOW VIEW",
    "TRIGGER",
    "UPDATE",
];

/// MySQL's privilege that makes an account a system account: only holders of `SYSTEM_USER`
/// may alter, drop, rename or kill it. Every operator account holds it (the admin through
/// `ALL`), the two application accounts never, so `CREATE USER` in the writable account's
/// hands cannot reach the operator's accounts.
const SYSTEM_USER: &str = "SYSTEM_USER";

/// Creates (or re-keys) `account` at `host` with its grants. Idempotent: `CREATE USER IF NOT
/// EXISTS`, then `ALTER USER … IDENTIFIED BY` (so a cloned copy of another instance's users
/// gets this cluster's passwords), then, for every account but the admin (whose session may
/// be the one running these), `REVOKE ALL` before the grants, so that an account ends with
/// exactly the privileges below whatever an older version granted it.
pub(super) fn account_statements(
    d: Dialect,
    acct: Account,
    password: &str,
    host: &str,
) -> Vec<String> {
    let who = account(acct.name(), host);
    let pw = identified_by(d, password);
    let mysql = d != Dialect::Mariadb;
    let mut out = vec![
        format!("CREATE USER IF NOT EXISTS {who} {pw}"),
        format!("ALTER USER {who} {pw}"),
    ];
    if acct != Account::Admin {
        out.push(format!("REVOKE ALL PRIVILEGES, GRANT OPTION FROM {who}"));
    }
    let mut global: Vec<&str> = privileges(d, acct).to_vec();
    if mysql && acct.is_system() && acct != Account::Admin {
        global.push(SYSTEM_USER);
    }
    // MariaDB's writable account delegates only its per-database grant (below).
    let grant_option = acct == Account::Admin || (acct == Account::Writable && mysql);
    out.push(format!(
        "GRANT {} ON *.* TO {who}{}",
        global.join(", "),
        if grant_option {
            " WITH GRANT OPTION"
        } else {
            ""
        }
    ));
    match (d, acct) {
        (Dialect::Mariadb, Account::Admin) => {
            let role = quote(READ_ONLY_ADMIN_ROLE);
            out.push(format!("REVOKE READ_ONLY ADMIN ON *.* FROM {who}"));
            out.push(format!("CREATE ROLE IF NOT EXISTS {role}"));
            out.push(format!("GRANT READ_ONLY ADMIN ON *.* TO {role}"));
            out.push(format!("GRANT {role} TO {who}"));
            out.push(format!("SET DEFAULT ROLE NONE FOR {who}"));
        }
        (Dialect::Mariadb, Account::Writable) => {
            out.push(format!(
                "GRANT {} ON `%`.* TO {who} WITH GRANT OPTION",
                MARIADB_WRITABLE_DATA_PRIVILEGES.join(", ")
            ));
            out.push(format!("GRANT SELECT ON mysql.* TO {who}"));
        }
        (Dialect::Mysql80 | Dialect::Mysql84, Account::Admin) => {
            out.push(format!("GRANT PROXY ON ''@'' TO {who} WITH GRANT OPTION"));
        }
        (Dialect::Mysql80 | Dialect::Mysql84, Account::Writable) => {
            out.push(format!(
                "REVOKE {WRITABLE_MYSQL_SCHEMA_REVOKES} ON mysql.* FROM {who}"
            ));
        }
        _ => {}
    }
    out
}

/// MySQL plugins MOCO installs (name, library): semi-sync's in the names `names` says, and
/// clone; MariaDB has semi-sync built in and no clone.
pub(super) fn required_plugins(
    d: Dialect,
    names: SemiSyncNames,
) -> Vec<(&'static str, &'static str)> {
    match d {
        Dialect::Mariadb => Vec::new(),
        Dialect::Mysql80 | Dialect::Mysql84 => {
            let mut plugins = names.plugins().to_vec();
            plugins.push(("clone", "mysql_clone.so"));
            plugins
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_32_hex_chars_and_distinct() {
        let p = generate_passwords().unwrap();
        let all: Vec<&str> = Account::ALL.iter().map(|a| p.get(*a)).collect();
        for pw in &all {
            assert_eq!(pw.len(), 32);
            assert!(
                pw.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 8);
        assert_eq!(format!("{p:?}"), "MocoPasswords(<redacted>)");
    }

    #[test]
    fn mariadb_admin_loses_read_only_admin_and_nobody_else_gets_it() {
        let s = account_statements(Dialect::Mariadb, Account::Admin, "pw", "%");
        let hash = super::super::password::native_password_hash("pw");
        assert_eq!(
            s,
            vec![
                format!(
                    "CREATE USER IF NOT EXISTS 'moco-admin'@'%' IDENTIFIED BY PASSWORD '{hash}'"
                ),
                format!("ALTER USER 'moco-admin'@'%' IDENTIFIED BY PASSWORD '{hash}'"),
                "GRANT ALL PRIVILEGES ON *.* TO 'moco-admin'@'%' WITH GRANT OPTION".to_owned(),
                "REVOKE READ_ONLY ADMIN ON *.* FROM 'moco-admin'@'%'".to_owned(),
                "CREATE ROLE IF NOT EXISTS 'moco-read-only-admin'".to_owned(),
                "GRANT READ_ONLY ADMIN ON *.* TO 'moco-read-only-admin'".to_owned(),
                "GRANT 'moco-read-only-admin' TO 'moco-admin'@'%'".to_owned(),
                "SET DEFAULT ROLE NONE FOR 'moco-admin'@'%'".to_owned(),
            ]
        );
        for acct in Account::ALL.into_iter().filter(|a| *a != Account::Admin) {
            let s = account_statements(Dialect::Mariadb, acct, "pw", "%").join(";");
            assert!(
                !s.contains("READ_ONLY") && !s.contains("ROLE"),
                "{acct:?}: {s}"
            );
        }
        for acct in Account::ALL {
            for d in [Dialect::Mariadb, Dialect::Mysql80, Dialect::Mysql84] {
                let privs = privileges(d, acct);
                assert!(!privs.iter().any(|p| p.contains("READ_ONLY")), "{acct:?}");
                if acct != Account::Admin {
                    assert!(!privs.contains(&"ALL PRIVILEGES"), "{acct:?}");
                    assert!(!privs.contains(&"SUPER"), "{acct:?}");
                }
            }
        }
    }

    #[test]
    fn mariadb_uses_its_own_privilege_names() {
        for acct in Account::ALL {
            let privs = privileges(Dialect::Mariadb, acct);
            for mysql_only in [
                "REPLICATION CLIENT",
                "BACKUP_ADMIN",
                "CLONE_ADMIN",
                "SERVICE_CONNECTION_ADMIN",
                "SYSTEM_VARIABLES_ADMIN",
                "BINLOG_ADMIN",
                "CREATE ROLE",
                "DROP ROLE",
            ] {
                assert!(!privs.contains(&mysql_only), "{acct:?} has {mysql_only}");
            }
        }
        assert!(privileges(Dialect::Mariadb, Account::Repl).contains(&"SLAVE MONITOR"));
        assert!(privileges(Dialect::Mariadb, Account::CloneDonor).contains(&"BINLOG MONITOR"));
    }

    #[test]
    fn mysql_grants_are_mocos() {
        let admin = account_statements(Dialect::Mysql84, Account::Admin, "pw", "%");
        assert_eq!(
            admin[2],
            "GRANT ALL PRIVILEGES ON *.* TO 'moco-admin'@'%' WITH GRANT OPTION"
        );
        assert_eq!(
            admin[3],
            "GRANT PROXY ON ''@'' TO 'moco-admin'@'%' WITH GRANT OPTION"
        );
        let writable = account_statements(Dialect::Mysql80, Account::Writable, "pw", "%");
        assert_eq!(
            writable[2],
            "REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'moco-writable'@'%'"
        );
        assert!(writable[3].ends_with("ON *.* TO 'moco-writable'@'%' WITH GRANT OPTION"));
        assert!(writable[3].contains("CREATE ROLE") && writable[3].contains("CREATE USER"));
        assert!(writable[4].starts_with("REVOKE ALTER, ALTER ROUTINE, CREATE, CREATE ROUTINE"));
        assert!(writable[4].ends_with("ON mysql.* FROM 'moco-writable'@'%'"));
        let repl = account_statements(Dialect::Mysql80, Account::Repl, "pw", "%");
        assert_eq!(
            repl[3],
            "GRANT REPLICATION CLIENT, REPLICATION SLAVE, SYSTEM_USER ON *.* TO 'moco-repl'@'%'"
        );
        assert_eq!(
            required_plugins(Dialect::Mysql84, SemiSyncNames::Source),
            [
                ("rpl_semi_sync_source", "semisync_source.so"),
                ("rpl_semi_sync_replica", "semisync_replica.so"),
                ("clone", "mysql_clone.so")
            ]
        );
        assert!(required_plugins(Dialect::Mariadb, SemiSyncNames::Master).is_empty());
    }

    /// The operator's accounts are out of the application's reach: on MySQL every one is a
    /// system account and the end-user accounts are not; on MariaDB the writable account has
    /// no `CREATE USER` and its data privileges stop at the `mysql` schema.
    #[test]
    fn no_application_account_can_reach_the_operators_accounts() {
        for d in [Dialect::Mysql80, Dialect::Mysql84] {
            for acct in Account::ALL {
                let grants = account_statements(d, acct, "pw", "%");
                let global = grants.iter().find(|g| g.starts_with("GRANT ")).unwrap();
                let system =
                    global.contains("SYSTEM_USER") || global.starts_with("GRANT ALL PRIVILEGES");
                assert_eq!(system, acct.is_system(), "{d:?} {acct:?}: {global}");
            }
        }
        let w = account_statements(Dialect::Mariadb, Account::Writable, "pw", "%");
        assert_eq!(
            w[2..],
            [
                "REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'moco-writable'@'%'".to_owned(),
                "GRANT BINLOG MONITOR, PROCESS, REPLICATION SLAVE, SHOW DATABASES, SLAVE MONITOR ON *.* TO 'moco-writable'@'%'".to_owned(),
                format!(
                    "GRANT {} ON `%`.* TO 'moco-writable'@'%' WITH GRANT OPTION",
                    MARIADB_WRITABLE_DATA_PRIVILEGES.join(", ")
                ),
                "GRANT SELECT ON mysql.* TO 'moco-writable'@'%'".to_owned(),
            ]
        );
        for acct in Account::ALL.into_iter().filter(|a| *a != Account::Admin) {
            let privs = privileges(Dialect::Mariadb, acct);
            assert!(!privs.contains(&"CREATE USER"), "{acct:?}");
            for data in ["INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER"] {
                assert!(!privs.contains(&data), "{acct:?} has global {data}");
            }
        }
    }
}
