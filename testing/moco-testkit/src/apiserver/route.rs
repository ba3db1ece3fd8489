//! Paths and query strings of requests, as `kube::Api` builds them.

use super::registry::{self, ResourceType};

/// What a request path names.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Route {
    /// The resource.
    pub rt: &'static ResourceType,
    /// The namespace of a namespaced path; `None` for cluster-scoped kinds and for lists and
    /// watches across all namespaces.
    pub namespace: Option<String>,
    /// The object, if the path names one.
    pub name: Option<String>,
    /// The subresource, e.g. `status`.
    pub subresource: Option<String>,
}

/// The route of `path`: `/api/v1/...` or `/apis/{group}/{version}/...`, then
/// `namespaces/{ns}/{plural}[/{name}[/{subresource}]]` or `{plural}[/{name}[/{subresource}]]`
/// (a namespaced plural alone lists all namespaces). `None` for anything else.
pub(super) fn parse_path(path: &str) -> Option<Route> {
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(percent_decode)
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        [api, version, rest @ ..] if api == "api" => ("", version.as_str(), rest),
        [apis, group, version, rest @ ..] if apis == "apis" => {
            (group.as_str(), version.as_str(), rest)
        }
        _ => return None,
    };
    if let [namespaces, ns, plural, tail @ ..] = rest
        && namespaces == "namespaces"
        && let Some(rt) = registry::by_path(group, version, plural)
        && rt.namespaced
    {
        return object_route(rt, Some(ns.clone()), tail);
    }
    let [plural, tail @ ..] = rest else {
        return None;
    };
    let rt = registry::by_path(group, version, plural)?;
    if rt.namespaced && !tail.is_empty() {
        return None;
    }
    object_route(rt, None, tail)
}

fn object_route(
    rt: &'static ResourceType,
    namespace: Option<String>,
    tail: &[String],
) -> Option<Route> {
    if tail.len() > 2 || tail.iter().any(String::is_empty) {
        return None;
    }
    Some(Route {
        rt,
        namespace,
        name: tail.first().cloned(),
        subresource: tail.get(1).cloned(),
    })
}

/// The pairs of query string `query`, decoded, in order.
pub(super) fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k), form_decode(v))
        })
        .collect()
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space.
fn form_decode(text: &str) -> String {
    percent_decode(&text.replace('+', " "))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let r = parse_path("/api/v1/namespaces/ns/configmaps/c").unwrap();
        assert_eq!(
            (r.rt.plural, r.namespace.as_deref(), r.name.as_deref()),
            ("configmaps", Some("ns"), Some("c"))
        );
        let r = parse_path("/apis/apps/v1/namespaces/ns/statefulsets/s/status").unwrap();
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = parse_path("/api/v1/namespaces/ns/status").unwrap();
        assert_eq!(
            (r.rt.plural, r.name.as_deref(), r.subresource.as_deref()),
            ("namespaces", Some("ns"), Some("status"))
        );
        let r = parse_path("/api/v1/pods").unwrap();
        assert_eq!((r.namespace, r.name), (None, None));
        let r = parse_path("/apis/storage.k8s.io/v1/storageclasses/standard").unwrap();
        assert_eq!(r.name.as_deref(), Some("standard"));
        assert!(parse_path("/api/v1/pods/p").is_none());
        assert!(parse_path("/apis/apps/v1/namespaces/ns/widgets").is_none());
        assert!(parse_path("/version").is_none());
    }

    #[test]
    fn query() {
        assert_eq!(
            parse_query("labelSelector=a%3Db%2Cc+in+%28x%29&watch=true"),
            vec![
                ("labelSelector".into(), "a=b,c in (x)".into()),
                ("watch".into(), "true".into())
            ]
        );
    }
}
