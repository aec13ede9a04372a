//! Real-time priority with a guard: the event loop runs at SCHED_FIFO so that
//! a departure's timer wakes it ahead of ordinary processes, and leaves
//! SCHED_FIFO while it takes a large share of a core that other tasks are
//! waiting for, so that it never starves what shares its core.
//!
//! Why the guard: at SCHED_FIFO the loop runs whenever it wants to, until
//! the kernel's real-time throttling (`sched_rt_runtime_us`, 95 % of every
//! second) stops it. Everything else on its core waits: the receivers the
//! engine delivers to, and the softirq work deferred to ksoftirqd. On a
//! 2-core machine, 200 kpps of 64-byte frames through one link kept linkd
//! busy about 13 % and spinning about 20 % of the time, and that was enough:
//! 68-84k of 400k datagrams were lost in the receiver's socket buffer (linkd
//! had delivered every one). At normal priority the same trial lost none.
//!
//! So the guard watches two things per window of [`WINDOW_NS`]: the loop's
//! own share (the time it was not blocked in epoll, spinning included), and
//! the CPU pressure (`/proc/pressure/cpu`, "some": the share of the window in
//! which some runnable task waited for a CPU). A window is *contended* when
//! the loop took more than [`OWN_PCT`] while pressure was above
//! [`PRESSURE_PCT`], or more than [`SATURATED_PCT`] whatever the pressure
//! (the only test where the kernel has no PSI). The policy
//! ([`RtGuard::account`]):
//! - at SCHED_FIFO, [`BUSY_WINDOWS`] contended windows in a row demote the
//!   loop to SCHED_OTHER (one is not enough: a burst of control work, such as
//!   adding links, is not a saturation);
//! - demoted, [`calm windows`](RtGuard::calm_needed) in a row promote it back:
//!   a window is calm when the loop took less than [`CALM_OWN_PCT`], or less
//!   than [`OWN_PCT`] with pressure below [`CALM_PRESSURE_PCT`] (or no PSI).
//!   The calm needed starts at
//!   [`CALM_WINDOWS`] and doubles (up to [`MAX_CALM_WINDOWS`]) each time a
//!   promotion is followed by a demotion within [`FLAP_NS`], so a load near
//!   the threshold does not flap;
//! - every switch is counted and reported under `"engine"."realtime"` in
//!   `stats`, with the time spent demoted, so a run knows which policy its
//!   departures were released under.
//!
//! The guard is off when no real-time priority is in force (not asked, or
//! refused by the kernel).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use serde_json::{json, Value};

use crate::timing::WINDOW_NS;

/// The loop's own share of a window, percent, above which CPU pressure makes
/// the window contended.
pub const OWN_PCT: u64 = 25;
/// CPU pressure ("some") in a window, percent, above which a window in which
/// the loop took more than [`OWN_PCT`] is contended.
pub const PRESSURE_PCT: u64 = 10;
/// The loop's own share, percent, above which a window is contended whatever
/// the pressure.
pub const SATURATED_PCT: u64 = 50;
/// Contended windows in a row that demote.
pub const BUSY_WINDOWS: u32 = 3;
/// The loop's own share, percent, below which a window is calm.
pub const CALM_OWN_PCT: u64 = 10;
/// CPU pressure, percent, below which a window the loop took less than
/// [`OWN_PCT`] of is calm.
pub const CALM_PRESSURE_PCT: u64 = 5;
/// Calm windows in a row before the first return to SCHED_FIFO.
pub const CALM_WINDOWS: u32 = 10;
/// The longest the guard waits for calm: 1.28 s of calm windows.
pub const MAX_CALM_WINDOWS: u32 = 128;
/// A demotion this soon after a promotion doubles the calm needed.
pub const FLAP_NS: u64 = 1_000_000_000;

/// A change of scheduling policy the caller must make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// To SCHED_OTHER.
    Demote,
    /// Back to SCHED_FIFO at the priority asked.
    Promote,
}

/// The guard's state and counters.
#[derive(Debug)]
pub struct RtGuard {
    /// The SCHED_FIFO priority asked for (0: none asked).
    asked: u8,
    /// Whether the kernel granted it at start; the guard is off otherwise.
    granted: bool,
    demoted: bool,
    busy: u32,
    window_start: u64,
    window_busy: u64,
    /// CPU pressure ("some" total, µs) when the window started, if known.
    stall_start: Option<u64>,
    calm: u32,
    calm_needed: u32,
    demotions: u64,
    promotions: u64,
    demoted_since: u64,
    demoted_ns: u64,
    last_promotion: Option<u64>,
    errors: u64,
    last_error: String,
}

