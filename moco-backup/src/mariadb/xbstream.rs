//! Reading named small files out of an xbstream as it passes by, without unpacking it: the
//! backup's GTID position is in `xtrabackup_binlog_info` / `xtrabackup_slave_info` inside
//! the stream, which is the same wherever mariadb-backup ran (locally, or behind an agent
//! whose messages the backup program never sees). On the way back, [`SafeNames`] stops a
//! stream read from the bucket at its first chunk whose path is not a plain relative one,
//! before `mbstream -x` sees it (`mbstream` refuses such a path too, but exits 0 with the
//! copy half unpacked).
//!
//! The stream is a sequence of chunks (little-endian): magic `XBSTCK01`, flags u8, type u8
//! (`P` payload, `S` sparse payload, `E` end of file), path length u32, path; then for `S`
//! a sparse-map length u32; for `P` and `S` payload length u64, offset u64, checksum u32; for
//! `S` the sparse map (8 bytes an entry); then the payload.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use crate::guard::entry_name::{UnsafeName, check_relative};

const MAGIC: &[u8; 8] = b"XBSTCK01";
/// Bytes kept of one watched file: the position files are a line or two.
const MAX_WATCHED: usize = 64 * 1024;
/// Longest path accepted in a chunk header.
const MAX_PATH: usize = 4096;
/// Most sparse-map entries accepted in a chunk header.
const MAX_SPARSE: usize = 1 << 20;

#[derive(Debug)]
enum State {
    /// Reading a chunk header; its bytes so far.
    Header(Vec<u8>),
    /// In a payload: bytes left, and the file they belong to when it is watched.
    Payload(u64, Option<String>),
    /// The stream is not an xbstream (or one this reader does not know): it stops looking.
    Lost,
}

/// Watches an xbstream for some files by name.
#[derive(Debug)]
pub struct Scanner {
    wanted: Vec<String>,
    state: State,
    files: BTreeMap<String, Vec<u8>>,
    /// The first chunk path that is not a plain relative path.
    unsafe_name: Option<UnsafeName>,
}

/// How many header bytes the chunk needs in all, once `hdr` holds enough to tell;
/// `Err(n)` when at least `n` are needed to tell.
fn header_len(hdr: &[u8]) -> Result<usize, usize> {
    if hdr.len() < 14 {
        return Err(14);
    }
    let path = u32::from_le_bytes([hdr[10], hdr[11], hdr[12], hdr[13]]) as usize;
    let base = 14 + path.min(MAX_PATH + 1);
    match hdr[9] {
        b'E' => Ok(base),
        b'S' => {
            if hdr.len() < base + 24 {
                return Err(base + 24);
            }
            let sparse =
                u32::from_le_bytes([hdr[base], hdr[base + 1], hdr[base + 2], hdr[base + 3]])
                    as usize;
            Ok(base + 24 + sparse.min(MAX_SPARSE) * 8)
        }
        _ => Ok(base + 20),
    }
}

impl Scanner {
    /// A scanner for the files named `wanted` (paths as in the stream).
    pub fn new(wanted: &[&str]) -> Self {
        Scanner {
            wanted: wanted.iter().map(|w| (*w).to_owned()).collect(),
            state: State::Header(Vec::new()),
            files: BTreeMap::new(),
            unsafe_name: None,
        }
    }

    /// The first chunk path seen that is not a plain relative path
    /// ([`crate::guard::entry_name::check_relative`]).
    pub fn unsafe_name(&self) -> Option<&UnsafeName> {
        self.unsafe_name.as_ref()
    }

    /// The watched files seen so far, whole or as far as they came.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.files
    }

    /// False once the stream turned out not to be an xbstream.
    pub fn is_following(&self) -> bool {
        !matches!(self.state, State::Lost)
    }

    /// Feeds the next bytes of the stream.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Lost => return,
                State::Header(hdr) => {
                    let need = match header_len(hdr) {
                        Ok(n) | Err(n) => n,
                    };
                    let take = (need - hdr.len()).min(bytes.len());
                    hdr.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if hdr.len() >= 8 && &hdr[..8] != MAGIC {
                        self.state = State::Lost;
                        return;
                    }
                    if let Ok(total) = header_len(hdr)
                        && hdr.len() == total
                    {
                        let hdr = std::mem::take(hdr);
                        self.state = parse_header(&self.wanted, &hdr);
                        if self.unsafe_name.is_none()
                            && let Some(path) = chunk_path(&hdr)
                            && let Err(e) = check_relative(path)
                        {
                            self.unsafe_name = Some(e);
                        }
                    }
                }
                State::Payload(left, file) => {
                    let take = (*left).min(bytes.len() as u64) as usize;
                    if let Some(name) = file {
                        let kept = self.files.entry(name.clone()).or_default();
                        let room = MAX_WATCHED.saturating_sub(kept.len()).min(take);
                        kept.extend_from_slice(&bytes[..room]);
                    }
                    *left -= take as u64;
                    bytes = &bytes[take..];
                    if *left == 0 {
                        self.state = State::Header(Vec::new());
                    }
                }
            }
        }
    }
}

