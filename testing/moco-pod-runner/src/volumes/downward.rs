//! The downward API: a Pod's own fields and its containers' resources as text, shared by
//! `downwardAPI` volume files and `valueFrom` environment variables ([`crate::env`]).
//!
//! The rules are the kubelet's: `fieldpath.ExtractFieldPathAsString` and
//! `podFieldSelectorRuntimeValue` for fields, `ExtractContainerResourceValue` for resources
//! (an unset limit reads as the Node's allocatable, values are rounded up to the divisor).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, Pod, ResourceFieldSelector};
use moco_core::resources::quantity::Quantity;

use super::atomic::{FileProjection, Payload};

/// What each Node of the runner advertises as allocatable (quantity text, as the Node status
/// carries it). An unset container limit reads as this through the downward API, as the
/// kubelet does; `node.rs` must advertise the same values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeAllocatable {
    /// CPU (`2`).
    pub cpu: &'static str,
    /// Memory (`8Gi`).
    pub memory: &'static str,
    /// Ephemeral storage (`100Gi`).
    pub ephemeral_storage: &'static str,
}

/// The allocatable resources of every runner Node: 2 CPUs, 8Gi of memory, 100Gi of ephemeral
/// storage.
pub const NODE_ALLOCATABLE: NodeAllocatable = NodeAllocatable {
    cpu: "2",
    memory: "8Gi",
    ephemeral_storage: "100Gi",
};

/// Why a field or resource could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// A field path the downward API does not offer.
    #[error("unsupported fieldPath {0:?}")]
    UnsupportedField(String),
    /// `fieldRef.apiVersion` other than `v1`.
    #[error("unsupported apiVersion {0:?} for fieldPath")]
    UnsupportedVersion(String),
    /// A subscript that is not a qualified name (`metadata.labels['a b']`).
    #[error("invalid key subscript in {field:?}: {reason}")]
    BadSubscript {
        /// The field path.
        field: String,
        /// What is wrong with the key.
        reason: String,
    },
    /// A status field the Pod does not carry yet (its Node address before it is known).
    #[error("{0} is not known yet")]
    NotKnownYet(String),
    /// A resource name the downward API does not offer.
    #[error("unsupported container resource {0:?}")]
    UnsupportedResource(String),
    /// `resourceFieldRef.containerName` names no container of the Pod.
    #[error("container {0:?} not found in the Pod")]
    NoContainer(String),
    /// A quantity (divisor or resource value) that does not parse.
    #[error("invalid quantity {text:?}: {reason}")]
    BadQuantity {
        /// The text.
        text: String,
        /// Why.
        reason: String,
    },
}

impl FieldError {
    /// Whether reading again later may succeed (the Pod's status is still being filled in).
    pub fn is_not_ready(&self) -> bool {
        matches!(self, FieldError::NotKnownYet(_))
    }
}

/// `metadata.labels['key']` → (`metadata.labels`, `key`); the kubelet's
/// `SplitMaybeSubscriptedPath`.
pub fn split_subscript(field: &str) -> Option<(&str, &str)> {
    let s = field.strip_suffix("']")?;
    let (path, key) = s.split_once("['")?;
    if path.is_empty() {
        return None;
    }
    Some((path, key))
}

/// A map as the kubelet writes labels and annotations: `key="value"` lines sorted by key, the
/// value quoted as Go's `strconv.Quote` does, no newline after the last.
pub fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Go's `strconv.Quote`: `"` and `\` escaped, `\a\b\f\n\r\t\v` by name, other control
/// characters as `\xHH`, non-printable non-ASCII as `\uHHHH`/`\UHHHHHHHH`, everything else as
/// is. Go's `unicode.IsPrint` is approximated by "not a control, format or whitespace
/// character" outside ASCII (label values are ASCII anyway; annotations rarely are not).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if go_printable(c) => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

