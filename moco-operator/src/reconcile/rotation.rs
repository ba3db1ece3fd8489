//! Beginning a rotation of MOCO's passwords that a MySQLCluster asks for
//! (`moco-rs/rotate-passwords`, set by `kubectl moco credential rotate`): new passwords are
//! drawn once and stored beside the old ones in the controller's Secret
//! ([`moco_kube::rotation`]); the cluster's manager takes the rotation from there. A request
//! is served once (the Secret records it), and only while no other rotation is in progress.

use k8s_openapi::api::core::v1::Secret;
use kube::Resource as _;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use moco_api::annotations::{ROTATE_PASSWORDS_ANNOTATION, annotation};
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_kube::api::retry;
use moco_kube::platform::withdraw_rotation_request;
use moco_kube::rotation;

use super::{Context, ReconcileError, Step, read};

/// The reason of the event that says a rotation began.
pub const ROTATION_REASON: &str = "PasswordRotation";

/// The request `cluster` makes, if any (an empty value is none).
pub fn request(cluster: &MySQLCluster) -> Option<&str> {
    annotation(&cluster.metadata, ROTATE_PASSWORDS_ANNOTATION).filter(|v| !v.trim().is_empty())
}

/// Begins the rotation `cluster` requests, unless it was served or another is in progress;
/// returns whether it began one.
pub(super) async fn begin_requested(
    ctx: &Context,
    cluster: &MySQLCluster,
    id: &ClusterId,
) -> Result<bool, ReconcileError> {
    let Some(request) = request(cluster) else {
        return Ok(false);
    };
    let system = &ctx.settings.system_namespace;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), system);
    let name = id.controller_secret();
    let Some(secret) = retry(|| api.get_opt(&name))
        .await
        .map_err(ReconcileError::api(Step::Secrets))?
    else {
        return Ok(false);
    };
    let in_progress = rotation::read(&secret).map_err(|e| ReconcileError::Input {
        step: Step::Secrets,
        message: format!("Secret {system}/{name}: {e}"),
    })?;
    if in_progress.is_some() {
        return Ok(false);
    }
    if rotation::served_request(&secret).as_deref() == Some(request) {
        // Served and finished, but the manager could not withdraw the request (it does so
        // once the rotation ends): withdrawn here, so that the requester sees it done.
        let clusters: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), &id.namespace);
        withdraw_rotation_request(&clusters, &id.name, request)
            .await
            .map_err(ReconcileError::api(Step::Secrets))?;
        return Ok(false);
    }
    let current = read::stored_passwords(&secret, system, &name)?;
    let new = moco_adapters::mysql::generate_passwords().map_err(|e| ReconcileError::Input {
        step: Step::Secrets,
        message: format!("cannot draw random passwords from the OS: {e}"),
    })?;
    let patch = rotation::begin_patch(&secret, &current, &new, request);
    // Conditional on the Secret read above: a concurrent writer makes this round fail and
    // the next one decide again, so passwords are never drawn twice for one rotation.
    api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(ReconcileError::api(Step::Secrets))?;
    tracing::info!(cluster = %id.name, namespace = %id.namespace, request, "password rotation begun");
    crate::events::publish(
        &ctx.client,
        &cluster.object_ref(&()),
        EventType::Normal,
        ROTATION_REASON,
        "new passwords were drawn for MOCO's 8 accounts; the manager rotates them".to_owned(),
    )
    .await;
    Ok(true)
}
