//! The forwarder: linkd's role reduced to "copy every frame from one endpoint to the
//! other, both directions, no shaping". One thread, pinned, blocking in poll().

use crate::sys::{self, Res};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

const BATCH: usize = 64;
/// Room for a 64 KiB GSO super-frame plus a virtio-net header.
const BUF: usize = 65536 + 64;
/// virtio_net_hdr, prepended to every frame when PACKET_VNET_HDR is on.
pub const VNET_HDR_LEN: usize = 10;

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// read()/write() one frame per syscall on two TAP queue fds, optionally with
    /// IFF_VNET_HDR and offloads (TUNSETOFFLOAD) on.
    Tap { vnet: bool },
    /// recvmmsg()/sendmmsg() on two AF_PACKET sockets, optionally with PACKET_VNET_HDR.
    Mmsg { vnet: bool },
    /// TPACKET_V3 mmap rx ring per socket, sendmmsg() straight out of the ring.
    Ring,
}

#[derive(Default)]
pub struct Stats {
    pub rx: AtomicU64,
    pub tx: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// Largest frame read (Ethernet header included, vnet header excluded).
    pub max_len: AtomicU64,
    /// Frames the kernel refused to send because they exceed the MTU (EMSGSIZE).
    pub too_big: AtomicU64,
    pub send_err: AtomicU64,
    /// Ring only: frames flagged TP_STATUS_CSUMNOTREADY (checksum left to "hardware").
    pub csum_partial: AtomicU64,
}

#[derive(Default)]
struct Local {
    rx: u64,
    tx: u64,
    tx_bytes: u64,
    max_len: u64,
    too_big: u64,
    send_err: u64,
    csum_partial: u64,
}

impl Stats {
    fn add(&self, l: &Local) {
        self.rx.fetch_add(l.rx, Relaxed);
        self.tx.fetch_add(l.tx, Relaxed);
        self.tx_bytes.fetch_add(l.tx_bytes, Relaxed);
        self.max_len.fetch_max(l.max_len, Relaxed);
        self.too_big.fetch_add(l.too_big, Relaxed);
        self.send_err.fetch_add(l.send_err, Relaxed);
        self.csum_partial.fetch_add(l.csum_partial, Relaxed);
    }
}

/// A running forwarder thread; stopped and joined on drop.
pub struct Forwarder {
    pub stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Res<()>>>,
    pub clock: libc::clockid_t,
}

impl Forwarder {
    /// Starts forwarding between `ports[0]` and `ports[1]`, which the thread takes over
    /// (and closes when it ends). The thread enters `netns` first (the daemon's
    /// namespace) and pins itself to `cpu`.
    pub fn start(kind: Kind, ports: [OwnedFd; 2], netns: &str, cpu: usize) -> Res<Forwarder> {
        let stats = Arc::new(Stats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp, ns) = (stats.clone(), stop.clone(), netns.to_owned());
        let handle = std::thread::Builder::new()
            .name("forwarder".into())
            .spawn(move || {
                sys::enter_netns(&ns)?;
                sys::pin(cpu)?;
                match kind {
                    Kind::Tap { vnet } => run_tap(&ports, vnet, &st, &sp),
                    Kind::Mmsg { vnet } => run_mmsg(&ports, vnet, &st, &sp),
                    Kind::Ring => run_ring(&ports, &st, &sp),
                }
            })
            .map_err(|e| format!("spawn forwarder: {e}"))?;
        use std::os::unix::thread::JoinHandleExt;
        let clock = sys::thread_clock(handle.as_pthread_t());
        let mut f = Forwarder {
            stats,
            stop,
            handle: Some(handle),
            clock: 0,
        };
        f.clock = clock?;
        Ok(f)
    }

    pub fn cpu_ns(&self) -> u64 {
        sys::thread_cpu_ns(self.clock)
    }

    /// Fails if the thread has already ended (it only ends on error or stop).
    pub fn check_alive(&mut self) -> Res<()> {
        if self.handle.as_ref().is_some_and(|h| h.is_finished()) {
            return self.finish().and(Err("forwarder ended early".into()));
        }
        Ok(())
    }

