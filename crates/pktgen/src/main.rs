//! `fidelnet-pktgen`: fidelnet's packet generator and timestamping
//! receiver.
//!
//! `send` puts UDP packets on an absolute schedule (cbr, burst, poisson),
//! each carrying flow id, sequence number and send timestamp; `recv`
//! timestamps them in the kernel and reports loss, duplicates, reordering,
//! one-way latency and a rate/latency series. Both write one JSON report.
//! Exit status: 0 ok, 2 bad command line, 3 the sender missed its rate
//! (report still written), 1 any other error. See `docs/pktgen.md`.

mod account;
mod cli;
mod cpu;
mod ethtool;
mod frame;
#[cfg(test)]
mod fuzz;
mod hist;
mod mmsg;
mod output;
mod packet;
mod payload;
mod recv;
mod route;
mod rxsock;
mod schedule;
mod send;
mod timestamp;
mod udp;

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

use crate::account::{Accounting, IntervalSink};
use crate::cli::{Cli, Command, Mode, RecvArgs, SendArgs};
use crate::output::{HdrLog, SendFlow, SendReport, Sink};
use crate::schedule::Pattern;
use crate::send::Transmit;

/// Write one line to stderr, prefixed with the program's name.
pub(crate) fn log_line(args: fmt::Arguments<'_>) {
    if cfg!(test) {
        eprintln!("fidelnet-pktgen: {args}");
    } else {
        let _ = writeln!(std::io::stderr().lock(), "fidelnet-pktgen: {args}");
    }
}

/// Log one line: `log!("bound {addr}")`.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => { $crate::log_line(format_args!($($arg)*)) };
}

/// Why a run failed, and so its exit status.
enum Failure {
    /// Bad input the parser could not see (status 2).
    Usage(String),
    /// Anything else (status 1).
    Runtime(String),
}

/// Exit status when the sender missed its rate.
const RATE_NOT_REACHED: u8 = 3;

