//! One MySQLUser's step: its account on the cluster's primary as declared.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::{Resource, ResourceExt};
use moco_adapters::mysql::MysqlInstance;
use moco_api::accounts::declared::{DeclaredError, account_spec, all_privilege_levels};
use moco_api::accounts::validate::validate_user;
use moco_api::accounts::{DeletionPolicy, MySQLUser, MySQLUserStatus, ReadyReason, SecretKeyRef};
use moco_cluster::ports::PortError;
use moco_core::accounts::{
    AccountChange, AccountSpec, Claim, Ownership, claim, may_drop, plan_account,
};
use serde_json::json;

use super::status::{invalid_message, ready_condition, record_ownership, was_ready};
use super::{AccountsError, ClusterState, Context, FINALIZER, Failure, RESYNC, WAIT, api_error};

/// Server errors that mean a privilege name is not one this server knows: a parse error
/// (MariaDB and MySQL take an unknown static name for a syntax error) or MySQL's unknown
/// dynamic privilege.
const UNKNOWN_PRIVILEGE_CODES: [u16; 2] = [1064, 3619];

pub(super) async fn step(user: Arc<MySQLUser>, ctx: Arc<Context>) -> Result<Action, AccountsError> {
    let namespace = user.namespace().unwrap_or_default();
    let api: Api<MySQLUser> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer::finalizer(&api, FINALIZER, user, |event| async {
        match event {
            FinalizerEvent::Apply(u) => apply(&ctx, &u).await,
            FinalizerEvent::Cleanup(u) => cleanup(&ctx, &u).await,
        }
    })
    .await
    .map_err(|e| match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        other => AccountsError::Finalizer(other.to_string()),
    })
}

/// `'name'@'host'`, for messages.
fn account_of(user: &MySQLUser) -> String {
    format!("'{}'@'{}'", user.account_name(), user.spec.host)
}

/// What makes two MySQLUsers declare the same account: namespace, cluster, user name and
/// host, the host without case as the servers compare it (`App.example` is `app.example`; user
/// names keep their case, as the servers keep them).
fn account_key(u: &MySQLUser) -> (Option<String>, String, String, String) {
    (
        u.metadata.namespace.clone(),
        u.spec.cluster_name.clone(),
        u.account_name().to_owned(),
        u.spec.host.to_ascii_lowercase(),
    )
}

/// The older object of the namespace that declares the same account of the same cluster, if
/// any: it keeps the account.
fn conflicting(ctx: &Context, user: &MySQLUser) -> Option<String> {
    let key = account_key;
    let age = |u: &MySQLUser| {
        (
            u.metadata.creation_timestamp.clone().map(|t| t.0),
            u.metadata.name.clone(),
        )
    };
    let mine = key(user);
    ctx.users
        .state()
        .iter()
        .filter(|u| u.metadata.uid != user.metadata.uid && key(u) == mine)
        .filter(|u| age(u) < age(user))
        .map(|u| u.name_any())
        .min()
}

