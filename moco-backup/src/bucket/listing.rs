//! Listing a bucket whatever keys it holds. object_store fails a whole page of a listing at
//! one key it cannot take as a path (S3 allows `a//b`, `x/../y`, control characters; a
//! directory can hold a file whose name is not UTF-8), and its directory listing stops at
//! such a file: one stray object would break every restore, list, prune, verification and
//! archiving round. Here such a key is left out and reported, and the listing goes on.
//!
//! The cloud stores are listed a page at a time ([`PaginatedListStore`]). A page that fails
//! on a key is listed again from the last key known, `max_keys` doubling while pages pass
//! and halving when one fails, until the very next key is the bad one; the listing then
//! continues after it. A bad key costs a few requests, never a page lost. That needs a store
//! that lists from a key (S3's and GCS's `start-after`); Azure's `startFrom` needs a service
//! version object_store 0.14 does not speak, so there the listing fails, naming the key.

use std::path::PathBuf;
use std::sync::Arc;

use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path as ObjectPath;

use super::ObjectInfo;

/// The largest page asked for while closing in on a bad key (S3's page).
const MAX_PAGE: usize = 1000;

/// What a listing found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The objects, in key order.
    pub objects: Vec<ObjectInfo>,
    /// Keys left out: not keys this program can read or write (lossily decoded when they are
    /// not UTF-8).
    pub skipped: Vec<String>,
}

/// How a bucket is listed.
#[derive(Clone)]
pub(super) enum Lister {
    /// A cloud store, a page at a time.
    Paged(Arc<dyn PaginatedListStore>),
    /// A directory of this machine (its path).
    Directory(PathBuf),
}

impl std::fmt::Debug for Lister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lister::Paged(_) => f.write_str("Paged"),
            Lister::Directory(d) => write!(f, "Directory({})", d.display()),
        }
    }
}

/// The key object_store refused in `e`, when that is what `e` is.
fn bad_key(e: &object_store::Error) -> Option<String> {
    use object_store::path::Error as PathError;
    match e {
        object_store::Error::InvalidPath {
            source:
                PathError::EmptySegment { path }
                | PathError::BadSegment { path, .. }
                | PathError::NonUnicode { path, .. },
        } => Some(path.clone()),
        _ => None,
    }
}

fn generic(e: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: "moco-backup listing",
        source: Box::new(e),
    }
}

/// A page read after a key held that key or one before it: the store ignores the listing
/// offset (Azure does before service version 2026-02-06, which object_store 0.14 does not
/// speak).
#[derive(Debug)]
struct OffsetIgnored;

/// A key object_store refuses, on a store that cannot list past it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{key:?} is not a key this program can read (an empty, `.` or `..` segment, a control \
     character), and this store cannot list past it (it ignores the listing offset): rename \
     or delete that object"
)]
struct CannotSkip {
    key: String,
}

fn cannot_skip(key: &str) -> impl FnOnce(OffsetIgnored) -> object_store::Error + '_ {
    move |OffsetIgnored| {
        generic(CannotSkip {
            key: key.to_owned(),
        })
    }
}

impl Lister {
    /// Every object under `prefix` (a whole segment, without a trailing `/`; empty for all).
    pub(super) async fn list(&self, prefix: &str) -> Result<Listing, object_store::Error> {
        let mut listing = match self {
            Lister::Paged(store) => list_paged(store.as_ref(), prefix).await?,
            Lister::Directory(root) => {
                let root = root.clone();
                let prefix = prefix.to_owned();
                tokio::task::spawn_blocking(move || list_directory(&root, &prefix))
                    .await
                    .map_err(generic)??
            }
        };
        listing.objects.sort_by(|a, b| a.key.cmp(&b.key));
        listing.skipped.sort();
        Ok(listing)
    }
}

/// The listing so far, and the last key it passed (listed or skipped).
#[derive(Default)]
struct Walk {
    listing: Listing,
    position: Option<String>,
}

impl Walk {
    /// Takes a page read after `self.position`; a key at or before it means the store
    /// ignored the offset.
    fn take(
        &mut self,
        objects: Vec<object_store::ObjectMeta>,
        after: Option<&str>,
    ) -> Result<(), OffsetIgnored> {
        for o in objects {
            let key = o.location.to_string();
            if after.is_some_and(|after| key.as_str() <= after) {
                return Err(OffsetIgnored);
            }
            self.position = Some(key.clone());
            self.listing.objects.push(ObjectInfo { key, size: o.size });
        }
        Ok(())
    }
}

