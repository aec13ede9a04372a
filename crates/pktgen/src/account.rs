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

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::hist;
use crate::payload::{Malformed, Payload};

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

/// How a sequence number relates to the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeqClass {
    /// Above every earlier one.
    Ahead,
    /// Below the highest, first time seen.
    Reordered,
    /// Seen before.
    Duplicate,
    /// Below the window: cannot tell.
    BeyondWindow,
}

/// The highest sequence number and which of the [`DUP_WINDOW`] below it
/// (itself included) arrived, as a ring of bits indexed by `seq % window`.
#[derive(Debug, Clone)]
struct SeqWindow {
    bits: Box<[u64]>,
    highest: Option<u64>,
}

impl SeqWindow {
    fn new() -> SeqWindow {
        SeqWindow {
            bits: vec![0; (DUP_WINDOW / 64) as usize].into_boxed_slice(),
            highest: None,
        }
    }

    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % DUP_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn test_and_set(&mut self, seq: u64) -> bool {
        let (w, m) = Self::slot(seq);
        let was = self.bits[w] & m != 0;
        self.bits[w] |= m;
        was
    }

    fn observe(&mut self, seq: u64) -> SeqClass {
        match self.highest {
            Some(h) if seq <= h => {
                if h - seq >= DUP_WINDOW {
                    SeqClass::BeyondWindow
                } else if self.test_and_set(seq) {
                    SeqClass::Duplicate
                } else {
                    SeqClass::Reordered
                }
            }
            _ => {
                // Forget the slots the window slides over (the new
                // number's own slot held the one leaving the window).
                match self.highest {
                    Some(h) if seq - h < DUP_WINDOW => {
                        for s in h + 1..=seq {
                            let (w, m) = Self::slot(s);
                            self.bits[w] &= !m;
                        }
                    }
                    _ => self.bits.fill(0),
                }
                self.test_and_set(seq);
                self.highest = Some(seq);
                SeqClass::Ahead
            }
        }
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

/// One closed interval of the series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interval {
    /// Start, ns after the first packet's timestamp.
    pub t_ns: u64,
    /// Valid packets.
    pub packets: u64,
    /// Their UDP payload bytes.
    pub bytes: u64,
    /// Their Ethernet frame bytes (FCS included), inferred from the
    /// datagram length.
    pub frame_bytes: u64,
    /// Positive latencies recorded.
    pub latency_count: u64,
    /// Largest latency, ns (0 when none).
    pub latency_max_ns: u64,
    /// Median latency, ns (0 when none).
    pub latency_p50_ns: u64,
    /// 99th percentile latency, ns (0 when none).
    pub latency_p99_ns: u64,
}

/// Receives each interval's latency histogram as it closes (for the
/// HdrHistogram interval log).
pub trait IntervalSink {
    /// Interval starting at CLOCK_REALTIME `start_ns`, `width_ns` wide.
    fn interval(&mut self, start_ns: u64, width_ns: u64, latency: &Histogram<u64>);
}

/// No sink.
impl IntervalSink for () {
    fn interval(&mut self, _: u64, _: u64, _: &Histogram<u64>) {}
}

/// An interval still taking packets.
struct Open {
    packets: u64,
    bytes: u64,
    frame_bytes: u64,
    latency: Histogram<u64>,
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
        slot.bytes += len;
        slot.frame_bytes += frame;
        if let Some(l) = latency {
            hist::record(&mut slot.latency, l);
        }
    }

    /// Close every interval still open (the end of the run).
    pub fn finish(&mut self, sink: &mut dyn IntervalSink) {
        let end = self.open_base + self.open.len() as u64;
        while self.open_base < end {
            self.close_next(sink);
        }
    }

    /// The open interval `index` (at least `open_base`), opening it and
    /// any before it.
    fn slot(&mut self, index: u64) -> &mut Open {
        while self.open_base + (self.open.len() as u64) <= index {
            let latency = self.pool.pop().unwrap_or_else(hist::new);
            self.open.push_back(Open {
                packets: 0,
                bytes: 0,
                frame_bytes: 0,
                latency,
            });
        }
        &mut self.open[(index - self.open_base) as usize]
    }

    /// Close the intervals that end at or before timestamp `t`.
    fn close_until(&mut self, t: u64, sink: &mut dyn IntervalSink) {
        let Some(origin) = self.origin else { return };
        let closable = t.saturating_sub(origin) / self.width_ns;
        while self.open_base < closable {
            self.close_next(sink);
        }
    }

