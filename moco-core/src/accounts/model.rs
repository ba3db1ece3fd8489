//! What an account and a database are, declared and observed, in the words the planner
//! compares: privileges as upper-case names, targets as parsed `on` strings.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// A privilege name as the server lists it: upper case, single spaces (`SELECT`, `CREATE
/// TEMPORARY TABLES`, `GRANT OPTION`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Privilege(String);

impl Privilege {
    /// `GRANT OPTION`: granted with `WITH GRANT OPTION`, revoked as a privilege.
    pub const GRANT_OPTION: &'static str = "GRANT OPTION";

    /// Normalises `text` (case, runs of white space); `None` for an empty name.
    pub fn new(text: &str) -> Option<Privilege> {
        let words: Vec<String> = text.split_whitespace().map(str::to_uppercase).collect();
        (!words.is_empty()).then(|| Privilege(words.join(" ")))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `GRANT OPTION`.
    pub fn is_grant_option(&self) -> bool {
        self.0 == Self::GRANT_OPTION
    }

    /// Whether this is `ALL` or `ALL PRIVILEGES`, which the server expands at grant time.
    pub fn is_all(&self) -> bool {
        self.0 == "ALL" || self.0 == "ALL PRIVILEGES"
    }
}

/// `privileges` as a GRANT lists them: `INSERT, SELECT`.
pub fn privilege_list(privileges: &BTreeSet<Privilege>) -> String {
    privileges
        .iter()
        .map(Privilege::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Privilege {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a grant applies to: the `on` of `GRANT … ON on TO …`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GrantTarget {
    /// `*.*`.
    Global,
    /// `db.*`.
    Database(String),
    /// `db.table`.
    Table(String, String),
}

impl GrantTarget {
    /// The level whose privilege list applies.
    pub fn level(&self) -> GrantLevel {
        match self {
            GrantTarget::Global => GrantLevel::Global,
            GrantTarget::Database(_) => GrantLevel::Database,
            GrantTarget::Table(..) => GrantLevel::Table,
        }
    }
}

impl fmt::Display for GrantTarget {
    /// As SQL, identifiers in backticks (a backtick doubled): `*.*`, `` `db`.* ``,
    /// `` `db`.`t` ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantTarget::Global => f.write_str("*.*"),
            GrantTarget::Database(db) => write!(f, "{}.*", quote_identifier(db)),
            GrantTarget::Table(db, table) => {
                write!(f, "{}.{}", quote_identifier(db), quote_identifier(table))
            }
        }
    }
}

/// The three levels of privileges the server keeps apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GrantLevel {
    /// Server-wide.
    Global,
    /// One schema.
    Database,
    /// One table.
    Table,
}

/// `name` as a backtick-quoted identifier.
pub fn quote_identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Privileges by target.
pub type Grants = BTreeMap<GrantTarget, BTreeSet<Privilege>>;

/// An account as declared (a MySQLUser's spec, the password aside: the planner never sees
/// it).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AccountSpec {
    /// The user name.
    pub name: String,
    /// The host pattern.
    pub host: String,
    /// What it may do, `ALL` already expanded by the caller to the level's privileges (the
    /// server lists them one by one, and only it knows its list).
    pub grants: Grants,
    /// `REQUIRE SSL`.
    pub require_tls: bool,
    /// `MAX_USER_CONNECTIONS` (0: no limit).
    pub max_user_connections: u32,
}

/// Which kind of stored routine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RoutineKind {
    /// `PROCEDURE`.
    Procedure,
    /// `FUNCTION`.
    Function,
}

impl RoutineKind {
    /// As SQL: `PROCEDURE`, `FUNCTION`.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutineKind::Procedure => "PROCEDURE",
            RoutineKind::Function => "FUNCTION",
        }
    }
}

/// What an account may hold that a declaration cannot say (a MySQLUser declares privileges
/// on `*.*`, databases and tables only). Each one found is revoked: an account declared is
/// the declaration, whatever it held before.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UndeclaredGrant {
    /// A role granted to the account, as SQL (MariaDB `'role'`, MySQL `'role'@'host'`).
    Role(String),
    /// `PROXY` on another account.
    Proxy {
        /// The proxied account's user name.
        user: String,
        /// Its host.
        host: String,
    },
    /// Privileges on a stored routine.
    Routine {
        /// Procedure or function.
        kind: RoutineKind,
        /// Its database.
        database: String,
        /// Its name.
        name: String,
        /// `EXECUTE`, `ALTER ROUTINE`, `GRANT OPTION`.
        privileges: BTreeSet<Privilege>,
    },
    /// Privileges on one column of a table.
    Column {
        /// The table's database.
        database: String,
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// `SELECT`, `INSERT`, `UPDATE`, `REFERENCES`.
        privileges: BTreeSet<Privilege>,
    },
}

impl fmt::Display for UndeclaredGrant {
    /// In words, for events: `role 'r'`, `PROXY on 'u'@'h'`, `EXECUTE on PROCEDURE
    /// `db`.`p``, `SELECT on column `c` of `db`.`t``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = privilege_list;
        match self {
            UndeclaredGrant::Role(role) => write!(f, "role {role}"),
            UndeclaredGrant::Proxy { user, host } => write!(f, "PROXY on '{user}'@'{host}'"),
            UndeclaredGrant::Routine {
                kind,
                database,
                name,
                privileges,
            } => write!(
                f,
                "{} on {} {}.{}",
                list(privileges),
                kind.as_str(),
                quote_identifier(database),
                quote_identifier(name)
            ),
            UndeclaredGrant::Column {
                database,
                table,
                column,
                privileges,
            } => write!(
                f,
                "{} on column {} of {}.{}",
                list(privileges),
                quote_identifier(column),
                quote_identifier(database),
                quote_identifier(table)
            ),
        }
    }
}

/// An account as the server holds it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ObservedAccount {
    /// What it may do (`USAGE`, the absence of privileges, is not listed).
    pub grants: Grants,
    /// What it holds that a declaration cannot say: roles, proxies, routine and column
    /// privileges (all revoked).
    pub undeclared: BTreeSet<UndeclaredGrant>,
    /// `ssl_type` is not empty.
    pub require_tls: bool,
    /// `max_user_connections`.
    pub max_user_connections: u32,
    /// Whether the server's stored password is the declared one, when that can be told from
    /// the server's hash (`None`: it cannot, and only a new Secret sets it again).
    pub password_matches: Option<bool>,
}

/// A database as declared.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DatabaseSpec {
    /// Its name.
    pub name: String,
    /// `CHARACTER SET`, when declared.
    pub character_set: Option<String>,
    /// `COLLATE`, when declared.
    pub collation: Option<String>,
}

/// A database as the server holds it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ObservedDatabase {
    /// `DEFAULT_CHARACTER_SET_NAME`.
    pub character_set: String,
    /// `DEFAULT_COLLATION_NAME`.
    pub collation: String,
}
