//! Unused loopback ports for test servers.
//!
//! A port is chosen free and bound later by another process (a `mariadbd`, an agent, a
//! `moco local` cluster), so two tests choosing at the same time could both see it free. Every
//! port handed out is therefore remembered for the life of the process and never handed out
//! again (a CI run once failed with an agent's "Address already in use" on a port that another
//! test had chosen a moment before), and claimed across processes too, with a file per port
//! naming the claiming process ([`PORT_CLAIMS_DIR`]): test runners that run each test in a
//! process of its own (cargo-nextest) choose from the same range at the same time. A claim
//! lasts as long as its process; a dead process's claims are taken over.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::sync::{Mutex, PoisonError};

/// The ports chosen from: below Linux's default ephemeral range (32768–60999), so that no
/// client connection's source port can take a port between its choice and the server's bind.
/// Choosing with port 0 gave ports of that range, and a test's agent once lost its probe port
/// to a connection of the control plane running beside it.
pub(crate) const TEST_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// Every port this process has handed out.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// The directory of the claims shared by the processes of one machine: a file per port,
/// holding the claiming process's pid.
pub(crate) const PORT_CLAIMS_DIR: &str = "/tmp/moco-rs-port-claims";

/// An unused TCP port on 127.0.0.1 (see [`free_ports`]).
pub fn free_port() -> std::io::Result<u16> {
    Ok(free_ports(1)?.first().copied().unwrap_or_default())
}

/// `n` distinct unused TCP ports on 127.0.0.1, chosen at random in [`TEST_PORTS`], none handed
/// out before by this process (another process may still take one before it is used).
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let mut ports = Vec::with_capacity(n);
    for attempt in 0u32..10_000 {
        if ports.len() == n {
            break;
        }
        if let Some(port) = claim(random_port(attempt), 1) {
            ports.push(port);
        }
    }
    if ports.len() < n {
        return Err(exhausted(&format!("{n} free ports")));
    }
    Ok(ports)
}

/// The first of `count` consecutive unused ports on 127.0.0.1 (a `moco local` cluster's
/// block), none handed out before by this process.
pub fn free_port_block(count: u16) -> std::io::Result<u16> {
    let count = count.max(1);
    for attempt in 0u32..2_000 {
        let base = random_port(attempt);
        if base.saturating_add(count) > TEST_PORTS.end {
            continue;
        }
        if let Some(base) = claim(base, count) {
            return Ok(base);
        }
    }
    Err(exhausted(&format!("a block of {count} free ports")))
}

/// Hands out `base..base + count` if none of them was handed out before and each binds now.
fn claim(base: u16, count: u16) -> Option<u16> {
    let mut guard = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let handed_out = guard.get_or_insert_with(HashSet::new);
    let block = base..base.checked_add(count)?;
    if block.clone().any(|p| handed_out.contains(&p)) {
        return None;
    }
    // Hold every listener until the whole block is known to be free.
    let held: Vec<TcpListener> = block
        .clone()
        .map_while(|p| TcpListener::bind(("127.0.0.1", p)).ok())
        .collect();
    if held.len() != usize::from(count) {
        return None;
    }
    let dir = std::path::Path::new(PORT_CLAIMS_DIR);
    let mut claimed: Vec<u16> = Vec::with_capacity(usize::from(count));
    for port in block.clone() {
        if !claim_across_processes(dir, port, std::process::id()) {
            for p in claimed {
                let _ = std::fs::remove_file(dir.join(p.to_string()));
            }
            return None;
        }
        claimed.push(port);
    }
    handed_out.extend(block);
    Some(base)
}

/// Claims `port` for process `pid` in `dir` unless a live process holds it; the claim of a
/// process that is gone is taken over. A directory that cannot be written leaves the choice
/// to this process alone (as before claims were shared).
fn claim_across_processes(dir: &std::path::Path, port: u16, pid: u32) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return true;
    }
    let path = dir.join(port.to_string());
    for _ in 0..2 {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                use std::io::Write as _;
                return file.write_all(pid.to_string().as_bytes()).is_ok();
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok());
                match holder {
                    // Being written by its claimer this instant, or held.
                    None => return false,
                    Some(h) if h == pid || super::process_alive(h) => return false,
                    // Its process is gone: take it over (another taker may win the race).
                    Some(_) => {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
            Err(_) => return true,
        }
    }
    false
}

fn random_port(attempt: u32) -> u16 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u32(attempt);
    let span = u64::from(TEST_PORTS.end - TEST_PORTS.start);
    TEST_PORTS.start + u16::try_from(h.finish() % span).unwrap_or(0)
}

fn exhausted(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!(
            "no {what} between {} and {} not handed out before",
            TEST_PORTS.start, TEST_PORTS.end
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_and_bindable() {
        let ports = free_ports(3).unwrap();
        assert_eq!(ports.len(), 3);
        assert!(ports.iter().all(|p| *p != 0));
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
        TcpListener::bind(("127.0.0.1", ports[0])).unwrap();
        assert_ne!(free_port().unwrap(), 0);
    }

    #[test]
    fn free_ports_are_below_the_ephemeral_range() {
        let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
        let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
        for _ in 0..20 {
            for p in free_ports(4).unwrap() {
                assert!(
                    p < low && TEST_PORTS.contains(&p),
                    "{p} (ephemeral from {low})"
                );
            }
        }
    }

    /// The regression: ports and blocks chosen by many threads at once never overlap, though
    /// none is bound in between (as when tests choose before their servers start).
    #[test]
    fn no_port_is_handed_out_twice_in_a_process() {
        let threads: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for _ in 0..50 {
                        if i % 2 == 0 {
                            mine.extend(free_ports(3).unwrap());
                        } else {
                            let base = free_port_block(4).unwrap();
                            mine.extend(base..base + 4);
                        }
                    }
                    mine
                })
            })
            .collect();
        let all: Vec<u16> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let distinct: HashSet<u16> = all.iter().copied().collect();
        assert_eq!(distinct.len(), all.len(), "a port was handed out twice");
        assert_eq!(all.len(), 4 * 50 * 3 + 4 * 50 * 4);
    }

    /// Processes that each choose ports (test runners that run a process per test) never
    /// get the same one: a live process's claim stands, a dead one's is taken over.
    #[test]
    fn a_port_is_claimed_across_processes() {
        let dir = std::env::temp_dir().join(format!("moco-port-claims-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let me = std::process::id();
        assert!(claim_across_processes(&dir, 20_001, me));
        // Held by a live process (this one, seen from another): refused.
        assert!(!claim_across_processes(&dir, 20_001, me + 1));
        assert!(!claim_across_processes(&dir, 20_001, me));
        // Held by a process that is gone: taken over.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        assert!(claim_across_processes(&dir, 20_002, dead));
        assert!(claim_across_processes(&dir, 20_002, me));
        assert_eq!(
            std::fs::read_to_string(dir.join("20002")).unwrap(),
            me.to_string()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_block_is_consecutive_free_and_inside_the_range() {
        let base = free_port_block(5).unwrap();
        assert!(TEST_PORTS.contains(&base) && TEST_PORTS.contains(&(base + 4)));
        let held: Vec<_> = (base..base + 5)
            .map(|p| TcpListener::bind(("127.0.0.1", p)).unwrap())
            .collect();
        assert_eq!(held.len(), 5);
    }
}
