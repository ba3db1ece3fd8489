//! The privileges admission knows: the static privileges of MySQL 8.0/8.4 and MariaDB
//! 10.x/11, MySQL's dynamic privileges and MariaDB's named ones.
//!
//! Each has the most specific level it may be granted at and what it lets an account do.
//! Admission refuses, without `allowPrivilegedGrants`, what would let an application account
//! reach MOCO's accounts ([`KnownPrivilege::administrative`] on `*.*`) or edit the grant
//! tables ([`KnownPrivilege::writes`] on `*.*` or on the `mysql` schema: MariaDB has no
//! partial revokes, so a privilege on `*.*` covers `mysql`). A word of privilege syntax this
//! table does not know is left to the server on a database or table (which answers with the
//! `UnknownPrivilege` reason), but refused on `*.*`: a dynamic privilege of a newer server
//! could be an administrative one.

/// The most specific level a privilege may be granted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Only `*.*`.
    Global,
    /// `*.*` or `db.*`.
    Database,
    /// `*.*`, `db.*` or `db.table`.
    Table,
}

/// Which servers know a privilege.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Servers {
    /// MySQL and MariaDB.
    Both,
    /// MySQL only.
    Mysql,
    /// MariaDB only.
    Mariadb,
}

/// One known privilege.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownPrivilege {
    /// The canonical name, as `SHOW GRANTS` prints it.
    pub name: &'static str,
    /// Other names of the same privilege.
    pub aliases: &'static [&'static str],
    /// The most specific level it may be granted at.
    pub level: Level,
    /// Creates, changes or removes data or schema objects where granted (on `mysql`'s tables:
    /// the accounts).
    pub writes: bool,
    /// On `*.*`: manages accounts, roles, the server or replication, sets other definers, or
    /// bypasses `read_only` or the binary log — what the operator alone may do.
    pub administrative: bool,
    /// Which servers know it.
    pub servers: Servers,
}

const fn p(
    name: &'static str,
    level: Level,
    writes: bool,
    administrative: bool,
    servers: Servers,
) -> KnownPrivilege {
    KnownPrivilege {
        name,
        aliases: &[],
        level,
        writes,
        administrative,
        servers,
    }
}

const fn alias(mut privilege: KnownPrivilege, aliases: &'static [&'static str]) -> KnownPrivilege {
    privilege.aliases = aliases;
    privilege
}

use Level::{Database, Global, Table};
use Servers::{Both, Mariadb, Mysql};

/// Reads data (or nothing).
const R: bool = false;
/// Writes data or schema objects.
const W: bool = true;
/// Not administrative.
const N: bool = false;
/// Administrative on `*.*`.
const A: bool = true;