async fn apply(ctx: &Context, user: &MySQLUser) -> Result<Action, AccountsError> {
    let namespace = user.namespace().unwrap_or_default();
    let name = user.name_any();
    ctx.by_secret
        .record(&namespace, &name, &user.spec.password_secret_key_ref.name);
    // Admission may not have run (the webhook was away, or older rules admitted it): the same
    // rules again, before any SQL, so that no object re-keys MOCO's accounts or grants what
    // the opt-in guards.
    if let Some(message) = invalid_message(&validate_user(user)) {
        write_status(ctx, user, ReadyReason::Invalid, message, None).await?;
        return Ok(Action::requeue(RESYNC));
    }
    if let Some(older) = conflicting(ctx, user) {
        let message = format!(
            "MySQLUser {older} already declares {} on MySQLCluster {}; it keeps it",
            account_of(user),
            user.spec.cluster_name
        );
        write_status(ctx, user, ReadyReason::Conflict, message, None).await?;
        return Ok(Action::requeue(RESYNC));
    }
    let cluster = match ctx.cluster(&namespace, &user.spec.cluster_name).await? {
        ClusterState::Missing => {
            let message = format!(
                "no MySQLCluster {} in namespace {namespace}",
                user.spec.cluster_name
            );
            write_status(ctx, user, ReadyReason::ClusterNotFound, message, None).await?;
            return Ok(Action::requeue(WAIT));
        }
        ClusterState::NotAvailable(message) => {
            write_status(ctx, user, ReadyReason::ClusterNotAvailable, message, None).await?;
            return Ok(Action::requeue(WAIT));
        }
        ClusterState::Available(cluster) => cluster,
    };
    let reference = &user.spec.password_secret_key_ref;
    let secret = ctx.password_secret(&namespace, &reference.name).await?;
    let (secret, password) = match password_in(secret, reference) {
        Ok(found) => found,
        Err(message) => {
            write_status(ctx, user, ReadyReason::SecretMissing, message, None).await?;
            return Ok(Action::requeue(WAIT));
        }
    };
    let admin = ctx.primary(&cluster, (&namespace, &name)).await?;
    let outcome = converge(
        ctx,
        &admin,
        user,
        &password,
        secret.metadata.resource_version.as_deref(),
    )
    .await;
    let (changes, ownership) = match outcome {
        Ok(converged) => converged,
        Err(Failure::Refused(reason, message)) => {
            write_status(ctx, user, reason, message, None).await?;
            return Ok(Action::requeue(RESYNC));
        }
        Err(Failure::Api(e)) => return Err(e),
        Err(Failure::Port(source)) => {
            return Err(AccountsError::Primary {
                namespace,
                name,
                cluster: user.spec.cluster_name.clone(),
                source,
            });
        }
    };
    if !changes.is_empty() {
        let words: Vec<String> = changes.iter().map(ToString::to_string).collect();
        let status = user.status.clone().unwrap_or_default();
        let unchanged = status.observed_generation == user.metadata.generation
            && status.password_secret_resource_version == secret.metadata.resource_version;
        let (type_, reason, what) = if unchanged && was_ready(&status.conditions) {
            (
                EventType::Warning,
                "DriftRepaired",
                "changed on the server; put back",
            )
        } else {
            (EventType::Normal, "Applied", "applied")
        };
        let note = format!(
            "{} on MySQLCluster {} {what}: {}",
            account_of(user),
            user.spec.cluster_name,
            words.join("; ")
        );
        ctx.publish(&user.object_ref(&()), type_, reason, note)
            .await;
    }
    let message = format!(
        "{} is on the primary of MySQLCluster {} as declared",
        account_of(user),
        user.spec.cluster_name
    );
    write_status_owned(
        ctx,
        user,
        ReadyReason::Applied,
        message,
        secret.metadata.resource_version.clone(),
        Some(ownership),
    )
    .await?;
    Ok(Action::requeue(RESYNC))
}

/// What the object holds by its status: its recorded ownership, or, for an object an earlier
/// release applied (a password set, or `Ready` once, and no record), `Adopted`: those
/// releases took over whatever they found.
fn held(user: &MySQLUser) -> (Option<Ownership>, bool) {
    let status = user.status.clone().unwrap_or_default();
    let applied_before =
        status.password_secret_resource_version.is_some() || was_ready(&status.conditions);
    (status.ownership, applied_before)
}

/// The Secret `reference` names and the password it holds, or why not, naming the field of
/// `spec.passwordSecretKeyRef` to look at (the `SecretMissing` message).
fn password_in(
    secret: Option<Secret>,
    reference: &SecretKeyRef,
) -> Result<(Secret, String), String> {
    let field = "spec.passwordSecretKeyRef";
    let Some(secret) = secret else {
        return Err(format!(
            "{field}.name: Secret {} does not exist",
            reference.name
        ));
    };
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&reference.key))
        .ok_or_else(|| {
            format!(
                "{field}.key: Secret {} has no key {}",
                reference.name, reference.key
            )
        })?;
    match String::from_utf8(value.0.clone()) {
        Ok(p) if !p.is_empty() => Ok((secret, p)),
        Ok(_) => Err(format!(
            "{field}.key: key {} of Secret {} is empty",
            reference.key, reference.name
        )),
        Err(_) => Err(format!(
            "{field}.key: key {} of Secret {} is not UTF-8",
            reference.key, reference.name
        )),
    }
}

