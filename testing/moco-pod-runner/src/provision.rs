//! The default StorageClass's provisioner and resizer: what an external provisioner
//! (external-provisioner) and an external resizer (external-resizer) do for a CSI driver,
//! done with directories of the runner's state directory (`STATE/volumes/<pv-name>`).
//!
//! - Provisioning: a claim the PV controller has handed to this provisioner (annotation
//!   `volume.kubernetes.io/storage-provisioner`) gets a hostPath PV pre-bound to it
//!   (`claimRef`); the PV controller then binds the two.
//! - Reclaiming: a Released PV whose policy is Delete loses its directory, then its object.
//! - Expanding: a bound claim asking for more than its PV has gets the PV's capacity raised,
//!   then its own `status.capacity`. The directory has no size limit at all (it is a plain
//!   directory on the host's filesystem), so only the numbers change.
//!
//! What to do with a claim or a PV is decided by pure functions ([`claim_action`],
//! [`volume_action`]); the loop only carries the decisions out. Every StorageClass naming
//! [`PROVISIONER`] is served, not only the default one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::context::Context;
use crate::store::{ready, reflect};

/// The provisioner name the runner's StorageClasses carry.
pub const PROVISIONER: &str = "moco-rs.test/pod-runner";
/// The PV controller's annotation naming the provisioner it expects (and its beta name).
pub const PROVISIONER_ANNOTATION: &str = "volume.kubernetes.io/storage-provisioner";
const PROVISIONER_ANNOTATION_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The annotation a provisioned PV carries.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// external-provisioner's finalizer on PVs with policy Delete: the object waits for the
/// directory to be removed, even when someone deletes the PV first.
pub const FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
/// The annotation marking the default StorageClass.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// How often everything is looked at again without any change seen (retries).
const RESYNC: Duration = Duration::from_secs(30);

