//! One module per subcommand.

pub mod agent;
pub mod backup_job;
pub mod controller;
pub mod crd;
pub mod input;
pub mod local;
pub mod plan;
pub mod render;
pub mod validate;
