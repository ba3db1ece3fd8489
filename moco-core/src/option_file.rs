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

/// The option-file lines with which a MariaDB command-line client (`mariadb-backup`,
/// `mariadb-binlog`, `mariadb`) uses TLS and verifies the server against `ca`; none without.
pub fn tls_client_options(ca: Option<&std::path::Path>) -> String {
    ca.map_or_else(String::new, |ca| {
        format!(
            "ssl-ca={}\nssl-verify-server-cert\n",
            quote_value(&ca.display().to_string())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escape_what_would_end_the_value() {
        assert_eq!(quote_value("a\"b\\c\nd #e"), "\"a\\\"b\\\\c\\nd #e\"");
    }

    /// With a CA the client verifies the server (name included); without one, no line.
    #[test]
    fn tls_lines_name_the_ca_and_verify() {
        let ca = std::path::Path::new("/d ir/tls/ca.pem");
        assert_eq!(
            tls_client_options(Some(ca)),
            "ssl-ca=\"/d ir/tls/ca.pem\"\nssl-verify-server-cert\n"
        );
        assert_eq!(tls_client_options(None), "");
    }
}
