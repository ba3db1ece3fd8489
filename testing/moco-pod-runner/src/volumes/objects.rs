//! Reading the objects a Pod's volumes are made of from the API server: ConfigMaps, Secrets,
//! claims, where "not found" is an answer rather than an error.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde::de::DeserializeOwned;

use super::error::VolumeError;
use super::projected::{Objects, Projection};

/// `name` in `namespace`, `None` when not found.
pub async fn get_opt<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<K>, kube::Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name).await
}

/// Reads every ConfigMap and Secret `projection` of volume `volume` names into `objects`
/// (those already there are not read again).
pub async fn fetch(
    client: &kube::Client,
    namespace: &str,
    volume: &str,
    projection: &Projection,
    objects: &mut Objects,
) -> Result<(), VolumeError> {
    let api_err = |kind: &'static str, name: &str| {
        let name = name.to_owned();
        move |source| VolumeError::Api {
            volume: volume.to_owned(),
            kind,
            namespace: namespace.to_owned(),
            name,
            source: Box::new(source),
        }
    };
    for source in &projection.sources {
        if let Some(cm) = &source.config_map
            && !objects.config_maps.contains_key(&cm.name)
        {
            let got = get_opt::<ConfigMap>(client, namespace, &cm.name)
                .await
                .map_err(api_err("ConfigMap", &cm.name))?;
            objects.config_maps.insert(cm.name.clone(), got);
        }
        if let Some(s) = &source.secret
            && !objects.secrets.contains_key(&s.name)
        {
            let got = get_opt::<Secret>(client, namespace, &s.name)
                .await
                .map_err(api_err("Secret", &s.name))?;
            objects.secrets.insert(s.name.clone(), got);
        }
    }
    Ok(())
}
