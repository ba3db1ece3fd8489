//! The local platform behind `moco local`: instances as processes, roles as TCP endpoints.

pub mod error;
pub mod files;
pub mod layout;
pub mod manifest;
pub mod pods;
pub mod proxy;

pub use error::LocalError;
pub use layout::Layout;
pub use manifest::Manifest;
