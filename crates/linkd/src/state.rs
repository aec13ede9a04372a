//! What the event loop keeps: limits, epoll tokens, the daemon's settings,
//! links with their per-direction state, control connections.

use std::os::unix::net::UnixStream;

use link_core::Direction;
use nix::sys::epoll::EpollFlags;

/// Size of the reusable receive buffer: 64 KiB plus room for an Ethernet
/// header, so that even a frame of the largest MTU (65535) fits.
pub const RECV_BUF: usize = 65_536 + 64;

/// Longest request line accepted; a longer one closes the connection.
pub const MAX_LINE: usize = 16 << 20;

/// Unsent replies a connection may accumulate before it is dropped (a
/// client that never reads).
pub(crate) const MAX_OUTBUF: usize = 64 << 20;

/// Bytes read from one control connection per wakeup, for fairness.
pub(crate) const CONN_READ_BUDGET: usize = 1 << 20;

/// Control connections served at once; one more is told so and closed.
pub const MAX_CONNS: usize = 64;

/// Requests of one connection answered per turn of the loop: a client that
/// sends thousands at once delays the packets of the turn by at most this
/// many requests' work, and is not read again until they are answered.
pub const MAX_REQUESTS_PER_TURN: usize = 64;

/// Names of the directions, indexed like [`Link::dirs`].
pub(crate) const DIR_NAMES: [&str; 2] = ["ab", "ba"];
/// Names of the endpoints, indexed like [`Link::ends`].
pub(crate) const SIDE_NAMES: [&str; 2] = ["a", "b"];

// Epoll tokens: the low two bits say what the descriptor is, the rest is an
// identifier. Link and connection identifiers are never reused, so a stale
// event for something closed earlier in the same wakeup finds nothing.
pub(crate) const KIND_FIXED: u64 = 0;
pub(crate) const KIND_CONN: u64 = 1;
pub(crate) const KIND_TAP_A: u64 = 2;
pub(crate) const TOKEN_LISTENER: u64 = KIND_FIXED;
pub(crate) const TOKEN_TIMER: u64 = (1 << 2) | KIND_FIXED;
pub(crate) const TOKEN_SIGNAL: u64 = (2 << 2) | KIND_FIXED;
pub(crate) const TOKEN_INBOX: u64 = (3 << 2) | KIND_FIXED;

pub(crate) fn conn_token(id: u64) -> u64 {
    (id << 2) | KIND_CONN
}

pub(crate) fn tap_token(link: u64, side: usize) -> u64 {
    (link << 2) | (KIND_TAP_A + side as u64)
}

/// Current `CLOCK_MONOTONIC` time in nanoseconds.
pub fn now_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always readable");
    // Monotonic time is never negative.
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Tunables from the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Frames read from one endpoint per wakeup.
    pub batch: usize,
    /// The longest spin before a deadline (the timer is armed at most this
    /// far ahead of it); 0: never spin.
    pub spin_ns: u64,
    /// Share of each 10 ms window spinning may take, percent.
    pub spin_budget_pct: u8,
    /// Queue limit (packets) for directions that set no queue limit;
    /// `None` leaves such queues unlimited.
    pub default_queue_packets: Option<u32>,
    /// The SCHED_FIFO priority asked for (0: none) and whether the kernel
    /// granted it at start; with both, the loop's [`crate::rtguard`] leaves
    /// SCHED_FIFO while saturated and returns when calm.
    pub realtime: (u8, bool),
    /// The longest a chunk of a super-frame may take to serialise on a
    /// shaping direction (the most it delays its first segment); 0: cut
    /// super-frames into single wire packets.
    pub chunk_ns: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            batch: 64,
            spin_ns: 0,
            spin_budget_pct: 20,
            default_queue_packets: Some(1000),
            realtime: (0, false),
            chunk_ns: 50_000,
        }
    }
}

