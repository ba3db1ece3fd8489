//! `DIR/cluster.json`: what a local cluster is, and the marker that `moco local` created the
//! directory. Commands refuse directories without a valid manifest, and `up` refuses
//! directories that hold anything at all.

use std::path::{Path, PathBuf};

use moco_core::facts::Flavor;
use serde::{Deserialize, Serialize};

use super::error::LocalError;
use super::files;
use super::layout::Layout;
use moco_adapters::mysqld::ServerBinary;

/// The `kind` every manifest carries.
pub const MANIFEST_KIND: &str = "moco-local-cluster";
/// The manifest format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// Where a cluster stands in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// `up` is creating datadirs and users; a failure here leaves a directory only
    /// `down --wipe` accepts.
    Initializing,
    /// Every instance was initialised; the cluster can be (re)started.
    Ready,
}

/// The contents of `cluster.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// Always [`MANIFEST_KIND`].
    pub kind: String,
    /// Always [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Random identifier of this cluster.
    pub cluster_id: String,
    /// The cluster name used in events and logs (the directory's base name).
    pub name: String,
    /// When `up` created it (RFC 3339).
    pub created_at: String,
    /// The moco version that created it.
    pub created_by: String,
    /// Life phase.
    pub phase: Phase,
    /// Server family.
    pub flavor: Flavor,
    /// `@@version` of the server binary when the cluster was created.
    #[serde(default)]
    pub server_version: String,
    /// Number of instances running (odd unless a shrink is under way).
    pub replicas: u32,
    /// `spec.replicas` while a shrink is under way: instances `shrinking_to..replicas` keep
    /// running until the engine records that they no longer count for any acknowledged commit
    /// (`ClusterStatus::leaving_may_go`); then the manager stops them, keeps their directories
    /// under `retired/`, and `replicas` becomes this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrinking_to: Option<u32>,
    /// First port of the block the cluster uses: the primary endpoint.
    pub base_port: u16,
    /// The server binary (`mariadbd` / `mysqld`).
    pub server: PathBuf,
    /// `server_id` of instance 0; instance `i` has `server_id_base + i`.
    pub server_id_base: u32,
    /// Re-clone errant replicas automatically (`up --reclone-errant`).
    #[serde(default)]
    pub reclone_errant: bool,
    /// The servers serve TLS with the cluster's CA (`tls/`), refuse plain TCP, and every
    /// connection verifies them (`up --tls`). Written only when set, so that a cluster
    /// without TLS stays readable by a `moco` from before this field.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
}

/// The largest cluster `moco local` creates.
pub const MAX_REPLICAS: u32 = 9;

/// Fails unless `replicas` is an odd number in `1..=MAX_REPLICAS`.
pub fn check_replicas(replicas: u32) -> Result<(), LocalError> {
    if replicas == 0 || replicas.is_multiple_of(2) || replicas > MAX_REPLICAS {
        return Err(LocalError::other(
            format!("--replicas {replicas}"),
            format!(
                "must be an odd number from 1 to {MAX_REPLICAS} (a majority must survive a failure)"
            ),
        ));
    }
    Ok(())
}

impl Manifest {
    /// The server binary the cluster was created with.
    pub fn server_binary(&self) -> Result<ServerBinary, LocalError> {
        ServerBinary::from_path(&self.server).map_err(|e| {
            LocalError::other(
                format!("server binary {}", self.server.display()),
                e.to_string(),
            )
        })
    }

    /// The size the cluster is asked to have (`spec.replicas`).
    pub fn spec_replicas(&self) -> u32 {
        self.shrinking_to.unwrap_or(self.replicas)
    }

    /// Port of the primary endpoint (`base_port`).
    pub fn primary_port(&self) -> u16 {
        self.base_port
    }

    /// Port of the replica endpoint (`base_port + 1`).
    pub fn replica_port(&self) -> u16 {
        self.base_port.saturating_add(1)
    }

