//! Where a `callback_url` may point: public addresses only, unless the gateway runs with
//! `--allow-private-callbacks`. A caller that could name `http://169.254.169.254/…` or
//! `http://10.0.0.5/admin` would have the gateway post to the cloud's metadata service or to
//! the gateway's own network on its behalf.
//!
//! A URL is checked when its request is taken ([`check`]: every address its host resolves
//! to), and again when each attempt connects: the webhook client resolves names through
//! [`PublicOnly`], so a name that resolved to a public address at first and to a private one
//! later (DNS rebinding) is refused at send time, and the address checked is the one
//! connected to.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Host names of cloud metadata services, refused whatever they resolve to.
pub const METADATA_HOSTS: [&str; 1] = ["metadata.google.internal"];

/// Why a callback URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The host is, or resolves to, an address that is not public.
    #[error("callback_url's host {host} is {address}, a {range} address: callbacks go to public addresses only")]
    Address {
        /// The host as written.
        host: String,
        /// The address refused.
        address: IpAddr,
        /// What kind of address it is (`loopback`, `private`, …).
        range: Range,
    },
    /// The host names a cloud metadata service.
    #[error("callback_url's host {0} is a cloud metadata service: callbacks go to public addresses only")]
    Metadata(String),
    /// The host does not resolve.
    #[error("callback_url's host {host} does not resolve: {why}")]
    Unresolved {
        /// The host as written.
        host: String,
        /// The resolver's answer.
        why: String,
    },
}

/// A kind of address a callback may not go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, `fc00::/7`.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT: a provider's own network.
    Shared,
    /// `169.254.169.254`, `fd00:ec2::254`: the cloud's instance metadata service.
    Metadata,
    /// `224.0.0.0/4`, `255.255.255.255`, `ff00::/8`.
    Multicast,
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Range::Unspecified => "unspecified",
            Range::Loopback => "loopback",
            Range::LinkLocal => "link-local",
            Range::Private => "private",
            Range::Shared => "shared (carrier-grade NAT)",
            Range::Metadata => "cloud metadata",
            Range::Multicast => "multicast or broadcast",
        })
    }
}

/// The range `address` falls in, if it is not a public address.
pub fn range_of(address: IpAddr) -> Option<Range> {
    match address {
        IpAddr::V4(v4) => range_of_v4(v4),
        IpAddr::V6(v6) => range_of_v6(v6),
    }
}

fn range_of_v4(address: Ipv4Addr) -> Option<Range> {
    let [a, b, ..] = address.octets();
    if address == Ipv4Addr::new(169, 254, 169, 254) {
        Some(Range::Metadata)
    } else if a == 0 {
        Some(Range::Unspecified)
    } else if address.is_loopback() {
        Some(Range::Loopback)
    } else if address.is_link_local() {
        Some(Range::LinkLocal)
    } else if address.is_private() {
        Some(Range::Private)
    } else if a == 100 && (b & 0xc0) == 64 {
        Some(Range::Shared)
    } else if address.is_multicast() || address.is_broadcast() {
        Some(Range::Multicast)
    } else {
        None
    }
}

fn range_of_v6(address: Ipv6Addr) -> Option<Range> {
    // An IPv4 address written as IPv6 (::ffff:a.b.c.d, or NAT64's 64:ff9b::a.b.c.d) reaches
    // that IPv4 address.
    if let Some(v4) = address.to_ipv4_mapped() {
        return range_of_v4(v4);
    }
    let segments = address.segments();
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [a, b] = segments[6].to_be_bytes();
        let [c, d] = segments[7].to_be_bytes();
        return range_of_v4(Ipv4Addr::new(a, b, c, d));
    }
    if address == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some(Range::Metadata)
    } else if address.is_unspecified() {
        Some(Range::Unspecified)
    } else if address.is_loopback() {
        Some(Range::Loopback)
    } else if segments[0] & 0xffc0 == 0xfe80 {
        Some(Range::LinkLocal)
    } else if segments[0] & 0xfe00 == 0xfc00 {
        Some(Range::Private)
    } else if address.is_multicast() {
        Some(Range::Multicast)
    } else {
        None
    }
}

/// Checks that `url`'s host is public: a literal address outside every [`Range`], or a name
/// that is no metadata service and each of whose addresses is public.
pub async fn check(url: &reqwest::Url) -> Result<(), Refused> {
    match address_of(url) {
        Some(address) => literal(url.host_str().unwrap_or_default(), address),
        None => resolve(url.host_str().unwrap_or_default()).await.map(drop),
    }
}

/// Checks a URL whose host is an address: no resolver is asked for it at send time, so it
/// is checked before each attempt instead.
pub fn check_literal(url: &reqwest::Url) -> Result<(), Refused> {
    address_of(url).map_or(Ok(()), |address| literal(url.host_str().unwrap_or_default(), address))
}

/// The host as an address, when it is one (the URL parser has already normalised forms such
/// as `0x7f.1` to `127.0.0.1`, and writes IPv6 in brackets).
fn address_of(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).parse().ok()
}

fn literal(host: &str, address: IpAddr) -> Result<(), Refused> {
    match range_of(address) {
        Some(range) => Err(Refused::Address { host: host.to_owned(), address, range }),
        None => Ok(()),
    }
}

/// Every address `name` resolves to, if each is public.
async fn resolve(name: &str) -> Result<Vec<SocketAddr>, Refused> {
    let bare = name.trim_end_matches('.');
    if METADATA_HOSTS.iter().any(|host| bare.eq_ignore_ascii_case(host)) {
        return Err(Refused::Metadata(name.to_owned()));
    }
    let unresolved = |why: String| Refused::Unresolved { host: name.to_owned(), why };
    let addresses: Vec<SocketAddr> =
        tokio::net::lookup_host((name, 0)).await.map_err(|e| unresolved(e.to_string()))?.collect();
    if addresses.is_empty() {
        return Err(unresolved("no address".into()));
    }
    for address in &addresses {
        literal(name, address.ip())?;
    }
    Ok(addresses)
}

/// The webhook client's resolver when private callbacks are not allowed: a name resolves
/// only if every one of its addresses is public, so each attempt connects to an address
/// checked for that attempt.
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addresses = resolve(&name).await?;
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests;
