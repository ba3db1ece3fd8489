//! Writing objects: server-side apply with the operator's one field manager, create-once,
//! delete-if-present, each retried with backoff on conflicts and transient API errors.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The field manager of every write (MOCO's, so that objects MOCO applied are updated in place).
pub const FIELD_MANAGER: &str = "moco-controller";

/// Attempts per write before the error ends the round (the controller requeues it with its
/// own backoff).
pub const ATTEMPTS: u32 = 4;
/// The first retry delay; doubled for each further attempt.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// Whether `error` may pass on its own: a conflict, throttling, a server error, or a failed
/// connection.
pub fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 409 || status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Whether `error` is the API server's 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 404)
}

/// Runs `op` until it succeeds, fails for good, or [`ATTEMPTS`] are used up.
pub async fn retry<T, F, Fut>(mut op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e) if attempt < ATTEMPTS && is_transient(&e) => {
                tracing::debug!(error = %e, attempt, "retrying a transient API error");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

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
