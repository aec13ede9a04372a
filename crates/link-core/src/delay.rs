//! The delay line: propagation delay, jitter and (optional) reordering.
//!
//! A packet that finishes transmission at `finish` is scheduled to depart
//! at `finish + delay + jitter`, where the jitter sample is
//!
//! * uniform: an integer uniformly distributed in `[-j, +j]` ns;
//! * normal: a normal variate with standard deviation `j`, rounded to the
//!   nanosecond (unbounded, like netem's normal table, but see below);
//!
//! and the result is clipped so that a packet never departs before it
//! finished transmission (jitter larger than the delay piles up at
//! `finish`, so its distribution is no longer symmetric).
//!
//! # Order
//!
//! With `reorder = false` (the default), a packet also never departs before
//! the packet ahead of it: departure = `max(sample, previous departure)`.
//! This keeps packet order, as a real path with varying delay usually does,
//! but it *skews* the delay distribution whenever packets are spaced more
//! closely than the jitter: a packet that drew a short delay waits for its
//! predecessor, so delays are biased upwards and their spread shrinks. For
//! sparse packets (spacing well above `2j`) the configured distribution is
//! reproduced exactly.
//!
//! With `reorder = true`, each packet keeps its own sample and the line is
//! a min-heap by departure, ties broken by the order packets entered it, so
//! packets overtake each other whenever their samples say so.
//!
//! Both modes share the heap; with `reorder = false` departures are
//! non-decreasing in entry order, so the heap pops them in entry order.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::params::JitterDist;
use crate::rng::Rng;

/// How the line delays a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DelaySpec {
    /// Constant delay, ns.
    pub delay_ns: u64,
    /// Jitter half-width (uniform) or standard deviation (normal), ns.
    pub jitter_ns: u64,
    /// Jitter distribution.
    pub dist: JitterDist,
    /// Whether packets may overtake each other.
    pub reorder: bool,
}

/// A packet in the line.
#[derive(Debug, Clone)]
struct Entry<T> {
    departure: u64,
    seq: u64,
    data: T,
}

