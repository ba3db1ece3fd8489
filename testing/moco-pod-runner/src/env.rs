//! A container's environment, as the kubelet makes it (`makeEnvironmentVariables`) and the
//! container runtime completes it, and the kubelet's `$(VAR)` expansion.
//!
//! Differences from a real Node, on purpose:
//! - `KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT` and the rest of the `kubernetes`
//!   Service's family point at the API server's own address: there is no kube-proxy, so the
//!   Service's ClusterIP leads nowhere.
//! - Service links (`enableServiceLinks`) are not made: no variables for the namespace's other
//!   Services (MOCO's Pods use DNS names, never these).
//! - `HOSTNAME` (the Pod's hostname) and `PATH` (Docker's default) are added when the
//!   container does not set them, as the container runtime and the image would.
//! - The order is deterministic (the kubelet's is a Go map's): `HOSTNAME` and `PATH`, then
//!   every variable where it was first defined, then the `kubernetes` Service's.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};

use crate::volumes::downward::{self, FieldError, NODE_ALLOCATABLE, NodeAllocatable};
use crate::volumes::objects::get_opt;
use crate::volumes::projected::{Objects, secret_data};

/// `PATH` when the container sets none (Docker's default for images without one).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A container's environment that cannot be made. Every variant names the container, the
/// variable (or `envFrom[i]`) and the object (`ConfigMap ns/name`, a field, a resource).
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A ConfigMap or Secret that is not there (and is not optional): the kubelet's
    /// `CreateContainerConfigError`, retried.
    #[error("container {container:?}: {variable}: {object} not found")]
    ObjectMissing {
        /// The container.
        container: String,
        /// The variable, or `envFrom[i]`.
        variable: String,
        /// `ConfigMap <namespace>/<name>` or `Secret <namespace>/<name>`.
        object: String,
    },
    /// A key the object does not have (and is not optional).
    #[error("container {container:?}: {variable}: couldn't find key {key} in {object}")]
    KeyMissing {
        /// The container.
        container: String,
        /// The variable.
        variable: String,
        /// `ConfigMap <namespace>/<name>` or `Secret <namespace>/<name>`.
        object: String,
        /// The key.
        key: String,
    },
    /// Reading an object from the API server failed.
    #[error("container {container:?}: {variable}: reading {object}: {source}")]
    Api {
        /// The container.
        container: String,
        /// The first variable (or `envFrom[i]`) that needs it.
        variable: String,
        /// `ConfigMap <namespace>/<name>` or `Secret <namespace>/<name>`.
        object: String,
        /// The error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A `fieldRef` or `resourceFieldRef` that cannot be read (the error names the field, the
    /// resource or the container).
    #[error("container {container:?}: {variable}: {source}")]
    Field {
        /// The container.
        container: String,
        /// The variable.
        variable: String,
        /// Why.
        #[source]
        source: FieldError,
    },
    /// A value with a NUL byte, which no environment can hold.
    #[error("container {container:?}: {variable}: the value from {object} has a NUL byte")]
    Nul {
        /// The container.
        container: String,
        /// The variable.
        variable: String,
        /// Where the value came from.
        object: String,
    },
}

impl EnvError {
    /// Whether trying again later may succeed without the Pod changing (a missing object or key,
    /// an API server that did not answer, a status field not filled in yet): the kubelet's
    /// `CreateContainerConfigError`, which it retries.
    pub fn is_not_ready(&self) -> bool {
        match self {
            EnvError::ObjectMissing { .. } | EnvError::KeyMissing { .. } | EnvError::Api { .. } => {
                true
            }
            EnvError::Field { source, .. } => source.is_not_ready(),
            EnvError::Nul { .. } => false,
        }
    }
}

