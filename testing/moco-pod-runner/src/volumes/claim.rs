//! `persistentVolumeClaim` and generic `ephemeral` volumes: the claim → its bound
//! PersistentVolume → the PersistentVolume's directory on this machine, used in place (never
//! copied; it outlives the Pod).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};

use super::error::VolumeError;

/// Where a PersistentVolume's data is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PvSource {
    /// `spec.hostPath`: the path, checked against its `type` like a Pod's `hostPath`; the
    /// kubelet does not apply `fsGroup` to it.
    HostPath {
        /// The path.
        path: PathBuf,
        /// Its `type`.
        type_: Option<String>,
    },
    /// `spec.local`: the path, which must exist; `fsGroup` applies.
    Local(PathBuf),
    /// Neither, but its StorageClass has a directory in the runner's table: `<dir>/<pv-name>`
    /// (made when missing); `fsGroup` applies.
    ClassDir(PathBuf),
}

impl PvSource {
    /// The directory.
    pub fn path(&self) -> &PathBuf {
        match self {
            PvSource::HostPath { path, .. } | PvSource::Local(path) | PvSource::ClassDir(path) => {
                path
            }
        }
    }
}

/// The claim a volume uses: `persistentVolumeClaim.claimName`, or `<pod>-<volume>` for a
/// generic ephemeral volume (the claim the ephemeral volume controller makes); `None` for
/// other kinds.
pub fn claim_name(pod: &Pod, volume: &Volume) -> Option<String> {
    if let Some(c) = &volume.persistent_volume_claim {
        return Some(c.claim_name.clone());
    }
    volume.ephemeral.as_ref().map(|_| {
        format!(
            "{}-{}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            volume.name
        )
    })
}

/// Checks that `claim` can be used by volume `volume` of `pod` and returns the name of its
/// PersistentVolume: bound (phase `Bound` and `spec.volumeName` set), not being deleted, and,
/// for an ephemeral volume, controlled by the Pod.
pub fn bound_volume(
    volume: &Volume,
    pod: &Pod,
    claim: &PersistentVolumeClaim,
) -> Result<String, VolumeError> {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    if volume.ephemeral.is_some() {
        let owned = claim.metadata.owner_references.iter().flatten().any(|r| {
            r.controller == Some(true)
                && r.kind == "Pod"
                && Some(&r.uid) == pod.metadata.uid.as_ref()
        });
        if !owned {
            return Err(VolumeError::ClaimNotOwned {
                volume: volume.name.clone(),
                namespace,
                claim: name,
            });
        }
    }
    let not_bound = |state: String| VolumeError::ClaimNotBound {
        volume: volume.name.clone(),
        namespace: namespace.clone(),
        claim: name.clone(),
        state,
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(not_bound("it is being deleted".to_owned()));
    }
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    let pv = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if phase != "Bound" || pv.is_empty() {
        return Err(not_bound(format!("phase {phase:?}, volumeName {pv:?}")));
    }
    if claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .is_some_and(|m| m == "Block")
    {
        return Err(VolumeError::Unsupported {
            volume: volume.name.clone(),
            what: format!("PersistentVolumeClaim {namespace}/{name} with volumeMode Block"),
        });
    }
    Ok(pv)
}

