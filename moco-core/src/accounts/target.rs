//! Database-level wildcards: in `GRANT … ON db.*` the server reads `_` and `%` in the name as
//! wildcards (`app_db.*` would also grant on `appXdb`). A declared name means that database
//! alone, so they are escaped, and a target holds the name as the server stores it
//! (`app\_db`), which is also how `information_schema` lists it back. (The `on` text itself is
//! parsed by admission, `moco_api::accounts::target`, into literal names.)

use super::model::GrantTarget;

/// `name` with the database-level wildcards `_` and `%` (and the escape `\` itself) escaped.
pub fn escape_wildcards(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '_' | '%' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl GrantTarget {
    /// The target of every table of database `name` (a literal name: its wildcards escaped).
    pub fn database(name: &str) -> GrantTarget {
        GrantTarget::Database(escape_wildcards(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_literal() {
        assert_eq!(
            GrantTarget::database("app_db"),
            GrantTarget::Database("app\\_db".into())
        );
        assert_eq!(escape_wildcards("50%\\x"), "50\\%\\\\x");
        assert_eq!(
            GrantTarget::database("a`b").to_string(),
            "`a``b`.*",
            "quoted as an identifier"
        );
        assert_eq!(
            GrantTarget::Table("app_db".into(), "t".into()).to_string(),
            "`app_db`.`t`",
            "table grants are literal"
        );
    }
}
