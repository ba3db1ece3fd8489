//! `kubectl moco status`: one look at a MySQLCluster. Its state and counters from the status
//! the operator records, each instance's Pod (phase, role label, readiness, errant), the
//! replication lag where the instance answers over SQL, and the last events about it.
//!
//! The report is built by a pure function of what was read ([`report`]) and printed as text
//! ([`render_text`]) or JSON.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use moco_api::annotations::is_true;
use moco_api::labels::{
    ANNOTATION_CLUSTERING_STOPPED, ANNOTATION_RECONCILIATION_STOPPED, LABEL_ROLE,
};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::facts::ClusterFacts;
use moco_core::status::condition_type;
use serde::Serialize;

use crate::cli::{OutputFormat, StatusArgs};
use crate::context::Context;
use crate::error::Error;
use crate::gather::{self, Addresses};
use crate::objects;

/// How many events `status` shows.
pub const EVENT_LIMIT: usize = 10;
/// The most time `status` spends reading the instances over SQL.
const SQL_LIMIT: Duration = Duration::from_secs(20);
const CLUSTER_KIND: &str = "MySQLCluster";

/// Everything `status` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// The cluster's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The state the operator last recorded: the reason of the `Healthy` condition (MOCO's
    /// state names), `Unknown` before the first clustering round.
    pub state: String,
    /// Status of the `Available` condition (`Unknown` when absent).
    pub available: String,
    /// Status of the `Healthy` condition (`Unknown` when absent).
    pub healthy: String,
    /// `spec.offline`.
    pub offline: bool,
    /// The clustering-stopped annotation is set.
    pub clustering_stopped: bool,
    /// The reconciliation-stopped annotation is set.
    pub reconciliation_stopped: bool,
    /// `spec.replicas`.
    pub replicas: u32,
    /// `status.currentPrimaryIndex`.
    pub current_primary_index: i32,
    /// The primary's Pod name.
    pub primary_pod: String,
    /// `status.syncedReplicas`.
    pub synced_replicas: i32,
    /// `status.errantReplicas`.
    pub errant_replicas: i32,
    /// `status.errantReplicaList`.
    pub errant_replica_list: Vec<i32>,
    /// `status.cloned`.
    pub cloned: bool,
    /// `status.reconcileInfo`, once the cluster was reconciled.
    pub reconcile_info: Option<ReconcileInfoView>,
    /// Every condition.
    pub conditions: Vec<ConditionView>,
    /// One entry per instance `0..replicas`.
    pub instances: Vec<InstanceView>,
    /// Why the instances' SQL could not be read at all, if so.
    pub sql_error: Option<String>,
    /// The last [`EVENT_LIMIT`] events about the cluster, oldest first.
    pub events: Vec<EventView>,
}

/// `status.reconcileInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileInfoView {
    /// The generation last reconciled.
    pub generation: i64,
    /// The reconciler version that did it.
    pub reconcile_version: i32,
}

/// A condition of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// RFC 3339, to the second.
    pub last_transition_time: String,
}

/// Whether an instance's SQL was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SqlState {
    /// It answered.
    Reachable,
    /// It did not answer (or has no Pod).
    Unreachable,
    /// Not asked (`--no-sql`, or reading failed before asking).
    Skipped,
}

impl SqlState {
    fn as_str(self) -> &'static str {
        match self {
            SqlState::Reachable => "reachable",
            SqlState::Unreachable => "unreachable",
            SqlState::Skipped => "skipped",
        }
    }
}

/// One instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceView {
    /// Ordinal.
    pub index: u32,
    /// Pod name.
    pub pod: String,
    /// Pod phase, `Terminating` while deleted, `Missing` without a Pod.
    pub phase: String,
    /// The role label (`primary`, `replica`), if set.
    pub role: Option<String>,
    /// The Pod's `Ready` condition is `True`.
    pub ready: bool,
    /// Listed in `status.errantReplicaList`.
    pub errant: bool,
    /// Whether its SQL was read.
    pub sql: SqlState,
    /// `Seconds_Behind_Source` of a replica that answered; `None` otherwise.
    pub lag_seconds: Option<u64>,
}

/// An event about the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// When it last happened, RFC 3339 to the second.
    pub time: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Reason (`SwitchOver`, `FailOver`, ...).
    pub reason: String,
    /// How many times it happened.
    pub count: i32,
    /// The note.
    pub message: String,
}

/// What was learnt over SQL.
#[derive(Debug, Clone)]
pub enum Sql {
    /// Not asked.
    Skipped,
    /// Gathering failed as a whole.
    Failed(String),
    /// The gathered facts.
    Facts(Box<ClusterFacts>),
}

