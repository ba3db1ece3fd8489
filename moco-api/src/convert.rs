//! Conversion from the CRD types to the engine's inputs: the plain-data views of
//! `moco_core::validate`, and a MySQLCluster's spec facts for `moco_core::decide`.

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::api::storage::v1::StorageClass;
use moco_core::facts::{ExternalSource, Flavor, SpecFacts};
use moco_core::validate::{
    BackupPolicyView, ClaimTemplateView, ClusterReference, ClusterView, ContainerPortView,
    ContainerView, MutationInput, StorageClassFacts,
};

use crate::annotations::is_true;
use crate::backuppolicy::BackupPolicy;
use crate::labels::{ANNOTATION_DEFAULT_STORAGE_CLASS, ANNOTATION_DEFAULT_STORAGE_CLASS_BETA};
use crate::mysqlcluster::MySQLCluster;

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn container_view(c: &Container) -> ContainerView {
    ContainerView {
        name: non_empty(&c.name),
        ports: c
            .ports
            .iter()
            .flatten()
            .map(|p| ContainerPortView {
                name: p.name.clone(),
                container_port: Some(p.container_port),
            })
            .collect(),
    }
}

impl From<&MySQLCluster> for ClusterView {
    fn from(c: &MySQLCluster) -> Self {
        let spec = &c.spec;
        let pod = &spec.pod_template.spec;
        ClusterView {
            name: c.metadata.name.clone().unwrap_or_default(),
            replicas: spec.replicas,
            containers: pod.containers.iter().map(container_view).collect(),
            init_containers: pod
                .init_containers
                .iter()
                .flatten()
                .map(container_view)
                .collect(),
            volume_names: pod
                .volumes
                .iter()
                .flatten()
                .map(|v| non_empty(&v.name))
                .collect(),
            claim_templates: spec
                .volume_claim_templates
                .iter()
                .map(|t| ClaimTemplateView {
                    name: t.metadata.name.clone(),
                    storage_request: t
                        .spec
                        .resources
                        .as_ref()
                        .and_then(|r| r.requests.as_ref())
                        .and_then(|r| r.get("storage"))
                        .map(|q| q.0.clone()),
                    storage_class_name: t.spec.storage_class_name.clone(),
                })
                .collect(),
            server_id_base: spec.server_id_base,
            log_rotation_schedule: spec.log_rotation_schedule.clone(),
            log_rotation_size: spec.log_rotation_size,
            collectors: spec.collectors.clone(),
            disable_slow_query_log_container: spec.disable_slow_query_log_container,
            // Serializing plain data cannot fail; a failure would only hide a restore change.
            restore: spec
                .restore
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok()),
            replication_source_secret_name: spec.replication_source_secret_name.clone(),
        }
    }
}

impl From<&MySQLCluster> for MutationInput {
    fn from(c: &MySQLCluster) -> Self {
        MutationInput {
            finalizers: c.metadata.finalizers.clone().unwrap_or_default(),
            server_id_base: c.spec.server_id_base,
        }
    }
}

impl From<&MySQLCluster> for ClusterReference {
    fn from(c: &MySQLCluster) -> Self {
        ClusterReference {
            cluster_name: c.metadata.name.clone().unwrap_or_default(),
            backup_policy_name: c.spec.backup_policy_name.clone(),
        }
    }
}

impl From<&BackupPolicy> for BackupPolicyView {
    fn from(p: &BackupPolicy) -> Self {
        BackupPolicyView {
            name: p.metadata.name.clone().unwrap_or_default(),
            schedule: p.spec.schedule.clone(),
        }
    }
}

/// What the volume expansion rule needs to know about a StorageClass.
pub fn storage_class_facts(sc: &StorageClass) -> StorageClassFacts {
    let flag = |key: &str| is_true(&sc.metadata, key);
    StorageClassFacts {
        name: sc.metadata.name.clone().unwrap_or_default(),
        allow_volume_expansion: sc.allow_volume_expansion == Some(true),
        is_default: flag(ANNOTATION_DEFAULT_STORAGE_CLASS)
            || flag(ANNOTATION_DEFAULT_STORAGE_CLASS_BETA),
    }
}

/// What the engine needs that a MySQLCluster does not say: the operator decides these (the
/// server family from its image settings, the external source's address from the Secret that
/// `spec.replicationSourceSecretName` names, moco-rs's opt-in re-clone of errant replicas).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineSettings {
    /// The server family the cluster's image runs.
    pub flavor: Flavor,
    /// `HOST`/`PORT` read from the replication source Secret, when the spec names one.
    pub external_source: Option<ExternalSource>,
    /// Re-clone errant replicas instead of only excluding them.
    pub reclone_errant: bool,
}

/// A MySQLCluster the engine cannot take, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SpecFactsError {
    /// The field's JSON path (`spec.replicas`).
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