    pub fn finish(&mut self) -> Res<()> {
        self.stop.store(true, Relaxed);
        match self.handle.take() {
            Some(h) => h.join().map_err(|_| "forwarder panicked".to_string())?,
            None => Ok(()),
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            eprintln!("forwarder: {e}");
        }
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn run_tap(ports: &[OwnedFd; 2], vnet: bool, st: &Stats, stop: &AtomicBool) -> Res<()> {
    let hdr_len = if vnet { VNET_HDR_LEN as u64 } else { 0 };
    let fds = [ports[0].as_raw_fd(), ports[1].as_raw_fd()];
    let mut buf = vec![0u8; BUF];
    while !stop.load(Relaxed) {
        let ready = sys::poll_in(&fds, 50);
        for i in 0..2 {
            if !ready[i] {
                continue;
            }
            let (src, dst) = (fds[i], fds[1 - i]);
            let mut l = Local::default();
            for _ in 0..BATCH {
                // SAFETY: buf is BUF bytes long.
                let r = unsafe { libc::read(src, buf.as_mut_ptr().cast(), BUF) };
                if r <= 0 {
                    break;
                }
                l.rx += 1;
                l.max_len = l.max_len.max(r as u64 - hdr_len);
                // SAFETY: the first r bytes of buf are initialised.
                let w = unsafe { libc::write(dst, buf.as_ptr().cast(), r as usize) };
                if w < 0 {
                    l.send_err += 1;
                } else {
                    l.tx += 1;
                    l.tx_bytes += r as u64 - hdr_len;
                }
            }
            st.add(&l);
        }
    }
    Ok(())
}

/// Sends `hdrs` (already filled) with sendmmsg, skipping past messages the kernel refuses.
fn send_batch(dst: RawFd, hdrs: &mut [libc::mmsghdr], hdr_len: usize, l: &mut Local) {
    let mut i = 0;
    while i < hdrs.len() {
        let rest = &mut hdrs[i..];
        // SAFETY: every header points at a live iovec/buffer.
        let r = unsafe { libc::sendmmsg(dst, rest.as_mut_ptr(), rest.len() as u32, 0) };
        if r < 0 {
            if errno() == libc::EMSGSIZE {
                l.too_big += 1;
            } else {
                l.send_err += 1;
            }
            i += 1;
            continue;
        }
        for h in &rest[..r as usize] {
            l.tx += 1;
            // SAFETY: msg_iov points at one valid iovec.
            l.tx_bytes += unsafe { (*h.msg_hdr.msg_iov).iov_len - hdr_len } as u64;
        }
        i += r as usize;
    }
}

fn empty_hdrs(iov: &mut [libc::iovec]) -> Vec<libc::mmsghdr> {
    iov.iter_mut()
        .map(|v| {
            // SAFETY: mmsghdr is plain data; all-zero is valid.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect()
}

fn run_mmsg(ports: &[OwnedFd; 2], vnet: bool, st: &Stats, stop: &AtomicBool) -> Res<()> {
    let fds = [ports[0].as_raw_fd(), ports[1].as_raw_fd()];
    let hdr_len = if vnet { VNET_HDR_LEN } else { 0 };
    let mut bufs = vec![0u8; BATCH * BUF];
    let base = bufs.as_mut_ptr();
    let mut iov: Vec<libc::iovec> = (0..BATCH)
        .map(|i| libc::iovec {
            // SAFETY: within bufs.
            iov_base: unsafe { base.add(i * BUF) }.cast(),
            iov_len: BUF,
        })
        .collect();
    let mut hdrs = empty_hdrs(&mut iov);
    while !stop.load(Relaxed) {
        let ready = sys::poll_in(&fds, 50);
        for i in 0..2 {
            if !ready[i] {
                continue;
            }
            for h in hdrs.iter_mut() {
                // SAFETY: msg_iov points into iov.
                unsafe { (*h.msg_hdr.msg_iov).iov_len = BUF };
                h.msg_hdr.msg_flags = 0;
            }
            // SAFETY: hdrs/iov/bufs are valid for BATCH messages of BUF bytes.
            let n = unsafe {
                libc::recvmmsg(
                    fds[i],
                    hdrs.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    std::ptr::null_mut(),
                )
            };
            if n <= 0 {
                continue;
            }
            let n = n as usize;
            let mut l = Local {
                rx: n as u64,
                ..Local::default()
            };
            for h in &mut hdrs[..n] {
                let len = h.msg_len as usize;
                l.max_len = l.max_len.max((len - hdr_len.min(len)) as u64);
                // SAFETY: msg_iov points into iov.
                unsafe { (*h.msg_hdr.msg_iov).iov_len = len.min(BUF) };
            }
            send_batch(fds[1 - i], &mut hdrs[..n], hdr_len, &mut l);
            st.add(&l);
        }
    }
    drop(bufs);
    Ok(())
}

const TPACKET_V3: libc::c_int = 2;
const PACKET_VERSION: libc::c_int = 10;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_CSUMNOTREADY: u32 = 8;
const RING_BLOCK: usize = 256 << 10;
const RING_BLOCKS: usize = 32;

/// A TPACKET_V3 rx ring mapped from one AF_PACKET socket.
struct Ring {
    base: *mut u8,
    cur: usize,
}

impl Ring {
    fn new(fd: RawFd) -> Res<Ring> {
        let v = TPACKET_V3;
        // SAFETY: v is a valid c_int.
        sys::check(
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_PACKET,
                    PACKET_VERSION,
                    (&v as *const libc::c_int).cast(),
                    4,
                )
            },
            "PACKET_VERSION",
        )?;
        let req = libc::tpacket_req3 {
            tp_block_size: RING_BLOCK as u32,
            tp_block_nr: RING_BLOCKS as u32,
            tp_frame_size: 2048,
            tp_frame_nr: (RING_BLOCK * RING_BLOCKS / 2048) as u32,
            // A block is handed to user space when full or after this many ms.
            tp_retire_blk_tov: 1,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        // SAFETY: req is a valid tpacket_req3.
        sys::check(
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_PACKET,
                    libc::PACKET_RX_RING,
                    (&req as *const libc::tpacket_req3).cast(),
                    std::mem::size_of::<libc::tpacket_req3>() as u32,
                )
            },
            "PACKET_RX_RING",
        )?;
        // SAFETY: maps the ring the kernel just allocated for fd.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                RING_BLOCK * RING_BLOCKS,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return sys::os_err("mmap rx ring");
        }
        Ok(Ring {
            base: p.cast(),
            cur: 0,
        })
    }

