//! Departure times: when packet k should leave, in ns after the start.
//!
//! Every departure is computed from the start, never from the previous
//! send, so a late send does not shift the ones after it:
//!
//! * **cbr**: packet k at `round(k * 1e9 / rate)`.
//! * **burst**: bursts of N back-to-back packets; burst b (packets
//!   `b*N .. b*N+N`) all at `round(b * N * 1e9 / rate)`, so the average
//!   rate is `rate`.
//! * **poisson**: exponential gaps with mean `1e9 / rate`, drawn from
//!   fidelnet's seeded xoshiro256++ ([`link_core::rng::Rng`]), summed in
//!   `f64` (exact to the ns for 100 days of run time): the same seed gives
//!   the same departures.

use link_core::rng::Rng;

/// How departures are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Constant bit rate: evenly spaced.
    Cbr,
    /// Groups of back-to-back packets.
    Burst,
    /// Exponential inter-departure times.
    Poisson,
}

impl Pattern {
    /// The name used on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cbr => "cbr",
            Self::Burst => "burst",
            Self::Poisson => "poisson",
        }
    }
}

/// A stream of departure times, in ns after the start, non-decreasing.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
    /// Index of the next departure.
    k: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Cbr {
        ns_per_packet: f64,
    },
    Burst {
        ns_per_packet: f64,
        size: u64,
    },
    Poisson {
        mean_gap_ns: f64,
        t: f64,
        rng: Box<Rng>,
    },
}

impl Schedule {
    /// A schedule of `rate` packets per second (finite, > 0). `burst` is the
    /// burst size (used by [`Pattern::Burst`], at least 1), `seed` seeds
    /// [`Pattern::Poisson`].
    pub fn new(pattern: Pattern, rate: f64, burst: u64, seed: u64) -> Schedule {
        assert!(rate.is_finite() && rate > 0.0, "rate must be > 0");
        let ns_per_packet = 1e9 / rate;
        let kind = match pattern {
            Pattern::Cbr => Kind::Cbr { ns_per_packet },
            Pattern::Burst => Kind::Burst {
                ns_per_packet,
                size: burst.max(1),
            },
            Pattern::Poisson => Kind::Poisson {
                mean_gap_ns: ns_per_packet,
                t: 0.0,
                rng: Box::new(Rng::from_seed(seed)),
            },
        };
        Schedule { kind, k: 0 }
    }

    /// The next departure, in ns after the start.
    #[inline]
    pub fn next_departure(&mut self) -> u64 {
        let k = self.k;
        self.k += 1;
        match &mut self.kind {
            Kind::Cbr { ns_per_packet } => (k as f64 * *ns_per_packet).round() as u64,
            Kind::Burst {
                ns_per_packet,
                size,
            } => ((k / *size * *size) as f64 * *ns_per_packet).round() as u64,
            Kind::Poisson {
                mean_gap_ns,
                t,
                rng,
            } => {
                // The first packet leaves at the start; gaps follow.
                if k > 0 {
                    // 1 - u is in (0, 1]: ln is finite.
                    *t += -(1.0 - rng.uniform()).ln() * *mean_gap_ns;
                }
                t.round() as u64
            }
        }
    }

