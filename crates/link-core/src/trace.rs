//! The trace serialiser: Mahimahi delivery opportunities.
//!
//! A Mahimahi trace lists instants, in milliseconds, at which the link may
//! deliver 1500 bytes; an instant listed `n` times is `n` opportunities.
//! The trace repeats with a period equal to its last entry: opportunity `i`
//! of cycle `k` is at `epoch + k * period + trace[i]` (so with a trace
//! `[0, ..., P]` the instant `epoch + k * P` carries both cycle `k - 1`'s
//! last opportunity and cycle `k`'s first, as in Mahimahi).
//!
//! # Epoch
//!
//! The trace clock starts (`epoch`) when the first packet reaches the queue
//! after the trace is configured (packets lost or arriving while the link is
//! down do not count): that packet finds the trace at offset 0.
//! [`Direction::new`](crate::Direction::new) takes no time, so this is the
//! only instant the model can anchor a trace to; it also makes results
//! independent of how long the emulated network idled before sending.
//! When a trace replaces another or a rate through
//! [`Direction::set_params`](crate::Direction::set_params) while packets
//! are waiting, the epoch is that call's `now`.
//!
//! # Delivery
//!
//! Each opportunity delivers whole packets from the head of the queue while
//! they fit in its 1500 bytes (packet length plus the configured overhead),
//! and always at least one packet, even one larger than 1500 bytes; unused
//! bytes are lost. Mahimahi instead lets a large packet consume several
//! opportunities; with packets of at most 1500 bytes and no overhead the
//! two agree. Opportunities that find the queue empty are wasted.
//!
//! The next opportunity is found arithmetically (a division and a binary
//! search), so a long idle period costs nothing.

use crate::params::NS_PER_MS;

/// Bytes one delivery opportunity may carry.
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// A position in the trace: opportunity `index` of cycle `cycle`.
/// Lexicographic order is time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    cycle: u64,
    index: usize,
}

/// A looping trace and the next unused opportunity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceLink {
    /// Entries in nanoseconds, non-decreasing, last > 0.
    entries: Vec<u64>,
    /// Epoch, once started.
    epoch: Option<u64>,
    /// The first opportunity not yet used or skipped.
    next: Position,
}

impl TraceLink {
    /// A trace from validated millisecond entries; `epoch` if already
    /// known, otherwise the first packet's arrival.
    pub fn new(trace_ms: &[u64], epoch: Option<u64>) -> Self {
        let entries = trace_ms.iter().map(|&ms| ms * NS_PER_MS).collect();
        Self {
            entries,
            epoch,
            next: Position { cycle: 0, index: 0 },
        }
    }

    fn period(&self) -> u64 {
        *self.entries.last().expect("validated trace is not empty")
    }

    fn time(&self, epoch: u64, pos: Position) -> u64 {
        epoch
            .saturating_add(pos.cycle.saturating_mul(self.period()))
            .saturating_add(self.entries[pos.index])
    }

    /// The first opportunity at or after `t`, given the epoch, not counting
    /// the opportunities already used.
    fn position_at_or_after(&self, epoch: u64, t: u64) -> Position {
        let period = self.period();
        let rel = t.saturating_sub(epoch);
        let (cycle, offset) = (rel / period, rel % period);
        // The last entry equals the period and `offset < period`, so an
        // entry at or after `offset` exists in this cycle.
        let mut pos = Position {
            cycle,
            index: self.entries.partition_point(|&e| e < offset),
        };
        if offset == 0 && cycle > 0 {
            // The previous cycle's entries equal to the period fall at `t`.
            pos = Position {
                cycle: cycle - 1,
                index: self.entries.partition_point(|&e| e < period),
            };
        }
        pos.max(self.next)
    }

    /// When the next opportunity usable by a packet that arrived at
    /// `arrival_ns` occurs (the epoch being `arrival_ns` if not started).
    pub fn next_opportunity(&self, arrival_ns: u64) -> u64 {
        let epoch = self.epoch.unwrap_or(arrival_ns);
        self.time(epoch, self.position_at_or_after(epoch, arrival_ns))
    }

