//! Receive sockets: set up for kernel timestamps and drop counts, read in
//! batches with recvmmsg.
//!
//! Each socket asks for software receive timestamps (`SO_TIMESTAMPING`
//! with `SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE`, which
//! arrive as an `SCM_TIMESTAMPING` message whose `ts[0]` is
//! CLOCK_REALTIME) and for `SO_RXQ_OVFL` (every datagram carries the
//! socket's cumulative drop counter, so drops in its receive buffer are
//! seen apart from network loss). Control messages are parsed from the
//! bytes, in safe code.

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{
    bind, getsockopt, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType,
    SockaddrStorage, TimestampingFlag,
};

use crate::cli::{OVERHEAD_V4, OVERHEAD_V6};
use crate::timestamp::ns_of;

/// Receive buffer per datagram. Frames are at most 1518 bytes (1472 bytes
/// of UDP payload); longer datagrams are truncated, their length is still
/// known (`MSG_TRUNC`).
const BUF: usize = 2048;

/// Control buffer per datagram, in u64 words (cmsghdr alignment): room for
/// SCM_TIMESTAMPING (16 + 48 bytes) and SO_RXQ_OVFL (16 + 4, padded).
const CMSG_WORDS: usize = 16;

/// `SK_MEMINFO_DROPS` in the array `SO_MEMINFO` returns.
const SK_MEMINFO_DROPS: usize = 8;

/// One bound socket.
pub struct RxSocket {
    fd: OwnedFd,
    /// The `--bind` address.
    pub addr: SocketAddr,
    /// Frame bytes beyond the UDP payload for this family (FCS included).
    pub overhead: u64,
    /// Whether the kernel timestamps this socket's datagrams.
    pub timestamping: bool,
    /// Latest drop counter carried by an SO_RXQ_OVFL message.
    pub drops_seen: u32,
}

impl RxSocket {
    /// Open, configure and bind a socket for `addr`.
    pub fn open(addr: SocketAddr, rcvbuf: usize) -> Result<RxSocket, String> {
        let family = if addr.is_ipv6() {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        let fd = socket(
            family,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )
        .map_err(|e| format!("--bind {addr}: cannot create a UDP socket: {e}"))?;
        if addr.is_ipv6() {
            // [::]:P takes IPv6 only, so 0.0.0.0:P can be bound as well.
            setsockopt(&fd, sockopt::Ipv6V6Only, &true)
                .map_err(|e| format!("--bind {addr}: IPV6_V6ONLY: {e}"))?;
        }
        if setsockopt(&fd, sockopt::RcvBufForce, &rcvbuf).is_err() {
            // Without CAP_NET_ADMIN: capped by net.core.rmem_max.
            setsockopt(&fd, sockopt::RcvBuf, &rcvbuf)
                .map_err(|e| format!("--rcvbuf {rcvbuf}: SO_RCVBUF on {addr}: {e}"))?;
        }
        let flags = TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE;
        let timestamping = match setsockopt(&fd, sockopt::Timestamping, &flags) {
            Ok(()) => true,
            Err(e) => {
                crate::log!(
                    "--bind {addr}: SO_TIMESTAMPING refused ({e}); using user-space timestamps"
                );
                false
            }
        };
        setsockopt(&fd, sockopt::RxqOvfl, &1)
            .map_err(|e| format!("--bind {addr}: SO_RXQ_OVFL: {e}"))?;
        bind(fd.as_raw_fd(), &SockaddrStorage::from(addr))
            .map_err(|e| format!("--bind {addr}: cannot bind: {e}"))?;
        let overhead = if addr.is_ipv6() {
            OVERHEAD_V6
        } else {
            OVERHEAD_V4
        } as u64;
        Ok(RxSocket {
            fd,
            addr,
            overhead,
            timestamping,
            drops_seen: 0,
        })
    }

    /// The socket's file descriptor.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The receive buffer the kernel granted (SO_RCVBUF reads back twice
    /// the bytes asked for: the kernel's allowance for its bookkeeping).
    pub fn rcvbuf(&self) -> usize {
        getsockopt(&self.fd, sockopt::RcvBuf).unwrap_or(0)
    }

    /// The socket's drop counter now (SO_MEMINFO), which also counts drops
    /// after the last datagram read.
    pub fn drops_now(&self) -> Option<u32> {
        let mut info = [0u32; 16];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: `info` is a writable buffer of `len` bytes that outlives
        // the call; the kernel writes at most `len` bytes and updates `len`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        (r == 0 && len as usize > SK_MEMINFO_DROPS * 4).then_some(info[SK_MEMINFO_DROPS])
    }
}

/// What one received datagram carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// The datagram's length (possibly more than was copied).
    pub len: usize,
    /// Kernel receive timestamp, CLOCK_REALTIME ns.
    pub rx_ns: Option<u64>,
    /// The socket's cumulative drop counter.
    pub drops: Option<u32>,
}

/// Buffers and headers for one recvmmsg call, reused for every call.
pub struct RxBatch {
    /// `n` buffers of [`BUF`] bytes. Never reallocated: `iov` points in.
    bufs: Box<[u8]>,
    /// Never reallocated: `hdrs` points in.
    iov: Box<[libc::iovec]>,
    /// Control buffers, [`CMSG_WORDS`] per datagram. Never reallocated.
    cmsg: Box<[u64]>,
    hdrs: Box<[libc::mmsghdr]>,
}

