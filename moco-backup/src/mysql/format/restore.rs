//! The restore's command lines (`bkop.LoadDump`, `bkop.LoadBinlog`): `spec.restore`'s
//! filters checked before anything runs, the tarballs unpacked (each its one directory),
//! the dump loaded with `mysqlsh`, and the binlogs replayed up to the restore point with
//! `mysqlbinlog | mysql`.

use std::num::NonZeroU32;

use moco_core::moco_accounts::Account;
use moco_core::time::Timestamp;

use super::command_line::{
    CommandLine, Endpoint, PasswordInput, Pipeline, client_connection, mysqlsh_connection,
    option_file_input,
};
use super::{BINLOG_DIR, BINLOG_PREFIX, DUMP_DIR, FormatError, TMP_DIR, sort_binlog_files};

/// The CRD field [`RestoreFilter`] reports for a bad user list.
pub const USERS_FIELD: &str = "spec.restore.users";
/// The CRD field [`RestoreFilter`] reports for a bad schema.
pub const SCHEMA_FIELD: &str = "spec.restore.schema";
/// The longest schema name MySQL accepts.
const MAX_SCHEMA_LEN: usize = 64;

/// The optional filters of `spec.restore`, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreFilter {
    /// `schema`: the one schema to load and replay.
    pub schema: Option<String>,
    /// `users`: the accounts to load, as given (comma-separated `user@host`).
    pub users: Option<String>,
}

/// A `spec.restore` filter that would not do what its user meant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestoreSpecError {
    /// An entry of `spec.restore.users`.
    #[error("{field}: entry {entry:?}: {reason}")]
    Users {
        /// Always [`USERS_FIELD`].
        field: &'static str,
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `spec.restore.schema`.
    #[error("{field}: {schema:?}: {reason}")]
    Schema {
        /// Always [`SCHEMA_FIELD`].
        field: &'static str,
        /// The value as written.
        schema: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl RestoreFilter {
    /// Checks `spec.restore.schema` and `spec.restore.users` as the restore Job receives them
    /// (empty strings when unset).
    ///
    /// `users` is a comma-separated list of accounts, each `user@host` or `user` (every host,
    /// as `mysqlsh` reads it), either part unquoted or in single quotes. Rejected: empty
    /// entries (a doubled or trailing comma), blanks (`mysqlsh` would look for a user whose
    /// name starts with a space), an empty user or host, a second `@`, stray quotes. The
    /// accepted text is passed to `mysqlsh` unchanged, as MOCO does.
    ///
    /// `schema` is one schema name: `mysqlsh` would read a comma as a list while `mysqlbinlog
    /// --database` takes one name, so the load and the replay would disagree.
    pub fn new(schema: &str, users: &str) -> Result<Self, RestoreSpecError> {
        let schema = if schema.is_empty() {
            None
        } else {
            check_schema(schema)?;
            Some(schema.to_owned())
        };
        let users = if users.is_empty() {
            None
        } else {
            for entry in users.split(',') {
                check_account(entry)?;
            }
            Some(users.to_owned())
        };
        Ok(RestoreFilter { schema, users })
    }
}

fn check_schema(schema: &str) -> Result<(), RestoreSpecError> {
    let err = |reason| RestoreSpecError::Schema {
        field: SCHEMA_FIELD,
        schema: schema.to_owned(),
        reason,
    };
    if schema.chars().count() > MAX_SCHEMA_LEN {
        return Err(err("longer than 64 characters"));
    }
    if schema.contains(',') {
        return Err(err(
            "one schema only: a comma would make a list for the load but not for the binlog replay",
        ));
    }
    if schema.chars().any(char::is_control) {
        return Err(err("contains a control character"));
    }
    if schema.ends_with(' ') {
        return Err(err("ends with a space (MySQL does not allow it)"));
    }
    Ok(())
}

fn check_account(entry: &str) -> Result<(), RestoreSpecError> {
    let err = |reason| RestoreSpecError::Users {
        field: USERS_FIELD,
        entry: entry.to_owned(),
        reason,
    };
    if entry.is_empty() {
        return Err(err("empty entry (doubled or trailing comma)"));
    }
    if entry.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err("contains a blank or control character"));
    }
    let (user, rest) = account_part(entry).map_err(err)?;
    if user.is_empty() {
        return Err(err("empty user name"));
    }
    if rest.is_empty() {
        return Ok(());
    }
    let Some(host_text) = rest.strip_prefix('@') else {
        return Err(err("expected user@host"));
    };
    let (host, rest) = account_part(host_text).map_err(err)?;
    if host.is_empty() {
        return Err(err("empty host (use % for any host)"));
    }
    if !rest.is_empty() {
        return Err(err("more than one @ (quote a user name that contains one)"));
    }
    Ok(())
}

