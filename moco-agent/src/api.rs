//! The agent's clone service, as the operator and the other agents call it: HTTP/1.1 over
//! mutual TLS on the agent port (9080), JSON bodies. MOCO's agent speaks gRPC here; the
//! operator and the agent of moco-rs are released together and speak this instead (see
//! `docs/agent.md`).
//!
//! | call | who may | what |
//! |---|---|---|
//! | `POST /v1/clone` ([`CloneRequest`]) | the controller (client certificate CN `moco-controller`) | start copying the donor onto this (empty) instance; `202` with the [`CloneStatus`], `409` while another runs, `412` unless this instance is empty |
//! | `GET /v1/clone` | the controller | the [`CloneStatus`] of the running or last clone |
//! | `GET /v1/credentials` | the controller | [`CredentialsStatus`]: the fingerprint of the passwords the agent holds |
//! | `POST /v1/credentials` ([`CredentialsRequest`]) | the controller | the passwords the cluster's Secret holds now (a rotation published them): the agent uses them from then on, without restarting; `200` with the [`CredentialsStatus`], `400` when a key is missing |
//! | `GET /v1/backup` | a client of this cluster (certificate naming `*.moco-<name>.<ns>.svc`, see [`crate::agent::peers`]) or the controller, that sends the cluster's clone-donor password in [`HEADER_DONOR_PASSWORD`] (else `403`) | MariaDB: a physical backup of this instance, streamed (`mariadb-backup --stream=xbstream`); the donor's `gtid_binlog_state` before it in [`HEADER_BINLOG_STATE`]. [`HEADER_PURPOSE`] `backup` runs the tool at nice +10, `clone` (or none) at full priority; another value is `400` |
//! | `PUT /v1/restore` | a client of this cluster or the controller that sends the cluster's `moco-admin` password in [`HEADER_ADMIN_PASSWORD`] (else `403`) | MariaDB: the body is an uncompressed `mariadb-backup --stream=xbstream` backup of another cluster, the source's `gtid_binlog_state` before it in [`HEADER_BINLOG_STATE`] (else `400`). Received, prepared and made ready as a clone is; answered only then: `200` with [`RestoreReceived`]. `409` while another clone, backup or restore runs or a copy waits; `412` unless this instance is an empty MariaDB with the copy tools; a body that ends with an error fails the restore (`400`), as does a bad stream or a failed prepare (`500`), and nothing of it is left |

use moco_core::gtid::GtidSet;
use moco_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Starts and observes clones.
pub const PATH_CLONE: &str = "/v1/clone";
/// Streams a backup of the donor.
pub const PATH_BACKUP: &str = "/v1/backup";
/// Receives a physical backup of another cluster (a restore).
pub const PATH_RESTORE: &str = "/v1/restore";
/// Which passwords the agent holds, and the controller's request to take new ones.
pub const PATH_CREDENTIALS: &str = "/v1/credentials";
/// The clone-donor password a recipient proves it belongs to the cluster with.
pub const HEADER_DONOR_PASSWORD: &str = "x-moco-clone-donor-password";
/// The `moco-admin` password a restore proves it may replace this cluster's data with.
pub const HEADER_ADMIN_PASSWORD: &str = "x-moco-admin-password";
/// [`CloneStatus::donor`] of a copy pushed by a restore.
pub const RESTORE_DONOR: &str = "restore";
/// The donor's (a restore: the source's) `gtid_binlog_state` before the backup started.
pub const HEADER_BINLOG_STATE: &str = "x-moco-gtid-binlog-state";
/// What a `GET /v1/backup` is for ([`CopyPurpose`]); absent means a clone.
pub const HEADER_PURPOSE: &str = "x-moco-copy-purpose";
/// The CN of the controller's client certificate (MOCO's).
pub const CONTROLLER_NAME: &str = "moco-controller";

/// Why a donor streams a copy of itself: a new instance waits for a clone, while a backup is
/// background work, and the donor's `mariadb-backup` gives way to its mysqld for it (a
/// semi-synchronous primary waits for this replica's acknowledgements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyPurpose {
    /// A clone onto a new instance: full priority.
    Clone,
    /// A backup: the tool runs at a lower priority (nice +10).
    Backup,
}

