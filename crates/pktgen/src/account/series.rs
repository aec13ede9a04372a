//! The receiver's series: intervals of receive time, closed once a later
//! timestamp shows no more packets will come for them (see the parent module).

use hdrhistogram::Histogram;

use super::Accounting;
use crate::hist;

/// One closed interval of the series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interval {
    /// Start, ns after the first packet's timestamp.
    pub t_ns: u64,
    /// Valid packets.
    pub packets: u64,
    /// Of them, duplicates (a sequence number already seen).
    pub duplicates: u64,
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
pub(super) struct Open {
    pub(super) packets: u64,
    pub(super) duplicates: u64,
    pub(super) bytes: u64,
    pub(super) frame_bytes: u64,
    pub(super) latency: Histogram<u64>,
}

impl Accounting {
    /// Close every interval still open (the end of the run).
    pub fn finish(&mut self, sink: &mut dyn IntervalSink) {
        let end = self.open_base + self.open.len() as u64;
        while self.open_base < end {
            self.close_next(sink);
        }
    }

    /// The open interval `index` (at least `open_base`), opening it and
    /// any before it.
    pub(super) fn slot(&mut self, index: u64) -> &mut Open {
        while self.open_base + (self.open.len() as u64) <= index {
            let latency = self.pool.pop().unwrap_or_else(hist::new);
            self.open.push_back(Open {
                packets: 0,
                duplicates: 0,
                bytes: 0,
                frame_bytes: 0,
                latency,
            });
        }
        &mut self.open[(index - self.open_base) as usize]
    }

    /// Close the intervals that end at or before timestamp `t`.
    pub(super) fn close_until(&mut self, t: u64, sink: &mut dyn IntervalSink) {
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
                    duplicates: o.duplicates,
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
