//! An open bucket and what is done with its objects. Objects stream both ways: an upload is a
//! multipart upload fed as the bytes come (memory bounded by a few parts whatever the size),
//! aborted on any error, so no object that looks complete is left behind by a failed one.

use std::sync::Arc;

use futures::TryStreamExt as _;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt as _, WriteMultipart};
use tokio::io::{AsyncRead, AsyncReadExt as _};

use super::error::{BucketError, invalid};
use super::listing::{Lister, Listing};

/// How much of a directory bucket's file one read takes ([`Bucket::download`]).
const LOCAL_READ_SIZE: usize = 1 << 20;

/// An object in a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its key.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
}

/// An open bucket.
#[derive(Clone, Debug)]
pub struct Bucket {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) lister: Lister,
    pub(super) describe: String,
}

/// The most a JSON object of the bucket may hold: a manifest, a segment's metadata, a
/// progress mark, a round's record or a verification is kilobytes (a verification of 80,000
/// tables would reach it). A larger one is damage or an attack, and is not read into memory.
pub const MAX_JSON_BYTES: u64 = 8 << 20;

/// The part size of uploads: object_store's default (S3's minimum is 5 MiB).
const PART: usize = 5 * 1024 * 1024;
/// Parts in flight at once: memory is about this many parts.
const PARTS_IN_FLIGHT: usize = 4;

impl Bucket {
    fn target(&self, key: &str) -> String {
        format!("{}/{key}", self.describe)
    }

    fn path(&self, key: &str) -> Result<ObjectPath, BucketError> {
        ObjectPath::parse(key).map_err(|e| invalid("key", format!("{key:?}: {e}")))
    }

