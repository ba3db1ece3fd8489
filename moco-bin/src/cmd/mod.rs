//! One module per subcommand.

pub(crate) mod agent;
pub(crate) mod backup_job;
pub(crate) mod controller;
pub(crate) mod crd;
pub(crate) mod input;
pub(crate) mod local;
pub(crate) mod plan;
pub(crate) mod render;
pub(crate) mod validate;