fn seconds(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

fn event_time(e: &KubeEvent) -> Option<Timestamp> {
    e.series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The last [`EVENT_LIMIT`] of `events` that regard `cluster`, oldest first.
pub fn cluster_events(cluster: &MySQLCluster, events: &[KubeEvent]) -> Vec<EventView> {
    let name = cluster.metadata.name.as_deref();
    let uid = cluster.metadata.uid.as_deref();
    let mut about: Vec<&KubeEvent> = events
        .iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some(CLUSTER_KIND)
                    && r.name.as_deref() == name
                    && (r.uid.is_none() || uid.is_none() || r.uid.as_deref() == uid)
            })
        })
        .collect();
    about.sort_by_key(|e| event_time(e));
    let skip = about.len().saturating_sub(EVENT_LIMIT);
    about
        .into_iter()
        .skip(skip)
        .map(|e| EventView {
            time: event_time(e).map(seconds),
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            count: e
                .series
                .as_ref()
                .map(|s| s.count)
                .or(e.deprecated_count)
                .unwrap_or(1),
            message: e.note.clone().unwrap_or_default(),
        })
        .collect()
}

/// The report of `cluster` in `namespace` from its Pods by ordinal, what SQL told, and its
/// events (already filtered by [`cluster_events`]).
pub fn report(
    namespace: &str,
    cluster: &MySQLCluster,
    pods: &BTreeMap<u32, Pod>,
    sql: &Sql,
    events: Vec<EventView>,
) -> StatusReport {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let status = cluster.status.clone().unwrap_or_default();
    let annotated = |key: &str| is_true(&cluster.metadata, key);
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    let condition_status =
        |type_: &str| condition(type_).map_or_else(|| "Unknown".to_owned(), |c| c.status.clone());
    let state = condition(condition_type::HEALTHY)
        .map(|c| c.reason.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "Unknown".to_owned());
    let replicas = objects::replicas(cluster);
    let errant: Vec<i32> = status.errant_replica_list.clone();
    let instances = (0..replicas)
        .map(|index| {
            let pod = pods.get(&index);
            let phase = match pod {
                None => "Missing".to_owned(),
                Some(p) if p.metadata.deletion_timestamp.is_some() => "Terminating".to_owned(),
                Some(p) => objects::pod_phase(p).to_owned(),
            };
            let role = pod
                .and_then(|p| p.metadata.labels.as_ref())
                .and_then(|l| l.get(LABEL_ROLE))
                .cloned();
            let ready = pod.is_some_and(|p| objects::pod_condition(p, "Ready") == Some("True"));
            let (sql_state, lag_seconds) = match sql {
                Sql::Skipped | Sql::Failed(_) => (SqlState::Skipped, None),
                Sql::Facts(facts) => {
                    match facts
                        .instances
                        .iter()
                        .find(|i| i.index == index)
                        .and_then(|i| i.mysqld.as_ref())
                    {
                        Some(mysqld) => (
                            SqlState::Reachable,
                            mysqld
                                .replica_status
                                .as_ref()
                                .and_then(|r| r.seconds_behind_source),
                        ),
                        None => (SqlState::Unreachable, None),
                    }
                }
            };
            InstanceView {
                index,
                pod: objects::pod_name(&name, index),
                phase,
                role,
                ready,
                errant: errant.iter().any(|e| i64::from(*e) == i64::from(index)),
                sql: sql_state,
                lag_seconds,
            }
        })
        .collect();
    let info = &status.reconcile_info;
    StatusReport {
        namespace: namespace.to_owned(),
        state,
        available: condition_status(condition_type::AVAILABLE),
        healthy: condition_status(condition_type::HEALTHY),
        offline: cluster.spec.offline,
        clustering_stopped: annotated(ANNOTATION_CLUSTERING_STOPPED),
        reconciliation_stopped: annotated(ANNOTATION_RECONCILIATION_STOPPED),
        replicas,
        current_primary_index: status.current_primary_index,
        primary_pod: format!("moco-{name}-{}", status.current_primary_index),
        synced_replicas: status.synced_replicas,
        errant_replicas: status.errant_replicas,
        errant_replica_list: errant,
        cloned: status.cloned,
        reconcile_info: (info.generation != 0 || info.reconcile_version != 0).then_some(
            ReconcileInfoView {
                generation: info.generation,
                reconcile_version: info.reconcile_version,
            },
        ),
        conditions: status
            .conditions
            .iter()
            .map(|c| ConditionView {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: seconds(c.last_transition_time.0),
            })
            .collect(),
        instances,
        sql_error: match sql {
            Sql::Failed(e) => Some(e.clone()),
            Sql::Skipped | Sql::Facts(_) => None,
        },
        events,
        name,
    }
}

