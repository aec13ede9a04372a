//! A reusable batch of outgoing messages for sendmmsg.
//!
//! `n` copies of a packet, back to back in one buffer, an iovec for each
//! and an `mmsghdr` pointing at it, all built once. A send patches the
//! packets in place and hands a slice of the prebuilt headers to the
//! kernel: no per-packet allocation or header building in user space.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Prebuilt packets and their message headers.
pub struct MsgBatch {
    /// `n` packets of `len` bytes. Never reallocated: `iov` points in.
    bufs: Box<[u8]>,
    len: usize,
    /// One iovec per packet. Never reallocated: `hdrs` points in.
    iov: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// Scratch headers for [`send_gso`](Self::send_gso), rebuilt per call.
    gso_iov: Vec<libc::iovec>,
    gso_hdrs: Vec<libc::mmsghdr>,
}

impl MsgBatch {
    /// `n` copies of `template` (non-empty).
    pub fn new(template: &[u8], n: usize) -> MsgBatch {
        let len = template.len();
        assert!(len > 0 && n > 0);
        let mut bufs = template.repeat(n).into_boxed_slice();
        let mut iov: Box<[libc::iovec]> = bufs
            .chunks_exact_mut(len)
            .map(|c| libc::iovec {
                iov_base: c.as_mut_ptr().cast(),
                iov_len: len,
            })
            .collect();
        let hdrs = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: mmsghdr is plain old data; all-zero is valid (no
                // address, no control data).
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = v;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        MsgBatch {
            bufs,
            len,
            iov,
            hdrs,
            gso_iov: Vec::with_capacity(n),
            gso_hdrs: Vec::with_capacity(n),
        }
    }

    /// The first `count` packets, to patch.
    pub fn packets_mut(&mut self, count: usize) -> impl Iterator<Item = &mut [u8]> {
        self.bufs.chunks_exact_mut(self.len).take(count)
    }

    /// sendmmsg packets `from..to` on `fd` (connected or bound, so no
    /// address is needed), without blocking.
    pub fn send(&mut self, fd: BorrowedFd<'_>, from: usize, to: usize) -> io::Result<usize> {
        assert!(from < to && to <= self.hdrs.len() && self.iov.len() == self.hdrs.len());
        // SAFETY: `hdrs[from..to]` are initialised mmsghdrs whose iovecs
        // point into `bufs`; all three are owned by `self`, never
        // reallocated, and outlive the call. The kernel only reads the
        // packets and writes the headers' `msg_len` fields.
        let r = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr().add(from),
                (to - from) as u32,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }
}

impl MsgBatch {
    /// sendmmsg packets `from..to` on `fd`, a UDP socket with `UDP_SEGMENT`
    /// set to the packet length: `segs` packets per message, which the
    /// kernel splits into separate datagrams. Returns the packets of the
    /// messages sent.
    pub fn send_gso(
        &mut self,
        fd: BorrowedFd<'_>,
        from: usize,
        to: usize,
        segs: usize,
    ) -> io::Result<usize> {
        assert!(from < to && to <= self.hdrs.len() && segs > 0);
        self.gso_iov.clear();
        self.gso_hdrs.clear();
        let packets = &mut self.bufs[from * self.len..to * self.len];
        for chunk in packets.chunks_mut(segs * self.len) {
            self.gso_iov.push(libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            });
        }
        for v in self.gso_iov.iter_mut() {
            // SAFETY: mmsghdr is plain old data; all-zero is valid.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
            self.gso_hdrs.push(h);
        }
        // SAFETY: `gso_hdrs` are initialised mmsghdrs whose iovecs (in
        // `gso_iov`, not touched until the next call) point into `bufs`;
        // all are owned by `self` and outlive the call. The kernel only
        // reads the packets and writes the headers' `msg_len` fields.
        let r = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                self.gso_hdrs.as_mut_ptr(),
                self.gso_hdrs.len() as u32,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((r as usize * segs).min(to - from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn sends_the_patched_packets_in_order() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut b = MsgBatch::new(&[0u8; 20], 8);
        for (i, p) in b.packets_mut(5).enumerate() {
            p[0] = i as u8 + 1;
        }
        assert_eq!(b.send(tx.as_fd(), 1, 5).unwrap(), 4);
        let mut buf = [0u8; 64];
        for want in 2..=5u8 {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!((n, buf[0]), (20, want));
        }
    }

    #[test]
    fn gso_arrives_as_separate_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        nix::sys::socket::setsockopt(&tx, nix::sys::socket::sockopt::UdpGsoSegment, &20).unwrap();
        let mut b = MsgBatch::new(&[0u8; 20], 10);
        for (i, p) in b.packets_mut(10).enumerate() {
            p[0] = i as u8;
        }
        // Packets 1..10 in messages of 4, 4 and 1 packets.
        assert_eq!(b.send_gso(tx.as_fd(), 1, 10, 4).unwrap(), 9);
        let mut buf = [0u8; 256];
        for want in 1..10u8 {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!((n, buf[0]), (20, want));
        }
    }
}
