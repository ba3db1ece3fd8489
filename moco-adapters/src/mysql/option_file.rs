//! Values of MySQL/MariaDB option files (`my.cnf`, `--defaults-extra-file`).

/// A double-quoted option-file value: `#` and spaces stay part of it; `\`, `"` and line breaks
/// are escaped, so no value can end its line and add an option of its own.
pub fn quote_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escape_what_would_end_the_value() {
        assert_eq!(quote_value("a\"b\\c\nd #e"), "\"a\\\"b\\\\c\\nd #e\"");
    }
}
