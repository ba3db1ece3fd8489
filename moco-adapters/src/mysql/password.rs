//! How a password travels in an account statement.
//!
//! MariaDB writes account statements to its binary log as they were sent (MySQL rewrites them
//! to the stored hash first), and the binary log goes to every replica, to the archive, and to
//! whoever holds `REPLICATION SLAVE` or `BINLOG MONITOR` (MOCO's application accounts among
//! them). So on MariaDB no statement carries a password: each carries the
//! `mysql_native_password` hash the server would store, which the server's own tables already
//! show to the accounts that may read `mysql.*`. A statement sent in clear would also show in
//! the process list to every holder of `PROCESS`. On MySQL the clear password is sent: the
//! server rewrites it before logging, and `caching_sha2_password`'s stored form is salted.

use sha1::{Digest, Sha1};

use super::sql::quote;

use moco_core::dialect::Dialect;

/// `mysql_native_password`'s stored hash of `password`: `*` and the upper-case hex of
/// SHA1(SHA1(password)).
pub fn native_password_hash(password: &str) -> String {
    let inner = Sha1::digest(password.as_bytes());
    let outer = Sha1::digest(inner);
    let mut out = String::with_capacity(41);
    out.push('*');
    for b in outer {
        out.push_str(&format!("{b:02X}"));
    }
    out
}

/// The clause of `CREATE USER`/`ALTER USER` that gives an account `password`: MariaDB
/// `IDENTIFIED BY PASSWORD '*HASH'`, MySQL `IDENTIFIED BY 'password'`.
pub fn identified_by(d: Dialect, password: &str) -> String {
    match d {
        Dialect::Mariadb => format!(
            "IDENTIFIED BY PASSWORD {}",
            quote(&native_password_hash(password))
        ),
        Dialect::Mysql80 | Dialect::Mysql84 => format!("IDENTIFIED BY {}", quote(password)),
    }
}

/// MariaDB: one authentication method that takes `password`, for `IDENTIFIED VIA … OR …`:
/// `mysql_native_password USING '*HASH'`.
pub fn native_method(password: &str) -> String {
    format!(
        "mysql_native_password USING {}",
        quote(&native_password_hash(password))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's own `PASSWORD()` values (MariaDB 10.11: `SELECT PASSWORD('pw')`).
    #[test]
    fn the_hash_is_the_servers() {
        assert_eq!(
            native_password_hash("pw"),
            "*D821809F681A40A6E379B50D0463EFAE20BDD122"
        );
        assert_eq!(
            native_password_hash("it's \\ ü"),
            "*B97240BDA57063760B36AF32EDBDF83BF78A6081"
        );
    }

    #[test]
    fn mariadb_never_carries_the_password_and_mysql_lets_the_server_hash_it() {
        let secret = "s3cr'et";
        let mariadb = identified_by(Dialect::Mariadb, secret);
        assert_eq!(
            mariadb,
            format!("IDENTIFIED BY PASSWORD '{}'", native_password_hash(secret))
        );
        assert!(!mariadb.contains("s3cr"));
        assert!(!native_method(secret).contains("s3cr"));
        for d in [Dialect::Mysql80, Dialect::Mysql84] {
            assert_eq!(identified_by(d, secret), "IDENTIFIED BY 's3cr''et'");
        }
    }
}
