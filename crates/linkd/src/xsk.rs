//! AF_XDP endpoints: frames taken off a veth end by an XDP program, stamped
//! with their arrival time in the kernel, and handed to the daemon through
//! shared rings instead of one `read` per frame.
//!
//! The link's interface in the node is one end of a veth pair; the other end
//! (`h1-eth0-x`, in the same namespace, made by the caller) carries:
//!
//! - an XDP program, built here from its 19 instructions, that writes
//!   `bpf_ktime_get_ns()` into the frame's metadata and redirects the frame
//!   into an XSKMAP holding this socket. The stamp is taken in the veth's
//!   receive softirq, normally on the sender's CPU just after it sent: the
//!   time the frame spent waiting for the daemon to wake up is not added to
//!   the emulated delay (a TAP device gives no such stamp);
//! - an AF_XDP socket bound to its queue 0 in copy mode (veth has no
//!   zero-copy), whose transmit ring sends frames out of that end, so the
//!   node receives them on its interface.
//!
//! The program is attached through a BPF link held by the endpoint, so it
//! goes when the daemon does. Frames are at most [`MAX_FRAME`] bytes: the
//! caller sets the veth's MTU to fit.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::bpf::{self, Insn, LinkCreate, MapCreate, MapElem};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_COPY: u16 = 1 << 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const BPF_FUNC_KTIME_GET_NS: i32 = 5;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
const XDP_PASS: i32 = 2;
/// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_META: i16 = 8;
const MD_RX_QUEUE_INDEX: i16 = 16;

/// Bytes of UMEM per frame (a chunk); a power of two from 2048 to a page.
pub const CHUNK: u32 = 2048;
/// Frames for receiving, and entries in the fill and receive rings: how many
/// frames can wait for the daemon. Measured on the 2-core VM, 64-byte frames
/// at 200 kpps through one link: 512 lost 3 % at the fill ring (the daemon
/// was late by more than 512 frames), 2048 lost none.
pub const RX_FRAMES: u32 = 2048;
/// Frames for sending, and entries in the transmit and completion rings: a
/// sent frame comes back as soon as the kernel has copied it.
pub const TX_FRAMES: u32 = 512;
/// Headroom the kernel leaves in front of a received frame in copy mode
/// (`XDP_PACKET_HEADROOM`).
const HEADROOM: u32 = 256;
/// Largest frame (Ethernet header included) an AF_XDP endpoint carries.
pub const MAX_FRAME: u32 = CHUNK - HEADROOM;
/// The metadata the program writes in front of each frame: the stamp.
const STAMP_LEN: u64 = 8;
/// Transmit descriptors queued before the kernel is asked to send them.
const KICK_EVERY: u32 = 32;

/// The XDP program: stamp the frame, then hand it to the socket of its
/// receive queue (or to the stack when there is none).
///
/// ```text
///  0 r6 = r1                          ctx
///  1 call ktime_get_ns; r7 = r0
///  3 r1 = r6; r2 = -8; call xdp_adjust_meta
///  6 if r0 != 0 goto 13               no room: redirect unstamped
///  7 r2 = ctx->data_meta; r3 = ctx->data; r4 = r2 + 8
/// 11 if r4 > r3 goto 13               (the verifier's bounds check)
/// 12 *(u64 *)r2 = r7
/// 13 r2 = ctx->rx_queue_index; r1 = map; r3 = XDP_PASS
/// 17 call redirect_map; exit
/// ```
pub fn program(map_fd: i32) -> Vec<Insn> {
    let [m0, m1] = Insn::load_map_fd(1, map_fd);
    vec![
        Insn::mov_reg(6, 1),
        Insn::call(BPF_FUNC_KTIME_GET_NS),
        Insn::mov_reg(7, 0),
        Insn::mov_reg(1, 6),
        Insn::mov_imm(2, -(STAMP_LEN as i32)),
        Insn::call(BPF_FUNC_XDP_ADJUST_META),
        Insn::jne_imm(0, 0, 6),
        Insn::load_u32(2, 6, MD_DATA_META),
        Insn::load_u32(3, 6, MD_DATA),
        Insn::mov_reg(4, 2),
        Insn::add_imm(4, STAMP_LEN as i32),
        Insn::jgt_reg(4, 3, 1),
        Insn::store_u64(2, 0, 7),
        Insn::load_u32(2, 6, MD_RX_QUEUE_INDEX),
        m0,
        m1,
        Insn::mov_imm(3, XDP_PASS),
        Insn::call(BPF_FUNC_REDIRECT_MAP),
        Insn::exit(),
    ]
}

