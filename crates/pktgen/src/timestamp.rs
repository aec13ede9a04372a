//! Clocks and waiting.
//!
//! Payload timestamps and receive timestamps are CLOCK_REALTIME (the clock
//! the kernel's software receive timestamps use), so a one-way latency is a
//! plain difference when sender and receiver share the host clock. The
//! send schedule runs on CLOCK_MONOTONIC so a clock step during a run does
//! not bend it.

use nix::errno::Errno;
use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, clock_nanosleep, ClockId, ClockNanosleepFlags};

/// Nanoseconds of a `timespec`-like pair, clamped at 0.
pub fn ns_of(sec: i64, nsec: i64) -> u64 {
    (sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(nsec.max(0) as u64)
}

fn read(clock: ClockId) -> u64 {
    // Both clocks always exist on Linux; the call cannot fail with valid ids.
    let t = clock_gettime(clock).expect("clock_gettime on a standard clock");
    ns_of(t.tv_sec(), t.tv_nsec())
}

/// CLOCK_REALTIME in ns since the epoch (vDSO, some tens of ns).
#[inline]
pub fn realtime_ns() -> u64 {
    read(ClockId::CLOCK_REALTIME)
}

/// CLOCK_MONOTONIC in ns.
#[inline]
pub fn monotonic_ns() -> u64 {
    read(ClockId::CLOCK_MONOTONIC)
}

fn sleep_until(clock: ClockId, ns: u64) {
    let ts = TimeSpec::new((ns / 1_000_000_000) as _, (ns % 1_000_000_000) as _);
    loop {
        match clock_nanosleep(clock, ClockNanosleepFlags::TIMER_ABSTIME, &ts) {
            Err(Errno::EINTR) => continue,
            _ => return,
        }
    }
}

/// Wait until `clock` reads at least `target` ns: sleep while more than
/// `spin_ns` remain, then busy-wait the rest (timer wakeups are late by
/// tens of µs; spinning is not). Returns the clock's reading at the end.
pub fn wait_until(clock: ClockId, target: u64, spin_ns: u64) -> u64 {
    let mut now = read(clock);
    if target > now.saturating_add(spin_ns) {
        sleep_until(clock, target - spin_ns);
        now = read(clock);
    }
    while now < target {
        std::hint::spin_loop();
        now = read(clock);
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_at_least_until_the_target() {
        for spin in [0, 200_000, 10_000_000] {
            let target = monotonic_ns() + 2_000_000;
            let end = wait_until(ClockId::CLOCK_MONOTONIC, target, spin);
            assert!(end >= target);
            assert!(monotonic_ns() >= target);
        }
        // A target in the past returns at once.
        let now = realtime_ns();
        assert!(wait_until(ClockId::CLOCK_REALTIME, now - 1_000_000, 100_000) >= now);
    }

    #[test]
    fn ns_of_clamps() {
        assert_eq!(ns_of(1, 5), 1_000_000_005);
        assert_eq!(ns_of(-1, 5), 5);
        assert_eq!(ns_of(i64::MAX, 0), u64::MAX);
    }
}
