//! The admission rules of MySQLUser and MySQLDatabase as pure functions. Every error names its
//! field by its JSON path (`spec.grants[1].privileges[0]`) and says what is wrong.
//!
//! On UPDATE only the immutable fields are checked when the spec did not change, so that an
//! object admitted by an earlier, more lenient version can still have its finalizer removed
//! and be deleted.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use moco_core::validate::MAX_CLUSTER_NAME_LENGTH;

use super::database::MySQLDatabase;
use super::privileges::{self, Level, PrivilegeSyntaxError};
use super::target::{
    GrantTarget, IdentifierError, SYSTEM_SCHEMAS, TargetError, check_identifier, parse_target,
};
use super::user::{Grant, MySQLUser};
use super::{MOCO_ACCOUNTS, SYSTEM_ACCOUNTS};

/// Longest account user name: MySQL's 32 (MariaDB takes 128 since 10.6, 80 before).
pub const MAX_USER_NAME_LENGTH: usize = 32;
/// Longest host part: 255 on MySQL 8.0.17+ and MariaDB 10.6+.
pub const MAX_HOST_LENGTH: usize = 255;
/// Longest character set or collation name.
pub const MAX_CHARSET_NAME_LENGTH: usize = 64;
/// The prefix of MySQL 5.0's encoded names, which MariaDB still decodes.
pub const MYSQL50_PREFIX: &str = "#mysql50#";
/// Most grants of one MySQLUser. Admission's work grows with the object, and the webhook
/// shares the controller's process with every cluster's manager: bounded lists (here and in
/// the CRD's schema) keep a hostile object cheap to refuse.
pub const MAX_GRANTS: usize = 256;
/// Most privileges of one grant: more than the servers have (MySQL 9 lists about 90).
pub const MAX_PRIVILEGES_PER_GRANT: usize = 128;
/// Longest `on`: two identifiers of 64 characters, each backticked with every backtick
/// doubled, and the dot.
pub const MAX_ON_LENGTH: usize = 2 * (2 * 64 + 2) + 1;
/// The prefix of MOCO's account names, reserved for the operator's accounts (those of today
/// and any a later version adds).
pub const MOCO_ACCOUNT_PREFIX: &str = "moco-";

/// One refused field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    /// The field's JSON path, e.g. `spec.grants[1].privileges[0]`.
    pub field: String,
    /// What is wrong with it.
    pub problem: Problem,
}

