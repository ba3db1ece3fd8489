//! Go `time.ParseDuration` semantics: the `@every <duration>` cron descriptor, and the duration
//! flags of the `moco` commands (MOCO's flags are Go flags), through [`parse_std_duration`].

use thiserror::Error;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    /// The string is empty or has no number where one is required.
    #[error("invalid duration {0:?}")]
    Invalid(String),
    /// A number is not followed by a unit.
    #[error("missing unit in duration {0:?}")]
    MissingUnit(String),
    /// The unit is not one of `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
    #[error("unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// The value does not fit in a signed 64-bit count of nanoseconds.
    #[error("invalid duration {0:?}: out of range")]
    Overflow(String),
    /// A negative duration where only a length of time makes sense (a flag, an interval).
    #[error("invalid duration {0:?}: a negative duration is not allowed")]
    Negative(String),
}

const NANOS_PER_UNIT: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),  // micro sign
    ("\u{3bc}s", 1_000), // Greek small letter mu
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a Go duration such as `300ms`, `-1.5h` or `2h45m` into nanoseconds.
///
/// Accepts exactly what Go's `time.ParseDuration` accepts: an optional sign, then one or more
/// `<decimal number><unit>` pairs; the bare string `0` is also valid.
pub fn parse_go_duration(input: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(input.to_owned());
    let mut rest = input;
    let mut negative = false;
    if let Some(r) = rest.strip_prefix('-') {
        negative = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    // Like Go: integer nanoseconds per component, the fraction scaled by the unit and truncated.
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let frac_len = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..frac_len];
            rest = &r[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(input.to_owned()));
        }
        let Some(&(_, scale)) = NANOS_PER_UNIT.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit {
                unit: unit.to_owned(),
                input: input.to_owned(),
            });
        };
        let overflow = || DurationError::Overflow(input.to_owned());
        let int_value: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse::<u128>().map_err(|_| overflow())?
        };
        let mut component = int_value.checked_mul(scale).ok_or_else(overflow)?;
        // Fractional part: value * scale / 10^digits, truncated like Go.
        if !frac_part.is_empty() {
            let mut frac_value: u128 = 0;
            let mut denom: u128 = 1;
            for b in frac_part.bytes() {
                // Go stops accumulating digits once more precision cannot matter.
                if denom > 1_000_000_000_000_000_000 {
                    break;
                }
                frac_value = frac_value * 10 + u128::from(b - b'0');
                denom *= 10;
            }
            component = component
                .checked_add(frac_value * scale / denom)
                .ok_or_else(overflow)?;
        }
        total = total.checked_add(component).ok_or_else(overflow)?;
        if total > i64::MAX as u128 + u128::from(negative) {
            return Err(overflow());
        }
    }
    if negative {
        let value = i128::try_from(total).map_err(|_| DurationError::Overflow(input.to_owned()))?;
        i64::try_from(-value).map_err(|_| DurationError::Overflow(input.to_owned()))
    } else {
        i64::try_from(total).map_err(|_| DurationError::Overflow(input.to_owned()))
    }
}

/// Parses a Go duration into a [`std::time::Duration`], refusing negative values.
///
/// The syntax is [`parse_go_duration`]'s; this is the one parser behind every duration flag, so
/// that `--check-interval=1m30s` means the same to `moco controller` as to MOCO.
pub fn parse_std_duration(input: &str) -> Result<std::time::Duration, DurationError> {
    let nanos = parse_go_duration(input)?;
    let nanos = u64::try_from(nanos).map_err(|_| DurationError::Negative(input.to_owned()))?;
    Ok(std::time::Duration::from_nanos(nanos))
}

