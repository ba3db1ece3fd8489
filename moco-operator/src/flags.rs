//! Parsers for flag values written the way Go programs take them, so that the Deployment args of
//! MOCO's `moco-controller` parse unchanged: Go booleans, zap's encoder and level. Durations are
//! Go durations too, parsed by `moco_core::validate::duration::parse_std_duration`; listen
//! addresses are in [`crate::listen`].

/// Log output format (`--zap-encoder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEncoder {
    /// One JSON object per line (MOCO's production default).
    Json,
    /// Human-readable lines.
    Console,
}

/// Parses a Go boolean (`strconv.ParseBool`: `1 t T TRUE true True 0 f F FALSE false False`).
pub fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{text:?}: expected true or false")),
    }
}

/// Parses `--zap-encoder`.
pub fn parse_zap_encoder(text: &str) -> Result<LogEncoder, String> {
    match text {
        "json" => Ok(LogEncoder::Json),
        "console" => Ok(LogEncoder::Console),
        _ => Err(format!("{text:?}: expected json or console")),
    }
}

/// Parses `--zap-log-level`: `debug`, `info`, `error`, or an integer > 0 (1 is debug, more is
/// trace).
pub fn parse_zap_level(text: &str) -> Result<tracing::Level, String> {
    match text.to_ascii_lowercase().as_str() {
        "debug" => Ok(tracing::Level::DEBUG),
        "info" => Ok(tracing::Level::INFO),
        "error" => Ok(tracing::Level::ERROR),
        other => match other.parse::<u32>() {
            Ok(1) => Ok(tracing::Level::DEBUG),
            Ok(n) if n > 1 => Ok(tracing::Level::TRACE),
            _ => Err(format!(
                "{text:?}: expected debug, info, error or an integer > 0"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use moco_core::validate::duration::parse_std_duration;

    use super::*;

    /// The duration flags (`--check-interval`, `--partition-update-interval`) take what MOCO's
    /// Go flags take.
    #[test]
    fn go_durations() {
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
    fn go_bools_and_zap_values() {
        assert_eq!(parse_go_bool("True"), Ok(true));
        assert_eq!(parse_go_bool("0"), Ok(false));
        assert!(parse_go_bool("yes").is_err());
        assert_eq!(parse_zap_level("error"), Ok(tracing::Level::ERROR));
        assert_eq!(parse_zap_level("1"), Ok(tracing::Level::DEBUG));
        assert_eq!(parse_zap_level("5"), Ok(tracing::Level::TRACE));
        assert!(parse_zap_level("0").is_err());
        assert!(parse_zap_level("warn").is_err());
        assert_eq!(parse_zap_encoder("console"), Ok(LogEncoder::Console));
        assert!(parse_zap_encoder("text").is_err());
    }
}
