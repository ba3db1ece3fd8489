//! Binlog archiving: every few seconds, on the primary, the binlog is closed (`FLUSH BINARY
//! LOGS`) when it holds a transaction the archive lacks, and each closed file that adds to
//! the archive's history or changes it is stored as a [`Segment`]. Then a progress mark says
//! up to which second the archive is complete. The recovery point is the round interval plus
//! an upload.
//!
//! Why closed files and not a replication stream: the files are read where the server
//! writes them (the archiver runs beside the primary: the `moco local` manager process, or the
//! agent in the primary's Pod), byte for byte, with no server id to register and no
//! MariaDB event decoding beyond the GTIDs; and `mariadb-binlog` replays them as they are.
//! The cost is one small binlog file per round with writes (never one when idle).
//!
//! Keys under the cluster's prefix (`moco/<ns>/<name>`):
//!
//! | key | what |
//! |---|---|
//! | `binlog/<ms>-s<server_id>-<file>.zst` | one binlog file, zstd |
//! | `binlog/<ms>-s<server_id>-<file>.json` | its [`Segment`] metadata, written after it |
//! | `binlog/progress.json` | [`Progress`], replaced each round |

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use moco_adapters::mysql::MysqlInstance;
use mysql_async::prelude::Queryable as _;

use super::events::{self, Gtid};
use super::fetch::{BinlogFiles, RemoteFetch};
use super::timeline::{self, Progress, Run, SEGMENT_FORMAT, Segment, Timeline, TimelineError};
use crate::bucket::{Bucket, BucketError};
use crate::mariadb::physical;

/// The folder of the archive under a cluster's prefix.
pub const ARCHIVE_FOLDER: &str = "binlog";
/// The progress mark under the archive's folder.
pub const PROGRESS_KEY: &str = "progress.json";