/// `duration` as Go's `time.Duration.String()` writes it (`1h2m3.5s`, `1.5ms`, `0s`): MOCO's
/// status fields of type `metav1.Duration` (`status.backup.elapsed`) hold this text.
pub fn format_go_duration(duration: std::time::Duration) -> String {
    /// `value` with a decimal point `digits` places from the right, trailing zeros dropped.
    fn fixed(value: u128, digits: u32) -> String {
        let scale = 10u128.pow(digits);
        let (whole, frac) = (value / scale, value % scale);
        if frac == 0 {
            return whole.to_string();
        }
        let frac = format!("{frac:0width$}", width = digits as usize);
        format!("{whole}.{}", frac.trim_end_matches('0'))
    }
    let nanos = duration.as_nanos();
    match nanos {
        0 => "0s".to_owned(),
        n if n < 1_000 => format!("{n}ns"),
        n if n < 1_000_000 => format!("{}\u{b5}s", fixed(n, 3)),
        n if n < 1_000_000_000 => format!("{}ms", fixed(n, 6)),
        n => {
            let secs = n / 1_000_000_000;
            let (h, m) = (secs / 3600, (secs / 60) % 60);
            let s = fixed(n % 60_000_000_000, 9);
            match (h, m) {
                (0, 0) => format!("{s}s"),
                (0, m) => format!("{m}m{s}s"),
                (h, m) => format!("{h}h{m}m{s}s"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_text_round_trips_and_matches_go() {
        use std::time::Duration;
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(999), "999ns"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_nanos(1_500), "1.5\u{b5}s"),
            (Duration::from_secs(2), "2s"),
            (Duration::from_millis(62_500), "1m2.5s"),
            (Duration::from_secs(120), "2m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(3_723_250), "1h2m3.25s"),
        ];
        for (d, text) in cases {
            assert_eq!(format_go_duration(d), text);
            assert_eq!(parse_std_duration(text), Ok(d), "{text}");
        }
    }

    #[test]
    fn go_examples() {
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("10s"), Ok(10_000_000_000));
        assert_eq!(parse_go_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_go_duration("2h45m"), Ok(9_900_000_000_000));
        assert_eq!(parse_go_duration("-300ms"), Ok(-300_000_000));
        assert_eq!(parse_go_duration("1\u{b5}s"), Ok(1_000));
        assert_eq!(parse_go_duration(".5s"), Ok(500_000_000));
        assert_eq!(parse_go_duration("1.s"), Ok(1_000_000_000));
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("10x").is_err());
        assert!(parse_go_duration(".s").is_err());
        assert!(parse_go_duration("1s ").is_err());
        assert!(parse_go_duration("9999999999h").is_err());
    }

    /// The operator's duration flags (`--check-interval`, `--partition-update-interval`) take
    /// what MOCO's Go flags take.
    #[test]
    fn std_durations_take_what_gos_flags_take() {
        use std::time::Duration;
        let cases = [
            ("0", Duration::ZERO),
            ("1m", Duration::from_secs(60)),
            ("30s", Duration::from_secs(30)),
            ("5s", Duration::from_secs(5)),
            ("100ms", Duration::from_millis(100)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5h", Duration::from_secs(5400)),
            ("2m0s", Duration::from_secs(120)),
            ("+10s", Duration::from_secs(10)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_std_duration(text), Ok(want), "{text}");
        }
        for bad in ["", "10", "-1s", "1x", "s", "1m-", "1..5s", "ms"] {
            assert!(parse_std_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn std_durations_refuse_negatives() {
        use std::time::Duration;
        assert_eq!(parse_std_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_std_duration("-0s"), Ok(Duration::ZERO));
        assert_eq!(parse_std_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            parse_std_duration("250\u{b5}s"),
            Ok(Duration::from_micros(250))
        );
        assert_eq!(
            parse_std_duration("-1s"),
            Err(DurationError::Negative("-1s".to_owned()))
        );
        let message = parse_std_duration("-1s").map_err(|e| e.to_string());
        assert_eq!(
            message,
            Err("invalid duration \"-1s\": a negative duration is not allowed".to_owned())
        );
        assert!(parse_std_duration("10").is_err());
    }
}