impl FieldError {
    fn new(field: impl Into<String>, problem: Problem) -> Self {
        FieldError {
            field: field.into(),
            problem,
        }
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// Empty text or list.
    #[error("must not be empty")]
    Empty,
    /// Longer than allowed.
    #[error("{value:?} is {length} characters long, at most {max}: {why}")]
    TooLong {
        /// The value.
        value: String,
        /// Its length in characters.
        length: usize,
        /// The limit.
        max: usize,
        /// Where the limit comes from.
        why: &'static str,
    },
    /// A character that is refused.
    #[error("{value:?} contains {character:?}: {why}")]
    Character {
        /// The value.
        value: String,
        /// The character.
        character: char,
        /// Why it is refused.
        why: &'static str,
    },
    /// Not a Kubernetes object name or Secret key.
    #[error("{value:?} is not {what}")]
    ObjectName {
        /// The value.
        value: String,
        /// What it should be.
        what: &'static str,
    },
    /// One of MOCO's own accounts.
    #[error(
        "{0:?} is one of MOCO's own accounts: the operator creates it and holds its password, \
         and would lose its way into the cluster if it changed"
    )]
    MocoAccount(String),
    /// A built-in account or role of the server.
    #[error("{0:?} is a built-in account or role of the server")]
    SystemAccount(String),
    /// A name in the prefix of MOCO's accounts.
    #[error(
        "{0:?} begins with \"moco-\", which is reserved for the operator's own accounts \
         (those of today and any a later version adds)"
    )]
    MocoPrefix(String),
    /// A list longer than allowed.
    #[error("{length} items, at most {max}: {why}")]
    TooMany {
        /// The list's length.
        length: usize,
        /// The limit.
        max: usize,
        /// Where the limit comes from.
        why: &'static str,
    },
    /// `address/bits` instead of `address/netmask`.
    #[error(
        "{0:?}: the CIDR form is not taken by MariaDB; write the netmask form, e.g. \
         10.0.0.0/255.0.0.0"
    )]
    CidrHost(String),
    /// A broken `address/netmask` form or IPv6 address.
    #[error("{value:?}: {why}")]
    HostAddress {
        /// The value.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Not privilege syntax.
    #[error(transparent)]
    PrivilegeSyntax(#[from] PrivilegeSyntaxError),
    /// `PROXY`, which is granted on an account.
    #[error("PROXY is granted on an account, not on a database or table: not supported")]
    Proxy,
    /// `ALL PRIVILEGES` with other privileges than `GRANT OPTION`.
    #[error(
        "ALL PRIVILEGES already holds every privilege of its level: list it alone (or with GRANT OPTION)"
    )]
    AllWithOthers,
    /// The same privilege twice in a grant.
    #[error("{privilege} is already listed as {first}")]
    DuplicatePrivilege {
        /// The canonical privilege.
        privilege: String,
        /// The path of its first occurrence.
        first: String,
    },
    /// A global privilege on a database or table.
    #[error("{privilege} is a global privilege: grant it on *.*")]
    GlobalOnly {
        /// The canonical privilege.
        privilege: String,
    },
    /// A database-level privilege on a table.
    #[error("{privilege} is granted on a database (db.*) or *.*, not on a table")]
    NotOnTable {
        /// The canonical privilege.
        privilege: String,
    },
    /// An administrative privilege on `*.*`.
    #[error(
        "{privilege} on *.* would let the account manage accounts (MOCO's among them), the \
         server or replication, or bypass read-only; set spec.allowPrivilegedGrants: true to \
         grant it anyway"
    )]
    Administrative {
        /// The canonical privilege.
        privilege: String,
    },
    /// A privilege on `*.*` that reads past table grants.
    #[error(
        "{privilege} on *.* reads what table grants do not limit (the binary log: every \
         database's changes; or every session's statements); set spec.allowPrivilegedGrants: \
         true to grant it anyway"
    )]
    ReadsPastGrants {
        /// The canonical privilege.
        privilege: String,
    },
    /// A write privilege (or GRANT OPTION) that reaches a schema of the server itself.
    #[error(
        "{privilege} on {on} would let the account change a schema of the server itself (the \
         grant tables of mysql hold MOCO's accounts; *.* covers every schema, MariaDB has no \
         partial revokes); grant it on the databases it needs, or set \
         spec.allowPrivilegedGrants: true"
    )]
    WritesSystemSchema {
        /// The canonical privilege.
        privilege: String,
        /// The canonical `on`.
        on: String,
    },
    /// A privilege unknown to moco-rs on `*.*`.
    #[error(
        "{privilege} is not a privilege moco-rs knows, and on *.* an unknown (newer) privilege \
         could be an administrative one; set spec.allowPrivilegedGrants: true to grant it anyway"
    )]
    UnknownOnGlobal {
        /// The canonical privilege.
        privilege: String,
    },
    /// A broken `on`.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The same `on` in two grants.
    #[error("{on} is already granted by {first}: list all its privileges there")]
    DuplicateTarget {
        /// The canonical `on`.
        on: String,
        /// The path of the first grant's `on`.
        first: String,
    },
    /// A broken database name.
    #[error(transparent)]
    Identifier(#[from] IdentifierError),
    /// A schema of the server itself.
    #[error("{0:?} is a schema of the server itself")]
    SystemSchema(String),
    /// MariaDB's prefix of encoded names.
    #[error("{0:?}: names beginning with #mysql50# are decoded by MariaDB as MySQL 5.0 file names")]
    Mysql50Name(String),
    /// Not a character set or collation name.
    #[error("{0:?} is not a character set or collation name: letters, digits and underscores")]
    CharsetName(String),
    /// A collation of another character set.
    #[error("collation {collation:?} is not of character set {character_set:?}")]
    CollationMismatch {
        /// The collation.
        collation: String,
        /// The character set.
        character_set: String,
    },
    /// A change of an immutable field.
    #[error("is immutable: {old:?} cannot become {new:?}; declare another object instead")]
    Immutable {
        /// The value before.
        old: String,
        /// The value asked for.
        new: String,
    },
}