/// One part of an account, unquoted up to `@` or in single quotes, and what follows it.
fn account_part(text: &str) -> Result<(&str, &str), &'static str> {
    if let Some(quoted) = text.strip_prefix('\'') {
        let end = quoted.find('\'').ok_or("unterminated quote")?;
        return Ok((&quoted[..end], &quoted[end + 1..]));
    }
    let end = text.find('@').unwrap_or(text.len());
    let part = &text[..end];
    if part.contains(['\'', '"', '`']) {
        return Err("stray quote (quote a whole part: 'user'@'host')");
    }
    Ok((part, &text[end..]))
}

/// What instance 0 is set to before the load (MOCO's `PrepareRestore`): `load-dump` needs
/// `LOAD DATA LOCAL`, and writes (turning `read_only` off turns `super_read_only` off too).
pub const OPEN_FOR_LOAD: [&str; 2] = ["SET GLOBAL local_infile=1", "SET GLOBAL read_only=0"];

/// What instance 0 is set to after the load and replay (MOCO's `FinishRestore`): read-only
/// until the clustering has configured the restored cluster, and no `LOAD DATA LOCAL`.
pub const CLOSE_AFTER_LOAD: [&str; 2] =
    ["SET GLOBAL super_read_only=1", "SET GLOBAL local_infile=0"];

/// The dump tarball unpacked into the work dir (it holds `dump/`, and only that is unpacked).
pub fn dump_extract(work_dir: &str) -> CommandLine {
    CommandLine::new("tar", tar_extract(work_dir, DUMP_DIR))
}

/// `tar -x` of the member `top` only (and what is under it): a tarball from the bucket has
/// no say over the rest of the work dir, where the option files with passwords are.
fn tar_extract(work_dir: &str, top: &str) -> Vec<String> {
    ["-C", work_dir, "-x", "-f", "-", top]
        .map(String::from)
        .to_vec()
}

/// The binlog tarball unpacked into the work dir (it holds `binlog/`, and only that is
/// unpacked): `zstd -d | tar -x`.
pub fn binlog_extract(work_dir: &str) -> Pipeline {
    Pipeline {
        stages: vec![
            CommandLine::new("zstd", vec!["-d".into(), "--no-progress".into()]),
            CommandLine::new("tar", tar_extract(work_dir, BINLOG_DIR)),
        ],
    }
}

/// The load (`bkop.LoadDump`): `mysqlsh … util load-dump <work>/dump` as `moco-admin` into the
/// new, empty instance, with the dump's users (MOCO's own were never dumped), tables analysed,
/// nothing written to the binlog, indexes built after the data, and `gtid_executed` set to the
/// dump's so the replay and later replication continue from it. [`RestoreFilter`] narrows it
/// to one schema and to some accounts.
pub fn load_dump(
    target: &Endpoint,
    work_dir: &str,
    threads: NonZeroU32,
    filter: &RestoreFilter,
) -> CommandLine {
    let mut args = mysqlsh_connection(Account::Admin, target);
    args.extend([
        "load-dump".into(),
        format!("{work_dir}/{DUMP_DIR}"),
        format!("--threads={threads}"),
        "--loadUsers=true".into(),
        "--analyzeTables=on".into(),
        "--skipBinlog=true".into(),
        "--deferTableIndexes=all".into(),
        "--updateGtidSet=replace".into(),
    ]);
    if let Some(schema) = &filter.schema {
        args.push(format!("--includeSchemas={schema}"));
    }
    if let Some(users) = &filter.users {
        args.push(format!("--includeUsers={users}"));
    }
    CommandLine {
        password: PasswordInput::Stdin,
        ..CommandLine::new("mysqlsh", args)
    }
}

/// The binlog files of an unpacked tarball, given the names in `<work>/binlog/`: only
/// `binlog.<digits>`, in sequence order, as full paths. An empty tarball is an error, as in
/// MOCO. (MOCO takes every `binlog.*`, which would hand a stray `binlog.index` to
/// `mysqlbinlog`; a raw fetch writes none, so the stricter rule changes nothing real.)
pub fn replay_files(work_dir: &str, names: &[String]) -> Result<Vec<String>, FormatError> {
    let mut files: Vec<String> = names
        .iter()
        .filter(|n| {
            n.strip_prefix(BINLOG_PREFIX)
                .is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
        })
        .cloned()
        .collect();
    if files.is_empty() {
        return Err(FormatError::NoBinlogFiles {
            dir: format!("{work_dir}/{BINLOG_DIR}"),
        });
    }
    sort_binlog_files(&mut files);
    Ok(files
        .into_iter()
        .map(|n| format!("{work_dir}/{BINLOG_DIR}/{n}"))
        .collect())
}

