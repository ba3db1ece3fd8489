//! Each Pod's `/etc/hosts`: there is no cluster DNS here, so every Pod's name is written into
//! every other Pod's file under the names cluster DNS would answer for it.

use std::net::Ipv4Addr;

/// What the hosts files need of one Pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostEntry {
    /// Its namespace.
    pub namespace: String,
    /// Its hostname (`spec.hostname`, else its name).
    pub hostname: String,
    /// `spec.subdomain` (a StatefulSet's `serviceName`).
    pub subdomain: Option<String>,
    /// Its address.
    pub ip: Ipv4Addr,
}

/// The hosts file of `own`, listing `all` (which may include `own`). Names follow cluster DNS:
/// `<hostname>.<subdomain>.<namespace>.svc.<domain>`, with the shorter forms the Pod's DNS
/// search path would complete (`.svc`, `<hostname>.<subdomain>.<namespace>`, and within the
/// same namespace `<hostname>.<subdomain>`).
pub fn render(own: &HostEntry, all: &[HostEntry], domain: &str) -> String {
    let mut out = String::from(
        "# Written by moco-rs's Pod runner (no cluster DNS here).\n\
         127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    );
    let mut own_names = names(own, &own.namespace, domain);
    own_names.push(own.hostname.clone());
    out.push_str(&format!("{}\t{}\n", own.ip, own_names.join(" ")));
    let mut others: Vec<&HostEntry> = all
        .iter()
        .filter(|e| *e != own && e.subdomain.is_some())
        .collect();
    others.sort();
    for e in others {
        out.push_str(&format!(
            "{}\t{}\n",
            e.ip,
            names(e, &own.namespace, domain).join(" ")
        ));
    }
    out
}

fn names(e: &HostEntry, viewer_namespace: &str, domain: &str) -> Vec<String> {
    let Some(sub) = &e.subdomain else {
        return vec![];
    };
    let base = format!("{}.{}.{}", e.hostname, sub, e.namespace);
    let mut v = vec![format!("{base}.svc.{domain}"), format!("{base}.svc"), base];
    if e.namespace == viewer_namespace {
        v.push(format!("{}.{}", e.hostname, sub));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ns: &str, host: &str, sub: Option<&str>, ip: &str) -> HostEntry {
        HostEntry {
            namespace: ns.into(),
            hostname: host.into(),
            subdomain: sub.map(Into::into),
            ip: ip.parse().unwrap(),
        }
    }

    #[test]
    fn every_pod_of_a_service_is_named_as_cluster_dns_would() {
        let own = entry("a", "db-0", Some("db"), "10.200.1.2");
        let all = vec![
            own.clone(),
            entry("a", "db-1", Some("db"), "10.200.1.3"),
            entry("b", "x-0", Some("x"), "10.200.1.4"),
            entry("a", "lonely", None, "10.200.1.5"),
        ];
        let text = render(&own, &all, "cluster.local");
        assert_eq!(
            text,
            "# Written by moco-rs's Pod runner (no cluster DNS here).\n\
             127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
             10.200.1.2\tdb-0.db.a.svc.cluster.local db-0.db.a.svc db-0.db.a db-0.db db-0\n\
             10.200.1.3\tdb-1.db.a.svc.cluster.local db-1.db.a.svc db-1.db.a db-1.db\n\
             10.200.1.4\tx-0.x.b.svc.cluster.local x-0.x.b.svc x-0.x.b\n"
        );
    }
}
