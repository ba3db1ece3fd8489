//! One MySQLDatabase's step: its database on the cluster's primary as declared.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::{Resource, ResourceExt};
use moco_adapters::mysql::MysqlInstance;
use moco_api::accounts::declared::database_spec;
use moco_api::accounts::validate::validate_database;
use moco_api::accounts::{DeletionPolicy, MySQLDatabase, MySQLDatabaseStatus, ReadyReason};
use moco_cluster::ports::PortError;
use moco_core::accounts::{
    Claim, DatabaseChange, DatabaseSpec, Ownership, claim, may_drop, plan_database,
};
use serde_json::json;

use super::status::{invalid_message, ready_condition, record_ownership, was_ready};
use super::{AccountsError, ClusterState, Context, FINALIZER, Failure, RESYNC, WAIT, api_error};

/// Unknown character set (1115) or collation (1273), or a collation of another character set
/// (1253).
const UNKNOWN_CHARSET_CODES: [u16; 3] = [1115, 1273, 1253];

pub(super) async fn step(
    database: Arc<MySQLDatabase>,
    ctx: Arc<Context>,
) -> Result<Action, AccountsError> {
    let namespace = database.namespace().unwrap_or_default();
    let api: Api<MySQLDatabase> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer::finalizer(&api, FINALIZER, database, |event| async {
        match event {
            FinalizerEvent::Apply(d) => apply(&ctx, &d).await,
            FinalizerEvent::Cleanup(d) => cleanup(&ctx, &d).await,
        }
    })
    .await
    .map_err(|e| match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        other => AccountsError::Finalizer(other.to_string()),
    })
}

/// The older object of the namespace that declares the same database of the same cluster.
fn conflicting(ctx: &Context, database: &MySQLDatabase) -> Option<String> {
    let key = |d: &MySQLDatabase| {
        (
            d.metadata.namespace.clone(),
            d.spec.cluster_name.clone(),
            d.database_name().to_owned(),
        )
    };
    let age = |d: &MySQLDatabase| {
        (
            d.metadata.creation_timestamp.clone().map(|t| t.0),
            d.metadata.name.clone(),
        )
    };
    let mine = key(database);
    ctx.databases
        .state()
        .iter()
        .filter(|d| d.metadata.uid != database.metadata.uid && key(d) == mine)
        .filter(|d| age(d) < age(database))
        .map(|d| d.name_any())
        .min()
}

async fn apply(ctx: &Context, database: &MySQLDatabase) -> Result<Action, AccountsError> {
    let namespace = database.namespace().unwrap_or_default();
    let name = database.name_any();
    // Admission may not have run: the same rules again before any SQL (a database named
    // `mysql` is never created, altered or dropped).
    if let Some(message) = invalid_message(&validate_database(database)) {
        write_status(ctx, database, ReadyReason::Invalid, message, None).await?;
        return Ok(Action::requeue(RESYNC));
    }
    let db = database_spec(database);
    if let Some(older) = conflicting(ctx, database) {
        let message = format!(
            "MySQLDatabase {older} already declares database {} on MySQLCluster {}; it keeps it",
            db.name, database.spec.cluster_name
        );
        write_status(ctx, database, ReadyReason::Conflict, message, None).await?;
        return Ok(Action::requeue(RESYNC));
    }
    let cluster = match ctx.cluster(&namespace, &database.spec.cluster_name).await? {
        ClusterState::Missing => {
            let message = format!(
                "no MySQLCluster {} in namespace {namespace}",
                database.spec.cluster_name
            );
            write_status(ctx, database, ReadyReason::ClusterNotFound, message, None).await?;
            return Ok(Action::requeue(WAIT));
        }
        ClusterState::NotAvailable(message) => {
            write_status(
                ctx,
                database,
                ReadyReason::ClusterNotAvailable,
                message,
                None,
            )
            .await?;
            return Ok(Action::requeue(WAIT));
        }
        ClusterState::Available(cluster) => cluster,
    };
    let admin = ctx.primary(&cluster, (&namespace, &name)).await?;
    let outcome = converge(ctx, &admin, database, &db).await;
    let (change, ownership) = match outcome {
        Ok(converged) => converged,
        Err(Failure::Refused(reason, message)) => {
            write_status(ctx, database, reason, message, None).await?;
            return Ok(Action::requeue(RESYNC));
        }
        Err(Failure::Api(e)) => return Err(e),
        Err(Failure::Port(source)) => {
            return Err(AccountsError::Primary {
                namespace,
                name,
                cluster: database.spec.cluster_name.clone(),
                source,
            });
        }
    };
    if let Some(change) = change {
        let status = database.status.clone().unwrap_or_default();
        let drift = change == DatabaseChange::Alter
            && status.observed_generation == database.metadata.generation
            && was_ready(&status.conditions);
        let (type_, reason) = if drift {
            (EventType::Warning, "DriftRepaired")
        } else {
            (EventType::Normal, "Applied")
        };
        let what = match change {
            DatabaseChange::Create => "created",
            DatabaseChange::Alter => "altered to the declared character set and collation",
            DatabaseChange::Drop => "dropped",
        };
        let note = format!(
            "database {} on MySQLCluster {} {what}",
            db.name, database.spec.cluster_name
        );
        ctx.publish(&database.object_ref(&()), type_, reason, note)
            .await;
    }
    let message = format!(
        "database {} is on the primary of MySQLCluster {} as declared",
        db.name, database.spec.cluster_name
    );
    write_status(
        ctx,
        database,
        ReadyReason::Applied,
        message,
        Some(ownership),
    )
    .await?;
    Ok(Action::requeue(RESYNC))
}

