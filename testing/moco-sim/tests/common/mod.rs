//! What the simulator's test files share: the manager's timing, a paused-clock runtime and
//! MOCO's acknowledgement count; the driver of clusters that change size (`drive`) and what
//! the growth and shrink tests do with it (`resize`).
#![allow(dead_code)]

pub(crate) mod drive;
pub(crate) mod resize;

use std::time::Duration;

use moco_cluster::manager::ManagerConfig;
use moco_core::facts::Flavor;

pub(crate) fn manager_config() -> ManagerConfig {
    ManagerConfig {
        check_interval: Duration::from_secs(1),
        probe_timeout: Duration::from_secs(1),
        probe_attempts: 2,
        probe_retry_delay: Duration::from_millis(100),
        step_timeout: Duration::from_secs(30),
        clone_timeout: Duration::from_secs(120),
        slow_primary_limit: Duration::from_secs(15),
        health: Default::default(),
    }
}

/// A single-threaded runtime with tokio's clock paused: the simulator's virtual time.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

/// Writes a commit waits for: MOCO's `floor(n/2)`, MariaDB at most one.
pub(crate) fn acks_needed(n: u32, flavor: Flavor) -> u32 {
    match flavor {
        Flavor::Mysql => n / 2,
        Flavor::Mariadb => (n / 2).min(1),
    }
}
