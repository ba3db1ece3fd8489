//! One module per subcommand.

pub mod plan;
pub mod crd;
pub mod validate;
pub mod local;
