//! Segmentation offload at the endpoints: virtio-net headers, software
//! segmentation of TCP and UDP super-frames, checksum completion.
//!
//! With offloads on, every frame read from or written to a TAP endpoint
//! starts with a 10-byte `struct virtio_net_hdr`. The stack behind the TAP
//! may hand the engine one TCP (TSO) or UDP (USO) *super-frame* of up to
//! 64 KiB standing for many wire packets, and frames whose transport
//! checksum is left for the device to finish (`NEEDS_CSUM`).
//!
//! A direction that treats every packet alike (a perfect or delay-only link:
//! [`link_core::DirectionParams::needs_wire_packets`] is false) passes such a
//! frame whole, header and all, and the receiving stack takes it as it
//! would from a real NIC with GRO. A direction that serialises, queues,
//! loses, duplicates, corrupts or jitters packets must see the wire packets,
//! so [`to_wire`] cuts the super-frame into them, exactly as the kernel's
//! software GSO would: headers copied, IPv4 total length and ID, IPv6
//! payload length, TCP sequence numbers and flags, UDP length, and every
//! checksum computed in full (so a corrupted bit is caught by the receiver,
//! as on a real link). Each comes out with an all-zero header.

mod csum;

use csum::{complete_checksum, fold, pseudo_sum, sum};

