//! The error of every `moco local` command.

use crate::platform::LocalError;

/// Errors of `moco local`'s commands. The messages name the command line's flags (`--dir`,
/// `--to N`, …), which are the option fields of the same names.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// From the local platform.
    #[error("{0}")]
    Local(#[from] LocalError),
    /// Bad options or a cluster in the wrong state, with the flag or object named.
    #[error("{0}")]
    Usage(String),
}

/// An [`Error::Usage`].
pub(crate) fn usage(message: impl Into<String>) -> Error {
    Error::Usage(message.into())
}
