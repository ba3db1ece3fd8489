//! The HTTP plumbing that the operator (`moco controller`) and the in-pod agent (`moco agent`)
//! share, so that both get the same bounds and the same certificate handling:
//!
//! * [`listen`]: listen addresses as MOCO's flags write them (`:8080`, `host:port`, `0`);
//! * [`tls`]: certificates and keys from cert-manager's PEM files, re-read in place, and
//!   mutual TLS ([`tls::MtlsAcceptor`]: the client's certificate name reaches each request);
//! * [`flags`]: flag values as MOCO's Go programs take them (booleans, the log format and level);
//! * [`limits`]: connections, time and bytes one client may hold of a listener;
//! * [`metrics`]: the answer of `/metrics`.
#![deny(missing_docs)]

pub mod flags;
pub mod limits;
pub mod listen;
pub mod metrics;
pub mod tls;
