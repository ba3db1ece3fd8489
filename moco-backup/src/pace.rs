//! Keeping a backup's read rate under a cap (`--max-rate`).
//!
//! On a machine (or node) whose disk and cores the primary shares, an unpaced backup of a
//! replica raised the primary's p99 write latency by about half while it ran; capped, the
//! backup takes longer and the primary barely notices (`docs/benchmarks.md`). The cap applies
//! to the stream the backup tool writes: the reader waits, the pipe fills, the tool blocks,
//! and so its reads of the data files slow down too.
//!
//! [`Schedule`] is the arithmetic (a token bucket in its "virtual scheduling" form: the time
//! by which the bytes read so far are paid for), pure and tested alone; [`Paced`] applies it
//! to an [`AsyncRead`] with tokio's timer.

use std::future::Future as _;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use moco_core::resources::ByteRate;
use tokio::io::{AsyncRead, ReadBuf};

/// How much reading the cap lets a reader catch up on after it was slow itself (an upload
/// part waiting for room): short, so a stall is never followed by a burst the primary feels.
pub const BURST: Duration = Duration::from_millis(200);

/// The pacing arithmetic: when a reader may read again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    rate: NonZeroU64,
    burst: Duration,
    /// Since the origin: when the bytes read so far are paid for.
    paid_until: Duration,
}

/// How long `bytes` take at `rate` bytes per second, rounded up to the nanosecond (rounding
/// down would let the rate creep over the cap).
fn cost(bytes: u64, rate: NonZeroU64) -> Duration {
    let nanos = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(rate.get()));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

impl Schedule {
    /// A schedule for `rate` bytes per second that forgives at most `burst` of a reader's own
    /// slowness.
    pub fn new(rate: NonZeroU64, burst: Duration) -> Self {
        Schedule {
            rate,
            burst,
            paid_until: Duration::ZERO,
        }
    }

    /// `bytes` were read at `now` (time since the origin): how long to wait before the next
    /// read. Over reads `i..=j`, a reader that waits as told reads at most
    /// `rate × (start of read j+1 − start of read i + burst)` bytes.
    pub fn read(&mut self, bytes: u64, now: Duration) -> Duration {
        let start = self.paid_until.max(now.saturating_sub(self.burst));
        self.paid_until = start.saturating_add(cost(bytes, self.rate));
        self.paid_until.saturating_sub(now)
    }
}