/// Every privilege admission knows.
pub const KNOWN: &[KnownPrivilege] = &[
    // Static privileges of both flavours.
    alias(p("ALL PRIVILEGES", Table, W, A, Both), &["ALL"]),
    p("ALTER", Table, W, N, Both),
    p("ALTER ROUTINE", Database, W, N, Both),
    p("CREATE", Table, W, N, Both),
    p("CREATE ROUTINE", Database, W, N, Both),
    p("CREATE TABLESPACE", Global, W, A, Both),
    p("CREATE TEMPORARY TABLES", Database, W, N, Both),
    p("CREATE USER", Global, W, A, Both),
    p("CREATE VIEW", Table, W, N, Both),
    p("DELETE", Table, W, N, Both),
    p("DROP", Table, W, N, Both),
    p("EVENT", Database, W, N, Both),
    p("EXECUTE", Database, R, N, Both),
    p("FILE", Global, W, A, Both),
    p("GRANT OPTION", Table, R, A, Both),
    p("INDEX", Table, W, N, Both),
    p("INSERT", Table, W, N, Both),
    p("LOCK TABLES", Database, W, N, Both),
    p("PROCESS", Global, R, N, Both),
    p("REFERENCES", Table, W, N, Both),
    p("RELOAD", Global, W, A, Both),
    p("REPLICATION CLIENT", Global, R, N, Both),
    alias(
        p("REPLICATION SLAVE", Global, R, N, Both),
        &["REPLICATION REPLICA"],
    ),
    p("SELECT", Table, R, N, Both),
    p("SHOW DATABASES", Global, R, N, Both),
    p("SHOW VIEW", Table, R, N, Both),
    p("SHUTDOWN", Global, W, A, Both),
    p("SUPER", Global, W, A, Both),
    p("TRIGGER", Table, W, N, Both),
    p("UPDATE", Table, W, N, Both),
    p("USAGE", Table, R, N, Both),
    // MySQL's static role privileges.
    p("CREATE ROLE", Global, W, A, Mysql),
    p("DROP ROLE", Global, W, A, Mysql),
    // MariaDB's named privileges (10.5+; SHOW CREATE ROUTINE 11.3+).
    p("BINLOG ADMIN", Global, W, A, Mariadb),
    p("BINLOG MONITOR", Global, R, N, Mariadb),
    p("BINLOG REPLAY", Global, W, A, Mariadb),
    p("CONNECTION ADMIN", Global, W, A, Mariadb),
    alias(
        p("DELETE HISTORY", Table, W, N, Mariadb),
        &["DELETE VERSIONING ROWS"],
    ),
    p("FEDERATED ADMIN", Global, W, A, Mariadb),
    p("READ_ONLY ADMIN", Global, W, A, Mariadb),
    p("REPLICATION MASTER ADMIN", Global, W, A, Mariadb),
    p("REPLICATION SLAVE ADMIN", Global, W, A, Mariadb),
    p("SET USER", Global, W, A, Mariadb),
    p("SHOW CREATE ROUTINE", Database, R, N, Mariadb),
    alias(
        p("SLAVE MONITOR", Global, R, N, Mariadb),
        &["REPLICA MONITOR"],
    ),
    // MySQL's dynamic privileges (always global).
    p("ALLOW_NONEXISTENT_DEFINER", Global, W, A, Mysql),
    p("APPLICATION_PASSWORD_ADMIN", Global, R, N, Mysql),
    p("AUDIT_ABORT_EXEMPT", Global, W, A, Mysql),
    p("AUDIT_ADMIN", Global, W, A, Mysql),
    p("AUTHENTICATION_POLICY_ADMIN", Global, W, A, Mysql),
    p("BACKUP_ADMIN", Global, W, A, Mysql),
    p("BINLOG_ADMIN", Global, W, A, Mysql),
    p("BINLOG_ENCRYPTION_ADMIN", Global, W, A, Mysql),
    p("CLONE_ADMIN", Global, W, A, Mysql),
    p("CONNECTION_ADMIN", Global, W, A, Mysql),
    p("ENCRYPTION_KEY_ADMIN", Global, W, A, Mysql),
    p("FIREWALL_ADMIN", Global, W, A, Mysql),
    p("FIREWALL_EXEMPT", Global, W, A, Mysql),
    p("FIREWALL_USER", Global, W, A, Mysql),
    p("FLUSH_OPTIMIZER_COSTS", Global, R, N, Mysql),
    p("FLUSH_PRIVILEGES", Global, R, N, Mysql),
    p("FLUSH_STATUS", Global, R, N, Mysql),
    p("FLUSH_TABLES", Global, R, N, Mysql),
    p("FLUSH_USER_RESOURCES", Global, R, N, Mysql),
    p("GROUP_REPLICATION_ADMIN", Global, W, A, Mysql),
    p("GROUP_REPLICATION_STREAM", Global, W, A, Mysql),
    p("INNODB_REDO_LOG_ARCHIVE", Global, W, A, Mysql),
    p("INNODB_REDO_LOG_ENABLE", Global, W, A, Mysql),
    p("MASKING_DICTIONARIES_ADMIN", Global, W, A, Mysql),
    p("NDB_STORED_USER", Global, W, A, Mysql),
    p("OPTIMIZE_LOCAL_TABLE", Global, R, N, Mysql),
    p("PASSWORDLESS_USER_ADMIN", Global, W, A, Mysql),
    p("PERSIST_RO_VARIABLES_ADMIN", Global, W, A, Mysql),
    p("REPLICATION_APPLIER", Global, W, A, Mysql),
    p("REPLICATION_SLAVE_ADMIN", Global, W, A, Mysql),
    p("RESOURCE_GROUP_ADMIN", Global, W, A, Mysql),
    p("RESOURCE_GROUP_USER", Global, R, N, Mysql),
    p("ROLE_ADMIN", Global, W, A, Mysql),
    p("SENSITIVE_VARIABLES_OBSERVER", Global, R, A, Mysql),
    p("SERVICE_CONNECTION_ADMIN", Global, W, A, Mysql),
    p("SESSION_VARIABLES_ADMIN", Global, W, A, Mysql),
    p("SET_ANY_DEFINER", Global, W, A, Mysql),
    p("SET_USER_ID", Global, W, A, Mysql),
    p("SHOW_ROUTINE", Global, R, N, Mysql),
    p("SKIP_QUERY_REWRITE", Global, R, N, Mysql),
    p("SYSTEM_USER", Global, W, A, Mysql),
    p("SYSTEM_VARIABLES_ADMIN", Global, W, A, Mysql),
    p("TABLE_ENCRYPTION_ADMIN", Global, W, A, Mysql),
    p("TELEMETRY_LOG_ADMIN", Global, W, A, Mysql),
    p("TP_CONNECTION_ADMIN", Global, W, A, Mysql),
    p("TRANSACTION_GTID_TAG", Global, W, A, Mysql),
    p("VERSION_TOKEN_ADMIN", Global, W, A, Mysql),
    p("XA_RECOVER_ADMIN", Global, W, A, Mysql),
];

