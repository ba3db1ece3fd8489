//! Where backups go: MOCO's `BucketConfig` (S3 and S3-compatible services, Google Cloud
//! Storage, Azure Blob Storage) or a local directory, all behind `object_store`'s one
//! interface. `backend.rs` names the APIs (the one backend type, and where its names are read);
//! `spec.rs` describes a bucket and opens it; `objects.rs` streams objects in and out of an
//! open one; `listing.rs` lists whatever keys a bucket holds; `error.rs` says why one cannot be
//! used. A new object store: a [`Backend`] and its arm in [`BucketSpec::open`].

mod backend;
mod error;
mod listing;
mod objects;
mod spec;

pub use backend::Backend;
pub use error::BucketError;
pub use listing::Listing;
pub use objects::{Bucket, MAX_JSON_BYTES, ObjectInfo};
pub use spec::BucketSpec;
