//! Steps 1–2 of a round: the passwords' Secrets, then the certificates (the agent's, and
//! mysqld's with TLS) and the copies of their Secrets.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::apply::{Writer, create_once};
use super::{ReconcileError, Step, certificate_resource, name_of, read};
use crate::render::TlsObjects;

/// The controller's Secret, when this round drew its passwords: it is created once and never
/// updated (the passwords in it are the cluster's). If another writer created it meanwhile,
/// its passwords stand and this round's rendering is stale: the round ends, and the next one
/// renders with them.
pub(super) async fn store_passwords(
    system: &Writer<'_>,
    system_namespace: &str,
    passwords: &read::Passwords,
    controller_secret: &Secret,
) -> Result<(), ReconcileError> {
    let read::Passwords::Drawn(drawn) = passwords else {
        return Ok(());
    };
    let name = name_of(controller_secret);
    let stored = system.create_once(Step::Secrets, controller_secret).await?;
    if read::stored_passwords(&stored, system_namespace, &name)? != *drawn {
        return Err(ReconcileError::SecretRaced(name));
    }
    Ok(())
}

/// Step 2: the agent's Certificate (created once; cert-manager renews it) and its Secret's
/// copy; with TLS, mysqld's Certificate and the copies of its key pair, which the Pods wait
/// for.
pub(super) async fn certificates(
    system: &Writer<'_>,
    cluster: &Writer<'_>,
    certificate: &Value,
    grpc_secret: Option<&Secret>,
    tls: Option<&TlsObjects>,
) -> Result<(), ReconcileError> {
    let certificates: Api<DynamicObject> = system.api_with(&certificate_resource());
    create_certificate(&certificates, certificate).await?;
    cluster.apply_each(Step::Certificate, grpc_secret).await?;
    if let Some(TlsObjects {
        certificate,
        server_secret,
        ca_secret,
    }) = tls
    {
        create_certificate(&certificates, certificate).await?;
        cluster
            .apply_each(
                Step::Certificate,
                [server_secret, ca_secret].into_iter().flatten(),
            )
            .await?;
    }
    Ok(())
}

/// Creates a cert-manager Certificate from its rendered JSON, once.
async fn create_certificate(
    certificates: &Api<DynamicObject>,
    rendered: &Value,
) -> Result<(), ReconcileError> {
    let certificate: DynamicObject =
        serde_json::from_value(rendered.clone()).map_err(|e| ReconcileError::Input {
            step: Step::Certificate,
            message: e.to_string(),
        })?;
    let name = name_of(&certificate);
    create_once(certificates, &name, &certificate)
        .await
        .map(drop)
        .map_err(ReconcileError::api(Step::Certificate))
}
