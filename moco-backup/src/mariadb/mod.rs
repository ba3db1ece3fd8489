//! MariaDB's backups, beyond MOCO (which backs up MySQL only): [`physical`], the physical
//! backup streamed into the bucket and restored from it, its GTID position read from the
//! stream by [`xbstream`]; [`binlog`], the binlog archive and the replay to a second.

pub mod binlog;
pub mod physical;
pub mod xbstream;
