//! Replaying archived binlogs into a restored instance, up to the chosen second: each file of
//! the [`Plan`] is fetched and checked against its metadata, read to find the last
//! transaction committed before the point, and applied with `mariadb-binlog
//! --start-position=<after> --stop-position=<last> | mariadb --binary-mode`. GTIDs are exact
//! where `--stop-datetime` would depend on the tool's time zone. After each file the server's
//! position must be the one planned; the replayed transactions keep their GTIDs, so the
//! restored history continues the source's.
//!
//! The source's binlogs may hold its own account statements: a rotation of MOCO's passwords
//! (`ALTER USER 'moco-admin'@'%' IDENTIFIED VIA …`) would give the restored cluster the
//! source's passwords, locking its operator out and handing the source's namespace the new
//! cluster's admin account. So MOCO's accounts are read as the restored server holds them
//! before the replay (`SHOW CREATE USER`, this cluster's passwords as hashes), and put back
//! after each file, unlogged, in the client session that replayed it: that session logged in
//! before any replayed statement could change the password it used.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use moco_adapters::instance::clone::{log_handle, write_private};
use moco_adapters::mysql::{DEFAULT_ACCOUNT_HOST, MysqlInstance, sql};
use moco_cluster::ports::{Credentials, MysqlPort as _};
use moco_core::moco_accounts::Account;
use moco_core::option_file::{quote_value, tls_client_options};
use mysql_async::prelude::Queryable as _;
use tokio::io::BufReader;
use tokio::process::Command;

use super::archive::ARCHIVE_FOLDER;
use super::events::{self, Gtid};
use super::timeline::{Plan, Segment, Step};
use crate::bucket::{Bucket, BucketError};
use crate::guard::bounded::{Bounded, drain_at_most};
use crate::mariadb::physical::Hashing;

/// The tools and the server of a replay.
#[derive(Clone, Debug)]
pub struct ReplayTarget {
    /// `mariadb-binlog`.
    pub binlog_tool: PathBuf,
    /// `mariadb` (the client).
    pub client: PathBuf,
    /// The restored server's host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// An account that may replay binlogs (`BINLOG REPLAY`): moco-admin.
    pub credentials: Credentials,
    /// The CA that verifies the server, when it serves TLS.
    pub ssl_ca: Option<PathBuf>,
    /// Where files are fetched to (emptied of them afterwards).
    pub scratch: PathBuf,
    /// Where the tools' messages go.
    pub log: PathBuf,
}

/// What a replay applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Files applied.
    pub files: usize,
    /// Transactions applied.
    pub transactions: u64,
    /// The last one.
    pub last: Option<Gtid>,
}

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The object store.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// An archived file does not match its metadata, or is not a binlog.
    #[error("archived binlog {key}: {message}")]
    Corrupt {
        /// The object.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// Applying failed.
    #[error("replaying {file}: {message}")]
    Apply {
        /// The file.
        file: String,
        /// What failed.
        message: String,
    },
}