/// `struct xdp_umem_reg`.
#[repr(C)]
#[derive(Default)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `struct xdp_desc`: a frame in the receive or transmit ring.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// A memory mapping, unmapped when dropped.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mmap {
    fn new(len: usize, fd: Option<BorrowedFd<'_>>, offset: libc::off_t) -> io::Result<Self> {
        let (flags, raw) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd.as_raw_fd()),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping at an address of the kernel's choosing;
        // nothing else refers to it until this returns.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Self { ptr, len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One of the four rings shared with the kernel: a power-of-two array and
/// free-running producer and consumer indexes. `local` is this side's own
/// index (producer of fill and transmit rings, consumer of receive and
/// completion rings); `cached` the other side's, last read.
struct Ring<T: Copy> {
    map: Mmap,
    off: RingOffset,
    /// Entries, a power of two.
    size: u32,
    local: u32,
    cached: u32,
    _entry: std::marker::PhantomData<T>,
}

impl<T: Copy> Ring<T> {
    fn map(fd: BorrowedFd<'_>, off: RingOffset, pgoff: libc::off_t, size: u32) -> io::Result<Self> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mmap::new(len, Some(fd), pgoff)?;
        Ok(Self {
            map,
            off,
            size,
            local: 0,
            cached: 0,
            _entry: std::marker::PhantomData,
        })
    }

    fn index(&self, at: u64) -> &AtomicU32 {
        // SAFETY: the kernel's offsets point at aligned u32 indexes inside
        // the mapping, shared with it as atomics for the ring's lifetime.
        unsafe { &*self.map.ptr.as_ptr().add(at as usize).cast::<AtomicU32>() }
    }

    fn slot(&self, i: u32) -> *mut T {
        // SAFETY: `desc` is the kernel's offset of the entry array, which
        // has `size` entries; the index is masked into it.
        unsafe {
            self.map
                .ptr
                .as_ptr()
                .add(self.off.desc as usize)
                .cast::<T>()
                .add((i & (self.size - 1)) as usize)
        }
    }

    /// Producer side: enter `v`, or give it back when the ring is full.
    fn push(&mut self, v: T) -> Result<(), T> {
        if self.local.wrapping_sub(self.cached) >= self.size {
            self.cached = self.index(self.off.consumer).load(Ordering::Acquire);
            if self.local.wrapping_sub(self.cached) >= self.size {
                return Err(v);
            }
        }
        // SAFETY: the slot is one the kernel has consumed (checked above).
        unsafe { self.slot(self.local).write(v) };
        self.local = self.local.wrapping_add(1);
        self.index(self.off.producer)
            .store(self.local, Ordering::Release);
        Ok(())
    }

    /// Producer side: entries entered that the kernel has not taken yet.
    fn outstanding(&self) -> u32 {
        let consumer = self.index(self.off.consumer).load(Ordering::Acquire);
        self.local.wrapping_sub(consumer)
    }

    /// Consumer side: the next entry, if the kernel has produced one.
    fn pop(&mut self) -> Option<T> {
        if self.local == self.cached {
            self.cached = self.index(self.off.producer).load(Ordering::Acquire);
            if self.local == self.cached {
                return None;
            }
        }
        // SAFETY: the kernel produced this slot (checked above) and will not
        // touch it until the consumer index passes it.
        let v = unsafe { self.slot(self.local).read() };
        self.local = self.local.wrapping_add(1);
        self.index(self.off.consumer)
            .store(self.local, Ordering::Release);
        Some(v)
    }
}

/// The kernel's counters of an AF_XDP socket (`struct xdp_statistics`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames dropped for other reasons (too long for a frame, for one).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    /// Frames dropped because the receive ring was full: the daemon did not
    /// read in time.
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

