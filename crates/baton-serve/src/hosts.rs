//! Which `Host` (and `Origin`) values the server answers to: never a DNS name other than
//! `localhost`, so a rebound name cannot reach it.

use std::net::IpAddr;

/// The `Host` header values accepted: the bound address and port, `localhost` for a loopback
/// or unspecified bind, and any IP literal for an unspecified bind. A DNS name other than
/// `localhost` is never accepted (a rebound name would otherwise reach the server).
#[derive(Debug, Clone)]
pub struct HostRule {
    pub ip: IpAddr,
    pub port: u16,
}

impl HostRule {
    pub fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if port != self.port {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return self.ip.is_loopback() || self.ip.is_unspecified();
        }
        match name.parse::<IpAddr>() {
            Ok(ip) => ip == self.ip || self.ip.is_unspecified(),
            Err(_) => false,
        }
    }
}

/// `name:port` or `[v6]:port` → (name, port); the port is required (the server never runs on
/// port 80 by default, so a browser always sends it).
fn split_host(host: &str) -> Option<(&str, u16)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        (v6, after.strip_prefix(':')?)
    } else {
        host.rsplit_once(':')?
    };
    Some((name, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn hosts_are_the_bound_address_or_localhost_never_another_name() {
        let rule = HostRule {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 4000,
        };
        assert!(rule.allows("127.0.0.1:4000"));
        assert!(rule.allows("localhost:4000"));
        assert!(!rule.allows("127.0.0.1:4001"));
        assert!(!rule.allows("127.0.0.1"));
        assert!(!rule.allows("evil.example:4000"));
        assert!(!rule.allows("10.0.0.1:4000"));
        assert!(!rule.allows(""));
        let any = HostRule {
            ip: "0.0.0.0".parse().unwrap(),
            port: 4000,
        };
        assert!(any.allows("10.0.0.1:4000"));
        assert!(!any.allows("rebound.example:4000"));
        let v6 = HostRule {
            ip: "::1".parse().unwrap(),
            port: 4000,
        };
        assert!(v6.allows("[::1]:4000"));
        assert!(!v6.allows("[::2]:4000"));
    }
}
