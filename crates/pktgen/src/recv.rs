//! The receive loop: epoll over the sockets and a signalfd, recvmmsg in
//! batches, every datagram fed to the [`Accounting`].
//!
//! The loop wakes at least every 10 ms (epoll timeout; with `--busy-poll`
//! it never sleeps) to check the stop conditions: SIGINT/SIGTERM, `--duration`, `--idle-stop` after the last
//! datagram. A socket that is ready is read at most [`ROUNDS`] times per
//! wakeup so one busy socket cannot starve the others or the checks.

use std::os::fd::AsFd;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::account::{Accounting, IntervalSink};
use crate::rxsock::{RxBatch, RxSocket};
use crate::timestamp::{monotonic_ns, realtime_ns};

/// recvmmsg calls per ready socket per wakeup.
const ROUNDS: usize = 16;
/// Longest wait without checking the stop conditions, ms.
const TICK_MS: u16 = 10;
/// Intervals stay open this long past their end for late sockets.
pub const GRACE_NS: u64 = 50_000_000;
/// epoll data of the signalfd.
const SIGNAL_TOKEN: u64 = u64::MAX;

/// What the loop needs.
pub struct LoopConfig {
    /// Hard cap, ns (from when the loop starts).
    pub duration_ns: Option<u64>,
    /// Stop this long after the last datagram.
    pub idle_ns: u64,
    /// Datagrams per recvmmsg.
    pub batch: usize,
    /// Never sleep in epoll_wait: spin.
    pub busy_poll: bool,
}

/// What the loop saw besides the accounting.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Datagrams without a kernel timestamp (stamped after recvmmsg).
    pub userspace_timestamps: u64,
    /// Why it stopped: "signal", "duration", "idle".
    pub stop_reason: &'static str,
    /// Loop run time, ns.
    pub run_ns: u64,
}

/// Block SIGINT and SIGTERM and return a signalfd for them. Done before
/// the sockets exist, so a signal at any point ends the run cleanly.
pub fn signals() -> Result<SignalFd, String> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGINT);
    mask.add(Signal::SIGTERM);
    mask.thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("cannot create a signalfd: {e}"))
}

/// Receive until a stop condition.
pub fn run(
    sockets: &mut [RxSocket],
    signal_fd: &SignalFd,
    cfg: &LoopConfig,
    acc: &mut Accounting,
    sink: &mut dyn IntervalSink,
) -> Result<Outcome, String> {
    let epoll =
        Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| format!("epoll_create: {e}"))?;
    for (i, s) in sockets.iter().enumerate() {
        epoll
            .add(
                s.fd().as_fd(),
                EpollEvent::new(EpollFlags::EPOLLIN, i as u64),
            )
            .map_err(|e| format!("epoll_ctl: {e}"))?;
    }
    epoll
        .add(
            signal_fd.as_fd(),
            EpollEvent::new(EpollFlags::EPOLLIN, SIGNAL_TOKEN),
        )
        .map_err(|e| format!("epoll_ctl: {e}"))?;

    let mut batch = RxBatch::new(cfg.batch);
    let mut events = vec![EpollEvent::empty(); sockets.len() + 1];
    let mut out = Outcome::default();
    let start = monotonic_ns();
    let mut last_rx: Option<u64> = None;
    loop {
        let timeout = if cfg.busy_poll { 0 } else { TICK_MS };
        let n = match epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(format!("epoll_wait: {e}")),
        };
        for ev in &events[..n] {
            if ev.data() == SIGNAL_TOKEN {
                if let Ok(Some(info)) = signal_fd.read_signal() {
                    let name = Signal::try_from(info.ssi_signo as i32)
                        .map(Signal::as_str)
                        .unwrap_or("signal");
                    crate::log!("{name}: stopping");
                }
                out.stop_reason = "signal";
                continue;
            }
            let sock = &mut sockets[ev.data() as usize];
            for _ in 0..ROUNDS {
                let got = batch
                    .recv(sock)
                    .map_err(|e| format!("recvmmsg on {}: {e}", sock.addr))?;
                if got == 0 {
                    break;
                }
                let now = realtime_ns();
                last_rx = Some(monotonic_ns());
                for i in 0..got {
                    let (data, meta) = batch.get(i);
                    if let Some(d) = meta.drops {
                        sock.drops_seen = sock.drops_seen.max(d);
                    }
                    let rx_ns = meta.rx_ns.unwrap_or_else(|| {
                        out.userspace_timestamps += 1;
                        now
                    });
                    acc.packet(data, meta.len, rx_ns, sock.overhead, sink);
                }
                if got < cfg.batch {
                    break;
                }
            }
        }
        let now = monotonic_ns();
        if !out.stop_reason.is_empty() {
            break;
        }
        if cfg.duration_ns.is_some_and(|d| now - start >= d) {
            out.stop_reason = "duration";
            break;
        }
        if last_rx.is_some_and(|t| now - t >= cfg.idle_ns) {
            out.stop_reason = "idle";
            break;
        }
    }
    out.run_ns = monotonic_ns() - start;
    Ok(out)
}