/// What went wrong (named by object; logged and retried, except at start).
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The default StorageClass could not be read or made.
    #[error("making StorageClass {class}: {source}")]
    StorageClass {
        /// The class.
        class: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A volume's directory could not be made or removed.
    #[error("{what} directory {path} of PersistentVolume {pv}: {source}")]
    Directory {
        /// "making" or "removing".
        what: &'static str,
        /// The directory.
        path: PathBuf,
        /// The PV.
        pv: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An API call about a PV failed.
    #[error("{what} PersistentVolume {pv}: {source}")]
    Volume {
        /// What was being done.
        what: &'static str,
        /// The PV.
        pv: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// An API call about a claim failed.
    #[error("{what} PersistentVolumeClaim {claim}: {source}")]
    Claim {
        /// What was being done.
        what: &'static str,
        /// namespace/name.
        claim: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// The StorageClass the runner makes at start (unless one of the name exists).
pub fn storage_class(name: &str) -> StorageClass {
    StorageClass {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some([(DEFAULT_CLASS_ANNOTATION.to_owned(), "true".to_owned())].into()),
            ..Default::default()
        },
        provisioner: PROVISIONER.to_owned(),
        reclaim_policy: Some("Delete".to_owned()),
        volume_binding_mode: Some("Immediate".to_owned()),
        allow_volume_expansion: Some(true),
        ..Default::default()
    }
}

/// Creates the default StorageClass unless a class of that name exists (kept as it is: a
/// test may have changed it on purpose).
pub async fn ensure_storage_class(ctx: &Context) -> Result<(), ProvisionError> {
    let classes: Api<StorageClass> = Api::all(ctx.client.clone());
    let name = &ctx.storage_class;
    let error = |source| ProvisionError::StorageClass {
        class: name.clone(),
        source,
    };
    match classes.get_opt(name).await.map_err(error)? {
        Some(existing) if existing.provisioner != PROVISIONER => {
            warn!(
                class = %name,
                provisioner = %existing.provisioner,
                "the StorageClass exists with another provisioner: the runner provisions nothing for it"
            );
        }
        Some(_) => info!(class = %name, "StorageClass kept"),
        None => match classes
            .create(&PostParams::default(), &storage_class(name))
            .await
        {
            Ok(_) => info!(class = %name, provisioner = PROVISIONER, "default StorageClass made"),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(error(e)),
        },
    }
    Ok(())
}

/// A storage quantity in bytes, rounded up (`1Gi`, `500M`, `1.5Gi`, `1e9`, `100m`); None if
/// it is not a quantity.
pub fn bytes(q: &Quantity) -> Option<u128> {
    let s = q.0.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let number = number.strip_prefix('+').unwrap_or(number);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    // The suffix as a fraction num/den.
    let pow = |b: u128, e: u32| b.checked_pow(e);
    let (num, den): (u128, u128) = match suffix {
        "" => (1, 1),
        "Ki" => (pow(2, 10)?, 1),
        "Mi" => (pow(2, 20)?, 1),
        "Gi" => (pow(2, 30)?, 1),
        "Ti" => (pow(2, 40)?, 1),
        "Pi" => (pow(2, 50)?, 1),
        "Ei" => (pow(2, 60)?, 1),
        "n" => (1, pow(10, 9)?),
        "u" => (1, pow(10, 6)?),
        "m" => (1, pow(10, 3)?),
        "k" => (pow(10, 3)?, 1),
        "M" => (pow(10, 6)?, 1),
        "G" => (pow(10, 9)?, 1),
        "T" => (pow(10, 12)?, 1),
        "P" => (pow(10, 15)?, 1),
        "E" => (pow(10, 18)?, 1),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().ok()?;
            let p = pow(10, exp.unsigned_abs())?;
            if exp >= 0 { (p, 1) } else { (1, p) }
        }
        _ => return None,
    };
    let top = mantissa.checked_mul(num)?;
    let bottom = scale.checked_mul(den)?;
    Some(top.div_ceil(bottom))
}

/// What to do about a claim.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimAction {
    /// Nothing (not ours, being deleted, done, or waiting for another controller).
    Nothing,
    /// Make its directory and this PV (pre-bound to the claim).
    Provision(Box<PersistentVolume>),
    /// It cannot be provisioned: say why (a `ProvisioningFailed` event).
    Refuse(String),
    /// Raise the PV's capacity to the claim's request.
    ExpandVolume {
        /// The PV.
        pv: String,
        /// The new capacity.
        capacity: Quantity,
    },
    /// The PV is large enough: record the new size in the claim's status and end the resize.
    FinishExpansion {
        /// The PV's capacity.
        capacity: Quantity,
    },
}

/// The request of a claim, or its PV's or its status' capacity.
fn storage(map: Option<&std::collections::BTreeMap<String, Quantity>>) -> Option<&Quantity> {
    map.and_then(|m| m.get("storage"))
}

/// The PV name for a claim (external-provisioner's: `pvc-<claim uid>`).
pub fn volume_name(claim: &PersistentVolumeClaim) -> Option<String> {
    claim.metadata.uid.as_ref().map(|u| format!("pvc-{u}"))
}

/// Decides what a claim needs, given every PV and the classes by name.
pub fn claim_action(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    classes: &HashMap<String, Arc<StorageClass>>,
    volumes_dir: &Path,
) -> ClaimAction {
    if claim.metadata.deletion_timestamp.is_some() {
        return ClaimAction::Nothing;
    }
    let Some(spec) = &claim.spec else {
        return ClaimAction::Nothing;
    };
    let request = storage(spec.resources.as_ref().and_then(|r| r.requests.as_ref()));
    match spec.volume_name.as_deref().filter(|v| !v.is_empty()) {
        None => provision(claim, volumes, classes, volumes_dir),
        Some(bound) => {
            let Some(pv) = volumes.iter().find(|v| v.name_any() == bound) else {
                return ClaimAction::Nothing;
            };
            if !ours(pv) || claim.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound")
            {
                return ClaimAction::Nothing;
            }
            let pv_capacity = storage(pv.spec.as_ref().and_then(|s| s.capacity.as_ref()));
            let status_capacity = storage(claim.status.as_ref().and_then(|s| s.capacity.as_ref()));
            let (Some(request), Some(pv_capacity)) = (request, pv_capacity) else {
                return ClaimAction::Nothing;
            };
            let (Some(want), Some(have)) = (bytes(request), bytes(pv_capacity)) else {
                return ClaimAction::Nothing;
            };
            if want > have {
                return ClaimAction::ExpandVolume {
                    pv: bound.to_owned(),
                    capacity: request.clone(),
                };
            }
            let recorded = status_capacity.and_then(bytes);
            let resizing = claim.status.as_ref().is_some_and(|s| {
                s.allocated_resource_statuses
                    .as_ref()
                    .is_some_and(|m| !m.is_empty())
                    || s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Resizing" || c.type_ == "FileSystemResizePending")
            });
            if recorded.is_none_or(|r| r < have) || (resizing && recorded == Some(have)) {
                return ClaimAction::FinishExpansion {
                    capacity: pv_capacity.clone(),
                };
            }
            ClaimAction::Nothing
        }
    }
}

fn provision(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    classes: &HashMap<String, Arc<StorageClass>>,
    volumes_dir: &Path,
) -> ClaimAction {
    let annotations = claim.annotations();
    let handed_to_us = [PROVISIONER_ANNOTATION, PROVISIONER_ANNOTATION_BETA]
        .iter()
        .any(|a| annotations.get(*a).map(String::as_str) == Some(PROVISIONER));
    let (Some(spec), Some(uid), Some(name)) =
        (&claim.spec, &claim.metadata.uid, volume_name(claim))
    else {
        return ClaimAction::Nothing;
    };
    if !handed_to_us
        || claim
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p != "Pending")
    {
        return ClaimAction::Nothing;
    }
    // Made already (the PV controller binds it), by name or by claimRef.
    if volumes.iter().any(|v| {
        v.name_any() == name
            || v.spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.uid.as_deref())
                == Some(uid.as_str())
    }) {
        return ClaimAction::Nothing;
    }
    let Some(class) = spec
        .storage_class_name
        .as_ref()
        .and_then(|c| classes.get(c))
        .filter(|c| c.provisioner == PROVISIONER)
    else {
        return ClaimAction::Nothing;
    };
    if spec.selector.is_some() {
        return ClaimAction::Refuse("claim Selector is not supported".to_owned());
    }
    if spec.data_source.is_some() || spec.data_source_ref.is_some() {
        return ClaimAction::Refuse(
            "a data source (clone or snapshot) is not supported".to_owned(),
        );
    }
    if spec
        .volume_mode
        .as_deref()
        .is_some_and(|m| m != "Filesystem")
    {
        return ClaimAction::Refuse("only volumeMode Filesystem is supported".to_owned());
    }
    let Some(request) = storage(spec.resources.as_ref().and_then(|r| r.requests.as_ref())) else {
        return ClaimAction::Refuse("the claim requests no storage".to_owned());
    };
    let policy = class
        .reclaim_policy
        .clone()
        .unwrap_or_else(|| "Delete".to_owned());
    let mut metadata = json!({
        "name": name,
        "annotations": {PROVISIONED_BY: PROVISIONER},
    });
    if policy == "Delete" {
        metadata["finalizers"] = json!([FINALIZER]);
    }
    let pv = json!({
        "metadata": metadata,
        "spec": {
            "capacity": {"storage": request},
            "accessModes": spec.access_modes.clone().unwrap_or_default(),
            "hostPath": {
                "path": volumes_dir.join(&name).to_string_lossy(),
                "type": "DirectoryOrCreate",
            },
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": claim.namespace(),
                "name": claim.name_any(),
                "uid": uid,
            },
            "storageClassName": class.name_any(),
            "persistentVolumeReclaimPolicy": policy,
            "volumeMode": "Filesystem",
            "mountOptions": class.mount_options,
        },
    });
    match serde_json::from_value(pv) {
        Ok(pv) => ClaimAction::Provision(Box::new(pv)),
        Err(e) => ClaimAction::Refuse(format!("cannot make its PersistentVolume: {e}")),
    }
}

