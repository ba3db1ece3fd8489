//! Projected service account tokens: requested from the TokenRequest API for the Pod's
//! ServiceAccount, bound to the Pod, renewed past 80% of their lifetime (or after 24 hours),
//! as the kubelet's token manager does (without its jitter).

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount, ServiceAccountTokenProjection};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};

/// `expirationSeconds` when unset.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime the API server accepts.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// A token is renewed at the latest this long after it was issued.
const MAX_TTL: SignedDuration = SignedDuration::from_hours(24);

/// A token the API server issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The token.
    pub token: String,
    /// `status.expirationTimestamp`.
    pub expires: Timestamp,
    /// The lifetime asked for.
    pub expiration_seconds: i64,
}

/// The Pod's ServiceAccount (`default` when unset, as admission sets it).
pub fn service_account(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// The lifetime to ask for: `expirationSeconds` (default 3600, at least 600).
pub fn expiration_seconds(projection: &ServiceAccountTokenProjection) -> i64 {
    projection
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS)
        .max(MIN_EXPIRATION_SECONDS)
}

/// The TokenRequest the kubelet makes for `projection`: its audience (the API server's own
/// when unset), its lifetime, bound to the Pod (kind Pod, name, uid).
pub fn token_request(pod: &Pod, projection: &ServiceAccountTokenProjection) -> TokenRequest {
    TokenRequest {
        metadata: Default::default(),
        spec: TokenRequestSpec {
            audiences: projection
                .audience
                .iter()
                .filter(|a| !a.is_empty())
                .cloned()
                .collect(),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
            expiration_seconds: Some(expiration_seconds(projection)),
        },
        status: None,
    }
}

/// Whether `token` is due for renewal at `now`: within the last 20% of its lifetime, or issued
/// more than 24 hours ago.
pub fn needs_refresh(token: &IssuedToken, now: Timestamp) -> bool {
    let lifetime = SignedDuration::from_secs(token.expiration_seconds);
    let issued = token.expires - lifetime;
    let renew_at = token.expires - SignedDuration::from_secs(token.expiration_seconds * 20 / 100);
    now >= issued + MAX_TTL || now >= renew_at
}

/// Whether `token` was asked for with what `projection` asks now.
pub fn matches(token: &IssuedToken, projection: &ServiceAccountTokenProjection) -> bool {
    token.expiration_seconds == expiration_seconds(projection)
}

/// Asks the API server for a token for `projection` of `pod`.
pub async fn request(
    client: &kube::Client,
    pod: &Pod,
    projection: &ServiceAccountTokenProjection,
) -> Result<IssuedToken, kube::Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let request = token_request(pod, projection);
    let issued = api
        .create_token_request(&service_account(pod), &PostParams::default(), &request)
        .await?;
    let status = issued.status.ok_or_else(|| {
        kube::Error::Service("the TokenRequest came back without a status".into())
    })?;
    Ok(IssuedToken {
        token: status.token,
        expires: status.expiration_timestamp.0,
        expiration_seconds: expiration_seconds(projection),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                service_account_name: Some("sa".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn request_is_bound_to_the_pod() {
        let p = ServiceAccountTokenProjection {
            audience: Some("vault".into()),
            expiration_seconds: None,
            path: "token".into(),
        };
        let r = token_request(&pod(), &p);
        assert_eq!(r.spec.audiences, ["vault"]);
        assert_eq!(r.spec.expiration_seconds, Some(3600));
        let b = r.spec.bound_object_ref.unwrap();
        assert_eq!(b.kind.as_deref(), Some("Pod"));
        assert_eq!(b.api_version.as_deref(), Some("v1"));
        assert_eq!(b.name.as_deref(), Some("p"));
        assert_eq!(b.uid.as_deref(), Some("uid-1"));
        let short = ServiceAccountTokenProjection {
            expiration_seconds: Some(60),
            ..p
        };
        assert_eq!(
            token_request(&pod(), &short).spec.expiration_seconds,
            Some(600)
        );
        assert!(
            token_request(&pod(), &ServiceAccountTokenProjection::default())
                .spec
                .audiences
                .is_empty()
        );
        assert_eq!(service_account(&Pod::default()), "default");
    }

    #[test]
    fn renewal_past_80_percent_or_a_day() {
        let issued = Timestamp::from_second(1_000_000).unwrap();
        let t = IssuedToken {
            token: "t".into(),
            expires: issued + SignedDuration::from_secs(3600),
            expiration_seconds: 3600,
        };
        let at = |s| issued + SignedDuration::from_secs(s);
        assert!(!needs_refresh(&t, at(0)));
        assert!(!needs_refresh(&t, at(2879)));
        assert!(needs_refresh(&t, at(2880)));
        assert!(needs_refresh(&t, at(4000)));
        // The API server may extend a token's life (to a year); a day is the most we keep it.
        let long = IssuedToken {
            expires: issued + SignedDuration::from_hours(24 * 365),
            expiration_seconds: 3600 * 24 * 365,
            ..t
        };
        assert!(!needs_refresh(&long, at(3600)));
        assert!(needs_refresh(&long, at(24 * 3600)));
    }
}