impl RxBatch {
    /// Room for `n` datagrams per call.
    pub fn new(n: usize) -> RxBatch {
        let mut bufs = vec![0u8; n * BUF].into_boxed_slice();
        let mut cmsg = vec![0u64; n * CMSG_WORDS].into_boxed_slice();
        let mut iov: Box<[libc::iovec]> = bufs
            .chunks_exact_mut(BUF)
            .map(|c| libc::iovec {
                iov_base: c.as_mut_ptr().cast(),
                iov_len: BUF,
            })
            .collect();
        let hdrs = iov
            .iter_mut()
            .zip(cmsg.chunks_exact_mut(CMSG_WORDS))
            .map(|(v, c)| {
                // SAFETY: mmsghdr is plain old data; all-zero is valid.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = v;
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = c.as_mut_ptr().cast();
                h
            })
            .collect();
        RxBatch {
            bufs,
            iov,
            cmsg,
            hdrs,
        }
    }

    /// Read up to the batch size of datagrams without blocking. `Ok(0)`:
    /// nothing waiting.
    pub fn recv(&mut self, sock: &RxSocket) -> io::Result<usize> {
        debug_assert_eq!(self.iov.len(), self.hdrs.len());
        for h in self.hdrs.iter_mut() {
            // The kernel overwrites these with what it used.
            h.msg_hdr.msg_controllen = CMSG_WORDS * 8;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every mmsghdr points at its own iovec (into `bufs`) and
        // control buffer (into `cmsg`), all owned by `self`, never
        // reallocated, with the lengths set above; no address is asked
        // for. The kernel writes only within those buffers and the headers.
        let r = unsafe {
            libc::recvmmsg(
                sock.fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            Ok(0)
        } else {
            Err(e)
        }
    }

    /// Datagram `i` of the last call: the bytes copied, and its metadata.
    pub fn get(&self, i: usize) -> (&[u8], Meta) {
        let h = &self.hdrs[i];
        let len = h.msg_len as usize;
        let data = &self.bufs[i * BUF..i * BUF + len.min(BUF)];
        // A copy as bytes (the buffer is u64s for cmsghdr alignment).
        let mut bytes = [0u8; CMSG_WORDS * 8];
        for (b, w) in bytes
            .chunks_exact_mut(8)
            .zip(&self.cmsg[i * CMSG_WORDS..(i + 1) * CMSG_WORDS])
        {
            b.copy_from_slice(&w.to_ne_bytes());
        }
        let used = h.msg_hdr.msg_controllen.min(bytes.len());
        let (rx_ns, drops) = parse_control(&bytes[..used]);
        (data, Meta { len, rx_ns, drops })
    }
}

/// Walk the control messages in `control` (as the kernel lays them out:
/// `cmsghdr` then data, each padded to `size_t`), returning the software
/// receive timestamp and the drop counter if present.
fn parse_control(control: &[u8]) -> (Option<u64>, Option<u32>) {
    const ALIGN: usize = size_of::<usize>();
    let header = size_of::<libc::cmsghdr>();
    let field = |b: &[u8], at: usize, n: usize| -> Option<u64> {
        let s = b.get(at..at + n)?;
        Some(match n {
            4 => u64::from(u32::from_ne_bytes(s.try_into().ok()?)),
            8 => u64::from_ne_bytes(s.try_into().ok()?),
            _ => return None,
        })
    };
    let (mut ts, mut drops) = (None, None);
    let mut at = 0;
    while at + header <= control.len() {
        let Some(len) = field(control, at, ALIGN).map(|l| l as usize) else {
            break;
        };
        if len < header || at + len > control.len() {
            break;
        }
        let level = field(control, at + ALIGN, 4).unwrap_or(0) as i32;
        let kind = field(control, at + ALIGN + 4, 4).unwrap_or(0) as i32;
        let data = &control[at + header..at + len];
        if level == libc::SOL_SOCKET {
            if kind == libc::SCM_TIMESTAMPING && data.len() >= 16 {
                // ts[0]: struct timespec { time_t tv_sec; long tv_nsec; }
                let sec = field(data, 0, 8).unwrap_or(0) as i64;
                let nsec = field(data, 8, 8).unwrap_or(0) as i64;
                if sec != 0 || nsec != 0 {
                    ts = Some(ns_of(sec, nsec));
                }
            } else if kind == libc::SO_RXQ_OVFL && data.len() >= 4 {
                drops = field(data, 0, 4).map(|d| d as u32);
            }
        }
        at += len.div_ceil(ALIGN) * ALIGN;
    }
    (ts, drops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(16 + data.len()).to_ne_bytes());
        b.extend_from_slice(&level.to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(data);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        b
    }

    fn timespecs(sec: i64, nsec: i64) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&sec.to_ne_bytes());
        d.extend_from_slice(&nsec.to_ne_bytes());
        d.extend_from_slice(&[0u8; 32]);
        d
    }

    #[test]
    fn parses_timestamp_and_drops() {
        let mut c = cmsg(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &7u32.to_ne_bytes());
        c.extend(cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPING,
            &timespecs(1_700_000_000, 5),
        ));
        assert_eq!(
            parse_control(&c),
            (Some(1_700_000_000_000_000_005), Some(7))
        );
        // Order does not matter; unknown messages are skipped.
        let mut c = cmsg(libc::IPPROTO_IP, 8, &[1, 2, 3, 4]);
        c.extend(cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPING,
            &timespecs(2, 0),
        ));
        assert_eq!(parse_control(&c), (Some(2_000_000_000), None));
    }

    #[test]
    fn tolerates_garbage() {
        assert_eq!(parse_control(&[]), (None, None));
        // A zero timestamp means none.
        let c = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &timespecs(0, 0));
        assert_eq!(parse_control(&c), (None, None));
        // Lengths that overrun or are too short stop the walk.
        let mut c = cmsg(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &1u32.to_ne_bytes());
        c[0] = 200;
        assert_eq!(parse_control(&c), (None, None));
        c[0] = 3;
        assert_eq!(parse_control(&c), (None, None));
        assert_eq!(parse_control(&c[..10]), (None, None));
    }
}