async fn list_paged(
    store: &dyn PaginatedListStore,
    prefix: &str,
) -> Result<Listing, object_store::Error> {
    let prefix = (!prefix.is_empty()).then(|| format!("{prefix}/"));
    let prefix = prefix.as_deref();
    let mut walk = Walk::default();
    // The next page: from the start, by the store's token, or after a key.
    let mut token: Option<String> = None;
    let mut after: Option<String> = None;
    loop {
        let opts = PaginatedListOptions {
            page_token: token.take(),
            offset: after.clone(),
            ..PaginatedListOptions::default()
        };
        match store.list_paginated(prefix, opts).await {
            Ok(page) => {
                // `after` is set only right after a skipped key.
                let skipped = after.clone().unwrap_or_default();
                walk.take(page.result.objects, after.as_deref())
                    .map_err(cannot_skip(&skipped))?;
                match page.page_token {
                    Some(t) => {
                        token = Some(t);
                        after = None;
                    }
                    None => break,
                }
            }
            Err(e) => {
                let Some(bad) = bad_key(&e) else {
                    return Err(e);
                };
                match close_in(store, prefix, &mut walk).await? {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(ignored) => return Err(cannot_skip(&bad)(ignored)),
                }
                walk.listing.skipped.push(bad.clone());
                walk.position = Some(bad.clone());
                after = Some(bad);
                token = None;
            }
        }
    }
    Ok(walk.listing)
}

/// Lists from `walk.position` in pages that double while they pass and halve when one
/// fails, until the very next key is one object_store refuses; true then, false when the
/// listing ended first (the bad key was deleted meanwhile).
async fn close_in(
    store: &dyn PaginatedListStore,
    prefix: Option<&str>,
    walk: &mut Walk,
) -> Result<Result<bool, OffsetIgnored>, object_store::Error> {
    let mut max_keys = 1;
    loop {
        let after = walk.position.clone();
        let opts = PaginatedListOptions {
            offset: after.clone(),
            max_keys: Some(max_keys),
            ..PaginatedListOptions::default()
        };
        match store.list_paginated(prefix, opts).await {
            Ok(page) => {
                let empty = page.result.objects.is_empty();
                if let Err(ignored) = walk.take(page.result.objects, after.as_deref()) {
                    return Ok(Err(ignored));
                }
                if empty || page.page_token.is_none() {
                    return Ok(Ok(false));
                }
                max_keys = (max_keys * 2).min(MAX_PAGE);
            }
            Err(e) if bad_key(&e).is_some() => {
                if max_keys == 1 {
                    return Ok(Ok(true));
                }
                max_keys /= 2;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether `name` is an upload object_store's directory store is still writing
/// (`<name>#<digits>`), which its own listing leaves out.
fn in_progress(name: &str) -> bool {
    name.split_once('#')
        .is_some_and(|(_, suffix)| !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()))
}

/// The files under `root/prefix`, keyed by their path under `root`. A symlinked directory is
/// not entered (a loop would never end); a symlinked file is listed, as object_store does.
fn list_directory(root: &std::path::Path, prefix: &str) -> Result<Listing, object_store::Error> {
    let mut listing = Listing::default();
    let top = if prefix.is_empty() {
        root.to_path_buf()
    } else {
        root.join(prefix)
    };
    let mut stack = vec![(top, prefix.to_owned())];
    while let Some((dir, key)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(generic(e)),
        };
        for entry in entries {
            let entry = entry.map_err(generic)?;
            let name = entry.file_name();
            let lossy = name.to_string_lossy();
            let child = if key.is_empty() {
                lossy.clone().into_owned()
            } else {
                format!("{key}/{lossy}")
            };
            let kind = entry.file_type().map_err(generic)?;
            if kind.is_dir() {
                if name.to_str().is_some() {
                    stack.push((entry.path(), child));
                } else {
                    listing.skipped.push(child);
                }
                continue;
            }
            let meta = match std::fs::metadata(entry.path()) {
                Ok(m) if m.is_file() => m,
                // A symlink to a directory or to nothing.
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(generic(e)),
            };
            if name.to_str().is_none() || ObjectPath::parse(&child).is_err() {
                listing.skipped.push(child);
            } else if !in_progress(&lossy) {
                listing.objects.push(ObjectInfo {
                    key: child,
                    size: meta.len(),
                });
            }
        }
    }
    Ok(listing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_in_progress_are_object_stores_own() {
        assert!(in_progress("base.xbstream.zst#3"));
        assert!(!in_progress("a#b"));
        assert!(!in_progress("plain"));
        assert!(!in_progress("x#"));
    }
}
