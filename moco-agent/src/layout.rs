//! The files on an instance's data volume (`--data-dir`, `/var/lib/mysql` in a Pod). The
//! server's datadir is `data/` under it; beside it live the markers that make `moco init`
//! and the clone crash-safe, since each step is a rename on one filesystem.
//!
//! | path | written by | meaning |
//! |---|---|---|
//! | `data/` | `moco init`, a clone | the server's datadir |
//! | `moco-initialized` | `moco init` | `data/` holds a complete initialisation |
//! | `moco-clone-staging/` | the agent | a copy (a clone's or a restore's) being received and prepared |
//! | `moco-clone-ready/` | the agent | a prepared copy; the next `moco init` puts it in place of `data/` |
//! | `moco-clone-seed.json` | the agent; `moco init` clears its `rekey` once it re-keyed a restored copy | the GTID state the copy must get when it first starts, and whether its accounts still carry another cluster's passwords |
//! | `moco-clone-result.json` | the agent | how the last clone ended |

use std::path::{Path, PathBuf};

/// The data volume of one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataVolume {
    root: PathBuf,
}

impl DataVolume {
    /// The volume mounted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DataVolume { root: root.into() }
    }

    /// The mount point.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The server's datadir.
    pub fn datadir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// Marks a complete initialisation.
    pub fn initialized_marker(&self) -> PathBuf {
        self.root.join("moco-initialized")
    }

    /// A copy being received.
    pub fn clone_staging(&self) -> PathBuf {
        self.root.join("moco-clone-staging")
    }

    /// A prepared copy waiting for the server to stop.
    pub fn clone_ready(&self) -> PathBuf {
        self.root.join("moco-clone-ready")
    }

    /// The GTID state a copy gets at its first start.
    pub fn clone_seed(&self) -> PathBuf {
        self.root.join("moco-clone-seed.json")
    }

    /// How the last clone ended.
    pub fn clone_result(&self) -> PathBuf {
        self.root.join("moco-clone-result.json")
    }

    /// Scratch space of the donor's backup tool.
    pub fn backup_scratch(&self) -> PathBuf {
        self.root.join("moco-backup-scratch")
    }
}

/// Writes `contents` to `path` atomically (mode 0644: the markers hold no secret).
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    moco_adapters::modes::write_atomic(path, contents, 0o644)
}

pub use moco_adapters::modes::sync_dir;