/// Rows as columns separated by two spaces, each line indented by two (the last column is
/// not padded).
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::from(" ");
        for (c, cell) in row.iter().enumerate() {
            line.push(' ');
            line.push_str(cell);
            if c + 1 < row.len() {
                let pad = widths[c].saturating_sub(cell.chars().count()) + 1;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn cells(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The report as text.
pub fn render_text(r: &StatusReport) -> String {
    let mut out = String::new();
    let mut field = |label: &str, value: String| {
        out.push_str(&format!("{:<14}{value}\n", format!("{label}:")));
    };
    field("Name", r.name.clone());
    field("Namespace", r.namespace.clone());
    field(
        "State",
        format!(
            "{} (Available: {}, Healthy: {})",
            r.state, r.available, r.healthy
        ),
    );
    let mut stopped = Vec::new();
    if r.clustering_stopped {
        stopped.push("clustering");
    }
    if r.reconciliation_stopped {
        stopped.push("reconciliation");
    }
    if !stopped.is_empty() {
        field("Stopped", stopped.join(", "));
    }
    if r.offline {
        field("Offline", "true".to_owned());
    }
    field(
        "Primary",
        format!("{} (index {})", r.primary_pod, r.current_primary_index),
    );
    field(
        "Replicas",
        format!("{} (synced {})", r.replicas, r.synced_replicas),
    );
    let list: Vec<String> = r.errant_replica_list.iter().map(i32::to_string).collect();
    field(
        "Errant",
        format!("{} [{}]", r.errant_replicas, list.join(", ")),
    );
    field("Cloned", r.cloned.to_string());
    if let Some(info) = &r.reconcile_info {
        field(
            "Reconciled",
            format!(
                "generation {} by reconciler version {}",
                info.generation, info.reconcile_version
            ),
        );
    }
    if let Some(e) = &r.sql_error {
        field("SQL", format!("not read: {e}"));
    }

    out.push_str("\nConditions:\n");
    if r.conditions.is_empty() {
        out.push_str("  <none>\n");
    } else {
        let mut rows = vec![cells(&[
            "TYPE",
            "STATUS",
            "REASON",
            "LAST TRANSITION",
            "MESSAGE",
        ])];
        rows.extend(r.conditions.iter().map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.last_transition_time.clone(),
                c.message.clone(),
            ]
        }));
        out.push_str(&table(&rows));
    }

    out.push_str("\nInstances:\n");
    let mut rows = vec![cells(&[
        "INDEX", "POD", "PHASE", "ROLE", "READY", "ERRANT", "SQL", "LAG",
    ])];
    rows.extend(r.instances.iter().map(|i| {
        vec![
            i.index.to_string(),
            i.pod.clone(),
            i.phase.clone(),
            i.role.clone().unwrap_or_else(|| "-".to_owned()),
            i.ready.to_string(),
            i.errant.to_string(),
            i.sql.as_str().to_owned(),
            i.lag_seconds
                .map_or_else(|| "-".to_owned(), |s| format!("{s}s")),
        ]
    }));
    out.push_str(&table(&rows));

    out.push_str(&format!("\nEvents (last {EVENT_LIMIT}):\n"));
    if r.events.is_empty() {
        out.push_str("  <none>\n");
    } else {
        let mut rows = vec![cells(&["TIME", "TYPE", "REASON", "COUNT", "MESSAGE"])];
        rows.extend(r.events.iter().map(|e| {
            vec![
                e.time.clone().unwrap_or_else(|| "-".to_owned()),
                e.type_.clone(),
                e.reason.clone(),
                e.count.to_string(),
                e.message.clone(),
            ]
        }));
        out.push_str(&table(&rows));
    }
    out
}

/// Runs `status`.
pub async fn run(ctx: &Context, args: &StatusArgs, out: &mut dyn Write) -> Result<(), Error> {
    let addresses = Addresses::from_flags(&args.sql.addresses)?;
    let cluster = objects::cluster(ctx, &args.cluster).await?;
    let pods = objects::pods(ctx, &args.cluster).await?;
    let sql = if args.no_sql {
        Sql::Skipped
    } else {
        match tokio::time::timeout(SQL_LIMIT, gather::gather(ctx, &cluster, addresses)).await {
            Ok(Ok(g)) => Sql::Facts(Box::new(g.facts)),
            // A bad --address is the user's mistake, not a status to show.
            Ok(Err(e @ (Error::AddressOutOfRange { .. } | Error::DuplicateAddress { .. }))) => {
                return Err(e);
            }
            Ok(Err(e)) => Sql::Failed(e.to_string()),
            Err(_) => Sql::Failed(format!("no answer within {} s", SQL_LIMIT.as_secs())),
        }
    };
    let api: Api<KubeEvent> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let events = api
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Api {
            action: "list",
            kind: "Events",
            namespace: ctx.namespace.clone(),
            name: "(events.k8s.io/v1)".to_owned(),
            source: Box::new(source),
        })?;
    let events = cluster_events(&cluster, &events.items);
    let report = report(&ctx.namespace, &cluster, &pods, &sql, events);
    match args.output {
        OutputFormat::Text => out.write_all(render_text(&report).as_bytes())?,
        OutputFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
    }
    Ok(())
}
