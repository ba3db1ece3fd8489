//! The one logging set-up of every subcommand that logs: `moco controller` to standard error in
//! the format its zap flags ask for, the `moco local` manager to its log file.

use std::fs::File;
use std::sync::Mutex;

use moco_http::flags::LogEncoder;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// The environment variable holding a tracing filter (e.g. `moco=debug,kube=info`) that
/// overrides the default level.
pub(crate) const FILTER_ENV: &str = "MOCO_LOG";

/// Where log lines go.
#[derive(Debug)]
pub(crate) enum LogOutput {
    /// Standard error.
    Stderr,
    /// An open file (appended to).
    File(File),
}

/// Installs the process-wide subscriber: `format` lines to `output`, at `default_level` unless
/// `MOCO_LOG` holds a filter. A subscriber installed before is kept.
pub(crate) fn init(output: LogOutput, format: LogEncoder, default_level: tracing::Level) {
    let filter = EnvFilter::try_from_env(FILTER_ENV)
        .unwrap_or_else(|_| EnvFilter::new(default_level.as_str().to_ascii_lowercase()));
    let writer = match output {
        LogOutput::Stderr => BoxMakeWriter::new(std::io::stderr),
        LogOutput::File(file) => BoxMakeWriter::new(Mutex::new(file)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match format {
        LogEncoder::Json => builder.json().try_init(),
        LogEncoder::Console => builder.with_ansi(false).try_init(),
    };
}
