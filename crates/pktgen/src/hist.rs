//! Latency histograms: creation, recording, summary, export.
//!
//! HdrHistograms of `u64` nanoseconds, 1 ns .. 60 s, 3 significant digits
//! (a value is known to within 0.1%). A latency above 60 s is recorded as
//! 60 s.

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest trackable latency, ns.
pub const HIGHEST_NS: u64 = 60_000_000_000;

/// An empty latency histogram.
pub fn new() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("constant, valid bounds")
}

/// Record one latency, clamped to the trackable range.
#[inline]
pub fn record(h: &mut Histogram<u64>, ns: u64) {
    h.saturating_record(ns);
}

/// The summary written for every histogram in the JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Latencies recorded.
    pub count: u64,
    /// Smallest, ns (0 when empty).
    pub min_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// 99.9th percentile, ns.
    pub p999_ns: u64,
    /// 99.99th percentile, ns.
    pub p9999_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
}

/// Quantiles as HdrHistogram reports them (the highest value equivalent to
/// the bucket, so within 0.1% above the true value).
pub fn summary(h: &Histogram<u64>) -> Summary {
    if h.is_empty() {
        return Summary::default();
    }
    Summary {
        count: h.len(),
        min_ns: h.min(),
        mean_ns: h.mean(),
        p50_ns: h.value_at_quantile(0.5),
        p90_ns: h.value_at_quantile(0.9),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        p9999_ns: h.value_at_quantile(0.9999),
        max_ns: h.max(),
    }
}

/// `h` in the HdrHistogram V2 + DEFLATE format, base64 (standard, padded):
/// what Python's `hdrh` reads with `HdrHistogram.decode(...)`.
pub fn encode(h: &Histogram<u64>) -> String {
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
    fn summary_and_round_trip() {
        let mut h = new();
        assert_eq!(summary(&h), Summary::default());
        for v in 1..=1000u64 {
            record(&mut h, v * 1000);
        }
        record(&mut h, 3 * HIGHEST_NS);
        let s = summary(&h);
        assert_eq!(s.count, 1001);
        assert_eq!(s.min_ns, 1000);
        // The 501st and 991st of 1001 values, to 3 significant digits.
        assert!(s.p50_ns.abs_diff(501_000) <= 501, "{s:?}");
        assert!(s.p99_ns.abs_diff(991_000) <= 991, "{s:?}");
        assert!(s.max_ns.abs_diff(HIGHEST_NS) <= HIGHEST_NS / 1000, "{s:?}");

        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encode(&h))
            .unwrap();
        assert_eq!(&bytes[..4], &[0x1c, 0x84, 0x93, 0x14]);
        let back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        assert_eq!(summary(&back), s);
    }
}
