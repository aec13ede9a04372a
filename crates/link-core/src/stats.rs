//! Counters and distributions of one [`Direction`](crate::Direction).
//!
//! [`DirectionStats`] is a plain serialisable snapshot, built on demand by
//! [`Direction::stats`](crate::Direction::stats) from the live
//! counters. Two distributions are kept in HdrHistograms (3 significant
//! digits, auto-resizing, so any `u64` nanosecond value is recorded with a
//! relative error below 0.1%):
//!
//! * **lateness**, fed by the I/O layer through
//!   [`Direction::record_lateness`](crate::Direction::record_lateness): how
//!   much later than scheduled each packet actually left. This is the
//!   emulator's own error, the number that says whether results can be
//!   trusted. The whole histogram is also exported in the standard
//!   HdrHistogram V2 compressed format (DEFLATE), base64-encoded, which
//!   Python's `hdrh` decodes with `HdrHistogram.decode(...)`.
//! * **sojourn**: how long each packet waited in the bottleneck queue, from
//!   its arrival to the start of its transmission (or its trace delivery
//!   opportunity). Queueing delay, i.e. bufferbloat.

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A snapshot of a direction's counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Packets that arrived (every [`push`](crate::Direction::push)).
    pub rx_packets: u64,
    /// Bytes that arrived (packet lengths, without overhead).
    pub rx_bytes: u64,
    /// Packets handed out by [`poll`](crate::Direction::poll).
    pub tx_packets: u64,
    /// Bytes handed out by [`poll`](crate::Direction::poll).
    pub tx_bytes: u64,
    /// Dropped packets by cause.
    pub drops: DropStats,
    /// Extra copies made by duplication.
    pub duplicated: u64,
    /// Packets that had a bit flipped.
    pub corrupted: u64,
    /// Bottleneck queue occupancy.
    pub queue: QueueStats,
    /// Departure lateness reported by the I/O layer.
    pub lateness: LatenessStats,
    /// The lateness histogram in HdrHistogram V2 + DEFLATE format, base64
    /// (standard alphabet, padded).
    pub lateness_hdr: String,
    /// Time packets spent waiting in the bottleneck queue.
    pub sojourn: SojournStats,
}

/// Dropped packets by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropStats {
    /// Did not fit in the bottleneck queue (drop-tail), or lost a HiFi
    /// draw (the arrival, or the waiting packet it replaced).
    pub queue: u64,
    /// Lost by the loss model.
    pub loss: u64,
    /// Arrived while the link was down, or were queued or in flight when it
    /// went down.
    pub down: u64,
}

/// Bottleneck queue occupancy. `packets` and `bytes` are the state after
/// the last [`push`](crate::Direction::push) or
/// [`poll`](crate::Direction::poll); the rest are sampled at every arrival
/// (as the arrival finds the queue, before it is added), so the mean is the
/// time average seen by arrivals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Packets waiting now (not counting the one being transmitted).
    pub packets: u64,
    /// Bytes waiting now.
    pub bytes: u64,
    /// Largest number of packets seen by an arrival.
    pub max_packets: u64,
    /// Largest number of bytes seen by an arrival.
    pub max_bytes: u64,
    /// Mean number of packets seen by arrivals (0 without samples).
    pub mean_packets: f64,
    /// Mean number of bytes seen by arrivals (0 without samples).
    pub mean_bytes: f64,
    /// Number of samples (arrivals).
    pub samples: u64,
}

/// Summary of the lateness histogram; all zero while it is empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessStats {
    /// Departures recorded.
    pub count: u64,
    /// Smallest lateness, ns.
    pub min_ns: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// 99.9th percentile, ns.
    pub p999_ns: u64,
    /// Largest lateness, ns.
    pub max_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
}

/// Summary of the queue sojourn histogram; all zero while it is empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SojournStats {
    /// Packets that left the queue.
    pub count: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest sojourn, ns.
    pub max_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
}

/// The live counters behind [`DirectionStats`].
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub drops: DropStats,
    pub duplicated: u64,
    pub corrupted: u64,
    max_packets: u64,
    max_bytes: u64,
    sum_packets: u128,
    sum_bytes: u128,
    samples: u64,
    lateness: Histogram<u64>,
    sojourn: Histogram<u64>,
}

/// An auto-resizing histogram with 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is a valid precision")
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            rx_packets: 0,
            rx_bytes: 0,
            tx_packets: 0,
            tx_bytes: 0,
            drops: DropStats::default(),
            duplicated: 0,
            corrupted: 0,
            max_packets: 0,
            max_bytes: 0,
            sum_packets: 0,
            sum_bytes: 0,
            samples: 0,
            lateness: histogram(),
            sojourn: histogram(),
        }
    }
}

impl Recorder {
    /// Queue occupancy as seen by an arrival.
    pub fn sample_queue(&mut self, packets: u64, bytes: u64) {
        self.max_packets = self.max_packets.max(packets);
        self.max_bytes = self.max_bytes.max(bytes);
        self.sum_packets += u128::from(packets);
        self.sum_bytes += u128::from(bytes);
        self.samples += 1;
    }