/// The path of a whole chunk header (`None` when its length is past [`MAX_PATH`]).
fn chunk_path(hdr: &[u8]) -> Option<&[u8]> {
    let path_len = u32::from_le_bytes([hdr[10], hdr[11], hdr[12], hdr[13]]) as usize;
    (path_len <= MAX_PATH).then(|| &hdr[14..14 + path_len])
}

/// The state after a whole chunk header.
fn parse_header(wanted: &[String], hdr: &[u8]) -> State {
    let path_len = u32::from_le_bytes([hdr[10], hdr[11], hdr[12], hdr[13]]) as usize;
    if path_len > MAX_PATH {
        return State::Lost;
    }
    let path = String::from_utf8_lossy(&hdr[14..14 + path_len]).into_owned();
    let lengths_at = match hdr[9] {
        b'E' => return State::Header(Vec::new()),
        b'P' => 14 + path_len,
        b'S' => {
            let at = 14 + path_len;
            let sparse = u32::from_le_bytes([hdr[at], hdr[at + 1], hdr[at + 2], hdr[at + 3]]);
            if sparse as usize > MAX_SPARSE {
                return State::Lost;
            }
            at + 4
        }
        _ => return State::Lost,
    };
    let mut len = [0u8; 8];
    len.copy_from_slice(&hdr[lengths_at..lengths_at + 8]);
    let payload = u64::from_le_bytes(len);
    let watched = wanted.contains(&path).then_some(path);
    if payload == 0 {
        State::Header(Vec::new())
    } else {
        State::Payload(payload, watched)
    }
}

/// Passes a stream through while a [`Scanner`] watches it.
#[derive(Debug)]
pub struct Watched<R> {
    inner: R,
    /// The scanner.
    pub scanner: Scanner,
}

impl<R> Watched<R> {
    /// Watches `inner` for `wanted`.
    pub fn new(inner: R, wanted: &[&str]) -> Self {
        Watched {
            inner,
            scanner: Scanner::new(wanted),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let new = buf.filled()[before..].to_vec();
            self.scanner.feed(&new);
        }
        polled
    }
}

/// Passes an xbstream read from a bucket through to `mbstream -x`, failing the read (an
/// `InvalidData` error naming the chunk's path) at the first chunk whose path would leave the
/// directory being filled, or at bytes that are no xbstream this build can follow (whose
/// paths it therefore cannot check). The failing read's bytes are withheld.
#[derive(Debug)]
pub struct SafeNames<R> {
    inner: R,
    scanner: Scanner,
}

impl<R> SafeNames<R> {
    /// Checks the stream `inner`.
    pub fn new(inner: R) -> Self {
        SafeNames {
            inner,
            scanner: Scanner::new(&[]),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for SafeNames<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let new = buf.filled()[before..].to_vec();
            self.scanner.feed(&new);
            let refused = match (&self.scanner.unsafe_name, self.scanner.is_following()) {
                (Some(e), _) => Some(format!("the backup's xbstream holds {e}")),
                (None, false) => {
                    Some("the backup's stream is not an xbstream this build can check".to_owned())
                }
                (None, true) => None,
            };
            if let Some(message) = refused {
                buf.set_filled(before);
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    message,
                )));
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(kind: u8, path: &str, payload: &[u8], sparse: usize) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.push(0);
        out.push(kind);
        out.extend((path.len() as u32).to_le_bytes());
        out.extend(path.as_bytes());
        if kind == b'E' {
            return out;
        }
        if kind == b'S' {
            out.extend((sparse as u32).to_le_bytes());
        }
        out.extend((payload.len() as u64).to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend(vec![7u8; sparse * 8]);
        out.extend(payload);
        out
    }

