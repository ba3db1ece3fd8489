//! `kubectl moco credential rotate`: new passwords for MOCO's eight accounts.
//!
//! The command writes one annotation, `moco-rs/rotate-passwords`, with the time as its value
//! (a rotation requested while another is in progress starts when it ends), and follows the
//! operator: the `PasswordRotation` events about the cluster are printed as they come, and
//! the rotation is over when the operator withdraws the annotation. What the operator does
//! is in `docs/accounts.md`.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, ListParams, Patch, PatchParams};
use moco_api::annotations::{ROTATE_PASSWORDS_ANNOTATION, annotation};
use moco_api::mysqlcluster::MySQLCluster;
use serde_json::json;

use crate::cli::RotateArgs;
use crate::context::Context;
use crate::error::Error;
use crate::objects;
use crate::status::cluster_events;

/// How often the cluster is looked at.
const POLL: Duration = Duration::from_millis(500);

/// The reasons of the operator's rotation events.
const REASONS: [&str; 2] = ["PasswordRotation", "PasswordRotationFailed"];

/// Runs `credential rotate`.
pub async fn run(ctx: &Context, args: &RotateArgs, out: &mut dyn Write) -> Result<(), Error> {
    let ns = &ctx.namespace;
    let name = &args.cluster;
    let cluster = objects::cluster(ctx, name).await?;
    let api: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), ns);
    let request = match annotation(&cluster.metadata, ROTATE_PASSWORDS_ANNOTATION) {
        Some(pending) => {
            writeln!(
                out,
                "a rotation requested at {pending} is in progress: following it"
            )?;
            pending.to_owned()
        }
        None => {
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let patch = Patch::Merge(
                json!({"metadata": {"annotations": {ROTATE_PASSWORDS_ANNOTATION: now}}}),
            );
            api.patch(name, &PatchParams::default(), &patch)
                .await
                .map_err(|e| Error::api("patch", "MySQLCluster", ns, name, "", e))?;
            writeln!(out, "password rotation requested at {now}")?;
            now
        }
    };
    let started = Instant::now();
    let deadline = started + args.timeout;
    let mut printed: BTreeSet<(String, String)> = seen_events(ctx, &cluster).await?;
    loop {
        let cluster = objects::cluster(ctx, name).await?;
        for e in seen_events(ctx, &cluster)
            .await?
            .difference(&printed.clone())
        {
            writeln!(out, "{}: {}", e.0, e.1)?;
            printed.insert(e.clone());
        }
        if annotation(&cluster.metadata, ROTATE_PASSWORDS_ANNOTATION) != Some(request.as_str()) {
            writeln!(
                out,
                "password rotation finished in {} ms",
                started.elapsed().as_millis()
            )?;
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::RotationUnfinished {
                namespace: ns.clone(),
                cluster: name.clone(),
                seconds: args.timeout.as_secs(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The cluster's rotation events, as (reason, message).
async fn seen_events(
    ctx: &Context,
    cluster: &MySQLCluster,
) -> Result<BTreeSet<(String, String)>, Error> {
    let api: Api<KubeEvent> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let mut out = BTreeSet::new();
    for reason in REASONS {
        let params = ListParams::default().fields(&format!("reason={reason}"));
        let events = api.list(&params).await.map_err(|e| {
            Error::api(
                "list",
                "Events",
                &ctx.namespace,
                &format!("reason={reason}"),
                "",
                e,
            )
        })?;
        out.extend(
            cluster_events(cluster, &events.items)
                .into_iter()
                .map(|e| (e.reason, e.message)),
        );
    }
    Ok(out)
}
