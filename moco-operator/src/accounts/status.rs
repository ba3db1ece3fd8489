//! The `Ready` condition of both kinds, built purely from the reason and the previous one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use moco_api::accounts::validate::{FieldError, summary};
use moco_api::accounts::{CONDITION_READY, ReadyReason};
use moco_core::accounts::Ownership;

use super::{AccountsError, api_error};

/// Records in `object`'s status that it holds what it names (`ownership`), before the server
/// is changed (`moco_core::accounts::claim`).
pub(super) async fn record_ownership<K>(
    client: &kube::Client,
    object: &K,
    ownership: Ownership,
) -> Result<(), AccountsError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    use kube::ResourceExt as _;
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let api: kube::Api<K> = kube::Api::namespaced(client.clone(), &namespace);
    api.patch_status(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"status": {"ownership": ownership}})),
    )
    .await
    .map_err(|e| api_error("recording the ownership of", &namespace, &name, e))?;
    Ok(())
}

/// The `Invalid` message of an object that breaks the admission rules, or `None` when it
/// breaks none.
pub(super) fn invalid_message(errors: &[FieldError]) -> Option<String> {
    (!errors.is_empty()).then(|| {
        format!(
            "not applied: the object breaks the admission rules (admitted while the webhook \
             was away, or by an older version): {}",
            summary(errors)
        )
    })
}

/// The `Ready` condition for `reason` and `message`, keeping the previous one's transition
/// time when the status does not change (as `meta.SetStatusCondition` does).
pub fn ready_condition(
    previous: &[Condition],
    reason: ReadyReason,
    message: String,
    generation: Option<i64>,
    now: Time,
) -> Condition {
    let status = if reason.ready() { "True" } else { "False" };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == CONDITION_READY && c.status == status)
        .map_or(now, |c| c.last_transition_time.clone());
    Condition {
        type_: CONDITION_READY.to_owned(),
        status: status.to_owned(),
        reason: reason.as_str().to_owned(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Whether `conditions` say the object was Ready.
pub(super) fn was_ready(conditions: &[Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == CONDITION_READY && c.status == "True")
}

#[cfg(test)]
mod tests {
    use moco_api::accounts::Problem;

    use super::*;

    #[test]
    fn an_invalid_object_is_named_by_its_fields() {
        assert_eq!(invalid_message(&[]), None);
        let errors = [FieldError {
            field: "spec.name".into(),
            problem: Problem::MocoAccount("moco-admin".into()),
        }];
        let message = invalid_message(&errors).unwrap_or_default();
        assert!(message.starts_with("not applied: the object breaks the admission rules"));
        assert!(message.contains("spec.name: \"moco-admin\" is one of MOCO's own accounts"));
    }

    fn at(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let first = ready_condition(&[], ReadyReason::SecretMissing, "m".into(), Some(1), at(10));
        assert_eq!(
            (first.status.as_str(), first.reason.as_str()),
            ("False", "SecretMissing")
        );
        let still = ready_condition(
            std::slice::from_ref(&first),
            ReadyReason::ClusterNotAvailable,
            "n".into(),
            Some(1),
            at(20),
        );
        assert_eq!(still.last_transition_time, at(10), "still False");
        let ready = ready_condition(
            &[still],
            ReadyReason::Applied,
            String::new(),
            Some(2),
            at(30),
        );
        assert_eq!(
            (ready.status.as_str(), ready.last_transition_time.clone()),
            ("True", at(30))
        );
        assert!(was_ready(&[ready]));
        assert!(!was_ready(&[first]));
    }
}
