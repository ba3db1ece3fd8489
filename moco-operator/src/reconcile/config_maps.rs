//! Step 3 of a round: the my.cnf ConfigMap and the slow-log one (or none), then the history
//! beyond the limit (`--mysql-configmap-history-limit`, [`super::history`]).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams};
use moco_api::cluster::ClusterId;
use moco_kube::api::{label_selector, retry};

use super::apply::Writer;
use super::{ReconcileError, Step, history, name_of};

/// Applies the ConfigMaps, then deletes the old ones beyond `history_limit` (every slow-log
/// ConfigMap when the sidecar is off).
pub(super) async fn apply(
    w: &Writer<'_>,
    id: &ClusterId,
    history_limit: i32,
    mycnf_config_map: &ConfigMap,
    slow_log_config_map: Option<&ConfigMap>,
) -> Result<(), ReconcileError> {
    w.apply(Step::ConfigMaps, mycnf_config_map).await?;
    w.apply_each(Step::ConfigMaps, slow_log_config_map).await?;
    let api = w.api::<ConfigMap>();
    let params = ListParams::default().labels(&label_selector(&id.labels()));
    let listed = retry(|| api.list(&params))
        .await
        .map_err(ReconcileError::api(Step::ConfigMaps))?;
    let listed: Vec<history::Listed> = listed
        .items
        .iter()
        .map(|c| history::Listed {
            name: name_of(c),
            created: c
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        })
        .collect();
    let mut doomed = history::to_delete(
        &listed,
        &id.mycnf_config_map_prefix(),
        &name_of(mycnf_config_map),
        history_limit,
    );
    match slow_log_config_map.map(name_of) {
        Some(current) => doomed.extend(history::to_delete(
            &listed,
            &id.slow_log_config_map_prefix(),
            &current,
            history_limit,
        )),
        // The sidecar is off: none of its ConfigMaps is needed.
        None => doomed.extend(
            listed
                .iter()
                .filter(|c| c.name.starts_with(&id.slow_log_config_map_prefix()))
                .map(|c| c.name.clone()),
        ),
    }
    for name in doomed {
        w.delete::<ConfigMap>(Step::ConfigMaps, &name, true, &DeleteParams::default())
            .await?;
    }
    Ok(())
}
