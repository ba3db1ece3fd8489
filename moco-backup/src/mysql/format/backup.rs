//! The backup's command lines (`bkop.DumpFull`, `bkop.DumpBinlog`): the dump with `mysqlsh`
//! and its tarball, the binlogs since the previous backup fetched with `mysqlbinlog` and
//! packed with `tar | zstd`, and what the backup reads of the source for its status.

use std::num::{NonZeroU32, NonZeroU64};

use moco_core::moco_accounts::Account;

use moco_core::dialect::Dialect;
use moco_core::resources::ByteRate;

use super::command_line::{
    CommandLine, Endpoint, PasswordInput, Pipeline, client_connection, mysqlsh_connection,
    option_file_input,
};
use super::source::PreviousBackup;
use super::{BINLOG_DIR, DUMP_DIR, FormatError, sort_binlog_files};

/// The full dump (`bkop.DumpFull`): `mysqlsh … util dump-instance <work>/dump` as
/// `moco-backup`, leaving out MOCO's own eight accounts (the restored cluster has its own),
/// with `threads` workers. mysqlsh compresses the chunks with zstd by default. Its `maxRate`
/// caps each thread's reads, so `max_rate` (beyond MOCO) is shared among them.
pub fn dump_instance(
    source: &Endpoint,
    work_dir: &str,
    threads: NonZeroU32,
    max_rate: Option<&ByteRate>,
) -> CommandLine {
    let excluded: Vec<&str> = Account::ALL.iter().map(|a| a.name()).collect();
    let mut args = mysqlsh_connection(Account::Backup, source);
    args.extend([
        "dump-instance".into(),
        format!("{work_dir}/{DUMP_DIR}"),
        format!("--excludeUsers={}", excluded.join(",")),
        format!("--threads={threads}"),
    ]);
    if let Some(rate) = max_rate {
        let per_thread = rate.per_worker(NonZeroU64::from(threads));
        args.push(format!("--maxRate={per_thread}"));
    }
    CommandLine {
        password: PasswordInput::Stdin,
        ..CommandLine::new("mysqlsh", args)
    }
}

/// The dump's directory as one tar stream to upload as `dump.tar` (uncompressed: the chunks
/// already are).
pub fn dump_archive(work_dir: &str) -> CommandLine {
    CommandLine::new("tar", tar_create(work_dir, DUMP_DIR))
}

fn tar_create(work_dir: &str, dir: &str) -> Vec<String> {
    ["-c", "-f", "-", "-C", work_dir, dir]
        .map(String::from)
        .to_vec()
}

/// The binlog file the fetch starts from: the previous backup's current file when the source
/// is the same instance (its files since then are all there), else the oldest file the new
/// source still has (`binary_logs`, `SHOW BINARY LOGS`); `--exclude-gtids` drops what the
/// previous dump already holds either way. MOCO also passes an empty recorded name through
/// and fails; starting from the oldest file is what it would have had to do.
pub fn binlog_start_file(
    previous: &PreviousBackup,
    source_index: u32,
    binary_logs: &[String],
) -> Result<String, FormatError> {
    if source_index == previous.source_index && !previous.binlog_filename.is_empty() {
        return Ok(previous.binlog_filename.clone());
    }
    let mut sorted = binary_logs.to_vec();
    sort_binlog_files(&mut sorted);
    sorted.into_iter().next().ok_or(FormatError::NoBinaryLogs)
}

/// The binlog fetch (`bkop.DumpBinlog`): every transaction since the previous backup, read from
/// the source as a replica would (`BINLOG-DUMP-GTIDS`), minus the previous dump's
/// `gtid_set` (passed as MOCO stored it), from `start_file` through the last file (`-t`,
/// `--to-last-log`), kept raw in `<work>/binlog/`.
pub fn binlog_fetch(
    source: &Endpoint,
    work_dir: &str,
    exclude_gtids: &str,
    start_file: &str,
) -> CommandLine {
    let mut args = client_connection(Account::Backup, source, work_dir);
    args.extend([
        "--get-server-public-key".into(),
        "--read-from-remote-master=BINLOG-DUMP-GTIDS".into(),
        format!("--exclude-gtids={exclude_gtids}"),
        "-t".into(),
        "--raw".into(),
        format!("--result-file={work_dir}/{BINLOG_DIR}/"),
        start_file.into(),
    ]);
    CommandLine {
        password: option_file_input(Account::Backup, work_dir),
        ..CommandLine::new("mysqlbinlog", args)
    }
}

