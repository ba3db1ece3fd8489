//! Who may pull a copy from this agent (`GET /v1/backup`) or push one into it
//! (`PUT /v1/restore`): the controller, or a client of this agent's own cluster.
//!
//! Every cluster's agents share the operator's CA, so a verified certificate only says "a
//! client of this operator". The operator's Certificate for a cluster's agents names every Pod
//! of that cluster, `*.moco-<name>.<namespace>.svc`; the cluster's backup and restore Jobs
//! mount the same certificate, and a recipient agent presents it too. So that name is the
//! cluster's identity: the agent finds it in its own certificate (it knows its cluster's name
//! but not its namespace) and requires it of the client. Another cluster's client is refused
//! even with the right password, which used to be the only thing keeping tenants apart.

use moco_http::tls::PeerIdentity;

/// The name of `cluster`'s Pods among `own` (the DNS names of this agent's certificate):
/// `*.moco-<cluster>.<namespace>.svc`, the namespace one DNS label.
pub fn cluster_dns_name(own: &[String], cluster: &str) -> Option<String> {
    let prefix = format!("*.moco-{cluster}.");
    own.iter()
        .find(|name| {
            name.strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".svc"))
                .is_some_and(|ns| !ns.is_empty() && !ns.contains('.'))
        })
        .cloned()
}

/// `Ok` when `peer` is the controller (certificate CN `controller`) or carries `cluster`
/// (from [`cluster_dns_name`]; `None` admits the controller only); otherwise why not, naming
/// the certificate.
pub fn check(
    peer: Option<&PeerIdentity>,
    cluster: Option<&str>,
    controller: &str,
) -> Result<(), String> {
    let Some(peer) = peer else {
        return Err("no client certificate".to_owned());
    };
    if peer.common_name.as_deref() == Some(controller) {
        return Ok(());
    }
    if let Some(name) = cluster
        && peer.dns_names.iter().any(|n| n == name)
    {
        return Ok(());
    }
    Err(format!(
        "the client certificate ({}) is not of this cluster ({}) nor the controller's \
         (CN={controller})",
        describe(peer),
        cluster.unwrap_or("no cluster name in this agent's certificate")
    ))
}

/// Every name of `peer`: its CN and its DNS names.
fn describe(peer: &PeerIdentity) -> String {
    let mut names: Vec<String> = peer
        .common_name
        .iter()
        .map(|cn| format!("CN={cn}"))
        .collect();
    if !peer.dns_names.is_empty() {
        names.push(format!("DNS={}", peer.dns_names.join(",")));
    }
    if names.is_empty() {
        "no name".to_owned()
    } else {
        names.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(cn: Option<&str>, dns: &[&str]) -> PeerIdentity {
        PeerIdentity {
            common_name: cn.map(str::to_owned),
            dns_names: dns.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    #[test]
    fn the_cluster_is_the_name_of_its_pods_in_the_agents_own_certificate() {
        let own = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            cluster_dns_name(&own(&["localhost", "*.moco-db.team-a.svc"]), "db").as_deref(),
            Some("*.moco-db.team-a.svc")
        );
        // Another cluster's name, a name with more labels, or none: no identity.
        for names in [
            own(&["*.moco-dbx.team-a.svc"]),
            own(&["*.moco-db.team-a.svc.cluster.local"]),
            own(&["*.moco-db.a.b.svc"]),
            own(&["*.moco-db..svc"]),
            own(&[]),
        ] {
            assert_eq!(cluster_dns_name(&names, "db"), None, "{names:?}");
        }
        // A cluster name with dots is still told apart by the namespace, one label.
        assert_eq!(
            cluster_dns_name(&own(&["*.moco-db.v2.ns.svc"]), "db.v2").as_deref(),
            Some("*.moco-db.v2.ns.svc")
        );
    }

    #[test]
    fn the_controller_and_this_clusters_clients_only() {
        let cluster = Some("*.moco-db.ns.svc");
        assert!(
            check(
                Some(&peer(Some("moco-controller"), &[])),
                cluster,
                "moco-controller"
            )
            .is_ok()
        );
        assert!(
            check(
                Some(&peer(None, &["*.moco-db.ns.svc"])),
                cluster,
                "moco-controller"
            )
            .is_ok()
        );
        let e = check(
            Some(&peer(None, &["*.moco-db.other.svc"])),
            cluster,
            "moco-controller",
        )
        .unwrap_err();
        assert_eq!(
            e,
            "the client certificate (DNS=*.moco-db.other.svc) is not of this cluster \
             (*.moco-db.ns.svc) nor the controller's (CN=moco-controller)"
        );
        let e = check(Some(&peer(Some("x"), &[])), cluster, "moco-controller").unwrap_err();
        assert!(e.contains("(CN=x)"), "{e}");
        assert_eq!(
            check(None, cluster, "moco-controller").unwrap_err(),
            "no client certificate"
        );
        // An agent whose certificate names no cluster serves the controller only.
        assert!(
            check(
                Some(&peer(None, &["*.moco-db.ns.svc"])),
                None,
                "moco-controller"
            )
            .is_err()
        );
        assert!(
            check(
                Some(&peer(Some("moco-controller"), &[])),
                None,
                "moco-controller"
            )
            .is_ok()
        );
    }
}
