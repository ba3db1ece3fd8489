//! Step 4 of a round: the Pods' ServiceAccount and RBAC, and the three Services.
//!
//! Server-side apply merges a Service's ports by `(port, protocol)`. When another writer
//! (`kubectl edit`) renumbers one of the operator's ports, it owns an entry with the new
//! number and the operator's name, the operator's apply adds its own entry beside it, and the
//! API server refuses the pair (`spec.ports[1].name: Duplicate value`) in every round from
//! then on, so nothing after the Services would be reconciled again. On that refusal the
//! ports are first set to the rendered ones (a merge patch replaces the whole list) and the
//! apply is sent again. The usual round sends the apply alone.

use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams};
use moco_kube::api::retry;
use serde_json::json;

use super::apply::{FIELD_MANAGER, Writer, apply};
use super::{ReconcileError, Step, name_of};

/// Applies the ServiceAccount, the Role and RoleBinding that let the Pods read their cluster,
/// and the Services.
pub(super) async fn apply_all(
    w: &Writer<'_>,
    service_account: &ServiceAccount,
    (role, binding): &(Role, RoleBinding),
    services: &[Service],
) -> Result<(), ReconcileError> {
    w.apply(Step::Services, service_account).await?;
    w.apply(Step::Services, role).await?;
    w.apply(Step::Services, binding).await?;
    let api = w.api::<Service>();
    for s in services {
        apply_service(&api, &name_of(s), s)
            .await
            .map_err(ReconcileError::api(Step::Services))?;
    }
    Ok(())
}

/// Whether the API server refused an object as invalid (422) naming a duplicate value.
fn is_duplicate(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 422 && s.message.contains("Duplicate value"))
}

/// Applies `service`; a refusal for a duplicate port name takes back the ports first.
async fn apply_service(
    api: &Api<Service>,
    name: &str,
    service: &Service,
) -> Result<Service, kube::Error> {
    match apply(api, name, service).await {
        Err(e) if is_duplicate(&e) => {
            tracing::warn!(service = name, error = %e,
                "another writer changed the Service's ports; setting them back");
            let ports = service.spec.as_ref().and_then(|s| s.ports.clone());
            let patch = Patch::Merge(json!({"spec": {"ports": ports}}));
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            retry(|| api.patch(name, &params, &patch)).await?;
            apply(api, name, service).await
        }
        other => other,
    }
}
