//! Token-bucket shaper.
//!
//! Tokens accrue at `rate_bps` bits per second up to a depth of
//! `burst_bytes`; a packet of `len` bytes may depart once the bucket holds
//! `len` bytes' worth of tokens, and departing spends them. Over any interval
//! of length `T` the bytes that depart therefore never exceed
//! `burst_bytes + rate_bps * T / 8`, and a backlogged sender is paced at
//! exactly `rate_bps` in the long run.
//!
//! # Exact arithmetic
//!
//! Tokens are counted in *bit-nanoseconds*: one byte is worth
//! `8 * 10^9` units and one nanosecond at `rate_bps` adds `rate_bps` units.
//! Everything is integer (`i128` internally), so no fraction of a token is
//! ever lost and there is no drift however long the run.
//!
//! Departure times are whole nanoseconds, rounded *up* from the exact
//! (fractional) instant at which a packet's last token arrives. A packet that
//! departs in that first eligible nanosecond is charged as if it had left at
//! the exact instant, so the rounding never costs throughput, even when the
//! bucket is full at the rounded time (burst close to one packet at a high
//! rate). The schedule is therefore the ideal continuous-time token bucket's,
//! each departure delayed by less than 1 ns, never accumulating: counted from
//! the start the envelope above holds exactly, and over an arbitrary window
//! it holds within one nanosecond's worth of tokens.
//!
//! # Time
//!
//! The caller passes `now` in nanoseconds from any fixed origin; nothing here
//! reads a clock. The bucket starts full. Time is expected to be monotonic; a
//! `now` earlier than one already seen is treated as equal to it.
//!
//! # Packets larger than the burst
//!
//! A packet longer than `burst_bytes` could never gather enough tokens. It is
//! allowed to depart once the bucket is *full*, which drives the bucket into
//! debt; later packets wait until the debt is repaid, so the long-run rate is
//! still exact.

use thiserror::Error;

/// Smallest accepted burst: one full Ethernet frame without FCS
/// (1500-byte MTU + 14-byte header). A smaller bucket could never pass a
/// full-size frame without going into debt.
pub const MIN_BURST_BYTES: u64 = 1514;

/// Token units per byte: 8 bits times 10^9 nanoseconds per second.
const UNITS_PER_BYTE: i128 = 8 * 1_000_000_000;

/// Why a [`TokenBucket`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TokenBucketError {
    /// A rate of zero would never release a packet.
    #[error("token bucket rate must be at least 1 bit/s")]
    ZeroRate,
    /// The burst cannot hold one full-size frame.
    #[error(
        "token bucket burst of {burst_bytes} bytes is smaller than one {min_bytes}-byte frame"
    )]
    BurstTooSmall {
        /// The burst that was asked for, in bytes.
        burst_bytes: u64,
        /// The minimum burst, [`MIN_BURST_BYTES`].
        min_bytes: u64,
    },
}