/// Applies `plan`'s binlogs (segments of the archive under `prefix`) to `target`, whose
/// server `admin` reaches; the base backup must be in place and started.
pub async fn replay(
    bucket: &Bucket,
    prefix: &str,
    segments: &[Segment],
    plan: &Plan,
    target: &ReplayTarget,
    admin: &MysqlInstance,
) -> Result<Replayed, ReplayError> {
    let mut done = Replayed::default();
    let options = options_file(target);
    std::fs::create_dir_all(&target.scratch).map_err(|e| ReplayError::Apply {
        file: target.scratch.display().to_string(),
        message: e.to_string(),
    })?;
    write_private(
        &options,
        &format!(
            "[client]\nhost={}\nport={}\nuser={}\npassword={}\n{}",
            quote_value(&target.host),
            target.port,
            quote_value(&target.credentials.user),
            quote_value(&target.credentials.password),
            tls_client_options(target.ssl_ca.as_deref())
        ),
    )
    .map_err(|e| ReplayError::Apply {
        file: options.display().to_string(),
        message: e.to_string(),
    })?;
    // A restored instance starts read-only; nothing but this replay reaches it yet (its
    // cluster's endpoints are not up), and it goes back to read-only afterwards.
    let read_only_error = |message: String| ReplayError::Apply {
        file: "read_only".to_owned(),
        message,
    };
    let accounts = moco_accounts(admin)
        .await
        .map_err(|message| ReplayError::Apply {
            file: "MOCO's accounts".to_owned(),
            message,
        })?;
    let was_read_only = read_only(admin).await.map_err(read_only_error)?;
    admin
        .set_writable()
        .await
        .map_err(|e| read_only_error(e.to_string()))?;
    let result = async {
        for (index, step) in plan.steps.iter().enumerate() {
            let segment = &segments[step.segment];
            let file = scratch_file(&target.scratch, index);
            let applied = apply_step(
                bucket, prefix, segment, step, plan, target, &file, &accounts,
            )
            .await;
            let _ = std::fs::remove_file(&file);
            let Some((last, taken, wanted)) = applied? else {
                break;
            };
            let reached =
                position(admin, last.domain)
                    .await
                    .map_err(|message| ReplayError::Apply {
                        file: segment.file.clone(),
                        message,
                    })?;
            if reached != Some(last) {
                return Err(ReplayError::Apply {
                    file: segment.file.clone(),
                    message: format!(
                        "the server is at {} after the replay, not at {last} (see {})",
                        reached.map_or("nothing".to_owned(), |g| g.to_string()),
                        target.log.display()
                    ),
                });
            }
            done.files += 1;
            done.transactions += taken as u64;
            done.last = Some(last);
            if taken < wanted {
                break;
            }
        }
        Ok(())
    }
    .await;
    let _ = std::fs::remove_file(&options);
    let finished = match (&result, done.last) {
        // The replayed transactions are in the binlog; the position a replica of this
        // instance (and the instance itself, as primary) works from follows.
        (Ok(()), Some(_)) => {
            privileged(
                admin,
                &["SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos".to_owned()],
            )
            .await
        }
        _ => Ok(()),
    };
    let restored = if was_read_only {
        admin
            .set_super_read_only(std::time::Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())
    } else {
        Ok(())
    };
    result?;
    for (what, outcome) in [("gtid_slave_pos", finished), ("read_only", restored)] {
        outcome.map_err(|message| ReplayError::Apply {
            file: what.to_owned(),
            message,
        })?;
    }
    Ok(done)
}

/// Where step `index` fetches its file to: named by its position in the plan. Never by the
/// segment's `file`: that is the server's name for it as the bucket's JSON says, and whoever
/// can write to the bucket could make it `../x` or an absolute path.
fn scratch_file(scratch: &Path, index: usize) -> PathBuf {
    scratch.join(format!("step-{index:06}.binlog"))
}

/// The client's option file of a replay into `target` (its password), in the scratch dir.
fn options_file(target: &ReplayTarget) -> PathBuf {
    target.scratch.join("replay.cnf")
}

/// Fetches `segment` into `file`, applies what `step` takes of it, then `accounts` (see
/// [`after_replay`]); returns the last GTID applied, how many transactions were and how many
/// the step held (`None`: nothing before the point).
#[allow(clippy::too_many_arguments)]
async fn apply_step(
    bucket: &Bucket,
    prefix: &str,
    segment: &Segment,
    step: &Step,
    plan: &Plan,
    target: &ReplayTarget,
    file: &Path,
    accounts: &[String],
) -> Result<Option<(Gtid, usize, usize)>, ReplayError> {
    let key = format!("{prefix}/{ARCHIVE_FOLDER}/{}", segment.object.key);
    fetch(bucket, &key, segment, file).await?;
    let summary = events::summarize_file(file)
        .await
        .map_err(|e| corrupt(&key, e))?;
    let (taken, wanted) = selected(&summary.transactions, step, plan.stop_before);
    let Some(last) = taken.last().map(|t| t.gtid) else {
        return Ok(None);
    };
    apply(
        target,
        &options_file(target),
        file,
        &segment.file,
        step.after,
        last,
        &after_replay(accounts),
    )
    .await?;
    Ok(Some((last, taken.len(), wanted)))
}

/// The transactions of a file that `step` replays (those after `step.after` up to
/// `step.last`, in the step's domain), cut before the first one committed at or after
/// `stop_before`; and how many the step held before the cut.
fn selected<'a>(
    transactions: &'a [events::Transaction],
    step: &Step,
    stop_before: Option<i64>,
) -> (Vec<&'a events::Transaction>, usize) {
    let after = step.after.map_or(0, |g| g.seq);
    let wanted: Vec<&events::Transaction> = transactions
        .iter()
        .filter(|t| t.gtid.domain == step.last.domain)
        .filter(|t| after < t.gtid.seq && t.gtid.seq <= step.last.seq)
        .collect();
    let count = wanted.len();
    let taken = wanted
        .into_iter()
        .take_while(|t| stop_before.is_none_or(|s| i64::from(t.time) < s))
        .collect();
    (taken, count)
}