/// Reads the account, claims it ([`claim`]: an existing account not this object's is left
/// alone unless `spec.adopt`; a new claim is recorded in the status before any change), plans
/// and applies; the changes made and what the object holds.
async fn converge(
    ctx: &Context,
    admin: &MysqlInstance,
    user: &MySQLUser,
    password: &str,
    secret_version: Option<&str>,
) -> Result<(Vec<AccountChange>, Ownership), Failure> {
    let spec = declared(admin, user).await?;
    let observed = admin
        .observe_account(&spec.name, &spec.host, password)
        .await
        .map_err(Failure::Port)?;
    let (owned, applied_before) = held(user);
    let ownership = match claim(observed.is_some(), owned, user.spec.adopt, applied_before) {
        Claim::Keep(o) => o,
        Claim::Record(o) => {
            record_ownership(&ctx.client, user, o)
                .await
                .map_err(Failure::Api)?;
            o
        }
        Claim::Refuse => {
            return Err(Failure::Refused(
                ReadyReason::Exists,
                format!(
                    "{} already exists on MySQLCluster {} and this MySQLUser did not create it: \
                     nothing was changed; set spec.adopt: true to take it over (its password \
                     is set, what it holds beyond spec.grants is revoked, and deletionPolicy: \
                     Delete drops it), or declare another account",
                    account_of(user),
                    user.spec.cluster_name
                ),
            ));
        }
    };
    let status = user.status.clone().unwrap_or_default();
    let new_password = status.password_secret_resource_version.as_deref() != secret_version;
    let changes = plan_account(&spec, observed.as_ref(), new_password);
    match admin.apply_account(&spec, password, &changes).await {
        Ok(()) => Ok((changes, ownership)),
        Err(PortError::Sql { code, message, .. }) if UNKNOWN_PRIVILEGE_CODES.contains(&code) => {
            Err(Failure::Refused(
                ReadyReason::UnknownPrivilege,
                format!("the server refused a privilege of spec.grants: {message}"),
            ))
        }
        Err(PortError::Sql {
            code,
            message,
            what,
            ..
        }) => Err(Failure::Refused(
            ReadyReason::ApplyFailed,
            format!("the server refused {what}: error {code}: {message}"),
        )),
        Err(e) => Err(Failure::Port(e)),
    }
}

/// The account `user` declares, `ALL PRIVILEGES` expanded the server's way
/// ([`moco_api::accounts::declared`]).
async fn declared(admin: &MysqlInstance, user: &MySQLUser) -> Result<AccountSpec, Failure> {
    let refused = |e: DeclaredError| Failure::Refused(ReadyReason::ApplyFailed, e.to_string());
    let mut all = BTreeMap::new();
    for level in all_privilege_levels(user).map_err(refused)? {
        all.insert(
            level,
            admin.all_privileges(level).await.map_err(Failure::Port)?,
        );
    }
    account_spec(user, &all).map_err(refused)
}

/// Drops the account when the policy says so and the object holds it (created or took it
/// over). An object that breaks the admission rules drops nothing (it may name one of MOCO's
/// accounts).
async fn cleanup(ctx: &Context, user: &MySQLUser) -> Result<Action, AccountsError> {
    ctx.by_secret
        .remove(&user.namespace().unwrap_or_default(), &user.name_any());
    let (owned, applied_before) = held(user);
    let owned = owned.or(applied_before.then_some(Ownership::Adopted));
    if user.spec.deletion_policy == DeletionPolicy::Retain
        || conflicting(ctx, user).is_some()
        || !validate_user(user).is_empty()
        || !may_drop(owned)
    {
        return Ok(Action::await_change());
    }
    let namespace = user.namespace().unwrap_or_default();
    let name = user.name_any();
    let cluster = match ctx.cluster(&namespace, &user.spec.cluster_name).await? {
        // The cluster is gone, and the account with it.
        ClusterState::Missing => return Ok(Action::await_change()),
        ClusterState::NotAvailable(message) => {
            // Dropped once the primary takes writes: the finalizer holds the object until then.
            tracing::info!(namespace, name, message, "waiting to drop the account");
            return Err(AccountsError::Finalizer(format!(
                "{namespace}/{name}: deletionPolicy Delete waits for a writable primary: {message}"
            )));
        }
        ClusterState::Available(cluster) => cluster,
    };
    let admin = ctx.primary(&cluster, (&namespace, &name)).await?;
    let spec = AccountSpec {
        name: user.account_name().to_owned(),
        host: user.spec.host.clone(),
        ..AccountSpec::default()
    };
    let dropped = admin.apply_account(&spec, "", &[AccountChange::Drop]).await;
    dropped.map_err(|source| AccountsError::Primary {
        namespace,
        name,
        cluster: user.spec.cluster_name.clone(),
        source,
    })?;
    ctx.publish(
        &user.object_ref(&()),
        EventType::Normal,
        "Dropped",
        format!(
            "{} dropped from MySQLCluster {} (deletionPolicy: Delete)",
            account_of(user),
            user.spec.cluster_name
        ),
    )
    .await;
    Ok(Action::await_change())
}