impl CopyPurpose {
    /// The value of [`HEADER_PURPOSE`].
    pub fn as_str(self) -> &'static str {
        match self {
            CopyPurpose::Clone => "clone",
            CopyPurpose::Backup => "backup",
        }
    }

    /// Parses [`HEADER_PURPOSE`]'s value.
    pub fn parse(value: &str) -> Option<Self> {
        [CopyPurpose::Clone, CopyPurpose::Backup]
            .into_iter()
            .find(|p| p.as_str() == value)
    }
}

/// What to copy from.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloneRequest {
    /// The donor's host: its Pod's DNS name (the agent's certificate names it).
    pub donor_host: String,
    /// The donor's SQL port (MySQL's `CLONE INSTANCE` connects to it).
    pub donor_port: u16,
    /// The donor's agent host, the name its certificate is checked for (MariaDB streams
    /// from the donor's agent).
    pub donor_agent_host: String,
    /// The donor's agent port.
    pub donor_agent_port: u16,
    /// The donor account (`moco-clone-donor`).
    pub user: String,
    /// Its password.
    pub password: String,
    /// The account that logs in once the copy runs (`moco-admin`).
    pub init_user: String,
    /// Its password.
    pub init_password: String,
    /// How long the copy may take to start answering.
    pub boot_timeout_seconds: u64,
}

impl std::fmt::Debug for CloneRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloneRequest")
            .field("donor_host", &self.donor_host)
            .field("donor_port", &self.donor_port)
            .field("donor_agent_host", &self.donor_agent_host)
            .field("donor_agent_port", &self.donor_agent_port)
            .field("user", &self.user)
            .field("init_user", &self.init_user)
            .field("boot_timeout_seconds", &self.boot_timeout_seconds)
            .finish_non_exhaustive()
    }
}

/// Where a clone is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClonePhase {
    /// No clone ran on this instance.
    #[default]
    Idle,
    /// Receiving the donor's data.
    Receiving,
    /// Preparing the received copy.
    Preparing,
    /// MariaDB: the copy is prepared and waits for the Pod to restart (`moco init` puts it
    /// in place before mysqld starts).
    Ready,
    /// The copy runs; its GTID state and accounts are being set.
    Seeding,
    /// Done: the instance runs the copy.
    Completed,
    /// Failed; see `error`.
    Failed,
}

impl ClonePhase {
    /// A clone is under way (the instance must not be used).
    pub fn in_progress(self) -> bool {
        matches!(
            self,
            ClonePhase::Receiving | ClonePhase::Preparing | ClonePhase::Ready | ClonePhase::Seeding
        )
    }
}

/// The running or last clone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneStatus {
    /// Where it is.
    pub phase: ClonePhase,
    /// `host:port` of the donor.
    #[serde(default)]
    pub donor: Option<String>,
    /// Bytes received so far.
    #[serde(default)]
    pub bytes: u64,
    /// When it started.
    #[serde(default)]
    pub started_at: Option<Timestamp>,
    /// When it ended.
    #[serde(default)]
    pub finished_at: Option<Timestamp>,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// The answer of `GET` and `POST /v1/credentials`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsStatus {
    /// The fingerprint of the passwords the agent holds (`MocoPasswords::fingerprint`).
    pub fingerprint: String,
}

/// The body of `POST /v1/credentials`: the passwords the cluster's Secret holds now, by its
/// keys (`ADMIN_PASSWORD`, …).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsRequest {
    /// Secret key → password.
    pub passwords: std::collections::BTreeMap<String, String>,
}

impl std::fmt::Debug for CredentialsRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialsRequest")
            .field("keys", &self.passwords.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The answer of `PUT /v1/restore`: the copy is prepared and waits for the Pod to restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReceived {
    /// Bytes of the stream received.
    pub bytes: u64,
    /// The copy's GTID position (what mariadb-backup reported).
    pub position: GtidSet,
}

/// A refusal, as the agent's error bodies carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What was wrong.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_purposes_round_trip_and_nothing_else_parses() {
        for purpose in [CopyPurpose::Clone, CopyPurpose::Backup] {
            assert_eq!(CopyPurpose::parse(purpose.as_str()), Some(purpose));
        }
        for other in ["", "Backup", "backup ", "restore"] {
            assert_eq!(CopyPurpose::parse(other), None, "{other:?}");
        }
    }
}