/// The kubelet's expansion (`third_party/forked/golang/expansion`): `$(VAR)` is replaced by
/// `mapping(VAR)`, or left as written when that is `None`; `$$` is a `$`; a `$` before anything
/// else, and an unterminated `$(`, stay as they are. The Go code copies the byte after a lone
/// `$` as a rune, which garbles a non-ASCII character; here the character is kept whole.
pub fn expand_with(input: &str, mut mapping: impl FnMut(&str) -> Option<String>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.push_str(&input[checkpoint..cursor]);
            let rest = &input[cursor + 1..];
            let advance = match bytes[cursor + 1] {
                b'$' => {
                    out.push('$');
                    1
                }
                b'(' => match rest[1..].find(')') {
                    Some(end) => {
                        let name = &rest[1..=end];
                        match mapping(name) {
                            Some(value) => out.push_str(&value),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        end + 2
                    }
                    None => {
                        out.push_str("$(");
                        1
                    }
                },
                b if b.is_ascii() => {
                    out.push('$');
                    out.push(char::from(b));
                    1
                }
                _ => {
                    out.push('$');
                    0
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.push_str(&input[checkpoint.min(input.len())..]);
    out
}

/// The last value of `name` in `env`.
pub fn lookup<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `$(VAR)` expansion against `env`, for `command`, `args` and values: a defined variable is
/// replaced (the last definition wins), an undefined one left as written.
pub fn expand(s: &str, env: &[(String, String)]) -> String {
    expand_with(s, |name| lookup(env, name).map(str::to_owned))
}

/// The variables of the `kubernetes` Service (`FromServices` of the kubelet), pointing at the
/// API server itself: `KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT`,
/// `KUBERNETES_SERVICE_PORT_HTTPS`, `KUBERNETES_PORT`, `KUBERNETES_PORT_<port>_TCP` and its
/// `_PROTO`, `_PORT`, `_ADDR`.
pub fn service_env(api_server: SocketAddr) -> Vec<(String, String)> {
    let host = api_server.ip().to_string();
    let port = api_server.port().to_string();
    let url = format!("tcp://{api_server}");
    let prefix = format!("KUBERNETES_PORT_{port}_TCP");
    vec![
        ("KUBERNETES_SERVICE_HOST".into(), host.clone()),
        ("KUBERNETES_SERVICE_PORT".into(), port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.clone()),
        ("KUBERNETES_PORT".into(), url.clone()),
        (prefix.clone(), url),
        (format!("{prefix}_PROTO"), "tcp".into()),
        (format!("{prefix}_PORT"), port),
        (format!("{prefix}_ADDR"), host),
    ]
}

/// The Pod's hostname: `spec.hostname` or its name, cut to 63 characters (without a trailing
/// `-` or `.`), as the kubelet's `GeneratePodHostNameAndDomain`.
pub fn pod_hostname(pod: &Pod) -> String {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let hostname = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or(name);
    if hostname.len() <= 63 {
        return hostname;
    }
    let mut cut = 63;
    while !hostname.is_char_boundary(cut) {
        cut -= 1;
    }
    hostname[..cut].trim_end_matches(['-', '.']).to_owned()
}

/// The ConfigMaps and Secrets `container`'s environment names.
pub fn referenced(container: &Container) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cms = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    for from in container.env_from.iter().flatten() {
        if let Some(c) = &from.config_map_ref {
            cms.insert(c.name.clone());
        }
        if let Some(s) = &from.secret_ref {
            secrets.insert(s.name.clone());
        }
    }
    for var in container.env.iter().flatten() {
        let Some(from) = &var.value_from else {
            continue;
        };
        if let Some(c) = &from.config_map_key_ref {
            cms.insert(c.name.clone());
        }
        if let Some(s) = &from.secret_key_ref {
            secrets.insert(s.name.clone());
        }
    }
    (cms, secrets)
}

/// Sets `name` in `env` where it was first defined, or appends it.
fn set(env: &mut Vec<(String, String)>, name: &str, value: String) {
    match env.iter_mut().find(|(k, _)| k == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name.to_owned(), value)),
    }
}

/// Whether an `envFrom` key can be a variable at all: the kubelet (v1.36) takes every key,
/// whatever its characters (ConfigMap and Secret keys are `[-._a-zA-Z0-9]+`); only a key no
/// environment can hold (empty, with `=` or NUL) is skipped here.
pub fn usable_key(key: &str) -> bool {
    !key.is_empty() && !key.contains(['=', '\0'])
}

