//! When the loop sleeps, when it spins, and what that cost: the release
//! policy of the engine and the loop's own measurements.
//!
//! A departure is due at an absolute `CLOCK_MONOTONIC` instant. Sleeping on
//! a timer until that instant makes the departure late by the timer's wake
//! latency (interrupt, wake-up, context switch: tens of µs on a virtual
//! machine). So the loop arms its timer a *lead* ahead of the deadline and
//! spends the lead polling (epoll with a zero timeout, so arrivals are still
//! read), then releases the departure on time.
//!
//! - The lead follows the measured wake latency: the 90th percentile of the
//!   last [`RECENT`] timer wake-ups, plus [`LEAD_MARGIN_NS`], never more than
//!   `--spin-us`.
//! - Spinning is budgeted: at most `--spin-budget` percent of every
//!   [`WINDOW_NS`] window. Past the budget the loop sleeps until the window
//!   ends, so a saturated engine never holds its core (it shares it with the
//!   forwarding softirqs and, at real-time priority, would starve them).
//!
//! Everything is reported by `stats` under `"engine"` (see
//! [`Timing::report`]): the loop's turns, its busy and spinning time, the
//! timer's wake latency and the lead in use. A departure's lateness is its
//! wake latency (minus the lead) plus the work done ahead of it in the same
//! turn; the two are told apart there.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Timer wake-ups the lead is estimated from.
pub const RECENT: usize = 64;
/// Added to the estimated wake latency so that most wake-ups land before the
/// deadline rather than on it.
pub const LEAD_MARGIN_NS: u64 = 3_000;
/// Length of a spin-budget window.
pub const WINDOW_NS: u64 = 10_000_000;

/// What the loop does next, decided by [`Timing::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// A deadline is due: poll without blocking.
    Due,
    /// Spin: poll without blocking, the deadline is within the lead.
    Spin,
    /// Sleep with the timer armed at this instant (a deadline minus the lead).
    Sleep(u64),
    /// Nothing pending: sleep until something arrives.
    Idle,
}

/// The release policy and the loop's measurements.
#[derive(Debug)]
pub struct Timing {
    max_lead_ns: u64,
    budget_ns: u64,
    recent: [u64; RECENT],
    recent_len: usize,
    recent_next: usize,
    lead_ns: u64,
    window_start: u64,
    window_spun: u64,
    started_ns: u64,
    turns: u64,
    timer_wakeups: u64,
    /// ns from the timer's expiry to the loop running again.
    wake_late: Histogram<u64>,
    spin_ns: u64,
    busy_ns: u64,
    over_budget: u64,
}

impl Timing {
    /// `max_lead_ns`: the longest spin before a deadline (0: never spin);
    /// `budget_pct`: the share of each window spinning may take (0..=100).
    pub fn new(now: u64, max_lead_ns: u64, budget_pct: u8) -> Self {
        Self {
            max_lead_ns,
            budget_ns: WINDOW_NS * u64::from(budget_pct.min(100)) / 100,
            recent: [0; RECENT],
            recent_len: 0,
            recent_next: 0,
            // Until measured, the whole allowance.
            lead_ns: max_lead_ns,
            window_start: now,
            window_spun: 0,
            started_ns: now,
            turns: 0,
            timer_wakeups: 0,
            wake_late: Histogram::new_with_bounds(1, 10_000_000_000, 2)
                .expect("static histogram bounds are valid"),
            spin_ns: 0,
            busy_ns: 0,
            over_budget: 0,
        }
    }

    /// The lead in force, ns.
    #[cfg(test)]
    pub fn lead_ns(&self) -> u64 {
        self.lead_ns
    }

    /// Decide how to wait at `now` for `deadline` (the earliest pending one).
    pub fn plan(&mut self, now: u64, deadline: Option<u64>) -> Plan {
        let Some(deadline) = deadline else {
            return Plan::Idle;
        };
        if deadline <= now {
            return Plan::Due;
        }
        if self.lead_ns > 0 && deadline - now <= self.lead_ns {
            if self.may_spin(now) {
                return Plan::Spin;
            }
            // Over budget: sleep to the deadline itself.
            return Plan::Sleep(deadline);
        }
        Plan::Sleep(deadline - self.lead_ns)
    }

    fn may_spin(&mut self, now: u64) -> bool {
        if now.saturating_sub(self.window_start) >= WINDOW_NS {
            self.window_start = now;
            self.window_spun = 0;
        }
        if self.window_spun < self.budget_ns {
            true
        } else {
            self.over_budget += 1;
            false
        }
    }

    /// A turn ran from `start` to `end`; `spun` when it was a spin (its time
    /// counts against the budget), `waited_ns` the part spent blocked.
    pub fn turn(&mut self, start: u64, end: u64, spun: bool, waited_ns: u64) {
        self.turns += 1;
        let took = end.saturating_sub(start);
        if spun {
            self.spin_ns += took;
            self.window_spun += took;
        } else {
            self.busy_ns += took.saturating_sub(waited_ns);
        }
    }

