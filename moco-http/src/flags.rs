//! Parsers for flag values written the way Go programs take them, so that the Deployment args of
//! MOCO's `moco-controller` parse unchanged: Go booleans, zap's encoder and level. The log
//! format ([`LogEncoder`]) is every program's, the agent's and the Jobs' too, so it is here
//! rather than in the operator. Durations are Go durations too, parsed by
//! `moco_core::validate::duration::parse_std_duration`; listen addresses are in
//! [`crate::listen`].

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
    use super::*;

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