    fn stream() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend(chunk(b'P', "ibdata1", &[1u8; 5000], 0));
        s.extend(chunk(b'S', "db/t.ibd", &[2u8; 300], 3));
        s.extend(chunk(
            b'P',
            "xtrabackup_binlog_info",
            b"binlog.000003\t379\t0-1-1504\n",
            0,
        ));
        s.extend(chunk(b'E', "xtrabackup_binlog_info", &[], 0));
        s.extend(chunk(b'E', "ibdata1", &[], 0));
        s
    }

    #[test]
    fn named_files_are_read_whatever_the_pieces() {
        let s = stream();
        for piece in [1, 3, 13, 64, 4096, s.len()] {
            let mut scanner = Scanner::new(&["xtrabackup_binlog_info", "xtrabackup_slave_info"]);
            for p in s.chunks(piece) {
                scanner.feed(p);
            }
            assert!(scanner.is_following());
            assert_eq!(
                scanner
                    .files()
                    .get("xtrabackup_binlog_info")
                    .map(Vec::as_slice),
                Some(&b"binlog.000003\t379\t0-1-1504\n"[..]),
                "pieces of {piece}"
            );
            assert!(!scanner.files().contains_key("xtrabackup_slave_info"));
        }
    }

    #[test]
    fn other_bytes_stop_the_scanner_not_the_stream() {
        let mut scanner = Scanner::new(&["x"]);
        scanner.feed(b"not an xbstream at all");
        assert!(!scanner.is_following());
        let mut s = stream();
        s[8 + 1] = b'Z'; // an unknown chunk type
        let mut scanner = Scanner::new(&["xtrabackup_binlog_info"]);
        scanner.feed(&s);
        assert!(!scanner.is_following());
        assert!(scanner.files().is_empty());
    }

    proptest::proptest! {
        /// Whatever the bytes (a damaged stream, or a prefix of a good one), the scanner
        /// neither panics nor keeps more than its bound.
        #[test]
        fn any_bytes_are_safe(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4096),
                              cut in 0usize..400) {
            let mut scanner = Scanner::new(&["xtrabackup_binlog_info"]);
            scanner.feed(&bytes);
            let s = stream();
            let mut scanner = Scanner::new(&["xtrabackup_binlog_info"]);
            scanner.feed(&s[..cut.min(s.len())]);
            scanner.feed(&bytes);
            proptest::prop_assert!(scanner.files().values().all(|f| f.len() <= MAX_WATCHED));
        }
    }

    /// Regression (issue 29, item 1): a chunk named `../x`, `/x` or `./x` passed through to
    /// `mbstream -x`, which refuses it but exits 0 with the copy half unpacked. The stream now
    /// fails at that chunk, naming it, and none of its bytes pass.
    #[tokio::test]
    async fn a_chunk_that_would_leave_the_datadir_stops_the_stream() {
        use tokio::io::AsyncReadExt as _;
        let good = stream();
        let mut out = Vec::new();
        SafeNames::new(&good[..])
            .read_to_end(&mut out)
            .await
            .unwrap();
        assert_eq!(out, good);
        for bad in ["../outside", "/etc/cron.d/x", "db/../../x", "./x", "a//b"] {
            let mut s = chunk(b'P', "ibdata1", &[1u8; 100], 0);
            let at = s.len();
            s.extend(chunk(b'P', bad, b"pwned", 0));
            s.extend(chunk(b'E', bad, &[], 0));
            let mut checked = SafeNames::new(&s[..]);
            let mut out = Vec::new();
            let e = checked.read_to_end(&mut out).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
            assert!(out.len() <= at, "{bad}: the bad chunk's bytes passed");
        }
        // Not an xbstream: nothing can be checked, so nothing passes.
        let e = SafeNames::new(&b"garbage, not chunks"[..])
            .read_to_end(&mut Vec::new())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not an xbstream"), "{e}");
    }

    #[tokio::test]
    async fn a_watched_stream_reads_through_unchanged() {
        use tokio::io::AsyncReadExt as _;
        let s = stream();
        let mut w = Watched::new(&s[..], &["xtrabackup_binlog_info"]);
        let mut out = Vec::new();
        w.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, s);
        assert!(w.scanner.files().contains_key("xtrabackup_binlog_info"));
    }
}
