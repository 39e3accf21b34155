//! The network guard of contract §14: the one place that decides whether a URL a model hands
//! to `web_fetch` may be reached. Only `http`/`https`, no credentials in the URL, the host read
//! as a URL parser reads it, and every address it resolves to global unicast by the IANA
//! special-purpose registries (IPv4 inside IPv6 checked as IPv4). The addresses it returns
//! are the ones checked: the caller connects to them and nothing else, so no second lookup
//! can answer differently (DNS rebinding).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;

use crate::ToolError;
use deerflow_model::BoxFuture;

/// How long a lookup may take: getaddrinfo has no bound of its own a caller can set.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Looks a host name up. The system's resolver in a run; a table in tests, so a name can
/// resolve to what a test needs without any lookup leaving the machine.
pub trait Resolve: Send + Sync {
    fn lookup<'a>(&'a self, host: &'a str, port: u16)
        -> BoxFuture<'a, io::Result<Vec<SocketAddr>>>;
}

/// The system resolver (getaddrinfo, on tokio's blocking pool).
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.collect()) })
    }
}

/// The guard of one `tools:` entry.
#[derive(Clone)]
pub struct Guard {
    /// DeerFlow's `allow_private_addresses: true`: addresses are still resolved (and the
    /// connection pinned to them) but not checked.
    pub allow_private: bool,
    resolver: Arc<dyn Resolve>,
    /// Which addresses may be reached: [`is_global`]; a test lets its own server's address
    /// pass as public to check what the guard does after it (a redirect to loopback).
    reachable: fn(IpAddr) -> bool,
}

impl Guard {
    pub fn new(allow_private: bool) -> Self {
        Self::with_resolver(allow_private, Arc::new(SystemResolver))
    }

    pub fn with_resolver(allow_private: bool, resolver: Arc<dyn Resolve>) -> Self {
        Self {
            allow_private,
            resolver,
            reachable: is_global,
        }
    }

    /// This guard with `reachable` deciding instead of [`is_global`].
    #[cfg(test)]
    pub(crate) fn with_policy(mut self, reachable: fn(IpAddr) -> bool) -> Self {
        self.reachable = reachable;
        self
    }

    /// The addresses `url` may be reached at, all of them checked; the connection must go to
    /// one of these. `url` must have passed [`check_url`].
    pub async fn admit(&self, url: &Url) -> Result<Vec<SocketAddr>, ToolError> {
        let shown = url.host_str().unwrap_or_default().to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs = match host_ip(&shown) {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None if shown.is_empty() => return Err(ToolError::invalid("URL", "it has no host")),
            None => {
                if is_localhost_name(&shown) && !self.allow_private {
                    return Err(denied(&shown));
                }
                self.resolve(&shown, port).await?
            }
        };
        if !self.allow_private && addrs.iter().any(|a| !(self.reachable)(a.ip())) {
            return Err(denied(&shown));
        }
        Ok(addrs)
    }

    async fn resolve(&self, name: &str, port: u16) -> Result<Vec<SocketAddr>, ToolError> {
        let cannot = |e: &dyn std::fmt::Display| ToolError::cannot("resolve", name, e);
        let lookup = tokio::time::timeout(LOOKUP_TIMEOUT, self.resolver.lookup(name, port));
        let addrs = lookup
            .await
            .map_err(|_| cannot(&"no answer within 10 s"))?
            .map_err(|e| cannot(&e))?;
        if addrs.is_empty() {
            return Err(cannot(&"no address"));
        }
        Ok(addrs)
    }
}

/// The refusal the model reads (contract §14's exact words).
pub fn denied(host: &str) -> ToolError {
    ToolError::Refused(format!(
        "Access denied: {host} resolves to a private address"
    ))
}

/// Parses a URL as a browser would (`http://2130706433/` is 127.0.0.1) and refuses what no
/// fetch may ask for: another scheme, credentials, no host.
pub fn check_url(raw: &str) -> Result<Url, ToolError> {
    let url = Url::parse(raw.trim()).map_err(|e| ToolError::invalid("URL", e))?;
    check_parsed(&url)?;
    Ok(url)
}

