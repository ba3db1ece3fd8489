//! `kubectl moco plan`: the operator's next decision for a cluster, computed here and printed,
//! never carried out. The facts come from [`crate::gather`] (the operator's platform and
//! manager, read-only), the decision from `moco_core::decide`, as `moco plan --facts` prints it.

use std::io::Write;

use moco_core::facts::ClusterFacts;
use moco_core::{Decision, decide};
use serde::Serialize;

use crate::cli::PlanArgs;
use crate::context::Context;
use crate::error::Error;
use crate::gather::{self, Addresses, Gathered};
use crate::objects;

/// What `plan --show-facts` prints.
#[derive(Debug, Serialize)]
pub struct FactsAndDecision<'a> {
    /// The gathered facts.
    pub facts: &'a ClusterFacts,
    /// The decision on them.
    pub decision: &'a Decision,
}

/// Notes for stderr: instances that did not answer over SQL, and events the operator would
/// record while gathering.
pub fn notes(gathered: &Gathered) -> Vec<String> {
    let mut notes = Vec::new();
    let silent: Vec<String> = gathered
        .facts
        .instances
        .iter()
        .filter(|i| i.pod.exists && i.mysqld.is_none())
        .map(|i| i.index.to_string())
        .collect();
    if !silent.is_empty() {
        notes.push(format!(
            "instance(s) {} did not answer over SQL and count as down in this decision; \
             Pod addresses are reachable only inside the cluster network (use --address \
             INDEX=HOST:PORT with kubectl port-forward from outside)",
            silent.join(", ")
        ));
    }
    for event in &gathered.events {
        notes.push(format!(
            "the operator would record a {:?} event {}: {}",
            event.type_, event.reason, event.message
        ));
    }
    notes
}

/// Runs `plan`: the decision (or facts and decision) on `out`, notes on `err`.
pub async fn run(
    ctx: &Context,
    args: &PlanArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Error> {
    let addresses = Addresses::from_flags(&args.sql.addresses)?;
    let cluster = objects::cluster(ctx, &args.cluster).await?;
    let gathered = gather::gather(ctx, &cluster, addresses).await?;
    let decision = decide(&gathered.facts).map_err(|source| Error::Facts {
        namespace: ctx.namespace.clone(),
        cluster: args.cluster.clone(),
        source,
    })?;
    for note in notes(&gathered) {
        // Notes are advice; a closed stderr must not fail the command.
        let _ = writeln!(err, "kubectl-moco: note: {note}");
    }
    let text = if args.show_facts {
        let both = FactsAndDecision {
            facts: &gathered.facts,
            decision: &decision,
        };
        to_json(&both, args.compact)?
    } else {
        to_json(&decision, args.compact)?
    };
    writeln!(out, "{text}")?;
    Ok(())
}

fn to_json<T: Serialize>(value: &T, compact: bool) -> Result<String, serde_json::Error> {
    if compact {
        serde_json::to_string(value)
    } else {
        serde_json::to_string_pretty(value)
    }
}