fn corrupt(key: &str, message: String) -> ReplayError {
    ReplayError::Corrupt {
        key: key.to_owned(),
        message,
    }
}

/// Downloads `key` into `file`, decompressing and checking size and hash. Neither the
/// unpacked file nor the bytes read go past what the segment's metadata declares: the
/// decoder stops there, and so does the read of what follows its frame.
async fn fetch(
    bucket: &Bucket,
    key: &str,
    segment: &Segment,
    file: &Path,
) -> Result<(), ReplayError> {
    let record = &segment.object;
    let stream = bucket.download(key).await?;
    let mut checked = Hashing::new(stream);
    let written = {
        let decoder =
            async_compression::tokio::bufread::ZstdDecoder::new(BufReader::new(&mut checked));
        let mut bounded = Bounded::new(decoder, record.uncompressed_size, key);
        let out = tokio::fs::File::create(file).await;
        match out {
            Ok(mut out) => tokio::io::copy(&mut bounded, &mut out).await,
            Err(e) => Err(e),
        }
    };
    let room = record.size.saturating_sub(checked.bytes);
    let drained = drain_at_most(&mut checked, room).await;
    if checked.bytes > record.size {
        return Err(corrupt(
            key,
            format!(
                "more than the {} bytes its metadata declares are stored; the rest is not read",
                record.size
            ),
        ));
    }
    if checked.bytes != record.size || checked.hex() != record.sha256 {
        return Err(corrupt(
            key,
            format!(
                "{} bytes with SHA-256 {}; its metadata says {} bytes with {}",
                checked.bytes,
                checked.hex(),
                record.size,
                record.sha256
            ),
        ));
    }
    let written = written.map_err(|e| corrupt(key, format!("unpacking: {e}")))?;
    drained.map_err(|e| corrupt(key, format!("reading: {e}")))?;
    if written != record.uncompressed_size {
        return Err(corrupt(
            key,
            format!(
                "{written} bytes unpacked; its metadata says {}",
                record.uncompressed_size
            ),
        ));
    }
    Ok(())
}

/// The command line of the binlog tool for one file.
fn binlog_args(file: &Path, after: Option<Gtid>, last: Gtid) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(after) = after {
        args.push(format!("--start-position={after}"));
    }
    args.push(format!("--stop-position={last}"));
    args.push(file.display().to_string());
    args
}

/// The accounts MOCO created on the restored server (`'moco-*'@'%'`), each as the statement
/// that gives it back its authentication as it is now: `SHOW CREATE USER` with `CREATE`
/// turned into `ALTER` (the same clauses: `IDENTIFIED BY PASSWORD '*…'`, `VIA … OR …`,
/// `REQUIRE`, limits). Hashes only: no password is read.
async fn moco_accounts(admin: &MysqlInstance) -> Result<Vec<String>, String> {
    let mut c = admin.conn().await.map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for account in Account::ALL {
        let who = sql::account(account.name(), DEFAULT_ACCOUNT_HOST);
        let shown: Option<(String,)> = c
            .query_first(format!("SHOW CREATE USER {who}"))
            .await
            .map_err(|e| format!("SHOW CREATE USER {who}: {e}"))?;
        let Some((created,)) = shown else {
            return Err(format!("SHOW CREATE USER {who}: no row"));
        };
        let rest = created
            .strip_prefix("CREATE USER ")
            .ok_or_else(|| format!("SHOW CREATE USER {who}: unexpected answer"))?;
        out.push(format!("ALTER USER {rest}"));
    }
    let _ = c.disconnect().await;
    Ok(out)
}

/// What the replay's client runs after a file's statements: MOCO's accounts put back as
/// they were before the replay ([`moco_accounts`]), unlogged (the restored history stays the
/// source's), so that a password the source changed in the file does not become the restored
/// cluster's.
fn after_replay(accounts: &[String]) -> String {
    let mut out = String::from("\nSET SESSION sql_log_bin=0;\n");
    for statement in accounts {
        out.push_str(statement);
        out.push_str(";\n");
    }
    out
}

