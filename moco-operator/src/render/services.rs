//! The ServiceAccount of the mysqld Pods with what it may read, and the three Services:
//! headless (stable Pod names), primary (writes) and replica (reads).

use k8s_openapi::api::core::v1::{Service, ServiceAccount, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use moco_api::cluster::{ADMIN_PORT, ClusterId, MYSQL_PORT, MYSQLX_PORT};
use moco_api::labels::{LABEL_ROLE, ROLE_PRIMARY, ROLE_REPLICA};
use moco_api::mysqlcluster::{MySQLClusterSpec, ServiceTemplate};

use super::meta::overlay;

fn port(name: &str, number: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        protocol: Some("TCP".into()),
        port: number,
        target_port: Some(IntOrString::String(name.to_owned())),
        ..ServicePort::default()
    }
}

/// `moco-<name>`.
pub fn service_account(id: &ClusterId) -> ServiceAccount {
    ServiceAccount {
        metadata: id.owned_meta(id.prefixed(), id.labels()),
        ..ServiceAccount::default()
    }
}

/// `moco-<name>` Role and RoleBinding: the Pods' ServiceAccount may read its own MySQLCluster,
/// and nothing else. `moco init` reads which instance is the primary there: a MariaDB
/// instance coming back as a replica starts with `init_rpl_role=SLAVE` (see `docs/agent.md`).
pub fn instance_rbac(id: &ClusterId) -> (Role, RoleBinding) {
    let name = id.prefixed();
    let role = Role {
        metadata: id.owned_meta(name.clone(), id.labels()),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["moco.cybozu.com".into()]),
            resources: Some(vec!["mysqlclusters".into()]),
            verbs: vec!["get".into()],
            resource_names: Some(vec![id.name.clone()]),
            ..PolicyRule::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: id.owned_meta(name.clone(), id.labels()),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name,
            namespace: Some(id.namespace.clone()),
            ..Subject::default()
        }]),
    };
    (role, binding)
}

/// Headless, primary and replica Services, in that order.
pub fn services(id: &ClusterId, spec: &MySQLClusterSpec) -> [Service; 3] {
    let headless = Service {
        metadata: id.owned_meta(id.prefixed(), id.labels()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            type_: Some("ClusterIP".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(id.labels()),
            ports: Some(vec![
                port("mysql", MYSQL_PORT),
                port("mysqlx", MYSQLX_PORT),
                port("mysql-admin", ADMIN_PORT),
            ]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    [
        headless,
        role_service(
            id,
            id.primary_service(),
            ROLE_PRIMARY,
            spec.primary_service_template.as_ref(),
        ),
        role_service(
            id,
            id.replica_service(),
            ROLE_REPLICA,
            spec.replica_service_template.as_ref(),
        ),
    ]
}

/// A role Service: the template's metadata and spec, with MOCO's labels, selector and the
/// `mysql`/`mysqlx` ports forced (other ports of the template kept).
fn role_service(
    id: &ClusterId,
    name: String,
    role: &str,
    template: Option<&ServiceTemplate>,
) -> Service {
    let mut metadata = id.owned_meta(name, id.labels());
    let mut spec = ServiceSpec::default();
    if let Some(t) = template {
        metadata.labels = Some(overlay(&t.metadata.labels, &id.labels()));
        if !t.metadata.annotations.is_empty() {
            metadata.annotations = Some(t.metadata.annotations.clone());
        }
        if let Some(s) = &t.spec {
            spec = s.clone();
        }
    }
    let mut selector = id.labels();
    selector.insert(LABEL_ROLE.into(), role.into());
    spec.selector = Some(selector);
    let mut ports = spec.ports.take().unwrap_or_default();
    for (name, number) in [("mysql", MYSQL_PORT), ("mysqlx", MYSQLX_PORT)] {
        let forced = port(name, number);
        match ports.iter_mut().find(|p| p.name.as_deref() == Some(name)) {
            Some(p) => {
                p.protocol = forced.protocol;
                p.port = forced.port;
                p.target_port = forced.target_port;
            }
            None => ports.push(forced),
        }
    }
    spec.ports = Some(ports);
    Service {
        metadata,
        spec: Some(spec),
        ..Service::default()
    }
}
