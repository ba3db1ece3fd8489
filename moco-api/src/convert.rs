//! Conversion from the CRD types to the plain-data views of `moco_core::validate`.

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::api::storage::v1::StorageClass;
use moco_core::validate::{
    BackupPolicyView, ClaimTemplateView, ClusterReference, ClusterView, ContainerPortView,
    ContainerView, MutationInput, StorageClassFacts,
};

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
    let annotations = sc.metadata.annotations.as_ref();
    let flag = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .is_some_and(|v| v == "true")
    };
    StorageClassFacts {
        name: sc.metadata.name.clone().unwrap_or_default(),
        allow_volume_expansion: sc.allow_volume_expansion == Some(true),
        is_default: flag(ANNOTATION_DEFAULT_STORAGE_CLASS)
            || flag(ANNOTATION_DEFAULT_STORAGE_CLASS_BETA),
    }
}