    /// Uploads everything `data` yields as `key`; returns the bytes written. On any failure
    /// the upload is aborted: the key is not created.
    pub async fn upload<R: AsyncRead + Unpin>(
        &self,
        key: &str,
        mut data: R,
    ) -> Result<u64, BucketError> {
        let path = self.path(key)?;
        let store_error = |e| BucketError::Store {
            target: self.target(key),
            source: e,
        };
        let upload = self.store.put_multipart(&path).await.map_err(store_error)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buffer = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            let n = match data.read(&mut buffer).await {
                Ok(n) => n,
                Err(source) => {
                    let _ = writer.abort().await;
                    return Err(BucketError::Read {
                        target: self.target(key),
                        source,
                    });
                }
            };
            if n == 0 {
                break;
            }
            if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = writer.abort().await;
                return Err(store_error(e));
            }
            writer.write(&buffer[..n]);
            total += n as u64;
        }
        writer.finish().await.map_err(store_error)?;
        Ok(total)
    }

    /// The object `key`, streamed.
    pub async fn download(
        &self,
        key: &str,
    ) -> Result<impl AsyncRead + Unpin + Send + use<>, BucketError> {
        let path = self.path(key)?;
        let target = self.target(key);
        let result = self
            .store
            .get(&path)
            .await
            .map_err(|e| BucketError::Store {
                target: target.clone(),
                source: e,
            })?;
        // A directory bucket's file is read in large pieces: object_store's stream of it reads
        // 8 KiB per blocking task, which made a restore's download several times slower than
        // `zstd -d` reading the same file.
        if let object_store::GetResultPayload::File(file, _) = result.payload {
            return Ok(tokio_util::either::Either::Left(
                tokio::io::BufReader::with_capacity(
                    LOCAL_READ_SIZE,
                    tokio::fs::File::from_std(file),
                ),
            ));
        }
        let stream = result
            .into_stream()
            .map_err(move |e| std::io::Error::other(format!("{target}: {e}")));
        Ok(tokio_util::either::Either::Right(
            tokio_util::io::StreamReader::new(stream),
        ))
    }

    /// The whole of `key`, a JSON document: at most [`MAX_JSON_BYTES`], and no more than one
    /// byte past that is read.
    pub async fn read_json_bytes(&self, key: &str) -> Result<Vec<u8>, BucketError> {
        let mut text = Vec::new();
        self.download(key)
            .await?
            .take(MAX_JSON_BYTES + 1)
            .read_to_end(&mut text)
            .await
            .map_err(|source| BucketError::Download {
                target: self.target(key),
                source,
            })?;
        if text.len() as u64 > MAX_JSON_BYTES {
            return Err(BucketError::TooLarge {
                target: self.target(key),
                limit: MAX_JSON_BYTES,
            });
        }
        Ok(text)
    }

    /// The objects whose keys start with `prefix` (a whole path segment, or empty for all).
    /// A key this program cannot read (an empty, `.` or `..` segment, a control character,
    /// not UTF-8: legal in S3) is left out with a warning naming it ([`Bucket::listing`]).
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, BucketError> {
        let listing = self.listing(prefix).await?;
        for key in &listing.skipped {
            tracing::warn!(
                bucket = %self.describe,
                key = ?key,
                "an object left out of the listing: its key has an empty, `.` or `..` segment, \
                 a control character or bytes that are not UTF-8"
            );
        }
        Ok(listing.objects)
    }

    /// [`Bucket::list`], with the keys it leaves out.
    pub async fn listing(&self, prefix: &str) -> Result<Listing, BucketError> {
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            self.path(prefix)?.to_string()
        };
        self.lister
            .list(&prefix)
            .await
            .map_err(|e| BucketError::Store {
                target: self.target(&prefix),
                source: e,
            })
    }

    /// Deletes every object under `prefix` (a whole path segment); returns how many.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<usize, BucketError> {
        let objects = self.list(prefix).await?;
        for o in &objects {
            self.delete(&o.key).await?;
        }
        Ok(objects.len())
    }

    /// Deletes `key`.
    pub async fn delete(&self, key: &str) -> Result<(), BucketError> {
        let path = self.path(key)?;
        self.store
            .delete(&path)
            .await
            .map_err(|e| BucketError::Store {
                target: self.target(key),
                source: e,
            })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::bucket::BucketSpec;

    /// The local-directory back-end end to end: a multi-part object, listing, reading back,
    /// deleting; a failed source leaves no object.
    #[tokio::test]
    async fn a_directory_bucket_round_trips_and_a_failed_upload_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let spec = BucketSpec::from_url(&dir.path().display().to_string()).unwrap();
        let bucket = spec.open(&BTreeMap::new()).unwrap();
        let data: Vec<u8> = (0..12 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let n = bucket
            .upload("moco/ns/db/20261123-000000/dump.tar", &data[..])
            .await
            .unwrap();
        assert_eq!(n, data.len() as u64);
        let listed = bucket.list("moco/ns").await.unwrap();
        assert_eq!(
            listed,
            [ObjectInfo {
                key: "moco/ns/db/20261123-000000/dump.tar".into(),
                size: data.len() as u64
            }]
        );
        let mut back = Vec::new();
        let mut r = bucket
            .download("moco/ns/db/20261123-000000/dump.tar")
            .await
            .unwrap();
        r.read_to_end(&mut back).await.unwrap();
        assert!(back == data, "the object reads back as written");

        /// Yields 6 MiB, then fails.
        struct Failing(usize);
        impl AsyncRead for Failing {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                if self.0 == 0 {
                    return std::task::Poll::Ready(Err(std::io::Error::other("source died")));
                }
                let n = self.0.min(buf.remaining());
                buf.put_slice(&vec![7u8; n]);
                self.0 -= n;
                std::task::Poll::Ready(Ok(()))
            }
        }
        let e = bucket
            .upload("moco/ns/db/x/dump.tar", Failing(6 * 1024 * 1024))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("source died"), "{e}");
        assert_eq!(bucket.list("moco/ns/db/x").await.unwrap(), []);
        bucket
            .delete("moco/ns/db/20261123-000000/dump.tar")
            .await
            .unwrap();
        assert_eq!(bucket.list("").await.unwrap(), []);
    }

    /// Regression (issue 29, item 5): object_store fails the whole listing of a directory
    /// bucket at a file whose name it cannot take as a key (a control character, not UTF-8),
    /// so one stray file broke restore, list, prune, verify and the archiver. Such a file is
    /// now left out and reported; the rest is listed.
    #[tokio::test]
    async fn a_file_that_is_no_key_is_skipped_and_the_rest_listed() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        let bucket = BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&BTreeMap::new())
            .unwrap();
        for key in [
            "moco/ns/db/a/manifest.json",
            "moco/ns/db/z/base.xbstream.zst",
        ] {
            bucket.upload(key, &b"x"[..]).await.unwrap();
        }
        let folder = dir.path().join("moco/ns/db/m");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("bad\u{1}name"), b"x").unwrap();
        std::fs::write(
            folder.join(std::ffi::OsStr::from_bytes(b"not-utf8-\xff")),
            b"x",
        )
        .unwrap();
        let listed = bucket.list("moco/ns/db").await.unwrap();
        assert_eq!(
            listed.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(),
            [
                "moco/ns/db/a/manifest.json",
                "moco/ns/db/z/base.xbstream.zst"
            ]
        );
        let listing = bucket.listing("moco/ns/db").await.unwrap();
        assert_eq!(listing.objects, listed);
        assert_eq!(
            listing.skipped,
            [
                "moco/ns/db/m/bad\u{1}name",
                "moco/ns/db/m/not-utf8-\u{fffd}"
            ]
        );
    }

    /// Regression (issue 29, item 5): a JSON object of the bucket was read whole into memory,
    /// whatever its size. One larger than [`MAX_JSON_BYTES`] is now an error naming the key
    /// and the limit, read no further than one byte past it.
    #[tokio::test]
    async fn a_json_object_past_the_limit_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = BucketSpec::from_url(&dir.path().display().to_string())
            .unwrap()
            .open(&BTreeMap::new())
            .unwrap();
        let key = "moco/ns/db/20261123-000000/manifest.json";
        let big = vec![b' '; (MAX_JSON_BYTES + 1) as usize];
        bucket.upload(key, &big[..]).await.unwrap();
        let e = bucket.read_json_bytes(key).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "dir:{}/{key}: larger than {MAX_JSON_BYTES} bytes, the most a manifest, \
                 record or progress mark may hold",
                dir.path().display()
            )
        );
        bucket.upload(key, &big[1..]).await.unwrap();
        assert_eq!(
            bucket.read_json_bytes(key).await.unwrap().len(),
            big.len() - 1
        );
    }
}
