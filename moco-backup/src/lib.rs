//! Backups and point-in-time restore (issue 14, under way). Today: [`bucket`], the object
//! stores backups go to.

pub mod bucket;

pub use bucket::{Backend, Bucket, BucketError, BucketSpec, ObjectInfo};
