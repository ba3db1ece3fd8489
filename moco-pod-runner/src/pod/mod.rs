//! The Pod worker: a Pod's life from binding to deletion. (Being written.)

pub mod backoff;
pub mod hosts;
pub mod ips;
pub mod status;
