//! A Pod's volumes as directories of the runner's state directory (or of the host),
//! bind-mounted into its containers: what the kubelet's volume manager does, for the volume
//! kinds MOCO's Pods use.
//!
//! ```text
//! STATE/pods/<uid>/volumes/<name>/          emptyDir, configMap, secret, downwardAPI, projected
//! <PersistentVolume's hostPath/local path>  persistentVolumeClaim, ephemeral (outlive the Pod)
//! <the path itself>                         hostPath
//! ```
//!
//! - `emptyDir`: a directory (mode 0777, as the kubelet makes it). `medium: Memory` is a plain
//!   directory too (no tmpfs: the data is test data), and `sizeLimit` is not enforced.
//! - `configMap`, `secret`, `downwardAPI`, `projected`: files written by the kubelet's atomic
//!   writer ([`atomic`]); [`PodVolumes::refresh`] rewrites them when their objects or fields
//!   change and renews tokens. A container mounts the volume directory, so updates show
//!   through; with `subPath` it mounts the file of the moment, which does not update (as with
//!   the kubelet). These mounts are always read-only, as the kubelet makes them.
//! - `persistentVolumeClaim` and generic `ephemeral`: the bound PersistentVolume's
//!   `hostPath.path` or `local.path` (or its StorageClass's directory in the runner's table),
//!   used in place.
//! - `hostPath`: the path itself, checked or made as its `type` says.
//!
//! Owners follow the kubelet: `fsGroup` makes emptyDir, atomic-writer and `local` volumes
//! group-owned and group-readable (`fsGroupChangePolicy` honoured for PersistentVolumes); a
//! projected token is owned by the Pod's one `runAsUser` (mode 0600, 0640 with `fsGroup`).
//! Mount propagation and recursive read-only are not supported (MOCO uses neither): every bind
//! is private and read-only binds are not recursive.

pub mod atomic;
pub mod claim;
pub mod downward;
pub mod error;
pub mod hostpath;
pub mod mounts;
pub mod objects;
pub mod ownership;
pub mod projected;
pub mod token;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

use crate::container::BindMount;

pub use downward::{NODE_ALLOCATABLE, NodeAllocatable};
pub use error::VolumeError;

use claim::PvSource;
use projected::{Objects, Owners, Projection};
use token::IssuedToken;

/// The mode of directories the runner makes for a volume (the kubelet's emptyDir mode; the
/// atomic-writer volumes are emptyDirs underneath in the kubelet too).
const VOLUME_DIR_MODE: u32 = 0o777;

/// A Pod's prepared volumes: where each is on the host and what keeps its files current.
#[derive(Debug)]
pub struct PodVolumes {
    /// `STATE/pods/<uid>/volumes`.
    dir: PathBuf,
    /// The Pod's namespace.
    namespace: String,
    /// Who owns the files.
    owners: Owners,
    /// By volume name.
    volumes: BTreeMap<String, Prepared>,
    /// Issued tokens by (volume, path).
    tokens: BTreeMap<(String, String), IssuedToken>,
}

/// One prepared volume.
#[derive(Debug, Clone)]
struct Prepared {
    /// Its directory (or file) on the host.
    root: PathBuf,
    /// Every mount of it is read-only.
    read_only: bool,
    /// What it is.
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    EmptyDir,
    Claim,
    HostPath,
    Files(Projection),
}

fn io_err(volume: &str, path: &Path) -> impl FnOnce(io::Error) -> VolumeError {
    let volume = volume.to_owned();
    let path = path.to_owned();
    move |source| VolumeError::Io {
        volume,
        path,
        source,
    }
}

/// An ID of the Pod's security context as a Unix ID.
fn unix_id(volume: &str, field: &str, id: Option<i64>) -> Result<Option<u32>, VolumeError> {
    id.map(|id| {
        u32::try_from(id).map_err(|_| VolumeError::Invalid {
            volume: volume.to_owned(),
            field: field.to_owned(),
            value: id.to_string(),
            reason: "not a Unix ID".to_owned(),
        })
    })
    .transpose()
}

/// Who owns the Pod's volume files.
fn owners_of(pod: &Pod) -> Result<Owners, VolumeError> {
    Ok(Owners {
        fs_group: unix_id("", "securityContext.fsGroup", ownership::fs_group_of(pod))?,
        fs_user: unix_id("", "runAsUser", ownership::fs_user_from(pod))?,
    })
}

