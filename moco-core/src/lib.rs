//! # moco-core
//!
//! The decision engine of moco-rs, a MySQL/MariaDB operator compatible with MOCO.
//!
//! (Tutorial: see the end of this page once `decide` lands.)
#![deny(missing_docs)]

pub mod facts;
pub mod gtid;
pub mod operation;
pub mod resources;
pub mod state;
pub mod status;
pub mod time;
pub mod validate;