/// Counters of an AF_XDP endpoint.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct XskCounters {
    /// Frames read with the kernel's stamp.
    pub stamped: u64,
    /// Frames read without one (the daemon's read time was used).
    pub unstamped: u64,
    /// Frames refused because no transmit frame was free.
    pub tx_full: u64,
    /// Transmit kicks (sendto calls) and the time they took, ns: in copy
    /// mode the kernel copies each frame into an skb and hands it to the
    /// veth inside the call, and the softirq that delivers it to the node's
    /// stack runs before the call returns. So this is the transmit path's
    /// cost as the departures see it.
    pub kicks: u64,
    pub kick_ns: u64,
    pub kick_max_ns: u64,
    /// sendto calls made by the kicks.
    pub kick_calls: u64,
}

/// An AF_XDP socket on one veth end, with its UMEM, rings and XDP program.
pub struct Xsk {
    // Field order is drop order: the program goes first, so no frame is
    // redirected to a socket being closed.
    _xdp_link: OwnedFd,
    _map: OwnedFd,
    fd: OwnedFd,
    rx: Ring<Desc>,
    tx: Ring<Desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    umem: Mmap,
    free_tx: Vec<u64>,
    unkicked: u32,
    stamp: Option<u64>,
    /// "native" or "generic": how the XDP program is attached.
    pub mode: &'static str,
    pub counters: XskCounters,
}

