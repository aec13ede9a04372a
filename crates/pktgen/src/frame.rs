//! Ethernet + IPv4 + UDP frames built by hand, for `--mode packet`.
//!
//! The frame is what the kernel's UDP socket would send: Ethernet II,
//! IPv4 without options (DF set, ID 0 as RFC 6864 allows for atomic
//! datagrams, TTL 64), UDP with a checksum, then the payload (our header,
//! zeros after it). Everything but the payload's sequence number,
//! timestamp and check is fixed per flow, so the UDP checksum is kept as a
//! partial sum of the fixed part, and each packet only adds its seven
//! changing 16-bit words.

use std::net::SocketAddrV4;

use crate::payload;

/// Ethernet header bytes.
pub const ETH_LEN: usize = 14;
/// IPv4 header bytes (no options).
pub const IP_LEN: usize = 20;
/// UDP header bytes.
pub const UDP_LEN: usize = 8;
/// Offset of the UDP payload in the frame.
pub const PAYLOAD_AT: usize = ETH_LEN + IP_LEN + UDP_LEN;
/// Offset of the UDP checksum in the frame.
const UDP_CHECK_AT: usize = ETH_LEN + IP_LEN + 6;

/// Addresses of one flow's frames.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    /// Source MAC (the outgoing interface's).
    pub src_mac: [u8; 6],
    /// Destination MAC (the next hop's).
    pub dst_mac: [u8; 6],
    /// Source IP and port.
    pub src: SocketAddrV4,
    /// Destination IP and port.
    pub dst: SocketAddrV4,
}

/// Sum of big-endian 16-bit words (odd length: padded with a zero byte),
/// not folded.
fn sum_words(bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    let mut s: u32 = chunks
        .by_ref()
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = chunks.remainder() {
        s += u32::from(*last) << 8;
    }
    s
}

/// Fold a sum to 16 bits with end-around carry.
fn fold(mut s: u32) -> u16 {
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// One flow's frame template and its fixed checksum part.
#[derive(Debug, Clone)]
pub struct Template {
    /// The whole frame, payload header with sequence 0 and timestamp 0.
    pub bytes: Vec<u8>,
    /// UDP checksum sum over everything but the changing payload words.
    fixed_sum: u32,
}

impl Template {
    /// A frame of `frame_len` bytes (without FCS; at least
    /// [`PAYLOAD_AT`] + [`payload::LEN`]) for `flow`.
    pub fn new(a: &Addresses, flow: u16, frame_len: usize) -> Template {
        assert!((PAYLOAD_AT + payload::LEN..=1514).contains(&frame_len));
        let mut b = vec![0u8; frame_len];
        b[0..6].copy_from_slice(&a.dst_mac);
        b[6..12].copy_from_slice(&a.src_mac);
        b[12..14].copy_from_slice(&0x0800u16.to_be_bytes());

        let ip_len = (frame_len - ETH_LEN) as u16;
        let ip = &mut b[ETH_LEN..ETH_LEN + IP_LEN];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&a.src.ip().octets());
        ip[16..20].copy_from_slice(&a.dst.ip().octets());
        let ip_check = !fold(sum_words(ip));
        ip[10..12].copy_from_slice(&ip_check.to_be_bytes());

        let udp_len = ip_len - IP_LEN as u16;
        let udp = &mut b[ETH_LEN + IP_LEN..PAYLOAD_AT];
        udp[0..2].copy_from_slice(&a.src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&a.dst.port().to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        payload::write_fixed(&mut b[PAYLOAD_AT..], flow);

        // Pseudo header (addresses, protocol, UDP length), UDP header and
        // the payload's magic and flow id; the rest of the payload is zero
        // apart from bytes 4..18, added per packet.
        let fixed_sum = sum_words(&a.src.ip().octets())
            + sum_words(&a.dst.ip().octets())
            + 17
            + u32::from(udp_len)
            + sum_words(&b[ETH_LEN + IP_LEN..PAYLOAD_AT + 4]);
        Template {
            bytes: b,
            fixed_sum,
        }
    }

    /// Stamp sequence number and timestamp into `frame` (a copy of
    /// `bytes`) and set its UDP checksum.
    #[inline]
    pub fn stamp(&self, frame: &mut [u8], seq: u32, send_ns: u64) {
        let p = &mut frame[PAYLOAD_AT..];
        payload::stamp(p, seq, send_ns);
        let sum = self.fixed_sum + sum_words(&p[4..payload::LEN]);
        let c = match !fold(sum) {
            0 => 0xFFFF, // 0 means "no checksum" in UDP over IPv4
            c => c,
        };
        frame[UDP_CHECK_AT..UDP_CHECK_AT + 2].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Payload;

    fn addresses() -> Addresses {
        Addresses {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "10.0.0.1:40000".parse().unwrap(),
            dst: "10.0.0.2:9000".parse().unwrap(),
        }
    }

    /// The UDP checksum computed from scratch, RFC 768 style.
    fn udp_check_of(frame: &[u8]) -> u16 {
        let ip = &frame[ETH_LEN..ETH_LEN + IP_LEN];
        let udp = &frame[ETH_LEN + IP_LEN..];
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        let mut u = udp.to_vec();
        u[6] = 0;
        u[7] = 0;
        pseudo.extend_from_slice(&u);
        match !fold(sum_words(&pseudo)) {
            0 => 0xFFFF,
            c => c,
        }
    }

    #[test]
    fn headers_and_checksums() {
        for len in [60usize, 61, 100, 1514] {
            let t = Template::new(&addresses(), 3, len);
            let mut f = t.bytes.clone();
            t.stamp(&mut f, 0x0102_0304, 1_700_000_000_999_999_999);
            assert_eq!(f.len(), len);
            // IP header checksums to zero (all ones before inversion).
            assert_eq!(fold(sum_words(&f[ETH_LEN..ETH_LEN + IP_LEN])), 0xFFFF);
            assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, len - ETH_LEN);
            assert_eq!(
                u16::from_be_bytes([f[38], f[39]]) as usize,
                len - ETH_LEN - IP_LEN
            );
            let stored = u16::from_be_bytes([f[40], f[41]]);
            assert_eq!(stored, udp_check_of(&f), "len {len}");
            // The payload is ours.
            let p = Payload::parse(&f[PAYLOAD_AT..]).unwrap();
            assert_eq!(
                p,
                Payload {
                    flow: 3,
                    seq: 0x0102_0304,
                    send_ns: 1_700_000_000_999_999_999
                }
            );
            assert!(f[PAYLOAD_AT + payload::LEN..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn checksum_stays_right_over_many_stamps() {
        let t = Template::new(&addresses(), 0, 60);
        let mut f = t.bytes.clone();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for seq in 0..20_000u32 {
            x = x.rotate_left(7).wrapping_mul(0x2545_F491_4F6C_DD1D);
            t.stamp(&mut f, seq.wrapping_mul(2_654_435_761), x);
            assert_eq!(
                u16::from_be_bytes([f[40], f[41]]),
                udp_check_of(&f),
                "seq {seq}"
            );
        }
    }
}