impl RtGuard {
    /// `asked`: the priority asked for (0: none); `granted`: whether the
    /// process runs at it now.
    pub fn new(now: u64, asked: u8, granted: bool) -> Self {
        Self {
            asked,
            granted: granted && asked > 0,
            demoted: false,
            busy: 0,
            window_start: now,
            window_busy: 0,
            stall_start: None,
            calm: 0,
            calm_needed: CALM_WINDOWS,
            demotions: 0,
            promotions: 0,
            demoted_since: 0,
            demoted_ns: 0,
            last_promotion: None,
            errors: 0,
            last_error: String::new(),
        }
    }

    /// The loop was busy `busy_ns` in a turn that ended at `now`; the switch
    /// to make, if any. `stall_us` reads the CPU pressure's cumulative "some"
    /// total (µs; None without PSI); it is called once per window. Call
    /// [`RtGuard::switched`] after making the switch.
    pub fn account(
        &mut self,
        now: u64,
        busy_ns: u64,
        stall_us: impl FnOnce() -> Option<u64>,
    ) -> Option<Switch> {
        if !self.granted {
            return None;
        }
        self.window_busy += busy_ns;
        let len = now.saturating_sub(self.window_start);
        if len < WINDOW_NS {
            return None;
        }
        let own = self.window_busy.min(len) * 100 / len;
        let stall = stall_us();
        let pressure = match (self.stall_start, stall) {
            (Some(a), Some(b)) => Some((b.saturating_sub(a) * 1000).min(len) * 100 / len),
            _ => None,
        };
        self.window_start = now;
        self.window_busy = 0;
        self.stall_start = stall;
        if !self.demoted {
            let contended = own > SATURATED_PCT
                || (own > OWN_PCT && pressure.is_some_and(|p| p > PRESSURE_PCT));
            self.busy = if contended { self.busy + 1 } else { 0 };
            return (self.busy >= BUSY_WINDOWS).then_some(Switch::Demote);
        }
        let calm =
            own < CALM_OWN_PCT || (own < OWN_PCT && pressure.is_none_or(|p| p < CALM_PRESSURE_PCT));
        if calm {
            // A turn that ends a long idle wait closes one long window: it
            // counts as the calm windows it spans.
            let spanned = u32::try_from(len / WINDOW_NS).unwrap_or(u32::MAX);
            self.calm = self.calm.saturating_add(spanned.max(1));
        } else {
            self.calm = 0;
        }
        (self.calm >= self.calm_needed).then_some(Switch::Promote)
    }

    /// The switch asked for at `now` was made (`Ok`) or refused (`Err`).
    pub fn switched(&mut self, now: u64, switch: Switch, result: io::Result<()>) {
        if let Err(e) = result {
            self.errors += 1;
            self.last_error = format!("{switch:?}: {e}");
            // A refused promotion: stay demoted and wait for calm again; a
            // refused demotion: try again after the next busy windows.
            self.calm = 0;
            self.busy = 0;
            return;
        }
        match switch {
            Switch::Demote => {
                self.demoted = true;
                self.busy = 0;
                self.demotions += 1;
                self.demoted_since = now;
                self.calm = 0;
                let flapped = self
                    .last_promotion
                    .is_some_and(|p| now.saturating_sub(p) < FLAP_NS);
                self.calm_needed = if flapped {
                    (self.calm_needed * 2).min(MAX_CALM_WINDOWS)
                } else {
                    CALM_WINDOWS
                };
            }
            Switch::Promote => {
                self.demoted = false;
                self.promotions += 1;
                self.demoted_ns += now.saturating_sub(self.demoted_since);
                self.last_promotion = Some(now);
                self.calm = 0;
            }
        }
    }

    /// The priority to return to.
    pub fn priority(&self) -> u8 {
        self.asked
    }

    /// Calm windows in a row needed now before a promotion.
    #[cfg(test)]
    pub fn calm_needed(&self) -> u32 {
        self.calm_needed
    }

    /// The `"realtime"` object of the `"engine"` stats.
    pub fn report(&self, now: u64) -> Value {
        let in_force = if self.granted && !self.demoted {
            format!("SCHED_FIFO {}", self.asked)
        } else {
            "SCHED_OTHER".to_owned()
        };
        let demoted_now = if self.demoted {
            now.saturating_sub(self.demoted_since)
        } else {
            0
        };
        json!({
            "asked": self.asked,
            "granted": self.granted,
            "guard": self.granted,
            "policy": in_force,
            "demoted": self.demoted,
            "demotions": self.demotions,
            "promotions": self.promotions,
            "demoted_ns": self.demoted_ns + demoted_now,
            "own_pct": OWN_PCT,
            "pressure_pct": PRESSURE_PCT,
            "saturated_pct": SATURATED_PCT,
            "calm_own_pct": CALM_OWN_PCT,
            "calm_pressure_pct": CALM_PRESSURE_PCT,
            "busy_windows_to_demote": BUSY_WINDOWS,
            "calm_windows_needed": self.calm_needed,
            "window_ns": WINDOW_NS,
            "errors": self.errors,
            "last_error": self.last_error,
        })
    }
}

