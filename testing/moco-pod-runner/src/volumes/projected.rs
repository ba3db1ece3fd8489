//! Volumes whose files the atomic writer keeps: `configMap`, `secret`, `downwardAPI` and
//! `projected`. The first three are seen as a projected volume of one source, so one pure
//! function ([`build_payload`]) turns the fetched objects into the files, with the kubelet's
//! rules (`MakePayload` of the configmap and secret plugins, `collectData` of the projected one).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, DownwardAPIProjection, KeyToPath, Pod, Secret,
    SecretProjection, Volume, VolumeProjection,
};

use super::atomic::{FileProjection, Payload};
use super::downward::{self, NodeAllocatable};
use super::error::VolumeError;

/// The mode of files without `mode` when the volume has no `defaultMode` (the API server
/// defaults it to this anyway).
pub const DEFAULT_MODE: u32 = 0o644;

/// A projected token's mode when the kubelet chowns it (`fsGroup` or a single `runAsUser`):
/// only the owner reads it, the `fsGroup` walk then adds group read (0640).
const TOKEN_OWNED_MODE: u32 = 0o600;

/// An atomic-writer volume as projection sources.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    /// The sources, in order (a later file of the same path wins).
    pub sources: Vec<VolumeProjection>,
    /// `defaultMode`.
    pub default_mode: u32,
}

/// The projection a `configMap`, `secret`, `downwardAPI` or `projected` volume is; `None` for
/// other kinds.
pub fn projection_of(volume: &Volume) -> Option<Projection> {
    let mode = |m: Option<i32>| m.map(downward::mode_bits).unwrap_or(DEFAULT_MODE);
    if let Some(cm) = &volume.config_map {
        return Some(Projection {
            sources: vec![VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: cm.name.clone(),
                    items: cm.items.clone(),
                    optional: cm.optional,
                }),
                ..Default::default()
            }],
            default_mode: mode(cm.default_mode),
        });
    }
    if let Some(s) = &volume.secret {
        return Some(Projection {
            sources: vec![VolumeProjection {
                secret: Some(SecretProjection {
                    name: s.secret_name.clone().unwrap_or_default(),
                    items: s.items.clone(),
                    optional: s.optional,
                }),
                ..Default::default()
            }],
            default_mode: mode(s.default_mode),
        });
    }
    if let Some(d) = &volume.downward_api {
        return Some(Projection {
            sources: vec![VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: d.items.clone(),
                }),
                ..Default::default()
            }],
            default_mode: mode(d.default_mode),
        });
    }
    volume.projected.as_ref().map(|p| Projection {
        sources: p.sources.clone().unwrap_or_default(),
        default_mode: mode(p.default_mode),
    })
}

/// The objects a projection's files are made of, fetched by [`super::objects`].
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// ConfigMaps by name; `None`: not found.
    pub config_maps: BTreeMap<String, Option<ConfigMap>>,
    /// Secrets by name; `None`: not found.
    pub secrets: BTreeMap<String, Option<Secret>>,
    /// Service account tokens by the projection's `path`.
    pub tokens: BTreeMap<String, String>,
}

/// Who the Pod's volume files belong to (from its security context).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Owners {
    /// `fsGroup`.
    pub fs_group: Option<u32>,
    /// The kubelet's `FsUserFrom` (one `runAsUser` for every container).
    pub fs_user: Option<u32>,
}

/// A key an `items` entry names that the object lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingKey(pub String);

