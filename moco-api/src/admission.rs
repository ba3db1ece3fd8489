//! The admission webhooks: `AdmissionReview` in, `AdmissionReview` out.
//!
//! * [`validate_mysqlcluster`]: CREATE and UPDATE rules of `moco_core::validate`; StorageClasses
//!   are looked up only when an update grows a storage request;
//! * [`mutate_mysqlcluster`]: CREATE only; adds the finalizer and picks `serverIDBase`, answered
//!   with a JSON patch;
//! * [`validate_backuppolicy`]: CREATE/UPDATE schedule rule, and DELETE refused while a
//!   MySQLCluster of the namespace references the policy;
//! * [`mutate_statefulset`]: CREATE and UPDATE of a MySQLCluster's StatefulSet; holds every
//!   Pod on its revision (`partition = replicas`) on any spec change, for the partitioned
//!   rollout (`moco_core::resources::partition`).
//!
//! Cluster facts come through [`ClusterLookup`]: [`KubeLookup`] asks the API server,
//! [`StaticLookup`] serves fixed facts (tests, offline use).

use std::collections::BTreeMap;
use std::future::Future;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use moco_core::resources::{AdmittedPartition, PartitionAdmission, admit_partition};
use moco_core::validate::{
    BackupPolicyView, ClusterReference, ClusterView, FINALIZER, MutationInput, StorageClassFacts,
    StorageFacts, Violation, mutate_cluster_create, mutate_cluster_update, storage_growth,
    validate_backup_policy, validate_backup_policy_delete, validate_cluster_create,
    validate_cluster_update,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::annotations::is_true;
use crate::backuppolicy::BackupPolicy;
use crate::convert::storage_class_facts;
use crate::labels::ANNOTATION_FORCE_ROLLING_UPDATE;
use crate::mysqlcluster::MySQLCluster;

/// A failed lookup of cluster facts.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {message}")]
pub struct LookupError {
    /// What could not be done (`cannot list StorageClasses`).
    pub what: String,
    /// Why it failed.
    pub message: String,
}

/// Something a requester asks to do, as a SubjectAccessReview's resource attributes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// `get`, `escalate`, ….
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// The namespace.
    pub namespace: String,
    /// The object's name (empty: any).
    pub name: String,
}

impl std::fmt::Display for Access {
    /// `escalate mysqlusers.moco-rs.io "app" in namespace shop`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if !self.name.is_empty() {
            write!(f, " {:?}", self.name)?;
        }
        write!(f, " in namespace {}", self.namespace)
    }
}

/// Facts about the cluster that some rules need, and whether a requester may do something.
pub trait ClusterLookup: Send + Sync + 'static {
    /// Whether `who` (a request's `userInfo`) may do `access`: a SubjectAccessReview. The
    /// MySQLUser webhook asks it for what the operator would do on the requester's behalf
    /// (read a Secret, grant privileged rights).
    fn may(
        &self,
        who: &UserInfo,
        access: &Access,
    ) -> impl Future<Output = Result<bool, LookupError>> + Send;
    /// Every StorageClass.
    fn storage_classes(
        &self,
    ) -> impl Future<Output = Result<Vec<StorageClassFacts>, LookupError>> + Send;
    /// Every MySQLCluster of `namespace`, with the BackupPolicy it uses.
    fn clusters_in(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<ClusterReference>, LookupError>> + Send;
}

/// Looks facts up from the API server.
#[derive(Clone)]
pub struct KubeLookup {
    client: kube::Client,
}

impl std::fmt::Debug for KubeLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeLookup").finish_non_exhaustive()
    }
}

impl KubeLookup {
    /// Uses `client` for every lookup.
    pub fn new(client: kube::Client) -> Self {
        KubeLookup { client }
    }
}

