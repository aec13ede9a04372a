//! The receiver's accounting, without any I/O: fed (datagram, receive
//! timestamp) pairs, it keeps every counter, histogram and interval of the
//! report. The socket loop in `recv.rs` only feeds it.
//!
//! # Per flow (keyed by the payload's flow id)
//!
//! Duplicates are recognised in a sliding window of [`DUP_WINDOW`]
//! sequence numbers ending at the highest one seen: a bitmap remembers which
//! of them arrived. A packet below the window (more than 65535 behind the
//! highest) cannot be checked; it is counted as unique and reordered, and
//! in `beyond_window`. Sequence numbers are not unwrapped: a flow must stay
//! below 2^32 packets.
//!
//! # Jitter and the worst packets
//!
//! Per flow, the jitter of a packet is how much its latency differs from the
//! latency of the flow's packet before it, in arrival order (HVNet's
//! definition); it goes to the flow's and the all-flows jitter histograms.
//! With [`Accounting::keep_worst`], the receiver keeps the `k` highest
//! latencies with their receive time and flow (a min-heap: O(log k) per
//! packet that enters it).
//!
//! # Gaps
//!
//! Each time a flow's sequence numbers jump ahead (seq > highest + 1), the
//! jump is kept as a [`Gap`]: the packet before it and the one after it,
//! with their send timestamps, so the outage a failure caused can be told
//! from the packets to within one inter-packet gap (`fidelnet.measure.outage`).
//! A late packet that falls into a gap is counted there as `filled`. At
//! most [`MAX_GAPS`] are kept (all flows); later ones are only counted.
//!
//! # Intervals
//!
//! Interval i covers receive timestamps `[first + i*w, first + (i+1)*w)`,
//! where `first` is the timestamp of the first valid packet fed. Sockets
//! are read one after the other, so timestamps do not arrive in order; an
//! interval is closed only once a timestamp `grace` past its end has been
//! seen. A packet whose interval is already closed still counts everywhere
//! else, and in `interval_late`. Empty intervals between the first and the
//! last packet are reported as zeros.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use hdrhistogram::Histogram;

use crate::hist;
use crate::payload::{Malformed, Payload};

mod seq;
mod series;
#[cfg(test)]
mod tests;

use seq::{SeqClass, SeqWindow};
use series::Open;
pub use series::{Interval, IntervalSink};

/// Sequence numbers tracked behind the highest one, per flow.
pub const DUP_WINDOW: u64 = 1 << 16;

/// Gaps kept per run (all flows together); beyond, only counted.
pub const MAX_GAPS: usize = 10_000;

/// Smallest Ethernet frame (with FCS): shorter datagrams are padded.
const MIN_FRAME: u64 = 64;

/// Malformed datagrams by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MalformedCounts {
    /// Shorter than the header.
    pub too_short: u64,
    /// Not our magic.
    pub bad_magic: u64,
    /// Check mismatch (corrupted).
    pub bad_check: u64,
}

impl MalformedCounts {
    /// All malformed datagrams.
    pub fn total(&self) -> u64 {
        self.too_short + self.bad_magic + self.bad_check
    }
}

/// A jump in one flow's sequence numbers: `after_seq` arrived, then
/// `before_seq` arrived with nothing between them yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The flow.
    pub flow: u16,
    /// The highest sequence number before the jump.
    pub after_seq: u64,
    /// Its send timestamp (CLOCK_REALTIME ns).
    pub after_send_ns: u64,
    /// The sequence number that jumped.
    pub before_seq: u64,
    /// Its send timestamp.
    pub before_send_ns: u64,
    /// Its receive timestamp.
    pub before_rx_ns: u64,
    /// Packets of the gap that arrived later (reordered).
    pub filled: u64,
}

impl Gap {
    /// Packets of the gap that never arrived.
    pub fn lost(&self) -> u64 {
        (self.before_seq - self.after_seq - 1).saturating_sub(self.filled)
    }
}

/// One flow's counters.
#[derive(Debug, Clone)]
pub struct FlowAcc {
    /// Valid packets.
    pub received: u64,
    /// Distinct sequence numbers.
    pub unique: u64,
    /// Sequence numbers seen before (within the window).
    pub duplicates: u64,
    /// Arrived below the highest sequence number, not duplicates.
    pub reordered: u64,
    /// Arrived more than the window below the highest (also in `unique`
    /// and `reordered`).
    pub beyond_window: u64,
    /// Positive latencies of this flow.
    pub latency: Histogram<u64>,
    /// Latency differences between consecutive packets of this flow.
    pub jitter: Histogram<u64>,
    prev_latency: Option<u64>,
    window: SeqWindow,
    /// Send timestamp of the highest sequence number.
    highest_send_ns: u64,
    /// The first packet that arrived: its sequence number and send timestamp.
    pub first: Option<(u64, u64)>,
}

