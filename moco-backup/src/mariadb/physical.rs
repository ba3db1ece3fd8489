//! MariaDB's physical backup, streamed: `mariadb-backup --stream` is compressed (zstd) and
//! hashed (SHA-256) on its way into the bucket, without a copy on local disk, read at most at a
//! given rate ([`crate::pace`]); memory stays a few upload parts whatever the data size. The
//! manifest is written last, so a backup without one is incomplete and is never taken for a
//! restorable one. A restore streams the object back,
//! unpacks it into an empty datadir while checking the hash, and prepares it.
//!
//! Keys, under the backup's prefix (MOCO's `moco/<ns>/<name>/<YYYYMMDD-hhmmss>/`):
//!
//! | key | what |
//! |---|---|
//! | `base.xbstream.zst` | the physical backup |
//! | `manifest.json` | [`Manifest`]: what the backup holds and how to check it |

use std::pin::Pin;
use std::task::{Context, Poll};

use moco_adapters::instance::InstanceError;
use moco_adapters::instance::clone::{self as procedures, BackupSource, RestoreTarget};
use moco_core::gtid::GtidSet;
use moco_core::resources::ByteRate;
use moco_core::time::Timestamp;
use ring::digest;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, BufReader, ReadBuf};

use crate::bucket::{Bucket, BucketError};
use crate::guard::bounded::{Bounded, drain_at_most};
use crate::layout::BackupError;
use crate::mariadb::xbstream::{SafeNames, Scanner, Watched};
use crate::pace::Paced;

/// The key of the physical backup under a backup's prefix.
pub const BASE_KEY: &str = "base.xbstream.zst";
/// The key of the manifest under a backup's prefix.
pub const MANIFEST_KEY: &str = "manifest.json";
/// The manifest layout this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// What a backup holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// `mariadb-physical`.
    pub kind: String,
    /// When the backup started (UTC).
    pub started_at: Timestamp,
    /// When it was complete (UTC).
    pub finished_at: Timestamp,
    /// The source's `@@gtid_binlog_state` before the backup: the history a restored instance
    /// continues.
    pub binlog_state_before: GtidSet,
    /// The GTID position the backup is consistent at (what mariadb-backup reported): binlogs
    /// are replayed from there. Absent in backups whose tool did not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<GtidSet>,
    /// The physical backup object.
    pub base: ObjectRecord,
}

/// One object of a backup and how to check it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRecord {
    /// Its key under the backup's prefix.
    pub key: String,
    /// Bytes stored (compressed).
    pub size: u64,
    /// Bytes before compression.
    pub uncompressed_size: u64,
    /// SHA-256 of the stored bytes, lower-case hex.
    pub sha256: String,
}

/// Counts and hashes the bytes read through it (or only counts them).
pub(crate) struct Hashing<R> {
    pub(crate) inner: R,
    digest: Option<digest::Context>,
    pub(crate) bytes: u64,
}

impl<R> Hashing<R> {
    pub(crate) fn new(inner: R) -> Self {
        Hashing {
            inner,
            digest: Some(digest::Context::new(&digest::SHA256)),
            bytes: 0,
        }
    }

    /// Counts only.
    pub(crate) fn counting(inner: R) -> Self {
        Hashing {
            inner,
            digest: None,
            bytes: 0,
        }
    }

    /// The SHA-256 so far, lower-case hex; empty for a counting-only reader.
    pub(crate) fn hex(&self) -> String {
        self.digest.as_ref().map_or_else(String::new, |d| {
            d.clone()
                .finish()
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        })
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Hashing<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let new = &buf.filled()[before..];
            let this = &mut *self;
            if let Some(d) = &mut this.digest {
                d.update(new);
            }
            this.bytes += new.len() as u64;
        }
        polled
    }
}

const SLAVE_INFO: &str = "xtrabackup_slave_info";
const BINLOG_INFO: &str = "xtrabackup_binlog_info";

