//! Guards where the programs meet what others control. A bucket may hold what others wrote
//! (`docs/backup.md`, "A bucket others can write"): [`entry_name`] and [`unpacked`] keep an
//! object's entries inside the directory they are unpacked into, and [`bounded`] holds
//! readers to the sizes a record declares. A tool's output may quote the data it read:
//! [`tool_output`] redacts it before it reaches an Event or the status.

pub mod bounded;
pub mod entry_name;
pub mod tool_output;
pub mod unpacked;