fn go_printable(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let cp = c as u32;
    // What Go does not print beyond controls and spaces: format characters (soft hyphen,
    // zero-width and bidi marks, BOM, tags), private use, noncharacters.
    let hidden = matches!(
        cp,
        0xad | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0xfeff
            | 0xe0000..=0xe007f
            | 0xe000..=0xf8ff
            | 0xf0000..
            | 0xfdd0..=0xfdef
    ) || cp & 0xfffe == 0xfffe;
    !c.is_control() && !c.is_whitespace() && !hidden
}

/// A qualified name (`prefix/name`, name `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?` of at most
/// 63, prefix a DNS subdomain): what a label or annotation subscript must be.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok_label = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if prefix.is_empty() || prefix.len() > 253 || !prefix.split('.').all(ok_label) {
            return Err(format!("prefix {prefix:?} must be a DNS subdomain"));
        }
    }
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let bytes = name.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().copied().is_some_and(alnum)
        && bytes.last().copied().is_some_and(alnum)
        && bytes
            .iter()
            .all(|&b| alnum(b) || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "name part {name:?} must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
        ))
    }
}

/// The Pod's addresses: `status.podIPs` (or `status.podIP`), empty before they are known.
pub fn pod_ips(pod: &Pod) -> Vec<String> {
    let status = pod.status.as_ref();
    let ips: Vec<String> = status
        .and_then(|s| s.pod_ips.as_ref())
        .map(|ips| ips.iter().map(|ip| ip.ip.clone()).collect())
        .unwrap_or_default();
    if !ips.is_empty() {
        return ips;
    }
    status
        .and_then(|s| s.pod_ip.clone())
        .filter(|ip| !ip.is_empty())
        .into_iter()
        .collect()
}

/// The Node's addresses: `status.hostIPs` (or `status.hostIP`), empty before they are known.
pub fn host_ips(pod: &Pod) -> Vec<String> {
    let status = pod.status.as_ref();
    let ips: Vec<String> = status
        .and_then(|s| s.host_ips.as_ref())
        .map(|ips| ips.iter().map(|ip| ip.ip.clone()).collect())
        .unwrap_or_default();
    if !ips.is_empty() {
        return ips;
    }
    status
        .and_then(|s| s.host_ip.clone())
        .filter(|ip| !ip.is_empty())
        .into_iter()
        .collect()
}

/// The value of `fieldRef` `field` of `pod`, as the kubelet gives it to an environment variable
/// (`metadata.*`, `spec.nodeName`, `spec.serviceAccountName`, `status.hostIP(s)`,
/// `status.podIP(s)`). Volume files use it too: the API server allows only `metadata.*` there,
/// so the superset changes nothing. Status fields are read from `pod.status`: the Pod worker
/// passes a Pod whose status carries the addresses it gave the Pod. An unknown Pod address
/// reads as empty (as the kubelet's does); an unknown Node address is [`FieldError::NotKnownYet`].
pub fn field_value(
    pod: &Pod,
    api_version: Option<&str>,
    field: &str,
) -> Result<String, FieldError> {
    if let Some(v) = api_version.filter(|v| !v.is_empty() && *v != "v1") {
        return Err(FieldError::UnsupportedVersion(v.to_owned()));
    }
    let meta = &pod.metadata;
    if let Some((path, key)) = split_subscript(field) {
        let map = match path {
            "metadata.annotations" => {
                check_qualified_name(&key.to_lowercase()).map_err(|reason| {
                    FieldError::BadSubscript {
                        field: field.to_owned(),
                        reason,
                    }
                })?;
                &meta.annotations
            }
            "metadata.labels" => {
                check_qualified_name(key).map_err(|reason| FieldError::BadSubscript {
                    field: field.to_owned(),
                    reason,
                })?;
                &meta.labels
            }
            _ => return Err(FieldError::UnsupportedField(field.to_owned())),
        };
        return Ok(map
            .as_ref()
            .and_then(|m| m.get(key).cloned())
            .unwrap_or_default());
    }
    let spec = pod.spec.as_ref();
    let value = match field {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(meta.labels.as_ref().unwrap_or(&BTreeMap::new())),
        "metadata.annotations" => format_map(meta.annotations.as_ref().unwrap_or(&BTreeMap::new())),
        // `spec.host` is the old name the API server still converts.
        "spec.nodeName" | "spec.host" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" => pod_ips(pod).into_iter().next().unwrap_or_default(),
        "status.podIPs" => pod_ips(pod).join(","),
        "status.hostIP" => host_ips(pod)
            .into_iter()
            .next()
            .ok_or_else(|| FieldError::NotKnownYet(field.to_owned()))?,
        "status.hostIPs" => {
            let ips = host_ips(pod);
            if ips.is_empty() {
                return Err(FieldError::NotKnownYet(field.to_owned()));
            }
            ips.join(",")
        }
        _ => return Err(FieldError::UnsupportedField(field.to_owned())),
    };
    Ok(value)
}