impl ClusterLookup for KubeLookup {
    async fn may(&self, who: &UserInfo, access: &Access) -> Result<bool, LookupError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: who.username.clone(),
                uid: who.uid.clone(),
                groups: who.groups.clone(),
                extra: who.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(access.verb.clone()),
                    group: Some(access.group.clone()),
                    resource: Some(access.resource.clone()),
                    namespace: Some(access.namespace.clone()),
                    name: (!access.name.is_empty()).then(|| access.name.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| LookupError {
                what: format!(
                    "cannot ask whether the requester may {access} (a SubjectAccessReview)"
                ),
                message: e.to_string(),
            })?;
        Ok(answer
            .status
            .is_some_and(|s| s.allowed && s.denied != Some(true)))
    }

    async fn storage_classes(&self) -> Result<Vec<StorageClassFacts>, LookupError> {
        let api: Api<StorageClass> = Api::all(self.client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| LookupError {
                what: "cannot list StorageClasses".to_owned(),
                message: e.to_string(),
            })?;
        Ok(list.items.iter().map(storage_class_facts).collect())
    }

    async fn clusters_in(&self, namespace: &str) -> Result<Vec<ClusterReference>, LookupError> {
        let api: Api<MySQLCluster> = Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| LookupError {
                what: format!("cannot list MySQLClusters in namespace {namespace}"),
                message: e.to_string(),
            })?;
        Ok(list.items.iter().map(ClusterReference::from).collect())
    }
}

/// Fixed facts.
#[derive(Debug, Clone, Default)]
pub struct StaticLookup {
    /// The StorageClasses.
    pub storage_classes: Vec<StorageClassFacts>,
    /// MySQLClusters by namespace.
    pub clusters: BTreeMap<String, Vec<ClusterReference>>,
    /// What no requester may do; anything else every requester may.
    pub refused: Vec<Access>,
}

impl ClusterLookup for StaticLookup {
    async fn may(&self, _who: &UserInfo, access: &Access) -> Result<bool, LookupError> {
        Ok(!self.refused.contains(access))
    }

    async fn storage_classes(&self) -> Result<Vec<StorageClassFacts>, LookupError> {
        Ok(self.storage_classes.clone())
    }

    async fn clusters_in(&self, namespace: &str) -> Result<Vec<ClusterReference>, LookupError> {
        Ok(self.clusters.get(namespace).cloned().unwrap_or_default())
    }
}

type Review = AdmissionReview<DynamicObject>;
type Request = AdmissionRequest<DynamicObject>;

