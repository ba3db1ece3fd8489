//! The object storage APIs a bucket is reached through, the one type for them: those of
//! MOCO's `bucketConfig.backendType` (moco-api's [`BackendType`], which the operator renders as
//! the Jobs' `--backend-type`), and a local directory (`moco local`, tests). Every name a
//! backend goes by is read here: the flag's value and the schemes of a bucket URL. A new object
//! store is a variant here (and in the API's type) and its builder in `BucketSpec::open`.

use moco_api::backuppolicy::BackendType;
use serde::Deserialize as _;
use serde::de::IntoDeserializer as _;

use super::error::{BucketError, invalid};

/// The Jobs' flag for `bucketConfig.backendType`.
pub(super) const BACKEND_TYPE_FLAG: &str = "--backend-type";

/// The object storage API (`bucketConfig.backendType`, plus a local directory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Amazon S3 and S3-compatible services (`s3`, MOCO's default).
    S3,
    /// Google Cloud Storage (`gcs`).
    Gcs,
    /// Azure Blob Storage (`azure`); the bucket is the container.
    Azure,
    /// A directory of this machine (`moco local`, tests).
    Directory,
}

impl From<BackendType> for Backend {
    fn from(api: BackendType) -> Self {
        match api {
            BackendType::S3 => Backend::S3,
            BackendType::Gcs => Backend::Gcs,
            BackendType::Azure => Backend::Azure,
        }
    }
}

impl Backend {
    /// The API `--backend-type` names, spelt as `bucketConfig.backendType` is (read as the
    /// API's type reads it, so the Job takes every value the API admits); anything else is an
    /// error naming the flag.
    pub fn from_backend_type(text: &str) -> Result<Self, BucketError> {
        let api: Result<BackendType, serde::de::value::Error> =
            BackendType::deserialize(text.into_deserializer());
        api.map(Backend::from)
            .map_err(|_| invalid(BACKEND_TYPE_FLAG, format!("{text:?}: use s3, gcs or azure")))
    }

    /// A bucket URL taken apart: the API its scheme names (`s3://`, `gs://` or `gcs://`,
    /// `azure://`, `file://`; none is a directory's path) and what follows the scheme.
    pub(super) fn from_url(url: &str) -> Result<(Self, &str), BucketError> {
        Ok(match url.split_once("://") {
            Some(("s3", b)) => (Backend::S3, b),
            Some(("gs" | "gcs", b)) => (Backend::Gcs, b),
            Some(("azure", b)) => (Backend::Azure, b),
            Some(("file", p)) => (Backend::Directory, p),
            Some((scheme, _)) => {
                return Err(invalid(
                    "url",
                    format!(
                        "{url:?}: unknown scheme {scheme:?}; use s3://, gs://, azure:// or file://"
                    ),
                ));
            }
            None => (Backend::Directory, url),
        })
    }

    /// The bucket `name` as messages call it (`s3://backups`, `dir:/var/backups`).
    pub(super) fn describe(self, name: &str) -> String {
        match self {
            Backend::S3 => format!("s3://{name}"),
            Backend::Gcs => format!("gs://{name}"),
            Backend::Azure => format!("azure://{name}"),
            Backend::Directory => format!("dir:{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag takes the API's names, and exactly those: what the operator renders from any
    /// `bucketConfig.backendType` the API admits parses back to the same backend.
    #[test]
    fn the_flag_takes_the_apis_names() {
        for (api, text) in [
            (BackendType::S3, "s3"),
            (BackendType::Gcs, "gcs"),
            (BackendType::Azure, "azure"),
        ] {
            assert_eq!(
                serde_json::to_value(api).unwrap(),
                serde_json::Value::from(text)
            );
            assert_eq!(api.as_str(), text);
            assert_eq!(
                Backend::from_backend_type(api.as_str()).unwrap(),
                Backend::from(api)
            );
            assert_eq!(
                Backend::from_backend_type(text).unwrap(),
                Backend::from(api)
            );
        }
        for bad in ["ftp", "S3", "", "dir"] {
            let e = Backend::from_backend_type(bad).unwrap_err().to_string();
            assert_eq!(e, format!("--backend-type: {bad:?}: use s3, gcs or azure"));
        }
    }
}