/// Where PersistentVolume `pv` (bound to `claim`) keeps its data: `spec.hostPath.path`,
/// `spec.local.path`, or the directory `class_dirs` gives its StorageClass. A PV whose
/// `claimRef` names another claim is refused, as the kubelet does.
pub fn pv_source(
    volume: &str,
    claim: &PersistentVolumeClaim,
    pv: &PersistentVolume,
    class_dirs: &BTreeMap<String, PathBuf>,
) -> Result<PvSource, VolumeError> {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    let spec = pv.spec.clone().unwrap_or_default();
    if let Some(r) = &spec.claim_ref {
        let other_uid = r
            .uid
            .as_ref()
            .is_some_and(|u| Some(u) != claim.metadata.uid.as_ref());
        if other_uid || r.name.as_ref() != Some(&claim_name) {
            return Err(VolumeError::PersistentVolume {
                volume: volume.to_owned(),
                namespace,
                claim: claim_name,
                pv: pv_name,
                state: format!(
                    "bound to another claim ({}/{})",
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name.as_deref().unwrap_or_default()
                ),
            });
        }
    }
    if let Some(h) = &spec.host_path {
        return Ok(PvSource::HostPath {
            path: PathBuf::from(&h.path),
            type_: h.type_.clone(),
        });
    }
    if let Some(l) = &spec.local {
        return Ok(PvSource::Local(PathBuf::from(&l.path)));
    }
    if let Some(dir) = spec
        .storage_class_name
        .as_ref()
        .and_then(|class| class_dirs.get(class))
    {
        return Ok(PvSource::ClassDir(dir.join(&pv_name)));
    }
    Err(VolumeError::Unsupported {
        volume: volume.to_owned(),
        what: format!(
            "PersistentVolume {pv_name} (neither hostPath nor local, StorageClass {:?} has no directory)",
            spec.storage_class_name.unwrap_or_default()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        EphemeralVolumeSource, HostPathVolumeSource, LocalVolumeSource, ObjectReference,
        PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource,
        PersistentVolumeSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("mysql-0".into()),
                namespace: Some("ns".into()),
                uid: Some("pod-uid".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pvc_volume() -> Volume {
        Volume {
            name: "mysql-data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "mysql-data-mysql-0".into(),
                read_only: None,
            }),
            ..Default::default()
        }
    }

    fn claim(phase: &str, pv: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("mysql-data-mysql-0".into()),
                namespace: Some("ns".into()),
                uid: Some("claim-uid".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                volume_name: pv.map(Into::into),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    fn pv(spec: PersistentVolumeSpec) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pv-1".into()),
                ..Default::default()
            },
            spec: Some(spec),
            ..Default::default()
        }
    }

    #[test]
    fn claim_names() {
        assert_eq!(
            claim_name(&pod(), &pvc_volume()).as_deref(),
            Some("mysql-data-mysql-0")
        );
        let eph = Volume {
            name: "scratch".into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        };
        assert_eq!(claim_name(&pod(), &eph).as_deref(), Some("mysql-0-scratch"));
        assert_eq!(claim_name(&pod(), &Volume::default()), None);
    }

    #[test]
    fn an_unbound_claim_is_not_ready_and_names_the_claim() {
        let err = bound_volume(&pvc_volume(), &pod(), &claim("Pending", None)).unwrap_err();
        assert!(err.is_not_ready());
        assert!(err.to_string().contains("ns/mysql-data-mysql-0"), "{err}");
        assert_eq!(
            bound_volume(&pvc_volume(), &pod(), &claim("Bound", Some("pv-1"))).unwrap(),
            "pv-1"
        );
    }

    #[test]
    fn an_ephemeral_claim_must_be_the_pods() {
        let eph = Volume {
            name: "scratch".into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        };
        let mut c = claim("Bound", Some("pv-1"));
        assert!(matches!(
            bound_volume(&eph, &pod(), &c),
            Err(VolumeError::ClaimNotOwned { .. })
        ));
        c.metadata.owner_references = Some(vec![OwnerReference {
            kind: "Pod".into(),
            uid: "pod-uid".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        assert_eq!(bound_volume(&eph, &pod(), &c).unwrap(), "pv-1");
    }

    #[test]
    fn pv_paths() {
        let c = claim("Bound", Some("pv-1"));
        let none = BTreeMap::new();
        let host = pv(PersistentVolumeSpec {
            host_path: Some(HostPathVolumeSource {
                path: "/state/volumes/pv-1".into(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Default::default()
        });
        assert_eq!(
            pv_source("v", &c, &host, &none).unwrap(),
            PvSource::HostPath {
                path: "/state/volumes/pv-1".into(),
                type_: Some("DirectoryOrCreate".into())
            }
        );
        let local = pv(PersistentVolumeSpec {
            local: Some(LocalVolumeSource {
                path: "/data/pv-1".into(),
                fs_type: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            pv_source("v", &c, &local, &none).unwrap(),
            PvSource::Local("/data/pv-1".into())
        );
        let classed = pv(PersistentVolumeSpec {
            storage_class_name: Some("standard".into()),
            ..Default::default()
        });
        assert!(matches!(
            pv_source("v", &c, &classed, &none),
            Err(VolumeError::Unsupported { .. })
        ));
        let dirs = BTreeMap::from([("standard".to_owned(), PathBuf::from("/state/volumes"))]);
        assert_eq!(
            pv_source("v", &c, &classed, &dirs).unwrap(),
            PvSource::ClassDir("/state/volumes/pv-1".into())
        );
        let stolen = pv(PersistentVolumeSpec {
            claim_ref: Some(ObjectReference {
                name: Some("other".into()),
                namespace: Some("ns".into()),
                uid: Some("x".into()),
                ..Default::default()
            }),
            local: Some(LocalVolumeSource::default()),
            ..Default::default()
        });
        let err = pv_source("v", &c, &stolen, &none).unwrap_err();
        assert!(err.is_not_ready());
        assert!(err.to_string().contains("pv-1"));
    }
}