    /// MySQL port of instance `index` (`base_port + 2 + index`).
    pub fn instance_port(&self, index: u32) -> u16 {
        let offset = u16::try_from(2 + index).unwrap_or(u16::MAX);
        self.base_port.saturating_add(offset)
    }

    /// `server_id` of instance `index`.
    pub fn server_id(&self, index: u32) -> u32 {
        self.server_id_base + index
    }

    /// Number of ports the cluster needs from `base_port` on.
    pub fn port_count(replicas: u32) -> u32 {
        replicas + 2
    }

    /// Checks that `replicas` instances starting at `base` fit into the port range.
    pub fn check_port_range(base: u16, replicas: u32) -> Result<(), LocalError> {
        let count = Self::port_count(replicas);
        if base == 0 || u32::from(base) + count - 1 > u32::from(u16::MAX) {
            return Err(LocalError::PortRange { base, count });
        }
        Ok(())
    }

    /// Fails unless `index` is an instance of this cluster.
    pub fn check_index(&self, index: u32) -> Result<(), LocalError> {
        if index < self.replicas {
            Ok(())
        } else {
            Err(LocalError::NoSuchInstance {
                index,
                replicas: self.replicas,
            })
        }
    }

    /// Writes the manifest atomically.
    pub fn save(&self, layout: &Layout) -> Result<(), LocalError> {
        files::write_json(&layout.manifest(), self, 0o644)
    }

    /// Loads and checks the manifest of an existing cluster directory.
    pub fn load(layout: &Layout) -> Result<Manifest, LocalError> {
        let dir = layout.root().to_path_buf();
        if !dir.is_dir() {
            return Err(LocalError::NotACluster { dir });
        }
        let path = layout.manifest();
        let value: Option<serde_json::Value> = files::read_json_opt(&path)?;
        let Some(value) = value else {
            return Err(LocalError::NotACluster { dir });
        };
        if value.get("kind").and_then(|k| k.as_str()) != Some(MANIFEST_KIND) {
            return Err(LocalError::Foreign {
                dir,
                reason: format!("cluster.json has no \"kind\": \"{MANIFEST_KIND}\""),
            });
        }
        let manifest: Manifest =
            serde_json::from_value(value).map_err(|source| LocalError::Json { path, source })?;
        if manifest.format_version != FORMAT_VERSION {
            return Err(LocalError::Foreign {
                dir,
                reason: format!(
                    "cluster.json has format version {}, this moco reads {FORMAT_VERSION}",
                    manifest.format_version
                ),
            });
        }
        // A hand-edited file must not size anything: what `up` would refuse is refused here.
        if let Err(e) = check_replicas(manifest.replicas)
            .and_then(|()| Self::check_port_range(manifest.base_port, manifest.replicas))
        {
            return Err(LocalError::Foreign {
                dir,
                reason: format!("cluster.json: replicas {}: {e}", manifest.replicas),
            });
        }
        Ok(manifest)
    }

    /// Checks that `dir` can receive a new cluster: it does not exist, or is an empty directory.
    /// Distinguishes an existing cluster from foreign content for the error message.
    pub fn check_new_dir(dir: &Path) -> Result<(), LocalError> {
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(LocalError::io(dir, "inspect", e)),
            Ok(meta) if !meta.is_dir() => {
                return Err(LocalError::Foreign {
                    dir: dir.to_path_buf(),
                    reason: "it is not a directory".to_owned(),
                });
            }
            Ok(_) => {}
        }
        let layout = Layout::new(dir);
        if layout.manifest().exists() {
            return match Manifest::load(&layout) {
                Ok(_) => Err(LocalError::AlreadyInitialised {
                    dir: dir.to_path_buf(),
                }),
                Err(e) => Err(e),
            };
        }
        let mut entries = std::fs::read_dir(dir).map_err(|e| LocalError::io(dir, "list", e))?;
        if let Some(entry) = entries.next() {
            let entry = entry.map_err(|e| LocalError::io(dir, "list", e))?;
            return Err(LocalError::Foreign {
                dir: dir.to_path_buf(),
                reason: format!(
                    "it is not empty (found {:?}) and has no cluster.json",
                    entry.file_name()
                ),
            });
        }
        Ok(())
    }
}

