//! `fidelnet-linkd`: the link-engine daemon of fidelnet.
//!
//! One daemon per emulation run. It owns both endpoints (TAP devices) of
//! every engine link and moves each frame from one endpoint to the other
//! through a [`link_core::Direction`], which decides when (and whether) it
//! leaves. It is driven over a unix control socket, one JSON object per
//! line. See `docs/linkd.md` for the protocol and the design.

mod bpf;
mod control;
mod daemon;
mod endpoint;
mod gso;
mod ingress;
mod opener;
mod ops;
mod packets;
mod pool;
mod protocol;
mod rtguard;
mod socket;
mod state;
mod tcx;
mod timing;
mod udp;
mod vclock;
mod xsk;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::daemon::{Config, Daemon};
use crate::opener::KernelOpener;
use crate::pool::Pool;
use crate::vclock::VClock;

/// Write one line to stderr, prefixed with the program's name. A broken
/// stderr is ignored: logging must never stop the daemon.
pub(crate) fn log_line(args: fmt::Arguments<'_>) {
    if cfg!(test) {
        // Captured by the test harness, unlike a direct write.
        eprintln!("fidelnet-linkd: {args}");
    } else {
        let _ = writeln!(std::io::stderr().lock(), "fidelnet-linkd: {args}");
    }
}

/// Log one event: `log!("link {name:?} added")`.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => { $crate::log_line(format_args!($($arg)*)) };
}

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "fidelnet-linkd",
    version,
    about = "fidelnet link-engine daemon: moves frames between TAP endpoints through link-core",
    long_about = None
)]
struct Cli {
    /// Path of the control socket to create (mode 0600). The daemon refuses
    /// to start if it exists. It appears only once the daemon accepts
    /// connections, and is removed at exit.
    #[arg(long, value_name = "PATH")]
    control: PathBuf,

    /// PID of the process that started the daemon. The daemon exits at once
    /// if that is not its parent (the parent is already gone), and receives
    /// SIGTERM (a clean shutdown) when the parent dies.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(i32).range(1..))]
    parent_pid: Option<i32>,

    /// Frames read from one endpoint per wakeup before serving the others.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    batch: u32,

    /// Spin (poll without sleeping) for at most this many microseconds
    /// before each departure: the timer is armed ahead of the deadline by the
    /// measured timer wake latency, capped here (0: always sleep on the
    /// timer). Trades CPU for punctual departures.
    #[arg(long, value_name = "US", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    spin_us: u64,

    /// The share of every 10 ms that spinning may take, in percent; past it
    /// the loop sleeps on the timer until the window ends, so that the engine
    /// never holds its core.
    #[arg(long, value_name = "PCT", default_value_t = 20,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    spin_budget: u8,

    /// Run the event loop at this real-time priority (SCHED_FIFO, 1-99), so
    /// that a departure's timer wakes it ahead of ordinary processes; 0 keeps
    /// the normal policy. A refusal (no CAP_SYS_NICE, a cgroup without a
    /// real-time budget) is logged and the daemon runs on at normal priority:
    /// the caller reads the policy actually in force from the kernel. When
    /// the loop takes a large share of three 10 ms windows in a row while
    /// others wait for the CPU (/proc/pressure/cpu), it leaves SCHED_FIFO,
    /// and returns after calm windows (stats: engine.realtime), so that it
    /// never starves what shares its core.
    #[arg(long, value_name = "PRIO", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=99))]
    realtime_priority: u8,

    /// Segmentation offloads at the endpoints: TAP devices with virtio-net
    /// headers that take TCP and UDP super-frames of up to 64 KiB from their
    /// stack (TSO, USO, checksum). A direction that shapes or impairs cuts
    /// them into wire packets; a perfect or delay-only one passes them whole.
    #[arg(long, value_name = "on|off", default_value = "on",
          value_parser = ["on", "off"])]
    offload: String,

    /// On a direction that only shapes (a rate, a drop-tail queue, a delay),
    /// cut super-frames into chunks of as many wire packets as the rate
    /// sends in this many microseconds, each charged and queued as those
    /// packets and released when the last of them would have finished; a
    /// chunk delays its first packet by at most this. 0: one wire packet at
    /// a time.
    #[arg(long, value_name = "US", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    chunk_us: u64,

    /// Engine loops, one thread each. With more than one, the main thread
    /// keeps the control socket and carries no link; each new link goes to
    /// the loop with the fewest links and stays there (a link is never
    /// reordered across threads). More loops help only where there are
    /// cores for them beside the traffic's own processes and softirqs.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: u16,

    /// Run every link in the virtual time of this clock page (a dilated run:
    /// the same page the nodes' clock shim reads). Rates, delays and lateness
    /// are then per virtual second; the page's TDF may change while running
    /// (send a `clock` request after a change so that every loop re-arms).
    #[arg(long, value_name = "PATH")]
    clock_page: Option<PathBuf>,

    /// Queue limit, in packets, for a direction that sets neither
    /// queue_packets nor queue_bytes (0: leave such queues unlimited).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    default_queue_packets: u32,
}