    /// The timer armed for `armed_at` woke the loop at `now`.
    pub fn timer_woke(&mut self, armed_at: u64, now: u64) {
        let late = now.saturating_sub(armed_at);
        self.timer_wakeups += 1;
        let _ = self.wake_late.record(late.max(1));
        self.recent[self.recent_next] = late;
        self.recent_next = (self.recent_next + 1) % RECENT;
        self.recent_len = (self.recent_len + 1).min(RECENT);
        if self.recent_len >= RECENT / 4 {
            self.lead_ns =
                (p90(&self.recent[..self.recent_len]) + LEAD_MARGIN_NS).min(self.max_lead_ns);
        }
    }

    /// The `"engine"` object of a `stats` reply.
    /// Nanoseconds spent spinning so far.
    pub fn spin_ns(&self) -> u64 {
        self.spin_ns
    }

    pub fn report(&self, now: u64) -> Value {
        let q = |p: f64| self.wake_late.value_at_quantile(p);
        let pct = |ns: u64| {
            let up = now.saturating_sub(self.started_ns).max(1);
            100.0 * ns as f64 / up as f64
        };
        json!({
            "uptime_ns": now.saturating_sub(self.started_ns),
            "turns": self.turns,
            "busy_ns": self.busy_ns,
            "busy_pct": pct(self.busy_ns),
            "spin_ns": self.spin_ns,
            "spin_pct": pct(self.spin_ns),
            "spin_over_budget": self.over_budget,
            "lead_ns": self.lead_ns,
            "max_lead_ns": self.max_lead_ns,
            "spin_budget_pct": self.budget_ns * 100 / WINDOW_NS,
            "timer_wakeups": self.timer_wakeups,
            "wake_late": {
                "count": self.wake_late.len(),
                "p50_ns": q(0.5),
                "p90_ns": q(0.9),
                "p99_ns": q(0.99),
                "p999_ns": q(0.999),
                "max_ns": self.wake_late.max(),
            },
            // The whole histogram, so that a reader can take the difference
            // of two reports: the wake-ups of a window alone.
            "wake_late_hdr": link_core::stats::encode_hdr(&self.wake_late),
        })
    }
}

/// The 90th percentile of `xs` (nearest rank).
fn p90(xs: &[u64]) -> u64 {
    let mut v = xs.to_vec();
    v.sort_unstable();
    let rank = (v.len() * 9).div_ceil(10).max(1);
    v[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn sleeps_a_lead_ahead_and_spins_inside_it() {
        let mut t = Timing::new(0, 50 * US, 20);
        assert_eq!(t.plan(0, None), Plan::Idle);
        assert_eq!(t.plan(100, Some(100)), Plan::Due);
        assert_eq!(t.plan(0, Some(1_000 * US)), Plan::Sleep(950 * US));
        assert_eq!(t.plan(960 * US, Some(1_000 * US)), Plan::Spin);
    }

    #[test]
    fn lead_follows_the_wake_latency_and_its_cap() {
        let mut t = Timing::new(0, 50 * US, 20);
        for i in 0..RECENT as u64 {
            t.timer_woke(1_000 * i, 1_000 * i + 10 * US);
        }
        assert_eq!(t.lead_ns(), 10 * US + LEAD_MARGIN_NS);
        for i in 0..RECENT as u64 {
            t.timer_woke(1_000 * i, 1_000 * i + 500 * US);
        }
        assert_eq!(t.lead_ns(), 50 * US);
        // Spinning off: no lead, whatever the latency.
        let mut off = Timing::new(0, 0, 20);
        for i in 0..RECENT as u64 {
            off.timer_woke(0, 10 * US + i);
        }
        assert_eq!(off.lead_ns(), 0);
        assert_eq!(off.plan(0, Some(5 * US)), Plan::Sleep(5 * US));
    }

    #[test]
    fn spinning_stops_at_the_budget_until_the_window_ends() {
        let mut t = Timing::new(0, 50 * US, 10); // 1 ms of every 10 ms
        let mut now = 0;
        let mut spun = 0;
        while now < WINDOW_NS - 100 * US {
            match t.plan(now, Some(now + 10 * US)) {
                Plan::Spin => {
                    t.turn(now, now + 10 * US, true, 0);
                    spun += 10 * US;
                }
                Plan::Sleep(at) => assert_eq!(at, now + 10 * US),
                other => panic!("{other:?}"),
            }
            now += 10 * US;
        }
        assert_eq!(spun, WINDOW_NS / 10);
        assert!(t.report(now)["spin_over_budget"].as_u64().unwrap() > 0);
        // A new window: spinning again.
        assert_eq!(t.plan(WINDOW_NS + 1, Some(WINDOW_NS + 10 * US)), Plan::Spin);
    }

    #[test]
    fn report_has_the_wake_latency() {
        let mut t = Timing::new(0, 0, 0);
        t.timer_woke(100, 100 + 30 * US);
        let r = t.report(1_000_000);
        assert_eq!(r["timer_wakeups"], 1);
        let p50 = r["wake_late"]["p50_ns"].as_u64().unwrap();
        assert!((29 * US..=31 * US).contains(&p50), "{p50}");
        assert!(
            r["wake_late_hdr"].as_str().is_some_and(|s| s.len() > 10),
            "{r}"
        );
    }
}
