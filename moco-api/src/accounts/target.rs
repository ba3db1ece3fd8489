//! What a grant is `on` (`*.*`, `db.*`, `db.table`), and MySQL's rules for the names of
//! databases and tables.
//!
//! Names are literal: `_` and `%` are not patterns (the controller escapes `_` where MariaDB
//! would read it as one), and `%` and `\` are refused in names, because GRANT reads them as a
//! pattern and its escape.

use std::fmt;

/// Longest database or table name (MySQL's and MariaDB's `NAME_CHAR_LEN`).
pub const MAX_IDENTIFIER_LENGTH: usize = 64;

/// The schemas of the server itself: no MySQLDatabase may name one.
pub const SYSTEM_SCHEMAS: [&str; 4] = ["mysql", "sys", "information_schema", "performance_schema"];

/// The schema holding the grant tables.
pub const GRANT_SCHEMA: &str = "mysql";

/// What a grant applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GrantTarget {
    /// `*.*`: every database, `mysql` included.
    Global,
    /// `db.*`: one database.
    Database(String),
    /// `db.table`: one table (or view) of a database.
    Table(String, String),
}

impl GrantTarget {
    /// The database named, if any.
    pub fn database(&self) -> Option<&str> {
        match self {
            GrantTarget::Global => None,
            GrantTarget::Database(db) | GrantTarget::Table(db, _) => Some(db),
        }
    }

    /// Whether the grant reaches a schema of the server itself ([`SYSTEM_SCHEMAS`]: the grant
    /// tables of `mysql`, `sys`'s routines, `performance_schema`'s instrumentation): `*.*` does
    /// (MariaDB has no partial revokes), and so does any grant on one of them
    /// (case-insensitively: on a server with `lower_case_table_names` it is the same schema).
    pub fn reaches_system_schema(&self) -> bool {
        self.database()
            .is_none_or(|db| SYSTEM_SCHEMAS.iter().any(|s| db.eq_ignore_ascii_case(s)))
    }
}

impl fmt::Display for GrantTarget {
    /// The canonical `on` text: names quoted with backticks where they need it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantTarget::Global => f.write_str("*.*"),
            GrantTarget::Database(db) => write!(f, "{}.*", Quoted(db)),
            GrantTarget::Table(db, table) => write!(f, "{}.{}", Quoted(db), Quoted(table)),
        }
    }
}

/// A name written as `on` needs it: bare when it is a plain identifier, else in backticks.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_plain(self.0) {
            f.write_str(self.0)
        } else {
            write!(f, "`{}`", self.0.replace('`', "``"))
        }
    }
}

/// Letters, digits, `_` and `$` (ASCII), not only digits: what may go without backticks.
fn is_plain(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && !name.chars().all(|c| c.is_ascii_digit())
}

/// Why a database or table name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentifierError {
    /// Empty.
    #[error("must not be empty")]
    Empty,
    /// Longer than [`MAX_IDENTIFIER_LENGTH`] characters.
    #[error("{name:?} is {length} characters long, at most {MAX_IDENTIFIER_LENGTH}")]
    TooLong {
        /// The name.
        name: String,
        /// Its length in characters.
        length: usize,
    },
    /// Ends with a space, which MySQL refuses in database and table names.
    #[error("{0:?} ends with a space, which MySQL refuses")]
    TrailingSpace(String),
    /// A character MySQL refuses (NUL, outside the Basic Multilingual Plane), or moco-rs does
    /// (control characters; `%` and `\`, which GRANT reads as a pattern and its escape).
    #[error("{name:?} contains {character:?}: {why}")]
    Character {
        /// The name.
        name: String,
        /// The character.
        character: char,
        /// Why it is refused.
        why: &'static str,
    },
}

/// MySQL's rules for a database or table name, as moco-rs takes them: 1 to 64 characters of
/// the Basic Multilingual Plane, no control character, no `%` or `\`, no trailing space.
pub fn check_identifier(name: &str) -> Result<(), IdentifierError> {
    if name.is_empty() {
        return Err(IdentifierError::Empty);
    }
    for character in name.chars() {
        let why = if character == '\0' || character.is_control() {
            "control characters are refused"
        } else if u32::from(character) > 0xFFFF {
            "MySQL takes only characters of the Basic Multilingual Plane in names"
        } else if character == '%' || character == '\\' {
            "GRANT reads % as a pattern and \\ as its escape; names here are literal"
        } else {
            continue;
        };
        return Err(IdentifierError::Character {
            name: name.to_owned(),
            character,
            why,
        });
    }
    let length = name.chars().count();
    if length > MAX_IDENTIFIER_LENGTH {
        return Err(IdentifierError::TooLong {
            name: name.to_owned(),
            length,
        });
    }
    if name.ends_with(' ') {
        return Err(IdentifierError::TrailingSpace(name.to_owned()));
    }
    Ok(())
}

