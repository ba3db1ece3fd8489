//! `kubectl moco stop|start clustering|reconciliation`: add or remove the MySQLCluster
//! annotations that pause the operator's clustering manager
//! (`moco.cybozu.com/clustering-stopped: "true"`) or its reconciliation
//! (`moco.cybozu.com/reconciliation-stopped: "true"`). Only that annotation is written (a merge
//! patch of `metadata.annotations`); the messages are MOCO's.

use std::io::Write;

use kube::api::{Api, Patch, PatchParams};
use moco_api::annotations::is_true;
use moco_api::labels::{ANNOTATION_CLUSTERING_STOPPED, ANNOTATION_RECONCILIATION_STOPPED};
use moco_api::mysqlcluster::MySQLCluster;
use serde_json::json;

use crate::cli::Switch;
use crate::context::Context;
use crate::error::Error;
use crate::objects;

/// What is stopped or started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The clustering manager.
    Clustering,
    /// The reconciliation of the cluster's objects.
    Reconciliation,
}

impl Target {
    /// The annotation that stops it.
    pub fn annotation(self) -> &'static str {
        match self {
            Target::Clustering => ANNOTATION_CLUSTERING_STOPPED,
            Target::Reconciliation => ANNOTATION_RECONCILIATION_STOPPED,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Target::Clustering => "clustering",
            Target::Reconciliation => "reconciliation",
        }
    }
}

/// The target and cluster of a `stop`/`start` subcommand.
pub fn target(switch: &Switch) -> (Target, &str) {
    match switch {
        Switch::Clustering(c) => (Target::Clustering, c.cluster.as_str()),
        Switch::Reconciliation(c) => (Target::Reconciliation, c.cluster.as_str()),
    }
}

/// Runs `stop` (`stop = true`) or `start`.
pub async fn run(
    ctx: &Context,
    switch: &Switch,
    stop: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let (target, name) = target(switch);
    let ns = &ctx.namespace;
    let cluster = objects::cluster(ctx, name).await?;
    let key = target.annotation();
    let stopped = is_true(&cluster.metadata, key);
    if stopped == stop {
        let already = if stop { "stopped" } else { "running" };
        writeln!(out, "The {} is already {already}.", target.word())?;
        return Ok(());
    }
    let value = stop.then_some("true");
    let patch = Patch::Merge(json!({"metadata": {"annotations": {key: value}}}));
    let api: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), ns);
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .map_err(|e| Error::api("patch", "MySQLCluster", ns, name, "", e))?;
    let verb = if stop { "stopped" } else { "started" };
    writeln!(
        out,
        "{verb} {} of MySQLCluster \"{ns}/{name}\"",
        target.word()
    )?;
    Ok(())
}
