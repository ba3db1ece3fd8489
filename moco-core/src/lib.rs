//! # moco-core
//!
//! The decision engine of moco-rs, a MySQL/MariaDB operator compatible with
//! [MOCO](https://github.com/cybozu-go/moco). It is a pure function library: observed facts go
//! in; the cluster state, the new status and an ordered list of operations come out. It never
//! touches a network, a file, a clock or a random number generator, so the Kubernetes
//! operator, `moco local` and any other operator that embeds it make exactly the same choices,
//! and every choice can be replayed from a JSON file (`moco plan --facts FILE`).
//!
//! ## The loop
//!
//! ```text
//!   observe ──► ClusterFacts ──► decide() ──► Decision { state, status, steps, events }
//!      ▲                                             │
//!      └──────────── execute steps in order ◄────────┘
//! ```
//!
//! 1. Gather [`facts::ClusterFacts`]: the spec fields that matter, the recorded
//!    [`status::ClusterStatus`], `now`, and for each instance its Pod and what mysqld reported
//!    (or `None` when it could not be reached).
//! 2. Call [`decide`]. It checks the facts, derives an [`assessment::Assessment`] (errant and
//!    hung replicas, candidates, lost data), decides the [`state::ClusterState`] in MOCO's
//!    order, computes the next status and plans [`operation::Step`]s.
//! 3. Persist `decision.status`, then run the steps in order, stopping at the first failure and
//!    recording each step's `on_success`/`on_failure` [`operation::Event`].
//! 4. Observe again: at once when `decision.redo` is set, after the check interval otherwise;
//!    [`pacing::Pacing`] holds back a plan decided again and again without effect.
//!
//! ## Example
//!
//! A three-instance cluster whose primary is unreachable: the first round stops the replicas'
//! IO threads, so the next round can choose the new primary on stable GTID sets.
//!
//! ```
//! use moco_core::facts::ClusterFacts;
//! use moco_core::operation::Operation;
//! use moco_core::state::ClusterState;
//!
//! let mut facts: ClusterFacts =
//!     serde_json::from_str(include_str!("../../docs/examples/facts/healthy.json"))?;
//! assert_eq!(moco_core::decide(&facts)?.state, ClusterState::Healthy);
//!
//! facts.instances[0].mysqld = None; // the primary stopped answering
//! let decision = moco_core::decide(&facts)?;
//! assert_eq!(decision.state, ClusterState::Failed);
//! assert!(matches!(
//!     decision.steps[0].operation,
//!     Operation::StopReplicaIoThread { index: 1 }
//! ));
//! assert!(decision.redo);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Modules
//!
//! - [`facts`], [`status`], [`time`], [`gtid`]: the input data.
//! - [`assessment`], [`state`], [`decide`]: what the engine concludes.
//! - [`operation`]: what it asks adapters to do.
//! - [`resources`]: Kubernetes-side decisions (PodDisruptionBudget, my.cnf, StatefulSet updates,
//!   volume claims), also pure.
//! - [`rotation`]: the steps of a rotation of MOCO's own passwords, also pure.
//! - [`validate`]: the admission rules of the MySQLCluster and BackupPolicy APIs.
//! - [`dialect`], [`moco_accounts`], [`option_file`]: the vocabulary every program shares about
//!   a server (which statements it takes, MOCO's eight accounts and their passwords, option-file
//!   values), so that the renderer and the backup formats need no MySQL driver.
//!
//! `docs/clustering.md` in the repository explains the states, the invariants and where this
//! engine deliberately differs from MOCO.
#![deny(missing_docs)]

pub mod accounts;
pub mod assessment;
mod decide;
pub mod dialect;
pub mod error;
pub mod facts;
pub mod gtid;
pub mod moco_accounts;
pub mod operation;
pub mod option_file;
pub mod pacing;
mod plan;
mod quorum;
pub mod resources;
pub mod rotation;
pub mod state;
pub mod status;
pub mod time;
pub mod validate;

pub use decide::{Decision, MAX_REPLICAS, check_facts, decide};
pub use error::FactsError;
pub use plan::{
    Action, CATCH_UP_TIMEOUT_SECONDS, MAX_TARGET_LAG_SECONDS, READ_ONLY_TIMEOUT_SECONDS,
    SEMI_SYNC_TIMEOUT_MS,
};