/// Applies `file` (the server's `name`, for messages) from after `after` through `last`, then
/// `tail` in the same client session.
async fn apply(
    target: &ReplayTarget,
    options: &Path,
    file: &Path,
    name: &str,
    after: Option<Gtid>,
    last: Gtid,
    tail: &str,
) -> Result<(), ReplayError> {
    let failed = |message: String| ReplayError::Apply {
        file: name.to_owned(),
        message,
    };
    let io = |what: &str, e: std::io::Error| failed(format!("{what}: {e}"));
    let mut decoder = Command::new(&target.binlog_tool)
        .args(binlog_args(file, after, last))
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_handle(&target.log).map_err(|e| failed(e.to_string()))?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| io(&target.binlog_tool.display().to_string(), e))?;
    let mut stdout = decoder
        .stdout
        .take()
        .ok_or_else(|| failed("mariadb-binlog has no standard output".to_owned()))?;
    let mut client = Command::new(&target.client)
        .arg(format!("--defaults-extra-file={}", options.display()))
        .arg("--binary-mode")
        .stdin(Stdio::piped())
        .stdout(log_handle(&target.log).map_err(|e| failed(e.to_string()))?)
        .stderr(log_handle(&target.log).map_err(|e| failed(e.to_string()))?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| io(&target.client.display().to_string(), e))?;
    let mut stdin = client
        .stdin
        .take()
        .ok_or_else(|| failed("mariadb has no standard input".to_owned()))?;
    // The file's statements, then the tail, through one pipe; closed at the end so that the
    // client finishes. A client that exits early breaks the pipe: its status says why.
    let feed = async move {
        use tokio::io::AsyncWriteExt as _;
        tokio::io::copy(&mut stdout, &mut stdin).await?;
        stdin.write_all(tail.as_bytes()).await?;
        stdin.shutdown().await
    };
    let (fed, decoded, applied) = tokio::join!(feed, decoder.wait(), client.wait());
    let decoded = decoded.map_err(|e| io("mariadb-binlog", e))?;
    let applied = applied.map_err(|e| io("mariadb", e))?;
    if let Err(e) = fed
        && decoded.success()
        && applied.success()
    {
        return Err(io("feeding the client", e));
    }
    if !decoded.success() || !applied.success() {
        return Err(failed(format!(
            "mariadb-binlog {decoded}, mariadb {applied}; {}:\n{}",
            target.log.display(),
            crate::guard::tool_output::log_excerpt(&target.log)
        )));
    }
    Ok(())
}

/// `@@read_only`.
async fn read_only(admin: &MysqlInstance) -> Result<bool, String> {
    let mut c = admin.conn().await.map_err(|e| e.to_string())?;
    let on: Option<u8> = c
        .query_first("SELECT @@read_only")
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    Ok(on.unwrap_or(0) != 0)
}

/// Runs `statements` with the read-only-admin role enabled (MariaDB 10.11 wants
/// `READ_ONLY ADMIN` to set `gtid_slave_pos` on a read-only server).
async fn privileged(admin: &MysqlInstance, statements: &[String]) -> Result<(), String> {
    use moco_adapters::mysql::sql::privileged;
    use moco_core::dialect::Dialect;
    let mut c = admin.conn().await.map_err(|e| e.to_string())?;
    for statement in privileged(Dialect::Mariadb, statements.to_vec()) {
        c.query_drop(&statement)
            .await
            .map_err(|e| format!("{statement}: {e}"))?;
    }
    let _ = c.disconnect().await;
    Ok(())
}