    fn block(&self) -> *mut libc::tpacket_block_desc {
        // SAFETY: cur < RING_BLOCKS.
        unsafe { self.base.add(self.cur * RING_BLOCK) }.cast()
    }

    /// Forwards every frame of the next block, if it is ready for user space, to `dst`.
    fn drain_one(&mut self, dst: RawFd, l: &mut Local) -> bool {
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        let mut hdrs = empty_hdrs(&mut iov);
        {
            let bd = self.block();
            // SAFETY: bd points at a block descriptor inside the mapping; the kernel
            // owns the block until block_status has TP_STATUS_USER.
            unsafe {
                let status = std::ptr::addr_of!((*bd).hdr.bh1.block_status);
                if std::ptr::read_volatile(status) & TP_STATUS_USER == 0 {
                    return false;
                }
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                let num = (*bd).hdr.bh1.num_pkts as usize;
                let mut off = (*bd).hdr.bh1.offset_to_first_pkt as usize;
                let mut n = 0;
                for k in 0..num {
                    let h = bd.cast::<u8>().add(off).cast::<libc::tpacket3_hdr>();
                    let len = (*h).tp_snaplen as usize;
                    l.rx += 1;
                    l.max_len = l.max_len.max((*h).tp_len as u64);
                    if (*h).tp_status & TP_STATUS_CSUMNOTREADY != 0 {
                        l.csum_partial += 1;
                    }
                    *hdrs[n].msg_hdr.msg_iov = libc::iovec {
                        iov_base: h.cast::<u8>().add((*h).tp_mac as usize).cast(),
                        iov_len: len,
                    };
                    n += 1;
                    if n == BATCH || k + 1 == num {
                        send_batch(dst, &mut hdrs[..n], 0, l);
                        n = 0;
                    }
                    off += (*h).tp_next_offset as usize;
                }
                std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                std::ptr::write_volatile(
                    std::ptr::addr_of_mut!((*bd).hdr.bh1.block_status),
                    libc::TP_STATUS_KERNEL,
                );
            }
            self.cur = (self.cur + 1) % RING_BLOCKS;
        }
        true
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in new().
        unsafe { libc::munmap(self.base.cast(), RING_BLOCK * RING_BLOCKS) };
    }
}

fn run_ring(ports: &[OwnedFd; 2], st: &Stats, stop: &AtomicBool) -> Res<()> {
    let fds = [ports[0].as_raw_fd(), ports[1].as_raw_fd()];
    let mut rings = [Ring::new(fds[0])?, Ring::new(fds[1])?];
    while !stop.load(Relaxed) {
        let mut any = false;
        for i in 0..2 {
            let mut l = Local::default();
            if rings[i].drain_one(fds[1 - i], &mut l) {
                any = true;
                st.add(&l);
            }
        }
        if !any {
            sys::poll_in(&fds, 50);
        }
    }
    Ok(())
}