/// Reads the database, claims it ([`claim`]: an existing database not this object's is left
/// alone unless `spec.adopt`; a new claim is recorded in the status before any change), plans
/// and applies; the change made and what the object holds.
async fn converge(
    ctx: &Context,
    admin: &MysqlInstance,
    database: &MySQLDatabase,
    db: &DatabaseSpec,
) -> Result<(Option<DatabaseChange>, Ownership), Failure> {
    let refused = |e: PortError| match e {
        PortError::Sql { code, message, .. } => {
            let reason = if UNKNOWN_CHARSET_CODES.contains(&code) {
                ReadyReason::UnknownCharacterSet
            } else {
                ReadyReason::ApplyFailed
            };
            let message = format!(
                "the server refused database {}: error {code}: {message}",
                db.name
            );
            Failure::Refused(reason, message)
        }
        other => Failure::Port(other),
    };
    let observed = admin.observe_database(&db.name).await.map_err(refused)?;
    let (owned, applied_before) = held(database);
    let ownership = match claim(
        observed.is_some(),
        owned,
        database.spec.adopt,
        applied_before,
    ) {
        Claim::Keep(o) => o,
        Claim::Record(o) => {
            record_ownership(&ctx.client, database, o)
                .await
                .map_err(Failure::Api)?;
            o
        }
        Claim::Refuse => {
            return Err(Failure::Refused(
                ReadyReason::Exists,
                format!(
                    "database {} already exists on MySQLCluster {} and this MySQLDatabase did \
                     not create it: nothing was changed; set spec.adopt: true to take it over \
                     (its character set and collation are altered as declared, and \
                     deletionPolicy: Delete drops it with its tables), or declare another \
                     database",
                    db.name, database.spec.cluster_name
                ),
            ));
        }
    };
    let change = plan_database(db, observed.as_ref());
    if let Some(change) = &change {
        admin.apply_database(db, change).await.map_err(refused)?;
    }
    Ok((change, ownership))
}

/// What the object holds by its status: its recorded ownership, and whether an earlier
/// release applied it (`Ready` once, no record: those releases took over whatever they
/// found).
fn held(database: &MySQLDatabase) -> (Option<Ownership>, bool) {
    let status = database.status.clone().unwrap_or_default();
    (status.ownership, was_ready(&status.conditions))
}

/// Drops the database when the policy says so and the object holds it (created or took it
/// over). An object that breaks the admission rules drops nothing (it may name a system
/// schema).
async fn cleanup(ctx: &Context, database: &MySQLDatabase) -> Result<Action, AccountsError> {
    let (owned, applied_before) = held(database);
    let owned = owned.or(applied_before.then_some(Ownership::Adopted));
    if database.spec.deletion_policy == DeletionPolicy::Retain
        || conflicting(ctx, database).is_some()
        || !validate_database(database).is_empty()
        || !may_drop(owned)
    {
        return Ok(Action::await_change());
    }
    let namespace = database.namespace().unwrap_or_default();
    let name = database.name_any();
    let cluster = match ctx.cluster(&namespace, &database.spec.cluster_name).await? {
        ClusterState::Missing => return Ok(Action::await_change()),
        ClusterState::NotAvailable(message) => {
            return Err(AccountsError::Finalizer(format!(
                "{namespace}/{name}: deletionPolicy Delete waits for a writable primary: {message}"
            )));
        }
        ClusterState::Available(cluster) => cluster,
    };
    let admin = ctx.primary(&cluster, (&namespace, &name)).await?;
    let db = database_spec(database);
    let dropped = admin.apply_database(&db, &DatabaseChange::Drop).await;
    dropped.map_err(|source| AccountsError::Primary {
        namespace,
        name,
        cluster: database.spec.cluster_name.clone(),
        source,
    })?;
    ctx.publish(
        &database.object_ref(&()),
        EventType::Normal,
        "Dropped",
        format!(
            "database {} dropped from MySQLCluster {} with its tables (deletionPolicy: Delete)",
            db.name, database.spec.cluster_name
        ),
    )
    .await;
    Ok(Action::await_change())
}

/// Writes the status when it changes, keeping the recorded ownership unless given.
async fn write_status(
    ctx: &Context,
    database: &MySQLDatabase,
    reason: ReadyReason,
    message: String,
    ownership: Option<Ownership>,
) -> Result<(), AccountsError> {
    let previous = database.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let next = MySQLDatabaseStatus {
        conditions: vec![ready_condition(
            &previous.conditions,
            reason,
            message,
            database.metadata.generation,
            now,
        )],
        observed_generation: database.metadata.generation,
        ownership: ownership.or(previous.ownership),
    };
    if next == previous {
        return Ok(());
    }
    let namespace = database.namespace().unwrap_or_default();
    let name = database.name_any();
    let api: Api<MySQLDatabase> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": next})),
    )
    .await
    .map_err(|e| api_error("writing the status of MySQLDatabase", &namespace, &name, e))?;
    Ok(())
}
