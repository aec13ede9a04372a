//! `--mode packet`: AF_PACKET sockets with `PACKET_QDISC_BYPASS`, frames
//! built by [`frame`](crate::frame), sent with sendmmsg. IPv4 only, needs
//! CAP_NET_RAW.
//!
//! This skips the kernel's UDP and IP output paths and the qdisc; the
//! frames on the wire are the same as `--mode udp` sends (apart from the IP
//! ID, 0 here), with the same payloads.
//!
//! Per flow, the outgoing interface and gateway come from the main routing
//! table ([`route`](crate::route)), the source address and (without
//! `--src-port`) source port from a UDP socket connected to the
//! destination (the kernel's own choice; the socket stays open so the port
//! stays reserved), the source MAC from the interface, the destination MAC
//! from `--dst-mac` or the neighbour table (`/proc/net/arp`).

use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::ifaddrs::getifaddrs;
use nix::sys::socket::{setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType};

use crate::frame::{Addresses, Template};
use crate::mmsg::MsgBatch;
use crate::route::{lookup, parse_arp, parse_routes};
use crate::send::Transmit;
use crate::udp::SNDBUF;

/// One flow's socket, template and prebuilt messages.
struct Flow {
    fd: OwnedFd,
    template: Template,
    msgs: MsgBatch,
    /// Keeps the source port reserved.
    _port: UdpSocket,
}

/// The AF_PACKET transmitter.
pub struct Packet {
    flows: Vec<Flow>,
}

/// Index and MAC of interface `dev`.
fn link_of(dev: &str) -> Result<(usize, [u8; 6]), String> {
    let addrs = getifaddrs().map_err(|e| format!("getifaddrs: {e}"))?;
    for a in addrs {
        if a.interface_name != dev {
            continue;
        }
        if let Some(link) = a.address.as_ref().and_then(|s| s.as_link_addr()) {
            if let Some(mac) = link.addr() {
                return Ok((link.ifindex(), mac));
            }
        }
    }
    Err(format!("interface {dev} has no link-layer address"))
}

/// A bound AF_PACKET socket on `ifindex` that bypasses the qdisc.
fn open_socket(ifindex: usize, dev: &str) -> Result<OwnedFd, String> {
    // Protocol 0: this socket receives nothing; it only sends.
    let fd = socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| {
        format!("--mode packet: cannot open an AF_PACKET socket (needs CAP_NET_RAW): {e}")
    })?;
    // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll of the given size, alive for
    // the call.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(format!(
            "--mode packet: cannot bind to {dev}: {}",
            io::Error::last_os_error()
        ));
    }
    let one: libc::c_int = 1;
    // SAFETY: `one` is a c_int that outlives the call, with its size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(format!(
            "--mode packet: PACKET_QDISC_BYPASS: {}",
            io::Error::last_os_error()
        ));
    }
    // A frame stays charged to the socket until the receiving side frees
    // it; the default limit (a few hundred frames) would throttle the sender
    // to the receiver's pace.
    if setsockopt(&fd, sockopt::SndBufForce, &SNDBUF).is_err() {
        let _ = setsockopt(&fd, sockopt::SndBuf, &SNDBUF);
    }
    Ok(fd)
}

impl Packet {
    /// Sockets and frames of `size` bytes (FCS included) for `dsts`.
    pub fn new(
        dsts: &[SocketAddr],
        size: usize,
        batch: usize,
        src_port: Option<u16>,
        dst_mac: Option<[u8; 6]>,
    ) -> Result<Packet, String> {
        let routes_text =
            fs::read_to_string("/proc/net/route").map_err(|e| format!("/proc/net/route: {e}"))?;
        let routes = parse_routes(&routes_text);
        let mut flows = Vec::with_capacity(dsts.len());
        for (id, dst) in dsts.iter().enumerate() {
            let SocketAddr::V4(dst) = *dst else {
                return Err("--mode packet: IPv4 flows only".into());
            };
            let route = lookup(&routes, *dst.ip())
                .ok_or_else(|| format!("--flow {dst}: no route in the main table"))?;
            // The kernel's source address (and an ephemeral port) for dst.
            let probe = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, src_port.unwrap_or(0)))
                .or_else(|e| {
                    if src_port.is_some() {
                        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
                    } else {
                        Err(e)
                    }
                })
                .and_then(|s| s.connect(dst).map(|()| s))
                .map_err(|e| format!("--flow {dst}: cannot find a source address: {e}"))?;
            let SocketAddr::V4(local) = probe
                .local_addr()
                .map_err(|e| format!("getsockname: {e}"))?
            else {
                return Err(format!("--flow {dst}: IPv4 source expected"));
            };
            let src = SocketAddrV4::new(*local.ip(), src_port.unwrap_or(local.port()));
            let (ifindex, src_mac) = link_of(&route.dev)?;
            let next_hop = if route.gateway != 0 {
                Ipv4Addr::from(route.gateway)
            } else {
                *dst.ip()
            };
            let dst_mac = match dst_mac {
                Some(m) => m,
                None => {
                    let arp = fs::read_to_string("/proc/net/arp")
                        .map_err(|e| format!("/proc/net/arp: {e}"))?;
                    parse_arp(&arp, next_hop, &route.dev).ok_or_else(|| {
                        format!(
                            "--flow {dst}: no resolved neighbour entry for {next_hop} on {} \
                             (ping it first, add a static entry, or give --dst-mac)",
                            route.dev
                        )
                    })?
                }
            };
            let template = Template::new(
                &Addresses {
                    src_mac,
                    dst_mac,
                    src,
                    dst,
                },
                id as u16,
                size - 4,
            );
            let msgs = MsgBatch::new(&template.bytes, batch);
            let fd = open_socket(ifindex, &route.dev)?;
            crate::log!(
                "flow {id}: {src} -> {dst} via {} (next hop {next_hop}, {})",
                route.dev,
                dst_mac
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            );
            flows.push(Flow {
                fd,
                template,
                msgs,
                _port: probe,
            });
        }
        Ok(Packet { flows })
    }
}

impl Transmit for Packet {
    #[inline]
    fn prepare(&mut self, flow: usize, first_seq: u32, count: usize, ts_ns: u64) {
        let f = &mut self.flows[flow];
        for (i, frame) in f.msgs.packets_mut(count).enumerate() {
            f.template
                .stamp(frame, first_seq.wrapping_add(i as u32), ts_ns);
        }
    }

    #[inline]
    fn submit(&mut self, flow: usize, from: usize, to: usize) -> io::Result<usize> {
        let f = &mut self.flows[flow];
        f.msgs.send(f.fd.as_fd(), from, to)
    }
}