/// The replay (`bkop.LoadBinlog`): `mysqlbinlog` decodes `files` (from [`replay_files`]) up to
/// `stop_at`, read as UTC because `TZ=Etc/UTC` (MOCO's backup keys and restore points are UTC),
/// with its temporary files in `<work>/tmp` (the runner creates it); `mysql --binary-mode`
/// applies the stream as `moco-admin`. With a schema, only that schema's events are decoded
/// (`--database`, after the files as MOCO places it).
pub fn binlog_replay(
    target: &Endpoint,
    work_dir: &str,
    stop_at: Timestamp,
    files: &[String],
    filter: &RestoreFilter,
) -> Pipeline {
    let mut decode_args = vec![format!("--stop-datetime={}", stop_datetime(stop_at))];
    decode_args.extend(files.iter().cloned());
    if let Some(schema) = &filter.schema {
        decode_args.push(format!("--database={schema}"));
    }
    let decode = CommandLine {
        env: vec![
            ("TZ".into(), "Etc/UTC".into()),
            ("TMPDIR".into(), format!("{work_dir}/{TMP_DIR}")),
        ],
        ..CommandLine::new("mysqlbinlog", decode_args)
    };
    let mut apply_args = client_connection(Account::Admin, target, work_dir);
    apply_args.insert(1, "--binary-mode".into());
    let apply = CommandLine {
        password: option_file_input(Account::Admin, work_dir),
        ..CommandLine::new("mysql", apply_args)
    };
    Pipeline {
        stages: vec![decode, apply],
    }
}