/// A container of the Pod by name (regular containers first, then init containers, as the
/// kubelet's `findContainerInPod`).
pub fn find_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

fn parse_quantity(text: &str) -> Result<Quantity, FieldError> {
    Quantity::parse(text).map_err(|e| FieldError::BadQuantity {
        text: text.to_owned(),
        reason: e.kind.to_string(),
    })
}

/// Kubernetes' `Quantity.MilliValue()`: thousandths, rounded up.
fn milli_value(q: &Quantity) -> i128 {
    let nanos = q.nanos();
    let per_milli = 1_000_000;
    let d = nanos.div_euclid(per_milli);
    if nanos.rem_euclid(per_milli) == 0 {
        d
    } else {
        d + 1
    }
}

/// The value of `resourceFieldRef` `selector` for `container`, as the kubelet computes it:
/// `limits.*`/`requests.*` of `cpu`, `memory`, `ephemeral-storage` and `hugepages-*`, divided by
/// the divisor (default 1) and rounded up; an unset or zero cpu, memory or ephemeral-storage
/// limit reads as the Node's allocatable.
pub fn resource_value(
    selector: &ResourceFieldSelector,
    container: &Container,
    node: &NodeAllocatable,
) -> Result<String, FieldError> {
    let divisor = match selector.divisor.as_ref() {
        Some(d) => parse_quantity(&d.0)?,
        None => parse_quantity("1")?,
    };
    let divisor = if divisor.is_zero() {
        parse_quantity("1")?
    } else {
        divisor
    };
    let resource = selector.resource.as_str();
    let (limits, name) = if let Some(name) = resource.strip_prefix("limits.") {
        (true, name)
    } else if let Some(name) = resource.strip_prefix("requests.") {
        (false, name)
    } else {
        return Err(FieldError::UnsupportedResource(resource.to_owned()));
    };
    if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !name.starts_with("hugepages-") {
        return Err(FieldError::UnsupportedResource(resource.to_owned()));
    }
    let resources = container.resources.as_ref();
    let list = if limits {
        resources.and_then(|r| r.limits.as_ref())
    } else {
        resources.and_then(|r| r.requests.as_ref())
    };
    let set = list
        .and_then(|l| l.get(name))
        .map(|q| parse_quantity(&q.0))
        .transpose()?
        .filter(|q| !q.is_zero());
    let value = match set {
        Some(q) => q,
        None if limits => match name {
            "cpu" => parse_quantity(node.cpu)?,
            "memory" => parse_quantity(node.memory)?,
            "ephemeral-storage" => parse_quantity(node.ephemeral_storage)?,
            _ => parse_quantity("0")?,
        },
        None => parse_quantity("0")?,
    };
    // The kubelet divides in float64 and rounds up.
    let result = if name == "cpu" {
        (milli_value(&value) as f64 / milli_value(&divisor) as f64).ceil()
    } else {
        (value.units_ceil() as f64 / divisor.units_ceil() as f64).ceil()
    };
    Ok(format!("{}", result as i64))
}

