//! The `on` of a grant, parsed: `*.*`, `db.*` or `db.table`, each name bare or in backticks.
//!
//! At the database level the server reads `_` and `%` in the name as wildcards (`app_db.*`
//! would also grant on `appXdb`); a declared name means that database alone, so they are
//! escaped, and the target holds the name as the server stores it (`app\_db`).

use super::model::GrantTarget;

/// Why an `on` string is not a target.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetError(String);

/// Parses `on` (`*.*`, `db.*`, `` `my-db`.`t` ``).
pub fn parse_target(on: &str) -> Result<GrantTarget, TargetError> {
    let bad = |why: &str| {
        TargetError(format!(
            "{on:?}: {why}; use *.*, db.* or db.table (names in backticks when they hold other \
             characters than letters, digits, _ and $)"
        ))
    };
    let (first, rest) = name(on).map_err(|e| bad(&e))?;
    let rest = match rest.strip_prefix('.') {
        Some(rest) => rest,
        None if rest.is_empty() => return Err(bad("no '.'")),
        None => return Err(bad(&format!("{rest:?} where '.' should be"))),
    };
    let (second, end) = name(rest).map_err(|e| bad(&e))?;
    if !end.is_empty() {
        return Err(bad(&format!("{end:?} after the target")));
    }
    match (first, second) {
        (Name::Star, Name::Star) => Ok(GrantTarget::Global),
        (Name::Star, Name::Ident(_)) => Err(bad("*.table is not a target")),
        (Name::Ident(db), Name::Star) => Ok(GrantTarget::Database(escape_wildcards(&db))),
        (Name::Ident(db), Name::Ident(table)) => Ok(GrantTarget::Table(db, table)),
    }
}

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

enum Name {
    Star,
    Ident(String),
}

/// The first name of `text` and what follows it.
fn name(text: &str) -> Result<(Name, &str), String> {
    if let Some(rest) = text.strip_prefix('*') {
        return Ok((Name::Star, rest));
    }
    if let Some(quoted) = text.strip_prefix('`') {
        let mut ident = String::new();
        let mut chars = quoted.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '`' {
                if chars.peek().is_some_and(|(_, n)| *n == '`') {
                    chars.next();
                    ident.push('`');
                    continue;
                }
                return check(ident).map(|n| (n, &quoted[i + 1..]));
            }
            ident.push(c);
        }
        return Err("a backtick is not closed".to_owned());
    }
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(text.len());
    if end == 0 {
        return Err(match text.chars().next() {
            None => "a name is missing".to_owned(),
            Some(c) => format!("{c:?} cannot start a name"),
        });
    }
    if text[..end].bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{:?} is a number: put it in backticks",
            &text[..end]
        ));
    }
    check(text[..end].to_owned()).map(|n| (n, &text[end..]))
}

/// MySQL's limits on a name: 1 to 64 characters, no trailing space, no NUL.
fn check(ident: String) -> Result<Name, String> {
    if ident.is_empty() {
        return Err("a name is empty".to_owned());
    }
    if ident.chars().count() > 64 {
        return Err(format!("{ident:?} is longer than 64 characters"));
    }
    if ident.ends_with(' ') || ident.contains('\0') {
        return Err(format!("{ident:?} ends with a space or holds a NUL"));
    }
    Ok(Name::Ident(ident))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_bare_and_quoted() {
        assert_eq!(parse_target("*.*"), Ok(GrantTarget::Global));
        assert_eq!(
            parse_target("app.*"),
            Ok(GrantTarget::Database("app".into()))
        );
        assert_eq!(
            parse_target("app_db.*"),
            Ok(GrantTarget::Database("app\\_db".into())),
            "wildcards escaped"
        );
        assert_eq!(
            parse_target("app.t1"),
            Ok(GrantTarget::Table("app".into(), "t1".into()))
        );
        assert_eq!(
            parse_target("`my-db`.`a``b`"),
            Ok(GrantTarget::Table("my-db".into(), "a`b".into()))
        );
        assert_eq!(
            parse_target("`50%`.*"),
            Ok(GrantTarget::Database("50\\%".into()))
        );
        assert_eq!(
            GrantTarget::Database("app\\_db".into()).to_string(),
            "`app\\_db`.*"
        );
    }

    #[test]
    fn what_is_not_a_target_says_why() {
        for (on, why) in [
            ("", "a name is missing"),
            ("*", "no '.'"),
            ("app", "no '.'"),
            ("*.t", "*.table is not a target"),
            ("app.*.*", "\".*\" after the target"),
            ("my-db.*", "\"-db.*\" where '.' should be"),
            ("`app.*", "a backtick is not closed"),
            ("``.*", "a name is empty"),
            ("123.*", "is a number"),
            ("app. t", "' ' cannot start a name"),
            ("app.*; DROP USER x", "after the target"),
        ] {
            let e = parse_target(on).unwrap_err().to_string();
            assert!(e.contains(why), "{on:?}: {e}");
        }
        let long = format!("{}.*", "a".repeat(65));
        assert!(
            parse_target(&long)
                .unwrap_err()
                .to_string()
                .contains("longer than 64")
        );
    }
}