impl FlowAcc {
    fn new() -> FlowAcc {
        FlowAcc {
            received: 0,
            unique: 0,
            duplicates: 0,
            reordered: 0,
            beyond_window: 0,
            latency: hist::new(),
            jitter: hist::new(),
            prev_latency: None,
            window: SeqWindow::new(),
            highest_send_ns: 0,
            first: None,
        }
    }

    /// Send timestamp of the highest sequence number (0 before any packet).
    pub fn max_seq_send_ns(&self) -> u64 {
        self.highest_send_ns
    }

    /// Highest sequence number seen.
    pub fn max_seq(&self) -> u64 {
        self.window.highest.unwrap_or(0)
    }

    /// Sequence numbers up to the highest that never arrived.
    pub fn lost_by_seq(&self) -> u64 {
        match self.window.highest {
            Some(h) => (h + 1).saturating_sub(self.unique),
            None => 0,
        }
    }
}

/// Everything the receiver reports.
pub struct Accounting {
    width_ns: u64,
    grace_ns: u64,
    /// Valid packets.
    pub received: u64,
    /// Distinct (flow, sequence number) pairs.
    pub unique: u64,
    /// Duplicates (all flows).
    pub duplicates: u64,
    /// Reordered (all flows).
    pub reordered: u64,
    /// UDP payload bytes of valid packets.
    pub bytes: u64,
    /// Frame bytes of valid packets.
    pub frame_bytes: u64,
    /// Datagrams that are not ours.
    pub malformed: MalformedCounts,
    /// Valid packets received before they were sent (clock trouble): not
    /// in any latency histogram.
    pub negative_latency: u64,
    /// Valid packets whose interval had already closed.
    pub interval_late: u64,
    /// Smallest and largest receive timestamps of valid packets.
    pub first_rx_ns: Option<u64>,
    /// See `first_rx_ns`.
    pub last_rx_ns: Option<u64>,
    /// Positive latencies, all flows.
    pub latency: Histogram<u64>,
    /// Jitter, all flows (see the module doc).
    pub jitter: Histogram<u64>,
    /// The highest latencies: (latency ns, receive ns, flow), at most `worst_cap`.
    worst: BinaryHeap<Reverse<(u64, u64, u16)>>,
    worst_cap: usize,
    /// Closed intervals, in order.
    pub intervals: Vec<Interval>,
    /// Sequence jumps, in order of arrival (at most [`MAX_GAPS`]).
    pub gaps: Vec<Gap>,
    /// Jumps beyond [`MAX_GAPS`], not kept.
    pub gaps_dropped: u64,
    flows: Vec<Option<Box<FlowAcc>>>,
    /// Timestamp intervals are aligned to.
    origin: Option<u64>,
    /// Largest timestamp fed.
    newest: u64,
    /// Index of `open[0]` (every interval before it is closed).
    open_base: u64,
    open: VecDeque<Open>,
    /// Reset histograms for new intervals.
    pool: Vec<Histogram<u64>>,
    empty: Histogram<u64>,
}

impl Accounting {
    /// Intervals `width_ns` wide (> 0), closed `grace_ns` after their end.
    pub fn new(width_ns: u64, grace_ns: u64) -> Accounting {
        assert!(width_ns > 0);
        Accounting {
            width_ns,
            grace_ns,
            received: 0,
            unique: 0,
            duplicates: 0,
            reordered: 0,
            bytes: 0,
            frame_bytes: 0,
            malformed: MalformedCounts::default(),
            negative_latency: 0,
            interval_late: 0,
            first_rx_ns: None,
            last_rx_ns: None,
            latency: hist::new(),
            jitter: hist::new(),
            worst: BinaryHeap::new(),
            worst_cap: 0,
            intervals: Vec::new(),
            gaps: Vec::new(),
            gaps_dropped: 0,
            flows: Vec::new(),
            origin: None,
            newest: 0,
            open_base: 0,
            open: VecDeque::new(),
            pool: Vec::new(),
            empty: hist::new(),
        }
    }

    /// Keep the `k` highest latencies (0: none, the default).
    pub fn keep_worst(&mut self, k: usize) {
        self.worst_cap = k;
    }

    /// The kept highest latencies as (receive ns, latency ns, flow), by
    /// receive time.
    pub fn worst(&self) -> Vec<(u64, u64, u16)> {
        let mut out: Vec<(u64, u64, u16)> = self
            .worst
            .iter()
            .map(|Reverse((l, rx, f))| (*rx, *l, *f))
            .collect();
        out.sort_unstable();
        out
    }

