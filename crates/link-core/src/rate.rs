//! The rate serialiser: an exact model of a link of fixed bit rate.
//!
//! A packet starts transmission at `max(arrival, instant the link became
//! free)` and finishes `(len + overhead) * 8 / rate` seconds later; the link
//! is then free. Unlike a token bucket there is no burst: back-to-back
//! packets leave exactly one transmission time apart, as on a real wire.
//!
//! # Exact arithmetic
//!
//! Instants on the link are kept as `ns + num / rate` with `0 <= num <
//! rate`: a transmission of `b` bits lasts `b * 10^9 / rate` ns, and the
//! fractional part is carried exactly in `num` (`u128` arithmetic) instead
//! of being rounded away, so a backlogged link never drifts, however long
//! the run. The instants reported (start and finish) are rounded *up* to
//! whole nanoseconds: each is the exact instant delayed by less than 1 ns,
//! and the error never accumulates.
//!
//! # Rate changes
//!
//! A packet already on the wire keeps its finish time. The next packet is
//! timed at the new rate from that finish; its fractional nanosecond is
//! converted to the new rate's denominator, rounding up (an error below
//! 1/rate ns, once per change).
//!
//! # Unlimited rate
//!
//! With no rate, transmissions take no time: a packet starts and finishes
//! at `max(arrival, free)` (normally its arrival; the free instant matters
//! only while a packet sent before a switch to unlimited is still on the
//! wire).

/// Nanoseconds per second.
const NS_PER_S: u128 = 1_000_000_000;

/// An exact instant: `ns + num / den` ns, `num < den` (or `num == 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Instant {
    ns: u64,
    num: u128,
    den: u64,
}

impl Instant {
    fn whole(ns: u64) -> Self {
        Self { ns, num: 0, den: 1 }
    }

    /// Rounded up to a whole nanosecond.
    fn ceil(self) -> u64 {
        self.ns.saturating_add(u64::from(self.num > 0))
    }
}

/// When the link is free, and the arithmetic to time transmissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RateLink {
    free: Instant,
}

impl RateLink {
    /// A link free since time 0.
    pub fn new() -> Self {
        Self {
            free: Instant::whole(0),
        }
    }

    /// A link free from `now` (any transmission in progress abandoned).
    pub fn idle_at(now: u64) -> Self {
        Self {
            free: Instant::whole(now),
        }
    }

    /// Abandon the transmission in progress, if any, at `now`.
    pub fn abort(&mut self, now: u64) {
        if self.free.ceil() > now {
            self.free = Instant::whole(now);
        }
    }

    /// Exact start of a packet arriving at `arrival_ns`.
    fn start(&self, arrival_ns: u64) -> Instant {
        if arrival_ns >= self.free.ceil() {
            Instant::whole(arrival_ns)
        } else {
            self.free
        }
    }

    /// When a packet arriving at `arrival_ns` starts transmission, rounded
    /// up to the nanosecond.
    pub fn start_ns(&self, arrival_ns: u64) -> u64 {
        self.start(arrival_ns).ceil()
    }

