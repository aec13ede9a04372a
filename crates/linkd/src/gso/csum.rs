//! Internet checksums: one's-complement sums, the pseudo-header, and the
//! completion of a checksum a `NEEDS_CSUM` frame left to the device.

use super::VnetHdr;

/// Fill in the checksum a `NEEDS_CSUM` frame left to the device: the field
/// holds the pseudo-header sum, so summing from `csum_start` to the end
/// (field included) and storing the complement completes it.
pub(super) fn complete_checksum(eth: &mut [u8], hdr: &VnetHdr) -> Result<(), String> {
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

/// The pseudo-header's contribution to a transport checksum.
pub(super) fn pseudo_sum(
    p: &[u8],
    l3: usize,
    version: u8,
    proto: u8,
    len: usize,
) -> Result<u32, String> {
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
pub(super) fn sum(mut acc: u32, data: &[u8]) -> u32 {
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
pub(super) fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}
