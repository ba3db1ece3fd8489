//! Errors of the decision engine. The only failure is facts that contradict themselves; the
//! error names the JSON path of the offending value.

use thiserror::Error;

/// Facts that cannot describe a real cluster.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct FactsError {
    /// JSON path of the offending value, e.g. `instances[3].index`.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl FactsError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FactsError {
            path: path.into(),
            message: message.into(),
        }
    }
}