/// Most errors a refusal lists: a message stays readable (and small) whatever the object.
pub const MAX_LISTED_ERRORS: usize = 20;

/// The errors as one message, `field: problem; …`, at most [`MAX_LISTED_ERRORS`] of them and
/// how many more there are.
pub fn summary(errors: &[FieldError]) -> String {
    let mut lines: Vec<String> = errors
        .iter()
        .take(MAX_LISTED_ERRORS)
        .map(ToString::to_string)
        .collect();
    if errors.len() > MAX_LISTED_ERRORS {
        lines.push(format!("and {} more", errors.len() - MAX_LISTED_ERRORS));
    }
    lines.join("; ")
}

/// Every rule of a MySQLUser (CREATE).
pub fn validate_user(user: &MySQLUser) -> Vec<FieldError> {
    let spec = &user.spec;
    let mut errors = Vec::new();
    check_cluster_name(&spec.cluster_name, &mut errors);
    if let Err(problem) = check_account_name(user.account_name()) {
        errors.push(FieldError::new(name_field(spec.name.is_some()), problem));
    }
    if let Err(problem) = check_host(&spec.host) {
        errors.push(FieldError::new("spec.host", problem));
    }
    let secret = &spec.password_secret_key_ref;
    if let Err(problem) = check_object_name(&secret.name) {
        errors.push(FieldError::new("spec.passwordSecretKeyRef.name", problem));
    }
    if let Err(problem) = check_secret_key(&secret.key) {
        errors.push(FieldError::new("spec.passwordSecretKeyRef.key", problem));
    }
    errors.extend(check_grants(&spec.grants, spec.allow_privileged_grants));
    errors
}

/// The rules of a MySQLUser UPDATE: `name`, `clusterName` and `host` unchanged, and every rule
/// of CREATE when the spec changed.
pub fn validate_user_update(new: &MySQLUser, old: &MySQLUser) -> Vec<FieldError> {
    let mut errors = Vec::new();
    immutable(
        name_field(new.spec.name.is_some()),
        old.account_name(),
        new.account_name(),
        &mut errors,
    );
    immutable(
        "spec.clusterName",
        &old.spec.cluster_name,
        &new.spec.cluster_name,
        &mut errors,
    );
    immutable("spec.host", &old.spec.host, &new.spec.host, &mut errors);
    if new.spec != old.spec {
        errors.extend(validate_user(new));
    }
    errors
}

/// Every rule of a MySQLDatabase (CREATE).
pub fn validate_database(database: &MySQLDatabase) -> Vec<FieldError> {
    let spec = &database.spec;
    let mut errors = Vec::new();
    check_cluster_name(&spec.cluster_name, &mut errors);
    if let Err(problem) = check_database_name(database.database_name()) {
        errors.push(FieldError::new(name_field(spec.name.is_some()), problem));
    }
    let charset_ok = match check_charset_name(&spec.character_set) {
        Ok(()) => true,
        Err(problem) => {
            errors.push(FieldError::new("spec.characterSet", problem));
            false
        }
    };
    if let Some(collation) = &spec.collation {
        match check_charset_name(collation) {
            Err(problem) => errors.push(FieldError::new("spec.collation", problem)),
            Ok(()) if charset_ok => {
                if let Err(problem) = check_collation_of(collation, &spec.character_set) {
                    errors.push(FieldError::new("spec.collation", problem));
                }
            }
            Ok(()) => {}
        }
    }
    errors
}

