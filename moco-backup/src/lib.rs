//! Backups and point-in-time restore (`docs/backup.md`): [`bucket`], the object stores;
//! [`physical`], MariaDB's physical backup streamed into one and restored from it, its GTID
//! position read from the stream by [`xbstream`]; [`binlog`], archiving and replay to a
//! second; [`local`] and [`local_archive`], the `moco local` commands; [`retention`];
//! [`pace`], the rate cap; [`mysql_format`], MOCO's MySQL format as command lines; [`job`], the
//! programs of the Kubernetes backup and restore Jobs.
//!
//! A bucket may hold what others wrote (`docs/backup.md`, "A bucket others can write"):
//! [`entry_name`] and [`unpacked`] keep an object's entries inside the directory they are
//! unpacked into, [`bounded`] holds readers to the sizes a record declares, and
//! [`tool_output`] redacts what tools say before it reaches an Event or the status.

pub mod binlog;
pub mod bounded;
pub mod bucket;
pub mod command;
pub mod entry_name;
pub mod job;
pub mod local;
pub mod local_archive;
pub mod mysql_archive;
pub mod mysql_format;
pub mod pace;
pub mod physical;
pub mod retention;
pub mod tool_output;
pub mod unpacked;
pub mod xbstream;

pub use bucket::{Backend, Bucket, BucketError, BucketSpec, Listing, ObjectInfo};