/// The GTID position a backup stream names: a replica's `gtid_slave_pos`
/// (`xtrabackup_slave_info`) when it has one, else the third field of
/// `xtrabackup_binlog_info` (the same preference as the restore's, after prepare).
fn position_in(scanner: &Scanner) -> Option<GtidSet> {
    use moco_adapters::mysql::{parse_xtrabackup_binlog_info, parse_xtrabackup_slave_info};
    let text = |name: &str| {
        scanner
            .files()
            .get(name)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    text(SLAVE_INFO)
        .and_then(|t| parse_xtrabackup_slave_info(&t).ok())
        .filter(|p| !p.is_empty())
        .or_else(|| text(BINLOG_INFO).and_then(|t| parse_xtrabackup_binlog_info(&t).ok()))
}

/// Stores what `data` yields as `key`, compressed (zstd level 1, fast enough to keep up with
/// the source) and hashed on the way; returns the record of it (with `key` as given).
pub(crate) async fn put_compressed<R: AsyncRead + Unpin>(
    bucket: &Bucket,
    key: &str,
    record_key: &str,
    data: R,
) -> Result<ObjectRecord, BucketError> {
    // Only counted: hashing the uncompressed bytes too cost a sixth of a core and nothing
    // read the hash.
    let raw = Hashing::counting(data);
    // Large reads: fed 8 KiB at a time, zstd spent a quarter of the backup's CPU in its
    // slower external-dictionary path, and every read was a system call on the pipe.
    let compressed = async_compression::tokio::bufread::ZstdEncoder::with_quality(
        BufReader::with_capacity(1 << 20, raw),
        async_compression::Level::Precise(1),
    );
    let mut stored = Hashing::new(compressed);
    bucket.upload(key, &mut stored).await?;
    Ok(ObjectRecord {
        key: record_key.to_owned(),
        size: stored.bytes,
        uncompressed_size: stored.inner.get_ref().get_ref().bytes,
        sha256: stored.hex(),
    })
}

fn now() -> Timestamp {
    moco_cluster::ports::Clock::now(&moco_cluster::ports::SystemClock)
}

/// Takes a physical backup of the server `source` describes into `bucket` under `prefix`
/// (ending without `/`), reading the tool's stream at most at `max_rate`; `binlog_state` is
/// the server's `@@gtid_binlog_state` read just before. Returns the manifest written.
pub async fn backup(
    source: &BackupSource,
    binlog_state: GtidSet,
    bucket: &Bucket,
    prefix: &str,
    max_rate: Option<&ByteRate>,
) -> Result<Manifest, BackupError> {
    let started_at = now();
    let mut running = procedures::start_backup(source)?;
    let stdout = running.take_stream().ok_or_else(|| {
        InstanceError::Invalid("mariadb-backup has no standard output".to_owned())
    })?;
    // The tool's exit says whether the end of its output is the whole backup.
    let finished = async move { running.finish().await.map_err(BackupError::from) };
    store(
        stdout,
        finished,
        started_at,
        binlog_state,
        bucket,
        prefix,
        max_rate,
    )
    .await
}

/// Stores a backup streamed from elsewhere (a donor agent's `GET /v1/backup`, which ends the
/// stream with an error when its backup fails) under `prefix`, as [`backup`] does. Reading
/// it at most at `max_rate` slows the donor's tool through the connection's flow control.
pub async fn store_stream<R: AsyncRead + Unpin>(
    stream: R,
    started_at: Timestamp,
    binlog_state: GtidSet,
    bucket: &Bucket,
    prefix: &str,
    max_rate: Option<&ByteRate>,
) -> Result<Manifest, BackupError> {
    store(
        stream,
        std::future::ready(Ok(())),
        started_at,
        binlog_state,
        bucket,
        prefix,
        max_rate,
    )
    .await
}

/// Uploads `stream`, read at most at `max_rate`, then waits for `finished` (whether the stream
/// was the whole backup), then writes the manifest.
async fn store<R: AsyncRead + Unpin>(
    stream: R,
    finished: impl std::future::Future<Output = Result<(), BackupError>>,
    started_at: Timestamp,
    binlog_state: GtidSet,
    bucket: &Bucket,
    prefix: &str,
    max_rate: Option<&ByteRate>,
) -> Result<Manifest, BackupError> {
    let key = format!("{prefix}/{BASE_KEY}");
    // The upload ends when the stream does. When the upload fails first, dropping the stream
    // closes the pipe and the tool stops on it. Either way the manifest is not written unless
    // both succeeded, so nothing half-done is ever used.
    let mut watched = Watched::new(Paced::new(stream, max_rate), &[SLAVE_INFO, BINLOG_INFO]);
    let uploaded = put_compressed(bucket, &key, BASE_KEY, &mut watched).await;
    let position = position_in(&watched.scanner);
    drop(watched);
    let finished = finished.await;
    let base = uploaded?;
    finished?;
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        kind: "mariadb-physical".to_owned(),
        started_at,
        finished_at: now(),
        binlog_state_before: binlog_state,
        position,
        base,
    };
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| BackupError::Corrupt {
        prefix: prefix.to_owned(),
        message: e.to_string(),
    })?;
    bucket
        .upload(&format!("{prefix}/{MANIFEST_KEY}"), &text[..])
        .await?;
    Ok(manifest)
}