/// The kind of a volume the runner does not provide, by its field name (`nfs`, `csi`).
fn kind_name(volume: &Volume) -> String {
    serde_json::to_value(volume)
        .ok()
        .and_then(|v| {
            v.as_object()
                .and_then(|o| o.keys().find(|k| *k != "name").cloned())
        })
        .unwrap_or_else(|| "a volume without a source".to_owned())
}

/// Makes a volume directory (mode 0777) when it is not there; an existing one is kept as it is
/// (an emptyDir keeps its content for the Pod's life).
fn make_volume_dir(volume: &str, path: &Path) -> Result<(), VolumeError> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(VOLUME_DIR_MODE)
                .create(path)
                .map_err(io_err(volume, path))?;
            fs::set_permissions(path, fs::Permissions::from_mode(VOLUME_DIR_MODE))
                .map_err(io_err(volume, path))
        }
        Err(e) => Err(io_err(volume, path)(e)),
    }
}

fn host_path_err(volume: &str, path: &Path, e: hostpath::HostPathError) -> VolumeError {
    VolumeError::HostPath {
        volume: volume.to_owned(),
        path: path.to_owned(),
        reason: e.reason,
        missing: e.missing,
    }
}

/// Prepares every volume of `pod` in `dir` (`STATE/pods/<uid>/volumes`, made when missing).
/// `storage_class_dirs` gives, for a StorageClass whose PersistentVolumes have neither
/// `hostPath` nor `local`, the directory holding them (`<dir>/<pv-name>`). Idempotent: calling
/// it again after an error (or after the runner restarted) keeps what is there.
pub async fn prepare(
    client: &kube::Client,
    pod: &Pod,
    dir: &Path,
    storage_class_dirs: &BTreeMap<String, PathBuf>,
) -> Result<PodVolumes, VolumeError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
        .map_err(io_err("", dir))?;
    let mut volumes = PodVolumes {
        dir: dir.to_owned(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        owners: owners_of(pod)?,
        volumes: BTreeMap::new(),
        tokens: BTreeMap::new(),
    };
    let mut objects = Objects::default();
    let specs = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    for volume in &specs {
        let prepared = volumes
            .prepare_one(client, pod, volume, storage_class_dirs, &mut objects)
            .await?;
        volumes.volumes.insert(volume.name.clone(), prepared);
    }
    Ok(volumes)
}

/// Removes a Pod's volume directory `dir` (`STATE/pods/<uid>/volumes`), for a Pod whose
/// [`PodVolumes`] is gone (the runner restarted). Symlinks are removed, never followed, and
/// PersistentVolume and hostPath directories are not inside it, so they stay.
pub fn remove_dir(dir: &Path) -> Result<(), VolumeError> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("", dir)(e)),
    }
}

impl PodVolumes {
    async fn prepare_one(
        &mut self,
        client: &kube::Client,
        pod: &Pod,
        volume: &Volume,
        class_dirs: &BTreeMap<String, PathBuf>,
        objects: &mut Objects,
    ) -> Result<Prepared, VolumeError> {
        let name = volume.name.as_str();
        if volume.empty_dir.is_some() {
            let root = self.dir.join(name);
            make_volume_dir(name, &root)?;
            if let Some(gid) = self.owners.fs_group {
                ownership::set_volume_ownership(&root, gid, false, None)
                    .map_err(io_err(name, &root))?;
            }
            return Ok(Prepared {
                root,
                read_only: false,
                kind: Kind::EmptyDir,
            });
        }
        if let Some(projection) = projected::projection_of(volume) {
            let root = self.dir.join(name);
            make_volume_dir(name, &root)?;
            self.write_files(client, pod, name, &root, &projection, objects)
                .await?;
            return Ok(Prepared {
                root,
                read_only: true,
                kind: Kind::Files(projection),
            });
        }
        if let Some(h) = &volume.host_path {
            let root = PathBuf::from(&h.path);
            hostpath::ensure(&root, h.type_.as_deref())
                .map_err(|e| host_path_err(name, &root, e))?;
            return Ok(Prepared {
                root,
                read_only: false,
                kind: Kind::HostPath,
            });
        }
        if let Some(claim_name) = claim::claim_name(pod, volume) {
            let root = self
                .prepare_claim(client, pod, volume, &claim_name, class_dirs)
                .await?;
            let read_only = volume
                .persistent_volume_claim
                .as_ref()
                .and_then(|c| c.read_only)
                .unwrap_or(false);
            return Ok(Prepared {
                root,
                read_only,
                kind: Kind::Claim,
            });
        }
        Err(VolumeError::Unsupported {
            volume: name.to_owned(),
            what: kind_name(volume),
        })
    }