/// The server's last GTID in `domain`.
async fn position(admin: &MysqlInstance, domain: u32) -> Result<Option<Gtid>, String> {
    let mut c = admin.conn().await.map_err(|e| e.to_string())?;
    let pos: Option<String> = c
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    let entries = events::parse_position(&pos.unwrap_or_default()).map_err(|e| e.to_string())?;
    Ok(entries.into_iter().find(|g| g.domain == domain))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mariadb::binlog::events::tests::g;

    #[test]
    fn a_step_takes_what_was_committed_before_the_point() {
        let t = |seq, time| events::Transaction {
            gtid: g(0, 1, seq),
            time,
        };
        let file = [t(10, 100), t(11, 100), t(12, 101), t(13, 102), t(14, 102)];
        let step = Step {
            segment: 0,
            after: Some(g(0, 1, 10)),
            last: g(0, 1, 13),
        };
        let seqs = |(taken, wanted): (Vec<&events::Transaction>, usize)| {
            (taken.iter().map(|t| t.gtid.seq).collect::<Vec<_>>(), wanted)
        };
        assert_eq!(seqs(selected(&file, &step, None)), (vec![11, 12, 13], 3));
        // Second 102 is the point: its transactions are not before it.
        assert_eq!(seqs(selected(&file, &step, Some(102))), (vec![11, 12], 3));
        assert_eq!(seqs(selected(&file, &step, Some(101))), (vec![11], 3));
        assert_eq!(seqs(selected(&file, &step, Some(100))), (vec![], 3));
        let other_domain = [events::Transaction {
            gtid: g(1, 1, 12),
            time: 100,
        }];
        assert_eq!(seqs(selected(&other_domain, &step, None)), (vec![], 0));
    }

    fn directory_bucket(dir: &Path) -> Bucket {
        crate::bucket::BucketSpec::from_url(&dir.join("bucket").display().to_string())
            .unwrap()
            .open(&Default::default())
            .unwrap()
    }

    fn segment(object: crate::mariadb::physical::ObjectRecord) -> Segment {
        Segment {
            format_version: super::super::timeline::SEGMENT_FORMAT,
            server_id: 1,
            file: "binlog.000001".into(),
            archived_at_ms: 1,
            domain: 0,
            start_state: Vec::new(),
            runs: Vec::new(),
            object,
        }
    }

    /// Regression (issue 29, item 6): a segment was unpacked whole before its size was
    /// compared with its metadata's, so 64 MiB of zeros declared as 1 MiB (a decompression
    /// bomb: the stored object is a few KiB, and its hash matches) filled the scratch disk
    /// first. The decoder now stops as soon as it passes the declared size.
    #[tokio::test]
    async fn a_segment_unpacking_past_its_declared_size_stops_there() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = directory_bucket(dir.path());
        let key = "moco/local/db/binlog/1-s1-binlog.000001.zst";
        let zeros = vec![0u8; 64 << 20];
        let mut record = crate::mariadb::physical::put_compressed(&bucket, key, "x", &zeros[..])
            .await
            .unwrap();
        assert!(record.size < 1 << 20, "{record:?}");
        record.uncompressed_size = 1 << 20;
        let file = dir.path().join("scratch-file");
        let e = fetch(&bucket, key, &segment(record), &file)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the 1048576 bytes"), "{e}");
        let written = std::fs::metadata(&file).map_or(0, |m| m.len());
        assert!(written <= 1 << 20, "{written} bytes written");
    }

    /// Regression (issue 29, item 6): what followed the zstd frame was read into memory whole
    /// before the size check, so an object with gigabytes after a small frame exhausted RAM.
    /// Past the declared stored size, nothing more is read and the object is refused.
    #[tokio::test]
    async fn trailing_bytes_past_the_declared_size_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = directory_bucket(dir.path());
        let key = "moco/local/db/binlog/1-s1-binlog.000001.zst";
        let frame = {
            use tokio::io::AsyncReadExt as _;
            let mut out = Vec::new();
            async_compression::tokio::bufread::ZstdEncoder::new(&b"a binlog"[..])
                .read_to_end(&mut out)
                .await
                .unwrap();
            out
        };
        let mut object = frame.clone();
        object.extend(vec![0x55u8; 32 << 20]);
        bucket.upload(key, &object[..]).await.unwrap();
        let record = crate::mariadb::physical::ObjectRecord {
            key: "x".into(),
            size: frame.len() as u64,
            uncompressed_size: 8,
            sha256: String::new(),
        };
        let e = fetch(
            &bucket,
            key,
            &segment(record),
            &dir.path().join("scratch-file"),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!("more than the {} bytes", frame.len())),
            "{e}"
        );
    }

    #[test]
    fn a_scratch_file_is_a_child_of_the_scratch_dir_named_by_position() {
        let scratch = Path::new("/work/replay");
        for index in [0, 7, 1_000_000] {
            let file = scratch_file(scratch, index);
            assert_eq!(file.parent(), Some(scratch));
        }
        assert_eq!(
            scratch_file(scratch, 3),
            Path::new("/work/replay/step-000003.binlog")
        );
    }

    #[test]
    fn the_tool_replays_between_two_gtids() {
        assert_eq!(
            binlog_args(
                Path::new("/s/binlog.000004"),
                Some(g(0, 1, 1504)),
                g(0, 2, 1510)
            ),
            [
                "--start-position=0-1-1504",
                "--stop-position=0-2-1510",
                "/s/binlog.000004"
            ]
        );
        assert_eq!(
            binlog_args(Path::new("f"), None, g(0, 1, 3)),
            ["--stop-position=0-1-3", "f"]
        );
    }
}