/// The rules of a MySQLDatabase UPDATE: `name` and `clusterName` unchanged, and every rule of
/// CREATE when the spec changed.
pub fn validate_database_update(new: &MySQLDatabase, old: &MySQLDatabase) -> Vec<FieldError> {
    let mut errors = Vec::new();
    immutable(
        name_field(new.spec.name.is_some()),
        old.database_name(),
        new.database_name(),
        &mut errors,
    );
    immutable(
        "spec.clusterName",
        &old.spec.cluster_name,
        &new.spec.cluster_name,
        &mut errors,
    );
    if new.spec != old.spec {
        errors.extend(validate_database(new));
    }
    errors
}

/// `spec.name` when set, else `metadata.name` (the default it came from).
fn name_field(set: bool) -> &'static str {
    if set { "spec.name" } else { "metadata.name" }
}

fn immutable(field: &str, old: &str, new: &str, errors: &mut Vec<FieldError>) {
    if old != new {
        errors.push(FieldError::new(
            field,
            Problem::Immutable {
                old: old.to_owned(),
                new: new.to_owned(),
            },
        ));
    }
}

fn check_cluster_name(name: &str, errors: &mut Vec<FieldError>) {
    let problem = match check_object_name(name) {
        Err(problem) => problem,
        Ok(()) if name.chars().count() > MAX_CLUSTER_NAME_LENGTH => Problem::TooLong {
            value: name.to_owned(),
            length: name.chars().count(),
            max: MAX_CLUSTER_NAME_LENGTH,
            why: "no MySQLCluster has a longer name",
        },
        Ok(()) => return,
    };
    errors.push(FieldError::new("spec.clusterName", problem));
}

/// A Kubernetes object name (DNS-1123 subdomain): lower-case letters, digits, `-` and `.`,
/// beginning and ending with a letter or digit, at most 253 characters.
pub fn check_object_name(name: &str) -> Result<(), Problem> {
    if name.is_empty() {
        return Err(Problem::Empty);
    }
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
            && bytes.iter().all(|b| alnum(b) || *b == b'-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(Problem::ObjectName {
            value: name.to_owned(),
            what: "a Kubernetes object name (lower-case letters, digits, '-' and '.', beginning \
                   and ending with a letter or digit, at most 253 characters)",
        });
    }
    Ok(())
}

/// A key of a Secret's data: letters, digits, `-`, `_` and `.`, at most 253 characters.
pub fn check_secret_key(key: &str) -> Result<(), Problem> {
    if key.is_empty() {
        return Err(Problem::Empty);
    }
    if key.len() > 253
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(Problem::ObjectName {
            value: key.to_owned(),
            what: "a Secret key (letters, digits, '-', '_' and '.', at most 253 characters)",
        });
    }
    Ok(())
}

/// An account's user name: 1 to 32 printable characters of the Basic Multilingual Plane,
/// without white space, quotes, backticks, backslashes or `@` (which would read as the host
/// part); none of MOCO's accounts or the server's own.
pub fn check_account_name(name: &str) -> Result<(), Problem> {
    if name.is_empty() {
        return Err(Problem::Empty);
    }
    for character in name.chars() {
        let why = if character.is_control() || character.is_whitespace() {
            "control characters and white space are refused in account names"
        } else if matches!(character, '\'' | '"' | '`' | '\\') {
            "quotes, backticks and backslashes are refused in account names"
        } else if character == '@' {
            "@ separates the user from the host; set the host in spec.host"
        } else if u32::from(character) > 0xFFFF {
            "MySQL takes only characters of the Basic Multilingual Plane in account names"
        } else {
            continue;
        };
        return Err(Problem::Character {
            value: name.to_owned(),
            character,
            why,
        });
    }
    let length = name.chars().count();
    if length > MAX_USER_NAME_LENGTH {
        return Err(Problem::TooLong {
            value: name.to_owned(),
            length,
            max: MAX_USER_NAME_LENGTH,
            why: "MySQL's longest user name (set spec.name when metadata.name is longer)",
        });
    }
    if MOCO_ACCOUNTS.iter().any(|a| a.eq_ignore_ascii_case(name)) {
        return Err(Problem::MocoAccount(name.to_owned()));
    }
    if SYSTEM_ACCOUNTS.iter().any(|a| a.eq_ignore_ascii_case(name)) {
        return Err(Problem::SystemAccount(name.to_owned()));
    }
    let prefix = name.get(..MOCO_ACCOUNT_PREFIX.len());
    if prefix.is_some_and(|p| p.eq_ignore_ascii_case(MOCO_ACCOUNT_PREFIX)) {
        return Err(Problem::MocoPrefix(name.to_owned()));
    }
    Ok(())
}

