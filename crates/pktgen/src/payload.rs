//! The 18-byte header every generated packet carries at the start of its
//! UDP payload (the rest of the payload is zero).
//!
//! ```text
//! offset  size  field
//!  0       2    magic 0xF1 0xDE
//!  2       2    flow id            (u16, big-endian)
//!  4       4    sequence number    (u32, big-endian, per flow, from 0)
//!  8       8    send timestamp     (u64, big-endian, CLOCK_REALTIME ns)
//! 16       2    check              (u16, big-endian)
//! ```
//!
//! The check is the ones'-complement sum (end-around carry, as in the
//! Internet checksum but not inverted) of the eight big-endian 16-bit words
//! of bytes 0..16. A single flipped bit changes one word by ±2^i, which
//! changes a ones'-complement sum by a non-zero amount modulo 0xFFFF, so
//! every single-bit error (in the check too) is detected. Received bytes are
//! only ever interpreted through [`Payload::parse`].

use std::fmt;

/// Bytes of the header at the start of the UDP payload.
pub const LEN: usize = 18;

/// The first two bytes of every payload.
pub const MAGIC: [u8; 2] = [0xF1, 0xDE];

/// A decoded, checked payload header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    /// Index of the sender's `--flow` option.
    pub flow: u16,
    /// Per-flow sequence number, from 0.
    pub seq: u32,
    /// CLOCK_REALTIME, ns, read just before the send call.
    pub send_ns: u64,
}

/// Why a datagram is not one of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Fewer than [`LEN`] bytes.
    TooShort,
    /// The first two bytes are not [`MAGIC`].
    BadMagic,
    /// The check does not match bytes 0..16.
    BadCheck,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TooShort => "shorter than 18 bytes",
            Self::BadMagic => "bad magic",
            Self::BadCheck => "bad check",
        })
    }
}

impl std::error::Error for Malformed {}

impl Payload {
    /// Decode the start of a UDP payload, checking length, magic and check.
    pub fn parse(bytes: &[u8]) -> Result<Payload, Malformed> {
        let Some(head) = bytes.get(..LEN) else {
            return Err(Malformed::TooShort);
        };
        if head[..2] != MAGIC {
            return Err(Malformed::BadMagic);
        }
        if u16::from_be_bytes([head[16], head[17]]) != check(&head[..16]) {
            return Err(Malformed::BadCheck);
        }
        let word =
            |r: std::ops::Range<usize>| head[r].iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
        Ok(Payload {
            flow: word(2..4) as u16,
            seq: word(4..8) as u32,
            send_ns: word(8..16),
        })
    }

    /// Write the header into `out[..LEN]` (the rest is left alone).
    /// Panics if `out` is shorter than [`LEN`]. (The sender patches
    /// prebuilt buffers with [`write_fixed`] and [`stamp`] instead.)
    #[cfg(test)]
    pub fn write(&self, out: &mut [u8]) {
        write_fixed(out, self.flow);
        stamp(out, self.seq, self.send_ns);
    }
}

/// Write the parts that never change for a flow (magic, flow id).
pub fn write_fixed(out: &mut [u8], flow: u16) {
    out[..2].copy_from_slice(&MAGIC);
    out[2..4].copy_from_slice(&flow.to_be_bytes());
}

/// Patch sequence number, timestamp and check into a header whose magic and
/// flow id are already written (the sender's per-packet work).
#[inline]
pub fn stamp(out: &mut [u8], seq: u32, send_ns: u64) {
    out[4..8].copy_from_slice(&seq.to_be_bytes());
    out[8..16].copy_from_slice(&send_ns.to_be_bytes());
    let c = check(&out[..16]);
    out[16..18].copy_from_slice(&c.to_be_bytes());
}

/// Ones'-complement sum (end-around carry) of the big-endian 16-bit words
/// of `bytes` (an even number of bytes).
#[inline]
fn check(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(p: Payload) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        p.write(&mut b);
        b
    }

    const SAMPLES: [Payload; 4] = [
        Payload {
            flow: 0,
            seq: 0,
            send_ns: 0,
        },
        Payload {
            flow: 1,
            seq: 7,
            send_ns: 1_700_000_000_123_456_789,
        },
        Payload {
            flow: 0xFFFF,
            seq: u32::MAX,
            send_ns: u64::MAX,
        },
        Payload {
            flow: 0x1234,
            seq: 0x89AB_CDEF,
            send_ns: 0x0102_0304_0506_0708,
        },
    ];

    #[test]
    fn round_trip() {
        for p in SAMPLES {
            let b = encoded(p);
            assert_eq!(Payload::parse(&b), Ok(p));
            // Longer datagrams (zero-filled rest) parse the same.
            let mut long = vec![0u8; 1472];
            long[..LEN].copy_from_slice(&b);
            assert_eq!(Payload::parse(&long), Ok(p));
        }
    }

    #[test]
    fn layout_is_big_endian() {
        let b = encoded(Payload {
            flow: 0x0102,
            seq: 0x0304_0506,
            send_ns: 0x0708_090A_0B0C_0D0E,
        });
        assert_eq!(
            &b[..16],
            &[0xF1, 0xDE, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        );
        // Words summed with end-around carry: F1DE+0102+0304+0506+0708+090A+0B0C+0D0E.
        let sum: u32 = [
            0xF1DE, 0x0102, 0x0304, 0x0506, 0x0708, 0x090A, 0x0B0C, 0x0D0E,
        ]
        .iter()
        .sum();
        let folded = (sum & 0xFFFF) + (sum >> 16);
        assert_eq!(u16::from_be_bytes([b[16], b[17]]), folded as u16);
    }

    #[test]
    fn stamp_matches_write() {
        let p = SAMPLES[3];
        let mut b = [0xAAu8; LEN];
        write_fixed(&mut b, p.flow);
        stamp(&mut b, p.seq, p.send_ns);
        assert_eq!(b, encoded(p));
    }

    #[test]
    fn rejects_short_and_foreign() {
        let b = encoded(SAMPLES[1]);
        for n in 0..LEN {
            assert_eq!(
                Payload::parse(&b[..n]),
                Err(Malformed::TooShort),
                "{n} bytes"
            );
        }
        assert_eq!(Payload::parse(&[0u8; 64]), Err(Malformed::BadMagic));
        let mut c = b;
        c[17] ^= 0xFF;
        assert_eq!(Payload::parse(&c), Err(Malformed::BadCheck));
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        for p in SAMPLES {
            let b = encoded(p);
            for bit in 0..LEN * 8 {
                let mut c = b;
                c[bit / 8] ^= 1 << (bit % 8);
                let r = Payload::parse(&c);
                let want = if bit < 16 {
                    Malformed::BadMagic
                } else {
                    Malformed::BadCheck
                };
                assert_eq!(r, Err(want), "{p:?} bit {bit}");
            }
        }
    }
}