/// A token-bucket shaper driven by caller-supplied time.
///
/// ```
/// use link_core::TokenBucket;
///
/// // 8 Mbit/s = 1 byte per microsecond, 1514-byte bucket, initially full.
/// let mut tb = TokenBucket::new(8_000_000, 1514).unwrap();
/// assert_eq!(tb.earliest_departure(0, 1514), 0);
/// tb.consume(0, 1514);
/// // The next 1000-byte packet must wait 1000 µs for its tokens.
/// assert_eq!(tb.earliest_departure(0, 1000), 1_000_000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBucket {
    rate_bps: u64,
    burst_bytes: u64,
    /// `burst_bytes` in token units.
    capacity: i128,
    /// Tokens at `last_ns`; negative while in debt.
    tokens: i128,
    /// Latest time seen by [`TokenBucket::consume`].
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket releasing `rate_bps` bits per second with a depth of
    /// `burst_bytes`.
    pub fn new(rate_bps: u64, burst_bytes: u64) -> Result<Self, TokenBucketError> {
        if rate_bps == 0 {
            return Err(TokenBucketError::ZeroRate);
        }
        if burst_bytes < MIN_BURST_BYTES {
            return Err(TokenBucketError::BurstTooSmall {
                burst_bytes,
                min_bytes: MIN_BURST_BYTES,
            });
        }
        let capacity = i128::from(burst_bytes) * UNITS_PER_BYTE;
        Ok(Self {
            rate_bps,
            burst_bytes,
            capacity,
            tokens: capacity,
            last_ns: 0,
        })
    }

    /// Configured rate in bits per second.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Configured bucket depth in bytes.
    pub fn burst_bytes(&self) -> u64 {
        self.burst_bytes
    }

    /// Time from which computations start: `now`, clamped to be monotonic.
    fn clamp(&self, now_ns: u64) -> u64 {
        now_ns.max(self.last_ns)
    }

    /// Tokens (in units) at `t >= last_ns`, *not* capped at the depth.
    fn raw_tokens_at(&self, t: u64) -> i128 {
        let elapsed = i128::from(t - self.last_ns);
        let earned = elapsed.saturating_mul(i128::from(self.rate_bps));
        self.tokens.saturating_add(earned)
    }

    /// Tokens a packet of `len_bytes` must find in the bucket: its cost, or
    /// a full bucket for a packet larger than the burst.
    fn needed(&self, len_bytes: u64) -> i128 {
        Self::cost(len_bytes).min(self.capacity)
    }

    fn cost(len_bytes: u64) -> i128 {
        i128::from(len_bytes) * UNITS_PER_BYTE
    }

    /// Earliest time, at or after `now_ns`, at which a packet of `len_bytes`
    /// conforms. Returns `now_ns` itself if it may leave immediately, and
    /// saturates at `u64::MAX` if the wait does not fit in a `u64`.
    pub fn earliest_departure(&self, now_ns: u64, len_bytes: u64) -> u64 {
        let t = self.clamp(now_ns);
        let needed = self.needed(len_bytes);
        // `needed <= capacity`, so comparing before the cap is the same.
        let available = self.raw_tokens_at(t);
        if available >= needed {
            return t;
        }
        let deficit = needed - available;
        let rate = i128::from(self.rate_bps);
        // Round up: the packet may not leave before its last token arrives.
        let wait = (deficit + rate - 1) / rate;
        match u64::try_from(wait) {
            Ok(wait) => t.saturating_add(wait),
            Err(_) => u64::MAX,
        }
    }

    /// Spend the tokens for a packet of `len_bytes` departing at `now_ns`.
    ///
    /// This does not check conformance: calling it before
    /// [`earliest_departure`](Self::earliest_departure) borrows against
    /// future tokens, and later packets wait until the debt is repaid.
    pub fn consume(&mut self, now_ns: u64, len_bytes: u64) {
        let t = self.clamp(now_ns);
        let raw = self.raw_tokens_at(t);
        let surplus = raw.saturating_sub(self.needed(len_bytes));
        // Became eligible during the last nanosecond: it left at that exact
        // instant, before any of the `surplus` could overflow the bucket.
        let in_bucket = if (0..i128::from(self.rate_bps)).contains(&surplus) {
            raw
        } else {
            raw.min(self.capacity)
        };
        self.tokens = in_bucket.saturating_sub(Self::cost(len_bytes));
        self.last_ns = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBIT: u64 = 1_000_000;
    const GBIT: u64 = 1_000_000_000;
    const SEC: u64 = 1_000_000_000;

    /// Deterministic xorshift64* for packet sizes.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn len(&mut self) -> u64 {
            64 + self.next() % (1514 - 64 + 1)
        }
    }

    /// Greedy backlogged sender starting at t=0 with a full bucket; returns
    /// (departure time, cumulative bytes including this packet) per packet.
    fn backlogged(tb: &mut TokenBucket, lens: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
        let mut t = 0;
        let mut total = 0;
        let mut out = Vec::new();
        for len in lens {
            t = tb.earliest_departure(t, len);
            tb.consume(t, len);
            total += len;
            out.push((t, total));
        }
        out
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(TokenBucket::new(0, 10_000), Err(TokenBucketError::ZeroRate));
        assert_eq!(
            TokenBucket::new(MBIT, 1513),
            Err(TokenBucketError::BurstTooSmall {
                burst_bytes: 1513,
                min_bytes: MIN_BURST_BYTES
            })
        );
        assert_eq!(
            TokenBucket::new(MBIT, 0).unwrap_err().to_string(),
            "token bucket burst of 0 bytes is smaller than one 1514-byte frame"
        );
        let tb = TokenBucket::new(1, MIN_BURST_BYTES).unwrap();
        assert_eq!((tb.rate_bps(), tb.burst_bytes()), (1, 1514));
    }

    #[test]
    fn exact_departure_times() {
        // 8 Mbit/s = 1 byte per microsecond.
        let mut tb = TokenBucket::new(8 * MBIT, 1514).unwrap();
        tb.consume(0, 1514);
        assert_eq!(tb.earliest_departure(0, 1000), 1_000_000);
        assert_eq!(tb.earliest_departure(400_000, 1000), 1_000_000);
        assert_eq!(tb.earliest_departure(1_000_000, 1000), 1_000_000);
        assert_eq!(tb.earliest_departure(2_000_000, 1000), 2_000_000);
        // Rounded up to whole nanoseconds: 3 bytes at 7 bit/s = 24/7 s.
        let mut tb = TokenBucket::new(7, 1514).unwrap();
        tb.consume(0, 1514);
        assert_eq!(tb.earliest_departure(0, 3), 3_428_571_429);
    }

    #[test]
    fn full_bucket_passes_one_burst_then_paces() {
        let mut tb = TokenBucket::new(10 * MBIT, 15_000).unwrap();
        for _ in 0..10 {
            assert_eq!(tb.earliest_departure(5 * SEC, 1500), 5 * SEC);
            tb.consume(5 * SEC, 1500);
        }
        // Burst used up: the 11th packet waits 1500 * 8 / 10e6 s = 1.2 ms.
        assert_eq!(tb.earliest_departure(5 * SEC, 1500), 5 * SEC + 1_200_000);
    }

    #[test]
    fn idle_time_refills_only_up_to_the_burst() {
        let mut tb = TokenBucket::new(MBIT, 3000).unwrap();
        tb.consume(0, 3000);
        // An hour idle earns far more than 3000 bytes, but the cap holds.
        let t = 3600 * SEC;
        assert_eq!(tb.earliest_departure(t, 3000), t);
        tb.consume(t, 2000);
        assert_eq!(tb.earliest_departure(t, 1000), t);
        tb.consume(t, 1000);
        assert_eq!(tb.earliest_departure(t, 1), t + 8_000);
    }

    #[test]
    fn partial_refill_accumulates_between_calls() {
        let mut tb = TokenBucket::new(8 * MBIT, 2000).unwrap();
        tb.consume(0, 2000);
        // 500 µs earns 500 bytes; after spending 300, 200 remain.
        tb.consume(500_000, 300);
        assert_eq!(tb.earliest_departure(500_000, 200), 500_000);
        assert_eq!(tb.earliest_departure(500_000, 300), 600_000);
    }

    #[test]
    fn oversized_packet_waits_for_a_full_bucket_then_owes() {
        let mut tb = TokenBucket::new(8 * MBIT, 2000).unwrap();
        tb.consume(0, 1000);
        // A 5000-byte packet needs the bucket full again: 1000 µs.
        assert_eq!(tb.earliest_departure(0, 5000), 1_000_000);
        tb.consume(1_000_000, 5000);
        // Now 3000 bytes in debt: a 1-byte packet waits 3001 µs.
        assert_eq!(tb.earliest_departure(1_000_000, 1), 4_001_000);
    }

    #[test]
    fn early_consume_is_repaid() {
        let mut tb = TokenBucket::new(8 * MBIT, 1514).unwrap();
        tb.consume(0, 1514);
        tb.consume(0, 1000); // forced out early: 1000 bytes of debt
        assert_eq!(tb.earliest_departure(0, 1000), 2_000_000);
    }

    #[test]
    fn time_going_backwards_is_clamped() {
        let mut tb = TokenBucket::new(8 * MBIT, 1514).unwrap();
        tb.consume(10 * SEC, 1514);
        assert_eq!(tb.earliest_departure(SEC, 1000), 10 * SEC + 1_000_000);
        tb.consume(SEC, 100); // treated as happening at 10 s
        assert_eq!(tb.earliest_departure(0, 1000), 10 * SEC + 1_100_000);
    }

    #[test]
    fn zero_length_packets_are_free() {
        let mut tb = TokenBucket::new(1, 1514).unwrap();
        tb.consume(0, 1514);
        assert_eq!(tb.earliest_departure(0, 0), 0);
    }

    /// Exact conformance of a backlogged greedy sender starting full at 0.
    ///
    /// Upper bound, every packet: `8e9 * bytes_sent(t_k) <= 8e9 * burst +
    /// rate * t_k`. Once the initial burst is spent, also the lower bound:
    /// the slack is below `rate` units, i.e. under 1 ns of tokens, with no
    /// accumulation however long the run.
    fn check_exact_conformance(rate: u64, burst: u64, packets: usize, seed: u64) {
        let mut tb = TokenBucket::new(rate, burst).unwrap();
        let mut rng = Rng(seed);
        let sched = backlogged(&mut tb, (0..packets).map(|_| rng.len()));
        let cap = i128::from(burst) * UNITS_PER_BYTE;
        let rate_u = i128::from(rate);
        for (k, &(t, total)) in sched.iter().enumerate() {
            let slack = cap + rate_u * i128::from(t) - i128::from(total) * UNITS_PER_BYTE;
            assert!(
                slack >= 0,
                "rate {rate}: packet {k} at {t} ns exceeds the envelope"
            );
            if t > 0 {
                assert!(
                    slack < rate_u,
                    "rate {rate}: packet {k} at {t} ns, slack {slack}"
                );
            }
        }
        // Long-run rate within 0.1%, measured after the initial burst.
        let (t_end, total) = *sched.last().unwrap();
        assert!(t_end > 0);
        let measured = (total - burst) as f64 * 8.0 * 1e9 / t_end as f64;
        let err = (measured - rate as f64).abs() / rate as f64;
        assert!(err < 1e-3, "rate {rate}: measured {measured}, error {err}");
    }

    #[test]
    fn long_run_rate_conformance() {
        check_exact_conformance(1_000, 1514, 5_000, 1); // 1 kbit/s: ~17 simulated hours
        check_exact_conformance(7, 1514, 200, 2); // odd, tiny rate
        check_exact_conformance(10 * MBIT, 64 * 1024, 50_000, 3);
        check_exact_conformance(999_999_937, 100_000, 50_000, 4); // prime-ish rate
        check_exact_conformance(GBIT, 1514, 50_000, 5);
        check_exact_conformance(100 * GBIT, 1 << 20, 200_000, 6);
        check_exact_conformance(100 * GBIT, 1514, 200_000, 7); // burst = one frame
        check_exact_conformance(1_000 * GBIT, 1514, 200_000, 8); // several packets per ns
    }

    #[test]
    fn fixed_size_backlog_is_exact_at_100_gbit() {
        // Two 1500-byte packets fit the burst, then one leaves every 120 ns.
        let mut tb = TokenBucket::new(100 * GBIT, 3000).unwrap();
        let sched = backlogged(&mut tb, std::iter::repeat_n(1500, 1_000_001));
        assert_eq!((sched[0].0, sched[1].0, sched[2].0), (0, 0, 120));
        assert_eq!(sched[1_000_000].0, 119_999_880);
    }

    #[test]
    fn nanosecond_rounding_costs_no_throughput() {
        // 1514 bytes at 100 Gbit/s take 121.12 ns and the bucket holds just
        // one frame, so it is full at every rounded-up departure. Packet k
        // must leave at ceil(121.12 * k) ns, not every 122 ns.
        let mut tb = TokenBucket::new(100 * GBIT, 1514).unwrap();
        let sched = backlogged(&mut tb, std::iter::repeat_n(1514, 1_000_001));
        for (k, &(t, _)) in sched.iter().enumerate() {
            let ideal_x100 = 12_112 * k as u64; // in hundredths of a ns
            assert_eq!(t, ideal_x100.div_ceil(100), "packet {k}");
        }
        assert_eq!(sched[1].0, 122);
        assert_eq!(sched[2].0, 243);
        assert_eq!(sched[1_000_000].0, 121_120_000);
    }

    #[test]
    fn deterministic_schedules() {
        let run = || {
            let mut tb = TokenBucket::new(123_456_789, 9000).unwrap();
            let mut rng = Rng(42);
            backlogged(&mut tb, (0..10_000).map(|_| rng.len()))
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn no_overflow_at_extremes() {
        // 100 Gbit/s with the clock near its end and a huge idle gap.
        let mut tb = TokenBucket::new(100 * GBIT, u64::MAX).unwrap();
        tb.consume(u64::MAX - 10, u64::MAX);
        assert_eq!(tb.earliest_departure(u64::MAX - 10, 1514), u64::MAX);
        assert_eq!(tb.earliest_departure(u64::MAX, u64::MAX), u64::MAX);
        tb.consume(u64::MAX, u64::MAX); // deep debt, no panic
        assert_eq!(tb.earliest_departure(u64::MAX, 1), u64::MAX);

        // 100 Gbit/s: a full refill after u64::MAX ns idle does not overflow.
        let mut tb = TokenBucket::new(100 * GBIT, 1514).unwrap();
        tb.consume(0, 1514);
        assert_eq!(tb.earliest_departure(u64::MAX, 1514), u64::MAX);
        assert_eq!(tb.earliest_departure(0, 1514), 122); // 121.12 ns rounded up

        // Largest rate and burst.
        let mut tb = TokenBucket::new(u64::MAX, u64::MAX).unwrap();
        tb.consume(0, u64::MAX);
        assert_eq!(tb.earliest_departure(0, u64::MAX), 8_000_000_000);
        assert_eq!(tb.earliest_departure(u64::MAX, u64::MAX), u64::MAX);

        // 1 kbit/s: 1514 bytes take 12.112 s; huge waits saturate.
        let mut tb = TokenBucket::new(1_000, 1514).unwrap();
        tb.consume(0, 1514);
        assert_eq!(tb.earliest_departure(0, 1514), 12_112_000_000);
        let mut tb = TokenBucket::new(1, u64::MAX).unwrap();
        tb.consume(0, u64::MAX);
        assert_eq!(tb.earliest_departure(0, 1), 8 * SEC);
        assert_eq!(tb.earliest_departure(0, u64::MAX), u64::MAX);
    }
}