/// Writes the status when it changes, keeping the recorded ownership. `secret_version` is
/// kept from the previous status unless given (only an applied password moves it).
async fn write_status(
    ctx: &Context,
    user: &MySQLUser,
    reason: ReadyReason,
    message: String,
    secret_version: Option<String>,
) -> Result<(), AccountsError> {
    write_status_owned(ctx, user, reason, message, secret_version, None).await
}

/// [`write_status`], with the ownership when given.
async fn write_status_owned(
    ctx: &Context,
    user: &MySQLUser,
    reason: ReadyReason,
    message: String,
    secret_version: Option<String>,
    ownership: Option<Ownership>,
) -> Result<(), AccountsError> {
    let previous = user.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let condition = ready_condition(
        &previous.conditions,
        reason,
        message,
        user.metadata.generation,
        now,
    );
    let next = MySQLUserStatus {
        conditions: vec![condition],
        observed_generation: user.metadata.generation,
        password_secret_resource_version: secret_version
            .or_else(|| previous.password_secret_resource_version.clone()),
        ownership: ownership.or(previous.ownership),
    };
    if next == previous {
        return Ok(());
    }
    let namespace = user.namespace().unwrap_or_default();
    let name = user.name_any();
    let api: Api<MySQLUser> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": next})),
    )
    .await
    .map_err(|e| api_error("writing the status of MySQLUser", &namespace, &name, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn secret(value: Option<&[u8]>) -> Secret {
        Secret {
            data: value.map(|v| BTreeMap::from([("password".to_owned(), ByteString(v.to_vec()))])),
            ..Secret::default()
        }
    }

    #[test]
    fn hosts_conflict_without_case_and_names_with_it() {
        let user = |name: &str, host: &str| -> MySQLUser {
            serde_json::from_value(json!({
                "apiVersion": "moco-rs.io/v1alpha1", "kind": "MySQLUser",
                "metadata": {"name": "x", "namespace": "ns"},
                "spec": {"clusterName": "db", "name": name, "host": host,
                    "passwordSecretKeyRef": {"name": "s", "key": "k"}},
            }))
            .unwrap()
        };
        assert_eq!(
            account_key(&user("app", "App.Example")),
            account_key(&user("app", "app.example"))
        );
        assert_ne!(
            account_key(&user("App", "%")),
            account_key(&user("app", "%"))
        );
    }

    #[test]
    fn the_secret_missing_message_names_the_field_to_look_at() {
        let r = SecretKeyRef {
            name: "app-password".into(),
            key: "password".into(),
        };
        let cases: [(Option<Secret>, &str); 4] = [
            (
                None,
                "spec.passwordSecretKeyRef.name: Secret app-password does not exist",
            ),
            (
                Some(secret(None)),
                "spec.passwordSecretKeyRef.key: Secret app-password has no key password",
            ),
            (
                Some(secret(Some(b""))),
                "spec.passwordSecretKeyRef.key: key password of Secret app-password is empty",
            ),
            (
                Some(secret(Some(&[0xff, 0xfe]))),
                "spec.passwordSecretKeyRef.key: key password of Secret app-password is not UTF-8",
            ),
        ];
        for (s, message) in cases {
            assert_eq!(password_in(s, &r).map(|(_, p)| p), Err(message.to_owned()));
        }
        assert_eq!(
            password_in(Some(secret(Some(b"pw"))), &r).map(|(_, p)| p),
            Ok("pw".to_owned())
        );
    }
}
