//! Backups and point-in-time restore (`docs/backup.md`). A folder per family, and per concern:
//!
//! * [`bucket`]: where backups go, the object stores behind one interface;
//! * [`layout`]: where a backup goes in a bucket, the same for both families (MOCO's keys),
//!   and why taking or restoring one failed;
//! * [`mysql`]: MOCO's MySQL format (its command lines, choices and keys as pure data), their
//!   runner, and MySQL's binlog archive;
//! * [`mariadb`]: MariaDB's physical backup, and its binlog archive and replay to a second;
//! * [`job`]: the programs of the Kubernetes backup and restore Jobs and of the archiver, for
//!   both families;
//! * [`catalog`]: the physical backups a bucket holds of a cluster, and restore plans over
//!   them;
//! * [`guard`]: what keeps a bucket others can write, and tools that quote data, in bounds;
//! * [`retention`], which backups to delete; [`pace`], the rate cap.
#![deny(missing_docs)]

pub mod bucket;
pub mod catalog;
pub mod guard;
pub mod job;
pub mod layout;
pub mod mariadb;
pub mod mysql;
pub mod pace;
#[cfg(test)]
mod property_seed;
pub mod retention;

pub use bucket::{Backend, Bucket, BucketError, BucketSpec, Listing, ObjectInfo};