/// Switch the calling process to SCHED_FIFO at `priority`, or back to
/// SCHED_OTHER for 0. Children do not inherit SCHED_FIFO
/// (SCHED_RESET_ON_FORK); the kernel's real-time throttling
/// (`sched_rt_runtime_us`) still leaves the other processes on its core a
/// share of every second.
pub fn set_policy(priority: u8) -> io::Result<()> {
    let (policy, prio) = if priority > 0 {
        (
            libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK,
            i32::from(priority),
        )
    } else {
        (libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK, 0)
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: sched_setscheduler reads one sched_param through a valid
    // pointer to a local and changes only this process's policy.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPU pressure file, kept open and read from its start once per window.
#[derive(Debug)]
pub struct Pressure(Option<File>);

impl Pressure {
    /// `/proc/pressure/cpu`, or nothing when the kernel has no PSI.
    pub fn open() -> Self {
        Self(File::open("/proc/pressure/cpu").ok())
    }

    /// The cumulative "some" stall, µs; None without PSI or on a read error.
    pub fn some_total_us(&mut self) -> Option<u64> {
        let file = self.0.as_ref()?;
        let mut buf = [0u8; 256];
        let n = file.read_at(&mut buf, 0).ok()?;
        parse_some_total(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

/// The `total=` of the `some` line of a PSI file.
fn parse_some_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Ten 1 ms turns per window, the loop busy `own` percent of each and
    /// the machine's CPU pressure at `pressure` percent (None: no PSI).
    struct Feed {
        t: u64,
        stall_us: u64,
    }

    impl Feed {
        fn new() -> Self {
            Self { t: 0, stall_us: 0 }
        }

        fn run(
            &mut self,
            g: &mut RtGuard,
            windows: u32,
            own: u64,
            pressure: Option<u64>,
        ) -> Vec<Switch> {
            let mut made = Vec::new();
            for _ in 0..windows {
                for _ in 0..10 {
                    self.t += MS;
                    if let Some(p) = pressure {
                        self.stall_us += 1_000 * p / 100;
                    }
                    let stall = pressure.map(|_| self.stall_us);
                    if let Some(s) = g.account(self.t, MS * own / 100, || stall) {
                        g.switched(self.t, s, Ok(()));
                        made.push(s);
                    }
                }
            }
            made
        }
    }

    #[test]
    fn off_without_a_granted_priority() {
        let mut f = Feed::new();
        let mut g = RtGuard::new(0, 10, false);
        assert_eq!(f.run(&mut g, 5, 100, Some(100)), vec![]);
        let mut g = RtGuard::new(0, 0, true);
        assert_eq!(f.run(&mut g, 5, 100, Some(100)), vec![]);
        assert_eq!(g.report(0)["policy"], "SCHED_OTHER");
    }

    #[test]
    fn a_large_share_under_pressure_demotes_and_calm_returns() {
        let mut f = Feed::new();
        let mut g = RtGuard::new(0, 10, true);
        // The first window has no pressure reading to compare with.
        assert!(f.run(&mut g, 1, 40, Some(50)).is_empty());
        // 40 % of the core with nobody waiting: the loop harms no one.
        assert!(f.run(&mut g, 10, 40, Some(0)).is_empty());
        // 20 % under heavy pressure: too small a share to be the cause.
        assert!(f.run(&mut g, 10, 20, Some(80)).is_empty());
        // 40 % under pressure, not yet sustained, then a quiet window.
        assert!(f.run(&mut g, BUSY_WINDOWS - 1, 40, Some(30)).is_empty());
        assert!(f.run(&mut g, 1, 40, Some(0)).is_empty());
        assert_eq!(
            f.run(&mut g, BUSY_WINDOWS, 40, Some(30)),
            vec![Switch::Demote]
        );
        assert_eq!(g.report(f.t)["policy"], "SCHED_OTHER");
        // Still a large share, or a small one under pressure: not calm.
        assert!(f.run(&mut g, 20, 40, Some(0)).is_empty());
        assert!(f.run(&mut g, 20, 20, Some(30)).is_empty());
        // Nine calm windows are not enough, the tenth is.
        assert!(f.run(&mut g, CALM_WINDOWS - 1, 20, Some(2)).is_empty());
        assert_eq!(f.run(&mut g, 1, 5, Some(60)), vec![Switch::Promote]);
        let r = g.report(f.t);
        assert_eq!(r["policy"], "SCHED_FIFO 10");
        assert_eq!(r["demotions"], 1);
        assert_eq!(r["promotions"], 1);
        assert_eq!(r["demoted_ns"], (40 + CALM_WINDOWS as u64) * 10 * MS);
    }

    #[test]
    fn without_psi_only_saturation_demotes() {
        let mut f = Feed::new();
        let mut g = RtGuard::new(0, 10, true);
        assert!(f.run(&mut g, 10, 45, None).is_empty());
        assert_eq!(f.run(&mut g, BUSY_WINDOWS, 60, None), vec![Switch::Demote]);
        assert!(f.run(&mut g, 5, 30, None).is_empty());
        assert_eq!(f.run(&mut g, CALM_WINDOWS, 20, None), vec![Switch::Promote]);
    }

    #[test]
    fn a_long_idle_wait_counts_as_the_calm_windows_it_spans() {
        let mut f = Feed::new();
        let mut g = RtGuard::new(0, 10, true);
        assert_eq!(
            f.run(&mut g, BUSY_WINDOWS + 1, 100, None),
            vec![Switch::Demote]
        );
        // Blocked in epoll for 95 ms, then a short turn: not yet.
        let t = f.t + 95 * MS;
        assert_eq!(g.account(t, 10_000, || None), None);
        // Another 50 ms: 9 + 5 windows of calm.
        let t = t + 50 * MS;
        assert_eq!(g.account(t, 10_000, || None), Some(Switch::Promote));
    }

    #[test]
    fn a_busy_window_resets_the_calm_count() {
        let mut f = Feed::new();
        let mut g = RtGuard::new(0, 10, true);
        assert_eq!(f.run(&mut g, BUSY_WINDOWS, 90, None), vec![Switch::Demote]);
        assert!(f.run(&mut g, CALM_WINDOWS - 1, 0, None).is_empty());
        assert!(f.run(&mut g, 1, 30, None).is_empty());
        assert!(
            f.run(&mut g, CALM_WINDOWS - 1, 0, None).is_empty(),
            "restarted"
        );
    }

    #[test]
    fn flapping_doubles_the_calm_needed_up_to_its_cap() {
        let mut f = Feed::new();
        let mut g = RtGuard::new(0, 10, true);
        let mut needed = CALM_WINDOWS;
        for round in 0..6 {
            let made = f.run(&mut g, BUSY_WINDOWS, 100, None);
            assert_eq!(made, vec![Switch::Demote], "round {round}");
            assert_eq!(g.calm_needed(), needed, "round {round}");
            let made = f.run(&mut g, needed, 0, None);
            assert_eq!(made, vec![Switch::Promote], "round {round}");
            needed = (needed * 2).min(MAX_CALM_WINDOWS);
        }
        assert_eq!(g.calm_needed(), MAX_CALM_WINDOWS);
        // A demotion long after the last promotion starts over.
        assert!(f.run(&mut g, 200, 10, None).is_empty());
        let _ = f.run(&mut g, BUSY_WINDOWS, 100, None);
        assert_eq!(g.calm_needed(), CALM_WINDOWS);
    }

    #[test]
    fn a_refused_switch_is_counted_and_the_state_kept() {
        let mut g = RtGuard::new(0, 10, true);
        let mut t = 0;
        let mut busy_window = |g: &mut RtGuard| {
            t += WINDOW_NS;
            (t, g.account(t, WINDOW_NS, || None))
        };
        for _ in 1..BUSY_WINDOWS {
            assert_eq!(busy_window(&mut g).1, None);
        }
        let (now, s) = busy_window(&mut g);
        let s = s.expect("demote");
        g.switched(now, s, Err(io::Error::from_raw_os_error(libc::EPERM)));
        let r = g.report(now);
        assert_eq!(r["policy"], "SCHED_FIFO 10");
        assert_eq!(r["errors"], 1);
        assert!(r["last_error"].as_str().unwrap().starts_with("Demote"));
        // Asked again after the next busy windows.
        for _ in 1..BUSY_WINDOWS {
            assert_eq!(busy_window(&mut g).1, None);
        }
        assert_eq!(busy_window(&mut g).1, Some(Switch::Demote));
    }

    #[test]
    fn psi_some_total_is_parsed() {
        let text = "some avg10=4.52 avg60=15.40 avg300=13.94 total=1925028488\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_some_total(text), Some(1_925_028_488));
        assert_eq!(parse_some_total("full total=3\n"), None);
        assert_eq!(parse_some_total("some avg10=1.0 total=x\n"), None);
    }
}
