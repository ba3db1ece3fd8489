//! Pod addresses: from the Node's Pod range, the same address again for a Pod re-created under
//! the same name (a StatefulSet's Pod keeps its IP, as MOCO's tests expect of nothing but
//! which makes logs readable), and never an address another live Pod holds.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;

use crate::cidr::Cidr;

/// The addresses given out, remembered by Pod (`node/namespace/name`) in a file of the state
/// directory so that a restarted runner gives the same ones.
#[derive(Debug)]
pub struct IpBook {
    path: PathBuf,
    /// Every Pod ever given an address, with the order it was last given.
    remembered: BTreeMap<String, (Ipv4Addr, u64)>,
    in_use: BTreeSet<Ipv4Addr>,
    clock: u64,
}

/// The Node's range has no free address.
#[derive(Debug, thiserror::Error)]
pub enum IpError {
    /// Every address of the range is held by a live Pod.
    #[error("no free address in {range} for Pod {pod} (every one is held by a live Pod)")]
    Exhausted {
        /// The Node's Pod range.
        range: Cidr,
        /// The Pod.
        pod: String,
    },
    /// The book could not be saved.
    #[error("saving the Pod address book {path}: {source}")]
    Save {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl IpBook {
    /// The book kept in `path` (empty when the file is missing or unreadable).
    pub fn load(path: PathBuf) -> Self {
        let remembered: BTreeMap<String, (Ipv4Addr, u64)> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let clock = remembered.values().map(|(_, t)| *t).max().unwrap_or(0);
        Self {
            path,
            remembered,
            in_use: BTreeSet::new(),
            clock,
        }
    }

    /// An address in `range` for `pod` (`node/namespace/name`): the one it had if free, else a
    /// free one no other Pod remembers, else the free one remembered longest ago.
    pub fn allocate(&mut self, range: Cidr, pod: &str) -> Result<Ipv4Addr, IpError> {
        self.clock += 1;
        let previous = self.remembered.get(pod).map(|(ip, _)| *ip);
        let chosen = match previous {
            Some(ip) if range.contains(ip) && !self.in_use.contains(&ip) => Some(ip),
            _ => self.choose(range),
        }
        .ok_or_else(|| IpError::Exhausted {
            range,
            pod: pod.to_owned(),
        })?;
        self.remembered
            .retain(|name, (ip, _)| name == pod || *ip != chosen);
        self.remembered.insert(pod.to_owned(), (chosen, self.clock));
        self.in_use.insert(chosen);
        self.save()?;
        Ok(chosen)
    }

    /// `ip` is free again (its Pod is gone); it stays remembered for that Pod's name.
    pub fn release(&mut self, ip: Ipv4Addr) {
        self.in_use.remove(&ip);
    }

    fn choose(&self, range: Cidr) -> Option<Ipv4Addr> {
        let size = 1u32 << (32 - u32::from(range.prefix()));
        // .0 is the network, the last is broadcast, .1 is left alone.
        let free = (2..size.saturating_sub(1))
            .filter_map(|n| range.nth(n))
            .filter(|ip| !self.in_use.contains(ip));
        let mut oldest: Option<(Ipv4Addr, u64)> = None;
        for ip in free {
            match self.remembered.values().find(|(r, _)| *r == ip) {
                None => return Some(ip),
                Some((_, t)) if oldest.is_none_or(|(_, o)| *t < o) => oldest = Some((ip, *t)),
                Some(_) => {}
            }
        }
        oldest.map(|(ip, _)| ip)
    }

    fn save(&self) -> Result<(), IpError> {
        let bytes = serde_json::to_vec_pretty(&self.remembered).unwrap_or_default();
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|source| IpError::Save {
                path: self.path.clone(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_re_created_by_name_gets_its_address_back_and_live_ones_are_never_shared() {
        let dir = tempfile::tempdir().unwrap();
        let range: Cidr = "10.200.1.0/24".parse().unwrap();
        let mut book = IpBook::load(dir.path().join("ips.json"));
        let a = book.allocate(range, "n/ns/db-0").unwrap();
        let b = book.allocate(range, "n/ns/db-1").unwrap();
        assert_ne!(a, b);
        assert_eq!(a, "10.200.1.2".parse::<Ipv4Addr>().unwrap());
        book.release(a);
        // A new Pod does not take db-0's remembered address while others are free.
        let c = book.allocate(range, "n/ns/job-x").unwrap();
        assert_ne!(c, a);
        assert_eq!(book.allocate(range, "n/ns/db-0").unwrap(), a);
        // A restarted runner remembers.
        book.release(a);
        let mut again = IpBook::load(dir.path().join("ips.json"));
        assert_eq!(again.allocate(range, "n/ns/db-0").unwrap(), a);
    }

    #[test]
    fn a_full_range_reuses_the_oldest_free_address_then_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let range: Cidr = "10.200.1.0/29".parse().unwrap(); // .2 .. .6
        let mut book = IpBook::load(dir.path().join("ips.json"));
        let ips: Vec<_> = (0..5)
            .map(|i| book.allocate(range, &format!("p{i}")).unwrap())
            .collect();
        assert!(book.allocate(range, "p5").is_err());
        book.release(ips[3]);
        book.release(ips[1]);
        assert_eq!(book.allocate(range, "p6").unwrap(), ips[1]);
        assert_eq!(book.allocate(range, "p7").unwrap(), ips[3]);
        let e = book.allocate(range, "p3").unwrap_err();
        assert!(e.to_string().contains("10.200.1.0/29"), "{e}");
    }
}
