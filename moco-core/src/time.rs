//! Wall-clock instants as plain data.
//!
//! The core never reads a clock: callers put `now` into the facts. Instants are whole seconds
//! since the Unix epoch and travel as RFC 3339 strings (`2026-11-21T10:00:00Z`), the form
//! Kubernetes uses for `lastTransitionTime`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// An instant, in whole seconds since 1970-01-01T00:00:00Z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Timestamp(pub i64);

/// Text that is not an RFC 3339 instant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid RFC 3339 timestamp {text:?}: {reason}")]
pub struct TimestampError {
    /// The rejected text.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Timestamp {
    /// Seconds since the Unix epoch.
    pub fn seconds(self) -> i64 {
        self.0
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; fractions are truncated.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let err = |reason| TimestampError {
            text: text.to_owned(),
            reason,
        };
        let b = text.as_bytes();
        if b.len() < 20 {
            return Err(err("too short"));
        }
        let num = |range: std::ops::Range<usize>| -> Result<i64, TimestampError> {
            let part = text.get(range).ok_or_else(|| err("not ASCII"))?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(err("expected digits"));
            }
            part.parse::<i64>().map_err(|_| err("expected digits"))
        };
        if b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b't' || b[10] == b' ') {
            return Err(err("expected YYYY-MM-DDTHH:MM:SS"));
        }
        if b[13] != b':' || b[16] != b':' {
            return Err(err("expected HH:MM:SS"));
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return Err(err("date out of range"));
        }
        if hour > 23 || minute > 59 || second > 60 {
            return Err(err("time out of range"));
        }
        let mut rest = &text[19..];
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(err("empty fraction"));
            }
            rest = &frac[digits..];
        }
        let offset = match rest {
            "Z" | "z" => 0,
            _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
                if rest.as_bytes()[3] != b':' {
                    return Err(err("expected ±HH:MM offset"));
                }
                let end = text.len();
                let (hh, mm) = (num(end - 5..end - 3)?, num(end - 2..end)?);
                // RFC 3339 offsets are at most ±23:59.
                if hh > 23 || mm > 59 {
                    return Err(err("offset out of range"));
                }
                let sign = if rest.starts_with('-') { -1 } else { 1 };
                sign * (hh * 3600 + mm * 60)
            }
            _ => return Err(err("expected Z or ±HH:MM offset")),
        };
        let days = days_from_civil(year, month, day);
        Ok(Timestamp(
            days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset,
        ))
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "date-time" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_known_instants() {
        for (text, secs) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-11-21T10:00:00Z", 1_795_255_200),
            ("2000-02-29T23:59:59Z", 951_868_799),
            ("1969-12-31T23:59:59Z", -1),
        ] {
            let t = Timestamp::parse(text).unwrap();
            assert_eq!(t.0, secs, "{text}");
            assert_eq!(t.to_string(), text);
        }
    }

    #[test]
    fn accepts_offsets_and_fractions() {
        let t = Timestamp::parse("2026-11-21T12:00:00.123+02:00").unwrap();
        assert_eq!(t.to_string(), "2026-11-21T10:00:00Z");
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-21 10:00:00",
            "2026-11-21T10:00:00+0200",
            // Regression (issue 12, item 9): an impossible offset was accepted.
            "2026-11-21T10:00:00-99:99",
            "2026-11-21T10:00:00+24:00",
            "2026-11-21T10:00:00+01:60",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }
}