/// `container`'s environment from the fetched `objects` (ConfigMaps and Secrets by name, `None`
/// when not found), in the kubelet's order: `envFrom` (with `prefix`), then `env` in order
/// (`value` expanded against the variables so far and the `kubernetes` Service's; `valueFrom`
/// resolved); then the `kubernetes` Service's variables not defined, and `HOSTNAME` and
/// `PATH` when not defined. See the module's notes for the differences from a real Node.
pub fn build(
    pod: &Pod,
    container: &Container,
    objects: &Objects,
    api_server: SocketAddr,
    node: &NodeAllocatable,
) -> Result<Vec<(String, String)>, EnvError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let cname = container.name.clone();
    let service = service_env(api_server);
    let mut env: Vec<(String, String)> = Vec::new();
    let object = |kind: &str, name: &str| format!("{kind} {namespace}/{name}");
    let missing = |variable: String, kind: &str, name: &str| EnvError::ObjectMissing {
        container: cname.clone(),
        variable,
        object: object(kind, name),
    };
    let text = |variable: &str, object: String, bytes: Vec<u8>| {
        if bytes.contains(&0) {
            return Err(EnvError::Nul {
                container: cname.clone(),
                variable: variable.to_owned(),
                object,
            });
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };

    for (i, from) in container.env_from.iter().flatten().enumerate() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let variable = format!("envFrom[{i}]");
        let (kind, name, data) = if let Some(r) = &from.config_map_ref {
            let found = objects.config_maps.get(&r.name).cloned().flatten();
            match found {
                Some(cm) => ("ConfigMap", r.name.clone(), config_map_only_data(&cm)),
                None if r.optional.unwrap_or(false) => continue,
                None => return Err(missing(variable, "ConfigMap", &r.name)),
            }
        } else if let Some(r) = &from.secret_ref {
            match objects.secrets.get(&r.name).cloned().flatten() {
                Some(s) => ("Secret", r.name.clone(), secret_data(&s)),
                None if r.optional.unwrap_or(false) => continue,
                None => return Err(missing(variable, "Secret", &r.name)),
            }
        } else {
            continue;
        };
        for (key, value) in data {
            let key = format!("{prefix}{key}");
            if !usable_key(&key) {
                continue;
            }
            let value = text(&key, object(kind, &name), value)?;
            set(&mut env, &key, value);
        }
    }

    for var in container.env.iter().flatten() {
        let vname = var.name.as_str();
        let value = var.value.clone().unwrap_or_default();
        let value = if !value.is_empty() {
            let so_far = &env;
            expand_with(&value, |name| {
                lookup(so_far, name)
                    .or_else(|| lookup(&service, name))
                    .map(str::to_owned)
            })
        } else if let Some(from) = &var.value_from {
            if let Some(f) = &from.field_ref {
                downward::field_value(pod, f.api_version.as_deref(), &f.field_path).map_err(
                    |source| EnvError::Field {
                        container: cname.clone(),
                        variable: vname.to_owned(),
                        source,
                    },
                )?
            } else if let Some(r) = &from.resource_field_ref {
                let field_err = |source| EnvError::Field {
                    container: cname.clone(),
                    variable: vname.to_owned(),
                    source,
                };
                let target = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
                    None => container,
                    Some(other) => downward::find_container(pod, other)
                        .ok_or_else(|| field_err(FieldError::NoContainer(other.to_owned())))?,
                };
                downward::resource_value(r, target, node).map_err(field_err)?
            } else if let Some(r) = &from.config_map_key_ref {
                let optional = r.optional.unwrap_or(false);
                let Some(cm) = objects.config_maps.get(&r.name).cloned().flatten() else {
                    if optional {
                        continue;
                    }
                    return Err(missing(vname.to_owned(), "ConfigMap", &r.name));
                };
                let Some(v) = cm.data.as_ref().and_then(|d| d.get(&r.key)) else {
                    if optional {
                        continue;
                    }
                    return Err(EnvError::KeyMissing {
                        container: cname.clone(),
                        variable: vname.to_owned(),
                        object: object("ConfigMap", &r.name),
                        key: r.key.clone(),
                    });
                };
                text(vname, object("ConfigMap", &r.name), v.clone().into_bytes())?
            } else if let Some(r) = &from.secret_key_ref {
                let optional = r.optional.unwrap_or(false);
                let Some(s) = objects.secrets.get(&r.name).cloned().flatten() else {
                    if optional {
                        continue;
                    }
                    return Err(missing(vname.to_owned(), "Secret", &r.name));
                };
                let Some(v) = s.data.as_ref().and_then(|d| d.get(&r.key)) else {
                    if optional {
                        continue;
                    }
                    return Err(EnvError::KeyMissing {
                        container: cname.clone(),
                        variable: vname.to_owned(),
                        object: object("Secret", &r.name),
                        key: r.key.clone(),
                    });
                };
                text(vname, object("Secret", &r.name), v.0.clone())?
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        set(&mut env, vname, value);
    }

    let mut out = Vec::with_capacity(env.len() + service.len() + 2);
    if lookup(&env, "HOSTNAME").is_none() {
        out.push(("HOSTNAME".to_owned(), pod_hostname(pod)));
    }
    if lookup(&env, "PATH").is_none() {
        out.push(("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    }
    for (k, v) in service {
        if lookup(&env, &k).is_none() {
            env.push((k, v));
        }
    }
    out.extend(env);
    Ok(out)
}

/// A ConfigMap's `data` (not `binaryData`: the kubelet reads only `data` for the environment).
fn config_map_only_data(cm: &ConfigMap) -> std::collections::BTreeMap<String, Vec<u8>> {
    cm.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect()
}

/// `container`'s environment: reads the ConfigMaps and Secrets it names (from the Pod's
/// namespace), then [`build`] with the runner's Node allocatable ([`NODE_ALLOCATABLE`]) and
/// the `kubernetes` Service's variables pointing at `api_server`. Status fields (`podIP`,
/// `hostIP`) are read from `pod.status`: pass a Pod whose status carries the addresses the
/// worker gave it.
pub async fn resolve(
    client: &kube::Client,
    pod: &Pod,
    container: &Container,
    api_server: SocketAddr,
) -> Result<Vec<(String, String)>, EnvError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let (cms, secrets) = referenced(container);
    let mut objects = Objects::default();
    let api_err = |kind: &str, name: &str| {
        let variable = first_user(container, kind, name);
        let object = format!("{kind} {namespace}/{name}");
        let cname = container.name.clone();
        move |source| EnvError::Api {
            container: cname,
            variable,
            object,
            source: Box::new(source),
        }
    };
    for name in cms {
        let got = get_opt::<ConfigMap>(client, &namespace, &name)
            .await
            .map_err(api_err("ConfigMap", &name))?;
        objects.config_maps.insert(name, got);
    }
    for name in secrets {
        let got = get_opt::<Secret>(client, &namespace, &name)
            .await
            .map_err(api_err("Secret", &name))?;
        objects.secrets.insert(name, got);
    }
    build(pod, container, &objects, api_server, &NODE_ALLOCATABLE)
}

/// The first variable (or `envFrom[i]`) of `container` that reads object `name` of `kind`.
fn first_user(container: &Container, kind: &str, name: &str) -> String {
    for (i, from) in container.env_from.iter().flatten().enumerate() {
        let hit = match kind {
            "ConfigMap" => from.config_map_ref.as_ref().is_some_and(|r| r.name == name),
            _ => from.secret_ref.as_ref().is_some_and(|r| r.name == name),
        };
        if hit {
            return format!("envFrom[{i}]");
        }
    }
    for var in container.env.iter().flatten() {
        let Some(from) = &var.value_from else {
            continue;
        };
        let hit = match kind {
            "ConfigMap" => from
                .config_map_key_ref
                .as_ref()
                .is_some_and(|r| r.name == name),
            _ => from.secret_key_ref.as_ref().is_some_and(|r| r.name == name),
        };
        if hit {
            return var.name.clone();
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource,
        ObjectFieldSelector, PodSpec, PodStatus, ResourceFieldSelector, ResourceRequirements,
        SecretEnvSource, SecretKeySelector,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// The kubelet's own cases (`expand_test.go`, `doExpansionTest`), run with both its
    /// one-context and its two-context mappings.
    #[test]
    fn expansion_matches_the_kubelets_test_cases() {
        let cases: &[(&str, &str, &str)] = &[
            ("whole string", "$(VAR_A)", "A"),
            ("repeat", "$(VAR_A)-$(VAR_A)", "A-A"),
            ("beginning", "$(VAR_A)-1", "A-1"),
            ("middle", "___$(VAR_B)___", "___B___"),
            ("end", "___$(VAR_C)", "___C"),
            ("compound", "$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
            ("escape & expand", "$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
            (
                "compound escape",
                "$$(VAR_A)_$$(VAR_B)",
                "$(VAR_A)_$(VAR_B)",
            ),
            ("mixed in escapes", "f000-$$VAR_A", "f000-$VAR_A"),
            ("backslash escape ignored", "foo\\$(VAR_C)bar", "foo\\Cbar"),
            (
                "backslash escape ignored",
                "foo\\\\$(VAR_C)bar",
                "foo\\\\Cbar",
            ),
            (
                "lots of backslashes",
                "foo\\\\\\\\$(VAR_A)bar",
                "foo\\\\\\\\Abar",
            ),
            (
                "nested var references",
                "$(VAR_A$(VAR_B))",
                "$(VAR_A$(VAR_B))",
            ),
            (
                "nested var references second type",
                "$(VAR_A$(VAR_B)",
                "$(VAR_A$(VAR_B)",
            ),
            ("value is a reference", "$(VAR_REF)", "$(VAR_A)"),
            (
                "value is a reference x 2",
                "%%$(VAR_REF)--$(VAR_REF)%%",
                "%%$(VAR_A)--$(VAR_A)%%",
            ),
            ("empty var", "foo$(VAR_EMPTY)bar", "foobar"),
            (
                "unterminated expression",
                "foo$(VAR_Awhoops!",
                "foo$(VAR_Awhoops!",
            ),
            (
                "expression without operator",
                "f00__(VAR_A)__",
                "f00__(VAR_A)__",
            ),
            ("shell special vars pass through", "$?_boo_$!", "$?_boo_$!"),
            ("bare operators are ignored", "$VAR_A", "$VAR_A"),
            (
                "undefined vars are passed through",
                "$(VAR_DNE)",
                "$(VAR_DNE)",
            ),
            (
                "multiple (even) operators, var undefined",
                "$$$$$$(BIG_MONEY)",
                "$$$(BIG_MONEY)",
            ),
            (
                "multiple (even) operators, var defined",
                "$$$$$$(VAR_A)",
                "$$$(VAR_A)",
            ),
            (
                "multiple (odd) operators, var undefined",
                "$$$$$$$(GOOD_ODDS)",
                "$$$$(GOOD_ODDS)",
            ),
            (
                "multiple (odd) operators, var defined",
                "$$$$$$$(VAR_A)",
                "$$$A",
            ),
            ("missing open expression", "$VAR_A)", "$VAR_A)"),
            ("shell syntax ignored", "${VAR_A}", "${VAR_A}"),
            (
                "trailing incomplete expression not consumed",
                "$(VAR_B)_______$(A",
                "B_______$(A",
            ),
            (
                "trailing incomplete expression, no content, is not consumed",
                "$(VAR_C)_______$(",
                "C_______$(",
            ),
            (
                "operator at end of input string is preserved",
                "$(VAR_A)foobarzab$",
                "Afoobarzab$",
            ),
            (
                "shell escaped incomplete expr",
                "foo-\\$(VAR_A",
                "foo-\\$(VAR_A",
            ),
            ("lots of $( in middle", "--$($($($($--", "--$($($($($--"),
            (
                "lots of $( in beginning",
                "$($($($($--foo$(",
                "$($($($($--foo$(",
            ),
            ("lots of $( at end", "foo0--$($($($(", "foo0--$($($($("),
            (
                "escaped operators in variable names are not escaped",
                "$(foo$$var)",
                "$(foo$$var)",
            ),
            ("newline not expanded", "\n", "\n"),
        ];
        let one: Vec<(String, String)> = [
            ("VAR_A", "A"),
            ("VAR_B", "B"),
            ("VAR_C", "C"),
            ("VAR_REF", "$(VAR_A)"),
            ("VAR_EMPTY", ""),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let (first, second) = one.split_at(2);
        for (name, input, expected) in cases {
            assert_eq!(expand(input, &one), *expected, "{name}");
            let dual = expand_with(input, |n| {
                lookup(first, n)
                    .or_else(|| lookup(second, n))
                    .map(str::to_owned)
            });
            assert_eq!(dual, *expected, "{name} (two contexts)");
        }
    }

    /// `TestMapReference`: each value expanded against the declared values so far.
    #[test]
    fn expansion_chains_through_earlier_values() {
        let mut declared: Vec<(String, String)> = Vec::new();
        for (k, v) in [("FOO", "bar"), ("ZOO", "$(FOO)-1"), ("BLU", "$(ZOO)-2")] {
            let value = expand(v, &declared);
            declared.push((k.to_owned(), value));
        }
        assert_eq!(lookup(&declared, "BLU"), Some("bar-1-2"));
    }

    #[test]
    fn expansion_keeps_non_ascii_whole() {
        let env = vec![("É".to_owned(), "x".to_owned())];
        assert_eq!(expand("$é-$(É)-日本$", &env), "$é-x-日本$");
        assert_eq!(expand("", &env), "");
        assert_eq!(expand("$", &env), "$");
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("mysql-0".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-1".into()),
                labels: Some(BTreeMap::from([("app".to_owned(), "moco".to_owned())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-0".into()),
                service_account_name: Some("moco-sa".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                pod_ip: Some("10.200.1.7".into()),
                host_ip: Some("10.200.0.1".into()),
                ..Default::default()
            }),
        }
    }

    fn api() -> SocketAddr {
        "10.200.0.254:6443".parse().unwrap()
    }

    fn value(name: &str, v: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(v.into()),
            value_from: None,
        }
    }

    fn field(name: &str, path: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: Some("v1".into()),
                    field_path: path.into(),
                }),
                ..Default::default()
            }),
        }
    }

    fn objects() -> Objects {
        Objects {
            config_maps: BTreeMap::from([
                (
                    "cm".to_owned(),
                    Some(ConfigMap {
                        data: Some(BTreeMap::from([
                            ("A".to_owned(), "from-cm".to_owned()),
                            ("index.html".to_owned(), "dotted".to_owned()),
                        ])),
                        binary_data: Some(BTreeMap::from([(
                            "BIN".to_owned(),
                            ByteString(b"b".to_vec()),
                        )])),
                        ..Default::default()
                    }),
                ),
                ("gone".to_owned(), None),
            ]),
            secrets: BTreeMap::from([(
                "sec".to_owned(),
                Some(Secret {
                    data: Some(BTreeMap::from([(
                        "PASSWORD".to_owned(),
                        ByteString(b"s3cret".to_vec()),
                    )])),
                    ..Default::default()
                }),
            )]),
            tokens: BTreeMap::new(),
        }
    }

    #[test]
    fn kubelet_order_env_from_then_env_with_expansion() {
        let c = Container {
            name: "mysqld".into(),
            env_from: Some(vec![
                EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource {
                        name: "cm".into(),
                        optional: None,
                    }),
                    prefix: Some("CM_".into()),
                    secret_ref: None,
                },
                EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: "sec".into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
                EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource {
                        name: "gone".into(),
                        optional: Some(true),
                    }),
                    ..Default::default()
                },
            ]),
            env: Some(vec![
                field("POD_NAME", "metadata.name"),
                value("GREETING", "hi $(POD_NAME) $(CM_A) $$(POD_NAME) $(NOPE)"),
                value(
                    "API",
                    "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)",
                ),
                value("LATER", "$(EARLY)"),
                value("EARLY", "e"),
                value("CM_A", "overridden"),
                field("POD_IP", "status.podIP"),
                field("NODE_IP", "status.hostIP"),
                field("LABELS", "metadata.labels"),
                EnvVar {
                    name: "EMPTY".into(),
                    value: Some(String::new()),
                    value_from: None,
                },
            ]),
            ..Default::default()
        };
        let env = build(&pod(), &c, &objects(), api(), &NODE_ALLOCATABLE).unwrap();
        let get = |k| lookup(&env, k).unwrap();
        assert_eq!(env[0], ("HOSTNAME".into(), "mysql-0".into()));
        assert_eq!(env[1], ("PATH".into(), DEFAULT_PATH.into()));
        assert_eq!(get("CM_A"), "overridden");
        assert_eq!(get("CM_index.html"), "dotted"); // the kubelet no longer skips such keys
        assert!(
            lookup(&env, "CM_BIN").is_none(),
            "binaryData is not in the environment"
        );
        assert_eq!(get("PASSWORD"), "s3cret");
        assert_eq!(get("GREETING"), "hi mysql-0 from-cm $(POD_NAME) $(NOPE)");
        assert_eq!(get("API"), "https://10.200.0.254:6443");
        assert_eq!(get("LATER"), "$(EARLY)");
        assert_eq!(get("POD_IP"), "10.200.1.7");
        assert_eq!(get("NODE_IP"), "10.200.0.1");
        assert_eq!(get("LABELS"), "app=\"moco\"");
        assert_eq!(get("EMPTY"), "");
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), "10.200.0.254");
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), "6443");
        assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), "6443");
        assert_eq!(get("KUBERNETES_PORT"), "tcp://10.200.0.254:6443");
        assert_eq!(get("KUBERNETES_PORT_6443_TCP"), "tcp://10.200.0.254:6443");
        assert_eq!(get("KUBERNETES_PORT_6443_TCP_PROTO"), "tcp");
        assert_eq!(get("KUBERNETES_PORT_6443_TCP_PORT"), "6443");
        assert_eq!(get("KUBERNETES_PORT_6443_TCP_ADDR"), "10.200.0.254");
        // CM_A keeps the place of its first definition (envFrom) with env's value.
        let pos = |k: &str| env.iter().position(|(n, _)| n == k).unwrap();
        assert!(pos("CM_A") < pos("POD_NAME"));
        assert!(pos("EMPTY") < pos("KUBERNETES_SERVICE_HOST"));
        let names: BTreeSet<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names.len(), env.len(), "no duplicates");
    }

    #[test]
    fn user_values_win_over_runtime_and_service_defaults() {
        let c = Container {
            name: "c".into(),
            env: Some(vec![
                value("PATH", "/opt/bin"),
                value("HOSTNAME", "h"),
                value("KUBERNETES_SERVICE_HOST", "x"),
            ]),
            ..Default::default()
        };
        let env = build(&pod(), &c, &objects(), api(), &NODE_ALLOCATABLE).unwrap();
        assert_eq!(env[0], ("PATH".into(), "/opt/bin".into()));
        assert_eq!(lookup(&env, "HOSTNAME"), Some("h"));
        assert_eq!(
            env.iter()
                .filter(|(k, _)| k == "KUBERNETES_SERVICE_HOST")
                .count(),
            1
        );
        assert_eq!(lookup(&env, "KUBERNETES_SERVICE_HOST"), Some("x"));
    }

    fn key_ref(
        name: &str,
        cm: Option<(&str, &str, Option<bool>)>,
        sec: Option<(&str, &str, Option<bool>)>,
    ) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(EnvVarSource {
                config_map_key_ref: cm.map(|(n, k, o)| ConfigMapKeySelector {
                    name: n.into(),
                    key: k.into(),
                    optional: o,
                }),
                secret_key_ref: sec.map(|(n, k, o)| SecretKeySelector {
                    name: n.into(),
                    key: k.into(),
                    optional: o,
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn key_refs_and_optional() {
        let build1 = |var: EnvVar| {
            let c = Container {
                name: "c".into(),
                env: Some(vec![var]),
                ..Default::default()
            };
            build(&pod(), &c, &objects(), api(), &NODE_ALLOCATABLE)
        };
        let env = build1(key_ref("P", None, Some(("sec", "PASSWORD", None)))).unwrap();
        assert_eq!(lookup(&env, "P"), Some("s3cret"));
        let env = build1(key_ref("A", Some(("cm", "A", None)), None)).unwrap();
        assert_eq!(lookup(&env, "A"), Some("from-cm"));

        let e = build1(key_ref("X", Some(("gone", "A", None)), None)).unwrap_err();
        assert!(e.is_not_ready());
        assert_eq!(
            e.to_string(),
            "container \"c\": X: ConfigMap ns/gone not found"
        );
        let env = build1(key_ref("X", Some(("gone", "A", Some(true))), None)).unwrap();
        assert!(lookup(&env, "X").is_none());
        let e = build1(key_ref("X", Some(("cm", "NOPE", None)), None)).unwrap_err();
        assert!(e.is_not_ready());
        assert!(
            e.to_string()
                .contains("couldn't find key NOPE in ConfigMap ns/cm"),
            "{e}"
        );
        let env = build1(key_ref("X", Some(("cm", "NOPE", Some(true))), None)).unwrap();
        assert!(lookup(&env, "X").is_none());
        let e = build1(key_ref("X", None, Some(("nosuch", "K", None)))).unwrap_err();
        assert!(e.to_string().contains("Secret ns/nosuch"), "{e}");
    }

    #[test]
    fn missing_env_from_names_the_entry() {
        let c = Container {
            name: "c".into(),
            env_from: Some(vec![EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: "nosuch".into(),
                    optional: Some(false),
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let e = build(&pod(), &c, &objects(), api(), &NODE_ALLOCATABLE).unwrap_err();
        assert_eq!(
            e.to_string(),
            "container \"c\": envFrom[0]: Secret ns/nosuch not found"
        );
        assert_eq!(first_user(&c, "Secret", "nosuch"), "envFrom[0]");
    }

    #[test]
    fn resource_refs_default_to_this_container_and_the_node() {
        let res =
            |name: &str, resource: &str, container: Option<&str>, divisor: Option<&str>| EnvVar {
                name: name.into(),
                value: None,
                value_from: Some(EnvVarSource {
                    resource_field_ref: Some(ResourceFieldSelector {
                        container_name: container.map(Into::into),
                        resource: resource.into(),
                        divisor: divisor.map(|d| Quantity(d.into())),
                    }),
                    ..Default::default()
                }),
            };
        let mut p = pod();
        let other = Container {
            name: "agent".into(),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([(
                    "memory".to_owned(),
                    Quantity("256Mi".into()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = Container {
            name: "mysqld".into(),
            env: Some(vec![
                res("MEM", "limits.memory", None, Some("1Mi")),
                res("CPU", "limits.cpu", Some(""), None),
                res("AGENT_MEM", "limits.memory", Some("agent"), Some("1Mi")),
            ]),
            ..Default::default()
        };
        p.spec.as_mut().unwrap().containers = vec![c.clone(), other];
        let env = build(&p, &c, &objects(), api(), &NODE_ALLOCATABLE).unwrap();
        assert_eq!(lookup(&env, "MEM"), Some("8192"));
        assert_eq!(lookup(&env, "CPU"), Some("2"));
        assert_eq!(lookup(&env, "AGENT_MEM"), Some("256"));
        let bad = Container {
            name: "mysqld".into(),
            env: Some(vec![res("X", "limits.memory", Some("ghost"), None)]),
            ..Default::default()
        };
        let e = build(&p, &bad, &objects(), api(), &NODE_ALLOCATABLE).unwrap_err();
        assert!(e.to_string().contains("ghost"), "{e}");
    }

    #[test]
    fn unknown_host_ip_is_not_ready() {
        let mut p = pod();
        p.status = None;
        let c = Container {
            name: "c".into(),
            env: Some(vec![
                field("NODE_IP", "status.hostIP"),
                field("IP", "status.podIP"),
            ]),
            ..Default::default()
        };
        let e = build(&p, &c, &objects(), api(), &NODE_ALLOCATABLE).unwrap_err();
        assert!(e.is_not_ready());
        assert!(e.to_string().contains("NODE_IP"), "{e}");
        let c = Container {
            name: "c".into(),
            env: Some(vec![field("IP", "status.podIP")]),
            ..Default::default()
        };
        let env = build(&p, &c, &objects(), api(), &NODE_ALLOCATABLE).unwrap();
        assert_eq!(lookup(&env, "IP"), Some(""));
    }

    #[test]
    fn nul_bytes_are_refused() {
        let mut o = objects();
        o.secrets.insert(
            "nul".into(),
            Some(Secret {
                data: Some(BTreeMap::from([(
                    "K".to_owned(),
                    ByteString(b"a\0b".to_vec()),
                )])),
                ..Default::default()
            }),
        );
        let c = Container {
            name: "c".into(),
            env: Some(vec![key_ref("V", None, Some(("nul", "K", None)))]),
            ..Default::default()
        };
        let e = build(&pod(), &c, &o, api(), &NODE_ALLOCATABLE).unwrap_err();
        assert!(!e.is_not_ready());
        assert!(e.to_string().contains("Secret ns/nul"), "{e}");
    }

    #[test]
    fn hostnames_and_service_env() {
        let mut p = pod();
        assert_eq!(pod_hostname(&p), "mysql-0");
        p.spec.as_mut().unwrap().hostname = Some("h".into());
        assert_eq!(pod_hostname(&p), "h");
        p.spec.as_mut().unwrap().hostname = Some(format!("{}-.x", "a".repeat(61)));
        assert_eq!(pod_hostname(&p), "a".repeat(61));
        let v6 = service_env("[fd00::1]:443".parse().unwrap());
        assert_eq!(lookup(&v6, "KUBERNETES_SERVICE_HOST"), Some("fd00::1"));
        assert_eq!(lookup(&v6, "KUBERNETES_PORT"), Some("tcp://[fd00::1]:443"));
        assert_eq!(lookup(&v6, "KUBERNETES_PORT_443_TCP_ADDR"), Some("fd00::1"));
        assert!(usable_key("index.html"));
        assert!(!usable_key("a=b"));
        assert!(!usable_key(""));
    }
}