/// A random lowercase hex string of `bytes` random bytes.
pub fn random_hex(bytes: usize) -> Result<String, LocalError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| LocalError::other("random bytes", e.to_string()))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
impl Manifest {
    /// A manifest for unit tests: 3 MariaDB instances from port 20000, cluster `c`.
    pub(crate) fn example() -> Manifest {
        Manifest {
            kind: MANIFEST_KIND.to_owned(),
            format_version: FORMAT_VERSION,
            cluster_id: "abc".to_owned(),
            name: "c".to_owned(),
            created_at: "2026-01-01T00:00:00Z".to_owned(),
            created_by: "test".to_owned(),
            phase: Phase::Ready,
            flavor: Flavor::Mariadb,
            server_version: String::new(),
            replicas: 3,
            shrinking_to: None,
            base_port: 20000,
            server: PathBuf::from("/usr/sbin/mariadbd"),
            server_id_base: 1000,
            reclone_errant: false,
            tls: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest::example()
    }

    #[test]
    fn ports_follow_the_base() {
        let m = sample();
        assert_eq!(m.primary_port(), 20000);
        assert_eq!(m.replica_port(), 20001);
        assert_eq!(m.instance_port(0), 20002);
        assert_eq!(m.instance_port(2), 20004);
        assert_eq!(m.server_id(2), 1002);
        assert!(Manifest::check_port_range(65533, 3).is_err());
        assert!(Manifest::check_port_range(65531, 3).is_ok());
        assert!(Manifest::check_port_range(0, 1).is_err());
        // Regression (issue 12, item 9): "instances 0..3" read as if 3 existed.
        assert_eq!(
            m.check_index(3).unwrap_err().to_string(),
            "instance 3 does not exist: the cluster's instances are 0–2"
        );
        assert!(m.check_index(2).is_ok());
    }

    #[test]
    fn round_trip_and_refusals() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        Manifest::check_new_dir(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        Manifest::check_new_dir(&dir).unwrap();
        let layout = Layout::new(&dir);
        assert!(matches!(
            Manifest::load(&layout),
            Err(LocalError::NotACluster { .. })
        ));
        sample().save(&layout).unwrap();
        assert_eq!(Manifest::load(&layout).unwrap(), sample());
        assert!(matches!(
            Manifest::check_new_dir(&dir),
            Err(LocalError::AlreadyInitialised { .. })
        ));

        let foreign = tmp.path().join("f");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("notes.txt"), "x").unwrap();
        assert!(matches!(
            Manifest::check_new_dir(&foreign),
            Err(LocalError::Foreign { .. })
        ));
        std::fs::write(foreign.join("cluster.json"), "{\"kind\":\"other\"}").unwrap();
        assert!(matches!(
            Manifest::load(&Layout::new(&foreign)),
            Err(LocalError::Foreign { .. })
        ));

        // Regression (issue 12, item 3): a hand-edited huge `replicas` is refused on load
        // instead of sizing vectors (`moco local status` aborted on it).
        for replicas in [4_294_967_295u32, 100_000, 4, 0] {
            let mut huge = sample();
            huge.replicas = replicas;
            huge.save(&layout).unwrap();
            let err = Manifest::load(&layout).unwrap_err().to_string();
            assert!(
                err.contains(&format!("cluster.json: replicas {replicas}")),
                "{err}"
            );
        }
        assert!(matches!(
            Manifest::load(&Layout::new(&foreign)),
            Err(LocalError::Foreign { .. })
        ));
    }
}