/// The host part of an account, as MySQL and MariaDB both take it: a host name or IP address,
/// a pattern with `%` and `_`, an IPv6 address, or `address/netmask` with IPv4 parts (not the
/// CIDR form, which MariaDB does not take); at most 255 characters; no white space, quotes or
/// backticks.
pub fn check_host(host: &str) -> Result<(), Problem> {
    if host.is_empty() {
        return Err(Problem::Empty);
    }
    for character in host.chars() {
        let why = if character.is_whitespace() || character.is_control() {
            "white space and control characters are refused in a host"
        } else if matches!(character, '\'' | '"' | '`' | '\\') {
            "quotes, backticks and backslashes are refused in a host"
        } else if character.is_ascii_alphanumeric()
            || matches!(character, '.' | '-' | '_' | '%' | ':' | '/')
        {
            continue;
        } else {
            "a host has letters, digits, '.', '-', ':', the wildcards '%' and '_', and '/' \
             before a netmask"
        };
        return Err(Problem::Character {
            value: host.to_owned(),
            character,
            why,
        });
    }
    let length = host.chars().count();
    if length > MAX_HOST_LENGTH {
        return Err(Problem::TooLong {
            value: host.to_owned(),
            length,
            max: MAX_HOST_LENGTH,
            why: "the servers' longest host",
        });
    }
    let address = |why| Problem::HostAddress {
        value: host.to_owned(),
        why,
    };
    if let Some((ip, mask)) = host.split_once('/') {
        if !mask.is_empty() && mask.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Problem::CidrHost(host.to_owned()));
        }
        let ip: std::net::Ipv4Addr = ip
            .parse()
            .map_err(|_| address("the netmask form is an IPv4 address, '/', an IPv4 netmask"))?;
        let mask: std::net::Ipv4Addr = mask
            .parse()
            .map_err(|_| address("the netmask form is an IPv4 address, '/', an IPv4 netmask"))?;
        let (ip, mask) = (u32::from(ip), u32::from(mask));
        if mask.leading_ones() + mask.trailing_zeros() != 32 {
            return Err(address("a netmask is leading one bits, then zero bits"));
        }
        if ip & !mask != 0 {
            return Err(address(
                "the address has bits outside the netmask: it would match no client",
            ));
        }
        return Ok(());
    }
    if host.contains(':')
        && !host.contains(['%', '_'])
        && host.parse::<std::net::Ipv6Addr>().is_err()
    {
        return Err(address("not an IPv6 address"));
    }
    Ok(())
}

