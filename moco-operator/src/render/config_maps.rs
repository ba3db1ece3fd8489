//! The my.cnf ConfigMap and the slow-log sidecar's configuration.
//!
//! Both are named by a hash of their content, so a change makes a new name, the Pod template
//! changes with it, and that is what rolls the Pods; reconcile prunes the old ones.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container};
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::facts::Flavor;
use moco_core::resources::{
    MycnfInput, MycnfPaths, MysqlLine, MysqldMemory, Quantity, fnv1a_32, generate_mycnf,
    mycnf_config_map_name,
};

use super::template::expand_path;

use super::RenderError;

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
pub(crate) fn mysqld_container(cluster: &MySQLCluster) -> Result<(usize, &Container), RenderError> {
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

/// The memory the buffer pool is sized from: the `mysqld` container's (at `index` of the
/// Pod template) request, else limit.
fn mysqld_memory(container: &Container, index: usize) -> Result<MysqldMemory, RenderError> {
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

/// The MySQL line the `mysqld` image runs, from its tag (`mysql:9.7.4`,
/// `ghcr.io/cybozu-go/moco/mysql:8.4.4`): the options MySQL 9 removed are not written for it.
/// An image whose tag names no version (a digest, `latest`) gets the 8 line's, MOCO's.
pub(crate) fn mysql_line_of_image(image: Option<&str>) -> MysqlLine {
    let Some(image) = image else {
        return MysqlLine::Mysql8;
    };
    let name = image.split('@').next().unwrap_or(image);
    let tag = match name.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') && !repository.is_empty() => tag,
        _ => return MysqlLine::Mysql8,
    };
    MysqlLine::of_version(tag)
}

/// The text of my.cnf from the user's options (`user_config`) and the memory of the `mysqld`
/// container (`mysqld`: its index in the Pod template and itself); with `tls`, the server options of [`super::tls::mycnf_options`]
/// replace the user's of the same names. Called by [`super::checked::check`]: the user's
/// options are input, and an option my.cnf cannot carry is refused here.
pub fn mycnf_text(
    cluster: &MySQLCluster,
    mysqld: (usize, &Container),
    user_config: &BTreeMap<String, String>,
    flavor: Flavor,
    tls: bool,
) -> Result<String, RenderError> {
    let (index, container) = mysqld;
    let mut user_config = user_config.clone();
    if tls {
        user_config.extend(super::tls::mycnf_options());
    }
    generate_mycnf(&MycnfInput {
        flavor,
        user_config,
        memory: mysqld_memory(container, index)?,
        paths: MycnfPaths::default(),
        mysql_line: mysql_line_of_image(container.image.as_deref()),
    })
    .map_err(|source| RenderError::Mycnf {
        config_map: cluster
            .spec
            .mysql_config_map_name
            .clone()
            .unwrap_or_default(),
        source,
    })
}

/// `moco-<name>.<hash>` with key `my.cnf` holding `text` ([`mycnf_text`]).
pub fn mycnf(id: &ClusterId, text: &str) -> ConfigMap {
    ConfigMap {
        metadata: id.owned_meta(mycnf_config_map_name(&id.name, text), id.labels()),
        data: Some(BTreeMap::from([(MYCNF_KEY.to_owned(), text.to_owned())])),
        ..ConfigMap::default()
    }
}

/// The slow-log sidecar's configuration: the template's hash (which names the ConfigMap) and
/// its expansion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowLogConfig {
    /// FNV-1a of the template as given.
    pub template_hash: u32,
    /// The fluent-bit configuration.
    pub text: String,
}

/// Expands `spec.slowQueryLogConfigTmpl` (MOCO's default when unset); a template this
/// expander does not support is refused, naming the field.
pub fn slow_log_config(template: Option<&str>) -> Result<SlowLogConfig, RenderError> {
    let template = template.unwrap_or(DEFAULT_SLOW_LOG_TEMPLATE);
    Ok(SlowLogConfig {
        template_hash: fnv1a_32(template.as_bytes()),
        text: expand_path(template, SLOW_LOG_PATH)?,
    })
}

/// `moco-slow-log-agent-config-<name>.<hash of the template>` with key `fluent-bit.conf`.
pub fn slow_log(id: &ClusterId, config: &SlowLogConfig) -> ConfigMap {
    let name = format!(
        "{}{:08x}",
        id.slow_log_config_map_prefix(),
        config.template_hash
    );
    ConfigMap {
        metadata: id.owned_meta(name, id.labels()),
        data: Some(BTreeMap::from([(
            FLUENT_BIT_KEY.to_owned(),
            config.text.clone(),
        )])),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mysql_line_is_read_from_the_image_tag() {
        let line = |image: Option<&str>| mysql_line_of_image(image);
        assert_eq!(line(Some("mysql:9.7.4")), MysqlLine::Mysql9);
        assert_eq!(line(Some("mysql:9.7")), MysqlLine::Mysql9);
        assert_eq!(
            line(Some(
                "container-registry.oracle.com/mysql/community-server:9.7"
            )),
            MysqlLine::Mysql9
        );
        assert_eq!(
            line(Some("ghcr.io/cybozu-go/moco/mysql:8.4.4")),
            MysqlLine::Mysql8
        );
        // A registry with a port and no tag, a digest, a tag that names no version: MOCO's.
        assert_eq!(line(Some("registry:5000/mysql")), MysqlLine::Mysql8);
        assert_eq!(line(Some("mysql@sha256:0123abcd")), MysqlLine::Mysql8);
        assert_eq!(line(Some("mysql:9.7@sha256:0123abcd")), MysqlLine::Mysql9);
        assert_eq!(line(Some("mysql:lts")), MysqlLine::Mysql8);
        assert_eq!(line(None), MysqlLine::Mysql8);
    }
}