/// Whether the runner provisioned the PV.
fn ours(pv: &PersistentVolume) -> bool {
    pv.annotations().get(PROVISIONED_BY).map(String::as_str) == Some(PROVISIONER)
}

/// What to do about a PV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeAction {
    /// Nothing.
    Nothing,
    /// Released with policy Delete: remove the directory, delete the PV (then `Finalize`).
    Reclaim {
        /// The directory.
        dir: PathBuf,
    },
    /// Deleted while the finalizer holds it and no claim is bound: remove the directory
    /// (policy Delete), then the finalizer.
    Finalize {
        /// The directory to remove, if the policy says so.
        dir: Option<PathBuf>,
    },
}

/// Decides what a PV needs. Only the runner's PVs whose directory is exactly
/// `volumes_dir/<pv-name>` are touched: nothing else on the machine is ever removed.
pub fn volume_action(pv: &PersistentVolume, volumes_dir: &Path) -> VolumeAction {
    let name = pv.name_any();
    let dir = volumes_dir.join(&name);
    let spec = pv.spec.as_ref();
    let our_dir = spec
        .and_then(|s| s.host_path.as_ref())
        .is_some_and(|h| Path::new(&h.path) == dir);
    if !ours(pv) || !our_dir || name.is_empty() || name.contains('/') || name.starts_with('.') {
        return VolumeAction::Nothing;
    }
    let delete = spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
    let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
    let finalizer = pv.finalizers().iter().any(|f| f == FINALIZER);
    if pv.metadata.deletion_timestamp.is_some() {
        if finalizer && phase != Some("Bound") {
            return VolumeAction::Finalize {
                dir: delete.then_some(dir),
            };
        }
        return VolumeAction::Nothing;
    }
    if phase == Some("Released") && delete {
        return VolumeAction::Reclaim { dir };
    }
    VolumeAction::Nothing
}

