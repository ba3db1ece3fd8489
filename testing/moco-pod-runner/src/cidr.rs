//! IPv4 ranges: the bridge's, each Node's Pod range and the blackholed Service range.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 network in CIDR notation (`10.200.0.0/16`), its address masked to the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

/// Why a CIDR did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{input:?} is not an IPv4 CIDR (like 10.200.0.0/16): {why}")]
pub struct CidrError {
    input: String,
    why: &'static str,
}

impl Cidr {
    /// The network holding `addr` with `prefix` bits (0..=32).
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Option<Self> {
        (prefix <= 32).then(|| Self {
            network: Ipv4Addr::from(u32::from(addr) & mask(prefix)),
            prefix,
        })
    }

    /// The first address of the network.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// Its prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `addr` is in it.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & mask(self.prefix) == u32::from(self.network)
    }

    /// Whether the two networks share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other.network) || other.contains(self.network)
    }

    /// The `n`th address of the network (0 is the network address), if it is in it.
    pub fn nth(&self, n: u32) -> Option<Ipv4Addr> {
        let size = 1u64 << (32 - u32::from(self.prefix));
        (u64::from(n) < size).then(|| Ipv4Addr::from(u32::from(self.network) + n))
    }

    /// The `index`th subnet of `prefix` bits inside it (`10.200.0.0/16`, 24, 3 → `10.200.3.0/24`).
    pub fn subnet(&self, prefix: u8, index: u32) -> Option<Cidr> {
        if prefix < self.prefix || prefix > 32 {
            return None;
        }
        let count = 1u64 << (prefix - self.prefix);
        if u64::from(index) >= count {
            return None;
        }
        let step = 1u64 << (32 - u32::from(prefix));
        let start = u64::from(u32::from(self.network)) + u64::from(index) * step;
        Cidr::new(Ipv4Addr::from(u32::try_from(start).ok()?), prefix)
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = |why| CidrError {
            input: input.to_owned(),
            why,
        };
        let (addr, prefix) = input.split_once('/').ok_or_else(|| error("no /prefix"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| error("not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| error("the prefix is not a number"))?;
        let cidr = Cidr::new(addr, prefix).ok_or_else(|| error("the prefix is over 32"))?;
        if cidr.network != addr {
            return Err(error("bits set past the prefix"));
        }
        Ok(cidr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl serde::Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let c: Cidr = "10.200.0.0/16".parse().unwrap();
        assert_eq!(c.to_string(), "10.200.0.0/16");
        assert!(c.contains("10.200.255.3".parse().unwrap()));
        assert!(!c.contains("10.201.0.1".parse().unwrap()));
        assert_eq!(c.subnet(24, 3).unwrap().to_string(), "10.200.3.0/24");
        assert_eq!(c.subnet(24, 256), None);
        assert_eq!(c.nth(1), Some("10.200.0.1".parse().unwrap()));
        assert_eq!(c.nth(65536), None);
    }

    #[test]
    fn refuses_bad_input_naming_it() {
        for bad in [
            "10.200.0.0",
            "10.200.0.1/16",
            "10.200.0.0/33",
            "x/16",
            "10.0.0.0/x",
        ] {
            let e = bad.parse::<Cidr>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn overlap() {
        let a: Cidr = "10.200.0.0/16".parse().unwrap();
        let b: Cidr = "10.200.4.0/24".parse().unwrap();
        let c: Cidr = "10.96.0.0/16".parse().unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&c));
    }
}
