//! # moco-core
//!
//! The decision engine of moco-rs, a MySQL/MariaDB operator compatible with MOCO.
//!
//! (Tutorial: see the end of this page once `decide` lands.)
#![deny(missing_docs)]

pub mod assessment;
mod decide;
pub mod error;
pub mod facts;
pub mod gtid;
pub mod operation;
mod plan;
pub mod resources;
pub mod state;
pub mod status;
pub mod time;
pub mod validate;

pub use decide::{Action, Decision, check_facts, decide};
pub use error::FactsError;
pub use plan::{CATCH_UP_TIMEOUT_SECONDS, READ_ONLY_TIMEOUT_SECONDS, SEMI_SYNC_TIMEOUT_MS};
