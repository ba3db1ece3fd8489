//! MOCO's own MySQL backup format, as pure data: the command lines MOCO's backup and restore
//! Jobs run, the choices they make, and the bucket keys they read and write. Nothing here runs
//! a process or touches the network, so every rule is unit-tested against what MOCO does (its
//! `backup/`, `pkg/bkop/` and `backup/key.go`); a runner executes the
//! [`CommandLine`](command_line::CommandLine)s.
//!
//! Following MOCO keeps two promises: a MOCO user's existing backups restore here, and new
//! MySQL backups look exactly like MOCO's, so MOCO (or anyone's tooling built for it) can
//! restore them in turn.
//!
//! Layout in the bucket (`backup/key.go`), all times UTC:
//!
//! | key | written by | holds |
//! |---|---|---|
//! | `moco/<ns>/<name>/<YYYYMMDD-hhmmss>/dump.tar` | the backup started at that time | `tar` of `mysqlsh util dump-instance`'s directory `dump/` |
//! | `moco/<ns>/<name>/<YYYYMMDD-hhmmss>/binlog.tar.zst` | the **next** backup | `tar \| zstd` of the binlogs from this backup's GTID set to the next backup |
//!
//! The binlog tarball of backup N sits in backup N−1's folder: a folder's dump plus the same
//! folder's binlogs reach every second up to the next backup, which is what a restore needs.
//!
//! Where this module departs from MOCO, on purpose (each is named where it happens):
//! * passwords never appear in an argument (MOCO passes `-p<password>`, visible in `ps` on the
//!   node): `mysqlsh` reads it from stdin, `mysqlbinlog` and `mysql` from a 0600 option file;
//! * a restore point the stored binlogs cannot reach is an error naming the latest time that
//!   can be reached, where MOCO loads the dump alone and reports success (the harm of #563);
//! * `spec.restore.users` and `spec.restore.schema` are checked before anything runs.
//!
//! By topic: [`command_line`], what a command line is and how the tools connect; [`backup`]
//! and [`restore`], the command lines of each Job; [`source`], which instance a backup is
//! taken from; [`keys`], the objects' keys and the restore's choice among them.

pub mod backup;
pub mod command_line;
pub mod keys;
pub mod restore;
pub mod source;
#[cfg(test)]
mod test_support;

/// The Jobs' working directory (`--work-dir`, the `work` volume).
pub const WORK_DIR: &str = "/work";
/// The directory under the work dir that `dump-instance` writes and `dump.tar` holds.
pub const DUMP_DIR: &str = "dump";
/// The directory under the work dir that `mysqlbinlog` writes and `binlog.tar.zst` holds.
pub const BINLOG_DIR: &str = "binlog";
/// The directory under the work dir that `mysqlbinlog` uses for temporary files on replay
/// (the container's root file system is read-only, and the files can be large).
pub const TMP_DIR: &str = "tmp";
/// The prefix of MySQL's binary log files in MOCO's instances (`log_bin = binlog`).
pub const BINLOG_PREFIX: &str = "binlog.";

/// Everything else that stops a backup or restore step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// No instance can be backed up (MOCO's message).
    #[error("no ready pod exists")]
    NoReadyInstance,
    /// `SHOW BINARY LOGS` listed nothing on the chosen source.
    #[error("no binlog files found")]
    NoBinaryLogs,
    /// The extracted binlog tarball holds no `binlog.*` file.
    #[error("no binlog files in {dir}")]
    NoBinlogFiles {
        /// The directory searched.
        dir: String,
    },
    /// The dump's `@.json` does not say which GTIDs it holds.
    #[error("dump metadata @.json: {reason}")]
    DumpMetadata {
        /// What is wrong.
        reason: String,
    },
}

/// Sorts binlog file names by their sequence number (`binlog.000010` after `binlog.000009`
/// whatever the digits), as MOCO's `SortBinlogs`; names without one sort first, by name.
pub fn sort_binlog_files(names: &mut [String]) {
    names.sort_by_cached_key(|n| {
        let number = n
            .split_once('.')
            .filter(|(_, suffix)| !suffix.contains('.'))
            .and_then(|(_, suffix)| suffix.parse::<u64>().ok())
            .unwrap_or(0);
        (number, n.clone())
    });
}

#[cfg(test)]
mod tests {
    use super::test_support::strings;
    use super::*;

    #[test]
    fn binlog_files_sort_by_number_not_text() {
        let mut names = strings(&["binlog.1000000", "binlog.999999", "binlog.000002", "odd"]);
        sort_binlog_files(&mut names);
        assert_eq!(
            names,
            strings(&["odd", "binlog.000002", "binlog.999999", "binlog.1000000"])
        );
    }
}