/// `YYYY-MM-DD hh:mm:ss`, `mysqlbinlog --stop-datetime`'s form (one argument: no quotes).
fn stop_datetime(t: Timestamp) -> String {
    // Display is `YYYY-MM-DDThh:mm:ssZ`.
    t.to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::WORK_DIR;
    use super::super::backup::{binlog_fetch, dump_instance};
    use super::super::command_line::client_option_file;
    use super::super::test_support::{strings, t, threads};
    use super::*;

    /// MOCO's extractions, narrowed to the one directory each tarball holds.
    #[test]
    fn extracts_are_mocos() {
        assert_eq!(
            dump_extract(WORK_DIR).to_string(),
            "tar -C /work -x -f - dump"
        );
        assert_eq!(
            binlog_extract(WORK_DIR).to_string(),
            "zstd -d --no-progress | tar -C /work -x -f - binlog"
        );
    }

    #[test]
    fn load_dump_is_mocos_with_and_without_filters() {
        let base = strings(&[
            "mysql://moco-admin@10.64.1.2:3306",
            "--passwords-from-stdin",
            "--save-passwords=never",
            "-C",
            "False",
            "--",
            "util",
            "load-dump",
            "/work/dump",
            "--threads=4",
            "--loadUsers=true",
            "--analyzeTables=on",
            "--skipBinlog=true",
            "--deferTableIndexes=all",
            "--updateGtidSet=replace",
        ]);
        let target = Endpoint::pod("10.64.1.2");
        let cases: [(&str, &str, &[&str]); 4] = [
            ("", "", &[]),
            ("app", "", &["--includeSchemas=app"]),
            ("", "app@%", &["--includeUsers=app@%"]),
            (
                "app",
                "app@%,'report'@'10.0.%'",
                &[
                    "--includeSchemas=app",
                    "--includeUsers=app@%,'report'@'10.0.%'",
                ],
            ),
        ];
        for (schema, users, extra) in cases {
            let filter = RestoreFilter::new(schema, users).unwrap();
            let cmd = load_dump(&target, WORK_DIR, threads(4), &filter);
            let mut expected = base.clone();
            expected.extend(strings(extra));
            assert_eq!(cmd.program, "mysqlsh");
            assert_eq!(cmd.args, expected, "schema {schema:?} users {users:?}");
            assert_eq!(cmd.password, PasswordInput::Stdin);
        }
    }

    #[test]
    fn binlog_replay_is_mocos_pipe() {
        let files = replay_files(
            WORK_DIR,
            &strings(&["binlog.000010", "binlog.index", "binlog.000009", "other"]),
        )
        .unwrap();
        let point = t("2023-09-03T00:00:00Z");
        for (schema, database) in [("", None), ("app", Some("--database=app"))] {
            let filter = RestoreFilter::new(schema, "").unwrap();
            let p = binlog_replay(
                &Endpoint::pod("10.64.1.2"),
                WORK_DIR,
                point,
                &files,
                &filter,
            );
            let decode = &p.stages[0];
            let mut expected = strings(&[
                "--stop-datetime=2023-09-03 00:00:00",
                "/work/binlog/binlog.000009",
                "/work/binlog/binlog.000010",
            ]);
            expected.extend(database.map(String::from));
            assert_eq!(decode.program, "mysqlbinlog");
            assert_eq!(decode.args, expected);
            assert_eq!(
                decode.env,
                vec![
                    ("TZ".to_string(), "Etc/UTC".to_string()),
                    ("TMPDIR".to_string(), "/work/tmp".to_string())
                ]
            );
            assert_eq!(decode.password, PasswordInput::None);
            let apply = &p.stages[1];
            assert_eq!(apply.program, "mysql");
            assert_eq!(
                apply.args,
                strings(&[
                    "--defaults-extra-file=/work/moco-admin.cnf",
                    "--binary-mode",
                    "-h",
                    "10.64.1.2",
                    "--port",
                    "3306",
                    "--protocol=tcp",
                    "-u",
                    "moco-admin",
                ])
            );
            assert!(apply.env.is_empty());
            assert_eq!(
                apply.password,
                PasswordInput::OptionFile {
                    path: "/work/moco-admin.cnf".into()
                }
            );
        }
    }

    #[test]
    fn replay_needs_binlog_files() {
        assert_eq!(
            replay_files(WORK_DIR, &strings(&["binlog.index", "relay.000001"])),
            Err(FormatError::NoBinlogFiles {
                dir: "/work/binlog".into()
            })
        );
    }

    #[test]
    fn no_password_in_any_argument_or_variable() {
        let secret = "pa\"ss\\word";
        let target = Endpoint::pod("10.0.0.1");
        let filter = RestoreFilter::new("app", "app@%").unwrap();
        let mut all = vec![
            dump_instance(&target, WORK_DIR, threads(2), None),
            binlog_fetch(&target, WORK_DIR, "", "binlog.000001"),
            load_dump(&target, WORK_DIR, threads(2), &filter),
        ];
        all.extend(
            binlog_replay(&target, WORK_DIR, t("2024-01-01T00:00:00Z"), &[], &filter).stages,
        );
        for cmd in &all {
            for arg in &cmd.args {
                // MOCO's `-p<password>` / `--password=`: never.
                assert!(
                    !(arg.starts_with("-p") || arg.starts_with("--password=")),
                    "{cmd}"
                );
            }
        }
        assert_eq!(
            client_option_file(secret),
            "[client]\npassword=\"pa\\\"ss\\\\word\"\n"
        );
    }

    #[test]
    fn users_accepts_what_mysqlsh_reads() {
        for users in [
            "app@%",
            "app@%,report@10.0.0.%",
            "app",
            "'app'@'%'",
            "'odd@name'@'localhost'",
            "app-user@host.example.com",
        ] {
            assert_eq!(
                RestoreFilter::new("", users).unwrap().users.as_deref(),
                Some(users)
            );
        }
        assert_eq!(
            RestoreFilter::new("", "").unwrap(),
            RestoreFilter::default()
        );
    }

    #[test]
    fn malformed_users_name_the_field_and_the_entry() {
        let cases = [
            ("app@%,", "", "empty entry (doubled or trailing comma)"),
            ("app@%,,b@%", "", "empty entry (doubled or trailing comma)"),
            (
                "app@%, b@%",
                " b@%",
                "contains a blank or control character",
            ),
            ("@%", "@%", "empty user name"),
            ("app@", "app@", "empty host (use % for any host)"),
            (
                "a@b@c",
                "a@b@c",
                "more than one @ (quote a user name that contains one)",
            ),
            ("'app@%", "'app@%", "unterminated quote"),
            (
                "ap'p@%",
                "ap'p@%",
                "stray quote (quote a whole part: 'user'@'host')",
            ),
            ("'app'x@%", "'app'x@%", "expected user@host"),
            ("''@%", "''@%", "empty user name"),
        ];
        for (users, entry, reason) in cases {
            let err = RestoreFilter::new("", users).unwrap_err();
            assert_eq!(
                err,
                RestoreSpecError::Users {
                    field: "spec.restore.users",
                    entry: entry.into(),
                    reason
                },
                "{users:?}"
            );
            assert!(err.to_string().starts_with("spec.restore.users: "), "{err}");
        }
    }

    #[test]
    fn schema_is_one_name() {
        assert_eq!(
            RestoreFilter::new("app_db", "").unwrap().schema.as_deref(),
            Some("app_db")
        );
        let long = "x".repeat(65);
        for (schema, reason) in [
            (
                "a,b",
                "one schema only: a comma would make a list for the load but not for the binlog replay",
            ),
            ("app ", "ends with a space (MySQL does not allow it)"),
            ("a\nb", "contains a control character"),
            (long.as_str(), "longer than 64 characters"),
        ] {
            let err = RestoreFilter::new(schema, "").unwrap_err();
            assert_eq!(
                err,
                RestoreSpecError::Schema {
                    field: "spec.restore.schema",
                    schema: schema.into(),
                    reason
                }
            );
        }
    }
}
