//! What starting a container needs, written by the Pod worker and read by
//! `pod-runner container-init` (as JSON) in the new container.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One start of one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSpec {
    /// The program, an absolute path on the host (the image table chose it).
    pub program: PathBuf,
    /// `argv[0]`: multi-call programs (the `moco` binary) dispatch on it.
    pub argv0: String,
    /// `argv[1..]`.
    pub args: Vec<String>,
    /// The whole environment, in order.
    pub env: Vec<(String, String)>,
    /// The working directory inside the container (`/` when unset).
    pub working_dir: Option<PathBuf>,
    /// `runAsUser`; the runner's own user when unset.
    pub user: Option<u32>,
    /// `runAsGroup`; the user's group (or the runner's) when unset.
    pub group: Option<u32>,
    /// `fsGroup` and `supplementalGroups`.
    pub supplementary_groups: Vec<u32>,
    /// The Pod's hostname (its name, or `spec.hostname`).
    pub hostname: String,
    /// The Pod's network namespace (`/run/netns/NAME`).
    pub netns: PathBuf,
    /// Volumes, in the order of the container's `volumeMounts` (a later mount may sit inside
    /// an earlier one).
    pub mounts: Vec<BindMount>,
    /// Directories the image holds (made in the copy-on-write layer, with their modes, before
    /// the volumes are mounted): the runtime directories an image's Dockerfile makes.
    #[serde(default)]
    pub dirs: Vec<ImageDir>,
    /// The file bind-mounted at `/etc/hosts`.
    pub hosts: PathBuf,
    /// A directory of this start: the copy-on-write layer (`upper/`, `work/`) and the view
    /// (`merged/`) are made inside it.
    pub root: PathBuf,
    /// Where stdout and stderr go (appended).
    pub log: PathBuf,
    /// The freezer cgroup of the container, relative to the freezer hierarchy's root
    /// (`moco-pod-runner/<bridge>/<pod-uid>/<container>`).
    pub cgroup: PathBuf,
}

/// A directory of an image, made in each container of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageDir {
    /// Absolute path inside the container.
    pub path: PathBuf,
    /// Its mode (`0o1777` for a runtime directory any user may use).
    pub mode: u32,
}

/// A host path seen at `target` inside the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindMount {
    /// On the host: a directory or a file.
    pub source: PathBuf,
    /// Inside the container, absolute; made when missing (in the copy-on-write layer only).
    pub target: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
}

/// How a container's main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

impl Exit {
    /// The exit code Kubernetes reports: the code, or 128 + the signal.
    pub fn kube_code(&self) -> i32 {
        self.code.unwrap_or_else(|| 128 + self.signal.unwrap_or(0))
    }
}

/// What a command run inside a container printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its exit code (`None`: killed by a signal, or by the time limit).
    pub code: Option<i32>,
    /// stdout and stderr, interleaved.
    pub output: Vec<u8>,
    /// Whether the time limit ended it.
    pub timed_out: bool,
}
