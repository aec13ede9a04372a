//! Where packets to a destination leave: the kernel's routing and
//! neighbour tables as `/proc/net` shows them (for this process's network
//! namespace, whatever is mounted on /sys).
//!
//! Only the main routing table is read (longest prefix, then lowest
//! metric); policy routing is not followed.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A route of `/proc/net/route`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Outgoing interface.
    pub dev: String,
    dst: u32,
    /// Next hop (0: on link).
    pub gateway: u32,
    mask: u32,
    metric: u32,
}

/// Parse `/proc/net/route` (addresses are hex in host byte order of the
/// kernel's `__be32`, i.e. the bytes as they are in memory).
pub fn parse_routes(text: &str) -> Vec<Route> {
    let hex = |s: &str| {
        u32::from_str_radix(s, 16)
            .ok()
            .map(|v| u32::from_be_bytes(v.to_ne_bytes()))
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            // RTF_UP
            if flags & 1 == 0 {
                return None;
            }
            Some(Route {
                dev: f.first()?.to_string(),
                dst: hex(f.get(1)?)?,
                gateway: hex(f.get(2)?)?,
                metric: f.get(6)?.parse().ok()?,
                mask: hex(f.get(7)?)?,
            })
        })
        .collect()
}

/// The route to `dst`: longest prefix, then lowest metric.
pub fn lookup(routes: &[Route], dst: Ipv4Addr) -> Option<&Route> {
    let d = u32::from(dst);
    routes
        .iter()
        .filter(|r| d & r.mask == r.dst & r.mask)
        .max_by(|a, b| {
            a.mask
                .count_ones()
                .cmp(&b.mask.count_ones())
                .then(b.metric.cmp(&a.metric))
        })
}

/// The complete neighbour entry of `ip` on `dev` in `/proc/net/arp`.
pub fn parse_arp(text: &str, ip: Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let flags = u32::from_str_radix(f.get(2)?.trim_start_matches("0x"), 16).ok()?;
        // ATF_COM: resolved.
        if f.first()?.parse::<Ipv4Addr>().ok()? != ip || *f.get(5)? != dev || flags & 2 == 0 {
            return None;
        }
        let mut mac = [0u8; 6];
        let parts: Vec<&str> = f.get(3)?.split(':').collect();
        if parts.len() != 6 {
            return None;
        }
        for (m, p) in mac.iter_mut().zip(parts) {
            *m = u8::from_str_radix(p, 16).ok()?;
        }
        Some(mac)
    })
}

/// Parse `/proc/net/ipv6_route` into (destination, prefix length, metric,
/// device) of the routes that are up.
fn parse_routes6(text: &str) -> Vec<(u128, u32, u32, String)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let flags = u32::from_str_radix(f.get(8)?, 16).ok()?;
            if flags & 1 == 0 {
                return None;
            }
            Some((
                u128::from_str_radix(f.first()?, 16).ok()?,
                u32::from_str_radix(f.get(1)?, 16).ok()?,
                u32::from_str_radix(f.get(5)?, 16).ok()?,
                f.get(9)?.to_string(),
            ))
        })
        .collect()
}

/// The device of the IPv6 route to `dst`.
fn lookup6(routes: &[(u128, u32, u32, String)], dst: Ipv6Addr) -> Option<&str> {
    let d = u128::from(dst);
    let mask = |len: u32| {
        if len == 0 {
            0
        } else {
            u128::MAX << (128 - len.min(128))
        }
    };
    routes
        .iter()
        .filter(|(net, len, _, _)| d & mask(*len) == net & mask(*len))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)))
        .map(|r| r.3.as_str())
}

/// Whether `ip` is one of this namespace's own addresses (the kernel's
/// local table routes those through `lo`).
fn is_local(ip: IpAddr) -> bool {
    nix::ifaddrs::getifaddrs().is_ok_and(|mut addrs| {
        addrs.any(|a| {
            let own = a.address.as_ref();
            match ip {
                IpAddr::V4(v4) => own
                    .and_then(|s| s.as_sockaddr_in())
                    .is_some_and(|s| s.ip() == v4),
                IpAddr::V6(v6) => own
                    .and_then(|s| s.as_sockaddr_in6())
                    .is_some_and(|s| s.ip() == v6),
            }
        })
    })
}

/// The interface packets to `dst` leave through.
pub fn egress_device(dst: IpAddr) -> Result<String, String> {
    if dst.is_loopback() || is_local(dst) {
        return Ok("lo".into());
    }
    let read = |p: &str| fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let dev = match dst {
        IpAddr::V4(ip) => {
            lookup(&parse_routes(&read("/proc/net/route")?), ip).map(|r| r.dev.clone())
        }
        IpAddr::V6(ip) => {
            lookup6(&parse_routes6(&read("/proc/net/ipv6_route")?), ip).map(str::to_owned)
        }
    };
    dev.ok_or_else(|| format!("no route to {dst} in the main table"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTES: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth1\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth2\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth3\t0002000A\t00000000\t0001\t0\t0\t5\t00FFFFFF\t0\t0\t0
down\t0003000A\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    #[test]
    fn routes() {
        let r = parse_routes(ROUTES);
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].gateway, u32::from(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(r[1].mask, u32::from(Ipv4Addr::new(255, 255, 255, 0)));
        let dev = |ip: [u8; 4]| lookup(&r, Ipv4Addr::from(ip)).map(|r| r.dev.clone());
        assert_eq!(dev([10, 0, 0, 7]).as_deref(), Some("eth1"));
        assert_eq!(dev([10, 0, 2, 7]).as_deref(), Some("eth2"));
        assert_eq!(dev([10, 0, 3, 7]).as_deref(), Some("eth0"));
        assert_eq!(dev([8, 8, 8, 8]).as_deref(), Some("eth0"));
    }

    #[test]
    fn neighbours() {
        let arp = "\
IP address       HW type     Flags       HW address            Mask     Device
10.0.0.2         0x1         0x2         0a:1b:2c:3d:4e:5f     *        veth0
10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        veth0
";
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            parse_arp(arp, ip("10.0.0.2"), "veth0"),
            Some([0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f])
        );
        assert_eq!(parse_arp(arp, ip("10.0.0.2"), "veth1"), None);
        assert_eq!(parse_arp(arp, ip("10.0.0.3"), "veth0"), None);
    }

    #[test]
    fn routes6() {
        let text = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth1
fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0
fd000000000000000000000000000003 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 00000000     down
";
        let r = parse_routes6(text);
        assert_eq!(r.len(), 3);
        let dev = |s: &str| lookup6(&r, s.parse().unwrap());
        assert_eq!(dev("fd00::7"), Some("eth1"));
        assert_eq!(dev("fd00::2"), Some("lo"));
        assert_eq!(dev("fd00::3"), Some("eth1"));
        assert_eq!(dev("2001:db8::1"), Some("eth0"));
    }
}