    /// The claim's PersistentVolume directory, checked or made, with `fsGroup` applied where the
    /// kubelet applies it.
    async fn prepare_claim(
        &self,
        client: &kube::Client,
        pod: &Pod,
        volume: &Volume,
        claim_name: &str,
        class_dirs: &BTreeMap<String, PathBuf>,
    ) -> Result<PathBuf, VolumeError> {
        let name = volume.name.as_str();
        let ns = self.namespace.as_str();
        let claim: PersistentVolumeClaim = objects::get_opt(client, ns, claim_name)
            .await
            .map_err(|source| VolumeError::Api {
                volume: name.to_owned(),
                kind: "PersistentVolumeClaim",
                namespace: ns.to_owned(),
                name: claim_name.to_owned(),
                source: Box::new(source),
            })?
            .ok_or_else(|| VolumeError::ClaimMissing {
                volume: name.to_owned(),
                namespace: ns.to_owned(),
                claim: claim_name.to_owned(),
            })?;
        let pv_name = claim::bound_volume(volume, pod, &claim)?;
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        let pv = pvs
            .get_opt(&pv_name)
            .await
            .map_err(|source| VolumeError::Api {
                volume: name.to_owned(),
                kind: "PersistentVolume",
                namespace: String::new(),
                name: pv_name.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| VolumeError::PersistentVolume {
                volume: name.to_owned(),
                namespace: ns.to_owned(),
                claim: claim_name.to_owned(),
                pv: pv_name.clone(),
                state: "not found".to_owned(),
            })?;
        let source = claim::pv_source(name, &claim, &pv, class_dirs)?;
        let read_only = volume
            .persistent_volume_claim
            .as_ref()
            .and_then(|c| c.read_only)
            .unwrap_or(false);
        let path = source.path().clone();
        let apply_fs_group = match &source {
            PvSource::HostPath { path, type_ } => {
                hostpath::ensure(path, type_.as_deref())
                    .map_err(|e| host_path_err(name, path, e))?;
                false
            }
            PvSource::Local(path) => {
                hostpath::ensure(path, Some("Directory"))
                    .map_err(|e| host_path_err(name, path, e))?;
                true
            }
            PvSource::ClassDir(path) => {
                make_volume_dir(name, path)?;
                true
            }
        };
        if apply_fs_group
            && !read_only
            && let Some(gid) = self.owners.fs_group
        {
            ownership::set_volume_ownership(&path, gid, false, ownership::fs_group_policy_of(pod))
                .map_err(io_err(name, &path))?;
        }
        Ok(path)
    }

    /// Fetches what `projection` needs (tokens renewed when due), builds its files and writes
    /// them atomically into `root`. Returns whether anything was written.
    async fn write_files(
        &mut self,
        client: &kube::Client,
        pod: &Pod,
        volume: &str,
        root: &Path,
        projection: &Projection,
        objects: &mut Objects,
    ) -> Result<bool, VolumeError> {
        objects::fetch(client, &self.namespace, volume, projection, objects).await?;
        objects.tokens.clear();
        let now = Timestamp::now();
        for t in projection
            .sources
            .iter()
            .filter_map(|s| s.service_account_token.as_ref())
        {
            let key = (volume.to_owned(), t.path.clone());
            let current = self
                .tokens
                .get(&key)
                .filter(|issued| token::matches(issued, t) && !token::needs_refresh(issued, now));
            let issued = match current {
                Some(issued) => issued.clone(),
                None => {
                    let issued = token::request(client, pod, t).await.map_err(|source| {
                        VolumeError::Token {
                            volume: volume.to_owned(),
                            namespace: self.namespace.clone(),
                            service_account: token::service_account(pod),
                            source: Box::new(source),
                        }
                    })?;
                    self.tokens.insert(key, issued.clone());
                    issued
                }
            };
            objects.tokens.insert(t.path.clone(), issued.token);
        }
        let payload = projected::build_payload(
            volume,
            pod,
            projection,
            objects,
            self.owners,
            &NODE_ALLOCATABLE,
        )?;
        let fs_group = self.owners.fs_group;
        let set_perms = |dir: &Path| match fs_group {
            Some(gid) => ownership::set_volume_ownership(dir, gid, true, None),
            None => Ok(()),
        };
        atomic::write(root, &payload, &set_perms).map_err(|e| match e {
            atomic::WriteError::InvalidPath { path, reason } => VolumeError::Invalid {
                volume: volume.to_owned(),
                field: "path".to_owned(),
                value: path,
                reason: reason.to_owned(),
            },
            atomic::WriteError::Io { path, source } => VolumeError::Io {
                volume: volume.to_owned(),
                path,
                source,
            },
        })
    }

    /// Re-reads the ConfigMaps, Secrets and downward API fields of the atomic-writer volumes
    /// (from `pod`, the Pod as the API server has it now) and renews tokens past 80% of their
    /// lifetime; rewrites (atomically) only volumes whose files changed. Returns whether any
    /// did. A volume that fails keeps its files (as the kubelet's do) and the others are still
    /// refreshed; the first error is returned.
    pub async fn refresh(&mut self, client: &kube::Client, pod: &Pod) -> Result<bool, VolumeError> {
        let mut objects = Objects::default();
        let mut changed = false;
        let mut first_error = None;
        let files: Vec<(String, PathBuf, Projection)> = self
            .volumes
            .iter()
            .filter_map(|(name, v)| match &v.kind {
                Kind::Files(p) => Some((name.clone(), v.root.clone(), p.clone())),
                Kind::EmptyDir | Kind::Claim | Kind::HostPath => None,
            })
            .collect();
        for (name, root, projection) in files {
            match self
                .write_files(client, pod, &name, &root, &projection, &mut objects)
                .await
            {
                Ok(wrote) => changed |= wrote,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(changed),
        }
    }

    /// The bind mounts of `container`'s `volumeMounts`, in order. `env` is the container's
    /// resolved environment ([`crate::env::resolve`]), for `subPathExpr`. A missing sub path
    /// is made as a directory; a sub path of an atomic-writer volume binds the file of the
    /// moment (it does not update). `_pod` is the Pod the volumes were prepared for (unused:
    /// every mount is decided by the container and the prepared volumes).
    pub fn mounts(
        &self,
        _pod: &Pod,
        container: &Container,
        env: &[(String, String)],
    ) -> Result<Vec<BindMount>, VolumeError> {
        let mut out = Vec::new();
        for (index, mount) in container.volume_mounts.iter().flatten().enumerate() {
            let volume = self
                .volumes
                .get(&mount.name)
                .ok_or_else(|| VolumeError::NoVolume {
                    container: container.name.clone(),
                    index,
                    volume: mount.name.clone(),
                })?;
            let sub_err = |field: &str, value: String, reason: String| VolumeError::SubPath {
                container: container.name.clone(),
                volume: mount.name.clone(),
                field: format!("volumeMounts[{index}].{field}"),
                value,
                reason,
            };
            let sub =
                mounts::sub_path(mount, env).map_err(|e| sub_err(e.field, e.value, e.reason))?;
            let source = match sub {
                None => volume.root.clone(),
                Some(sub) => {
                    let field = if mount
                        .sub_path_expr
                        .as_deref()
                        .is_some_and(|e| !e.is_empty())
                    {
                        "subPathExpr"
                    } else {
                        "subPath"
                    };
                    mounts::resolve_sub_path(&volume.root, &sub)
                        .map_err(|e| sub_err(field, sub.clone(), e.to_string()))?
                }
            };
            out.push(BindMount {
                source,
                target: mounts::container_path(&mount.mount_path),
                read_only: mount.read_only.unwrap_or(false) || volume.read_only,
            });
        }
        Ok(out)
    }

    /// Where volume `name` is on the host.
    pub fn path(&self, name: &str) -> Option<&Path> {
        self.volumes.get(name).map(|v| v.root.as_path())
    }

    /// Removes the Pod's volume directory (emptyDirs, atomic-writer volumes); PersistentVolume
    /// and hostPath directories stay.
    pub fn remove(self) -> Result<(), VolumeError> {
        remove_dir(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NFSVolumeSource, VolumeMount};

    fn prepared(dir: &Path, entries: &[(&str, Kind, bool)]) -> PodVolumes {
        PodVolumes {
            dir: dir.to_owned(),
            namespace: "ns".into(),
            owners: Owners::default(),
            volumes: entries
                .iter()
                .map(|(name, kind, ro)| {
                    let root = dir.join(name);
                    fs::create_dir_all(&root).unwrap();
                    (
                        (*name).to_owned(),
                        Prepared {
                            root,
                            read_only: *ro,
                            kind: kind.clone(),
                        },
                    )
                })
                .collect(),
            tokens: BTreeMap::new(),
        }
    }

    fn container(mounts: Vec<VolumeMount>) -> Container {
        Container {
            name: "mysqld".into(),
            volume_mounts: Some(mounts),
            ..Default::default()
        }
    }

    fn vm(name: &str, path: &str, sub: Option<&str>, ro: Option<bool>) -> VolumeMount {
        VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            sub_path: sub.map(Into::into),
            read_only: ro,
            ..Default::default()
        }
    }

    #[test]
    fn mounts_in_order_with_read_only_and_sub_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("volumes");
        let files = Projection {
            sources: vec![],
            default_mode: 0o644,
        };
        let vols = prepared(
            &dir,
            &[
                ("data", Kind::EmptyDir, false),
                ("conf", Kind::Files(files), true),
            ],
        );
        atomic::write(
            &dir.join("conf"),
            &atomic::Payload::from([(
                "my.cnf".to_owned(),
                atomic::FileProjection {
                    data: b"x".to_vec(),
                    mode: 0o644,
                    fs_user: None,
                },
            )]),
            &|_| Ok(()),
        )
        .unwrap();
        let c = container(vec![
            vm("data", "/var/lib/mysql", None, None),
            vm("data", "/tmp", Some("tmp"), Some(true)),
            vm("conf", "/etc/mysql-conf.d", None, None),
            vm("conf", "/etc/my.cnf", Some("my.cnf"), None),
        ]);
        let m = vols.mounts(&Pod::default(), &c, &[]).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].source, dir.join("data"));
        assert_eq!(m[0].target, Path::new("/var/lib/mysql"));
        assert!(!m[0].read_only);
        assert!(m[1].source.ends_with("data/tmp"));
        assert!(m[1].source.is_dir());
        assert!(m[1].read_only);
        assert_eq!(m[2].source, dir.join("conf"));
        assert!(m[2].read_only, "configMap-like volumes are read-only");
        let ts = fs::read_link(dir.join("conf/..data")).unwrap();
        assert_eq!(
            m[3].source,
            fs::canonicalize(dir.join("conf"))
                .unwrap()
                .join(ts)
                .join("my.cnf")
        );
    }

    #[test]
    fn mount_errors_name_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        let vols = prepared(tmp.path(), &[("data", Kind::EmptyDir, false)]);
        let err = vols
            .mounts(
                &Pod::default(),
                &container(vec![vm("nope", "/x", None, None)]),
                &[],
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "container \"mysqld\": volumeMounts[0] names volume \"nope\", which the Pod does not have"
        );
        let err = vols
            .mounts(
                &Pod::default(),
                &container(vec![
                    vm("data", "/x", None, None),
                    vm("data", "/y", Some("../../etc"), None),
                ]),
                &[],
            )
            .unwrap_err();
        assert!(!err.is_not_ready());
        assert!(err.to_string().contains("volumeMounts[1].subPath"), "{err}");
        let mut expr = vm("data", "/z", None, None);
        expr.sub_path_expr = Some("$(POD)".into());
        let err = vols
            .mounts(&Pod::default(), &container(vec![expr.clone()]), &[])
            .unwrap_err();
        assert!(
            err.to_string().contains("volumeMounts[0].subPathExpr"),
            "{err}"
        );
        let ok = vols
            .mounts(
                &Pod::default(),
                &container(vec![expr]),
                &[("POD".to_owned(), "mysql-0".to_owned())],
            )
            .unwrap();
        assert!(ok[0].source.ends_with("data/mysql-0"));
    }

    #[test]
    fn remove_keeps_what_is_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("pv");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("ibdata1"), "x").unwrap();
        let dir = tmp.path().join("pods/uid/volumes");
        let mut vols = prepared(&dir, &[("data", Kind::EmptyDir, false)]);
        vols.volumes.insert(
            "pv".into(),
            Prepared {
                root: outside.clone(),
                read_only: false,
                kind: Kind::Claim,
            },
        );
        std::os::unix::fs::symlink(&outside, dir.join("data/link")).unwrap();
        vols.remove().unwrap();
        assert!(!dir.exists());
        assert!(outside.join("ibdata1").exists());
        remove_dir(&dir).unwrap();
    }

    /// The Pod worker runs these on a multi-threaded runtime.
    #[allow(dead_code)]
    fn futures_are_send(client: kube::Client, pod: Pod, mut vols: PodVolumes) {
        fn send<T: Send>(_: &T) {}
        let classes = BTreeMap::new();
        send(&prepare(&client, &pod, Path::new("/x"), &classes));
        send(&vols.refresh(&client, &pod));
        let c = Container::default();
        let api = std::net::SocketAddr::from(([127, 0, 0, 1], 6443));
        send(&crate::env::resolve(&client, &pod, &c, api));
    }

    #[test]
    fn unsupported_kinds_are_named() {
        let v = Volume {
            name: "n".into(),
            nfs: Some(NFSVolumeSource::default()),
            ..Default::default()
        };
        assert_eq!(kind_name(&v), "nfs");
    }
}