fn spec_error(path: &str, message: impl Into<String>) -> SpecFactsError {
    SpecFactsError {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn non_negative<T, U>(value: T, path: &str) -> Result<U, SpecFactsError>
where
    T: Copy + std::fmt::Display,
    U: TryFrom<T>,
{
    U::try_from(value).map_err(|_| spec_error(path, format!("{value} is negative or too large")))
}

fn positive(value: i32, path: &str) -> Result<u32, SpecFactsError> {
    match non_negative(value, path)? {
        0 => Err(spec_error(path, "must be at least 1")),
        v => Ok(v),
    }
}

/// The engine's spec facts of a MySQLCluster. Admission already refuses what fails here; the
/// errors guard objects admitted before a webhook ran, or edited around it.
pub fn spec_facts(
    cluster: &MySQLCluster,
    settings: &EngineSettings,
) -> Result<SpecFacts, SpecFactsError> {
    let spec = &cluster.spec;
    let replicas = positive(spec.replicas, "spec.replicas")?;
    let server_id_base = positive(spec.server_id_base, "spec.serverIDBase")?;
    let max_delay = non_negative(
        spec.max_delay_seconds_for_pod_deletion,
        "spec.maxDelaySecondsForPodDeletion",
    )?;
    let startup_wait_seconds = non_negative(spec.startup_wait_seconds, "spec.startupWaitSeconds")?;
    let external_source = match (
        &spec.replication_source_secret_name,
        &settings.external_source,
    ) {
        (None, _) => None,
        (Some(_), Some(source)) => Some(source.clone()),
        (Some(name), None) => {
            return Err(spec_error(
                "spec.replicationSourceSecretName",
                format!("the address in Secret {name:?} was not read (HOST and PORT)"),
            ));
        }
    };
    Ok(SpecFacts {
        replicas,
        external_source,
        restore: spec.restore.is_some(),
        offline: spec.offline,
        server_id_base,
        max_delay_seconds_for_pod_deletion: max_delay,
        flavor: settings.flavor,
        reclone_errant: settings.reclone_errant,
        startup_wait_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(spec: serde_json::Value) -> MySQLCluster {
        let mut base = serde_json::json!({
            "apiVersion": "moco.cybozu.com/v1beta2",
            "kind": "MySQLCluster",
            "metadata": {"name": "test", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.4"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        });
        if let (Some(s), Some(extra)) = (base["spec"].as_object_mut(), spec.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn spec_facts_of_a_cluster() {
        let c = cluster(serde_json::json!({
            "serverIDBase": 100,
            "maxDelaySecondsForPodDeletion": 30,
            "startupWaitSeconds": 600,
            "offline": true,
        }));
        let settings = EngineSettings {
            flavor: Flavor::Mariadb,
            external_source: None,
            reclone_errant: true,
        };
        assert_eq!(
            spec_facts(&c, &settings).unwrap(),
            SpecFacts {
                replicas: 3,
                external_source: None,
                restore: false,
                offline: true,
                server_id_base: 100,
                max_delay_seconds_for_pod_deletion: 30,
                flavor: Flavor::Mariadb,
                reclone_errant: true,
                startup_wait_seconds: 600,
            }
        );
    }

    #[test]
    fn external_source_needs_the_secret_read() {
        let c = cluster(serde_json::json!({
            "serverIDBase": 1,
            "replicationSourceSecretName": "source",
        }));
        let e = spec_facts(&c, &EngineSettings::default()).unwrap_err();
        assert_eq!(e.path, "spec.replicationSourceSecretName");
        let source = ExternalSource {
            host: "db.example".into(),
            port: 3306,
        };
        let settings = EngineSettings {
            external_source: Some(source.clone()),
            ..EngineSettings::default()
        };
        assert_eq!(
            spec_facts(&c, &settings).unwrap().external_source,
            Some(source)
        );
        // A Secret address without the spec naming one is ignored.
        let plain = cluster(serde_json::json!({"serverIDBase": 1}));
        assert_eq!(spec_facts(&plain, &settings).unwrap().external_source, None);
    }

    #[test]
    fn impossible_values_name_their_field() {
        let path = |spec: serde_json::Value| {
            spec_facts(&cluster(spec), &EngineSettings::default())
                .unwrap_err()
                .path
        };
        assert_eq!(
            path(serde_json::json!({"replicas": 0, "serverIDBase": 1})),
            "spec.replicas"
        );
        assert_eq!(
            path(serde_json::json!({"serverIDBase": 0})),
            "spec.serverIDBase"
        );
        assert_eq!(
            path(serde_json::json!({"serverIDBase": 1, "maxDelaySecondsForPodDeletion": -1})),
            "spec.maxDelaySecondsForPodDeletion"
        );
        assert_eq!(
            path(serde_json::json!({"serverIDBase": 1, "startupWaitSeconds": -5})),
            "spec.startupWaitSeconds"
        );
    }
}