/// Every rule of the grants: the lists are bounded; each `on` parses and appears once; each
/// privilege is of privilege syntax, appears once, is granted at a level it has; and, unless
/// `allow_privileged`, nothing on `*.*` manages accounts, bypasses read-only, reads past table
/// grants or is unknown, and nothing on `*.*` or a system schema writes, runs routines or
/// passes grants on.
///
/// Linear in the object: duplicates are found through maps, and a list over its bound is
/// refused as a whole without looking at its items.
pub fn check_grants(grants: &[Grant], allow_privileged: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if grants.len() > MAX_GRANTS {
        errors.push(FieldError::new(
            "spec.grants",
            Problem::TooMany {
                length: grants.len(),
                max: MAX_GRANTS,
                why: "merge grants on one database, or grant on the database instead of each table",
            },
        ));
        return errors;
    }
    let mut targets: HashMap<GrantTarget, String> = HashMap::with_capacity(grants.len());
    for (i, grant) in grants.iter().enumerate() {
        let on_field = format!("spec.grants[{i}].on");
        let target = match check_on(&grant.on) {
            Ok(target) => {
                match targets.entry(target.clone()) {
                    Entry::Occupied(first) => errors.push(FieldError::new(
                        &on_field,
                        Problem::DuplicateTarget {
                            on: target.to_string(),
                            first: first.get().clone(),
                        },
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(on_field);
                    }
                }
                Some(target)
            }
            Err(problem) => {
                errors.push(FieldError::new(on_field, problem));
                None
            }
        };
        let privileges_field = format!("spec.grants[{i}].privileges");
        if grant.privileges.is_empty() {
            errors.push(FieldError::new(privileges_field, Problem::Empty));
            continue;
        }
        if grant.privileges.len() > MAX_PRIVILEGES_PER_GRANT {
            let problem = Problem::TooMany {
                length: grant.privileges.len(),
                max: MAX_PRIVILEGES_PER_GRANT,
                why: "more than the servers have; list each privilege once",
            };
            errors.push(FieldError::new(privileges_field, problem));
            continue;
        }
        let mut seen: HashMap<String, String> = HashMap::with_capacity(grant.privileges.len());
        for (j, text) in grant.privileges.iter().enumerate() {
            let field = format!("spec.grants[{i}].privileges[{j}]");
            let privilege = match privileges::canonical(text) {
                Ok(p) => p,
                Err(e) => {
                    errors.push(FieldError::new(field, e.into()));
                    continue;
                }
            };
            if let Some(first) = seen.get(&privilege) {
                let problem = Problem::DuplicatePrivilege {
                    privilege: privilege.clone(),
                    first: first.clone(),
                };
                errors.push(FieldError::new(field, problem));
                continue;
            }
            if let Some(problem) = check_privilege(&privilege, target.as_ref(), allow_privileged) {
                errors.push(FieldError::new(&field, problem));
            }
            seen.insert(privilege, field);
        }
        if let Some(field) = seen.get("ALL PRIVILEGES")
            && seen
                .keys()
                .any(|p| p != "ALL PRIVILEGES" && p != "GRANT OPTION")
        {
            errors.push(FieldError::new(field, Problem::AllWithOthers));
        }
    }
    errors
}

/// One grant's `on`: not empty, not longer than any `on` can be, parsed, and naming no
/// database in MariaDB's `#mysql50#` form (the server would decode it to another name).
fn check_on(on: &str) -> Result<GrantTarget, Problem> {
    if on.is_empty() {
        return Err(Problem::Empty);
    }
    let length = on.chars().count();
    if length > MAX_ON_LENGTH {
        return Err(Problem::TooLong {
            value: on.chars().take(MAX_ON_LENGTH).collect::<String>() + "…",
            length,
            max: MAX_ON_LENGTH,
            why: "two names of at most 64 characters",
        });
    }
    let target = parse_target(on)?;
    let names = match &target {
        GrantTarget::Global => vec![],
        GrantTarget::Database(db) => vec![db],
        GrantTarget::Table(db, table) => vec![db, table],
    };
    match names.into_iter().find(|n| n.starts_with(MYSQL50_PREFIX)) {
        Some(name) => Err(Problem::Mysql50Name(name.clone())),
        None => Ok(target),
    }
}

/// Global privileges that read what table grants do not limit: the binary log (every
/// database's changes, and, on MariaDB, account statements as sent), or every session's
/// statements. [`privileges::KNOWN`] counts them as reads; admission asks for the opt-in.
pub const READS_PAST_GRANTS: [&str; 4] = [
    "BINLOG MONITOR",
    "PROCESS",
    "REPLICATION CLIENT",
    "REPLICATION SLAVE",
];

/// Privileges that are not writes but are refused on a system schema: passing grants on, and
/// running the schema's routines (`sys`'s change the server's instrumentation).
const REFUSED_ON_SYSTEM_SCHEMAS: [&str; 2] = ["EXECUTE", "GRANT OPTION"];

/// The rules of one canonical privilege on a target (`None` when the `on` did not parse:
/// only the rules that need no target apply).
fn check_privilege(
    privilege: &str,
    target: Option<&GrantTarget>,
    allow_privileged: bool,
) -> Option<Problem> {
    if privilege == "PROXY" {
        return Some(Problem::Proxy);
    }
    let target = target?;
    let known = privileges::lookup(privilege);
    let owned = || privilege.to_owned();
    if let Some(known) = known {
        match (known.level, target) {
            (Level::Global, GrantTarget::Database(_) | GrantTarget::Table(..)) => {
                return Some(Problem::GlobalOnly { privilege: owned() });
            }
            (Level::Database, GrantTarget::Table(..)) => {
                return Some(Problem::NotOnTable { privilege: owned() });
            }
            _ => {}
        }
    }
    if allow_privileged {
        return None;
    }
    match (known, target) {
        (Some(k), GrantTarget::Global) if k.administrative => {
            Some(Problem::Administrative { privilege: owned() })
        }
        (Some(k), GrantTarget::Global) if READS_PAST_GRANTS.contains(&k.name) => {
            Some(Problem::ReadsPastGrants { privilege: owned() })
        }
        (None, GrantTarget::Global) => Some(Problem::UnknownOnGlobal { privilege: owned() }),
        (Some(k), _)
            if (k.writes || REFUSED_ON_SYSTEM_SCHEMAS.contains(&k.name))
                && target.reaches_system_schema() =>
        {
            Some(Problem::WritesSystemSchema {
                privilege: owned(),
                on: target.to_string(),
            })
        }
        _ => None,
    }
}

/// A database name: MySQL's identifier rules ([`check_identifier`]), not a system schema, not
/// MariaDB's `#mysql50#` form.
pub fn check_database_name(name: &str) -> Result<(), Problem> {
    check_identifier(name)?;
    if SYSTEM_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(name)) {
        return Err(Problem::SystemSchema(name.to_owned()));
    }
    if name.starts_with(MYSQL50_PREFIX) {
        return Err(Problem::Mysql50Name(name.to_owned()));
    }
    Ok(())
}