    fn consider_worst(&mut self, latency: u64, rx_ns: u64, flow: u16) {
        if self.worst_cap == 0 {
            return;
        }
        if self.worst.len() < self.worst_cap {
            self.worst.push(Reverse((latency, rx_ns, flow)));
        } else if let Some(Reverse((least, _, _))) = self.worst.peek() {
            if latency > *least {
                self.worst.pop();
                self.worst.push(Reverse((latency, rx_ns, flow)));
            }
        }
    }

    /// Flows seen, by id.
    pub fn flows(&self) -> impl Iterator<Item = (u16, &FlowAcc)> {
        self.flows
            .iter()
            .enumerate()
            .filter_map(|(id, f)| f.as_deref().map(|f| (id as u16, f)))
    }

    /// Account one datagram: its UDP payload, its receive timestamp
    /// (CLOCK_REALTIME ns) and the bytes a frame adds to a datagram of its
    /// family (46 for IPv4, 66 for IPv6).
    pub fn packet(
        &mut self,
        data: &[u8],
        len: usize,
        rx_ns: u64,
        overhead: u64,
        sink: &mut dyn IntervalSink,
    ) {
        let p = match Payload::parse(data) {
            Ok(p) => p,
            Err(m) => {
                match m {
                    Malformed::TooShort => self.malformed.too_short += 1,
                    Malformed::BadMagic => self.malformed.bad_magic += 1,
                    Malformed::BadCheck => self.malformed.bad_check += 1,
                }
                return;
            }
        };
        let len = len as u64;
        let frame = (len + overhead).max(MIN_FRAME);
        self.received += 1;
        self.bytes += len;
        self.frame_bytes += frame;
        self.first_rx_ns = Some(self.first_rx_ns.map_or(rx_ns, |t| t.min(rx_ns)));
        self.last_rx_ns = Some(self.last_rx_ns.map_or(rx_ns, |t| t.max(rx_ns)));

        let id = usize::from(p.flow);
        if self.flows.len() <= id {
            self.flows.resize_with(id + 1, || None);
        }
        let flow = self.flows[id].get_or_insert_with(|| Box::new(FlowAcc::new()));
        flow.received += 1;
        let seq = u64::from(p.seq);
        let before = flow.window.highest;
        let class = flow.window.observe(seq);
        if flow.first.is_none() {
            flow.first = Some((seq, p.send_ns));
        }
        match (class, before) {
            (SeqClass::Ahead, Some(h)) if seq > h + 1 => {
                if self.gaps.len() < MAX_GAPS {
                    self.gaps.push(Gap {
                        flow: p.flow,
                        after_seq: h,
                        after_send_ns: flow.highest_send_ns,
                        before_seq: seq,
                        before_send_ns: p.send_ns,
                        before_rx_ns: rx_ns,
                        filled: 0,
                    });
                } else {
                    self.gaps_dropped += 1;
                }
            }
            (SeqClass::Reordered, _) => {
                // The latest gap of this flow that holds it (gaps are few).
                if let Some(g) = self
                    .gaps
                    .iter_mut()
                    .rev()
                    .find(|g| g.flow == p.flow && g.after_seq < seq && seq < g.before_seq)
                {
                    g.filled += 1;
                }
            }
            _ => {}
        }
        if class == SeqClass::Ahead {
            flow.highest_send_ns = p.send_ns;
        }
        if class == SeqClass::Duplicate {
            flow.duplicates += 1;
            self.duplicates += 1;
        } else {
            flow.unique += 1;
            self.unique += 1;
        }
        if matches!(class, SeqClass::Reordered | SeqClass::BeyondWindow) {
            flow.reordered += 1;
            self.reordered += 1;
        }
        if class == SeqClass::BeyondWindow {
            flow.beyond_window += 1;
        }
        let latency = rx_ns.checked_sub(p.send_ns);
        match latency {
            Some(l) => {
                hist::record(&mut flow.latency, l);
                hist::record(&mut self.latency, l);
                if let Some(prev) = flow.prev_latency {
                    hist::record(&mut flow.jitter, l.abs_diff(prev));
                    hist::record(&mut self.jitter, l.abs_diff(prev));
                }
                flow.prev_latency = Some(l);
                self.consider_worst(l, rx_ns, p.flow);
            }
            None => self.negative_latency += 1,
        }

        let origin = *self.origin.get_or_insert(rx_ns);
        self.newest = self.newest.max(rx_ns);
        self.close_until(self.newest.saturating_sub(self.grace_ns), sink);
        let index = rx_ns.saturating_sub(origin) / self.width_ns;
        if index < self.open_base {
            self.interval_late += 1;
            return;
        }
        let slot = self.slot(index);
        slot.packets += 1;
        slot.duplicates += u64::from(class == SeqClass::Duplicate);
        slot.bytes += len;
        slot.frame_bytes += frame;
        if let Some(l) = latency {
            hist::record(&mut slot.latency, l);
        }
    }
}