/// The volumes directory: `STATE/volumes`.
pub fn volumes_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("volumes")
}

/// Provisions, reclaims and expands until `shutdown`. Failures are logged and retried.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) -> Result<(), ProvisionError> {
    let wake = Arc::new(Notify::new());
    let client = ctx.client.clone();
    let claims = reflect(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        wake.clone(),
        shutdown.clone(),
    );
    let volumes = reflect(
        Api::<PersistentVolume>::all(client.clone()),
        wake.clone(),
        shutdown.clone(),
    );
    let classes = reflect(
        Api::<StorageClass>::all(client.clone()),
        wake.clone(),
        shutdown.clone(),
    );
    if !(ready(&claims, &shutdown).await
        && ready(&volumes, &shutdown).await
        && ready(&classes, &shutdown).await)
    {
        return Ok(());
    }
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: PROVISIONER.to_owned(),
            instance: Some("pod-runner".to_owned()),
        },
    );
    let dir = volumes_dir(&ctx.state_dir);
    // Refusals already reported (claim uid → message), so that each is said once.
    let mut refused: HashMap<String, String> = HashMap::new();
    loop {
        let volume_list = volumes.state();
        let class_map: HashMap<String, Arc<StorageClass>> = classes
            .state()
            .into_iter()
            .map(|c| (c.name_any(), c))
            .collect();
        for claim in claims.state() {
            let action = claim_action(&claim, &volume_list, &class_map, &dir);
            if let Err(e) = act_on_claim(&client, &recorder, &claim, action, &mut refused).await {
                warn!("{e} (trying again)");
            }
        }
        for pv in &volume_list {
            if let Err(e) = act_on_volume(&client, pv, volume_action(pv, &dir)).await {
                warn!("{e} (trying again)");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = wake.notified() => {}
            _ = tokio::time::sleep(RESYNC) => {}
        }
    }
}

