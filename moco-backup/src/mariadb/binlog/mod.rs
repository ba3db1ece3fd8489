//! Binlog archiving and point-in-time restore: [`events`] reads MariaDB binlog files,
//! [`timeline`] lays the archived files into one history and plans a restore (pure),
//! [`archive`] stores the primary's closed files (read beside it or through it: [`fetch`]), [`replay`] applies them to a restored
//! instance up to the chosen second.

pub mod archive;
pub mod events;
pub mod fetch;
pub mod replay;
pub mod timeline;

#[cfg(test)]
mod properties;

pub use archive::{ArchiveError, Archiver};
pub use events::Gtid;
pub use timeline::{Plan, PlanError, Point, Progress, Segment, Timeline};
