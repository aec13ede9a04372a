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
        GSO_TCPV4 | GSO_TCPV6 => segment(eth, &hdr, IPPROTO_TCP, out),
        GSO_UDP_L4 => segment(eth, &hdr, IPPROTO_UDP, out),
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

/// Fill in the checksum a `NEEDS_CSUM` frame left to the device: the field
/// holds the pseudo-header sum, so summing from `csum_start` to the end
/// (field included) and storing the complement completes it.
fn complete_checksum(eth: &mut [u8], hdr: &VnetHdr) -> Result<(), String> {
    let start = usize::from(hdr.csum_start);
    let field = start + usize::from(hdr.csum_offset);
    if field + 2 > eth.len() {
        return Err(format!(
            "checksum field at {field} beyond the frame ({} bytes)",
            eth.len()
        ));
    }
    let mut c = !fold(sum(0, &eth[start..]));
    if c == 0 && hdr.csum_offset == 6 {
        c = 0xffff; // UDP: 0 means "no checksum"
    }
    eth[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

fn segment(eth: &[u8], hdr: &VnetHdr, proto: u8, out: &mut Vec<Vec<u8>>) -> Result<usize, String> {
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
    let hlen = l4 + l4_len;
    if l4_len < 8 || hlen > eth.len() {
        return Err("transport header beyond the frame".to_owned());
    }
    let mss = usize::from(hdr.gso_size);
    if mss == 0 {
        return Err("gso_size 0".to_owned());
    }
    let payload = &eth[hlen..];
    let count = payload.len().div_ceil(mss).max(1);
    let ip_id = u16::from_be_bytes([eth[l3 + 4], eth[l3 + 5]]);
    let seq = u32::from_be_bytes([eth[l4 + 4], eth[l4 + 5], eth[l4 + 6], eth[l4 + 7]]);
    for i in 0..count {
        let chunk = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        let mut f = Vec::with_capacity(VNET_HDR_LEN + hlen + chunk.len());
        f.extend_from_slice(&[0; VNET_HDR_LEN]);
        f.extend_from_slice(&eth[..hlen]);
        f.extend_from_slice(chunk);
        let p = &mut f[VNET_HDR_LEN..];
        let l4_total = l4_len + chunk.len();
        if version == 4 {
            let ihl = usize::from(p[l3] & 0x0f) * 4;
            let total = (l4 - l3 + l4_total) as u16;
            p[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
            p[l3 + 4..l3 + 6].copy_from_slice(&ip_id.wrapping_add(i as u16).to_be_bytes());
            p[l3 + 10..l3 + 12].fill(0);
            let c = !fold(sum(0, &p[l3..l3 + ihl]));
            p[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            let plen = (l4 - l3 - 40 + l4_total) as u16;
            p[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        }
        let check_at = if proto == IPPROTO_TCP {
            let s = seq.wrapping_add((i * mss) as u32);
            p[l4 + 4..l4 + 8].copy_from_slice(&s.to_be_bytes());
            let mut flags = p[l4 + 13];
            if i + 1 < count {
                flags &= !(TCP_FIN | TCP_PSH);
            }
            if i > 0 {
                flags &= !TCP_CWR;
            }
            p[l4 + 13] = flags;
            l4 + 16
        } else {
            p[l4 + 4..l4 + 6].copy_from_slice(&(l4_total as u16).to_be_bytes());
            l4 + 6
        };
        p[check_at..check_at + 2].fill(0);
        let pseudo = pseudo_sum(p, l3, version, proto, l4_total)?;
        let mut c = !fold(sum(pseudo, &p[l4..]));
        if c == 0 && proto == IPPROTO_UDP {
            c = 0xffff;
        }
        p[check_at..check_at + 2].copy_from_slice(&c.to_be_bytes());
        out.push(f);
    }
    Ok(count)
}

/// The pseudo-header's contribution to a transport checksum.
fn pseudo_sum(p: &[u8], l3: usize, version: u8, proto: u8, len: usize) -> Result<u32, String> {
    let s = if version == 4 {
        let s = sum(0, &p[l3 + 12..l3 + 20]);
        s + u32::from(proto) + len as u32
    } else {
        let s = sum(0, &p[l3 + 8..l3 + 40]);
        let len = u32::try_from(len).map_err(|_| "IPv6 payload too long".to_owned())?;
        s + (len >> 16) + (len & 0xffff) + u32::from(proto)
    };
    Ok(s)
}

/// One's-complement sum of `data` as big-endian 16-bit words, added to
/// `acc` (not yet folded).
fn sum(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([w[0], w[1]])));
        if acc >= 0x8000_0000 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

/// Fold a 32-bit one's-complement sum to 16 bits.
fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A TSO super-frame (header included) of `payload` bytes cut at `mss`,
    /// for the daemon's tests.
    pub(crate) fn tcp_super_frame(payload: usize, mss: u16) -> Vec<u8> {
        let data: Vec<u8> = (0..payload).map(|i| (i % 251) as u8).collect();
        let mut eth = ipv4_tcp(&data, 0x18);
        seed_partial(&mut eth, 14, 4, IPPROTO_TCP, 34 + 16);
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 54,
            gso_size: mss,
            csum_start: 34,
            csum_offset: 16,
        };
        with_hdr(h, &eth)
    }

    const MAC: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

    fn ipv4_tcp(payload: &[u8], flags: u8) -> Vec<u8> {
        let mut f = MAC.to_vec();
        f.extend_from_slice(&ETH_P_IPV4.to_be_bytes());
        let total = (20 + 20 + payload.len()) as u16;
        f.extend_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, IPPROTO_TCP, 0, 0]);
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        // TCP: ports, seq 0xfffffff0 (wraps), ack, doff 5, flags, window.
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x50, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(payload);
        f
    }

    fn ipv6_udp(payload: &[u8]) -> Vec<u8> {
        let mut f = MAC.to_vec();
        f.extend_from_slice(&ETH_P_IPV6.to_be_bytes());
        let plen = (8 + payload.len()) as u16;
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[IPPROTO_UDP, 64]);
        let mut src = [0u8; 16];
        src[0] = 0xfd;
        src[15] = 1;
        let mut dst = src;
        dst[15] = 2;
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&[0x13, 0x88, 0x13, 0x89]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    /// As the stack leaves a `NEEDS_CSUM` frame: the field holds the folded
    /// pseudo-header sum (not complemented).
    fn seed_partial(eth: &mut [u8], l3: usize, version: u8, proto: u8, at: usize) {
        let l4 = if version == 4 { l3 + 20 } else { l3 + 40 };
        let len = eth.len() - l4;
        let s = fold(pseudo_sum(eth, l3, version, proto, len).unwrap());
        eth[at..at + 2].copy_from_slice(&s.to_be_bytes());
    }

    fn with_hdr(h: VnetHdr, eth: &[u8]) -> Vec<u8> {
        let mut f = h.bytes().to_vec();
        f.extend_from_slice(eth);
        f
    }

    /// Checksums valid, as a receiver checks them.
    fn assert_valid(seg: &[u8], proto: u8) {
        assert_eq!(&seg[..VNET_HDR_LEN], &[0; VNET_HDR_LEN]);
        let p = &seg[VNET_HDR_LEN..];
        let (l3, version) = l3(p).unwrap();
        let l4 = if version == 4 {
            assert_eq!(
                fold(sum(0, &p[l3..l3 + 20])),
                0xffff,
                "IPv4 header checksum"
            );
            let total = u16::from_be_bytes([p[l3 + 2], p[l3 + 3]]) as usize;
            assert_eq!(total, p.len() - l3);
            l3 + 20
        } else {
            let plen = u16::from_be_bytes([p[l3 + 4], p[l3 + 5]]) as usize;
            assert_eq!(plen, p.len() - l3 - 40);
            l3 + 40
        };
        let pseudo = pseudo_sum(p, l3, version, proto, p.len() - l4).unwrap();
        assert_eq!(fold(sum(pseudo, &p[l4..])), 0xffff, "transport checksum");
    }

    #[test]
    fn tcp_v4_super_frame_becomes_its_segments() {
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut eth = ipv4_tcp(&payload, 0x18 | TCP_FIN | TCP_CWR); // PSH ACK FIN CWR
        seed_partial(&mut eth, 14, 4, IPPROTO_TCP, 34 + 16);
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 54,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let mut out = Vec::new();
        assert_eq!(to_wire(&with_hdr(h, &eth), &mut out).unwrap(), 3);
        let mut joined = Vec::new();
        for (i, seg) in out.iter().enumerate() {
            assert_valid(seg, IPPROTO_TCP);
            let p = &seg[VNET_HDR_LEN..];
            let seq = u32::from_be_bytes([p[38], p[39], p[40], p[41]]);
            assert_eq!(seq, 0xffff_fff0u32.wrapping_add(1448 * i as u32));
            assert_eq!(u16::from_be_bytes([p[18], p[19]]), 0x1234 + i as u16);
            let flags = p[47];
            assert_eq!(flags & TCP_FIN != 0, i == 2, "FIN only on the last");
            assert_eq!(flags & TCP_PSH != 0, i == 2, "PSH only on the last");
            assert_eq!(flags & TCP_CWR != 0, i == 0, "CWR only on the first");
            joined.extend_from_slice(&p[54..]);
        }
        assert_eq!(out[0].len(), VNET_HDR_LEN + 54 + 1448);
        assert_eq!(out[2].len(), VNET_HDR_LEN + 54 + 4000 - 2 * 1448);
        assert_eq!(joined, payload);
    }

    #[test]
    fn udp_v6_super_frame_becomes_its_datagrams() {
        let payload: Vec<u8> = (0..2500u32).map(|i| (i % 256) as u8).collect();
        let mut eth = ipv6_udp(&payload);
        seed_partial(&mut eth, 14, 6, IPPROTO_UDP, 54 + 6);
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: 62,
            gso_size: 1000,
            csum_start: 54,
            csum_offset: 6,
        };
        let mut out = Vec::new();
        assert_eq!(to_wire(&with_hdr(h, &eth), &mut out).unwrap(), 3);
        let lens: Vec<usize> = out.iter().map(|s| s.len() - VNET_HDR_LEN - 62).collect();
        assert_eq!(lens, [1000, 1000, 500]);
        for seg in &out {
            assert_valid(seg, IPPROTO_UDP);
            let p = &seg[VNET_HDR_LEN..];
            let ulen = u16::from_be_bytes([p[58], p[59]]) as usize;
            assert_eq!(ulen, p.len() - 54);
        }
    }

    #[test]
    fn partial_checksum_is_completed() {
        let mut eth = ipv4_tcp(b"hello, world", 0x18);
        seed_partial(&mut eth, 14, 4, IPPROTO_TCP, 34 + 16);
        // The IPv4 header checksum is the stack's: fill it in as it would.
        let c = !fold(sum(0, &eth[14..34]));
        eth[24..26].copy_from_slice(&c.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let mut out = Vec::new();
        assert_eq!(to_wire(&with_hdr(h, &eth), &mut out).unwrap(), 1);
        assert_valid(&out[0], IPPROTO_TCP);
    }

    #[test]
    fn a_wire_frame_passes_unchanged_and_bad_ones_are_refused() {
        let eth = ipv4_tcp(b"x", 0x10);
        let mut out = Vec::new();
        assert_eq!(
            to_wire(&with_hdr(VnetHdr::default(), &eth), &mut out).unwrap(),
            1
        );
        assert_eq!(&out[0][VNET_HDR_LEN..], &eth[..]);
        let bad = [
            (
                VnetHdr {
                    gso_type: 3,
                    gso_size: 100,
                    ..VnetHdr::default()
                },
                "GSO type 3",
            ),
            (
                VnetHdr {
                    gso_type: GSO_TCPV4,
                    gso_size: 0,
                    csum_start: 34,
                    ..VnetHdr::default()
                },
                "gso_size 0",
            ),
            (
                VnetHdr {
                    gso_type: GSO_TCPV4,
                    gso_size: 100,
                    csum_start: 9000,
                    ..VnetHdr::default()
                },
                "outside the frame",
            ),
            (
                VnetHdr {
                    flags: F_NEEDS_CSUM,
                    csum_start: 60,
                    csum_offset: 16,
                    ..VnetHdr::default()
                },
                "beyond the frame",
            ),
        ];
        for (h, needle) in bad {
            let e = to_wire(&with_hdr(h, &eth), &mut out).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
        assert!(to_wire(&[0; 4], &mut out).is_err());
    }

    #[test]
    fn checksum_sum_handles_odd_lengths_and_carries() {
        assert_eq!(fold(sum(0, &[0xff, 0xff, 0xff, 0xff])), 0xffff);
        assert_eq!(fold(sum(0, &[0x01])), 0x0100);
        let big = vec![0xffu8; 70_000];
        assert_eq!(fold(sum(0, &big)), 0xffff);
    }
}