    /// Use the opportunity returned by `next_opportunity(arrival_ns)`:
    /// starts the clock if needed and moves past it.
    pub fn consume(&mut self, arrival_ns: u64) -> u64 {
        let epoch = *self.epoch.get_or_insert(arrival_ns);
        let pos = self.position_at_or_after(epoch, arrival_ns);
        let at = self.time(epoch, pos);
        self.next = if pos.index + 1 < self.entries.len() {
            Position {
                cycle: pos.cycle,
                index: pos.index + 1,
            }
        } else {
            Position {
                cycle: pos.cycle.saturating_add(1),
                index: 0,
            }
        };
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NS_PER_MS;

    /// Times of the opportunities used by a backlogged queue (head arrived
    /// at `t0`), `n` of them.
    fn backlogged(trace: &[u64], t0: u64, n: usize) -> Vec<u64> {
        let mut t = TraceLink::new(trace, None);
        (0..n)
            .map(|_| {
                let at = t.next_opportunity(t0);
                assert_eq!(t.consume(t0), at);
                at
            })
            .collect()
    }

    #[test]
    fn loops_with_the_period() {
        let got = backlogged(&[1, 1, 3, 5], 0, 9);
        let want = [1, 1, 3, 5, 6, 6, 8, 10, 11].map(|ms| ms * MS);
        assert_eq!(got, want);
    }

    #[test]
    fn entries_at_zero_and_at_the_period_coincide() {
        // [0, 2]: cycle 0 has 0 and 2 ms, cycle 1 has 2 and 4 ms, ...
        let got = backlogged(&[0, 2], 0, 5);
        assert_eq!(got, [0, 2, 2, 4, 4].map(|ms| ms * MS));
    }

    #[test]
    fn epoch_is_the_first_arrival() {
        let got = backlogged(&[1, 3], 1_000_000_007, 3);
        assert_eq!(got, [1_001_000_007, 1_003_000_007, 1_004_000_007]);
    }

    #[test]
    fn idle_periods_skip_opportunities() {
        let mut t = TraceLink::new(&[10, 20], None);
        assert_eq!(t.consume(0), 10 * MS);
        // Next packet arrives at 45 ms: 20, 30 and 40 ms were wasted; the
        // next is 50 ms (cycle 2, entry 10).
        assert_eq!(t.next_opportunity(45 * MS), 50 * MS);
        assert_eq!(t.consume(45 * MS), 50 * MS);
        // An arrival exactly on an opportunity can use it.
        assert_eq!(t.consume(60 * MS), 60 * MS);
        // A packet that arrived earlier still cannot reuse a spent one.
        assert_eq!(t.consume(0), 70 * MS);
        // Far in the future, no iteration over the gap.
        assert_eq!(t.consume(3_600_000 * MS + 1), 3_600_010 * MS);
    }

    #[test]
    fn arrival_on_a_period_boundary() {
        let mut t = TraceLink::new(&[0, 5, 10], Some(0));
        assert_eq!(t.consume(0), 0);
        assert_eq!(t.consume(0), 5 * MS);
        // At 10 ms both cycle 0's last (10) and cycle 1's first (0) entries.
        assert_eq!(t.consume(10 * MS), 10 * MS);
        assert_eq!(t.consume(10 * MS), 10 * MS);
        assert_eq!(t.consume(10 * MS), 15 * MS);
        // Skipping to the boundary at 30 ms: cycle 2's last entry.
        let mut t = TraceLink::new(&[0, 5, 10], Some(0));
        assert_eq!(t.consume(30 * MS), 30 * MS);
        assert_eq!(t.consume(30 * MS), 30 * MS);
        assert_eq!(t.consume(30 * MS), 35 * MS);
    }

    #[test]
    fn single_entry_trace() {
        assert_eq!(backlogged(&[7], 0, 3), [7, 14, 21].map(|ms| ms * MS));
    }

    #[test]
    fn saturates_far_in_the_future() {
        let mut t = TraceLink::new(&[1_000], Some(u64::MAX - 10));
        assert_eq!(t.consume(u64::MAX), u64::MAX);
    }
}
