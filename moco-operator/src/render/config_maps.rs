//! The my.cnf ConfigMap and the slow-log sidecar's configuration.
//!
//! Both are named by a hash of their content, so a change makes a new name, the Pod template
//! changes with it, and that is what rolls the Pods; reconcile prunes the old ones.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container};
use moco_core::facts::Flavor;
use moco_core::resources::{
    MycnfInput, MycnfPaths, MysqldMemory, Quantity, fnv1a_32, generate_mycnf, mycnf_config_map_name,
};

use super::meta::ClusterId;
use super::template::expand_path;
use super::{ClusterInputs, RenderError};

/// The key of my.cnf in its ConfigMap.
pub const MYCNF_KEY: &str = "my.cnf";
/// The key of the fluent-bit configuration in the slow-log ConfigMap.
pub const FLUENT_BIT_KEY: &str = "fluent-bit.conf";
/// Where the slow-log sidecar reads the slow query log.
pub const SLOW_LOG_PATH: &str = "/var/log/mysql/mysql.slow";

/// The configuration of the slow-log sidecar when the cluster gives none: tail the slow log
/// from its start and print each line to the container's standard output as it is.
pub const DEFAULT_SLOW_LOG_TEMPLATE: &str = "\
[SERVICE]
    Log_Level error
[INPUT]
    Name tail
    Path {{ .Path }}
    Read_from_Head true
[OUTPUT]
    Name file
    Match *
    Path /dev
    File stdout
    Format template
    Template {log}
";

/// The name of a rendered ConfigMap (always set by this module).
pub fn name_of(config_map: &ConfigMap) -> String {
    config_map.metadata.name.clone().unwrap_or_default()
}

/// The `mysqld` container of the Pod template and its index.
pub(crate) fn mysqld_container(
    cluster: &moco_api::mysqlcluster::MySQLCluster,
) -> Result<(usize, &Container), RenderError> {
    cluster
        .spec
        .pod_template
        .spec
        .containers
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == moco_core::validate::MYSQLD_CONTAINER_NAME)
        .ok_or_else(|| {
            RenderError::invalid(
                "spec.podTemplate.spec.containers",
                "there is no container named \"mysqld\"",
            )
        })
}

/// The memory the buffer pool is sized from: the `mysqld` container's request, else limit.
fn mysqld_memory(inputs: &ClusterInputs<'_>) -> Result<MysqldMemory, RenderError> {
    let (index, container) = mysqld_container(inputs.cluster)?;
    let resources = container.resources.as_ref();
    let read = |kind: &str,
                map: Option<
        &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        map.and_then(|m| m.get("memory"))
            .map(|q| {
                Quantity::parse(&q.0).map_err(|e| {
                    RenderError::invalid(
                        format!(
                            "spec.podTemplate.spec.containers[{index}].resources.{kind}.memory"
                        ),
                        e.to_string(),
                    )
                })
            })
            .transpose()
    };
    Ok(MysqldMemory {
        requests: read("requests", resources.and_then(|r| r.requests.as_ref()))?,
        limits: read("limits", resources.and_then(|r| r.limits.as_ref()))?,
    })
}

/// `moco-<name>.<hash>` with key `my.cnf`; with `tls`, the server options of
/// [`super::tls::mycnf_options`] replace the user's of the same names.
pub fn mycnf(
    id: &ClusterId,
    inputs: &ClusterInputs<'_>,
    flavor: Flavor,
    tls: bool,
) -> Result<ConfigMap, RenderError> {
    let mut user_config = inputs.user_config.clone();
    if tls {
        user_config.extend(super::tls::mycnf_options());
    }
    let text = generate_mycnf(&MycnfInput {
        flavor,
        user_config,
        memory: mysqld_memory(inputs)?,
        paths: MycnfPaths::default(),
    })
    .map_err(|source| RenderError::Mycnf {
        config_map: inputs
            .cluster
            .spec
            .mysql_config_map_name
            .clone()
            .unwrap_or_default(),
        source,
    })?;
    Ok(ConfigMap {
        metadata: id.owned_meta(mycnf_config_map_name(&id.name, &text), id.labels()),
        data: Some(BTreeMap::from([(MYCNF_KEY.to_owned(), text)])),
        ..ConfigMap::default()
    })
}

/// `moco-slow-log-agent-config-<name>.<hash of the template>` with key `fluent-bit.conf`.
pub fn slow_log(id: &ClusterId, template: Option<&str>) -> Result<ConfigMap, RenderError> {
    let template = template.unwrap_or(DEFAULT_SLOW_LOG_TEMPLATE);
    let text = expand_path(template, SLOW_LOG_PATH)?;
    let name = format!(
        "{}{:08x}",
        id.slow_log_config_map_prefix(),
        fnv1a_32(template.as_bytes())
    );
    Ok(ConfigMap {
        metadata: id.owned_meta(name, id.labels()),
        data: Some(BTreeMap::from([(FLUENT_BIT_KEY.to_owned(), text)])),
        ..ConfigMap::default()
    })
}