/// Why archiving failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The object store.
    #[error(transparent)]
    Bucket(#[from] BucketError),
    /// The primary.
    #[error("the primary {target}: {message}")]
    Server {
        /// Which server.
        target: String,
        /// What failed.
        message: String,
    },
    /// A binlog file.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The archive's contents.
    #[error("the archive {key}: {message}")]
    Archive {
        /// The object.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The history.
    #[error(transparent)]
    Timeline(#[from] TimelineError),
}

/// What the archive holds.
#[derive(Clone, Debug, Default)]
pub struct Contents {
    /// Its segments, in key order.
    pub segments: Vec<Segment>,
    /// Their keys (metadata), matching `segments`.
    pub keys: Vec<String>,
    /// The last progress mark.
    pub progress: Option<Progress>,
}

async fn read_json<T: serde::de::DeserializeOwned>(
    bucket: &Bucket,
    key: &str,
) -> Result<T, ArchiveError> {
    let text = bucket.read_json_bytes(key).await?;
    serde_json::from_slice(&text).map_err(|e| ArchiveError::Archive {
        key: key.to_owned(),
        message: e.to_string(),
    })
}

/// Reads the archive of the cluster under `prefix`.
pub async fn load(bucket: &Bucket, prefix: &str) -> Result<Contents, ArchiveError> {
    let folder = format!("{prefix}/{ARCHIVE_FOLDER}");
    let progress_key = format!("{folder}/{PROGRESS_KEY}");
    let mut contents = Contents::default();
    for object in bucket.list(&folder).await? {
        if object.key == progress_key {
            contents.progress = Some(read_json(bucket, &object.key).await?);
        } else if object.key.ends_with(".json") {
            let segment: Segment = read_json(bucket, &object.key).await?;
            if segment.format_version != SEGMENT_FORMAT {
                return Err(ArchiveError::Archive {
                    key: object.key,
                    message: format!(
                        "segment format {}; this build reads format {SEGMENT_FORMAT}",
                        segment.format_version
                    ),
                });
            }
            contents.segments.push(segment);
            contents.keys.push(object.key);
        }
    }
    Ok(contents)
}

/// What one round did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// False when the server was not writable (not the primary): nothing was done.
    pub primary: bool,
    /// Whether the binlog was closed.
    pub flushed: bool,
    /// Files stored.
    pub stored: Vec<String>,
    /// Bytes stored (compressed), data and metadata.
    pub bytes: u64,
    /// The progress mark written.
    pub progress: Option<Progress>,
}

/// Archives the binlogs of one cluster; keeps what it learnt between rounds.
#[derive(Debug)]
pub struct Archiver {
    bucket: Bucket,
    prefix: String,
    contents: Option<Contents>,
    timeline: Timeline,
    /// Closed files already handled (stored, or found to add nothing): (server_id, file).
    seen: BTreeSet<(u32, String)>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Archiver {
    /// The archiver of the cluster whose keys start with `prefix` (`moco/<ns>/<name>`).
    pub fn new(bucket: Bucket, prefix: impl Into<String>) -> Self {
        Archiver {
            bucket,
            prefix: prefix.into(),
            contents: None,
            timeline: Timeline::default(),
            seen: BTreeSet::new(),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}/{ARCHIVE_FOLDER}/{name}", self.prefix)
    }

    /// One round against `server` (the instance the caller believes primary; a read-only
    /// one is left alone), reading its closed binlog files as `files` says.
    pub async fn round(
        &mut self,
        server: &MysqlInstance,
        files: &BinlogFiles,
    ) -> Result<Round, ArchiveError> {
        let target = server.target().to_owned();
        let fail = |message: String| ArchiveError::Server {
            target: target.clone(),
            message,
        };
        let mut c = server.conn().await.map_err(|e| fail(e.to_string()))?;
        let row: Option<(u8, u32, Option<String>, String)> = c
            .query_first("SELECT @@read_only, @@server_id, @@log_bin_basename, @@gtid_binlog_pos")
            .await
            .map_err(|e| fail(e.to_string()))?;
        let Some((read_only, server_id, basename, pos)) = row else {
            return Err(fail("no answer to SELECT @@read_only".to_owned()));
        };
        if read_only != 0 {
            return Ok(Round::default());
        }
        let checked_at = now_ms() as i64 / 1000;
        let source = match (files, basename) {
            (BinlogFiles::Remote(fetch), Some(_)) => Source::Remote(fetch),
            (BinlogFiles::Local(Some(d)), Some(_)) => Source::Dir(d.clone()),
            (BinlogFiles::Local(None), Some(b)) => Source::Dir(
                Path::new(&b)
                    .parent()
                    .map(Path::to_path_buf)
                    .ok_or_else(|| fail(format!("log_bin_basename {b:?} has no directory")))?,
            ),
            (_, None) => return Err(fail("binary logging is off (log_bin)".to_owned())),
        };
        if self.contents.is_none() {
            let contents = load(&self.bucket, &self.prefix).await?;
            self.timeline = Timeline::build(&contents.segments)?;
            self.contents = Some(contents);
        }
        let position = position_of(&pos, self.timeline.domain).map_err(fail)?;
        let archived =
            |t: &Timeline| position.is_none_or(|g| t.server_at(g.seq) == Some(g.server_id));
        let mut round = Round {
            primary: true,
            ..Round::default()
        };
        if !archived(&self.timeline) {
            c.query_drop("FLUSH NO_WRITE_TO_BINLOG BINARY LOGS")
                .await
                .map_err(|e| fail(e.to_string()))?;
            round.flushed = true;
            let logs: Vec<(String, u64)> = c
                .query("SHOW BINARY LOGS")
                .await
                .map_err(|e| fail(e.to_string()))?;
            // Every file but the last is closed and will not change.
            for (name, size) in logs.iter().take(logs.len().saturating_sub(1)) {
                if let Some(bytes) = self.store_if_new(server_id, &source, name, *size).await? {
                    round.stored.push(name.clone());
                    round.bytes += bytes;
                }
            }
        }
        let _ = c.disconnect().await;
        if archived(&self.timeline) {
            let progress = Progress {
                checked_at,
                position,
            };
            let text = serde_json::to_vec(&progress).map_err(|e| ArchiveError::Archive {
                key: PROGRESS_KEY.to_owned(),
                message: e.to_string(),
            })?;
            self.bucket
                .upload(&self.key(PROGRESS_KEY), &text[..])
                .await?;
            round.progress = Some(progress);
            if let Some(contents) = &mut self.contents {
                contents.progress = Some(progress);
            }
        }
        Ok(round)
    }

    /// Whether the archive holds the closed file `name` of `server_id` already, the same size.
    /// A fetch through the server costs the whole file, and a backup Job starts with nothing
    /// seen; a closed file never changes, and one re-created under the same name by the same
    /// server (after its datadir was replaced) is told apart by its size in all but freak
    /// cases, which would then only be missing from the archive if it also added history.
    fn archived_already(&self, server_id: u32, name: &str, size: u64) -> bool {
        self.contents.as_ref().is_some_and(|c| {
            c.segments.iter().any(|s| {
                s.server_id == server_id && s.file == name && s.object.uncompressed_size == size
            })
        })
    }

    /// Reads the closed file `name` and stores it when it adds to the history or changes it.
    async fn store_if_new(
        &mut self,
        server_id: u32,
        source: &Source<'_>,
        name: &str,
        size: u64,
    ) -> Result<Option<u64>, ArchiveError> {
        let seen_key = (server_id, name.to_owned());
        if self.seen.contains(&seen_key) {
            return Ok(None);
        }
        let path = match source {
            Source::Dir(dir) => dir.join(name),
            Source::Remote(fetch) => {
                if self.archived_already(server_id, name, size) {
                    self.seen.insert(seen_key);
                    return Ok(None);
                }
                fetch
                    .fetch(name)
                    .await
                    .map_err(|message| ArchiveError::File {
                        path: fetch.scratch.join(name),
                        message,
                    })?
            }
        };
        let handled = self.summarize_and_store(server_id, &path, name).await;
        if let Source::Remote(_) = source {
            let _ = std::fs::remove_file(&path);
        }
        let stored = handled?;
        // Only once it is handled: a failed upload is tried again next round.
        self.seen.insert(seen_key);
        Ok(stored)
    }

    async fn summarize_and_store(
        &mut self,
        server_id: u32,
        path: &Path,
        name: &str,
    ) -> Result<Option<u64>, ArchiveError> {
        let summary = events::summarize_file(path)
            .await
            .map_err(|message| ArchiveError::File {
                path: path.to_path_buf(),
                message,
            })?;
        let (domain, runs) = timeline::runs_of(&summary)?;
        match domain {
            Some(domain) if self.timeline.would_change(&runs) => self
                .store(server_id, path, name, domain, summary.start_state, runs)
                .await
                .map(Some),
            _ => Ok(None),
        }
    }

    async fn store(
        &mut self,
        server_id: u32,
        path: &Path,
        name: &str,
        domain: u32,
        start_state: Vec<Gtid>,
        runs: Vec<Run>,
    ) -> Result<u64, ArchiveError> {
        if let Some(d) = self.timeline.domain.filter(|d| *d != domain) {
            return Err(TimelineError::SeveralDomains(d, domain).into());
        }
        let archived_at_ms = now_ms();
        let stem = format!("{archived_at_ms:013}-s{server_id}-{name}");
        let data_name = format!("{stem}.zst");
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| ArchiveError::File {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let object =
            physical::put_compressed(&self.bucket, &self.key(&data_name), &data_name, file).await?;
        let segment = Segment {
            format_version: SEGMENT_FORMAT,
            server_id,
            file: name.to_owned(),
            archived_at_ms,
            domain,
            start_state,
            runs,
            object,
        };
        let meta_key = self.key(&format!("{stem}.json"));
        let text = serde_json::to_vec_pretty(&segment).map_err(|e| ArchiveError::Archive {
            key: meta_key.clone(),
            message: e.to_string(),
        })?;
        self.bucket.upload(&meta_key, &text[..]).await?;
        let bytes = segment.object.size + text.len() as u64;
        let contents = self.contents.get_or_insert_with(Contents::default);
        contents.segments.push(segment);
        contents.keys.push(meta_key);
        self.timeline = Timeline::build(&contents.segments)?;
        Ok(bytes)
    }
}

/// Where this round's files are.
enum Source<'a> {
    Dir(PathBuf),
    Remote(&'a RemoteFetch),
}

/// The primary's last GTID in `domain` (or its only domain) from `@@gtid_binlog_pos`.
fn position_of(pos: &str, domain: Option<u32>) -> Result<Option<Gtid>, String> {
    let found = events::parse_position(pos).map_err(|e| e.to_string())?;
    match (domain, found.as_slice()) {
        (_, []) => Ok(None),
        (Some(d), list) => Ok(list.iter().find(|g| g.domain == d).copied()),
        (None, [one]) => Ok(Some(*one)),
        (None, [a, b, ..]) => Err(TimelineError::SeveralDomains(a.domain, b.domain).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mariadb::binlog::events::tests::g;

    #[test]
    fn the_position_is_the_archive_domain_entry() {
        assert_eq!(position_of("", None), Ok(None));
        assert_eq!(position_of("0-1-5", None), Ok(Some(g(0, 1, 5))));
        assert_eq!(position_of("0-1-5,1-2-3", Some(1)), Ok(Some(g(1, 2, 3))));
        assert!(position_of("0-1-5,1-2-3", None).is_err());
        assert!(position_of("zero", None).is_err());
    }
}
