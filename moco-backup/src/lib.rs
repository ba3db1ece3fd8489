//! Backups and point-in-time restore (issue 14, under way). Today: [`bucket`], the object
//! stores backups go to, and [`physical`], MariaDB's physical backup streamed into one and
//! restored from it.

pub mod binlog;
pub mod bucket;
pub mod local;
pub mod local_archive;
pub mod mysql_format;
pub mod physical;
pub mod retention;

pub use bucket::{Backend, Bucket, BucketError, BucketSpec, ObjectInfo};