async fn act_on_claim(
    client: &kube::Client,
    recorder: &Recorder,
    claim: &PersistentVolumeClaim,
    action: ClaimAction,
    refused: &mut HashMap<String, String>,
) -> Result<(), ProvisionError> {
    let namespace = claim.namespace().unwrap_or_default();
    let key = format!("{namespace}/{}", claim.name_any());
    let claim_error = |what, source| ProvisionError::Claim {
        what,
        claim: key.clone(),
        source,
    };
    match action {
        ClaimAction::Nothing => {}
        ClaimAction::Refuse(why) => {
            let uid = claim.metadata.uid.clone().unwrap_or_default();
            if refused.get(&uid) != Some(&why) {
                warn!(claim = %key, "not provisioned: {why}");
                publish(
                    recorder,
                    claim,
                    EventType::Warning,
                    "ProvisioningFailed",
                    &why,
                )
                .await;
                refused.insert(uid, why);
            }
        }
        ClaimAction::Provision(pv) => {
            let name = pv.name_any();
            let path = pv
                .spec
                .as_ref()
                .and_then(|s| s.host_path.as_ref())
                .map(|h| PathBuf::from(&h.path))
                .unwrap_or_default();
            make_dir(&path).map_err(|source| ProvisionError::Directory {
                what: "making",
                path: path.clone(),
                pv: name.clone(),
                source,
            })?;
            match Api::<PersistentVolume>::all(client.clone())
                .create(&PostParams::default(), &pv)
                .await
            {
                Ok(_) => {
                    let size = pv
                        .spec
                        .as_ref()
                        .and_then(|s| storage(s.capacity.as_ref()))
                        .map(|q| q.0.clone())
                        .unwrap_or_default();
                    info!(claim = %key, pv = %name, size = %size, dir = %path.display(), "provisioned");
                    publish(
                        recorder,
                        claim,
                        EventType::Normal,
                        "ProvisioningSucceeded",
                        &format!("Successfully provisioned volume {name}"),
                    )
                    .await;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(source) => {
                    return Err(ProvisionError::Volume {
                        what: "creating",
                        pv: name,
                        source,
                    });
                }
            }
        }
        ClaimAction::ExpandVolume { pv, capacity } => {
            Api::<PersistentVolume>::all(client.clone())
                .patch(
                    &pv,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"capacity": {"storage": capacity}}})),
                )
                .await
                .map_err(|source| ProvisionError::Volume {
                    what: "expanding",
                    pv: pv.clone(),
                    source,
                })?;
            info!(claim = %key, pv = %pv, size = %capacity.0, "volume expanded");
        }
        ClaimAction::FinishExpansion { capacity } => {
            // As external-resizer ends a resize that needs no node step: the new capacity,
            // allocatedResources to match, no resize status, no Resizing conditions.
            let conditions: Vec<Value> = claim
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| c.type_ != "Resizing" && c.type_ != "FileSystemResizePending")
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect();
            let patch = json!({"status": {
                "capacity": {"storage": capacity},
                "allocatedResources": {"storage": capacity},
                "allocatedResourceStatuses": null,
                "conditions": if conditions.is_empty() { Value::Null } else { Value::Array(conditions) },
            }});
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), &namespace)
                .patch_status(
                    &claim.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .map_err(|source| claim_error("recording the new size of", source))?;
            info!(claim = %key, size = %capacity.0, "claim resized");
            publish(
                recorder,
                claim,
                EventType::Normal,
                "VolumeResizeSuccessful",
                "Resize volume succeeded",
            )
            .await;
        }
    }
    Ok(())
}

async fn act_on_volume(
    client: &kube::Client,
    pv: &PersistentVolume,
    action: VolumeAction,
) -> Result<(), ProvisionError> {
    let name = pv.name_any();
    let api = Api::<PersistentVolume>::all(client.clone());
    let volume_error = |what, source| ProvisionError::Volume {
        what,
        pv: name.clone(),
        source,
    };
    let (dir, delete) = match action {
        VolumeAction::Nothing => return Ok(()),
        VolumeAction::Reclaim { dir } => (Some(dir), true),
        VolumeAction::Finalize { dir } => (dir, false),
    };
    if let Some(dir) = &dir {
        let removed = remove_dir(dir).map_err(|source| ProvisionError::Directory {
            what: "removing",
            path: dir.clone(),
            pv: name.clone(),
            source,
        })?;
        if removed {
            info!(pv = %name, dir = %dir.display(), "volume directory removed");
        }
    }
    if delete {
        // The finalizer goes on the next pass, once the PV shows it is being deleted.
        return match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                info!(pv = %name, "released volume deleted (reclaim policy Delete)");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(volume_error("deleting", e)),
        };
    }
    let finalizers: Vec<&String> = pv.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    // The resourceVersion makes it a precondition: a PV changed meanwhile is looked at again.
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": pv.resource_version()}});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(volume_error("removing the finalizer of", e)),
    }
}

/// Makes a volume's directory writable by anyone: a Pod's containers run as any user (MOCO's
/// as 10000), and the kubelet applies no fsGroup to hostPath volumes.
fn make_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))
}

/// Removes a volume's directory; whether it was there.
fn remove_dir(path: &Path) -> std::io::Result<bool> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