/// Files from string and binary data as the kubelet's `MakePayload`: every key with
/// `default_mode` when `items` is empty, otherwise each item's key at its path with its mode;
/// a missing key is skipped when `optional`, an error otherwise.
pub fn key_payload(
    items: &[KeyToPath],
    data: &BTreeMap<String, Vec<u8>>,
    default_mode: u32,
    optional: bool,
) -> Result<Payload, MissingKey> {
    let mut payload = Payload::new();
    if items.is_empty() {
        for (key, value) in data {
            payload.insert(
                key.clone(),
                FileProjection {
                    data: value.clone(),
                    mode: default_mode,
                    fs_user: None,
                },
            );
        }
        return Ok(payload);
    }
    for item in items {
        let Some(value) = data.get(&item.key) else {
            if optional {
                continue;
            }
            return Err(MissingKey(item.key.clone()));
        };
        payload.insert(
            item.path.clone(),
            FileProjection {
                data: value.clone(),
                mode: item.mode.map(downward::mode_bits).unwrap_or(default_mode),
                fs_user: None,
            },
        );
    }
    Ok(payload)
}

/// A ConfigMap's data and binary data as one map (data wins on a clash, as the kubelet reads
/// `data` first for items; the API server forbids a key in both).
pub fn config_map_data(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut all: BTreeMap<String, Vec<u8>> = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in cm.data.iter().flatten() {
        all.insert(k.clone(), v.clone().into_bytes());
    }
    all
}

/// A Secret's data.
pub fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

