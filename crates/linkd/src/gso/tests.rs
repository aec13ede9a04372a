//! Tests of segmentation and checksums.

use super::csum::{fold, pseudo_sum, sum};
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

/// Pieces of several segments are super-frames of their own: cut again,
/// they give exactly the wire packets the whole super-frame gives.
#[test]
fn pieces_are_super_frames_of_their_segments() {
    let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let mut tcp = ipv4_tcp(&payload, 0x18 | TCP_FIN | TCP_CWR);
    seed_partial(&mut tcp, 14, 4, IPPROTO_TCP, 34 + 16);
    let tcp = with_hdr(
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 54,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        },
        &tcp,
    );
    let mut udp = ipv6_udp(&payload[..4100]);
    seed_partial(&mut udp, 14, 6, IPPROTO_UDP, 54 + 6);
    let udp = with_hdr(
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: 62,
            gso_size: 1000,
            csum_start: 54,
            csum_offset: 6,
        },
        &udp,
    );
    for (frame, sizes) in [(&tcp, vec![3, 1, 2, 1]), (&udp, vec![2, 1, 2])] {
        let mut whole = Vec::new();
        let count = to_wire(frame, &mut whole).unwrap();
        let mut s = Segmenter::new(frame).unwrap().unwrap();
        assert_eq!(s.remaining(), count);
        let mut again = Vec::new();
        let mut wire = 0;
        for n in sizes {
            let (piece, k, bytes) = s.take(n).unwrap();
            assert_eq!(k as usize, n);
            let h = VnetHdr::parse(&piece).unwrap();
            if n == 1 {
                assert!(h.is_wire());
            } else {
                assert_eq!(h.flags, F_NEEDS_CSUM);
                assert_eq!(h.gso_type & GSO_ECN != 0, again.is_empty() && frame == &tcp);
                // The checksum field holds the pseudo-header sum for the
                // piece's own length, as the stack leaves it.
                let p = &piece[VNET_HDR_LEN..];
                let (l3, version) = l3(p).unwrap();
                let l4 = usize::from(h.csum_start);
                let proto = p[if version == 4 { l3 + 9 } else { l3 + 6 }];
                let want = fold(pseudo_sum(p, l3, version, proto, p.len() - l4).unwrap());
                let at = l4 + usize::from(h.csum_offset);
                assert_eq!(u16::from_be_bytes([p[at], p[at + 1]]), want);
            }
            let before = again.len();
            assert_eq!(to_wire(&piece, &mut again).unwrap(), n);
            let segs: u64 = again[before..]
                .iter()
                .map(|f| (f.len() - VNET_HDR_LEN) as u64)
                .sum();
            assert_eq!(segs, bytes, "wire bytes of the piece");
            wire += bytes;
        }
        assert_eq!(s.remaining(), 0);
        assert!(s.take(1).is_none());
        assert_eq!(again, whole);
        let total: u64 = whole.iter().map(|f| (f.len() - VNET_HDR_LEN) as u64).sum();
        assert_eq!(wire, total);
    }
    assert!(Segmenter::new(&with_hdr(VnetHdr::default(), &ipv4_tcp(b"x", 0x10))).is_none());
}
