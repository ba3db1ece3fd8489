//! Why a bucket cannot be used or an object not be stored or read: [`BucketError`], each
//! naming the field or the object.

/// Why a bucket cannot be used. Each names the field (its JSON name) or the object.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    /// A field is wrong.
    #[error("{field}: {message}")]
    Invalid {
        /// `bucketConfig.bucketName`, …
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The store refused or failed.
    #[error("{target}: {source}")]
    Store {
        /// The bucket and object.
        target: String,
        /// The store's error.
        source: object_store::Error,
    },
    /// Reading the data to upload failed.
    #[error("{target}: reading the data to upload: {source}")]
    Read {
        /// The bucket and object.
        target: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// Reading an object failed after its download began.
    #[error("{target}: reading: {source}")]
    Download {
        /// The bucket and object.
        target: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// A JSON object is larger than [`MAX_JSON_BYTES`](super::MAX_JSON_BYTES).
    #[error(
        "{target}: larger than {limit} bytes, the most a manifest, record or progress mark may hold"
    )]
    TooLarge {
        /// The bucket and object.
        target: String,
        /// The limit.
        limit: u64,
    },
}

impl BucketError {
    /// True when the object asked for does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            BucketError::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }
        )
    }
}

pub(super) fn invalid(field: &'static str, message: impl Into<String>) -> BucketError {
    BucketError::Invalid {
        field,
        message: message.into(),
    }
}