/// The fetched binlogs as one stream to upload as `binlog.tar.zst`: `tar` piped into `zstd`
/// with `threads` workers.
pub fn binlog_archive(work_dir: &str, threads: NonZeroU32) -> Pipeline {
    Pipeline {
        stages: vec![
            CommandLine::new("tar", tar_create(work_dir, BINLOG_DIR)),
            CommandLine::new("zstd", vec!["--no-progress".into(), format!("-T{threads}")]),
        ],
    }
}

/// The statement whose first column is the binlog file a server writes now
/// (`status.backup.binlogFilename`): MySQL 8.4 renamed `SHOW MASTER STATUS`.
pub fn binlog_status_statement(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Mysql84 => "SHOW BINARY LOG STATUS",
        Dialect::Mysql80 | Dialect::Mariadb => "SHOW MASTER STATUS",
    }
}

/// `gtidExecuted` of the dump's `@.json`: the GTID set a restore of it starts from, stored as
/// `status.backup.gtidSet` for the next backup's `--exclude-gtids`. MOCO reads a missing key
/// as empty and the next binlog fetch then filters nothing; here it is an error.
pub fn dump_gtid_executed(at_json: &str) -> Result<String, FormatError> {
    let value: serde_json::Value =
        serde_json::from_str(at_json).map_err(|e| FormatError::DumpMetadata {
            reason: e.to_string(),
        })?;
    match value.get("gtidExecuted") {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(FormatError::DumpMetadata {
            reason: "gtidExecuted is not a string".into(),
        }),
        None => Err(FormatError::DumpMetadata {
            reason: "no gtidExecuted".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::WORK_DIR;
    use super::super::source::tests::previous;
    use super::super::test_support::{strings, threads};
    use super::*;

    // Argument by argument against MOCO's (`-p<password>` replaced).

    const MOCO_USERS: &str = "moco-admin,moco-agent,moco-repl,moco-clone-donor,moco-exporter,moco-backup,moco-readonly,moco-writable";

    #[test]
    fn dump_instance_is_mocos_dump_full() {
        let cmd = dump_instance(&Endpoint::pod("10.64.0.7"), WORK_DIR, threads(4), None);
        assert_eq!(cmd.program, "mysqlsh");
        assert_eq!(
            cmd.args,
            strings(&[
                "mysql://moco-backup@10.64.0.7:3306",
                "--passwords-from-stdin",
                "--save-passwords=never",
                "-C",
                "False",
                "--",
                "util",
                "dump-instance",
                "/work/dump",
                &format!("--excludeUsers={MOCO_USERS}"),
                "--threads=4",
            ])
        );
        assert!(cmd.env.is_empty());
        assert_eq!(cmd.password, PasswordInput::Stdin);
    }

    #[test]
    fn a_rate_cap_is_shared_among_mysqlshs_threads() {
        let rate = ByteRate::parse("100M").unwrap();
        let endpoint = Endpoint::pod("10.64.0.7");
        let cmd = dump_instance(&endpoint, WORK_DIR, threads(4), Some(&rate));
        let without = dump_instance(&endpoint, WORK_DIR, threads(4), None);
        // The same command, with the cap last: 100 MB/s over four threads.
        assert_eq!(cmd.args[..without.args.len()], without.args[..]);
        assert_eq!(
            cmd.args[without.args.len()..],
            strings(&["--maxRate=25000000"])
        );
        let one = dump_instance(&endpoint, WORK_DIR, threads(1), Some(&rate));
        assert_eq!(one.args.last().unwrap(), "--maxRate=100000000");
    }

    #[test]
    fn mysqlsh_uri_brackets_ipv6_like_join_host_port() {
        let cmd = dump_instance(&Endpoint::pod("fd00::7"), WORK_DIR, threads(1), None);
        assert_eq!(cmd.args[0], "mysql://moco-backup@[fd00::7]:3306");
        assert_eq!(cmd.args.last().unwrap(), "--threads=1");
    }

    #[test]
    fn dump_archive_is_mocos_tar() {
        assert_eq!(
            dump_archive(WORK_DIR),
            CommandLine {
                program: "tar".into(),
                args: strings(&["-c", "-f", "-", "-C", "/work", "dump"]),
                env: vec![],
                password: PasswordInput::None,
            }
        );
    }

    #[test]
    fn binlog_fetch_is_mocos_dump_binlog() {
        let cmd = binlog_fetch(
            &Endpoint::pod("10.64.0.8"),
            WORK_DIR,
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77",
            "binlog.000012",
        );
        assert_eq!(cmd.program, "mysqlbinlog");
        assert_eq!(
            cmd.args,
            strings(&[
                "--defaults-extra-file=/work/moco-backup.cnf",
                "-h",
                "10.64.0.8",
                "--port",
                "3306",
                "--protocol=tcp",
                "-u",
                "moco-backup",
                "--get-server-public-key",
                "--read-from-remote-master=BINLOG-DUMP-GTIDS",
                "--exclude-gtids=3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77",
                "-t",
                "--raw",
                "--result-file=/work/binlog/",
                "binlog.000012",
            ])
        );
        assert!(cmd.env.is_empty());
        assert_eq!(
            cmd.password,
            PasswordInput::OptionFile {
                path: "/work/moco-backup.cnf".into()
            }
        );
    }

    #[test]
    fn binlog_archive_is_tar_into_zstd() {
        let p = binlog_archive(WORK_DIR, threads(8));
        assert_eq!(p.stages.len(), 2);
        assert_eq!(p.stages[0].program, "tar");
        assert_eq!(
            p.stages[0].args,
            strings(&["-c", "-f", "-", "-C", "/work", "binlog"])
        );
        assert_eq!(p.stages[1].program, "zstd");
        assert_eq!(p.stages[1].args, strings(&["--no-progress", "-T8"]));
        assert_eq!(
            p.to_string(),
            "tar -c -f - -C /work binlog | zstd --no-progress -T8"
        );
    }

    #[test]
    fn dump_metadata_gives_the_gtid_set() {
        let json = r#"{"dumper":"mysqlsh Ver 8.4.8","gtidExecuted":"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5","tzUtc":true}"#;
        assert_eq!(
            dump_gtid_executed(json).unwrap(),
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
        );
        assert!(matches!(
            dump_gtid_executed(r#"{"dumper":"x"}"#),
            Err(FormatError::DumpMetadata { .. })
        ));
        assert!(matches!(
            dump_gtid_executed("{"),
            Err(FormatError::DumpMetadata { .. })
        ));
    }

    #[test]
    fn binlog_start_file_table() {
        let prev = previous(1, "uuid-1", &[]);
        let logs = strings(&["binlog.000010", "binlog.000009", "binlog.000011"]);
        assert_eq!(binlog_start_file(&prev, 1, &logs).unwrap(), "binlog.000003");
        assert_eq!(binlog_start_file(&prev, 2, &logs).unwrap(), "binlog.000009");
        assert_eq!(
            binlog_start_file(&prev, 2, &[]),
            Err(FormatError::NoBinaryLogs)
        );
        let unrecorded = PreviousBackup {
            binlog_filename: String::new(),
            ..prev
        };
        assert_eq!(
            binlog_start_file(&unrecorded, 1, &logs).unwrap(),
            "binlog.000009"
        );
    }
}