fn sockopt<T>(fd: BorrowedFd<'_>, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of the type the option expects, its size
    // passed with it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Xsk {
    /// Open an AF_XDP endpoint on interface `ifindex` of the calling
    /// thread's network namespace. The error says which step failed.
    pub fn open(ifindex: u32) -> io::Result<Self> {
        let step = |what: &'static str| {
            move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"))
        };
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(step("AF_XDP socket")(io::Error::last_os_error()));
        }
        // SAFETY: a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frames = RX_FRAMES + TX_FRAMES;
        let umem = Mmap::new((frames * CHUNK) as usize, None, 0).map_err(step("UMEM"))?;
        let reg = UmemReg {
            addr: umem.ptr.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: CHUNK,
            ..UmemReg::default()
        };
        sockopt(fd.as_fd(), XDP_UMEM_REG, &reg).map_err(step("registering the UMEM"))?;
        for (opt, size) in [
            (XDP_UMEM_FILL_RING, RX_FRAMES),
            (XDP_UMEM_COMPLETION_RING, TX_FRAMES),
            (XDP_RX_RING, RX_FRAMES),
            (XDP_TX_RING, TX_FRAMES),
        ] {
            sockopt(fd.as_fd(), opt, &size).map_err(step("sizing the rings"))?;
        }
        let mut off = MmapOffsets::default();
        let mut len = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
        // SAFETY: `off` is a writable MmapOffsets and `len` its size.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                SOL_XDP,
                XDP_MMAP_OFFSETS,
                (&mut off as *mut MmapOffsets).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(step("ring offsets")(io::Error::last_os_error()));
        }
        let b = fd.as_fd();
        let map = |e| step("mapping the rings")(e);
        let rx = Ring::map(b, off.rx, XDP_PGOFF_RX_RING, RX_FRAMES).map_err(map)?;
        let tx = Ring::map(b, off.tx, XDP_PGOFF_TX_RING, TX_FRAMES).map_err(map)?;
        let mut fill = Ring::map(b, off.fr, XDP_UMEM_PGOFF_FILL_RING, RX_FRAMES).map_err(map)?;
        let comp = Ring::map(b, off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, TX_FRAMES).map_err(map)?;
        // The first RX_FRAMES frames receive, the others send.
        for i in 0..RX_FRAMES {
            if fill.push(u64::from(i * CHUNK)).is_err() {
                return Err(io::Error::other("the fill ring is smaller than asked"));
            }
        }
        let free_tx = (RX_FRAMES..frames).map(|i| u64::from(i * CHUNK)).collect();
        let sa = SockaddrXdp {
            family: AF_XDP as u16,
            flags: XDP_COPY,
            ifindex,
            queue_id: 0,
            shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a valid sockaddr_xdp and its size is passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const SockaddrXdp).cast(),
                std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(step("binding the socket (copy mode, queue 0)")(
                io::Error::last_os_error(),
            ));
        }
        let (map_fd, xdp_link, mode) = attach(ifindex, fd.as_fd())?;
        Ok(Self {
            _xdp_link: xdp_link,
            _map: map_fd,
            fd,
            rx,
            tx,
            fill,
            comp,
            umem,
            free_tx,
            unkicked: 0,
            stamp: None,
            mode,
            counters: XskCounters::default(),
        })
    }

    fn frame(&mut self, addr: u64, len: usize) -> &mut [u8] {
        assert!(
            addr as usize + len <= self.umem.len,
            "frame outside the UMEM"
        );
        // SAFETY: inside the UMEM (asserted); the kernel does not write a
        // frame while this side owns it (taken off rx, or a free tx frame).
        unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.as_ptr().add(addr as usize), len) }
    }

    /// Read one frame into `buf`; its stamp is kept for [`Self::rx_stamp`].
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(d) = self.rx.pop() else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let len = d.len as usize;
        let n = len.min(buf.len());
        buf[..n].copy_from_slice(&self.frame(d.addr, n)[..n]);
        let stamp = if d.addr % u64::from(CHUNK) >= STAMP_LEN {
            let meta = self.frame(d.addr - STAMP_LEN, STAMP_LEN as usize);
            let s = u64::from_ne_bytes(meta[..8].try_into().expect("8 bytes"));
            // Zeroed, so that a frame the program could not stamp is not
            // taken for this one.
            meta.fill(0);
            s
        } else {
            0
        };
        self.stamp = (stamp != 0).then_some(stamp);
        if self.stamp.is_some() {
            self.counters.stamped += 1;
        } else {
            self.counters.unstamped += 1;
        }
        let base = d.addr - d.addr % u64::from(CHUNK);
        // The fill ring has room for every receive frame: this cannot fail.
        let _ = self.fill.push(base);
        if n < len {
            return Err(io::Error::other(format!(
                "frame of {len} bytes truncated to {n}"
            )));
        }
        Ok(n)
    }

    /// Arrival time (CLOCK_MONOTONIC) of the frame [`Self::recv`] returned
    /// last, as the XDP program stamped it.
    pub fn rx_stamp(&self) -> Option<u64> {
        self.stamp
    }

    fn reap(&mut self) {
        while let Some(addr) = self.comp.pop() {
            self.free_tx.push(addr - addr % u64::from(CHUNK));
        }
    }

    /// Queue one frame for sending; sent at the next [`Self::flush`] or
    /// every [`KICK_EVERY`] frames.
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        if data.len() > MAX_FRAME as usize {
            return Err(io::Error::other(format!(
                "frame of {} bytes exceeds the AF_XDP endpoint's {MAX_FRAME}",
                data.len()
            )));
        }
        if self.free_tx.is_empty() {
            self.reap();
        }
        if self.free_tx.is_empty() {
            self.kick();
            self.reap();
        }
        let Some(addr) = self.free_tx.pop() else {
            self.counters.tx_full += 1;
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "every transmit frame is in flight",
            ));
        };
        self.frame(addr, data.len()).copy_from_slice(data);
        let desc = Desc {
            addr,
            len: data.len() as u32,
            options: 0,
        };
        if self.tx.push(desc).is_err() {
            self.free_tx.push(addr);
            self.counters.tx_full += 1;
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the transmit ring is full",
            ));
        }
        self.unkicked += 1;
        if self.unkicked >= KICK_EVERY {
            self.kick();
        }
        Ok(())
    }

    /// The kernel's counters for this socket (zeros if it will not say).
    pub fn kernel_stats(&self) -> KernelStats {
        let mut st = KernelStats::default();
        let mut len = std::mem::size_of::<KernelStats>() as libc::socklen_t;
        // SAFETY: `st` is a writable xdp_statistics and `len` its size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_XDP,
                XDP_STATISTICS,
                (&mut st as *mut KernelStats).cast(),
                &mut len,
            )
        };
        if r < 0 {
            KernelStats::default()
        } else {
            st
        }
    }

    /// Have the kernel send what is queued. In copy mode it sends at most
    /// 32 descriptors per call and answers EAGAIN while more remain.
    fn kick(&mut self) {
        self.unkicked = 0;
        let start = crate::state::now_ns();
        self.kick_calls();
        let took = crate::state::now_ns().saturating_sub(start);
        self.counters.kicks += 1;
        self.counters.kick_ns += took;
        self.counters.kick_max_ns = self.counters.kick_max_ns.max(took);
    }

    fn kick_calls(&mut self) {
        for _ in 0..(TX_FRAMES / 16) {
            if self.tx.outstanding() == 0 {
                break;
            }
            self.counters.kick_calls += 1;
            // SAFETY: sendto with no data on a bound AF_XDP socket.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                continue;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                // EBUSY, ENOBUFS: the device is full; what is left goes at
                // the next flush.
                _ => break,
            }
        }
    }

    /// Send everything queued and take back the frames the kernel is done
    /// with.
    pub fn flush(&mut self) {
        if self.tx.outstanding() > 0 {
            self.kick();
        }
        self.reap();
    }
}

