//! Which statements a server takes: the dialect of MySQL 8.0, MySQL 8.4 to 9.7 or MariaDB
//! 10.11+, read from `@@version`; and the names of its semi-synchronous replication settings,
//! which follow the plugins it runs ([`SemiSyncNames`]). The statements themselves are the
//! adapters' (`moco-adapters`' `mysql::sql`); everything that builds SQL, option files or
//! backups for a server is keyed by these types.

use crate::facts::Flavor;

/// The statement dialect of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// MariaDB 10.11 or later.
    Mariadb,
    /// MySQL 8.0.
    Mysql80,
    /// MySQL 8.4 LTS and the 9 line up to its LTS, 9.7: the statements 8.4 kept (9.0 to 9.7
    /// removed none that MOCO uses; 9.5 removed the legacy semi-sync plugins, which
    /// [`SemiSyncNames`] follows).
    Mysql84,
}

/// A server version MOCO's SQL does not cover.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unsupported server version {version:?}: need MySQL 8.0, 8.4 or 9.0 to 9.7 (9.7.4 is the one \
     tested), or MariaDB 10.11 or later"
)]
pub struct UnsupportedVersion {
    /// `@@version` as reported.
    pub version: String,
}

impl Dialect {
    /// Picks the dialect from `@@version` (`8.4.4`, `8.0.43-log`, `9.7.4-2`,
    /// `10.11.19-MariaDB-log`). MySQL's 8.0 and 8.4 lines, as MOCO, and the 9 line up to its
    /// LTS; the calendar versions after it (26.x) are refused until tested.
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
            (8, 4) | (9, 0..=7) => Ok(Dialect::Mysql84),
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

/// The names of a server's semi-synchronous replication settings, which follow its plugins:
/// MySQL 8.0.26 added `rpl_semi_sync_source`/`rpl_semi_sync_replica` beside the legacy
/// `rpl_semi_sync_master`/`rpl_semi_sync_slave`, and 9.5 removed the legacy ones. An 8.0 or 8.4
/// server that runs the legacy plugins keeps them (a cluster initialised by MOCO); a server
/// that runs none is given the new ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SemiSyncNames {
    /// `rpl_semi_sync_master_*`, `rpl_semi_sync_slave_*`: MariaDB, MySQL's legacy plugins.
    Master,
    /// `rpl_semi_sync_source_*`, `rpl_semi_sync_replica_*`: MySQL's plugins since 8.0.26.
    Source,
}

impl SemiSyncNames {
    /// The names a server of `dialect` uses, from the names of its ACTIVE plugins
    /// (`information_schema.PLUGINS`): the new plugins when they run, else the legacy ones
    /// when they run, else (nothing installed yet) the new ones on MySQL. MariaDB's
    /// semi-sync is built in, with the legacy names.
    pub fn from_active_plugins<S: AsRef<str>>(dialect: Dialect, active: &[S]) -> Self {
        let runs = |name: &str| active.iter().any(|p| p.as_ref().eq_ignore_ascii_case(name));
        if dialect.is_mariadb() {
            SemiSyncNames::Master
        } else if runs("rpl_semi_sync_source") || runs("rpl_semi_sync_replica") {
            SemiSyncNames::Source
        } else if runs("rpl_semi_sync_master") || runs("rpl_semi_sync_slave") {
            SemiSyncNames::Master
        } else {
            SemiSyncNames::Source
        }
    }

    /// A setting of the source side: `enabled` → `rpl_semi_sync_source_enabled`.
    pub fn source(self, setting: &str) -> String {
        match self {
            SemiSyncNames::Master => format!("rpl_semi_sync_master_{setting}"),
            SemiSyncNames::Source => format!("rpl_semi_sync_source_{setting}"),
        }
    }

    /// A setting of the replica side: `enabled` → `rpl_semi_sync_replica_enabled`.
    pub fn replica(self, setting: &str) -> String {
        match self {
            SemiSyncNames::Master => format!("rpl_semi_sync_slave_{setting}"),
            SemiSyncNames::Source => format!("rpl_semi_sync_replica_{setting}"),
        }
    }

    /// How many replicas must acknowledge (MySQL only).
    pub fn wait_for_replica_count(self) -> &'static str {
        match self {
            SemiSyncNames::Master => "rpl_semi_sync_master_wait_for_slave_count",
            SemiSyncNames::Source => "rpl_semi_sync_source_wait_for_replica_count",
        }
    }

    /// The two plugins to install on MySQL (name, library), source side first.
    pub fn plugins(self) -> [(&'static str, &'static str); 2] {
        match self {
            SemiSyncNames::Master => [
                ("rpl_semi_sync_master", "semisync_master.so"),
                ("rpl_semi_sync_slave", "semisync_slave.so"),
            ],
            SemiSyncNames::Source => [
                ("rpl_semi_sync_source", "semisync_source.so"),
                ("rpl_semi_sync_replica", "semisync_replica.so"),
            ],
        }
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
        assert_eq!(Dialect::from_version("9.7.4-2"), Ok(Dialect::Mysql84));
        assert_eq!(Dialect::from_version("9.0.1"), Ok(Dialect::Mysql84));
        for bad in [
            "10.6.1-MariaDB",
            "5.7.44",
            "9.8.0",
            "26.7.0",
            "8.1.0",
            "",
            "x.y",
        ] {
            assert!(Dialect::from_version(bad).is_err(), "{bad}");
        }
        assert_eq!(Dialect::Mariadb.flavor(), Flavor::Mariadb);
        assert_eq!(Dialect::Mysql84.flavor(), Flavor::Mysql);
    }

    #[test]
    fn semi_sync_names_follow_the_plugins_that_run() {
        use SemiSyncNames::{Master, Source};
        let from = |d, active: &[&str]| SemiSyncNames::from_active_plugins(d, active);
        assert_eq!(from(Dialect::Mariadb, &[]), Master);
        assert_eq!(from(Dialect::Mariadb, &["rpl_semi_sync_source"]), Master);
        assert_eq!(
            from(Dialect::Mysql84, &[]),
            Source,
            "nothing installed: the new ones"
        );
        assert_eq!(
            from(
                Dialect::Mysql80,
                &["rpl_semi_sync_master", "rpl_semi_sync_slave", "clone"]
            ),
            Master,
            "an 8.0 instance on the legacy plugins keeps them"
        );
        assert_eq!(from(Dialect::Mysql84, &["RPL_SEMI_SYNC_REPLICA"]), Source);
        assert_eq!(
            from(
                Dialect::Mysql84,
                &["rpl_semi_sync_master", "rpl_semi_sync_replica"]
            ),
            Source
        );
        assert_eq!(Source.source("enabled"), "rpl_semi_sync_source_enabled");
        assert_eq!(Master.replica("enabled"), "rpl_semi_sync_slave_enabled");
        assert_eq!(
            Source.wait_for_replica_count(),
            "rpl_semi_sync_source_wait_for_replica_count"
        );
        assert_eq!(
            Master.plugins()[1],
            ("rpl_semi_sync_slave", "semisync_slave.so")
        );
        assert_eq!(
            Source.plugins()[0],
            ("rpl_semi_sync_source", "semisync_source.so")
        );
    }
}