fn decode<T: DeserializeOwned>(object: Option<&DynamicObject>, which: &str) -> Result<T, String> {
    let object = object.ok_or_else(|| format!("the request has no {which}"))?;
    let value = serde_json::to_value(object).map_err(|e| format!("cannot encode {which}: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("cannot decode {which}: {e}"))
}

fn request(review: Review) -> Result<Request, Box<AdmissionResponse>> {
    review.try_into().map_err(|_| {
        Box::new(AdmissionResponse::invalid(
            "the AdmissionReview has no request",
        ))
    })
}

fn respond(response: AdmissionResponse) -> Review {
    response.into_review()
}

/// Denial listing every violation; `what` leads the message, as the API server words it
/// (e.g. `MySQLCluster "a" is invalid`).
fn deny(req: &Request, what: &str, violations: &[Violation], code: u16, reason: &str) -> Review {
    let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
    let mut response = AdmissionResponse::from(req).deny(format!("{what}: {}", lines.join("; ")));
    response.result.code = code;
    response.result.reason = reason.to_owned();
    respond(response)
}

fn invalid(req: &Request, kind: &str) -> String {
    let name = if req.name.is_empty() {
        "<generated>"
    } else {
        req.name.as_str()
    };
    format!("{kind} {name:?} is invalid")
}

fn error(req: &Request, message: String, code: u16) -> Review {
    let mut response = AdmissionResponse::from(req).deny(message);
    response.result.code = code;
    respond(response)
}

fn allow(req: &Request) -> Review {
    respond(AdmissionResponse::from(req))
}

/// The validating webhook of MySQLCluster (CREATE, UPDATE).
pub async fn validate_mysqlcluster<L: ClusterLookup>(lookup: &L, review: Review) -> Review {
    let req = match request(review) {
        Ok(r) => r,
        Err(response) => return respond(*response),
    };
    let new: MySQLCluster = match req.operation {
        Operation::Create | Operation::Update => match decode(req.object.as_ref(), "object") {
            Ok(c) => c,
            Err(e) => return error(&req, e, 400),
        },
        _ => return allow(&req),
    };
    let new_view = ClusterView::from(&new);
    let violations = if req.operation == Operation::Create {
        validate_cluster_create(&new_view)
    } else {
        let old: MySQLCluster = match decode(req.old_object.as_ref(), "oldObject") {
            Ok(c) => c,
            Err(e) => return error(&req, e, 400),
        };
        let old_view = ClusterView::from(&old);
        // Like MOCO, StorageClasses are only consulted when a storage request grows.
        let storage = if storage_growth(&new_view, &old_view).is_empty() {
            StorageFacts::Known(Vec::new())
        } else {
            match lookup.storage_classes().await {
                Ok(classes) => StorageFacts::Known(classes),
                Err(e) => return error(&req, format!("internal error: {e}"), 500),
            }
        };
        validate_cluster_update(&new_view, &old_view, &storage)
    };
    if violations.is_empty() {
        allow(&req)
    } else {
        deny(
            &req,
            &invalid(&req, "MySQLCluster"),
            &violations,
            422,
            "Invalid",
        )
    }
}

/// The mutating webhook of MySQLCluster (CREATE): finalizer and `serverIDBase` as a JSON patch.
/// `random` is used only when `serverIDBase` is 0.
pub fn mutate_mysqlcluster(review: Review, random: u32) -> Review {
    let req = match request(review) {
        Ok(r) => r,
        Err(response) => return respond(*response),
    };
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return allow(&req);
    }
    let cluster: MySQLCluster = match decode(req.object.as_ref(), "object") {
        Ok(c) => c,
        Err(e) => return error(&req, e, 400),
    };
    let mutation = if req.operation == Operation::Update {
        let old: MySQLCluster = match decode(req.old_object.as_ref(), "oldObject") {
            Ok(c) => c,
            Err(e) => return error(&req, e, 400),
        };
        mutate_cluster_update(&MutationInput::from(&cluster), old.spec.server_id_base)
    } else {
        mutate_cluster_create(&MutationInput::from(&cluster), random)
    };
    let mut ops = Vec::new();
    if mutation.add_finalizer {
        let (path, value) = if cluster.metadata.finalizers.is_some() {
            ("/metadata/finalizers/-", Value::from(FINALIZER))
        } else {
            ("/metadata/finalizers", Value::from(vec![FINALIZER]))
        };
        ops.push(add(path, value));
    }
    if let Some(base) = mutation.server_id_base {
        ops.push(add("/spec/serverIDBase", Value::from(base)));
    }
    let ops: Result<Vec<PatchOperation>, String> = ops.into_iter().collect();
    let response = AdmissionResponse::from(&req);
    let patched = ops.and_then(|ops| {
        if ops.is_empty() {
            Ok(response)
        } else {
            response.with_patch(Patch(ops)).map_err(|e| e.to_string())
        }
    });
    match patched {
        Ok(r) => respond(r),
        Err(e) => error(
            &req,
            format!("internal error: cannot build the patch: {e}"),
            500,
        ),
    }
}

fn add(path: &str, value: Value) -> Result<PatchOperation, String> {
    let path = PointerBuf::parse(path).map_err(|e| format!("bad JSON pointer {path:?}: {e}"))?;
    Ok(PatchOperation::Add(AddOperation { path, value }))
}

/// The mutating webhook of a MySQLCluster's StatefulSet (CREATE, UPDATE): the partitioned
/// rollout's hold. A StatefulSet not controlled by exactly one MySQLCluster is left alone
/// (MOCO's rule, with its `&&` written as meant: both the kind and the group must match).
pub fn mutate_statefulset(review: Review) -> Review {
    let req = match request(review) {
        Ok(r) => r,
        Err(response) => return respond(*response),
    };
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return allow(&req);
    }
    let sts: StatefulSet = match decode(req.object.as_ref(), "object") {
        Ok(s) => s,
        Err(e) => return error(&req, e, 400),
    };
    if !owned_by_one_cluster(&sts) {
        return allow(&req);
    }
    let only_partition_changed = if req.operation == Operation::Update {
        match decode::<StatefulSet>(req.old_object.as_ref(), "oldObject") {
            Ok(old) => spec_without_partition(&old) == spec_without_partition(&sts),
            Err(e) => return error(&req, e, 400),
        }
    } else {
        false
    };
    let spec = sts.spec.as_ref();
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    if strategy
        .and_then(|s| s.type_.as_deref())
        .is_some_and(|t| t != "RollingUpdate")
    {
        // OnDelete: the StatefulSet controller rolls nothing by itself; no partition applies.
        return allow(&req);
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let admission = PartitionAdmission {
        replicas: spec
            .and_then(|s| s.replicas)
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(1),
        partition: rolling
            .and_then(|r| r.partition)
            .and_then(|p| u32::try_from(p).ok()),
        only_partition_changed,
        force_rolling_update: is_true(&sts.metadata, ANNOTATION_FORCE_ROLLING_UPDATE),
    };
    let ops: Vec<PatchOperation> = match admit_partition(&admission) {
        AdmittedPartition::Keep => Vec::new(),
        AdmittedPartition::Unmanaged if rolling.is_some() => {
            vec![remove("/spec/updateStrategy/rollingUpdate")]
        }
        AdmittedPartition::Unmanaged => Vec::new(),
        AdmittedPartition::Hold { to } => {
            let (path, value) = match (strategy, rolling) {
                (None, _) => (
                    "/spec/updateStrategy",
                    serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"partition": to}}),
                ),
                (Some(_), None) => (
                    "/spec/updateStrategy/rollingUpdate",
                    serde_json::json!({"partition": to}),
                ),
                (Some(_), Some(_)) => (
                    "/spec/updateStrategy/rollingUpdate/partition",
                    Value::from(to),
                ),
            };
            match add(path, value) {
                Ok(op) => vec![op],
                Err(e) => return error(&req, e, 500),
            }
        }
    };
    let response = AdmissionResponse::from(&req);
    if ops.is_empty() {
        return respond(response);
    }
    match response.with_patch(Patch(ops)) {
        Ok(r) => respond(r),
        Err(e) => error(
            &req,
            format!("internal error: cannot build the patch: {e}"),
            500,
        ),
    }
}

