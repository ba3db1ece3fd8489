//! A cap on a backup's read rate, in bytes per second, written as a Kubernetes quantity
//! (`60Mi`, `100M`).
//!
//! A backup taken from a replica competes with the primary for the disk and the CPU when they
//! share a node (or, with `moco local`, one machine); capping its read rate trades a longer
//! backup for the primary's write latency (`docs/benchmarks.md`). The same text is accepted by
//! `moco local backup --max-rate`, `moco backup --max-rate` and the MySQLCluster annotation the
//! operator turns into that flag, so the rule lives here, once.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use thiserror::Error;

use super::quantity::Quantity;

/// A positive whole number of bytes per second, and the text it was written as (its
/// `Display`, so that a rendered flag says what the user wrote).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByteRate {
    bytes_per_second: NonZeroU64,
    text: String,
}

/// Rate text that is not a positive quantity of bytes.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{text:?}: {reason}")]
pub struct RateError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ByteRate {
    /// Parses `text` as a Kubernetes quantity of bytes per second: `60Mi` is 62,914,560,
    /// `100M` is 100,000,000. It must be at least one byte; a fraction is rounded up.
    pub fn parse(text: &str) -> Result<Self, RateError> {
        let wrong = |reason: String| RateError {
            text: text.to_owned(),
            reason,
        };
        let quantity = Quantity::parse(text).map_err(|e| wrong(e.kind.to_string()))?;
        if text.ends_with('m') {
            // Kubernetes' `m` is milli: `60m` is 0.06 bytes, surely meant as megabytes.
            return Err(wrong(
                "`m` means thousandths in a quantity: write Mi (MiB/s) or M (MB/s)".to_owned(),
            ));
        }
        let units = quantity.units_ceil();
        let bytes = u64::try_from(units)
            .ok()
            .and_then(NonZeroU64::new)
            .ok_or_else(|| wrong("must be a positive number of bytes per second".to_owned()))?;
        Ok(ByteRate {
            bytes_per_second: bytes,
            text: text.to_owned(),
        })
    }

    /// Bytes per second.
    pub fn bytes_per_second(&self) -> NonZeroU64 {
        self.bytes_per_second
    }

    /// The share of one of `workers` readers that together keep to this rate (at least one
    /// byte): tools such as `mysqlsh` cap each thread, not the whole.
    pub fn per_worker(&self, workers: NonZeroU64) -> NonZeroU64 {
        NonZeroU64::new(self.bytes_per_second.get() / workers.get()).unwrap_or(NonZeroU64::MIN)
    }
}

impl fmt::Display for ByteRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for ByteRate {
    type Err = RateError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ByteRate::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &str) -> u64 {
        ByteRate::parse(text)
            .unwrap_or_else(|e| panic!("{e}"))
            .bytes_per_second()
            .get()
    }

    #[test]
    fn binary_and_decimal_suffixes_and_plain_bytes() {
        assert_eq!(bytes("60Mi"), 60 * 1024 * 1024);
        assert_eq!(bytes("100M"), 100_000_000);
        assert_eq!(bytes("1Gi"), 1 << 30);
        assert_eq!(bytes("512Ki"), 512 * 1024);
        assert_eq!(bytes("2048"), 2048);
        assert_eq!(bytes("1.5Ki"), 1536);
        assert_eq!(bytes("0.5"), 1, "a fraction is rounded up");
        assert_eq!(ByteRate::parse("60Mi").unwrap().to_string(), "60Mi");
    }

    #[test]
    fn zero_negative_milli_and_nonsense_are_refused_with_the_text() {
        for (text, says) in [
            ("0", "positive"),
            ("-5Mi", "positive"),
            ("60m", "write Mi"),
            ("60MB", "unknown suffix"),
            ("", "empty"),
            ("fast", "no digits"),
        ] {
            let e = ByteRate::parse(text).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{text:?}: ")), "{e}");
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn the_share_of_each_worker_keeps_the_total_within_the_rate() {
        let rate = ByteRate::parse("100M").unwrap();
        let four = NonZeroU64::new(4).unwrap();
        assert_eq!(rate.per_worker(four).get(), 25_000_000);
        let three = NonZeroU64::new(3).unwrap();
        assert!(rate.per_worker(three).get() * 3 <= 100_000_000);
        let tiny = ByteRate::parse("2").unwrap();
        assert_eq!(tiny.per_worker(four).get(), 1);
    }
}