fn main() -> ExitCode {
    // Exit code 2 on a bad command line (clap's convention), 0 for --help.
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            log!("fatal: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    // Termination signals become events in the loop (clean shutdown). They
    // are blocked before anything that needs cleaning up exists.
    let mut mask = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        mask.add(sig);
    }
    mask.thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("cannot create a signalfd: {e}"))?;

    if let Some(parent) = cli.parent_pid {
        nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)
            .map_err(|e| format!("cannot set the parent-death signal: {e}"))?;
        // Checked after the prctl: a parent that dies from here on sends
        // SIGTERM, one that died before shows in getppid.
        let actual = nix::unistd::getppid().as_raw();
        if actual != parent {
            return Err(format!(
                "--parent-pid {parent} is not the parent (getppid() = {actual}); \
                 it has probably exited already"
            ));
        }
    }
    let mut granted = false;
    if cli.realtime_priority > 0 {
        match rtguard::set_policy(cli.realtime_priority) {
            Ok(()) => {
                granted = true;
                log!(
                    "running at real-time priority {} (SCHED_FIFO)",
                    cli.realtime_priority
                );
            }
            Err(e) => log!(
                "real-time priority {} refused ({e}); running at normal priority",
                cli.realtime_priority
            ),
        }
    }
    // Timer expiries are not deferred to coalesce wakeups.
    nix::sys::prctl::set_timerslack(1).map_err(|e| format!("cannot set the timer slack: {e}"))?;

    let opener = KernelOpener::new(cli.offload == "on")
        .map_err(|e| format!("cannot open the own network namespace: {e}"))?;
    let config = Config {
        batch: cli.batch as usize,
        spin_ns: cli.spin_us * 1000,
        spin_budget_pct: cli.spin_budget,
        default_queue_packets: (cli.default_queue_packets > 0).then_some(cli.default_queue_packets),
        realtime: (cli.realtime_priority, granted),
        chunk_ns: cli.chunk_us * 1000,
    };
    let clock = match &cli.clock_page {
        Some(p) => VClock::open(p).map_err(|e| format!("--clock-page {}: {e}", p.display()))?,
        None => VClock::real(),
    };
    let (listener, mut socket_file) = socket::bind(&cli.control)?;
    let mut daemon = Daemon::new(opener, config, Some(listener), Some(signals))
        .map_err(|e| format!("cannot set up the event loop: {e}"))?
        .with_clock(clock.clone());
    if cli.threads > 1 {
        let offload = cli.offload == "on";
        let make = move || {
            KernelOpener::new(offload)
                .map_err(|e| format!("cannot open the own network namespace: {e}"))
        };
        let pool = Pool::start(cli.threads.into(), config, &clock, make)
            .map_err(|e| format!("cannot start the engine loops: {e}"))?;
        daemon = daemon.with_pool(pool);
    }
    socket_file.publish()?;
    log!(
        "ready: pid {}, control socket {}, {} engine loop(s), batch {}, spin {} us (budget {} %)",
        std::process::id(),
        cli.control.display(),
        cli.threads,
        cli.batch,
        cli.spin_us,
        cli.spin_budget
    );
    let result = daemon.run().map_err(|e| format!("event loop failed: {e}"));
    let reason = daemon.shutdown_reason().unwrap_or("error").to_owned();
    drop(daemon);
    drop(socket_file);
    result?;
    log!("exiting ({reason})");
    Ok(())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_control;
#[cfg(test)]
mod tests_pool;
#[cfg(test)]
mod tests_state;