/// Longest privilege text accepted (MySQL's dynamic privilege names are at most 32
/// characters; MariaDB's longest static name is 24).
pub const MAX_PRIVILEGE_LENGTH: usize = 64;

/// Why a text is not a privilege.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrivilegeSyntaxError {
    /// Empty text.
    #[error("must not be empty")]
    Empty,
    /// Longer than [`MAX_PRIVILEGE_LENGTH`].
    #[error("is {length} characters long, at most {MAX_PRIVILEGE_LENGTH}")]
    TooLong {
        /// Its length in characters.
        length: usize,
    },
    /// A column list, `SELECT (a, b)`.
    #[error(
        "column privileges (a privilege followed by a column list) are not supported: grant \
         the privilege on the table"
    )]
    ColumnList,
    /// Not words of letters, digits and underscores separated by single spaces.
    #[error(
        "{0:?} is not privilege syntax: one or more words of letters, digits and underscores, \
         separated by single spaces (e.g. SELECT, CREATE TEMPORARY TABLES, BINLOG_ADMIN)"
    )]
    Syntax(String),
}

/// The privilege as written in the canonical form admission compares and the controller
/// grants: upper case, its canonical name when it is an alias (`ALL` → `ALL PRIVILEGES`).
pub fn canonical(text: &str) -> Result<String, PrivilegeSyntaxError> {
    if text.is_empty() {
        return Err(PrivilegeSyntaxError::Empty);
    }
    let length = text.chars().count();
    if length > MAX_PRIVILEGE_LENGTH {
        return Err(PrivilegeSyntaxError::TooLong { length });
    }
    if text.contains('(') {
        return Err(PrivilegeSyntaxError::ColumnList);
    }
    let word_ok = |w: &str| {
        let mut chars = w.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !text.split(' ').all(word_ok) {
        return Err(PrivilegeSyntaxError::Syntax(text.to_owned()));
    }
    let upper = text.to_ascii_uppercase();
    Ok(match lookup(&upper) {
        Some(known) => known.name.to_owned(),
        None => upper,
    })
}

/// The known privilege of a name or alias, in any case.
pub fn lookup(name: &str) -> Option<&'static KnownPrivilege> {
    KNOWN.iter().find(|k| {
        k.name.eq_ignore_ascii_case(name) || k.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_canonical_and_of_valid_syntax() {
        let mut seen = std::collections::BTreeSet::new();
        for k in KNOWN {
            for name in std::iter::once(&k.name).chain(k.aliases) {
                assert!(seen.insert(*name), "{name} twice");
                assert_eq!(canonical(name).as_deref(), Ok(k.name), "{name}");
                assert_eq!(name.to_ascii_uppercase(), *name);
            }
        }
    }

    #[test]
    fn canonical_upper_cases_and_resolves_aliases() {
        assert_eq!(canonical("select").as_deref(), Ok("SELECT"));
        assert_eq!(canonical("all").as_deref(), Ok("ALL PRIVILEGES"));
        assert_eq!(canonical("Replica Monitor").as_deref(), Ok("SLAVE MONITOR"));
        assert_eq!(
            canonical("delete versioning rows").as_deref(),
            Ok("DELETE HISTORY")
        );
        // Unknown words of privilege syntax pass, upper-cased: the server decides.
        assert_eq!(
            canonical("some_future_admin").as_deref(),
            Ok("SOME_FUTURE_ADMIN")
        );
    }

    #[test]
    fn canonical_refuses_what_is_not_privilege_syntax() {
        assert_eq!(canonical(""), Err(PrivilegeSyntaxError::Empty));
        assert_eq!(
            canonical("SELECT (a)"),
            Err(PrivilegeSyntaxError::ColumnList)
        );
        for bad in [
            " SELECT",
            "SELECT ",
            "CREATE  USER",
            "CREATE\tUSER",
            "SELECT,INSERT",
            "SELECT; DROP TABLE t",
            "1SELECT",
            "SEL-ECT",
            "SELÉCT",
            "`SELECT`",
            "'SELECT'",
        ] {
            assert_eq!(
                canonical(bad),
                Err(PrivilegeSyntaxError::Syntax(bad.to_owned())),
                "{bad:?}"
            );
        }
        let long = "A".repeat(MAX_PRIVILEGE_LENGTH + 1);
        assert_eq!(
            canonical(&long),
            Err(PrivilegeSyntaxError::TooLong {
                length: MAX_PRIVILEGE_LENGTH + 1
            })
        );
        assert!(canonical(&"A".repeat(MAX_PRIVILEGE_LENGTH)).is_ok());
    }

    #[test]
    fn the_privileges_that_manage_accounts_or_bypass_read_only_are_administrative() {
        for name in [
            "ALL",
            "ALL PRIVILEGES",
            "GRANT OPTION",
            "CREATE USER",
            "SUPER",
            "CREATE ROLE",
            "DROP ROLE",
            "SYSTEM_USER",
            "ROLE_ADMIN",
            "CONNECTION_ADMIN",
            "SYSTEM_VARIABLES_ADMIN",
            "SESSION_VARIABLES_ADMIN",
            "SET_USER_ID",
            "SET_ANY_DEFINER",
            "BINLOG_ADMIN",
            "REPLICATION_SLAVE_ADMIN",
            "TRANSACTION_GTID_TAG",
            "READ_ONLY ADMIN",
            "BINLOG ADMIN",
            "BINLOG REPLAY",
            "CONNECTION ADMIN",
            "REPLICATION SLAVE ADMIN",
            "REPLICATION MASTER ADMIN",
            "SET USER",
            "RELOAD",
            "SHUTDOWN",
            "FILE",
        ] {
            assert!(lookup(name).is_some_and(|k| k.administrative), "{name}");
        }
        for name in [
            "SELECT",
            "INSERT",
            "PROCESS",
            "REPLICATION CLIENT",
            "SHOW DATABASES",
            "SLAVE MONITOR",
            "BINLOG MONITOR",
        ] {
            assert!(lookup(name).is_some_and(|k| !k.administrative), "{name}");
        }
    }

    #[test]
    fn levels_and_writes() {
        let level = |n: &str| lookup(n).map(|k| k.level);
        assert_eq!(level("SELECT"), Some(Level::Table));
        assert_eq!(level("EXECUTE"), Some(Level::Database));
        assert_eq!(level("LOCK TABLES"), Some(Level::Database));
        assert_eq!(level("PROCESS"), Some(Level::Global));
        assert_eq!(level("BINLOG_ADMIN"), Some(Level::Global));
        let writes = |n: &str| lookup(n).map(|k| k.writes);
        for w in [
            "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX", "TRIGGER",
        ] {
            assert_eq!(writes(w), Some(true), "{w}");
        }
        for r in ["SELECT", "SHOW VIEW", "USAGE", "EXECUTE"] {
            assert_eq!(writes(r), Some(false), "{r}");
        }
        assert_eq!(lookup("NO_SUCH_PRIVILEGE"), None);
    }
}