/// The syntax of a character set or collation name: 1 to 64 letters, digits and underscores.
/// Whether the server knows it is the controller's to find out.
pub fn check_charset_name(name: &str) -> Result<(), Problem> {
    if name.is_empty() {
        return Err(Problem::Empty);
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Problem::CharsetName(name.to_owned()));
    }
    if name.len() > MAX_CHARSET_NAME_LENGTH {
        return Err(Problem::TooLong {
            value: name.to_owned(),
            length: name.len(),
            max: MAX_CHARSET_NAME_LENGTH,
            why: "the servers' longest collation name",
        });
    }
    Ok(())
}

/// A collation belongs to a character set when its name is the set's name, `_`, and more
/// (`utf8mb4_bin`), or both are `binary`; `utf8` and `utf8mb3` are one set.
pub fn check_collation_of(collation: &str, character_set: &str) -> Result<(), Problem> {
    let collation_lower = collation.to_ascii_lowercase();
    let set = character_set.to_ascii_lowercase();
    let names: &[&str] = match set.as_str() {
        "utf8" | "utf8mb3" => &["utf8", "utf8mb3"],
        other => &[other],
    };
    let belongs = if set == "binary" {
        collation_lower == "binary"
    } else {
        names.iter().any(|n| {
            collation_lower
                .strip_prefix(n)
                .and_then(|rest| rest.strip_prefix('_'))
                .is_some_and(|rest| !rest.is_empty())
        })
    };
    if belongs {
        Ok(())
    } else {
        Err(Problem::CollationMismatch {
            collation: collation.to_owned(),
            character_set: character_set.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests;