    /// How late a departure left, ns.
    pub fn record_lateness(&mut self, late_ns: u64) {
        record(&mut self.lateness, late_ns);
    }

    /// How long a packet waited in the queue, ns.
    pub fn record_sojourn(&mut self, ns: u64) {
        record(&mut self.sojourn, ns);
    }

    /// The snapshot, with the queue's current occupancy.
    pub fn snapshot(&self, packets: u64, bytes: u64) -> DirectionStats {
        let mean = |sum: u128| {
            if self.samples == 0 {
                0.0
            } else {
                sum as f64 / self.samples as f64
            }
        };
        let h = &self.lateness;
        let lateness = if h.is_empty() {
            LatenessStats::default()
        } else {
            LatenessStats {
                count: h.len(),
                min_ns: h.min(),
                p50_ns: h.value_at_quantile(0.5),
                p90_ns: h.value_at_quantile(0.9),
                p99_ns: h.value_at_quantile(0.99),
                p999_ns: h.value_at_quantile(0.999),
                max_ns: h.max(),
                mean_ns: h.mean(),
            }
        };
        let s = &self.sojourn;
        let sojourn = if s.is_empty() {
            SojournStats::default()
        } else {
            SojournStats {
                count: s.len(),
                p50_ns: s.value_at_quantile(0.5),
                p99_ns: s.value_at_quantile(0.99),
                max_ns: s.max(),
                mean_ns: s.mean(),
            }
        };
        DirectionStats {
            rx_packets: self.rx_packets,
            rx_bytes: self.rx_bytes,
            tx_packets: self.tx_packets,
            tx_bytes: self.tx_bytes,
            drops: self.drops,
            duplicated: self.duplicated,
            corrupted: self.corrupted,
            queue: QueueStats {
                packets,
                bytes,
                max_packets: self.max_packets,
                max_bytes: self.max_bytes,
                mean_packets: mean(self.sum_packets),
                mean_bytes: mean(self.sum_bytes),
                samples: self.samples,
            },
            lateness,
            lateness_hdr: encode_hdr(&self.lateness),
            sojourn,
        }
    }
}

/// Record `v`, growing `h` as needed. Beyond the largest value an
/// auto-resizing histogram can track (about 2^63) it is clamped instead
/// (`saturating_record` alone would clamp to the *current* range).
fn record(h: &mut Histogram<u64>, v: u64) {
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}

/// `h` in HdrHistogram V2 + DEFLATE format, base64 (how every histogram the
/// engine exports is written; Python's `hdrh` decodes it).
pub fn encode_hdr(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serialising into a Vec cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn empty_snapshot_is_all_zero() {
        let s = Recorder::default().snapshot(0, 0);
        assert_eq!(s.lateness, LatenessStats::default());
        assert_eq!(s.sojourn, SojournStats::default());
        assert_eq!(s.queue, QueueStats::default());
        assert!(!s.lateness_hdr.is_empty());
    }

    #[test]
    fn queue_samples() {
        let mut r = Recorder::default();
        r.sample_queue(0, 0);
        r.sample_queue(2, 3000);
        r.sample_queue(4, 1000);
        let q = r.snapshot(1, 1500).queue;
        assert_eq!((q.packets, q.bytes), (1, 1500));
        assert_eq!((q.max_packets, q.max_bytes, q.samples), (4, 3000, 3));
        assert_eq!(q.mean_packets, 2.0);
        assert!((q.mean_bytes - 4000.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn lateness_quantiles_and_round_trip() {
        let mut r = Recorder::default();
        for v in 1..=1000u64 {
            r.record_lateness(v * 1000);
        }
        r.record_lateness(0);
        r.record_lateness(u64::MAX);
        let s = r.snapshot(0, 0);
        let l = s.lateness;
        assert_eq!(l.count, 1002);
        assert_eq!(l.min_ns, 0);
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 2e-3;
        assert!(near(l.p50_ns, 500_000), "{l:?}");
        assert!(near(l.p90_ns, 900_000), "{l:?}");
        assert!(near(l.p99_ns, 990_000), "{l:?}");
        assert!(l.max_ns > u64::MAX / 2, "{l:?}");

        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&s.lateness_hdr)
            .unwrap();
        let back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        let summary = |h: &Histogram<u64>| {
            let q: Vec<u64> = [0.0, 0.25, 0.5, 0.9, 0.999, 1.0]
                .iter()
                .map(|&q| h.value_at_quantile(q))
                .collect();
            (h.len(), h.min(), q)
        };
        assert_eq!(summary(&back), summary(&r.lateness));
        // The V2 compressed cookie, so other implementations recognise it.
        assert_eq!(&bytes[..4], &[0x1c, 0x84, 0x93, 0x14]);
    }

    #[test]
    fn serialises_to_json() {
        let mut r = Recorder::default();
        r.record_sojourn(10);
        let v = serde_json::to_value(r.snapshot(0, 0)).unwrap();
        assert_eq!(v["sojourn"]["count"], 1);
        assert_eq!(v["drops"]["down"], 0);
        assert!(v["lateness_hdr"].is_string());
    }
}