    /// How many of the departures not yet returned are before `end`; the
    /// schedule is used up afterwards. Closed form for cbr and burst;
    /// poisson draws them (slow for absurd rates, e.g. 1e8 pps for hours).
    pub fn remaining_before(&mut self, end: u64) -> u64 {
        let at = |k: u64, ns: f64, size: u64| ((k / size * size) as f64 * ns).round() as u64;
        let (ns, size) = match &self.kind {
            Kind::Cbr { ns_per_packet } => (*ns_per_packet, 1),
            Kind::Burst {
                ns_per_packet,
                size,
            } => (*ns_per_packet, *size),
            Kind::Poisson { .. } => {
                let mut n = 0;
                while self.next_departure() < end {
                    n += 1;
                }
                return n;
            }
        };
        // The first index whose departure is at or after `end`, from an
        // estimate that rounding can be off by a little.
        let mut k = (end as f64 / ns) as u64;
        while k > 0 && at(k - 1, ns, size) >= end {
            k -= 1;
        }
        while at(k, ns, size) < end {
            k += 1;
        }
        let n = k.saturating_sub(self.k);
        self.k = self.k.max(k);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `round(k * 1e9 / rate)` for an integer rate, in exact arithmetic.
    fn exact(k: u64, rate: u64) -> u64 {
        let num = u128::from(k) * 1_000_000_000 * 2 + u128::from(rate);
        (num / (2 * u128::from(rate))) as u64
    }

    #[test]
    fn cbr_exact_over_a_million_packets() {
        for rate in [3u64, 7, 1_000_000, 1_234_567, 14_880_952] {
            let mut s = Schedule::new(Pattern::Cbr, rate as f64, 1, 0);
            for k in 0..1_000_000u64 {
                let d = s.next_departure();
                let want = exact(k, rate);
                // f64 rounding may move an exact .5 by one ns, never more.
                assert!(d.abs_diff(want) <= 1, "rate {rate} k {k}: {d} vs {want}");
            }
            // No drift: the millionth departure is where it belongs.
            assert!(s.next_departure().abs_diff(exact(1_000_000, rate)) <= 1);
        }
    }

    #[test]
    fn cbr_fractional_rate() {
        let mut s = Schedule::new(Pattern::Cbr, 2.5, 1, 0);
        let d: Vec<u64> = (0..4).map(|_| s.next_departure()).collect();
        assert_eq!(d, [0, 400_000_000, 800_000_000, 1_200_000_000]);
    }

    #[test]
    fn bursts_are_grouped_at_the_average_rate() {
        let (rate, n) = (1000.0, 10u64);
        let mut s = Schedule::new(Pattern::Burst, rate, n, 0);
        let d: Vec<u64> = (0..10_000).map(|_| s.next_departure()).collect();
        for (b, group) in d.chunks(n as usize).enumerate() {
            // All of a burst together, bursts 10 ms apart (10 packets at 1 kpps).
            assert!(
                group.iter().all(|&t| t == b as u64 * 10_000_000),
                "burst {b}: {group:?}"
            );
        }
        // 10 000 packets in 10 s: the next burst starts exactly at 10 s.
        assert_eq!(s.next_departure(), 10_000_000_000);
    }

    #[test]
    fn burst_of_one_is_cbr() {
        let mut a = Schedule::new(Pattern::Burst, 12345.0, 1, 0);
        let mut b = Schedule::new(Pattern::Cbr, 12345.0, 1, 0);
        for _ in 0..10_000 {
            assert_eq!(a.next_departure(), b.next_departure());
        }
    }

    #[test]
    fn remaining_matches_drawing() {
        for (pattern, rate, burst) in [
            (Pattern::Cbr, 3.0, 1),
            (Pattern::Cbr, 1e8, 1),
            (Pattern::Cbr, 1234.5, 1),
            (Pattern::Burst, 1000.0, 7),
            (Pattern::Poisson, 1e5, 1),
        ] {
            for (skip, end) in [(0u64, 10_000_000u64), (5, 2_000_000_000), (3, 0), (100, 1)] {
                let mut a = Schedule::new(pattern, rate, burst, 9);
                let mut b = a.clone();
                for _ in 0..skip {
                    a.next_departure();
                    b.next_departure();
                }
                let mut drawn = 0;
                while b.next_departure() < end {
                    drawn += 1;
                }
                assert_eq!(
                    a.remaining_before(end),
                    drawn,
                    "{pattern:?} {rate} skip {skip} end {end}"
                );
            }
        }
    }

    #[test]
    fn poisson_mean_and_determinism() {
        let rate = 100_000.0;
        let n = 1_000_000u64;
        let mut s = Schedule::new(Pattern::Poisson, rate, 1, 42);
        let mut last = 0;
        let mut gaps_sq = 0.0;
        for _ in 0..n {
            let d = s.next_departure();
            assert!(d >= last);
            gaps_sq += ((d - last) as f64).powi(2);
            last = d;
        }
        // Mean gap 10 us within 0.5% (the standard error is 0.1%).
        let mean = last as f64 / (n - 1) as f64;
        assert!((mean / 10_000.0 - 1.0).abs() < 0.005, "mean gap {mean}");
        // Exponential: E[gap^2] = 2 mean^2.
        let second = gaps_sq / (n - 1) as f64;
        assert!(
            (second / (2.0 * 1e8) - 1.0).abs() < 0.02,
            "E[gap^2] {second}"
        );

        let run = |seed| {
            let mut s = Schedule::new(Pattern::Poisson, rate, 1, seed);
            (0..1000).map(|_| s.next_departure()).collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
        assert_eq!(run(7)[0], 0);
    }
}
