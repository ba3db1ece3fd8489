//! # moco-operator
//!
//! The library of the in-cluster process (`moco controller`).
#![deny(missing_docs)]