/// Reads through to `inner`, waiting between reads as a [`Schedule`] says (or not at all,
/// without a rate).
#[derive(Debug)]
pub struct Paced<R> {
    inner: R,
    schedule: Option<Schedule>,
    origin: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<R> Paced<R> {
    /// `inner`, read at most at `rate` (with [`BURST`]).
    pub fn new(inner: R, rate: Option<&ByteRate>) -> Self {
        Paced {
            inner,
            schedule: rate.map(|r| Schedule::new(r.bytes_per_second(), BURST)),
            origin: tokio::time::Instant::now(),
            sleep: None,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Paced<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if let Some(sleep) = &mut this.sleep {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.sleep = None;
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(schedule)) = (&polled, &mut this.schedule) {
            // Only what this read added: the caller's buffer may hold earlier bytes. (A read
            // of nothing costs nothing, and its wait is zero: the last wait was served.)
            let read = buf.filled().len() - before;
            let wait = schedule.read(read as u64, this.origin.elapsed());
            if !wait.is_zero() {
                this.sleep = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tokio::io::AsyncReadExt as _;

    const MIB: u64 = 1 << 20;

    fn rate(bytes: u64) -> NonZeroU64 {
        NonZeroU64::new(bytes).unwrap()
    }

    #[test]
    fn a_prompt_reader_waits_exactly_what_each_read_costs() {
        let mut s = Schedule::new(rate(MIB), BURST);
        assert_eq!(s.read(MIB / 2, Duration::ZERO), Duration::from_millis(500));
        assert_eq!(
            s.read(MIB / 4, Duration::from_millis(500)),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn a_slow_reader_is_forgiven_only_the_burst() {
        let mut s = Schedule::new(rate(MIB), BURST);
        s.read(MIB, Duration::ZERO); // paid until 1 s
        // It came back at 3 s: only 200 ms of the 2 s idle count, so 1 MiB costs 800 ms more.
        assert_eq!(
            s.read(MIB, Duration::from_secs(3)),
            Duration::from_millis(800)
        );
        // Came back 100 ms late (paid until 3.8 s): all of it counts.
        assert_eq!(
            s.read(MIB, Duration::from_millis(3900)),
            Duration::from_millis(900)
        );
    }

    #[test]
    fn the_cost_rounds_up() {
        assert_eq!(cost(1, rate(3)), Duration::from_nanos(333_333_334));
        assert_eq!(cost(0, rate(3)), Duration::ZERO);
        assert_eq!(cost(u64::MAX, rate(1)), Duration::from_nanos(u64::MAX));
    }

    /// One read: its size, then how long the reader itself takes beyond the wait it is told.
    fn reads() -> impl Strategy<Value = Vec<(u64, u64)>> {
        proptest::collection::vec((1..4 * MIB, prop_oneof![Just(0u64), 0..3_000u64]), 1..60)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// The cap, computed from the read times alone: over any run of reads, the bytes are
        /// at most the rate times (the span until the next read may start, plus the burst);
        /// and no wait is longer than the read's own cost (the cap never slows a reader
        /// below the rate).
        #[test]
        fn no_window_of_reads_exceeds_the_rate(
            per_second in 1..64 * MIB,
            plan in reads(),
        ) {
            let r = rate(per_second);
            let mut s = Schedule::new(r, BURST);
            let mut now = Duration::ZERO;
            // (start of each read, its bytes); then the time the next read may start.
            let mut starts = Vec::new();
            for (bytes, late_ms) in &plan {
                let wait = s.read(*bytes, now);
                prop_assert!(wait <= cost(*bytes, r), "waited {wait:?} for {bytes} bytes");
                starts.push((now, *bytes));
                now += wait + Duration::from_millis(*late_ms);
            }
            starts.push((now, 0));
            for i in 0..plan.len() {
                let mut bytes = 0u128;
                for j in i..plan.len() {
                    bytes += u128::from(starts[j].1);
                    let span = starts[j + 1].0 - starts[i].0 + BURST;
                    prop_assert!(
                        bytes * 1_000_000_000 <= u128::from(per_second) * span.as_nanos(),
                        "reads {i}..={j}: {bytes} bytes in {span:?} at {per_second} B/s"
                    );
                }
            }
        }
    }

    /// The cases the property is about occur: reads where the reader was late by more than
    /// the burst (forgiven only the burst), by less (forgiven all), and prompt.
    #[test]
    fn the_property_meets_late_partly_late_and_prompt_readers() {
        use proptest::strategy::ValueTree as _;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let (mut over, mut under, mut prompt) = (0, 0, 0);
        for _ in 0..512 {
            let plan = reads().new_tree(&mut runner).unwrap().current();
            for (_, late_ms) in plan {
                match Duration::from_millis(late_ms) {
                    d if d.is_zero() => prompt += 1,
                    d if d > BURST => over += 1,
                    _ => under += 1,
                }
            }
        }
        assert!(
            over > 1000 && under > 100 && prompt > 1000,
            "{over} {under} {prompt}"
        );
    }

    /// Regression guard: a caller's buffer that already holds bytes (a `BufReader` refilling
    /// after a partial consume) must not be charged for them again.
    #[tokio::test(start_paused = true)]
    async fn only_the_bytes_a_read_adds_are_paid_for() {
        let data = vec![7u8; 512 * 1024];
        let cap = ByteRate::parse("1Mi").unwrap();
        let mut paced = Paced::new(&data[..], Some(&cap));
        let mut storage = vec![0u8; 1 << 20];
        let mut buf = ReadBuf::new(&mut storage);
        buf.put_slice(&[1u8; 768 * 1024]);
        std::future::poll_fn(|cx| Pin::new(&mut paced).poll_read(cx, &mut buf))
            .await
            .unwrap();
        assert_eq!(buf.filled().len(), 1 << 20, "256 KiB added");
        let began = tokio::time::Instant::now();
        let mut rest = vec![0u8; 1 << 20];
        assert_eq!(paced.read(&mut rest).await.unwrap(), 256 * 1024);
        assert_eq!(paced.read(&mut rest).await.unwrap(), 0);
        // 256 KiB paid before the second read, 256 KiB before the end: 0.5 s, not 1.25 s.
        assert_eq!(began.elapsed(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_reader_takes_as_long_as_the_rate_says() {
        let data = vec![7u8; (10 * MIB) as usize];
        let cap = ByteRate::parse("1Mi").unwrap();
        let began = tokio::time::Instant::now();
        let mut paced = Paced::new(&data[..], Some(&cap));
        let mut out = Vec::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = paced.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, data);
        // 40 reads of 256 KiB; the end is read once the last of them is paid for.
        assert_eq!(began.elapsed(), Duration::from_secs(10));

        let began = tokio::time::Instant::now();
        let mut unpaced = Paced::new(&data[..], None);
        let mut out = Vec::new();
        unpaced.read_to_end(&mut out).await.unwrap();
        assert_eq!(began.elapsed(), Duration::ZERO);
    }
}
