//! Listen addresses as MOCO's flags write them (`:8080`, `host:port`, `[v6]:port`, `0`), and
//! binding them.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use tokio::net::TcpListener;

/// A listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {flag} {addr}: {source}")]
pub struct BindError {
    /// The flag naming the address.
    pub flag: &'static str,
    /// The address as given (or as resolved).
    pub addr: String,
    /// The IO error.
    pub source: std::io::Error,
}

/// A listen address as MOCO's flags take it: `:8080` (every interface), `host:port`,
/// `[v6]:port`, or `0` (disabled; for `--metrics-addr` and `--health-probe-addr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// Not served.
    Disabled,
    /// Every interface (IPv6 and IPv4 where available, IPv4 otherwise).
    AllInterfaces(u16),
    /// An IP literal.
    Socket(SocketAddr),
    /// A host name, resolved when binding.
    Host(String, u16),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Disabled => f.write_str("0 (disabled)"),
            ListenAddr::AllInterfaces(port) => write!(f, ":{port}"),
            ListenAddr::Socket(addr) => write!(f, "{addr}"),
            ListenAddr::Host(host, port) => write!(f, "{host}:{port}"),
        }
    }
}

/// Parses a listen address (see [`ListenAddr`]).
pub fn parse_listen_addr(text: &str) -> Result<ListenAddr, String> {
    let t = text.trim();
    if t.is_empty() || t == "0" {
        return Ok(ListenAddr::Disabled);
    }
    if let Ok(addr) = SocketAddr::from_str(t) {
        return Ok(ListenAddr::Socket(addr));
    }
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(format!(
            "{text:?}: expected HOST:PORT or :PORT (e.g. :8080), or 0 to disable"
        ));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{text:?}: {port:?} is not a port number"))?;
    if host.is_empty() {
        return Ok(ListenAddr::AllInterfaces(port));
    }
    if host.contains(':') || host.starts_with('[') {
        return Err(format!(
            "{text:?}: an IPv6 address must be written in brackets, e.g. [::1]:8080"
        ));
    }
    Ok(ListenAddr::Host(host.to_owned(), port))
}

/// Binds `addr` (`flag` names it in errors) and returns the listener with the address it got
/// (the port is known only now when `:0` was asked); `None` when disabled.
pub async fn bind(
    flag: &'static str,
    addr: &ListenAddr,
) -> Result<Option<(TcpListener, SocketAddr)>, BindError> {
    let bind_error = |addr: String, source| BindError { flag, addr, source };
    let listener = match addr {
        ListenAddr::Disabled => return Ok(None),
        ListenAddr::Socket(a) => TcpListener::bind(a)
            .await
            .map_err(|e| bind_error(a.to_string(), e))?,
        ListenAddr::Host(host, port) => TcpListener::bind((host.as_str(), *port))
            .await
            .map_err(|e| bind_error(format!("{host}:{port}"), e))?,
        ListenAddr::AllInterfaces(port) => {
            // `[::]` accepts IPv4 too on dual-stack hosts; IPv4-only hosts get 0.0.0.0.
            match TcpListener::bind((Ipv6Addr::UNSPECIFIED, *port)).await {
                Ok(l) => l,
                Err(_) => TcpListener::bind((Ipv4Addr::UNSPECIFIED, *port))
                    .await
                    .map_err(|e| bind_error(format!(":{port}"), e))?,
            }
        }
    };
    let local = listener
        .local_addr()
        .map_err(|source| bind_error(addr.to_string(), source))?;
    Ok(Some((listener, local)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addrs() {
        assert_eq!(
            parse_listen_addr(":8080"),
            Ok(ListenAddr::AllInterfaces(8080))
        );
        assert_eq!(parse_listen_addr("0"), Ok(ListenAddr::Disabled));
        assert_eq!(parse_listen_addr(""), Ok(ListenAddr::Disabled));
        assert_eq!(
            parse_listen_addr("127.0.0.1:9443"),
            Ok(ListenAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 9443))))
        );
        assert_eq!(
            parse_listen_addr("[::1]:8081"),
            Ok(ListenAddr::Socket(SocketAddr::from((
                Ipv6Addr::LOCALHOST,
                8081
            ))))
        );
        assert_eq!(
            parse_listen_addr("localhost:8081"),
            Ok(ListenAddr::Host("localhost".into(), 8081))
        );
        for bad in ["8080", ":http", ":70000", "::1:80", "[::1]80"] {
            assert!(parse_listen_addr(bad).is_err(), "{bad:?} accepted");
        }
    }
}