/// The files of projection `projection` of volume `volume` of `pod` from the fetched `objects`:
/// each source's files in order, a later one replacing an earlier one of the same path. A
/// missing object or key that is not optional, or an unreadable field, is the error.
pub fn build_payload(
    volume: &str,
    pod: &Pod,
    projection: &Projection,
    objects: &Objects,
    owners: Owners,
    node: &NodeAllocatable,
) -> Result<Payload, VolumeError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let default_mode = projection.default_mode;
    let mut payload = Payload::new();
    for source in &projection.sources {
        let part = if let Some(cm) = &source.config_map {
            let optional = cm.optional.unwrap_or(false);
            let data = match objects.config_maps.get(&cm.name).cloned().flatten() {
                Some(obj) => config_map_data(&obj),
                None if optional => BTreeMap::new(),
                None => {
                    return Err(VolumeError::ObjectMissing {
                        volume: volume.to_owned(),
                        kind: "ConfigMap",
                        namespace,
                        name: cm.name.clone(),
                    });
                }
            };
            let items = cm.items.as_deref().unwrap_or_default();
            key_payload(items, &data, default_mode, optional).map_err(|MissingKey(key)| {
                VolumeError::KeyMissing {
                    volume: volume.to_owned(),
                    kind: "ConfigMap",
                    namespace: namespace.clone(),
                    name: cm.name.clone(),
                    key,
                }
            })?
        } else if let Some(s) = &source.secret {
            let optional = s.optional.unwrap_or(false);
            let data = match objects.secrets.get(&s.name).cloned().flatten() {
                Some(obj) => secret_data(&obj),
                None if optional => BTreeMap::new(),
                None => {
                    return Err(VolumeError::ObjectMissing {
                        volume: volume.to_owned(),
                        kind: "Secret",
                        namespace,
                        name: s.name.clone(),
                    });
                }
            };
            let items = s.items.as_deref().unwrap_or_default();
            key_payload(items, &data, default_mode, optional).map_err(|MissingKey(key)| {
                VolumeError::KeyMissing {
                    volume: volume.to_owned(),
                    kind: "Secret",
                    namespace: namespace.clone(),
                    name: s.name.clone(),
                    key,
                }
            })?
        } else if let Some(d) = &source.downward_api {
            let items = d.items.as_deref().unwrap_or_default();
            downward::downward_payload(items, pod, default_mode, node).map_err(
                |(path, source)| VolumeError::Field {
                    volume: volume.to_owned(),
                    path,
                    source,
                },
            )?
        } else if let Some(t) = &source.service_account_token {
            let token = objects
                .tokens
                .get(&t.path)
                .ok_or_else(|| VolumeError::Invalid {
                    volume: volume.to_owned(),
                    field: "serviceAccountToken.path".to_owned(),
                    value: t.path.clone(),
                    reason: "no token was requested for it".to_owned(),
                })?;
            let mode = if owners.fs_user.is_some() || owners.fs_group.is_some() {
                TOKEN_OWNED_MODE
            } else {
                default_mode
            };
            Payload::from([(
                t.path.clone(),
                FileProjection {
                    data: token.clone().into_bytes(),
                    mode,
                    fs_user: owners.fs_user,
                },
            )])
        } else if source.cluster_trust_bundle.is_some() {
            return Err(VolumeError::Unsupported {
                volume: volume.to_owned(),
                what: "projected clusterTrustBundle".to_owned(),
            });
        } else {
            return Err(VolumeError::Unsupported {
                volume: volume.to_owned(),
                what: "an empty or unknown projected source".to_owned(),
            });
        };
        payload.extend(part);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        ConfigMapVolumeSource, DownwardAPIVolumeFile, ObjectFieldSelector, ProjectedVolumeSource,
        SecretVolumeSource, ServiceAccountTokenProjection,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::super::downward::NODE_ALLOCATABLE;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            binary_data: Some(BTreeMap::from([(
                "bin".to_owned(),
                ByteString(vec![0, 1, 2]),
            )])),
            ..Default::default()
        }
    }

    fn kube_api_access() -> Volume {
        Volume {
            name: "kube-api-access-abcde".into(),
            projected: Some(ProjectedVolumeSource {
                default_mode: Some(0o644),
                sources: Some(vec![
                    VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            expiration_seconds: Some(3607),
                            path: "token".into(),
                            audience: None,
                        }),
                        ..Default::default()
                    },
                    VolumeProjection {
                        config_map: Some(ConfigMapProjection {
                            name: "kube-root-ca.crt".into(),
                            items: Some(vec![KeyToPath {
                                key: "ca.crt".into(),
                                path: "ca.crt".into(),
                                mode: None,
                            }]),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                    VolumeProjection {
                        downward_api: Some(DownwardAPIProjection {
                            items: Some(vec![DownwardAPIVolumeFile {
                                path: "namespace".into(),
                                field_ref: Some(ObjectFieldSelector {
                                    api_version: Some("v1".into()),
                                    field_path: "metadata.namespace".into(),
                                }),
                                ..Default::default()
                            }]),
                        }),
                        ..Default::default()
                    },
                ]),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn all_keys_or_items_with_modes() {
        let data = BTreeMap::from([
            ("a".to_owned(), b"1".to_vec()),
            ("b".to_owned(), b"2".to_vec()),
        ]);
        let all = key_payload(&[], &data, 0o640, false).unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(all["a"].mode, 0o640);
        let items = [
            KeyToPath {
                key: "a".into(),
                path: "dir/x".into(),
                mode: Some(0o400),
            },
            KeyToPath {
                key: "b".into(),
                path: "y".into(),
                mode: None,
            },
        ];
        let some = key_payload(&items, &data, 0o644, false).unwrap();
        assert_eq!(some["dir/x"].data, b"1");
        assert_eq!(some["dir/x"].mode, 0o400);
        assert_eq!(some["y"].mode, 0o644);
        let missing = [KeyToPath {
            key: "zz".into(),
            path: "z".into(),
            mode: None,
        }];
        assert_eq!(
            key_payload(&missing, &data, 0o644, false),
            Err(MissingKey("zz".into()))
        );
        assert!(
            key_payload(&missing, &data, 0o644, true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn config_map_volume_has_string_and_binary_keys() {
        let v = Volume {
            name: "conf".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: "c".into(),
                default_mode: Some(0o600),
                ..Default::default()
            }),
            ..Default::default()
        };
        let proj = projection_of(&v).unwrap();
        assert_eq!(proj.default_mode, 0o600);
        let objects = Objects {
            config_maps: BTreeMap::from([("c".to_owned(), Some(cm("c", &[("my.cnf", "x")])))]),
            ..Default::default()
        };
        let payload = build_payload(
            "conf",
            &pod(),
            &proj,
            &objects,
            Owners::default(),
            &NODE_ALLOCATABLE,
        )
        .unwrap();
        assert_eq!(payload["my.cnf"].data, b"x");
        assert_eq!(payload["bin"].data, [0, 1, 2]);
        assert_eq!(payload["my.cnf"].mode, 0o600);
    }

    #[test]
    fn missing_objects_are_not_ready_unless_optional() {
        let v = |optional| Volume {
            name: "s".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some("sec".into()),
                optional,
                ..Default::default()
            }),
            ..Default::default()
        };
        let objects = Objects {
            secrets: BTreeMap::from([("sec".to_owned(), None)]),
            ..Default::default()
        };
        let build = |v: &Volume| {
            build_payload(
                "s",
                &pod(),
                &projection_of(v).unwrap(),
                &objects,
                Owners::default(),
                &NODE_ALLOCATABLE,
            )
        };
        let err = build(&v(None)).unwrap_err();
        assert!(err.is_not_ready());
        assert_eq!(err.to_string(), "volume \"s\": Secret ns/sec not found");
        assert!(build(&v(Some(true))).unwrap().is_empty());
    }

    #[test]
    fn kube_api_access_volume_has_token_ca_and_namespace() {
        let proj = projection_of(&kube_api_access()).unwrap();
        let objects = Objects {
            config_maps: BTreeMap::from([(
                "kube-root-ca.crt".to_owned(),
                Some(cm("kube-root-ca.crt", &[("ca.crt", "PEM")])),
            )]),
            tokens: BTreeMap::from([("token".to_owned(), "jwt".to_owned())]),
            ..Default::default()
        };
        let payload = build_payload(
            "kube-api-access-abcde",
            &pod(),
            &proj,
            &objects,
            Owners::default(),
            &NODE_ALLOCATABLE,
        )
        .unwrap();
        assert_eq!(
            payload.keys().collect::<Vec<_>>(),
            ["ca.crt", "namespace", "token"]
        );
        assert_eq!(payload["token"].data, b"jwt");
        assert_eq!(payload["token"].mode, 0o644);
        assert_eq!(payload["namespace"].data, b"ns");
        assert_eq!(payload["ca.crt"].data, b"PEM");

        // With fsGroup or one runAsUser the token is the user's alone (0600).
        let owned = build_payload(
            "kube-api-access-abcde",
            &pod(),
            &proj,
            &objects,
            Owners {
                fs_group: None,
                fs_user: Some(10000),
            },
            &NODE_ALLOCATABLE,
        )
        .unwrap();
        assert_eq!(owned["token"].mode, 0o600);
        assert_eq!(owned["token"].fs_user, Some(10000));
        assert_eq!(owned["ca.crt"].fs_user, None);
    }

    #[test]
    fn a_missing_ca_key_names_the_config_map() {
        let proj = projection_of(&kube_api_access()).unwrap();
        let objects = Objects {
            config_maps: BTreeMap::from([(
                "kube-root-ca.crt".to_owned(),
                Some(cm("kube-root-ca.crt", &[])),
            )]),
            tokens: BTreeMap::from([("token".to_owned(), "jwt".to_owned())]),
            ..Default::default()
        };
        let err = build_payload(
            "v",
            &pod(),
            &proj,
            &objects,
            Owners::default(),
            &NODE_ALLOCATABLE,
        )
        .unwrap_err();
        assert!(err.is_not_ready());
        assert!(
            err.to_string()
                .contains("ConfigMap ns/kube-root-ca.crt has no key \"ca.crt\"")
        );
    }

    #[test]
    fn cluster_trust_bundles_are_refused() {
        let proj = Projection {
            sources: vec![VolumeProjection {
                cluster_trust_bundle: Some(Default::default()),
                ..Default::default()
            }],
            default_mode: 0o644,
        };
        let err = build_payload(
            "v",
            &pod(),
            &proj,
            &Objects::default(),
            Owners::default(),
            &NODE_ALLOCATABLE,
        )
        .unwrap_err();
        assert!(!err.is_not_ready());
        assert!(err.to_string().contains("clusterTrustBundle"));
    }
}