/// [`check_url`]'s rules on a URL already parsed (a redirect's target).
pub fn check_parsed(url: &Url) -> Result<(), ToolError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::Message(format!(
            "only http and https URLs can be fetched, not {}:",
            url.scheme()
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ToolError::Message(
            "URLs with credentials (user:pass@) are refused".into(),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ToolError::invalid("URL", "it has no host"));
    }
    Ok(())
}

/// A redirect from `from` to `to` may be followed: `to` passes [`check_parsed`] and does not
/// go down from https to http.
pub fn check_hop(from: &Url, to: &Url) -> Result<(), ToolError> {
    check_parsed(to)?;
    if from.scheme() == "https" && to.scheme() == "http" {
        return Err(ToolError::Message(format!(
            "refused a redirect from https down to http ({})",
            deerflow_model::http::redact_url(to)
        )));
    }
    Ok(())
}

/// The address a URL's host spells, if it is one. The URL parser has already turned every
/// IPv4 spelling (`2130706433`, `0177.1`, `0x7f.1`, `127.1`) into dotted decimal and put IPv6
/// in brackets, so a host that does not parse here is a name.
fn host_ip(host: &str) -> Option<IpAddr> {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
    }
}

/// `localhost`, `localhost.` and `*.localhost` are loopback whatever a resolver says
/// (RFC 6761), so they are refused without asking one.
fn is_localhost_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Whether `ip` is global unicast: reachable on the public internet by the IANA IPv4 and
/// IPv6 special-purpose address registries. IPv4 carried inside IPv6 is judged as IPv4.
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => is_global_v6(v6),
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let not_global = a == 0 // "this network"
        || a == 10 // RFC 1918
        || a == 127 // loopback
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 169 && b == 254) // link-local: cloud metadata endpoints
        || (a == 172 && (16..32).contains(&b)) // RFC 1918
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast (deprecated)
        || (a == 192 && b == 168) // RFC 1918
        || (a == 198 && (18..20).contains(&b)) // benchmarking 198.18/15
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224 // multicast 224/4, reserved 240/4, broadcast
        || ip == Ipv4Addr::new(168, 63, 129, 16); // Azure's host endpoint (metadata, DNS)
    !not_global
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    let octets = ip.octets();
    let v4_at = |i: usize| Ipv4Addr::new(octets[i], octets[i + 1], octets[i + 2], octets[i + 3]);
    if ip.is_unspecified() || ip.is_loopback() {
        return false;
    }
    // IPv4-mapped ::ffff:0:0/96 and IPv4-compatible ::/96 (deprecated, still routed by
    // some stacks to the IPv4 address).
    if seg[..5] == [0; 5] && (seg[5] == 0xffff || seg[5] == 0) {
        return is_global_v4(v4_at(12));
    }
    // NAT64 64:ff9b::/96: the gateway connects to the embedded IPv4 address.
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_global_v4(v4_at(12));
    }
    // 6to4 2002::/16: the IPv4 address in bits 16..48.
    if seg[0] == 0x2002 {
        return is_global_v4(v4_at(2));
    }
    // Teredo 2001::/32: the server in bits 32..64, the client obfuscated (inverted) in the
    // last 32 bits.
    if seg[0] == 0x2001 && seg[1] == 0 {
        let client = Ipv4Addr::from(!u32::from(v4_at(12)));
        return is_global_v4(v4_at(4)) && is_global_v4(client);
    }
    // Global unicast is 2000::/3; everything outside it (ULA fc00::/7, link-local
    // fe80::/10, site-local fec0::/10, multicast ff00::/8, discard 100::/64, local NAT64
    // 64:ff9b:1::/48, …) is not.
    if seg[0] & 0xe000 != 0x2000 {
        return false;
    }
    match seg[0] {
        // IETF protocol assignments 2001::/23, documentation 2001:db8::/32.
        0x2001 => seg[1] >= 0x200 && seg[1] != 0xdb8,
        // Documentation 3fff::/20.
        0x3fff => seg[1] >= 0x1000,
        _ => true,
    }
}

#[cfg(test)]
#[path = "guard_tests.rs"]
pub(crate) mod tests;
