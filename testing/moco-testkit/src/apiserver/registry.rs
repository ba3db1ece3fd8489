//! The kinds the fake serves: a fixed table instead of API discovery, because the operator only
//! touches these and a test that reaches for another kind should fail loudly (404), as it would
//! against a cluster without that CRD.

/// One resource the fake serves, as discovery would describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Lower-case plural used in paths.
    pub plural: &'static str,
    /// `kind` of its objects.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether it has a `status` subresource (main-resource writes then keep the stored status).
    pub status: bool,
}

impl ResourceType {
    /// `apiVersion` of its objects: `v1` for core, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` or `plural.group`, as the real server names resources in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const fn rt(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
) -> ResourceType {
    ResourceType {
        group,
        version,
        plural,
        kind,
        namespaced,
        status,
    }
}

/// Every resource the fake serves.
pub const RESOURCES: &[ResourceType] = &[
    rt("", "v1", "pods", "Pod", true, true),
    rt("", "v1", "services", "Service", true, true),
    rt("", "v1", "configmaps", "ConfigMap", true, false),
    rt("", "v1", "secrets", "Secret", true, false),
    rt("", "v1", "serviceaccounts", "ServiceAccount", true, false),
    rt(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        true,
    ),
    rt("", "v1", "events", "Event", true, false),
    rt("", "v1", "endpoints", "Endpoints", true, false),
    rt("", "v1", "namespaces", "Namespace", false, true),
    rt("", "v1", "nodes", "Node", false, true),
    rt("apps", "v1", "statefulsets", "StatefulSet", true, true),
    rt("apps", "v1", "deployments", "Deployment", true, true),
    rt(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        true,
    ),
    rt("batch", "v1", "cronjobs", "CronJob", true, true),
    rt("batch", "v1", "jobs", "Job", true, true),
    rt(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        false,
    ),
    rt(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        false,
    ),
    rt(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        false,
    ),
    rt("coordination.k8s.io", "v1", "leases", "Lease", true, false),
    rt("events.k8s.io", "v1", "events", "Event", true, false),
    rt(
        "moco.cybozu.com",
        "v1beta2",
        "mysqlclusters",
        "MySQLCluster",
        true,
        true,
    ),
    rt(
        "moco.cybozu.com",
        "v1beta2",
        "backuppolicies",
        "BackupPolicy",
        true,
        false,
    ),
    rt(
        "cert-manager.io",
        "v1",
        "certificates",
        "Certificate",
        true,
        true,
    ),
];

/// The resource at `group`/`version`/`plural`.
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource whose objects have `api_version` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

/// The resource named `apiVersion/plural`, e.g. `v1/configmaps` or `apps/v1/statefulsets`, as
/// the test controls of [`super::FakeApiServer`] name them.
pub fn by_name(resource: &str) -> Option<&'static ResourceType> {
    let (api_version, plural) = resource.rsplit_once('/')?;
    RESOURCES
        .iter()
        .find(|r| r.plural == plural && r.api_version() == api_version)
}