async fn publish(
    recorder: &Recorder,
    claim: &PersistentVolumeClaim,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note.to_owned()),
        action: reason.to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &claim.object_ref(&())).await {
        warn!(claim = %claim.name_any(), "publishing a {reason} event: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    fn classes() -> HashMap<String, Arc<StorageClass>> {
        let mut retain = storage_class("keep");
        retain.reclaim_policy = Some("Retain".into());
        let mut other = storage_class("other");
        other.provisioner = "example.com/csi".into();
        [storage_class("standard"), retain, other]
            .into_iter()
            .map(|c| (c.name_any(), Arc::new(c)))
            .collect()
    }

    fn claim(class: &str, extra: Value) -> PersistentVolumeClaim {
        let mut c = json!({
            "metadata": {"name": "data-db-0", "namespace": "ns", "uid": "u1",
                "annotations": {PROVISIONER_ANNOTATION: PROVISIONER}},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"},
        });
        merge(&mut c, extra);
        serde_json::from_value(c).unwrap()
    }

    fn merge(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn pv(extra: Value) -> Arc<PersistentVolume> {
        let mut v = json!({
            "metadata": {"name": "pvc-u1", "annotations": {PROVISIONED_BY: PROVISIONER}, "finalizers": ["kubernetes.io/pv-protection", FINALIZER]},
            "spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/s/volumes/pvc-u1"},
                "persistentVolumeReclaimPolicy": "Delete", "accessModes": ["ReadWriteOnce"]},
            "status": {"phase": "Bound"},
        });
        merge(&mut v, extra);
        Arc::new(serde_json::from_value(v).unwrap())
    }

    const DIR: &str = "/s/volumes";

    #[test]
    fn quantities_in_bytes() {
        assert_eq!(bytes(&q("1Gi")), Some(1 << 30));
        assert_eq!(bytes(&q("1.5Gi")), Some(3 << 29));
        assert_eq!(bytes(&q("500M")), Some(500_000_000));
        assert_eq!(bytes(&q("1e3")), Some(1000));
        assert_eq!(bytes(&q("1500m")), Some(2));
        assert_eq!(bytes(&q("1024")), Some(1024));
        assert!(bytes(&q("2Ki")) > bytes(&q("2k")));
        assert_eq!(bytes(&q("x")), None);
        assert_eq!(bytes(&q("1Xi")), None);
    }

    #[test]
    fn a_handed_claim_gets_a_prebound_hostpath_volume() {
        let ClaimAction::Provision(pv) = claim_action(
            &claim("standard", json!({})),
            &[],
            &classes(),
            Path::new(DIR),
        ) else {
            panic!("no provisioning");
        };
        let spec = pv.spec.as_ref().unwrap();
        assert_eq!(pv.name_any(), "pvc-u1");
        assert_eq!(pv.annotations()[PROVISIONED_BY], PROVISIONER);
        assert_eq!(pv.finalizers(), [FINALIZER.to_owned()]);
        assert_eq!(spec.capacity.as_ref().unwrap()["storage"], q("1Gi"));
        assert_eq!(
            spec.access_modes.as_deref(),
            Some(&["ReadWriteOnce".to_owned()][..])
        );
        let host = spec.host_path.as_ref().unwrap();
        assert_eq!(host.path, "/s/volumes/pvc-u1");
        assert_eq!(host.type_.as_deref(), Some("DirectoryOrCreate"));
        let r = spec.claim_ref.as_ref().unwrap();
        assert_eq!(
            (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
            (Some("ns"), Some("data-db-0"), Some("u1"))
        );
        assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Delete")
        );

        // The class's policy; no finalizer for Retain.
        let ClaimAction::Provision(pv) =
            claim_action(&claim("keep", json!({})), &[], &classes(), Path::new(DIR))
        else {
            panic!("no provisioning");
        };
        assert_eq!(
            pv.spec
                .as_ref()
                .unwrap()
                .persistent_volume_reclaim_policy
                .as_deref(),
            Some("Retain")
        );
        assert!(pv.finalizers().is_empty());
    }

    #[test]
    fn claims_that_are_not_ours_or_done_are_left() {
        let c = classes();
        let dir = Path::new(DIR);
        // Not handed over yet by the PV controller.
        let mut unannotated = claim("standard", json!({}));
        unannotated.metadata.annotations = None;
        assert_eq!(
            claim_action(&unannotated, &[], &c, dir),
            ClaimAction::Nothing
        );
        // Another provisioner's class.
        assert_eq!(
            claim_action(&claim("other", json!({})), &[], &c, dir),
            ClaimAction::Nothing
        );
        // Its PV exists already.
        assert_eq!(
            claim_action(
                &claim("standard", json!({})),
                &[pv(json!({"status": {"phase": "Available"}}))],
                &c,
                dir
            ),
            ClaimAction::Nothing
        );
        // Being deleted.
        let deleting = claim(
            "standard",
            json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}}),
        );
        assert_eq!(claim_action(&deleting, &[], &c, dir), ClaimAction::Nothing);
        // A selector is refused, naming why.
        let selected = claim(
            "standard",
            json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}}),
        );
        assert!(
            matches!(claim_action(&selected, &[], &c, dir), ClaimAction::Refuse(why) if why.contains("Selector"))
        );
    }

    #[test]
    fn expansion_raises_the_volume_then_the_claim() {
        let c = classes();
        let dir = Path::new(DIR);
        let bound = |request: &str, status: &str| {
            claim(
                "standard",
                json!({
                    "spec": {"volumeName": "pvc-u1", "resources": {"requests": {"storage": request}}},
                    "status": {"phase": "Bound", "capacity": {"storage": status}},
                }),
            )
        };
        assert_eq!(
            claim_action(&bound("1Gi", "1Gi"), &[pv(json!({}))], &c, dir),
            ClaimAction::Nothing
        );
        assert_eq!(
            claim_action(&bound("2Gi", "1Gi"), &[pv(json!({}))], &c, dir),
            ClaimAction::ExpandVolume {
                pv: "pvc-u1".into(),
                capacity: q("2Gi")
            }
        );
        let grown = pv(json!({"spec": {"capacity": {"storage": "2Gi"}}}));
        assert_eq!(
            claim_action(&bound("2Gi", "1Gi"), std::slice::from_ref(&grown), &c, dir),
            ClaimAction::FinishExpansion { capacity: q("2Gi") }
        );
        assert_eq!(
            claim_action(&bound("2Gi", "2Gi"), std::slice::from_ref(&grown), &c, dir),
            ClaimAction::Nothing
        );
        // 2048Mi is 2Gi: nothing to do.
        assert_eq!(
            claim_action(&bound("2048Mi", "2Gi"), &[grown], &c, dir),
            ClaimAction::Nothing
        );
        // Someone else's PV is not resized.
        let foreign = pv(json!({"metadata": {"annotations": {PROVISIONED_BY: "x"}}}));
        assert_eq!(
            claim_action(&bound("2Gi", "1Gi"), &[foreign], &c, dir),
            ClaimAction::Nothing
        );
    }

    #[test]
    fn released_volumes_are_reclaimed_by_policy() {
        let dir = Path::new(DIR);
        assert_eq!(volume_action(&pv(json!({})), dir), VolumeAction::Nothing);
        assert_eq!(
            volume_action(&pv(json!({"status": {"phase": "Released"}})), dir),
            VolumeAction::Reclaim {
                dir: PathBuf::from("/s/volumes/pvc-u1")
            }
        );
        let retain = pv(
            json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}, "status": {"phase": "Released"}}),
        );
        assert_eq!(volume_action(&retain, dir), VolumeAction::Nothing);
        // Deleted first: the directory goes once no claim is bound.
        let deleted = pv(
            json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}, "status": {"phase": "Released"}}),
        );
        assert_eq!(
            volume_action(&deleted, dir),
            VolumeAction::Finalize {
                dir: Some(PathBuf::from("/s/volumes/pvc-u1"))
            }
        );
        let deleted_bound = pv(json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}}));
        assert_eq!(volume_action(&deleted_bound, dir), VolumeAction::Nothing);
        // A path outside the volumes directory is never removed.
        let elsewhere =
            pv(json!({"spec": {"hostPath": {"path": "/etc"}}, "status": {"phase": "Released"}}));
        assert_eq!(volume_action(&elsewhere, dir), VolumeAction::Nothing);
    }

    #[test]
    fn the_default_class() {
        let c = storage_class("standard");
        assert_eq!(c.annotations()[DEFAULT_CLASS_ANNOTATION], "true");
        assert_eq!(c.provisioner, PROVISIONER);
        assert_eq!(c.volume_binding_mode.as_deref(), Some("Immediate"));
        assert_eq!(c.allow_volume_expansion, Some(true));
        assert_eq!(c.reclaim_policy.as_deref(), Some("Delete"));
    }
}
