//! One question to the kernel's ethtool interface: does a device take
//! UDP GSO super-packets as they are (`tx-udp-segmentation` on), or does
//! the kernel split them into separate frames before the device?
//!
//! Feature bit positions are kernel-internal, so the bit is found by name
//! in the device's feature string set (`ETHTOOL_GSSET_INFO`,
//! `ETHTOOL_GSTRINGS`), then read from `ETHTOOL_GFEATURES`, all through
//! the `SIOCETHTOOL` ioctl.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;

/// The feature's name in `ethtool -k`.
const UDP_SEGMENTATION: &str = "tx-udp-segmentation";

/// A buffer for one ethtool command, 8-byte aligned, accessed by byte
/// offset in native byte order.
struct Buf(Vec<u64>);

impl Buf {
    fn new(bytes: usize) -> Buf {
        Buf(vec![0; bytes.div_ceil(8)])
    }
    /// A copy of the bytes.
    fn bytes(&self) -> Vec<u8> {
        self.0.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }
    fn u32_at(&self, at: usize) -> u32 {
        let b = self.0[at / 8].to_ne_bytes();
        u32::from_ne_bytes(b[at % 8..at % 8 + 4].try_into().expect("4 bytes"))
    }
    fn set_u32(&mut self, at: usize, v: u32) {
        let w = &mut self.0[at / 8];
        let mut b = w.to_ne_bytes();
        b[at % 8..at % 8 + 4].copy_from_slice(&v.to_ne_bytes());
        *w = u64::from_ne_bytes(b);
    }
    fn set_u64(&mut self, at: usize, v: u64) {
        self.0[at / 8] = v;
    }
}

/// Run one ethtool command on `dev` with `buf` as its argument.
fn ioctl(sock: &UnixDatagram, dev: &str, buf: &mut Buf) -> io::Result<()> {
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if dev.is_empty() || dev.len() >= req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = buf.0.as_mut_ptr().cast();
    // SAFETY: `req` is a NUL-terminated ifreq whose data pointer refers to
    // `buf`, which holds the command and room for the reply the kernel is
    // told of inside it; both outlive the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Whether `dev` has `tx-udp-segmentation` active.
pub fn udp_segmentation(dev: &str) -> io::Result<bool> {
    // Any socket will do for SIOCETHTOOL; it works in this network
    // namespace.
    let sock = UnixDatagram::unbound()?;

    // struct ethtool_sset_info { u32 cmd, reserved; u64 sset_mask; u32 data[]; }
    let mut info = Buf::new(24);
    info.set_u32(0, ETHTOOL_GSSET_INFO);
    info.set_u64(8, 1 << ETH_SS_FEATURES);
    ioctl(&sock, dev, &mut info)?;
    let count = info.u32_at(16) as usize;
    if count == 0 || count > 4096 {
        return Err(io::Error::other("no feature names"));
    }

    // struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[]; }
    let mut names = Buf::new(12 + count * ETH_GSTRING_LEN);
    names.set_u32(0, ETHTOOL_GSTRINGS);
    names.set_u32(4, ETH_SS_FEATURES);
    names.set_u32(8, count as u32);
    ioctl(&sock, dev, &mut names)?;
    let index = names.bytes()[12..12 + count * ETH_GSTRING_LEN]
        .chunks_exact(ETH_GSTRING_LEN)
        .position(|n| n.split(|&b| b == 0).next() == Some(UDP_SEGMENTATION.as_bytes()))
        .ok_or_else(|| io::Error::other(format!("no feature {UDP_SEGMENTATION}")))?;

    // struct ethtool_gfeatures { u32 cmd, size; struct { u32 available,
    // requested, active, never_changed; } features[size]; }
    let blocks = count.div_ceil(32);
    let mut features = Buf::new(8 + blocks * 16);
    features.set_u32(0, ETHTOOL_GFEATURES);
    features.set_u32(4, blocks as u32);
    ioctl(&sock, dev, &mut features)?;
    let active = features.u32_at(8 + (index / 32) * 16 + 8);
    Ok(active & (1 << (index % 32)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_answers() {
        // lo exists in every namespace; whatever its setting, the query
        // must succeed (it needs no privilege).
        udp_segmentation("lo").unwrap();
        assert!(udp_segmentation("no-such-dev0").is_err());
    }

    #[test]
    fn buffer_fields() {
        let mut b = Buf::new(20);
        b.set_u32(4, 7);
        b.set_u64(8, 9);
        b.set_u32(16, 11);
        assert_eq!((b.u32_at(0), b.u32_at(4), b.u32_at(16)), (0, 7, 11));
        assert_eq!(b.bytes().len(), 24);
    }
}
