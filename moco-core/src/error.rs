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

/// Declares an error category: the one shape every layer's errors use for their `category()`
/// (the manager's ports, the agent, reconcile), so that a category is an enum and never text.
/// Each variant names its label, a stable, low-cardinality value for metric labels and log
/// fields; the enum gets `as_str` (the label) and `Display` (the same).
///
/// ```
/// moco_core::error_category! {
///     /// What kind of failure it was.
///     pub enum Category {
///         /// A file or a process.
///         Io => "io",
///         /// The network.
///         Remote => "remote",
///     }
/// }
/// assert_eq!(Category::Io.as_str(), "io");
/// assert_eq!(Category::Remote.to_string(), "remote");
/// ```
#[macro_export]
macro_rules! error_category {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident => $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// The label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
