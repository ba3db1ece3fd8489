//! One module per subcommand.

pub mod crd;
pub mod plan;
pub mod validate;
