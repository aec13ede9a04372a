//! `--mode udp`: one connected UDP socket per flow, sendmmsg.
//!
//! Everything a call needs is built once: per flow, a [`MsgBatch`] of
//! `batch` payloads (magic and flow id written, the rest zero). A turn only
//! patches sequence number, timestamp and check into the first `count`
//! and hands the prebuilt headers to the kernel.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::sys::socket::{
    bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage,
};

use crate::mmsg::MsgBatch;
use crate::payload;
use crate::send::Transmit;

/// Requested send buffer (SO_SNDBUFFORCE, else SO_SNDBUF).
pub const SNDBUF: usize = 4 << 20;

/// Most packets in one UDP_SEGMENT message (the kernel's
/// `UDP_MAX_SEGMENTS` is 64 before Linux 6.9, 128 since).
const GSO_MAX_SEGS: usize = 64;

/// Most UDP payload bytes in one message (IPv4's limit, 65507, rounded
/// down for headroom).
const GSO_MAX_BYTES: usize = 65_000;

/// One flow's socket and prebuilt messages.
struct Flow {
    fd: OwnedFd,
    msgs: MsgBatch,
    /// `--mode gso`: packets per message.
    gso_segs: Option<usize>,
}

/// The UDP transmitter.
pub struct Udp {
    flows: Vec<Flow>,
}

/// Open and connect the socket of `dst`, from `src_port` if given.
fn open(dst: &SocketAddr, src_port: Option<u16>) -> Result<OwnedFd, String> {
    let family = if dst.is_ipv6() {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let fd = socket(family, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None)
        .map_err(|e| format!("--flow {dst}: cannot create a UDP socket: {e}"))?;
    if setsockopt(&fd, sockopt::SndBufForce, &SNDBUF).is_err() {
        // Not privileged: the ordinary limit (net.core.wmem_max) applies.
        let _ = setsockopt(&fd, sockopt::SndBuf, &SNDBUF);
    }
    if let Some(port) = src_port {
        // Several flows may share the source port.
        setsockopt(&fd, sockopt::ReuseAddr, &true)
            .map_err(|e| format!("--src-port {port}: SO_REUSEADDR: {e}"))?;
        let any: SocketAddr = if dst.is_ipv6() {
            (std::net::Ipv6Addr::UNSPECIFIED, port).into()
        } else {
            (std::net::Ipv4Addr::UNSPECIFIED, port).into()
        };
        bind(fd.as_raw_fd(), &SockaddrStorage::from(any))
            .map_err(|e| format!("--src-port {port}: cannot bind: {e}"))?;
    }
    connect(fd.as_raw_fd(), &SockaddrStorage::from(*dst))
        .map_err(|e| format!("--flow {dst}: cannot connect (no route?): {e}"))?;
    Ok(fd)
}

impl Udp {
    /// Sockets for `dsts` (flow id = index), payloads of `payload_len[i]`
    /// bytes (at least [`payload::LEN`]), up to `batch` per turn. With
    /// `gso`, each sendmmsg message carries several packets that the kernel
    /// splits into separate datagrams (`UDP_SEGMENT`).
    pub fn new(
        dsts: &[SocketAddr],
        payload_len: &[usize],
        batch: usize,
        src_port: Option<u16>,
        gso: bool,
    ) -> Result<Udp, String> {
        let mut flows = Vec::with_capacity(dsts.len());
        for (id, (dst, &len)) in dsts.iter().zip(payload_len).enumerate() {
            assert!(len >= payload::LEN);
            let fd = open(dst, src_port)?;
            let mut template = vec![0u8; len];
            payload::write_fixed(&mut template, id as u16);
            let gso_segs = if gso {
                setsockopt(&fd, sockopt::UdpGsoSegment, &(len as i32))
                    .map_err(|e| format!("--mode gso: UDP_SEGMENT refused on {dst}: {e}"))?;
                Some(GSO_MAX_SEGS.min(GSO_MAX_BYTES / len))
            } else {
                None
            };
            flows.push(Flow {
                fd,
                msgs: MsgBatch::new(&template, batch),
                gso_segs,
            });
        }
        Ok(Udp { flows })
    }
}

impl Transmit for Udp {
    #[inline]
    fn prepare(&mut self, flow: usize, first_seq: u32, count: usize, ts_ns: u64) {
        for (i, p) in self.flows[flow].msgs.packets_mut(count).enumerate() {
            payload::stamp(p, first_seq.wrapping_add(i as u32), ts_ns);
        }
    }

    #[inline]
    fn submit(&mut self, flow: usize, from: usize, to: usize) -> io::Result<usize> {
        let f = &mut self.flows[flow];
        match f.gso_segs {
            Some(segs) => f.msgs.send_gso(f.fd.as_fd(), from, to, segs),
            None => f.msgs.send(f.fd.as_fd(), from, to),
        }
    }
}
