//! MySQL's backups in MOCO's own format: [`format`](mod@format), the command lines, choices
//! and keys as pure data; [`command`], the runner of those command lines; [`archive`], binlog
//! archiving every few seconds beside the format (beyond MOCO).

pub mod archive;
pub mod command;
pub mod format;