/// Length of `struct virtio_net_hdr` (without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start +
/// csum_offset` holds only the pseudo-header sum.
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// A parsed `struct virtio_net_hdr` (little-endian on the wire, as the TAP
/// device uses it by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`, with the ECN bit.
    pub gso_type: u8,
    /// Header length hint (unused here: computed from the packet).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the transport checksum's coverage starts (the L4 header).
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Parse the first [`VNET_HDR_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let h = b.get(..VNET_HDR_LEN)?;
        let u16le = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
        Some(Self {
            flags: h[0],
            gso_type: h[1],
            hdr_len: u16le(2),
            gso_size: u16le(4),
            csum_start: u16le(6),
            csum_offset: u16le(8),
        })
    }

    /// Serialise into 10 bytes.
    #[cfg(test)]
    pub fn bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// A frame that is already exactly one wire packet with a complete
    /// checksum.
    pub fn is_wire(&self) -> bool {
        self.gso_type & !GSO_ECN == GSO_NONE && self.flags & F_NEEDS_CSUM == 0
    }
}

/// Turn `frame` (a virtio-net header, then an Ethernet frame) into the wire
/// packets it stands for, each with an all-zero header and complete
/// checksums, appended to `out`. Returns how many.
pub fn to_wire(frame: &[u8], out: &mut Vec<Vec<u8>>) -> Result<usize, String> {
    let hdr = VnetHdr::parse(frame).ok_or("frame shorter than its virtio-net header")?;
    let eth = &frame[VNET_HDR_LEN..];
    if hdr.is_wire() {
        let mut f = frame.to_vec();
        f[..VNET_HDR_LEN].fill(0);
        out.push(f);
        return Ok(1);
    }
    match hdr.gso_type & !GSO_ECN {
        GSO_NONE => {
            let mut f = frame.to_vec();
            f[..VNET_HDR_LEN].fill(0);
            complete_checksum(&mut f[VNET_HDR_LEN..], &hdr)?;
            out.push(f);
            Ok(1)
        }
        GSO_TCPV4 | GSO_TCPV6 | GSO_UDP_L4 => {
            let proto = if hdr.gso_type & !GSO_ECN == GSO_UDP_L4 {
                IPPROTO_UDP
            } else {
                IPPROTO_TCP
            };
            let mut s = Segmenter::parse(eth, hdr, proto)?;
            let count = s.remaining();
            while let Some((f, _, _)) = s.take(1) {
                out.push(f);
            }
            Ok(count)
        }
        other => Err(format!("unsupported GSO type {other}")),
    }
}

/// Where the network header starts, and its version (4 or 6).
fn l3(eth: &[u8]) -> Result<(usize, u8), String> {
    let ethertype = |at: usize| -> Result<u16, String> {
        eth.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "truncated Ethernet header".to_owned())
    };
    let (at, kind) = match ethertype(12)? {
        ETH_P_8021Q => (18, ethertype(16)?),
        t => (14, t),
    };
    match kind {
        ETH_P_IPV4 => Ok((at, 4)),
        ETH_P_IPV6 => Ok((at, 6)),
        t => Err(format!("offloaded frame with EtherType {t:#06x}")),
    }
}

/// A TCP or UDP super-frame being cut, front to back, into pieces of one
/// or more of the wire packets (*segments*) it stands for.
///
/// A piece of one segment is a wire packet: an all-zero virtio-net header
/// and complete checksums. A piece of several is itself a smaller
/// super-frame, as the stack would have built it for those segments alone:
/// the same header with `NEEDS_CSUM`, IPv4 total length and ID (the ID of
/// its first segment), IPv6 payload length, TCP sequence number (FIN and
/// PSH only on the piece holding the last segment, CWR only on the first),
/// UDP length, and the pseudo-header sum for its own length in the
/// transport checksum field; the receiving stack takes it as a frame that
/// GRO merged.
#[derive(Debug)]
pub struct Segmenter<'a> {
    eth: &'a [u8],
    hdr: VnetHdr,
    proto: u8,
    l3: usize,
    version: u8,
    l4: usize,
    l4_len: usize,
    mss: usize,
    count: usize,
    next: usize,
    ip_id: u16,
    seq: u32,
}

impl<'a> Segmenter<'a> {
    /// Parse `frame` (a virtio-net header, then an Ethernet frame); `None`
    /// if it is not a TCP or UDP super-frame (a wire packet, or one that
    /// only needs its checksum: see [`to_wire`]).
    pub fn new(frame: &'a [u8]) -> Option<Result<Self, String>> {
        let hdr = VnetHdr::parse(frame)?;
        let proto = match hdr.gso_type & !GSO_ECN {
            GSO_TCPV4 | GSO_TCPV6 => IPPROTO_TCP,
            GSO_UDP_L4 => IPPROTO_UDP,
            _ => return None,
        };
        Some(Self::parse(&frame[VNET_HDR_LEN..], hdr, proto))
    }

    fn parse(eth: &'a [u8], hdr: VnetHdr, proto: u8) -> Result<Self, String> {
        let (l3, version) = l3(eth)?;
        let l4 = usize::from(hdr.csum_start);
        if l4 < l3 + 20 || l4 + 8 > eth.len() {
            return Err(format!(
                "csum_start {l4} outside the frame ({} bytes)",
                eth.len()
            ));
        }
        let l4_len = if proto == IPPROTO_TCP {
            usize::from(eth[l4 + 12] >> 4) * 4
        } else {
            8
        };
        if l4_len < 8 || l4 + l4_len > eth.len() {
            return Err("transport header beyond the frame".to_owned());
        }
        let mss = usize::from(hdr.gso_size);
        if mss == 0 {
            return Err("gso_size 0".to_owned());
        }
        let payload = eth.len() - l4 - l4_len;
        Ok(Self {
            eth,
            hdr,
            proto,
            l3,
            version,
            l4,
            l4_len,
            mss,
            count: payload.div_ceil(mss).max(1),
            next: 0,
            ip_id: u16::from_be_bytes([eth[l3 + 4], eth[l3 + 5]]),
            seq: u32::from_be_bytes([eth[l4 + 4], eth[l4 + 5], eth[l4 + 6], eth[l4 + 7]]),
        })
    }

    /// Segments not yet taken.
    pub fn remaining(&self) -> usize {
        self.count - self.next
    }

    /// Bytes of a full segment on the wire (headers and `gso_size` bytes of
    /// payload, from the Ethernet header on).
    pub fn segment_bytes(&self) -> usize {
        self.l4 + self.l4_len + self.mss
    }

    /// The next piece, of `n` segments (at least 1, at most
    /// [`remaining`](Self::remaining)), header included. Returns it with
    /// the segments it holds and their bytes on the wire; `None` once every
    /// segment has been taken.
    pub fn take(&mut self, n: usize) -> Option<(Vec<u8>, u32, u64)> {
        let n = n.clamp(1, self.remaining().max(1));
        if self.next >= self.count {
            return None;
        }
        let (first, last) = (self.next, self.next + n);
        self.next = last;
        let hlen = self.l4 + self.l4_len;
        let payload = &self.eth[hlen..];
        let body =
            &payload[(first * self.mss).min(payload.len())..(last * self.mss).min(payload.len())];
        let mut f = Vec::with_capacity(VNET_HDR_LEN + hlen + body.len());
        if n == 1 {
            f.extend_from_slice(&[0; VNET_HDR_LEN]);
        } else {
            let gso_type = if first == 0 {
                self.hdr.gso_type
            } else {
                self.hdr.gso_type & !GSO_ECN
            };
            f.extend_from_slice(&[F_NEEDS_CSUM, gso_type]);
            for v in [
                hlen as u16,
                self.mss as u16,
                self.l4 as u16,
                self.hdr.csum_offset,
            ] {
                f.extend_from_slice(&v.to_le_bytes());
            }
        }
        f.extend_from_slice(&self.eth[..hlen]);
        f.extend_from_slice(body);
        let (l3, l4, proto) = (self.l3, self.l4, self.proto);
        let p = &mut f[VNET_HDR_LEN..];
        let l4_total = self.l4_len + body.len();
        if self.version == 4 {
            let ihl = usize::from(p[l3] & 0x0f) * 4;
            let total = (l4 - l3 + l4_total) as u16;
            p[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
            let id = self.ip_id.wrapping_add(first as u16);
            p[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
            p[l3 + 10..l3 + 12].fill(0);
            let c = !fold(sum(0, &p[l3..l3 + ihl]));
            p[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            let plen = (l4 - l3 - 40 + l4_total) as u16;
            p[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        }
        let check_at = if proto == IPPROTO_TCP {
            let s = self.seq.wrapping_add((first * self.mss) as u32);
            p[l4 + 4..l4 + 8].copy_from_slice(&s.to_be_bytes());
            let mut flags = p[l4 + 13];
            if last < self.count {
                flags &= !(TCP_FIN | TCP_PSH);
            }
            if first > 0 {
                flags &= !TCP_CWR;
            }
            p[l4 + 13] = flags;
            l4 + 16
        } else {
            p[l4 + 4..l4 + 6].copy_from_slice(&(l4_total as u16).to_be_bytes());
            l4 + 6
        };
        let pseudo = match pseudo_sum(p, l3, self.version, proto, l4_total) {
            Ok(s) => s,
            Err(_) => unreachable!("a super-frame is shorter than 4 GiB"),
        };
        if n == 1 {
            p[check_at..check_at + 2].fill(0);
            let mut c = !fold(sum(pseudo, &p[l4..]));
            if c == 0 && proto == IPPROTO_UDP {
                c = 0xffff;
            }
            p[check_at..check_at + 2].copy_from_slice(&c.to_be_bytes());
        } else {
            p[check_at..check_at + 2].copy_from_slice(&fold(pseudo).to_be_bytes());
        }
        let wire = (n * hlen + body.len()) as u64;
        Some((f, n as u32, wire))
    }
}

#[cfg(test)]
pub(crate) mod tests;
