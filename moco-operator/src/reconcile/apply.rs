//! Writing objects: server-side apply with the operator's one field manager, create-once,
//! delete-if-present, each retried with backoff on conflicts and transient API errors
//! (`moco_kube::api::retry`).

use std::fmt::Debug;

use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use moco_kube::api::{is_not_found, retry};
use serde::Serialize;
use serde::de::DeserializeOwned;

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