/// One direction of a link with the daemon's own counters.
pub(crate) struct DirState {
    pub(crate) dir: Direction,
    /// Departures the egress endpoint refused (EIO while it is down,
    /// ENOBUFS, EAGAIN, ...). The frame is lost.
    pub(crate) write_errors: u64,
    /// Failed reads from the ingress endpoint.
    pub(crate) read_errors: u64,
    /// The deadline entered in the heap for this direction, if any.
    pub(crate) scheduled: Option<u64>,
    /// What became of offloaded (super-)frames entering this direction.
    pub(crate) offload: OffloadCounts,
    /// Departures since the last `pulse` request.
    pub(crate) pulse: Pulse,
}

/// Offloaded frames entering a direction (endpoints with virtio-net headers).
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub(crate) struct OffloadCounts {
    /// Passed whole (the direction treats every packet alike).
    pub(crate) whole: u64,
    /// Cut into wire packets...
    pub(crate) split: u64,
    /// ...this many in all...
    pub(crate) segments: u64,
    /// ...of which these were pushed as chunks of several segments, each a
    /// smaller super-frame (a shaping direction, [`Config::chunk_ns`]).
    pub(crate) chunks: u64,
    /// Dropped: a header the engine cannot segment (counted, logged).
    pub(crate) errors: u64,
}

impl DirState {
    pub(crate) fn new(dir: Direction) -> Self {
        Self {
            dir,
            write_errors: 0,
            read_errors: 0,
            scheduled: None,
            offload: OffloadCounts::default(),
            pulse: Pulse::default(),
        }
    }
}

/// Departures and their lateness since the last `pulse` request: a cheap
/// window for a controller sampling often (the adaptive TDF), where `stats`
/// would encode every histogram. Lateness in power-of-two buckets: bucket
/// `k` holds values below `2^k` ns and at or above `2^(k-1)`.
#[derive(Debug, Clone)]
pub(crate) struct Pulse {
    pub(crate) departures: u64,
    pub(crate) buckets: [u64; 48],
}

impl Default for Pulse {
    fn default() -> Self {
        Self {
            departures: 0,
            buckets: [0; 48],
        }
    }
}

impl Pulse {
    pub(crate) fn record(&mut self, late_ns: u64) {
        self.departures += 1;
        let k = (64 - late_ns.leading_zeros()) as usize;
        self.buckets[k.min(47)] += 1;
    }

    /// The upper bound of the bucket holding quantile `q` (0..1), ns.
    pub(crate) fn quantile_ns(&self, q: f64) -> u64 {
        let rank = ((self.departures as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (k, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return if k == 0 { 0 } else { 1u64 << k };
            }
        }
        1u64 << 47
    }
}

/// An engine link: two endpoints and the two directions between them.
/// Direction `ab` (index 0) reads from `a` and writes to `b`; `ba` the
/// reverse, so direction `i` enters at `ends[i]` and leaves at
/// `ends[1 - i]`.
pub(crate) struct Link<E> {
    pub(crate) name: String,
    pub(crate) ends: [E; 2],
    pub(crate) dirs: [DirState; 2],
    /// An endpoint whose read failed for good (e.g. its device was
    /// destroyed under it) is taken out of the epoll set.
    pub(crate) gone: [bool; 2],
    /// Its endpoints stand beside veth ends whose traffic they carry
    /// (`divert`).
    pub(crate) diverted: bool,
}

/// A control connection.
pub(crate) struct Conn {
    pub(crate) stream: UnixStream,
    pub(crate) inbuf: Vec<u8>,
    pub(crate) outbuf: Vec<u8>,
    /// The client will send nothing more; close once `outbuf` is sent.
    pub(crate) eof: bool,
    pub(crate) interest: EpollFlags,
    /// `inbuf` holds complete requests past this turn's share
    /// ([`MAX_REQUESTS_PER_TURN`]): answered next turn, nothing read until then.
    pub(crate) pending: bool,
}
