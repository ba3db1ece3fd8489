//! Events the operator's controllers record beside the reconcile's (the partition controller's
//! `PartitionUpdate`/`RolloutStalled`, the accounts controllers' `Applied`/`DriftRepaired`/
//! `Dropped`): one reporter name, and a failure logged rather than failing the step that
//! did the work.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Records an event of `reason` about `reference`; a failure is logged, never returned.
pub async fn publish(
    client: &kube::Client,
    reference: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let reporter = Reporter {
        controller: "moco-controller".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: reason.to_owned(),
        secondary: None,
    };
    if let Err(e) = Recorder::new(client.clone(), reporter)
        .publish(&event, reference)
        .await
    {
        tracing::warn!(reason, error = %e, "cannot record an event");
    }
}
