//! Reading a bucket's object no further than its record says. A manifest or a segment's
//! metadata declares the stored size and the size unpacked; the hash is only known once the
//! whole object is read. Until then the bytes are whoever wrote the bucket's, so a
//! decompression bomb (a few KiB unpacking to terabytes) or gigabytes after the zstd frame
//! must be stopped by the declared sizes, not after them.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};

/// Passes at most `limit` bytes of `inner` through; a read that would pass more fails with
/// an `InvalidData` error naming the object and the limit, and its bytes are withheld.
#[derive(Debug)]
pub struct Bounded<R> {
    inner: R,
    limit: u64,
    passed: u64,
    what: String,
}

impl<R> Bounded<R> {
    /// At most `limit` bytes of `inner` (`what`: the object, for the error).
    pub fn new(inner: R, limit: u64, what: impl Into<String>) -> Self {
        Bounded {
            inner,
            limit,
            passed: 0,
            what: what.into(),
        }
    }

    /// Bytes passed so far.
    pub fn passed(&self) -> u64 {
        self.passed
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let new = (buf.filled().len() - before) as u64;
            if self.passed + new > self.limit {
                buf.set_filled(before);
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{}: more than the {} bytes its record declares unpacked",
                        self.what, self.limit
                    ),
                )));
            }
            self.passed += new;
        }
        polled
    }
}

/// Reads and drops what is left of `reader` (the bytes after a zstd frame, so that a hash
/// over the reader covers the whole object), at most `room` bytes and one more: one more
/// means the object is longer than declared, and the rest is not read. Returns the bytes read.
pub async fn drain_at_most<R: AsyncRead + Unpin>(reader: R, room: u64) -> std::io::Result<u64> {
    tokio::io::copy(
        &mut reader.take(room.saturating_add(1)),
        &mut tokio::io::sink(),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn zstd(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        async_compression::tokio::bufread::ZstdEncoder::new(data)
            .read_to_end(&mut out)
            .await
            .unwrap();
        out
    }

    #[tokio::test]
    async fn a_bomb_stops_at_the_declared_size_and_an_honest_stream_passes_whole() {
        let bomb = zstd(&vec![0u8; 256 << 20]).await;
        assert!(bomb.len() < 64 << 10, "{}", bomb.len());
        let decoder = async_compression::tokio::bufread::ZstdDecoder::new(&bomb[..]);
        let mut bounded = Bounded::new(decoder, 1 << 20, "base.xbstream.zst");
        let mut out = Vec::new();
        let e = bounded.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(
            e.to_string(),
            "base.xbstream.zst: more than the 1048576 bytes its record declares unpacked"
        );
        assert!(out.len() <= 1 << 20 && bounded.passed() <= 1 << 20);

        let honest = zstd(&[9u8; 5000]).await;
        let decoder = async_compression::tokio::bufread::ZstdDecoder::new(&honest[..]);
        let mut bounded = Bounded::new(decoder, 5000, "x");
        let mut out = Vec::new();
        bounded.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, vec![9u8; 5000]);
    }

    #[tokio::test]
    async fn a_drain_reads_one_byte_past_its_room_and_no_more() {
        let rest = vec![1u8; 10 << 20];
        let mut reader = &rest[..];
        assert_eq!(drain_at_most(&mut reader, 100).await.unwrap(), 101);
        assert_eq!(reader.len(), rest.len() - 101);
        assert_eq!(drain_at_most(&b"abc"[..], 100).await.unwrap(), 3);
    }
}