fn main() -> ExitCode {
    // clap exits with 2 on a bad command line, 0 for --help/--version.
    let cli = Cli::try_parse().unwrap_or_else(|e| e.exit());
    let result = match &cli.command {
        Command::Send(a) => send_main(a),
        Command::Recv(a) => recv_main(a),
    };
    match result {
        Ok(code) => code,
        Err(Failure::Usage(m)) => {
            log!("{m}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(m)) => {
            log!("fatal: {m}");
            ExitCode::FAILURE
        }
    }
}

fn runtime(m: String) -> Failure {
    Failure::Runtime(m)
}

/// A seed from the clock, for runs that give none.
fn clock_seed() -> u64 {
    let mut s = link_core::rng::SplitMix64::new(
        timestamp::realtime_ns() ^ u64::from(std::process::id()) << 32,
    );
    s.next_u64()
}

fn errno_name(errno: i32) -> String {
    let e = nix::errno::Errno::from_raw(errno);
    if e == nix::errno::Errno::UnknownErrno {
        format!("errno {errno}")
    } else {
        format!("{e:?}")
    }
}

/// `--mode gso` keeps frames separate on the link only if the kernel splits
/// each message before the egress device, i.e. the device does not take
/// UDP GSO super-packets itself (`tx-udp-segmentation` off). Refuse
/// otherwise; go on with a warning if that cannot be found out.
fn gso_check(a: &SendArgs) -> Result<(), Failure> {
    for dst in &a.flows {
        let dev = match route::egress_device(dst.ip()) {
            Ok(d) => d,
            Err(e) => {
                log!("--mode gso: cannot check the device towards {dst} ({e}); going on");
                continue;
            }
        };
        match ethtool::udp_segmentation(&dev) {
            Ok(false) => {}
            Ok(true) => {
                return Err(Failure::Usage(format!(
                    "--mode gso: {dev} (towards {dst}) has tx-udp-segmentation on, so it would \
                     carry each message as one super-packet and the frames would only be split \
                     at the receiving socket; turn it off (ethtool -K {dev} tx-udp-segmentation \
                     off) or use --mode udp"
                )))
            }
            Err(e) => log!("--mode gso: cannot read the features of {dev} ({e}); going on"),
        }
    }
    Ok(())
}

fn send_main(a: &SendArgs) -> Result<ExitCode, Failure> {
    a.validate().map_err(Failure::Usage)?;
    if let Some(c) = a.cpu {
        cpu::pin(c as usize).map_err(Failure::Usage)?;
    }
    if a.mode == Mode::Gso {
        gso_check(a)?;
    }
    let sink = Sink::open(&a.json, "--json").map_err(runtime)?;
    let seed = a.seed.unwrap_or_else(clock_seed);
    let payload_len: Vec<usize> = a.flows.iter().map(|f| a.payload_len(f)).collect();
    let batch = a.batch as usize;
    let mut tx: Box<dyn Transmit> = match a.mode {
        Mode::Udp | Mode::Gso => Box::new(
            udp::Udp::new(
                &a.flows,
                &payload_len,
                batch,
                a.src_port,
                a.mode == Mode::Gso,
            )
            .map_err(runtime)?,
        ),
        Mode::Packet => Box::new(
            packet::Packet::new(&a.flows, a.size, batch, a.src_port, a.dst_mac).map_err(runtime)?,
        ),
    };
    // Timer expiries are not deferred to coalesce wakeups.
    let _ = nix::sys::prctl::set_timerslack(1);
    let pattern = Pattern::from(a.pattern);
    let cfg = send::LoopConfig {
        flows: a.flows.len(),
        rate: a.rate,
        duration_ns: (a.duration * 1e9).round() as u64,
        pattern,
        burst: a.burst,
        seed,
        batch,
        spin_ns: a.spin_us * 1000,
        start_at: a.start_at,
    };
    let out = send::run(tx.as_mut(), &cfg).map_err(runtime)?;
    drop(tx);
    let (user, sys) = cpu::times();
    let elapsed_s = out.elapsed_ns as f64 * 1e-9;
    let achieved = out.sent as f64 / a.duration.max(elapsed_s);
    // Against the schedule's own rate: the requested one for cbr and
    // burst, a random one around it for poisson.
    let scheduled = out.sent + out.send_errors + out.backlog;
    let scheduled_pps = scheduled as f64 / a.duration;
    let rate_reached = achieved >= 0.99 * scheduled_pps && out.backlog == 0;
    let report = SendReport {
        role: "send",
        version: env!("CARGO_PKG_VERSION"),
        flows: a
            .flows
            .iter()
            .zip(&out.flow_sent)
            .enumerate()
            .map(|(id, (dst, &sent))| SendFlow {
                id: id as u16,
                dst: dst.to_string(),
                sent,
                payload_bytes: payload_len[id],
            })
            .collect(),
        sent: out.sent,
        send_errors: out.send_errors,
        requested_pps: a.rate,
        achieved_pps: achieved,
        rate_reached,
        size: a.size,
        payload_bytes: payload_len[0],
        pattern: pattern.name(),
        burst: (pattern == Pattern::Burst).then_some(a.burst),
        seed,
        duration_s: a.duration,
        start_ns: out.start_ns,
        first_send_ns: out.first_send_ns,
        last_send_ns: out.last_send_ns,
        behind_max_ns: out.behind_max_ns,
        cpu: a.cpu,
        batch: a.batch,
        user_cpu_s: user,
        sys_cpu_s: sys,
        mode: match a.mode {
            Mode::Udp => "udp",
            Mode::Gso => "gso",
            Mode::Packet => "packet",
        },
        scheduled,
        scheduled_pps,
        backlog: out.backlog,
        calls: out.calls,
        errors: out
            .errors
            .iter()
            .map(|&(no, n)| (errno_name(no), n))
            .collect::<BTreeMap<_, _>>(),
        elapsed_s,
    };
    sink.write(&report).map_err(runtime)?;
    if rate_reached {
        Ok(ExitCode::SUCCESS)
    } else {
        log!("requested {} pps, reached {:.0} pps", a.rate, achieved);
        Ok(ExitCode::from(RATE_NOT_REACHED))
    }
}

/// Create `path` with `text`, atomically (written under a temporary name,
/// then renamed), so whoever sees it sees all of it.
fn publish(path: &Path, text: &str) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    fs::write(&tmp, text)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = fs::remove_file(&tmp);
            format!("--ready {}: {e}", path.display())
        })
}