    fn close_next(&mut self, sink: &mut dyn IntervalSink) {
        let origin = self.origin.unwrap_or(0);
        let t_ns = self.open_base * self.width_ns;
        let interval = match self.open.pop_front() {
            Some(mut o) => {
                sink.interval(origin + t_ns, self.width_ns, &o.latency);
                let h = &o.latency;
                let quantile = |q| {
                    if h.is_empty() {
                        0
                    } else {
                        h.value_at_quantile(q)
                    }
                };
                let i = Interval {
                    t_ns,
                    packets: o.packets,
                    bytes: o.bytes,
                    frame_bytes: o.frame_bytes,
                    latency_count: h.len(),
                    latency_max_ns: if h.is_empty() { 0 } else { h.max() },
                    latency_p50_ns: quantile(0.5),
                    latency_p99_ns: quantile(0.99),
                };
                o.latency.reset();
                self.pool.push(o.latency);
                i
            }
            None => {
                sink.interval(origin + t_ns, self.width_ns, &self.empty);
                Interval {
                    t_ns,
                    ..Interval::default()
                }
            }
        };
        self.intervals.push(interval);
        self.open_base += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_700_000_000 * 1_000_000_000;

    fn datagram(flow: u16, seq: u32, send_ns: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        Payload { flow, seq, send_ns }.write(&mut b);
        b
    }

    /// Feed `flow`'s sequence numbers, 1 ms apart from T0, latency 50 µs.
    fn feed(a: &mut Accounting, flow: u16, seqs: &[u32]) {
        for (i, &seq) in seqs.iter().enumerate() {
            let rx = T0 + i as u64 * MS;
            let d = datagram(flow, seq, rx - 50_000, 18);
            a.packet(&d, d.len(), rx, 46, &mut ());
        }
    }

    #[test]
    fn in_order_without_loss() {
        let mut a = Accounting::new(100 * MS, 0);
        feed(&mut a, 0, &(0..1000).collect::<Vec<_>>());
        a.finish(&mut ());
        let (id, f) = a.flows().next().unwrap();
        assert_eq!(id, 0);
        assert_eq!(
            (f.received, f.unique, f.duplicates, f.reordered),
            (1000, 1000, 0, 0)
        );
        assert_eq!((f.max_seq(), f.lost_by_seq()), (999, 0));
        assert_eq!(
            (a.received, a.unique, a.bytes, a.frame_bytes),
            (1000, 1000, 18_000, 64_000)
        );
        let l = hist::summary(&a.latency);
        assert_eq!(l.count, 1000);
        assert!(l.p50_ns.abs_diff(50_000) <= 50, "{l:?}");
        assert_eq!(a.intervals.len(), 10);
        assert!(a
            .intervals
            .iter()
            .all(|i| i.packets == 100 && i.frame_bytes == 6400));
        assert_eq!(
            (a.first_rx_ns, a.last_rx_ns),
            (Some(T0), Some(T0 + 999 * MS))
        );
    }

    #[test]
    fn duplicates_reordering_and_loss() {
        let mut a = Accounting::new(100 * MS, 0);
        // 0..10 with 3 and 7 missing, 5 twice, 2 late (reordered), 4 three times.
        feed(&mut a, 1, &[0, 1, 4, 5, 5, 2, 6, 8, 9, 4, 4]);
        let f = a.flows().next().unwrap().1;
        assert_eq!(f.received, 11);
        assert_eq!(f.unique, 8);
        assert_eq!(f.duplicates, 3);
        assert_eq!(f.reordered, 1);
        assert_eq!(f.max_seq(), 9);
        assert_eq!(f.lost_by_seq(), 2);
        assert_eq!((a.unique, a.duplicates, a.reordered), (8, 3, 1));
    }

    #[test]
    fn gaps_are_kept_with_their_send_times_and_filled_by_late_packets() {
        let mut a = Accounting::new(100 * MS, 0);
        // Flow 1: 0..3, then 3..=5 missing with 4 arriving late, then 6..8.
        // Flow 2 in order: no gap.
        feed(&mut a, 1, &[0, 1, 2, 6, 4, 7, 8]);
        feed(&mut a, 2, &[0, 1, 2]);
        assert_eq!(a.gaps.len(), 1);
        let g = a.gaps[0];
        assert_eq!((g.flow, g.after_seq, g.before_seq), (1, 2, 6));
        // feed() sends packet i at T0 + i ms - 50 us: 2 went third, 6 fourth.
        assert_eq!(g.after_send_ns, T0 + 2 * MS - 50_000);
        assert_eq!(g.before_send_ns, T0 + 3 * MS - 50_000);
        assert_eq!(g.before_rx_ns, T0 + 3 * MS);
        assert_eq!((g.filled, g.lost()), (1, 2));
        assert_eq!(a.gaps_dropped, 0);
    }

    #[test]
    fn gaps_beyond_the_cap_are_counted_not_kept() {
        let mut a = Accounting::new(100 * MS, 0);
        let seqs: Vec<u32> = (0..(MAX_GAPS as u32 + 6)).map(|i| 2 * i).collect();
        feed(&mut a, 0, &seqs);
        assert_eq!(a.gaps.len(), MAX_GAPS);
        assert_eq!(a.gaps_dropped, 5);
    }

    #[test]
    fn duplicate_window_slides() {
        let mut a = Accounting::new(100 * MS, 0);
        // A jump of exactly the window forgets everything before it.
        feed(&mut a, 0, &[0, 1, 65_537, 1, 2, 65_537]);
        let f = a.flows().next().unwrap().1;
        // 1 is 65 536 behind: beyond the window, not called a duplicate;
        // 2 is just inside and new.
        assert_eq!((f.unique, f.duplicates, f.beyond_window), (5, 1, 1));
        assert_eq!(f.reordered, 2);
        // A slot taken over by a newer number no longer means the old one.
        let mut b = Accounting::new(100 * MS, 0);
        feed(&mut b, 0, &[5, 65_540, 65_541, 65_540, 6]);
        let f = b.flows().next().unwrap().1;
        assert_eq!((f.unique, f.duplicates, f.reordered), (4, 1, 1));
        assert_eq!(f.lost_by_seq(), 65_542 - 4);
    }

    #[test]
    fn flows_are_separate() {
        let mut a = Accounting::new(100 * MS, 0);
        feed(&mut a, 3, &[0, 1, 2]);
        feed(&mut a, 0, &[0, 2]);
        let flows: Vec<_> = a
            .flows()
            .map(|(id, f)| (id, f.unique, f.lost_by_seq()))
            .collect();
        assert_eq!(flows, vec![(0, 2, 1), (3, 3, 0)]);
        assert_eq!(a.received, 5);
    }

    #[test]
    fn malformed_are_counted_and_ignored() {
        let mut a = Accounting::new(100 * MS, 0);
        let good = datagram(0, 0, T0, 18);
        let mut corrupt = good.clone();
        corrupt[9] ^= 4;
        for d in [&good[..5], &[0u8; 40][..], &corrupt[..], &good[..], &[][..]] {
            a.packet(d, d.len(), T0 + 1000, 46, &mut ());
        }
        assert_eq!(
            a.malformed,
            MalformedCounts {
                too_short: 2,
                bad_magic: 1,
                bad_check: 1
            }
        );
        assert_eq!(a.malformed.total(), 4);
        assert_eq!((a.received, a.bytes), (1, 18));
    }

    #[test]
    fn negative_latency_is_not_recorded() {
        let mut a = Accounting::new(100 * MS, 0);
        let d = datagram(0, 0, T0 + 5, 18);
        a.packet(&d, 18, T0, 46, &mut ());
        assert_eq!((a.received, a.negative_latency, a.latency.len()), (1, 1, 0));
        a.finish(&mut ());
        assert_eq!(a.intervals[0].packets, 1);
        assert_eq!(a.intervals[0].latency_count, 0);
    }

    #[derive(Default)]
    struct Log(Vec<(u64, u64, u64)>);

    impl IntervalSink for Log {
        fn interval(&mut self, start: u64, width: u64, h: &Histogram<u64>) {
            self.0.push((start, width, h.len()));
        }
    }

    #[test]
    fn interval_series_has_empty_intervals() {
        let mut a = Accounting::new(10 * MS, 0);
        let mut log = Log::default();
        // Two packets at 0 and 3 ms, silence, one at 45 ms, one at 61 ms.
        for (t, lat, len) in [
            (0, 10_000, 18),
            (3 * MS, 30_000, 100),
            (45 * MS, 20_000, 18),
            (61 * MS, 40_000, 18),
        ] {
            let d = datagram(0, (t / MS) as u32, T0 + t - lat, len);
            a.packet(&d, len, T0 + t, 46, &mut log);
        }
        a.finish(&mut log);
        let series: Vec<_> = a
            .intervals
            .iter()
            .map(|i| (i.t_ns / MS, i.packets, i.frame_bytes))
            .collect();
        assert_eq!(
            series,
            vec![
                (0, 2, 64 + 146),
                (10, 0, 0),
                (20, 0, 0),
                (30, 0, 0),
                (40, 1, 64),
                (50, 0, 0),
                (60, 1, 64)
            ]
        );
        let first = a.intervals[0];
        assert!(first.latency_max_ns.abs_diff(30_000) <= 30, "{first:?}");
        assert!(first.latency_p50_ns.abs_diff(10_000) <= 10, "{first:?}");
        assert_eq!(a.intervals[1].latency_max_ns, 0);
        assert_eq!(first.bytes, 118);
        // The sink saw the same intervals, with absolute start times.
        let want: Vec<_> = a
            .intervals
            .iter()
            .map(|i| (T0 + i.t_ns, 10 * MS, i.latency_count))
            .collect();
        assert_eq!(log.0, want);
    }

    #[test]
    fn out_of_order_timestamps_within_the_grace() {
        let mut a = Accounting::new(10 * MS, 5 * MS);
        let feed_at = |a: &mut Accounting, t: u64| {
            let d = datagram(0, 0, T0, 18);
            a.packet(&d, 18, T0 + t, 46, &mut ());
        };
        feed_at(&mut a, 0);
        feed_at(&mut a, 13 * MS);
        feed_at(&mut a, 9 * MS); // still open: 13 < 10 + 5
        feed_at(&mut a, 16 * MS);
        feed_at(&mut a, 8 * MS); // closed at 15 ms: late
        feed_at(&mut a, 2 * MS); // before... still closed: late
        a.finish(&mut ());
        let series: Vec<_> = a.intervals.iter().map(|i| i.packets).collect();
        assert_eq!(series, vec![2, 2]);
        assert_eq!(a.interval_late, 2);
        assert_eq!(a.received, 6);
        assert_eq!(a.first_rx_ns, Some(T0));
    }
}
