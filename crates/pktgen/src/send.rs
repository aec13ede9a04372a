//! The send loop: departures on an absolute schedule, batched.
//!
//! Each turn reads CLOCK_MONOTONIC, takes every packet whose departure has
//! come (at most `batch` per flow), and hands each flow's share to the
//! [`Transmit`] in one call, stamped with one CLOCK_REALTIME reading taken
//! just before that call. When nothing is due it waits for the next
//! departure (sleep, then spin the last `spin_ns`). Packets go round-robin:
//! packet k is flow `k % N`, sequence number `k / N`.
//!
//! The loop ends once every departure before `duration` has been attempted,
//! or at `duration + TAIL_GRACE_NS` if it is still behind then; whatever is
//! still due at that point is the `backlog`.

use std::collections::BTreeSet;
use std::io;

use nix::errno::Errno;
use nix::time::ClockId;

use crate::schedule::{Pattern, Schedule};
use crate::timestamp::{monotonic_ns, realtime_ns, wait_until};

/// How long past `duration` a late loop may go on catching up.
pub const TAIL_GRACE_NS: u64 = 10_000_000;

/// Spin for the last 200 µs before `--start-at`.
const START_SPIN_NS: u64 = 200_000;

/// Puts packets on the wire.
///
/// Each flow has `batch` prebuilt packets; a turn stamps the first
/// `count` of them ([`prepare`](Self::prepare)) and sends them with one or
/// more [`submit`](Self::submit) calls.
pub trait Transmit {
    /// Stamp packets `0..count` of `flow` (at most the batch size) with
    /// sequence numbers `first_seq..first_seq + count` and payload
    /// timestamp `ts_ns`.
    fn prepare(&mut self, flow: usize, first_seq: u32, count: usize, ts_ns: u64);

    /// Send prepared packets `from..to` of `flow` in one call. `Ok(n)`:
    /// packets `from..from + n` left (`n < to - from`: packet `from + n`
    /// did not, for a reason the call does not tell); `Err`: packet `from`
    /// did not leave, nor any after it.
    fn submit(&mut self, flow: usize, from: usize, to: usize) -> io::Result<usize>;
}

/// What the loop needs to know.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Number of flows.
    pub flows: usize,
    /// Total packets per second.
    pub rate: f64,
    /// Departures are scheduled in `[0, duration_ns)`.
    pub duration_ns: u64,
    /// Departure pattern.
    pub pattern: Pattern,
    /// Burst size (burst pattern).
    pub burst: u64,
    /// Poisson seed.
    pub seed: u64,
    /// Most packets per flow per call.
    pub batch: usize,
    /// Spin instead of sleeping when the next departure is this close.
    pub spin_ns: u64,
    /// CLOCK_REALTIME to wait for before starting.
    pub start_at: Option<u64>,
}

/// What happened.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Packets sent, per flow.
    pub flow_sent: Vec<u64>,
    /// Packets sent in all.
    pub sent: u64,
    /// Packets not sent because the call sent fewer or failed transiently.
    pub send_errors: u64,
    /// Departures before `duration` never attempted (the loop was behind).
    pub backlog: u64,
    /// CLOCK_REALTIME at the schedule's origin.
    pub start_ns: u64,
    /// Payload timestamp of the first packet sent.
    pub first_send_ns: Option<u64>,
    /// Payload timestamp of the last packet sent.
    pub last_send_ns: Option<u64>,
    /// Most the loop fell behind its schedule (now − oldest due departure).
    pub behind_max_ns: u64,
    /// CLOCK_MONOTONIC from the origin to the end of the last send call.
    pub elapsed_ns: u64,
    /// Transmit calls made.
    pub calls: u64,
    /// Transient errors, by errno, with counts of failed calls.
    pub errors: Vec<(i32, u64)>,
}

/// Errors that drop the packets of one call but do not stop the run: no
/// buffer space, an ICMP error reported on a connected socket, a route or
/// neighbour that is (momentarily) missing, a firewall drop.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(
            Errno::EAGAIN
                | Errno::ENOBUFS
                | Errno::ENOMEM
                | Errno::ECONNREFUSED
                | Errno::EHOSTUNREACH
                | Errno::ENETUNREACH
                | Errno::ENETDOWN
                | Errno::EPERM
        )
    )
}

/// First packet index `>= from` of flow `f` among `n` flows.
fn first_of_flow(from: u64, f: u64, n: u64) -> u64 {
    from + (f + n - from % n) % n
}