fn recv_main(a: &RecvArgs) -> Result<ExitCode, Failure> {
    let signal_fd = recv::signals().map_err(runtime)?;
    if let Some(c) = a.cpu {
        cpu::pin(c as usize).map_err(Failure::Usage)?;
    }
    let sink = Sink::open(&a.json, "--json").map_err(runtime)?;
    let mut hdr_log = a
        .hdr_log
        .as_deref()
        .map(HdrLog::create)
        .transpose()
        .map_err(runtime)?;
    let mut sockets = a
        .binds
        .iter()
        .map(|&b| rxsock::RxSocket::open(b, a.rcvbuf as usize))
        .collect::<Result<Vec<_>, _>>()
        .map_err(runtime)?;
    let all_kernel = sockets.iter().all(|s| s.timestamping);
    if let Some(ready) = &a.ready {
        let binds: Vec<String> = a.binds.iter().map(|b| format!("\"{b}\"")).collect();
        publish(
            ready,
            &format!(
                "{{\"pid\":{},\"bind\":[{}]}}\n",
                std::process::id(),
                binds.join(",")
            ),
        )
        .map_err(runtime)?;
    }
    log!(
        "receiving on {} (pid {})",
        a.binds
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        std::process::id()
    );

    let width_ns = a.interval_ms * 1_000_000;
    let mut acc = Accounting::new(width_ns, recv::GRACE_NS.max(width_ns / 2));
    acc.keep_worst(a.worst as usize);
    let cfg = recv::LoopConfig {
        duration_ns: a.duration.map(|d| (d * 1e9).round() as u64),
        idle_ns: (a.idle_stop * 1e9).round() as u64,
        batch: a.batch as usize,
        busy_poll: a.busy_poll,
    };
    let mut no_log = ();
    let log_sink: &mut dyn IntervalSink = match hdr_log.as_mut() {
        Some(l) => l,
        None => &mut no_log,
    };
    let out = recv::run(&mut sockets, &signal_fd, &cfg, &mut acc, log_sink).map_err(runtime)?;
    acc.finish(log_sink);

    let mut report = output::recv_report(&acc, a.interval_ms);
    report.userspace_timestamps = out.userspace_timestamps;
    if !all_kernel {
        report.timestamp_source = "userspace";
    }
    report.rcvbuf = sockets.iter().map(|s| s.rcvbuf()).min().unwrap_or(0);
    report.socket_drops = sockets
        .iter()
        .map(|s| u64::from(s.drops_now().unwrap_or(0).max(s.drops_seen)))
        .sum();
    report.cpu = a.cpu;
    (report.user_cpu_s, report.sys_cpu_s) = cpu::times();
    report.stop_reason = out.stop_reason;
    report.run_s = out.run_ns as f64 * 1e-9;
    report.binds = a.binds.iter().map(|b| b.to_string()).collect();
    let log_result = hdr_log
        .map(|l| l.finish(timestamp::realtime_ns()))
        .transpose();
    sink.write(&report).map_err(runtime)?;
    log_result.map_err(runtime)?;
    log!(
        "received {} ({} unique, {} malformed, {} socket drops), stopped by {}",
        report.received,
        report.unique,
        report.malformed.total,
        report.socket_drops,
        report.stop_reason
    );
    Ok(ExitCode::SUCCESS)
}