impl AsFd for Xsk {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Create the XSKMAP with `sock` at key 0 and attach the program to
/// `ifindex`, natively (veth) or else in generic mode; the map, the BPF link
/// that holds the program, and the mode.
fn attach(ifindex: u32, sock: BorrowedFd<'_>) -> io::Result<(OwnedFd, OwnedFd, &'static str)> {
    let ctx =
        |what: &'static str| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let mut mc = MapCreate {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        map_flags: 0,
    };
    let map = bpf::create(bpf::BPF_MAP_CREATE, &mut mc).map_err(ctx("creating the XSKMAP"))?;
    let key: u32 = 0;
    let value: u32 = sock.as_raw_fd() as u32;
    let mut up = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..MapElem::default()
    };
    bpf::call(bpf::BPF_MAP_UPDATE_ELEM, &mut up).map_err(ctx("adding the socket to the XSKMAP"))?;
    let insns = program(map.as_raw_fd());
    let prog = bpf::load(BPF_PROG_TYPE_XDP, BPF_XDP, "fidelnet_xsk", &insns)
        .map_err(ctx("loading the XDP program"))?;
    let mut last = None;
    for (flags, mode) in [
        (XDP_FLAGS_DRV_MODE, "native"),
        (XDP_FLAGS_SKB_MODE, "generic"),
    ] {
        let mut lc = LinkCreate {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags,
            ..LinkCreate::default()
        };
        match bpf::create(bpf::BPF_LINK_CREATE, &mut lc) {
            Ok(link) => return Ok((map, link, mode)),
            // Taken by another program: no point trying the other mode.
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    || e.raw_os_error() == Some(libc::EEXIST) =>
            {
                return Err(io::Error::new(
                    e.kind(),
                    format!("attaching the XDP program: the interface already has one ({e})"),
                ))
            }
            Err(e) => last = Some(e),
        }
    }
    let e = last.expect("two attempts were made");
    Err(io::Error::new(
        e.kind(),
        format!("attaching the XDP program: {e}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<UmemReg>(), 32);
        assert_eq!(std::mem::size_of::<MmapOffsets>(), 128);
        assert_eq!(std::mem::size_of::<SockaddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<Desc>(), 16);
        assert_eq!(std::mem::size_of::<KernelStats>(), 48);
    }

    #[test]
    fn the_program_stamps_then_redirects() {
        let p = program(42);
        assert_eq!(p.len(), 19);
        // The two conditional jumps land on the redirect.
        let target = |i: usize| (i as i64 + 1 + i64::from(p[i].off)) as usize;
        assert_eq!(p[6].code, 0x55);
        assert_eq!(target(6), 13);
        assert_eq!(p[11].code, 0x2d);
        assert_eq!(target(11), 13);
        assert_eq!(p[13], Insn::load_u32(2, 6, MD_RX_QUEUE_INDEX));
        assert_eq!((p[14].code, p[14].imm), (0x18, 42));
        assert_eq!(p[17], Insn::call(BPF_FUNC_REDIRECT_MAP));
        assert_eq!(p[18], Insn::exit());
        assert_eq!(p[4], Insn::mov_imm(2, -8));
        assert_eq!(p[12], Insn::store_u64(2, 0, 7));
    }

    #[test]
    fn geometry() {
        assert!(CHUNK.is_power_of_two() && (2048..=4096).contains(&CHUNK));
        assert!(RX_FRAMES.is_power_of_two() && TX_FRAMES.is_power_of_two());
        // What Python budgets per link (fidelnet.links.endpoints.LINK_MEMORY).
        assert_eq!(2 * (RX_FRAMES + TX_FRAMES) * CHUNK, 10 << 20);
        assert_eq!(MAX_FRAME, 1792);
        assert!(HEADROOM as u64 >= STAMP_LEN);
    }
}