/// Send the `count` prepared packets of `flow`; returns how many left.
///
/// A call that sends only some packets is followed by one for the rest
/// (the kernel does not say why it stopped). A packet the kernel refuses
/// alone (`ENOBUFS`: dropped on the way, e.g. a full backlog queue) is a
/// send error and the rest go on; any other transient error (`EAGAIN`: the
/// socket's buffer is full, ...) makes the rest of the batch send errors.
/// Every call either sends or gives up at least one packet, so this ends.
fn submit_all(
    tx: &mut dyn Transmit,
    flow: usize,
    count: usize,
    out: &mut Outcome,
    seen_errors: &mut BTreeSet<i32>,
) -> Result<u64, String> {
    let mut at = 0;
    let mut sent = 0;
    while at < count {
        out.calls += 1;
        match tx.submit(flow, at, count) {
            Ok(n) => {
                let n = n.min(count - at);
                sent += n as u64;
                at += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if transient(&e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                let lost = if errno == libc::ENOBUFS {
                    1
                } else {
                    count - at
                };
                out.send_errors += lost as u64;
                at += lost;
                if seen_errors.insert(errno) {
                    crate::log!(
                        "send error on flow {flow} ({e}); counted in send_errors, going on"
                    );
                }
                match out.errors.iter_mut().find(|(no, _)| *no == errno) {
                    Some((_, c)) => *c += 1,
                    None => out.errors.push((errno, 1)),
                }
            }
            Err(e) => return Err(format!("send on flow {flow} failed: {e}")),
        }
    }
    Ok(sent)
}

/// Run the schedule through `tx`.
pub fn run(tx: &mut dyn Transmit, cfg: &LoopConfig) -> Result<Outcome, String> {
    let n = cfg.flows as u64;
    let cap = cfg.batch as u64 * n;
    let mut sched = Schedule::new(cfg.pattern, cfg.rate, cfg.burst, cfg.seed);
    let mut out = Outcome {
        flow_sent: vec![0; cfg.flows],
        ..Outcome::default()
    };
    let mut seen_errors = BTreeSet::new();
    let end = cfg.duration_ns;
    let hard_end = end + TAIL_GRACE_NS;

    if let Some(at) = cfg.start_at {
        wait_until(ClockId::CLOCK_REALTIME, at, START_SPIN_NS);
    }
    let t0 = monotonic_ns();
    out.start_ns = realtime_ns();
    let mut next_dep = sched.next_departure();
    // Index of the next packet to send (all flows).
    let mut k: u64 = 0;

    while next_dep < end {
        let now = monotonic_ns().saturating_sub(t0);
        if now < next_dep {
            wait_until(ClockId::CLOCK_MONOTONIC, t0 + next_dep, cfg.spin_ns);
            continue;
        }
        if now >= hard_end {
            // The one drawn already, and the rest.
            out.backlog = 1 + sched.remaining_before(end);
            break;
        }
        out.behind_max_ns = out.behind_max_ns.max(now - next_dep);
        let mut due = 0;
        while due < cap && next_dep <= now && next_dep < end {
            due += 1;
            next_dep = sched.next_departure();
        }
        for f in 0..n {
            let first = first_of_flow(k, f, n);
            if first >= k + due {
                continue;
            }
            let count = ((k + due - 1 - first) / n + 1) as usize;
            let ts = realtime_ns();
            tx.prepare(f as usize, (first / n) as u32, count, ts);
            let sent = submit_all(tx, f as usize, count, &mut out, &mut seen_errors)?;
            if sent > 0 {
                out.first_send_ns.get_or_insert(ts);
                out.last_send_ns = Some(ts);
                out.sent += sent;
                out.flow_sent[f as usize] += sent;
            }
        }
        k += due;
        out.elapsed_ns = monotonic_ns().saturating_sub(t0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it is asked to send; fails calls as told.
    #[derive(Default)]
    struct Recorder {
        /// (flow, first_seq, count, ts) of every prepare.
        batches: Vec<(usize, u32, usize, u64)>,
        submits: usize,
        /// Every m-th submit sends one packet less than asked.
        short_every: Option<usize>,
        /// Every m-th submit fails with this errno.
        fail_every: Option<(usize, i32)>,
    }

    impl Transmit for Recorder {
        fn prepare(&mut self, flow: usize, seq: u32, count: usize, ts: u64) {
            self.batches.push((flow, seq, count, ts));
        }
        fn submit(&mut self, _: usize, from: usize, to: usize) -> io::Result<usize> {
            assert!(from < to && to <= self.batches.last().unwrap().2);
            self.submits += 1;
            let i = self.submits;
            if let Some((m, errno)) = self.fail_every {
                if i.is_multiple_of(m) {
                    return Err(io::Error::from_raw_os_error(errno));
                }
            }
            if self.short_every.is_some_and(|m| i.is_multiple_of(m)) {
                return Ok(to - from - 1);
            }
            Ok(to - from)
        }
    }

    fn config(flows: usize, rate: f64, duration_ns: u64) -> LoopConfig {
        LoopConfig {
            flows,
            rate,
            duration_ns,
            pattern: Pattern::Cbr,
            burst: 1,
            seed: 1,
            batch: 8,
            spin_ns: 100_000,
            start_at: None,
        }
    }

    #[test]
    fn flow_indexing() {
        assert_eq!(first_of_flow(0, 0, 3), 0);
        assert_eq!(first_of_flow(0, 2, 3), 2);
        assert_eq!(first_of_flow(4, 0, 3), 6);
        assert_eq!(first_of_flow(4, 1, 3), 4);
        assert_eq!(first_of_flow(4, 2, 3), 5);
    }

    #[test]
    fn round_robin_sequences_without_gaps() {
        let mut r = Recorder::default();
        // 3000 packets in 30 ms over three flows.
        let out = run(&mut r, &config(3, 100_000.0, 30_000_000)).unwrap();
        assert_eq!(out.sent, 3000);
        assert_eq!(out.flow_sent, vec![1000; 3]);
        assert_eq!((out.send_errors, out.backlog), (0, 0));
        let mut next = [0u32; 3];
        for &(f, seq, count, _) in &r.batches {
            assert_eq!(seq, next[f], "flow {f}");
            assert!((1..=8).contains(&count));
            next[f] += count as u32;
        }
        assert_eq!(next, [1000; 3]);
        assert!(out.first_send_ns.unwrap() >= out.start_ns);
        assert!(out.last_send_ns.unwrap() >= out.start_ns + 29_000_000);
    }

    #[test]
    fn short_calls_are_completed() {
        let mut r = Recorder {
            short_every: Some(3),
            ..Recorder::default()
        };
        let out = run(&mut r, &config(1, 50_000.0, 20_000_000)).unwrap();
        // A short call is followed by one for the rest; nothing is lost.
        assert_eq!((out.sent, out.send_errors), (1000, 0));
        assert_eq!(out.calls as usize, r.submits);
        assert!(r.submits > r.batches.len());
    }

    #[test]
    fn full_buffers_drop_the_rest_of_the_batch() {
        let mut r = Recorder {
            fail_every: Some((5, libc::EAGAIN)),
            ..Recorder::default()
        };
        let out = run(&mut r, &config(1, 50_000.0, 20_000_000)).unwrap();
        let asked: usize = r.batches.iter().map(|c| c.2).sum();
        assert_eq!(asked, 1000);
        assert_eq!(out.sent + out.send_errors, 1000);
        assert!(out.send_errors >= (r.submits / 5) as u64);
        assert_eq!(out.errors, vec![(libc::EAGAIN, (r.submits / 5) as u64)]);
    }

    #[test]
    fn a_refused_packet_is_skipped_alone() {
        let mut r = Recorder {
            fail_every: Some((4, libc::ENOBUFS)),
            ..Recorder::default()
        };
        let out = run(&mut r, &config(1, 50_000.0, 20_000_000)).unwrap();
        assert_eq!(out.send_errors, (r.submits / 4) as u64);
        assert_eq!(out.sent + out.send_errors, 1000);
    }

    #[test]
    fn a_slow_transmitter_leaves_a_backlog() {
        struct Slow;
        impl Transmit for Slow {
            fn prepare(&mut self, _: usize, _: u32, _: usize, _: u64) {}
            fn submit(&mut self, _: usize, from: usize, to: usize) -> io::Result<usize> {
                std::thread::sleep(std::time::Duration::from_millis(2));
                Ok(to - from)
            }
        }
        // 1 Mpps for 20 ms with 8 packets per 2 ms call: far behind.
        let out = run(&mut Slow, &config(1, 1e6, 20_000_000)).unwrap();
        assert!(out.backlog > 0);
        assert_eq!(out.sent + out.backlog, 20_000);
        assert!(out.behind_max_ns > 10_000_000);
    }

    #[test]
    fn start_at_waits() {
        let mut r = Recorder::default();
        let at = realtime_ns() + 20_000_000;
        let out = run(
            &mut r,
            &LoopConfig {
                start_at: Some(at),
                ..config(1, 1000.0, 5_000_000)
            },
        )
        .unwrap();
        assert!(out.start_ns >= at);
        assert_eq!(out.sent, 5);
    }
}