/// Why an `on` text is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not `*.*`, `db.*` or `db.table`.
    #[error(
        "{0:?} is not *.*, db.* or db.table (a name with characters other than letters, \
         digits, _ and $ goes in backticks, a backtick in it doubled)"
    )]
    Syntax(String),
    /// `TABLE db.t`, `PROCEDURE db.p`, `FUNCTION db.f`.
    #[error("{0:?}: object types (TABLE, PROCEDURE, FUNCTION) are not supported; write db.table")]
    ObjectType(String),
    /// `*.table`.
    #[error("{0:?}: a table of every database is not a grant level; write *.* or db.table")]
    TableOfEveryDatabase(String),
    /// A name breaks [`check_identifier`].
    #[error("{0}")]
    Name(IdentifierError),
}

/// Parses the `on` of a grant.
pub fn parse_target(text: &str) -> Result<GrantTarget, TargetError> {
    let syntax = || TargetError::Syntax(text.to_owned());
    let upper = text.to_ascii_uppercase();
    if ["TABLE ", "PROCEDURE ", "FUNCTION "]
        .iter()
        .any(|t| upper.starts_with(t))
    {
        return Err(TargetError::ObjectType(text.to_owned()));
    }
    let (db, rest) = name_part(text).ok_or_else(syntax)?;
    let rest = rest.strip_prefix('.').ok_or_else(syntax)?;
    let (table, end) = name_part(rest).ok_or_else(syntax)?;
    if !end.is_empty() {
        return Err(syntax());
    }
    let check = |n: &str| check_identifier(n).map_err(TargetError::Name);
    match (db, table) {
        (Part::Star, Part::Star) => Ok(GrantTarget::Global),
        (Part::Star, Part::Name(_)) => Err(TargetError::TableOfEveryDatabase(text.to_owned())),
        (Part::Name(db), Part::Star) => {
            check(&db)?;
            Ok(GrantTarget::Database(db))
        }
        (Part::Name(db), Part::Name(table)) => {
            check(&db)?;
            check(&table)?;
            Ok(GrantTarget::Table(db, table))
        }
    }
}

enum Part {
    Star,
    Name(String),
}