    /// Transmit a packet of `bytes` (overhead included) arriving at
    /// `arrival_ns` at `rate_bps` (`None`: unlimited). Returns its start and
    /// finish, rounded up to the nanosecond; the link is busy until the
    /// exact finish.
    pub fn transmit(&mut self, arrival_ns: u64, bytes: u64, rate_bps: Option<u64>) -> (u64, u64) {
        let start = self.start(arrival_ns);
        let finish = match rate_bps {
            None => start,
            Some(rate) => {
                // Start's fraction in units of 1/rate ns, rounded up.
                let num = if start.num == 0 || start.den == rate {
                    start.num
                } else {
                    (start.num * u128::from(rate)).div_ceil(u128::from(start.den))
                };
                let total = num + u128::from(bytes) * 8 * NS_PER_S;
                let whole = total / u128::from(rate);
                let ns = u64::try_from(whole)
                    .ok()
                    .and_then(|w| start.ns.checked_add(w));
                match ns {
                    Some(ns) => Instant {
                        ns,
                        num: total % u128::from(rate),
                        den: rate,
                    },
                    None => Instant::whole(u64::MAX),
                }
            }
        };
        self.free = finish;
        (start.ceil(), finish.ceil())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBIT: u64 = 1_000_000;
    const GBIT: u64 = 1_000_000_000;

    #[test]
    fn single_packet_times() {
        let mut l = RateLink::new();
        // 1000 bytes at 8 Mbit/s: 1 ms.
        assert_eq!(l.transmit(5, 1000, Some(8 * MBIT)), (5, 1_000_005));
        // Arrives while busy: starts at the finish.
        assert_eq!(l.start_ns(10), 1_000_005);
        assert_eq!(l.transmit(10, 1000, Some(8 * MBIT)), (1_000_005, 2_000_005));
        // Arrives after idle: starts at its arrival.
        assert_eq!(
            l.transmit(3_000_000, 1, Some(8 * MBIT)),
            (3_000_000, 3_001_000)
        );
        // 3 bytes at 7 bit/s: 24/7 s, rounded up.
        let mut l = RateLink::new();
        assert_eq!(l.transmit(0, 3, Some(7)), (0, 3_428_571_429));
    }

    #[test]
    fn unlimited_takes_no_time() {
        let mut l = RateLink::new();
        assert_eq!(l.transmit(100, 1500, None), (100, 100));
        assert_eq!(l.transmit(100, 1500, None), (100, 100));
        // A packet still on the wire from before delays the next one.
        l.transmit(200, 1000, Some(8 * MBIT));
        assert_eq!(l.transmit(300, 1500, None), (1_000_200, 1_000_200));
    }

    #[test]
    fn exact_over_a_million_packets() {
        // 1514 bytes at 100 Gbit/s: 121.12 ns each, back to back. Finish k
        // is exactly ceil(121.12 * k): no drift after 10^6 packets.
        let mut l = RateLink::new();
        for k in 1..=1_000_000u64 {
            let (start, finish) = l.transmit(0, 1514, Some(100 * GBIT));
            assert_eq!(finish, (12_112 * k).div_ceil(100), "packet {k}");
            assert_eq!(start, (12_112 * (k - 1)).div_ceil(100));
        }
        // An odd rate and odd sizes: finish = ceil(sum(bits) * 1e9 / rate).
        let mut l = RateLink::new();
        let rate = 999_999_937;
        let mut bits: u128 = 0;
        for k in 0..1_000_000u64 {
            let len = 64 + (k * 7919) % 1451;
            bits += u128::from(len) * 8;
            let (_, finish) = l.transmit(0, len, Some(rate));
            let exact = (bits * NS_PER_S).div_ceil(u128::from(rate));
            assert_eq!(u128::from(finish), exact, "packet {k}");
        }
    }

    #[test]
    fn rate_change_keeps_the_finish_in_progress() {
        let mut l = RateLink::new();
        // 1 byte at 3 bit/s: 8/3 s = 2_666_666_666.67 ns.
        assert_eq!(l.transmit(0, 1, Some(3)), (0, 2_666_666_667));
        // Next at 8 Mbit/s from the exact finish: fraction 2/3 ns converted
        // to 1/8e6 units, rounded up, then 1000 bytes = 1 ms.
        assert_eq!(
            l.transmit(0, 1000, Some(8 * MBIT)),
            (2_666_666_667, 2_667_666_667)
        );
    }

    #[test]
    fn abort_frees_the_link() {
        let mut l = RateLink::new();
        l.transmit(0, 1_000_000, Some(8 * MBIT)); // busy for 1 s
        l.abort(500);
        assert_eq!(l.start_ns(500), 500);
        l.abort(0); // no-op when already free
        assert_eq!(l.start_ns(500), 500);
        assert_eq!(RateLink::idle_at(7).start_ns(3), 7);
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        let mut l = RateLink::new();
        assert_eq!(l.transmit(u64::MAX - 1, u64::MAX, Some(1)).1, u64::MAX);
        assert_eq!(l.start_ns(0), u64::MAX);
        let mut l = RateLink::new();
        assert_eq!(
            l.transmit(u64::MAX, 1, Some(u64::MAX)),
            (u64::MAX, u64::MAX)
        );
    }
}
