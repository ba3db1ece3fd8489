//! Which statements a server takes: the dialect of MySQL 8.0, MySQL 8.4 or MariaDB 10.11+,
//! read from `@@version`. The statements themselves are the adapters' (`moco-adapters`'
//! `mysql::sql`); everything that builds SQL, option files or backups for a server is keyed by
//! this one type.

use crate::facts::Flavor;

/// The statement dialect of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// MariaDB 10.11 or later.
    Mariadb,
    /// MySQL 8.0.
    Mysql80,
    /// MySQL 8.4.
    Mysql84,
}

/// A server version MOCO's SQL does not cover.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unsupported server version {version:?}: need MySQL 8.0/8.4 or MariaDB 10.11+")]
pub struct UnsupportedVersion {
    /// `@@version` as reported.
    pub version: String,
}

impl Dialect {
    /// Picks the dialect from `@@version` (`8.4.4`, `8.0.43-log`, `10.11.19-MariaDB-log`).
    /// Like MOCO, only the 8.0 and 8.4 lines of MySQL are accepted.
    pub fn from_version(version: &str) -> Result<Self, UnsupportedVersion> {
        let unsupported = || UnsupportedVersion {
            version: version.to_owned(),
        };
        let mut numbers = version
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().ok());
        let major = numbers.next().flatten().ok_or_else(unsupported)?;
        let minor = numbers.next().flatten().ok_or_else(unsupported)?;
        if version.contains("MariaDB") {
            return if (major, minor) >= (10, 11) {
                Ok(Dialect::Mariadb)
            } else {
                Err(unsupported())
            };
        }
        match (major, minor) {
            (8, 0) => Ok(Dialect::Mysql80),
            (8, 4) => Ok(Dialect::Mysql84),
            _ => Err(unsupported()),
        }
    }

    /// The server family.
    pub fn flavor(self) -> Flavor {
        match self {
            Dialect::Mariadb => Flavor::Mariadb,
            Dialect::Mysql80 | Dialect::Mysql84 => Flavor::Mysql,
        }
    }

    /// True for MariaDB, whose statements differ from MySQL's most.
    pub fn is_mariadb(self) -> bool {
        self == Dialect::Mariadb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_from_version() {
        assert_eq!(
            Dialect::from_version("10.11.19-MariaDB-0+deb12u1-log"),
            Ok(Dialect::Mariadb)
        );
        assert_eq!(
            Dialect::from_version("11.4.2-MariaDB"),
            Ok(Dialect::Mariadb)
        );
        assert_eq!(Dialect::from_version("8.0.43"), Ok(Dialect::Mysql80));
        assert_eq!(Dialect::from_version("8.4.4-log"), Ok(Dialect::Mysql84));
        for bad in ["10.6.1-MariaDB", "5.7.44", "9.1.0", "8.1.0", "", "x.y"] {
            assert!(Dialect::from_version(bad).is_err(), "{bad}");
        }
        assert_eq!(Dialect::Mariadb.flavor(), Flavor::Mariadb);
        assert_eq!(Dialect::Mysql84.flavor(), Flavor::Mysql);
    }
}