/// One `*`, bare name or backticked name at the start of `text`, and what follows it.
fn name_part(text: &str) -> Option<(Part, &str)> {
    if let Some(rest) = text.strip_prefix('*') {
        return Some((Part::Star, rest));
    }
    if let Some(mut rest) = text.strip_prefix('`') {
        let mut name = String::new();
        loop {
            let end = rest.find('`')?;
            name.push_str(&rest[..end]);
            rest = &rest[end + 1..];
            match rest.strip_prefix('`') {
                Some(after) => {
                    name.push('`');
                    rest = after;
                }
                None => return Some((Part::Name(name), rest)),
            }
        }
    }
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(text.len());
    let name = &text[..end];
    if name.is_empty() || name.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((Part::Name(name.to_owned()), &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(name: &str) -> GrantTarget {
        GrantTarget::Database(name.to_owned())
    }

    fn table(db: &str, table: &str) -> GrantTarget {
        GrantTarget::Table(db.to_owned(), table.to_owned())
    }

    #[test]
    fn parses_the_three_levels_bare_and_quoted() {
        assert_eq!(parse_target("*.*"), Ok(GrantTarget::Global));
        assert_eq!(parse_target("appdb.*"), Ok(db("appdb")));
        assert_eq!(parse_target("app_db$1.t_1"), Ok(table("app_db$1", "t_1")));
        assert_eq!(parse_target("`app-db`.*"), Ok(db("app-db")));
        assert_eq!(parse_target("`a.b`.`c d`"), Ok(table("a.b", "c d")));
        assert_eq!(parse_target("`we``ird`.*"), Ok(db("we`ird")));
        assert_eq!(parse_target("`123`.*"), Ok(db("123")));
        assert_eq!(parse_target("`*`.*"), Ok(db("*")));
    }

    #[test]
    fn refuses_what_is_not_a_grant_level() {
        for bad in [
            "",
            "*",
            "appdb",
            "appdb.",
            ".*",
            "*.*.*",
            "app db.*",
            "appdb.* ",
            " *.*",
            "app-db.*",
            "123.*",
            "`appdb.*",
            "`appdb`*",
            "appdb.*;",
            "'appdb'.*",
            "\"appdb\".*",
            "db.`t",
        ] {
            assert_eq!(
                parse_target(bad),
                Err(TargetError::Syntax(bad.to_owned())),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_target("*.t"),
            Err(TargetError::TableOfEveryDatabase("*.t".to_owned()))
        );
        assert_eq!(
            parse_target("PROCEDURE db.p"),
            Err(TargetError::ObjectType("PROCEDURE db.p".to_owned()))
        );
        assert_eq!(
            parse_target("table db.t"),
            Err(TargetError::ObjectType("table db.t".to_owned()))
        );
    }

    #[test]
    fn names_in_targets_follow_the_identifier_rules() {
        assert!(matches!(
            parse_target("`a%`.*"),
            Err(TargetError::Name(IdentifierError::Character {
                character: '%',
                ..
            }))
        ));
        let long = "a".repeat(MAX_IDENTIFIER_LENGTH + 1);
        assert!(matches!(
            parse_target(&format!("{long}.*")),
            Err(TargetError::Name(IdentifierError::TooLong { .. }))
        ));
        assert!(matches!(
            parse_target(&format!("db.{long}")),
            Err(TargetError::Name(IdentifierError::TooLong { .. }))
        ));
        assert!(matches!(
            parse_target("`db `.*"),
            Err(TargetError::Name(IdentifierError::TrailingSpace(_)))
        ));
        assert!(matches!(
            parse_target("``.*"),
            Err(TargetError::Name(IdentifierError::Empty))
        ));
    }

    #[test]
    fn identifier_rules() {
        assert_eq!(check_identifier("appdb"), Ok(()));
        assert_eq!(check_identifier("app-db.v2 ü"), Ok(()));
        assert_eq!(check_identifier(&"é".repeat(MAX_IDENTIFIER_LENGTH)), Ok(()));
        // The last character of the Basic Multilingual Plane is still one.
        assert_eq!(check_identifier("a\u{FFFF}"), Ok(()));
        assert_eq!(check_identifier(""), Err(IdentifierError::Empty));
        assert!(matches!(
            check_identifier(&"a".repeat(MAX_IDENTIFIER_LENGTH + 1)),
            Err(IdentifierError::TooLong { length: 65, .. })
        ));
        assert!(matches!(
            check_identifier("app "),
            Err(IdentifierError::TrailingSpace(_))
        ));
        for (name, character) in [
            ("a\0b", '\0'),
            ("a\nb", '\n'),
            ("a😀", '😀'),
            ("app%", '%'),
            ("a\\b", '\\'),
        ] {
            assert!(
                matches!(check_identifier(name), Err(IdentifierError::Character { character: c, .. }) if c == character),
                "{name:?}"
            );
        }
    }

    #[test]
    fn system_schemas_are_reached_by_star_star_and_by_each_of_them() {
        assert!(GrantTarget::Global.reaches_system_schema());
        assert!(db("mysql").reaches_system_schema());
        assert!(db("MySQL").reaches_system_schema());
        assert!(table("mysql", "user").reaches_system_schema());
        assert!(db("sys").reaches_system_schema());
        assert!(table("Performance_Schema", "setup_instruments").reaches_system_schema());
        assert!(db("information_schema").reaches_system_schema());
        assert!(!db("appdb").reaches_system_schema());
        assert!(!table("mysqlx", "user").reaches_system_schema());
        assert!(!db("sysadmin").reaches_system_schema());
    }

    #[test]
    fn display_is_the_canonical_on() {
        for (text, shown) in [
            ("*.*", "*.*"),
            ("appdb.*", "appdb.*"),
            ("`appdb`.`t`", "appdb.t"),
            ("`app-db`.*", "`app-db`.*"),
            ("`we``ird`.`1`", "`we``ird`.`1`"),
            ("`a$_1`.`t$`", "a$_1.t$"),
        ] {
            assert_eq!(
                parse_target(text).map(|t| t.to_string()).as_deref(),
                Ok(shown)
            );
            assert_eq!(
                parse_target(shown),
                parse_target(text),
                "{shown} round trip"
            );
        }
    }
}
