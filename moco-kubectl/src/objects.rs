//! Reading the objects of a MySQLCluster: the cluster itself, its Pods, its password Secret.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use moco_api::labels::{APP_MYSQL, CREATED_BY, LABEL_CREATED_BY, LABEL_INSTANCE, LABEL_NAME};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::moco_accounts::Account;

use crate::context::Context;
use crate::error::Error;

const CLUSTER_HINT: &str = "";
const SECRET_HINT: &str =
    ": the operator creates it when it first reconciles the MySQLCluster; is the name right?";

/// `moco-<cluster>-<index>`: the Pod of instance `index`.
pub fn pod_name(cluster: &str, index: u32) -> String {
    format!("moco-{cluster}-{index}")
}

/// `moco-<cluster>`: the password Secret in the cluster's namespace.
pub fn secret_name(cluster: &str) -> String {
    format!("moco-{cluster}")
}

/// The MySQLCluster `name` in the context's namespace.
pub async fn cluster(ctx: &Context, name: &str) -> Result<MySQLCluster, Error> {
    let api: Api<MySQLCluster> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    api.get(name)
        .await
        .map_err(|e| Error::api("get", "MySQLCluster", &ctx.namespace, name, CLUSTER_HINT, e))
}

/// `spec.replicas` as an instance count (a negative value, which admission refuses, is 0).
pub fn replicas(cluster: &MySQLCluster) -> u32 {
    u32::try_from(cluster.spec.replicas).unwrap_or(0)
}

/// The cluster's Pods by ordinal (those named `moco-<cluster>-<ordinal>` among the Pods with
/// the cluster's labels).
pub async fn pods(ctx: &Context, cluster: &str) -> Result<BTreeMap<u32, Pod>, Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let selector = format!(
        "{LABEL_NAME}={APP_MYSQL},{LABEL_INSTANCE}={cluster},{LABEL_CREATED_BY}={CREATED_BY}"
    );
    let list = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Api {
            action: "list",
            kind: "Pods",
            namespace: ctx.namespace.clone(),
            name: selector.clone(),
            source: Box::new(source),
        })?;
    let prefix = format!("moco-{cluster}-");
    Ok(list
        .items
        .into_iter()
        .filter_map(|pod| {
            let ordinal = pod
                .metadata
                .name
                .as_deref()?
                .strip_prefix(&prefix)?
                .parse::<u32>()
                .ok()?;
            Some((ordinal, pod))
        })
        .collect())
}

/// The password of `account` from the Secret `moco-<cluster>`.
pub async fn password(ctx: &Context, cluster: &str, account: Account) -> Result<String, Error> {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = secret_name(cluster);
    let secret = api
        .get(&name)
        .await
        .map_err(|e| Error::api("get", "Secret", &ctx.namespace, &name, SECRET_HINT, e))?;
    let key = account.secret_key();
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| Error::MissingKey {
            namespace: ctx.namespace.clone(),
            secret: name.clone(),
            key,
            user: account.name(),
        })?;
    String::from_utf8(value.0.clone())
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(Error::BadKey {
            namespace: ctx.namespace.clone(),
            secret: name,
            key,
        })
}

/// The value of a Pod's condition `type_` (`True`, `False`, `Unknown`), if it has one.
pub fn pod_condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// The Pod's phase (`Running`, `Pending`, ...), `Unknown` when not reported.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Unknown")
}
