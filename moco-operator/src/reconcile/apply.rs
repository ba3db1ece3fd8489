//! Writing objects: server-side apply with the operator's one field manager, create-once,
//! delete-if-present, each retried with backoff on conflicts and transient API errors
//! (`moco_kube::api::retry`); and the [`Writer`] through which a round writes them.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use moco_kube::api::{is_not_found, retry};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{ReconcileError, Step};

/// The field manager of every write (MOCO's, so that objects MOCO applied are updated in place).
pub const FIELD_MANAGER: &str = "moco-controller";

/// Server-side applies `object` (anything serializing to the object, with `apiVersion` and
/// `kind`) as [`FIELD_MANAGER`], taking ownership of conflicting fields.
pub async fn apply<K, P>(api: &Api<K>, name: &str, object: &P) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    P: Serialize + Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(object);
    retry(|| api.patch(name, &params, &patch)).await
}

/// Creates `object` unless an object of that name exists; returns the one that exists then.
pub async fn create_once<K>(api: &Api<K>, name: &str, object: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    if let Some(existing) = retry(|| api.get_opt(name)).await? {
        return Ok(existing);
    }
    let params = PostParams::default();
    match retry(|| api.create(&params, object)).await {
        // Created by another writer in between: that one stands.
        Err(kube::Error::Api(s)) if s.code == 409 => retry(|| api.get(name)).await,
        other => other,
    }
}

/// Deletes `name` if it exists; returns whether a delete was sent.
pub async fn delete_if_present<K>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match retry(|| api.delete(name, params)).await {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The one writer of a round: every object of a cluster is created, applied or deleted through
/// it, in one namespace, with the failed step named in its error. A kind that is applied while
/// needed and deleted when not goes through [`Writer::ensure`], so the rule (apply when built,
/// delete only what the stores do not rule out) is written once.
pub(super) struct Writer<'a> {
    client: &'a Client,
    namespace: &'a str,
}

impl<'a> Writer<'a> {
    /// Writes in `namespace`.
    pub(super) fn new(client: &'a Client, namespace: &'a str) -> Self {
        Writer { client, namespace }
    }

    /// The API of kind `K` in this namespace.
    pub(super) fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), self.namespace)
    }

    /// The API of the resource `resource` (a kind without a Rust type) in this namespace.
    pub(super) fn api_with(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), self.namespace, resource)
    }

    /// Server-side applies `object` (named by its metadata).
    pub(super) async fn apply<K>(&self, step: Step, object: &K) -> Result<K, ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
        K::DynamicType: Default,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        apply(&self.api::<K>(), &name, object)
            .await
            .map_err(ReconcileError::api(step))
    }

    /// Applies each of `objects`, in order.
    pub(super) async fn apply_each<'o, K>(
        &self,
        step: Step,
        objects: impl IntoIterator<Item = &'o K>,
    ) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug
            + 'o,
        K::DynamicType: Default,
    {
        for object in objects {
            self.apply(step, object).await?;
        }
        Ok(())
    }

    /// Creates `object` unless one of its name exists; returns the one that stands.
    pub(super) async fn create_once<K>(&self, step: Step, object: &K) -> Result<K, ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
        K::DynamicType: Default,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        create_once(&self.api::<K>(), &name, object)
            .await
            .map_err(ReconcileError::api(step))
    }

    /// Deletes `name` of kind `K` when it `may_exist` (a `false` is the controller's stores'
    /// word that it is not there, and sends nothing).
    pub(super) async fn delete<K>(
        &self,
        step: Step,
        name: &str,
        may_exist: bool,
        params: &DeleteParams,
    ) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        if may_exist {
            delete_if_present(&self.api::<K>(), name, params)
                .await
                .map_err(ReconcileError::api(step))?;
        }
        Ok(())
    }

    /// `name` as built: applied when `built` is one, else deleted when it may exist.
    pub(super) async fn ensure<K>(
        &self,
        step: Step,
        name: &str,
        built: Option<&K>,
        may_exist: bool,
        params: &DeleteParams,
    ) -> Result<(), ReconcileError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
        K::DynamicType: Default,
    {
        match built {
            Some(object) => self.apply(step, object).await.map(drop),
            None => self.delete::<K>(step, name, may_exist, params).await,
        }
    }
}
