//! Where everything of a local cluster lives inside its directory.
//!
//! ```text
//! DIR/cluster.json            manifest (flavour, replicas, ports, server binary, creation marker)
//! DIR/status.json             persisted ClusterStatus (atomic replace)
//! DIR/pods.json               role labels, demote / prevent-delete annotations, kill holds
//! DIR/pods.lock               advisory lock guarding pods.json read-modify-write
//! DIR/state.json              snapshot the manager writes each round (`moco local status`)
//! DIR/events.jsonl            events, one JSON object per line
//! DIR/secret.json             passwords of the MOCO users (mode 0600)
//! DIR/client/<user>.cnf       `[client]` option files for `mariadb --defaults-extra-file`
//! DIR/tls/ca.pem, ca-key.pem  the cluster's CA (`up --tls`; the key mode 0600)
//! DIR/manager.pid / .lock     the manager process; the lock is held while it runs
//! DIR/manager.log             the detached manager's log
//! DIR/instances/<i>/my.cnf    per-instance server configuration
//! DIR/instances/<i>/data      datadir
//! DIR/instances/<i>/tls/      the instance's certificate and key (`up --tls`)
//! DIR/instances/<i>/…         socket, pid file, error log, tmp
//! ```

use std::path::{Path, PathBuf};

/// Paths of one cluster directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout rooted at `dir` (made absolute when possible so that paths written into
    /// my.cnf and option files do not depend on the working directory).
    pub fn new(dir: &Path) -> Self {
        let root = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        Layout { root }
    }

    /// The cluster directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `cluster.json`.
    pub fn manifest(&self) -> PathBuf {
        self.root.join("cluster.json")
    }

    /// `status.json`.
    pub fn status(&self) -> PathBuf {
        self.root.join("status.json")
    }

    /// `pods.json`.
    pub fn pods(&self) -> PathBuf {
        self.root.join("pods.json")
    }

    /// `pods.lock`.
    pub fn pods_lock(&self) -> PathBuf {
        self.root.join("pods.lock")
    }

    /// `state.json`.
    pub fn snapshot(&self) -> PathBuf {
        self.root.join("state.json")
    }

    /// `events.jsonl`.
    pub fn events(&self) -> PathBuf {
        self.root.join("events.jsonl")
    }

    /// `secret.json`.
    pub fn secret(&self) -> PathBuf {
        self.root.join("secret.json")
    }

    /// `DIR/secret.lock`: held while `secret.json` is read and rewritten.
    pub fn secret_lock(&self) -> PathBuf {
        self.root.join("secret.lock")
    }

    /// `client/`.
    pub fn client_dir(&self) -> PathBuf {
        self.root.join("client")
    }

    /// `client/<user>.cnf`.
    pub fn client_cnf(&self, user: &str) -> PathBuf {
        self.client_dir().join(format!("{user}.cnf"))
    }

    /// `tls/`: the cluster's CA.
    pub fn tls_dir(&self) -> PathBuf {
        self.root.join("tls")
    }

    /// `tls/ca.pem`: what every client and replication channel trusts.
    pub fn ca_cert(&self) -> PathBuf {
        self.tls_dir().join("ca.pem")
    }

    /// `tls/ca-key.pem`: signs the instances' certificates.
    pub fn ca_key(&self) -> PathBuf {
        self.tls_dir().join("ca-key.pem")
    }

    /// `instances/<i>/tls/`: the certificate and key instance `index` serves.
    pub fn instance_tls_dir(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("tls")
    }

    /// `manager.pid`.
    pub fn manager_pid(&self) -> PathBuf {
        self.root.join("manager.pid")
    }

    /// `manager.lock`, held by the running manager.
    pub fn manager_lock(&self) -> PathBuf {
        self.root.join("manager.lock")
    }

    /// `manager.log`.
    pub fn manager_log(&self) -> PathBuf {
        self.root.join("manager.log")
    }

    /// `instances/`.
    pub fn instances_dir(&self) -> PathBuf {
        self.root.join("instances")
    }

    /// `instances/<i>/`.
    pub fn instance_dir(&self, index: u32) -> PathBuf {
        self.instances_dir().join(index.to_string())
    }

    /// `retired/`: the directories of instances a shrink removed, kept (as a StatefulSet
    /// keeps the volumes of the Pods it removes).
    pub fn retired_dir(&self) -> PathBuf {
        self.root.join("retired")
    }

    /// `instances/<i>/my.cnf`.
    pub fn mycnf(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("my.cnf")
    }

    /// `instances/<i>/data`.
    pub fn datadir(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("data")
    }

    /// `instances/<i>/tmp`.
    pub fn tmpdir(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("tmp")
    }

    /// `instances/<i>/mysqld.sock`.
    pub fn socket(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("mysqld.sock")
    }

    /// `instances/<i>/mysqld.pid` (written by the server).
    pub fn pid_file(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("mysqld.pid")
    }

    /// `instances/<i>/error.log`.
    pub fn error_log(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("error.log")
    }

    /// `instances/<i>/clone.log`: output of the last clone's backup tools.
    pub fn clone_log(&self, index: u32) -> PathBuf {
        self.instance_dir(index).join("clone.log")
    }
}