/// Exactly one owner, and it is a MySQLCluster of moco.cybozu.com.
fn owned_by_one_cluster(sts: &StatefulSet) -> bool {
    match sts.metadata.owner_references.as_deref() {
        Some([owner]) => {
            owner.kind == "MySQLCluster"
                && owner
                    .api_version
                    .split('/')
                    .next()
                    .is_some_and(|group| group == "moco.cybozu.com")
        }
        _ => false,
    }
}

/// The spec as JSON without the partition: what the partition controller's own write leaves
/// unchanged.
fn spec_without_partition(sts: &StatefulSet) -> Value {
    let mut spec = serde_json::to_value(&sts.spec).unwrap_or(Value::Null);
    if let Some(rolling) = spec
        .pointer_mut("/updateStrategy/rollingUpdate")
        .and_then(Value::as_object_mut)
    {
        rolling.remove("partition");
    }
    spec
}

fn remove(path: &str) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation {
        path: PointerBuf::from_tokens(path.split('/').skip(1)),
    })
}

/// The validating webhook of BackupPolicy (CREATE, UPDATE, DELETE).
pub async fn validate_backuppolicy<L: ClusterLookup>(lookup: &L, review: Review) -> Review {
    let req = match request(review) {
        Ok(r) => r,
        Err(response) => return respond(*response),
    };
    match req.operation {
        Operation::Create | Operation::Update => {
            let policy: BackupPolicy = match decode(req.object.as_ref(), "object") {
                Ok(p) => p,
                Err(e) => return error(&req, e, 400),
            };
            let violations = validate_backup_policy(&BackupPolicyView::from(&policy));
            if violations.is_empty() {
                allow(&req)
            } else {
                deny(
                    &req,
                    &invalid(&req, "BackupPolicy"),
                    &violations,
                    422,
                    "Invalid",
                )
            }
        }
        Operation::Delete => {
            let namespace = req.namespace.clone().unwrap_or_default();
            let clusters = match lookup.clusters_in(&namespace).await {
                Ok(c) => c,
                Err(e) => return error(&req, format!("internal error: {e}"), 500),
            };
            let violations = validate_backup_policy_delete(&req.name, &clusters);
            if violations.is_empty() {
                allow(&req)
            } else {
                let what = format!("deleting BackupPolicy {:?} is forbidden", req.name);
                deny(&req, &what, &violations, 403, "Forbidden")
            }
        }
        _ => allow(&req),
    }
}