/// Reads a backup's manifest.
pub async fn manifest(bucket: &Bucket, prefix: &str) -> Result<Manifest, BackupError> {
    let corrupt = |message: String| BackupError::Corrupt {
        prefix: prefix.to_owned(),
        message,
    };
    let text = bucket
        .read_json_bytes(&format!("{prefix}/{MANIFEST_KEY}"))
        .await
        .map_err(|e| {
            if e.is_not_found() {
                corrupt(format!("no manifest, so the backup is incomplete ({e})"))
            } else {
                corrupt(format!("reading the manifest: {e}"))
            }
        })?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| corrupt(format!("the manifest: {e}")))?;
    if manifest.format_version != FORMAT_VERSION || manifest.kind != "mariadb-physical" {
        return Err(corrupt(format!(
            "a {} backup of format {}; this build restores mariadb-physical format {FORMAT_VERSION}",
            manifest.kind, manifest.format_version
        )));
    }
    Ok(manifest)
}

/// What a restore produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The backup's manifest.
    pub manifest: Manifest,
    /// The GTID position the restored datadir is at.
    pub position: GtidSet,
    /// How long the download and extraction took.
    pub copied_in: std::time::Duration,
    /// How long `mariadb-backup --prepare` took.
    pub prepared_in: std::time::Duration,
}

/// Restores the backup under `prefix` into `target`'s datadir (emptied first; the server must
/// be stopped) and prepares it. A stored object whose size or hash differs from the
/// manifest's fails the restore before the copy is prepared; no more than the manifest's
/// sizes is read or unpacked, and an entry of the stream that would leave the datadir stops
/// it ([`SafeNames`]).
pub async fn restore(
    bucket: &Bucket,
    prefix: &str,
    target: &RestoreTarget,
) -> Result<Restored, BackupError> {
    let began = std::time::Instant::now();
    let manifest = manifest(bucket, prefix).await?;
    let stream = bucket
        .download(&format!("{prefix}/{}", manifest.base.key))
        .await?;
    let mut checked = Hashing::new(stream);
    let extracted = {
        let decoder = async_compression::tokio::bufread::ZstdDecoder::new(
            BufReader::with_capacity(1 << 20, &mut checked),
        );
        let bounded = Bounded::new(decoder, manifest.base.uncompressed_size, &manifest.base.key);
        procedures::extract(SafeNames::new(bounded), target).await
    };
    let corrupt = |message: String| BackupError::Corrupt {
        prefix: prefix.to_owned(),
        message,
    };
    // Drain what the decoder left, so the hash covers the whole object; past the stored size
    // the manifest declares, the object is damaged and the rest is not read.
    let room = manifest.base.size.saturating_sub(checked.bytes);
    let drained = drain_at_most(&mut checked, room).await;
    if checked.bytes > manifest.base.size {
        return Err(corrupt(format!(
            "{} is damaged: more than the {} bytes the manifest declares are stored",
            manifest.base.key, manifest.base.size
        )));
    }
    if checked.bytes != manifest.base.size || checked.hex() != manifest.base.sha256 {
        return Err(corrupt(format!(
            "{} is damaged: {} bytes with SHA-256 {}, the manifest says {} bytes with {}",
            manifest.base.key,
            checked.bytes,
            checked.hex(),
            manifest.base.size,
            manifest.base.sha256
        )));
    }
    extracted?;
    drained.map_err(|e| corrupt(format!("reading {}: {e}", manifest.base.key)))?;
    let copied_in = began.elapsed();
    let position = procedures::prepare(target).await?;
    Ok(Restored {
        manifest,
        position,
        copied_in,
        prepared_in: began.elapsed().saturating_sub(copied_in),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::bucket::BucketSpec;

    /// The backup Job's path (a donor agent's stream) keeps to `--max-rate` too; on tokio's
    /// paused clock, so the bound is exact.
    #[tokio::test(start_paused = true)]
    async fn a_stored_stream_is_read_no_faster_than_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&BTreeMap::new())
            .unwrap();
        let stream = vec![1u8; 4 << 20];
        let cap = ByteRate::parse("1Mi").unwrap();
        let began = tokio::time::Instant::now();
        let manifest = store_stream(
            &stream[..],
            Timestamp(0),
            GtidSet::default(),
            &bucket,
            "moco/prod/db/20261125-050000",
            Some(&cap),
        )
        .await
        .unwrap();
        assert_eq!(manifest.base.uncompressed_size, 4 << 20);
        assert!(
            began.elapsed() >= Duration::from_secs(4) - crate::pace::BURST,
            "{:?}",
            began.elapsed()
        );
    }
}