impl<T> Entry<T> {
    fn key(&self) -> (u64, u64) {
        (self.departure, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// Packets (of type `T`) between the end of their transmission and their
/// departure.
#[derive(Debug, Clone)]
pub(crate) struct DelayLine<T> {
    heap: BinaryHeap<Reverse<Entry<T>>>,
    /// Latest departure scheduled so far.
    last_departure: u64,
    /// Entry counter, for stable ties.
    seq: u64,
    rng: Rng,
}

impl<T> DelayLine<T> {
    /// An empty line; `rng` draws the jitter.
    pub fn new(rng: Rng) -> Self {
        Self {
            heap: BinaryHeap::new(),
            last_departure: 0,
            seq: 0,
            rng,
        }
    }

    /// Replace the random stream (the seed changed).
    pub fn set_rng(&mut self, rng: Rng) {
        self.rng = rng;
    }

    /// One jitter sample, ns (no draw when `jitter_ns` is 0).
    fn jitter(&mut self, spec: &DelaySpec) -> i128 {
        let j = spec.jitter_ns;
        if j == 0 {
            return 0;
        }
        match spec.dist {
            JitterDist::Uniform => {
                let j = j.min((u64::MAX - 1) / 2);
                i128::from(self.rng.below(2 * j + 1)) - i128::from(j)
            }
            // `as` saturates on overflow, and the clip below bounds it.
            JitterDist::Normal => (self.rng.normal() * j as f64).round() as i128,
        }
    }

    /// Schedule a packet that finished transmission at `finish_ns`. Returns
    /// its departure.
    pub fn insert(&mut self, finish_ns: u64, data: T, spec: &DelaySpec) -> u64 {
        let sample = i128::from(finish_ns) + i128::from(spec.delay_ns) + self.jitter(spec);
        let mut departure = u64::try_from(sample.max(i128::from(finish_ns))).unwrap_or(u64::MAX);
        if !spec.reorder {
            departure = departure.max(self.last_departure);
        }
        self.last_departure = self.last_departure.max(departure);
        self.heap.push(Reverse(Entry {
            departure,
            seq: self.seq,
            data,
        }));
        self.seq += 1;
        departure
    }

    /// The earliest departure, if any.
    pub fn next_departure(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(e)| e.departure)
    }

    /// The earliest packet if it departs at or before `now`, with its
    /// departure.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, T)> {
        if self.next_departure()? > now {
            return None;
        }
        let Reverse(e) = self.heap.pop()?;
        Some((e.departure, e.data))
    }

    /// Drop every packet departing after `now`; returns the sum of their
    /// `weight`s. Later packets are no longer held back by the dropped ones.
    pub fn drop_after(&mut self, now: u64, weight: impl Fn(&T) -> u64) -> u64 {
        let mut dropped = 0;
        self.heap.retain(|Reverse(e)| {
            let keep = e.departure <= now;
            if !keep {
                dropped += weight(&e.data);
            }
            keep
        });
        self.last_departure = self.last_departure.min(now);
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn spec(delay_ns: u64, jitter_ns: u64, dist: JitterDist, reorder: bool) -> DelaySpec {
        DelaySpec {
            delay_ns,
            jitter_ns,
            dist,
            reorder,
        }
    }

    fn drain(line: &mut DelayLine<Vec<u8>>) -> Vec<(u64, Vec<u8>)> {
        std::iter::from_fn(|| line.pop_due(u64::MAX)).collect()
    }

    /// Delays of `n` packets spaced `gap` apart.
    fn delays(s: DelaySpec, n: u64, gap: u64, seed: u64) -> Vec<i128> {
        let mut line: DelayLine<Vec<u8>> = DelayLine::new(Rng::from_seed(seed));
        (0..n)
            .map(|i| {
                let finish = 10 * s.jitter_ns + i * gap;
                i128::from(line.insert(finish, vec![], &s)) - i128::from(finish)
            })
            .collect()
    }

    #[test]
    fn constant_delay_is_exact() {
        let s = spec(20 * MS + 3, 0, JitterDist::Uniform, false);
        let mut line = DelayLine::new(Rng::from_seed(1));
        for i in 0..1000 {
            assert_eq!(line.insert(i * 7, vec![i as u8], &s), i * 7 + 20 * MS + 3);
        }
        assert_eq!(line.next_departure(), Some(20 * MS + 3));
        assert_eq!(line.pop_due(20 * MS + 2), None);
        assert_eq!(line.pop_due(20 * MS + 3), Some((20 * MS + 3, vec![0])));
        assert_eq!(drain(&mut line).len(), 999);
        assert_eq!(line.next_departure(), None);
    }

    fn quantile(v: &mut [i128], p: f64) -> f64 {
        v.sort_unstable();
        v[((v.len() - 1) as f64 * p).round() as usize] as f64
    }

    #[test]
    fn uniform_jitter_quantiles_for_sparse_packets() {
        let (d, j) = (50 * MS, 10 * MS);
        let mut v = delays(spec(d, j, JitterDist::Uniform, false), 100_000, 100 * MS, 3);
        // Uniform on [d - j, d + j]: quantile p at d - j + 2jp.
        for p in [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99] {
            let want = (d - j) as f64 + 2.0 * j as f64 * p;
            let got = quantile(&mut v, p);
            assert!(
                (got - want).abs() < 0.01 * j as f64,
                "p={p}: {got} vs {want}"
            );
        }
        assert!(v.iter().all(|&x| (d - j..=d + j).contains(&(x as u64))));
    }

    #[test]
    fn normal_jitter_quantiles_for_sparse_packets() {
        let (d, j) = (100 * MS, 5 * MS);
        let mut v = delays(spec(d, j, JitterDist::Normal, false), 100_000, 100 * MS, 4);
        // Standard normal quantiles.
        for (p, z) in [
            (0.025, -1.959_964),
            (0.1587, -1.0),
            (0.5, 0.0),
            (0.8413, 1.0),
            (0.975, 1.959_964),
        ] {
            let want = d as f64 + z * j as f64;
            let got = quantile(&mut v, p);
            assert!(
                (got - want).abs() < 0.03 * j as f64,
                "p={p}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn jitter_is_clipped_at_the_finish() {
        // Jitter without delay: half the samples would be negative.
        let v = delays(spec(0, MS, JitterDist::Uniform, true), 10_000, 0, 5);
        assert!(v.iter().all(|&x| x >= 0));
        let zeros = v.iter().filter(|&&x| x == 0).count();
        assert!((4_800..5_200).contains(&zeros), "{zeros}");
    }

    #[test]
    fn order_kept_without_reorder_and_broken_with_it() {
        let run = |reorder| {
            let s = spec(10 * MS, 5 * MS, JitterDist::Uniform, reorder);
            let mut line = DelayLine::new(Rng::from_seed(6));
            for i in 0..10_000u32 {
                line.insert(u64::from(i) * 100_000, i.to_be_bytes().to_vec(), &s);
            }
            let out = drain(&mut line);
            assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "departure order");
            out.iter()
                .map(|(_, d)| u32::from_be_bytes(d[..].try_into().unwrap()))
                .collect::<Vec<_>>()
        };
        let kept = run(false);
        assert!(kept.windows(2).all(|w| w[0] < w[1]));
        let reordered = run(true);
        let inversions = reordered.windows(2).filter(|w| w[0] > w[1]).count();
        assert!(inversions > 1000, "{inversions}");
    }

    #[test]
    fn ties_leave_in_entry_order() {
        let s = spec(MS, 0, JitterDist::Uniform, true);
        let mut line = DelayLine::new(Rng::from_seed(7));
        for i in 0..100u8 {
            line.insert(0, vec![i], &s);
        }
        let out: Vec<u8> = drain(&mut line).into_iter().map(|(_, d)| d[0]).collect();
        assert_eq!(out, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn drop_after_keeps_due_packets() {
        let s = spec(10, 0, JitterDist::Uniform, false);
        let mut line = DelayLine::new(Rng::from_seed(8));
        for i in 0..10 {
            line.insert(i, vec![], &s);
        }
        assert_eq!(line.drop_after(14, |_| 1), 5);
        assert_eq!(drain(&mut line).len(), 5);
    }

    #[test]
    fn extremes_saturate() {
        let mut line: DelayLine<Vec<u8>> = DelayLine::new(Rng::from_seed(9));
        let s = spec(u64::MAX, u64::MAX, JitterDist::Uniform, true);
        assert!(line.insert(u64::MAX, vec![], &s) == u64::MAX);
        let s = spec(u64::MAX, u64::MAX, JitterDist::Normal, true);
        line.insert(5, vec![], &s);
    }
}