/// The files of a `downwardAPI` volume or projection: each item's path (cleaned later by the
/// writer) with its field or resource value, mode `item.mode` or `default_mode`. The first
/// item that cannot be read is the error, with the item's path.
pub fn downward_payload(
    items: &[DownwardAPIVolumeFile],
    pod: &Pod,
    default_mode: u32,
    node: &NodeAllocatable,
) -> Result<Payload, (String, FieldError)> {
    let mut payload = Payload::new();
    for item in items {
        let data = if let Some(f) = &item.field_ref {
            field_value(pod, f.api_version.as_deref(), &f.field_path)
                .map_err(|e| (item.path.clone(), e))?
        } else if let Some(r) = &item.resource_field_ref {
            let name = r.container_name.clone().unwrap_or_default();
            let container = find_container(pod, &name)
                .ok_or_else(|| (item.path.clone(), FieldError::NoContainer(name)))?;
            resource_value(r, container, node).map_err(|e| (item.path.clone(), e))?
        } else {
            String::new()
        };
        payload.insert(
            item.path.clone(),
            FileProjection {
                data: data.into_bytes(),
                mode: item.mode.map(mode_bits).unwrap_or(default_mode),
                fs_user: None,
            },
        );
    }
    Ok(payload)
}

/// A mode from the API (`int32`, validated to 0..=0777) as permission bits.
pub fn mode_bits(mode: i32) -> u32 {
    u32::try_from(mode).unwrap_or(0) & 0o777
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ObjectFieldSelector, PodIP, PodSpec, PodStatus, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KQ;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                labels: Some(BTreeMap::from([
                    ("b".to_owned(), "2".to_owned()),
                    ("a".to_owned(), "1".to_owned()),
                ])),
                annotations: Some(BTreeMap::from([(
                    "x/y".to_owned(),
                    "line\n\"q\"\\".to_owned(),
                )])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-0".into()),
                service_account_name: Some("sa".into()),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        limits: Some(BTreeMap::from([("memory".to_owned(), KQ("1Gi".into()))])),
                        requests: Some(BTreeMap::from([
                            ("cpu".to_owned(), KQ("250m".into())),
                            ("memory".to_owned(), KQ("512Mi".into())),
                        ])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                pod_ip: Some("10.200.1.5".into()),
                pod_ips: Some(vec![PodIP {
                    ip: "10.200.1.5".into(),
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn labels_are_sorted_quoted_lines_without_a_final_newline() {
        let p = pod();
        assert_eq!(
            field_value(&p, None, "metadata.labels").unwrap(),
            "a=\"1\"\nb=\"2\""
        );
        assert_eq!(
            field_value(&p, Some("v1"), "metadata.annotations").unwrap(),
            r#"x/y="line\n\"q\"\\""#
        );
        assert_eq!(format_map(&BTreeMap::new()), "");
    }

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("a\tb\u{7}\u{1b}\u{7f}"), r#""a\tb\a\x1b\x7f""#);
        assert_eq!(go_quote("é 日本"), "\"é 日本\"");
        assert_eq!(go_quote("\u{a0}\u{200b}"), r#""\u00a0\u200b""#);
        assert_eq!(go_quote("\u{e0001}\u{10ffff}"), r#""\U000e0001\U0010ffff""#);
        assert_eq!(go_quote("\u{e000}"), r#""\ue000""#);
    }

    #[test]
    fn simple_and_subscripted_fields() {
        let p = pod();
        let f = |s| field_value(&p, None, s);
        assert_eq!(f("metadata.name").unwrap(), "p");
        assert_eq!(f("metadata.namespace").unwrap(), "ns");
        assert_eq!(f("metadata.uid").unwrap(), "u-1");
        assert_eq!(f("metadata.labels['a']").unwrap(), "1");
        assert_eq!(f("metadata.labels['zz']").unwrap(), "");
        assert_eq!(f("metadata.annotations['x/y']").unwrap(), "line\n\"q\"\\");
        assert_eq!(f("spec.nodeName").unwrap(), "node-0");
        assert_eq!(f("spec.serviceAccountName").unwrap(), "sa");
        assert_eq!(f("status.podIP").unwrap(), "10.200.1.5");
        assert_eq!(f("status.podIPs").unwrap(), "10.200.1.5");
        assert_eq!(
            f("status.hostIP"),
            Err(FieldError::NotKnownYet("status.hostIP".into()))
        );
        assert!(f("status.hostIP").unwrap_err().is_not_ready());
        assert!(matches!(
            f("spec.restartPolicy"),
            Err(FieldError::UnsupportedField(_))
        ));
        assert!(matches!(
            f("metadata.labels['a b']"),
            Err(FieldError::BadSubscript { .. })
        ));
        assert!(matches!(
            f("metadata.name['a']"),
            Err(FieldError::UnsupportedField(_))
        ));
        assert!(matches!(
            field_value(&p, Some("v2"), "metadata.name"),
            Err(FieldError::UnsupportedVersion(_))
        ));
    }

    #[test]
    fn split_subscript_like_the_kubelet() {
        assert_eq!(
            split_subscript("metadata.annotations['a[b]c']"),
            Some(("metadata.annotations", "a[b]c"))
        );
        assert_eq!(
            split_subscript("metadata.labels['']"),
            Some(("metadata.labels", ""))
        );
        assert_eq!(split_subscript("metadata.labels"), None);
        assert_eq!(split_subscript("['x']"), None);
    }

    fn sel(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            container_name: Some("c".into()),
            resource: resource.into(),
            divisor: divisor.map(|d| KQ(d.into())),
        }
    }

    #[test]
    fn resources_round_up_and_default_to_the_node() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let v = |r, d| resource_value(&sel(r, d), c, &NODE_ALLOCATABLE).unwrap();
        assert_eq!(v("limits.memory", None), "1073741824");
        assert_eq!(v("limits.memory", Some("1Mi")), "1024");
        assert_eq!(v("limits.memory", Some("1G")), "2"); // 1.07 rounded up
        assert_eq!(v("requests.cpu", None), "1"); // 250m rounded up
        assert_eq!(v("requests.cpu", Some("1m")), "250");
        assert_eq!(v("requests.cpu", Some("0")), "1"); // a zero divisor is 1
        assert_eq!(v("limits.cpu", None), "2"); // the node's
        assert_eq!(v("limits.cpu", Some("1m")), "2000");
        assert_eq!(v("limits.ephemeral-storage", Some("1Gi")), "100");
        assert_eq!(v("requests.ephemeral-storage", None), "0");
        assert!(resource_value(&sel("limits.gpu", None), c, &NODE_ALLOCATABLE).is_err());
        assert!(resource_value(&sel("cpu", None), c, &NODE_ALLOCATABLE).is_err());
    }

    #[test]
    fn downward_payload_names_the_failing_item() {
        let p = pod();
        let item = |path: &str, field: &str, mode| DownwardAPIVolumeFile {
            path: path.into(),
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".into()),
                field_path: field.into(),
            }),
            mode,
            resource_field_ref: None,
        };
        let payload = downward_payload(
            &[
                item("labels", "metadata.labels", None),
                item("n", "metadata.name", Some(0o400)),
            ],
            &p,
            0o644,
            &NODE_ALLOCATABLE,
        )
        .unwrap();
        assert_eq!(payload["labels"].data, b"a=\"1\"\nb=\"2\"");
        assert_eq!(payload["labels"].mode, 0o644);
        assert_eq!(payload["n"].mode, 0o400);
        let mem = DownwardAPIVolumeFile {
            path: "mem".into(),
            resource_field_ref: Some(sel("limits.memory", Some("1Mi"))),
            ..Default::default()
        };
        let payload = downward_payload(&[mem], &p, 0o644, &NODE_ALLOCATABLE).unwrap();
        assert_eq!(payload["mem"].data, b"1024");
        let err = downward_payload(
            &[item("x", "spec.bogus", None)],
            &p,
            0o644,
            &NODE_ALLOCATABLE,
        )
        .unwrap_err();
        assert_eq!(err.0, "x");
    }
}
